//go:build linux

package kernels

import (
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"sort"
	"strconv"
	"syscall"
	"testing"
	"unsafe"

	"github.com/int8bert/int8bert/cpu"
	"github.com/int8bert/int8bert/kernels/peak"
)

// TestVNNIABGELU times, interleaved in one process, the fused
// scale+bias+GELU GEMM with the Horner and the split-polynomial epilogues
// (set INT8BERT_AB=1; skipped otherwise).
func TestVNNIABGELU(t *testing.T) {
	if os.Getenv("INT8BERT_AB") == "" || !vnniAvailable(cpu.X86) {
		t.Skip("set INT8BERT_AB=1 on a VNNI host")
	}
	runtime.LockOSThread()
	m, k, n := 256, 1024, 3072
	r := rand.New(rand.NewPCG(1, 2))
	a := make([]uint8, m*k)
	for i := range a {
		a[i] = uint8(r.IntN(256))
	}
	w := make([]int8, n*k)
	for i := range w {
		w[i] = int8(r.IntN(256) - 128)
	}
	cs := make([]float32, n)
	bias := make([]float32, n)
	for i := range cs {
		cs[i], bias[i] = 0.0005*float32(r.Float64()+0.5), float32(r.NormFloat64())
	}
	out := make([]float32, m*n)
	for _, tile := range vnniTiles {
		mr, nr := tile[0], tile[1]
		p, _ := PackS8(n, k, w, k, nr)
		ep := &Epilogue{ZeroPoint: 128, ColSum: p.ColSum, ActScale: 1.0 / 128, ColScale: cs, Bias: bias, Act: ActGELU}
		var ks []*Kernel
		for _, split := range []bool{false, true} {
			ks = append(ks, vnniKernel("x", mr, nr, vnniMicros[nr][:mr+1], vnniEpilogueFor(nr, split), vnniAvailable))
		}
		ks = append(ks, ks[0])
		s32 := make([]int32, m*n)
		times := make([][]float64, len(ks))
		for rep := 0; rep < 25; rep++ {
			for i, kk := range ks {
				g := &GEMMU8S8{M: m, N: n, K: k, A: a, Lda: k, B: p, Ep: ep, Out: Out{F32: out, Ldc: n}}
				if i == 2 {
					g.Ep = nil
					g.Out = Out{S32: s32, Ldc: n}
				}
				t0 := threadTime()
				for range 3 {
					if err := kk.RunU8S8(g); err != nil {
						t.Fatal(err)
					}
				}
				times[i] = append(times[i], (threadTime()-t0)/3)
			}
		}
		var s string
		for i := range len(ks) {
			sort.Float64s(times[i])
			med := times[i][0] // the least disturbed
			s += fmt.Sprintf("  %s %.3f ms %.1f GOP/s", []string{"horner", "split", "s32-none"}[i], med*1e3, 2*float64(m*n*k)/med/1e9)
		}
		t.Logf("%dx%d gelu:%s", mr, nr, s)
	}
}

// threadTime is the CPU time of the calling thread in seconds (immune to
// the descheduling of a shared host, unlike wall time).
func threadTime() float64 {
	var ts syscall.Timespec
	const clockThreadCPUTime = 3
	syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTime, uintptr(unsafe.Pointer(&ts)), 0)
	return float64(ts.Sec) + float64(ts.Nsec)*1e-9
}

// TestVNNIABMicro reports, in thread CPU time, the micro-kernels on one
// tile with A and B in L1 (K = 256) and with B from L2 (K = 1024), as a
// fraction of the peak VNNI loop timed alongside (INT8BERT_AB=1).
func TestVNNIABMicro(t *testing.T) {
	if os.Getenv("INT8BERT_AB") == "" || !vnniAvailable(cpu.X86) {
		t.Skip("set INT8BERT_AB=1 on a VNNI host")
	}
	runtime.LockOSThread()
	for _, tile := range vnniTiles[:3] {
		mr, nr := tile[0], tile[1]
		for _, k := range []int{256, 1024} {
			micro := vnniMicros[nr][mr]
			a := make([]uint8, mr*k)
			w := make([]int8, nr*k)
			c := make([]int32, mr*nr)
			calls := 200000 / k
			ops := 2 * float64(mr*nr*k*calls)
			best, bestP := 0.0, 0.0
			for rep := 0; rep < 20; rep++ {
				t0 := threadTime()
				for range calls {
					micro(&a[0], k, &w[0], k, &c[0], nr, ^uint64(0), 0)
				}
				best = max(best, ops/(threadTime()-t0))
				t0 = threadTime()
				done := peak.Run(peak.VNNI, ops)
				bestP = max(bestP, done/(threadTime()-t0))
			}
			t.Logf("%dx%d K=%d: %.1f GOP/s, peak %.1f: %.1f%%", mr, nr, k, best/1e9, bestP/1e9, 100*best/bestP)
		}
	}
}

