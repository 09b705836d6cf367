package encoder

import (
	"context"
	"testing"

	"github.com/int8bert/int8bert/checkpoint"

	"github.com/stretchr/testify/require"
)

// TestFFNPaddedStride: with an intermediate width a multiple of 4096, a
// static INT8 pass keeps FFN2's u8 input (FFN1's requantized output) at a
// padded row stride, and its outputs are bit-identical to the same pass
// with the rows packed.
func TestFFNPaddedStride(t *testing.T) {
	c := tinyConfig()
	c.Intermediate, c.Layers = 4096, 2
	src := randomSource(c, false)
	m, err := newModel(c, NewLoader(src), BERTNames(""), testSelector(t), Options{})
	require.NoError(t, err)
	t.Cleanup(func() { m.Close() })
	tm := &TaskModel{Family: &Family{Name: "test", Names: BERTNames}, Task: TaskBase, Encoder: m, src: src,
		cfg: &checkpoint.Config{ModelType: "bert"}}
	in := &Inputs{Batch: 2, Seq: 3, IDs: []int32{1, 2, 3, 4, 5, 0}, Mask: []int32{1, 1, 1, 1, 1, 0}}
	q, err := tm.Quantize(context.Background(), []*Inputs{in}, PrecisionInt8Static, QuantizeOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { q.Close() })
	e := q.Encoder
	require.Equal(t, 4096+64, e.newBuffers(6).fq.ld, "FFN2's input row stride")
	require.Equal(t, 8, e.newBuffers(6).xq.ld, "QKV's input row stride")
	want, err := e.Forward(in, true)
	require.NoError(t, err)

	defer func() { padU8 = true }()
	padU8 = false
	e.scratchPool.keep(nil)
	for e.scratchPool.get(0) != nil {
	}
	require.Equal(t, 4096, e.newBuffers(6).fq.ld)
	got, err := e.Forward(in, true)
	require.NoError(t, err)
	require.Equal(t, want.Last, got.Last, "last hidden state, packed against padded FFN2 input")
	require.Equal(t, want.Hidden, got.Hidden, "hidden states, packed against padded FFN2 input")
}
