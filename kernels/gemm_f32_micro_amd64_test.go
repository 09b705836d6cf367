//go:build linux && amd64 && gc && !purego && !noasm

package kernels

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/int8bert/int8bert/cpu"
	"github.com/int8bert/int8bert/kernels/peak"
)

// threadCPU returns the calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID):
// on a shared machine it excludes the time other processes hold the core.
func threadCPU() time.Duration {
	var ts syscall.Timespec
	syscall.Syscall(syscall.SYS_CLOCK_GETTIME, 3, uintptr(unsafe.Pointer(&ts)), 0)
	return time.Duration(ts.Nano())
}

// bestRate returns the best ops/second of f over reps runs, timed in
// thread CPU time.
func bestRate(reps int, ops float64, f func()) float64 {
	best := 0.0
	for range reps {
		t := threadCPU()
		f()
		if e := (threadCPU() - t).Seconds(); e > 0 {
			best = max(best, ops/e)
		}
	}
	return best
}

// peakFMARate returns the best rate of the FP32 FMA peak loop run for
// about ops operations, over reps runs timed in thread CPU time.
func peakFMARate(reps int, ops float64) float64 {
	best := 0.0
	for range reps {
		t := threadCPU()
		done := peak.Run(peak.FP32, ops)
		if e := (threadCPU() - t).Seconds(); e > 0 {
			best = max(best, done/e)
		}
	}
	return best
}

func peakF32CPU() float64 { return peakFMARate(5, 15e6) / 1e9 }

// BenchmarkF32Micro times each tile's full-height micro-kernel on an
// L1-resident tile (kc = 192) against the FMA peak, both in thread CPU
// time, best of many short runs: the inner loop's efficiency without cache
// effects.
func BenchmarkF32Micro(b *testing.B) {
	if !f32Available(cpu.X86) {
		b.Skipf("CPU lacks AVX512F/BW (%s)", cpu.X86)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for _, f := range f32Drivers {
		b.Run(fmt.Sprintf("%dx%d", f.mr, f.nr), func(b *testing.B) {
			const kc, calls = 192, 200
			a := make([]float32, f.mr*kc)
			bp := make([]float32, kc*f.nr)
			c := make([]float32, f.mr*f.nr)
			best, peak := 0.0, 0.0
			for b.Loop() {
				for range 20 {
					peak = max(peak, peakF32CPU())
					best = max(best, bestRate(5, float64(2*f.mr*f.nr*kc*calls), func() {
						for range calls {
							f.kern[f.mr](kc, &a[0], kc, &bp[0], &c[0], f.nr, ^uint64(0), 1, nil, nil, 0)
						}
					})/1e9)
				}
			}
			b.ReportMetric(best, "GFLOP/s")
			b.ReportMetric(100*best/peak, "%peak")
		})
	}
}

// BenchmarkF32CPUTime runs each BERT shape on one thread per kernel, timed
// in thread CPU time, each run paired with an FP32 FMA peak loop of the
// same length timed the same way, without and with (/ep) BERT's fused
// epilogue (bias + GELU when N > K, else bias + residual). It reports the best GFLOP/s and the
// median and best of the per-pair ratios (%peak): on a shared machine the
// core's own throughput drifts, and a pair sees the same conditions. Run
// pinned:
//
//	taskset -c 1 go test -run - -bench F32CPUTime -benchtime 1x ./kernels
func BenchmarkF32CPUTime(b *testing.B) {
	if !f32Available(cpu.X86) {
		b.Skipf("CPU lacks AVX512F/BW (%s)", cpu.X86)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for _, s := range f32BenchShapes {
		for _, kern := range f32Asm {
			for _, withEp := range []bool{false, true} {
				name := fmt.Sprintf("M%d_K%d_N%d/%s", s.m, s.k, s.n, kern.Name)
				if withEp {
					name += "/ep"
				}
				b.Run(name, func(b *testing.B) {
					g := f32BenchGEMM(s.m, s.n, s.k, kern.NR)
					if withEp {
						g.Ep = f32BenchEpilogue(s.m, s.n, s.k)
					}
					flops := 2 * float64(s.m*s.n*s.k)
					best := 0.0
					var ratios []float64
					for b.Loop() {
						for range 12 {
							p := peakFMARate(1, flops)
							r := bestRate(1, flops, func() { kern.Run(g) })
							best = max(best, r)
							ratios = append(ratios, r/p)
						}
					}
					slices.Sort(ratios)
					b.ReportMetric(best/1e9, "GFLOP/s")
					b.ReportMetric(100*ratios[len(ratios)/2], "%peak_median")
					b.ReportMetric(100*ratios[len(ratios)-1], "%peak_best")
				})
			}
		}
	}
}

// f32BenchEpilogue is BERT's epilogue for the shape: bias + GELU for the
// FFN up-projection (N > K), else bias + residual.
func f32BenchEpilogue(m, n, k int) *Epilogue {
	r := rand.New(rand.NewPCG(3, 4))
	ep := &Epilogue{Bias: make([]float32, n)}
	for i := range ep.Bias {
		ep.Bias[i] = float32(r.NormFloat64())
	}
	if n > k {
		ep.Act = ActGELU
	} else {
		ep.Residual = make([]float32, m*n)
		for i := range ep.Residual {
			ep.Residual[i] = float32(r.NormFloat64())
		}
	}
	return ep
}

// f32BenchGEMM returns a one-thread GEMM of the given shape on random data,
// B packed for panel width nr.
func f32BenchGEMM(m, n, k, nr int) *GEMMF32 {
	r := rand.New(rand.NewPCG(1, 2))
	a := make([]float32, m*k)
	w := make([]float32, n*k)
	for i := range a {
		a[i] = float32(r.NormFloat64())
	}
	for i := range w {
		w[i] = float32(r.NormFloat64() * 0.05)
	}
	pk, _ := PackF32(n, k, w, k, nr)
	return &GEMMF32{M: m, N: n, K: k, A: a, Lda: k, B: pk, C: make([]float32, m*n), Ldc: n, Threads: 1}
}
