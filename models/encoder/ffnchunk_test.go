package encoder

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/int8bert/int8bert/kernels"
	"github.com/int8bert/int8bert/selector"
	"github.com/int8bert/int8bert/smoothquant"
	"github.com/stretchr/testify/require"
)

// TestInt8DynamicFFNChunkScratch runs a one-thread dynamic FFN of more
// rows than ffnChunkRows (chunked, int8Pass.ffn) and checks that every
// chunk put its FP32 intermediate and its quantization in the first
// chunk's rows of the scratch (ffnChunkScratch: the rows past them keep
// what was there), and that the output has the bits of the unchunked FFN
// (two threads) on the same kernels.
func TestInt8DynamicFFNChunkScratch(t *testing.T) {
	sel, err := selector.New(selector.Options{CachePath: "off", Force: "generic", Reps: 1, RepTime: 100 * time.Microsecond})
	require.NoError(t, err)
	t.Cleanup(func() { sel.Close() })
	const h, inter = 16, 40
	rows := 2*ffnChunkRows + 37 // three chunks, the last one short
	r := rand.New(rand.NewPCG(3, 4))
	lin := func(n, k int) *qlin {
		q := &smoothquant.QLinear{N: n, K: k, W: make([]int8, n*k), WScale: make([]float32, n), Bias: make([]float32, n), Smooth: make([]float32, k)}
		for i := range q.W {
			q.W[i] = int8(r.IntN(255) - 127)
		}
		for i := range q.WScale {
			q.WScale[i], q.Bias[i] = 0.001+0.01*r.Float32(), r.Float32()-0.5
		}
		for i := range q.Smooth {
			q.Smooth[i] = 0.5 + r.Float32()
		}
		l, err := newQlin(sel, q, false)
		require.NoError(t, err)
		t.Cleanup(func() { l.lin.Close() })
		return l
	}
	f1, f2 := lin(inter, h), lin(h, inter)
	cfg := Config{Hidden: h, Intermediate: inter, Activation: kernels.ActGELU}
	x := make([]float32, rows*h)
	for i := range x {
		x[i] = 4 * (r.Float32() - 0.5)
	}
	run := func(threads int) (*qscratch, []float32) {
		m := &Model{cfg: cfg, threads: threads, sel: sel}
		p := &int8Pass{mode: smoothquant.Dynamic}
		s := newBuffersFor(cfg, true, rows).view(cfg, rows)
		for i := range s.f {
			s.f[i] = float32(math.NaN())
		}
		for i := range s.fq.u8 {
			s.fq.u8[i] = 0xA5
		}
		xr := append([]float32(nil), x...)
		require.NoError(t, p.ffn(m, f1, f2, rows, xr, false, false, kernels.Out{F32: s.f, Ldc: inter}, 0, 0, s))
		return s, s.t
	}
	s, got := run(1)
	_, want := run(2)
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("output row %d col %d: %v in chunks on one thread, %v unchunked on two", i/h, i%h, got[i], want[i])
		}
	}
	for i, v := range s.f[ffnChunkRows*inter:] {
		if !math.IsNaN(float64(v)) {
			t.Fatalf("FFN1's FP32 output row %d (past the first chunk's %d) was written: each chunk must reuse the first chunk's rows", ffnChunkRows+i/inter, ffnChunkRows)
		}
	}
	for i, v := range s.fq.u8[ffnChunkRows*inter:] {
		if v != 0xA5 {
			t.Fatalf("FFN2's u8 input row %d (past the first chunk's %d) was written: each chunk must reuse the first chunk's rows", ffnChunkRows+i/inter, ffnChunkRows)
		}
	}
	for i, v := range s.f[:ffnChunkRows*inter] {
		if math.IsNaN(float64(v)) {
			t.Fatalf("FFN1's FP32 output row %d of the first chunk's was never written", i/inter)
		}
	}
}
