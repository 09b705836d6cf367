//go:build linux

package kernels

import (
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/int8bert/int8bert/cpu"
	"github.com/int8bert/int8bert/kernels/peak"
)

// TestVNNIABFused times, interleaved in one process on the calling thread,
// gemmVNNI_8x48 on BERT's GEMMs with their encoder epilogues, with the
// epilogue fused into the micro-kernels (vnniFusedEpi) and with the tile
// store + vnniTileEpilogue path ("old"), the fused path without the
// prefetch of its destination and residual tiles (vnniTilePrefetch off:
// "fused-nopf") and, for f32 outputs, with non-temporal stores
// ("fused-nt"), next to the s32 output of the same shape, as GOP/s and as a
// fraction of MeasurePeak's VNNI peak measured alongside. It also checks
// that the paths give the same bytes.
// Run: INT8BERT_AB=1 taskset -c 1 go test ./kernels -run TestVNNIABFused -v
// (INT8BERT_AB_REPS: repetitions, default 15).
func TestVNNIABFused(t *testing.T) {
	if os.Getenv("INT8BERT_AB") == "" || !vnniAvailable(cpu.X86) {
		t.Skip("set INT8BERT_AB=1 on a VNNI host")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	reps := 15
	if n, err := strconv.Atoi(os.Getenv("INT8BERT_AB_REPS")); err == nil {
		reps = n
	}
	defer func(f, nt, pf, late bool) {
		vnniFusedEpi, vnniNTF32Stores, vnniTilePrefetch, vnniTilePrefetchLate = f, nt, pf, late
	}(vnniFusedEpi, vnniNTF32Stores, vnniTilePrefetch, vnniTilePrefetchLate)
	peak := peak.Measure(2*time.Second).VNNIGOPS * 1e9
	r := rand.New(rand.NewPCG(7, 8))
	type shape struct {
		name    string
		m, k, n int
	}
	for _, sh := range []shape{
		{"QKV f32 scale+bias", 256, 1024, 3072},
		{"FFN1 u8 GELU", 256, 1024, 4096},
		{"FFN2 f32 +residual", 256, 4096, 1024},
		{"base QKV f32 scale+bias", 128, 768, 2304},
	} {
		m, k, n := sh.m, sh.k, sh.n
		a := make([]uint8, m*k)
		for i := range a {
			a[i] = uint8(r.IntN(256))
		}
		w := make([]int8, n*k)
		for i := range w {
			w[i] = int8(r.IntN(255) - 127)
		}
		cs := make([]float32, n)
		bias := make([]float32, n)
		for i := range cs {
			cs[i], bias[i] = 0.0002*float32(r.Float64()+0.5), float32(r.NormFloat64())
		}
		kn := newVNNIKernel(8, 48)
		p, _ := PackS8(n, k, w, k, kn.NR)
		ep := &Epilogue{ZeroPoint: 128, ColSum: p.ColSum, ActScale: 1.0 / 128, ColScale: cs, Bias: bias}
		var out Out
		switch {
		case sh.name[:4] == "FFN1":
			ep.Act, ep.OutScale, ep.OutZeroPoint = ActGELU, 0.03, 6
			out = Out{U8: make([]uint8, m*n+64), Ldc: n}
		case sh.name[:4] == "FFN2":
			res := make([]float32, m*n)
			for i := range res {
				res[i] = float32(r.NormFloat64())
			}
			ep.Residual = res
			out = Out{F32: make([]float32, m*n+16), Ldc: n}
		default:
			out = Out{F32: make([]float32, m*n+16), Ldc: n}
		}
		outOld := out
		if out.U8 != nil {
			outOld.U8 = make([]uint8, len(out.U8))
		} else {
			outOld.F32 = make([]float32, len(out.F32))
		}
		type variant struct {
			name                string
			fused, nt, pf, late bool
			g                   *GEMMU8S8
		}
		base := func() *GEMMU8S8 { return &GEMMU8S8{M: m, N: n, K: k, A: a, Lda: k, B: p, Threads: 1} }
		vs := []variant{{"s32", false, true, true, false, base()}, {"old", false, true, true, false, base()},
			{"fused", true, false, true, false, base()}, {"fused-nopf", true, false, false, false, base()},
			{"fused-late", true, false, true, true, base()}}
		vs[0].g.Out = Out{S32: make([]int32, m*n), Ldc: n}
		vs[1].g.Ep, vs[1].g.Out = ep, outOld
		for i := 2; i < len(vs); i++ {
			vs[i].g.Ep, vs[i].g.Out = ep, out
		}
		if out.F32 != nil { // the fused path with non-temporal f32 stores
			vs = append(vs, variant{"fused-nt", true, true, true, false, base()})
			vs[len(vs)-1].g.Ep, vs[len(vs)-1].g.Out = ep, out
		}
		times := make([][]float64, len(vs))
		for rep := 0; rep < reps; rep++ {
			for i, v := range vs {
				vnniFusedEpi, vnniNTF32Stores, vnniTilePrefetch, vnniTilePrefetchLate = v.fused, v.nt, v.pf, v.late
				t0 := threadTime()
				for range 3 {
					if err := kn.RunU8S8(v.g); err != nil {
						t.Fatal(err)
					}
				}
				times[i] = append(times[i], (threadTime()-t0)/3)
			}
		}
		diff := 0
		if out.U8 != nil {
			for q := range out.U8 {
				if out.U8[q] != outOld.U8[q] {
					diff++
				}
			}
		} else {
			for q := range out.F32 {
				if out.F32[q] != outOld.F32[q] {
					diff++
				}
			}
		}
		if diff != 0 {
			t.Errorf("%s: %d outputs of the fused path differ from the old path's", sh.name, diff)
		}
		s := ""
		for i, v := range vs {
			sort.Float64s(times[i])
			best, med := times[i][0], times[i][len(times[i])/2]
			gb, gm := 2*float64(m*n*k)/best, 2*float64(m*n*k)/med
			s += fmt.Sprintf("\n  %-10s best %6.1f GOP/s (%4.1f%%)  median %6.1f GOP/s (%4.1f%%)", v.name, gb/1e9, 100*gb/peak, gm/1e9, 100*gm/peak)
		}
		t.Logf("%dx%dx%d %s, %s, VNNI peak %.1f GOP/s:%s", m, k, n, sh.name, kn.Name, peak/1e9, s)
	}
}
