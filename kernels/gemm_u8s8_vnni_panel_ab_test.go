package kernels

import (
	"math/rand"
	"os"
	"sort"
	"testing"
	"time"

	"github.com/int8bert/int8bert/cpu"
)

// TestVNNIABPanelMajor times vnniPanelMajor on and off, interleaved, on the
// BERT-large shapes with cold weights (more copies than the caches hold, as
// in a forward pass), and checks that both orders give identical outputs.
// Run with INT8BERT_AB=1 on one pinned thread.
func TestVNNIABPanelMajor(t *testing.T) {
	if os.Getenv("INT8BERT_AB") == "" {
		t.Skip("A/B timing: set INT8BERT_AB=1 to run")
	}
	if !vnniAvailable(cpu.X86) {
		t.Skip("no AVX512-VNNI assembly on this CPU or build")
	}
	defer func(v bool) { vnniPanelMajor = v }(vnniPanelMajor)
	kr := newVNNIKernel(8, 48)
	for _, sh := range []struct {
		m, k, n  int
		u8, gelu bool
	}{{256, 1024, 3072, false, false}, {256, 1024, 4096, true, true}, {256, 1024, 1024, false, false}, {128, 768, 3072, true, true}} {
		copies := max(2, 160<<20/(sh.n*sh.k))
		w := make([]int8, sh.n*sh.k)
		for i := range w {
			w[i] = int8(rand.Intn(255) - 127)
		}
		var ws []*PackedS8
		for c := 0; c < copies; c++ {
			p, err := PackS8(sh.n, sh.k, w, sh.k, kr.NR)
			if err != nil {
				t.Fatal(err)
			}
			ws = append(ws, p)
		}
		a := make([]uint8, sh.m*sh.k)
		for i := range a {
			a[i] = uint8(rand.Intn(256))
		}
		cs := make([]float32, sh.n)
		for i := range cs {
			cs[i] = 0.001
		}
		ep := &Epilogue{ZeroPoint: 7, ColSum: ws[0].ColSum, ActScale: 0.02, ColScale: cs, Bias: make([]float32, sh.n)}
		if sh.gelu {
			ep.Act, ep.OutScale, ep.OutZeroPoint = ActGELU, 0.05, 4
		}
		outs := [2]Out{}
		for v := range outs {
			if sh.u8 {
				outs[v] = Out{U8: make([]uint8, sh.m*sh.n), Ldc: sh.n}
			} else {
				outs[v] = Out{F32: make([]float32, sh.m*sh.n), Ldc: sh.n}
			}
		}
		var times [2][]time.Duration
		for r := 0; r < 3; r++ {
			for c := 0; c < copies; c++ {
				for v := 0; v < 2; v++ {
					vnniPanelMajor = v == 1
					g := &GEMMU8S8{M: sh.m, N: sh.n, K: sh.k, A: a, Lda: sh.k, B: ws[c], Ep: ep, Out: outs[v]}
					t0 := time.Now()
					if err := kr.RunU8S8(g); err != nil {
						t.Fatal(err)
					}
					times[v] = append(times[v], time.Since(t0))
				}
			}
		}
		if sh.u8 {
			for i := range outs[0].U8 {
				if outs[0].U8[i] != outs[1].U8[i] {
					t.Fatalf("%v: outputs differ at %d", sh, i)
				}
			}
		} else {
			for i := range outs[0].F32 {
				if outs[0].F32[i] != outs[1].F32[i] {
					t.Fatalf("%v: outputs differ at %d", sh, i)
				}
			}
		}
		gops := func(d []time.Duration) float64 {
			sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
			return 2 * float64(sh.m*sh.n*sh.k) / d[len(d)/2].Seconds() / 1e9
		}
		t.Logf("%dx%dx%d u8=%v: row-major %.1f GOP/s, panel-major %.1f GOP/s (median of %d)", sh.m, sh.k, sh.n, sh.u8,
			gops(times[0]), gops(times[1]), len(times[0]))
	}
}
