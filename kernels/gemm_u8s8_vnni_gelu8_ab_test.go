//go:build linux

package kernels

import (
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"sort"
	"testing"
	"time"

	"github.com/int8bert/int8bert/cpu"
	"github.com/int8bert/int8bert/kernels/peak"
)

// TestVNNIABGELU8 times, in one process on the calling (pinned) thread, the
// static FFN1 GEMM: compensation, scales, bias, GELU and a requantized u8
// output, with the GELU of 8-bit outputs (geluQ8F32) and with the
// accurate one it replaced there ("u8-gelu-old": flag vnniGELU), next to
// the scale-only and GELU f32 epilogues, each as GOP/s and as a fraction of
// the VPDPBUSD peak (MeasurePeak) measured alongside (INT8BERT_AB=1; run
// under taskset -c 1).
func TestVNNIABGELU8(t *testing.T) {
	if os.Getenv("INT8BERT_AB") == "" || !vnniAvailable(cpu.X86) {
		t.Skip("set INT8BERT_AB=1 on a VNNI host")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	peak := peak.Measure(2*time.Second).VNNIGOPS * 1e9
	r := rand.New(rand.NewPCG(1, 2))
	for _, sh := range [][3]int{{256, 1024, 4096}, {128, 768, 3072}} {
		m, k, n := sh[0], sh[1], sh[2]
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
		old := vnniKernel("old", 8, 48, vnniMicros[48][:9], func(dst *byte, ldd int, acc *int32, ldacc int, rows int, n int, colSum *int32, zp int32, rowScale *float32, scale float32, colScale *float32, bias *float32, res *float32, ldres int, flags int, invOut float32, outZP float32, lo float32, hi float32) {
			if flags&vnniGELU8 != 0 {
				flags = flags&^vnniGELU8 | vnniGELU
			}
			vnniEpilogue3S(dst, ldd, acc, ldacc, rows, n, colSum, zp, rowScale, scale, colScale, bias, res, ldres, flags, invOut, outZP, lo, hi)
		}, vnniAvailable)
		p, _ := PackS8(n, k, w, k, kn.NR)
		type variant struct {
			name string
			g    *GEMMU8S8
		}
		base := func() *GEMMU8S8 { return &GEMMU8S8{M: m, N: n, K: k, A: a, Lda: k, B: p, Threads: 1} }
		vs := []variant{{"f32-scale", base()}, {"u8-gelu", base()}, {"f32-gelu", base()}, {"u8-gelu-old", base()}}
		vs[0].g.Out = Out{F32: make([]float32, m*n), Ldc: n}
		vs[0].g.Ep = &Epilogue{ZeroPoint: 128, ColSum: p.ColSum, ActScale: 1.0 / 128, ColScale: cs, Bias: bias}
		vs[1].g.Out = Out{U8: make([]uint8, m*n), Ldc: n}
		vs[1].g.Ep = &Epilogue{ZeroPoint: 128, ColSum: p.ColSum, ActScale: 1.0 / 128, ColScale: cs, Bias: bias, Act: ActGELU, OutScale: 0.03, OutZeroPoint: 6}
		vs[2].g.Out = Out{F32: make([]float32, m*n), Ldc: n}
		vs[2].g.Ep = &Epilogue{ZeroPoint: 128, ColSum: p.ColSum, ActScale: 1.0 / 128, ColScale: cs, Bias: bias, Act: ActGELU}
		vs[3].g.Out = Out{U8: make([]uint8, m*n), Ldc: n}
		vs[3].g.Ep = vs[1].g.Ep
		times := make([][]float64, len(vs))
		for rep := 0; rep < 15; rep++ {
			for i, v := range vs {
				t0 := threadTime()
				kk := kn
				if i == 3 {
					kk = old
				}
				for range 3 {
					if err := kk.RunU8S8(v.g); err != nil {
						t.Fatal(err)
					}
				}
				times[i] = append(times[i], (threadTime()-t0)/3)
			}
		}
		diff := 0
		for q := range vs[1].g.Out.U8 {
			if d := int(vs[1].g.Out.U8[q]) - int(vs[3].g.Out.U8[q]); d != 0 {
				diff++
			}
		}
		s := fmt.Sprintf(" (u8 outputs differing from the old GELU's: %d of %d)", diff, m*n)
		for i, v := range vs {
			sort.Float64s(times[i])
			best, med := times[i][0], times[i][len(times[i])/2]
			gb, gm := 2*float64(m*n*k)/best, 2*float64(m*n*k)/med
			s += fmt.Sprintf("\n  %-11s best %6.1f GOP/s (%4.1f%%)  median %6.1f GOP/s (%4.1f%%)", v.name, gb/1e9, 100*gb/peak, gm/1e9, 100*gm/peak)
		}
		t.Logf("%dx%dx%d %s, VNNI peak %.1f GOP/s:%s", m, k, n, kn.Name, peak/1e9, s)
	}
}
