//go:build linux && amd64 && gc && !purego && !noasm

package kernels

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/int8bert/int8bert/cpu"
	"github.com/int8bert/int8bert/kernels/peak"
)

// BenchmarkAVXVNNIMicro times gemmAVXVNNI_<MR>x16 on an L1-resident tile
// (K = 768: 12 KiB of panel) against the AVX-VNNI peak loop, both in
// thread CPU time, best of many short runs: the inner loop's efficiency
// without cache effects. Run pinned: taskset -c 1 go test -run - -bench
// AVXVNNIMicro ./kernels.
func BenchmarkAVXVNNIMicro(b *testing.B) {
	if !(cpu.X86.AVX2 && cpu.X86.AVXVNNI) {
		b.Skipf("this CPU has no AVX-VNNI (or it is disabled): %s", cpu.X86)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for _, mr := range []int{6, 4, 1} {
		b.Run(fmt.Sprintf("%dx16", mr), func(b *testing.B) {
			const k, calls = 768, 200
			a := make([]uint8, mr*k)
			bp := make([]int8, 16*k)
			c := make([]int32, mr*16)
			best, pk := 0.0, 0.0
			for b.Loop() {
				for range 10 {
					pr := 0.0
					for range 5 {
						t := threadCPU()
						done := peak.Run(peak.AVXVNNI, 15e6)
						if e := (threadCPU() - t).Seconds(); e > 0 {
							pr = max(pr, done/e)
						}
					}
					pk = max(pk, pr/1e9)
					best = max(best, bestRate(5, float64(2*mr*16*k*calls), func() {
						for range calls {
							avxvnniMicros[mr](&a[0], k, &bp[0], k/4, &c[0], 16)
						}
					})/1e9)
				}
			}
			b.ReportMetric(best, "GOP/s")
			b.ReportMetric(pk, "peak-GOP/s")
			b.ReportMetric(100*best/pk, "%peak")
		})
	}
}

// BenchmarkAVXVNNIDriver times the AVX-VNNI driver and the wide AVX2 one
// on BERT-base's linear shapes (M = 128, s32 output, one thread) in thread
// CPU time, best of 5, next to the AVX-VNNI peak loop.
func BenchmarkAVXVNNIDriver(b *testing.B) {
	if !(cpu.X86.AVX2 && cpu.X86.AVXVNNI) {
		b.Skipf("this CPU has no AVX-VNNI (or it is disabled): %s", cpu.X86)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for _, s := range [][3]int{{128, 768, 3072}, {128, 768, 768}, {128, 3072, 768}} {
		m, k, n := s[0], s[1], s[2]
		a := make([]uint8, m*k)
		w := make([]int8, n*k)
		for i := range a {
			a[i] = uint8(i * 7)
		}
		for i := range w {
			w[i] = int8(i * 13)
		}
		p, err := PackS8(n, k, w, k, 16)
		if err != nil {
			b.Fatal(err)
		}
		c := make([]int32, m*n)
		g := &GEMMU8S8{M: m, N: n, K: k, A: a, Lda: k, B: p, Out: Out{S32: c, Ldc: n}, Threads: 1}
		for _, d := range []struct {
			name string
			run  func(*GEMMU8S8) error
		}{{"avxvnni", runAVXVNNIU8S8}, {"avx2wide", runAVX2WideU8S8}} {
			b.Run(fmt.Sprintf("%dx%dx%d/%s", m, k, n, d.name), func(b *testing.B) {
				best, pk := 0.0, 0.0
				for b.Loop() {
					best = max(best, bestRate(5, float64(2*m*n*k), func() { _ = d.run(g) })/1e9)
					t := threadCPU()
					done := peak.Run(peak.AVXVNNI, 2e7)
					if e := (threadCPU() - t).Seconds(); e > 0 {
						pk = max(pk, done/e/1e9)
					}
				}
				b.ReportMetric(best, "GOP/s")
				b.ReportMetric(100*best/pk, "%peak")
			})
		}
	}
}
