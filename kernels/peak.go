package kernels

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/int8bert/int8bert/cpu"
)

// Peak is one core's measured arithmetic peak: the rate of long runs of
// independent register-to-register vector instructions, the ceiling a GEMM
// kernel is judged against (DESIGN.md section 7). A figure is 0 when the CPU
// (cpu.X86, after INT8BERT_CPU_DISABLE) lacks the instruction, or when the
// binary was built without assembly (purego, noasm, not amd64).
type Peak struct {
	// FP32GFLOPS counts VFMADD231PS zmm as 2*16 = 32 flops; on a CPU
	// without AVX-512F (AVX2 and FMA3), VFMADD231PS ymm as 2*8 = 16.
	FP32GFLOPS float64
	// VNNIGOPS counts VPDPBUSD zmm as 2*64 = 128 ops.
	VNNIGOPS float64
	// BF16GFLOPS counts VDPBF16PS zmm as 2*32 = 64 flops.
	BF16GFLOPS float64
	// AVX2Int8GOPS counts VPMADDWD ymm as 2*16 = 32 ops (16 multiply-adds
	// of int16 pairs): the ceiling of the exact AVX2 u8 x s8 kernels, on
	// any CPU with AVX2 (their VPADDD aside).
	AVX2Int8GOPS float64
}

// Int8 returns the INT8 peak a u8 x s8 GEMM is judged against: VNNI's
// where the CPU has it, else the AVX2 one.
func (p Peak) Int8() float64 {
	if p.VNNIGOPS > 0 {
		return p.VNNIGOPS
	}
	return p.AVX2Int8GOPS
}

// String formats the figures, "n/a" for a zero one.
func (p Peak) String() string {
	f := func(v float64, unit string) string {
		if v == 0 {
			return "n/a"
		}
		return fmt.Sprintf("%.1f %s", v, unit)
	}
	return fmt.Sprintf("fp32 fma %s, int8 vnni %s, bf16 %s, int8 avx2 vpmaddwd %s",
		f(p.FP32GFLOPS, "GFLOP/s"), f(p.VNNIGOPS, "GOP/s"), f(p.BF16GFLOPS, "GFLOP/s"), f(p.AVX2Int8GOPS, "GOP/s"))
}

// peakOps is the work of one loop iteration of each peak loop: 24
// instructions times the ops of one.
const (
	peakFMAOps       = 24 * 32
	peakVNNIOps      = 24 * 128
	peakBF16Ops      = 24 * 64
	peakFMA256Ops    = 24 * 16
	peakMADDWD256Ops = 24 * 32
)

// peakRuns returns the loop of each figure, on when this CPU runs it.
func peakRuns(f cpu.Features, p *Peak) []peakRun {
	fma := peakRun{f.AVX512F, peakFMA, peakFMAOps, &p.FP32GFLOPS}
	if !f.AVX512F {
		fma = peakRun{f.AVX2 && f.FMA, peakFMA256, peakFMA256Ops, &p.FP32GFLOPS}
	}
	return []peakRun{
		fma,
		{f.AVX512F && f.AVX512VNNI, peakVNNI, peakVNNIOps, &p.VNNIGOPS},
		{f.AVX512F && f.AVX512BF16, peakBF16, peakBF16Ops, &p.BF16GFLOPS},
		{f.AVX2, peakMADDWD256, peakMADDWD256Ops, &p.AVX2Int8GOPS},
	}
}

// MeasurePeak measures the peaks on the calling thread: the caller pins it
// (runtime.LockOSThread, taskset) and keeps other load away. d is the total
// time to spend, split evenly among the available figures; each figure is
// the best of repeated runs of about a millisecond, so a longer d is less
// disturbed by noise. Without assembly support MeasurePeak returns zeros at
// once (see PeakAvailable).
func MeasurePeak(d time.Duration) Peak {
	var p Peak
	runs := peakRuns(cpu.X86, &p)
	if !peakAsm {
		return p
	}
	on := 0
	for _, r := range runs {
		if r.on {
			on++
		}
	}
	if on == 0 {
		return p
	}
	each := d / time.Duration(on)
	for _, r := range runs {
		if r.on {
			*r.dst = measureLoop(r.loop, r.ops, each) / 1e9
		}
	}
	return p
}

