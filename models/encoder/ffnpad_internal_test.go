package encoder

import (
	"context"
	"fmt"
	"testing"

	"github.com/int8bert/int8bert/checkpoint"
	"github.com/int8bert/int8bert/kernels"

	"github.com/stretchr/testify/require"
)

// TestFFNPaddedStride: with an intermediate width a multiple of 4096, an
// INT8 pass (static: FFN1's requantizing epilogue writes FFN2's input;
// dynamic: quantize does, in one piece or in chunks of ffnChunkRows rows)
// keeps FFN2's u8 input at the padded row stride kernels.RowStrideU8 gives,
// the stride the selector times FFN2's kernels at, and its outputs are
// bit-identical to the same pass with the rows packed.
func TestFFNPaddedStride(t *testing.T) {
	c := tinyConfig()
	c.Intermediate, c.Layers = 4096, 2
	src := randomSource(c, false)
	m, err := newModel(c, NewLoader(src), BERTNames(""), testSelector(t), Options{})
	require.NoError(t, err)
	t.Cleanup(func() { m.Close() })
	tm := &TaskModel{Family: &Family{Name: "test", Names: BERTNames}, Task: TaskBase, Encoder: m, src: src,
		cfg: &checkpoint.Config{ModelType: "bert"}}
	inputs := func(batch int) *Inputs {
		in := &Inputs{Batch: batch, Seq: 5}
		for b := 0; b < batch; b++ {
			for i := 0; i < 5; i++ {
				in.IDs = append(in.IDs, int32(1+(b+i)%10))
				in.Mask = append(in.Mask, 1)
			}
		}
		return in
	}
	small, large := inputs(2), inputs(ffnChunkRows/5+4) // 10 rows; 280, over ffnChunkRows
	for _, prec := range []Precision{PrecisionInt8Static, PrecisionInt8Dynamic} {
		q, err := tm.Quantize(context.Background(), []*Inputs{small}, prec, QuantizeOptions{})
		require.NoError(t, err)
		t.Cleanup(func() { q.Close() })
		e := q.Encoder
		for _, in := range []*Inputs{small, large} {
			rows := in.Batch * in.Seq
			name := fmt.Sprintf("precision %v rows %d", prec, rows)
			ld := kernels.RowStrideU8(4096)
			require.Equal(t, 4096+64, ld)
			pass := func(pad bool) *Output {
				defer func() { padU8 = true }()
				padU8 = pad
				b := e.newBuffers(rows)
				e.scratchPool.keep(b)
				defer e.scratchPool.keep(nil)
				require.Equal(t, 8, b.xq.ld, "%s: QKV's input row stride", name)
				out, err := e.Forward(in, true)
				require.NoError(t, err, name)
				if !pad {
					require.Equal(t, 4096, b.fq.ld, name)
					return out
				}
				// FFN2's input was written at the padded stride: row 0's
				// pad is untouched, row 1 starts ld bytes in.
				require.Equal(t, ld, b.fq.ld, "%s: FFN2's input row stride", name)
				require.Equal(t, make([]uint8, ld-4096), b.fq.u8[4096:ld], "%s: row 0's pad", name)
				require.NotEqual(t, make([]uint8, 64), b.fq.u8[ld:ld+64], "%s: row 1", name)
				return out
			}
			want, got := pass(true), pass(false)
			require.Equal(t, want.Last, got.Last, "%s: last hidden state, packed against padded FFN2 input", name)
			require.Equal(t, want.Hidden, got.Hidden, "%s: hidden states, packed against padded FFN2 input", name)
		}
	}
}