// TestVNNIABEpilogue times the epilogues alone on one tile in L1, with and
// without GELU, in ns per 16 outputs (INT8BERT_AB=1).
func TestVNNIABEpilogue(t *testing.T) {
	if os.Getenv("INT8BERT_AB") == "" || !vnniAvailable(cpu.X86) {
		t.Skip("set INT8BERT_AB=1 on a VNNI host")
	}
	runtime.LockOSThread()
	r := rand.New(rand.NewPCG(5, 6))
	for _, c := range []struct {
		name    string
		rows, n int
		epi     vnniEpi
	}{{"Horner3 8x48", 8, 48, vnniEpilogue3}, {"split3 8x48", 8, 48, vnniEpilogue3S}, {"Horner2 6x64", 6, 64, vnniEpilogue}, {"split2 6x64", 6, 64, vnniEpilogueS}} {
		acc := make([]int32, c.rows*c.n)
		for i := range acc {
			acc[i] = int32(r.IntN(1<<16) - 1<<15)
		}
		dst := make([]float32, c.rows*c.n)
		cs, bias := make([]float32, c.n), make([]float32, c.n)
		for i := range cs {
			cs[i], bias[i] = 1e-4, float32(r.NormFloat64())
		}
		s := ""
		for _, flags := range []int{0, vnniGELU} {
			best := 1e9
			for rep := 0; rep < 30; rep++ {
				t0 := threadTime()
				for range 2000 {
					c.epi((*byte)(unsafe.Pointer(&dst[0])), c.n, &acc[0], c.n, c.rows, c.n, nil, 0, nil, 1, &cs[0], &bias[0], nil, 0, flags, 0, 0, 0, 0)
				}
				best = min(best, (threadTime()-t0)/2000)
			}
			s += fmt.Sprintf(" flags=%d %.2f ns/vector", flags, best*1e9/float64(c.rows*c.n/16))
		}
		t.Logf("%s:%s", c.name, s)
	}
}

// TestVNNIABS32 times, interleaved in one process, the s32 GEMM (no
// epilogue) on the BERT-large shapes at M = 256 under driver variants
// (INT8BERT_AB=1; INT8BERT_AB_TILES=all for every tile, else 8x48).
func TestVNNIABS32(t *testing.T) {
	if os.Getenv("INT8BERT_AB") == "" || !vnniAvailable(cpu.X86) {
		t.Skip("set INT8BERT_AB=1 on a VNNI host")
	}
	runtime.LockOSThread()
	type variant struct {
		name string
		set  func()
	}
	set := func(nt bool, ntMin int, wholeK bool) func() {
		return func() { vnniNTStores, vnniNTMinBytes, vnniS32WholeK = nt, ntMin, wholeK }
	}
	reset := set(vnniNTStores, vnniNTMinBytes, vnniS32WholeK)
	defer reset()
	vs := []variant{
		{"old", set(false, 0, false)},
		{"nt", set(true, 0, false)},
		{"wholeK", set(false, 0, true)},
		{"nt+wholeK", set(true, 0, true)},
		{"old2", set(false, 0, false)},
		{"nt+wholeK2", set(true, 0, true)},
	}
	tiles := vnniTiles[:1]
	if os.Getenv("INT8BERT_AB_TILES") == "all" {
		tiles = vnniTiles
	}
	r := rand.New(rand.NewPCG(3, 4))
	shapes := [][3]int{{256, 1024, 1024}, {256, 1024, 3072}, {256, 1024, 4096}, {256, 4096, 1024}}
	if i, err := strconv.Atoi(os.Getenv("INT8BERT_AB_SHAPE")); err == nil {
		shapes = shapes[i : i+1]
	}
	for _, sh := range shapes {
		m, k, n := sh[0], sh[1], sh[2]
		a := make([]uint8, m*k)
		for i := range a {
			a[i] = uint8(r.IntN(256))
		}
		w := make([]int8, n*k)
		for i := range w {
			w[i] = int8(r.IntN(256) - 128)
		}
		for _, tile := range tiles {
			mr, nr := tile[0], tile[1]
			p, _ := PackS8(n, k, w, k, nr)
			kk := vnniKernel("x", mr, nr, vnniMicros[nr][:mr+1], vnniEpilogueFor(nr, true), vnniAvailable)
			outs := make([][]int32, len(vs))
			for i := range outs {
				outs[i] = make([]int32, m*n)
			}
			times := make([][]float64, len(vs))
			reps := 15
			if n, err := strconv.Atoi(os.Getenv("INT8BERT_AB_REPS")); err == nil {
				reps = n
			}
			for rep := 0; rep < reps; rep++ {
				for i, v := range vs {
					v.set()
					g := &GEMMU8S8{M: m, N: n, K: k, A: a, Lda: k, B: p, Out: Out{S32: outs[i], Ldc: n}}
					t0 := threadTime()
					for range 3 {
						if err := kk.RunU8S8(g); err != nil {
							t.Fatal(err)
						}
					}
					times[i] = append(times[i], (threadTime()-t0)/3)
				}
			}
			reset()
			for i := range outs {
				for q := range outs[i] {
					if outs[i][q] != outs[0][q] {
						t.Fatalf("%s differs from %s at %d", vs[i].name, vs[0].name, q)
					}
				}
			}
			s := ""
			for i, v := range vs {
				sort.Float64s(times[i])
				best, med := times[i][0], times[i][len(times[i])/2]
				s += fmt.Sprintf("  %s %.1f/%.1f", v.name, 2*float64(m*n*k)/best/1e9, 2*float64(m*n*k)/med/1e9)
			}
			t.Logf("%dx%dx%d %dx%d GOP/s best/median:%s", m, k, n, mr, nr, s)
		}
	}
}
