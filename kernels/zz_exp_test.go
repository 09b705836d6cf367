//go:build linux && amd64 && gc && !purego && !noasm

package kernels

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"testing"
)

func TestZZF32Out(t *testing.T) {
	if os.Getenv("ZZ") == "" {
		t.Skip()
	}
	runtime.LockOSThread()
	for _, tile := range [][2]int{{6, 64}, {8, 48}} {
		mr, nr := tile[0], tile[1]
		for _, sh := range [][3]int{{256, 1024, 3072}, {256, 1024, 1024}, {128, 768, 2304}} {
			m, k, n := sh[0], sh[1], sh[2]
			a := make([]uint8, m*k)
			w := make([]int8, n*k)
			for i := range w {
				w[i] = int8(i*7 + i>>5)
			}
			for i := range a {
				a[i] = uint8(i*13 + i>>7)
			}
			kk := newVNNIKernel(mr, nr)
			p, _ := PackS8(n, k, w, k, nr)
			cs := make([]float32, n)
			bias := make([]float32, n)
			for i := range cs {
				cs[i], bias[i] = 0.0002, float32(i%7)*0.1
			}
			cf := make([]float32, m*n)
			gs := []*GEMMU8S8{
				{M: m, N: n, K: k, A: a, Lda: k, B: p, Ep: &Epilogue{ActScale: 1.0 / 128, ColScale: cs, Bias: bias}, Out: Out{F32: cf, Ldc: n}},
				{M: m, N: n, K: k, A: a, Lda: k, B: p, Ep: &Epilogue{ActScale: 1.0 / 128, ColScale: cs, Bias: bias, Act: ActGELU}, Out: Out{F32: cf, Ldc: n}},
			}
			ops := 2 * float64(m*n*k)
			iters := int(ops / peakVNNIOps)
			rs := make([][]float64, len(gs))
			for rep := 0; rep < 25; rep++ {
				for i, g := range gs {
					t0 := threadTime()
					peakVNNI(iters)
					pk := float64(iters) * peakVNNIOps / (threadTime() - t0)
					t0 = threadTime()
					kk.RunU8S8(g)
					rs[i] = append(rs[i], ops/(threadTime()-t0)/pk)
				}
			}
			s := ""
			for i := range gs {
				slices.Sort(rs[i])
				s += fmt.Sprintf(" %.1f%%", 100*rs[i][12])
			}
			t.Logf("%dx%d %v bias / gelu:%s", mr, nr, sh, s)
		}
	}
}