// peakRun is one figure of MeasurePeak. (A package-level type: a type
// local to MeasurePeak crashed Go 1.26's linker while writing DWARF in
// -tags noasm builds, where the function returns before using it.)
type peakRun struct {
	on   bool
	loop func(int)
	ops  float64
	dst  *float64
}

// PeakAvailable reports whether MeasurePeak can measure anything in this
// binary on this CPU: assembly is compiled in and AVX-512F or AVX2 is live.
func PeakAvailable() bool { return peakAsm && (cpu.X86.AVX512F || cpu.X86.AVX2) }

// measureLoop returns the best ops/second of loop over runs of about a
// millisecond each, spending about d in all (at least one run).
func measureLoop(loop func(int), opsPerIter float64, d time.Duration) float64 {
	// Calibrate the iteration count of one run to about 1 ms.
	n := 1 << 10
	for {
		t := time.Now()
		loop(n)
		if e := time.Since(t); e >= 500*time.Microsecond || n >= 1<<30 {
			n = max(1, int(float64(n)*float64(time.Millisecond)/float64(max(e, 1))))
			break
		}
		n *= 4
	}
	best := 0.0
	end := time.Now().Add(d)
	for first := true; first || time.Now().Before(end); first = false {
		t := time.Now()
		loop(n)
		e := time.Since(t).Seconds()
		if e > 0 {
			best = max(best, float64(n)*opsPerIter/e)
		}
	}
	return best
}

// PeakKind names one of MeasurePeak's figures, for PeakRate.
type PeakKind int

const (
	PeakFP32     PeakKind = iota // VFMADD231PS (zmm, else ymm): FP32GFLOPS
	PeakVNNI                     // VPDPBUSD zmm: VNNIGOPS
	PeakBF16                     // VDPBF16PS zmm: BF16GFLOPS
	PeakAVX2Int8                 // VPMADDWD ymm: AVX2Int8GOPS
	PeakInt8                     // PeakVNNI where the CPU has VNNI, else PeakAVX2Int8
)

// PeakRate runs one figure's peak loop once for about d on the calling
// thread and returns its ops per second (0 where MeasurePeak's figure is 0).
// Unlike MeasurePeak's best of many short runs, it is one run, for pairing
// with a measurement taken next to it: on a shared machine whose speed
// drifts, the two see about the same conditions (bench gemm's shares of
// the peak, through selector.Options.Reference).
func PeakRate(kind PeakKind, d time.Duration) float64 {
	runs := peakRuns(cpu.X86, new(Peak))
	if kind == PeakInt8 {
		kind = PeakAVX2Int8
		if runs[PeakVNNI].on {
			kind = PeakVNNI
		}
	}
	if kind < 0 || int(kind) >= len(runs) || !peakAsm || !runs[kind].on {
		return 0
	}
	r := runs[kind]
	// Calibrate once per kind: the loops run at a fixed rate per core.
	ns := peakNsPerIter[kind].Load()
	if ns == 0 {
		n := 1 << 12
		for {
			t := time.Now()
			r.loop(n)
			if e := time.Since(t); e >= 200*time.Microsecond || n >= 1<<30 {
				ns = max(1, uint64(e.Nanoseconds())*1024/uint64(n))
				break
			}
			n *= 4
		}
		peakNsPerIter[kind].Store(ns)
	}
	n := max(1, int(uint64(d.Nanoseconds())*1024/ns))
	t := time.Now()
	r.loop(n)
	e := time.Since(t).Seconds()
	if e <= 0 {
		return 0
	}
	return float64(n) * r.ops / e
}

// peakNsPerIter caches PeakRate's calibration: nanoseconds per 1024 loop
// iterations, by PeakKind.
var peakNsPerIter [4]atomic.Uint64
