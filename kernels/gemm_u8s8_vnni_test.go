package kernels_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/int8bert/int8bert/cpu"
	"github.com/int8bert/int8bert/kernels"
	"github.com/int8bert/int8bert/kernels/kernelstest"
)

func TestU8S8Kernels(t *testing.T) {
	for _, k := range kernels.U8S8Kernels() {
		t.Run(k.Name, func(t *testing.T) { kernelstest.GEMM(t, k) })
	}
}

// TestVNNIGoTwins runs the suite on the VNNI driver over the Go twins of
// the micro-kernels and the epilogue, on every build and CPU.
func TestVNNIGoTwins(t *testing.T) {
	for _, k := range kernels.VNNIGoTwinKernels() {
		t.Run(k.Name, func(t *testing.T) { kernelstest.GEMM(t, k) })
	}
}

// TestVNNIRegistered checks that builds with assembly list the VNNI kernels.
func TestVNNIRegistered(t *testing.T) {
	names := map[string]bool{}
	for _, k := range kernels.U8S8Kernels() {
		names[k.Name] = true
	}
	for _, k := range kernels.VNNIKernels() {
		if !names[k.Name] && vnniAvailableOnBuild() {
			t.Errorf("%s missing from U8S8Kernels", k.Name)
		}
	}
}

// vnniAvailableOnBuild reports whether this build has the VNNI assembly: its
// kernels are available on a feature set with everything on.
func vnniAvailableOnBuild() bool {
	all := cpu.Features{AVX2: true, AVX512F: true, AVX512BW: true, AVX512VL: true, AVX512VNNI: true}
	return kernels.VNNIKernels()[0].Available(all)
}

// TestVNNIFeatureToggle turns features off as INT8BERT_CPU_DISABLE does and
// checks that the VNNI kernels then report themselves unavailable (and that
// the suite then skips), so both sides of the check run on one host.
func TestVNNIFeatureToggle(t *testing.T) {
	for _, off := range []string{"avx512vnni", "avx512bw", "avx512vl", "avx512", "avx2"} {
		f, err := cpu.X86.Apply(off)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range kernels.VNNIKernels() {
			if k.Available(f) {
				t.Errorf("%s available with %s disabled (%s)", k.Name, off, f)
			}
		}
	}
	if !vnniAvailableOnBuild() {
		t.Logf("this build has no VNNI assembly (noasm, purego or not amd64): the kernels are never available")
		return
	}
	all := cpu.Features{AVX512F: true, AVX512BW: true, AVX512VL: true, AVX512VNNI: true}
	for _, k := range kernels.VNNIKernels() {
		if !k.Available(all) {
			t.Errorf("%s unavailable with every feature on", k.Name)
		}
	}
	t.Logf("this host: %s; VNNI kernels available: %v", cpu.X86.Int8Path(), kernels.VNNIKernels()[0].Available(cpu.X86))
}

// FuzzGEMMU8S8 compares every available u8 x s8 kernel with the generic
// twin on fuzzed shapes, strides, seeds and epilogues.
func FuzzGEMMU8S8(f *testing.F) {
	f.Add(uint16(1), uint16(1), uint16(1), uint8(0), uint8(0), uint64(1), uint8(0), uint8(1))
	f.Add(uint16(9), uint16(50), uint16(67), uint8(3), uint8(1), uint64(2), uint8(3), uint8(2))
	f.Add(uint16(13), uint16(65), uint16(130), uint8(0), uint8(7), uint64(3), uint8(8), uint8(1))
	f.Add(uint16(7), uint16(33), uint16(5), uint8(1), uint8(0), uint64(4), uint8(9), uint8(2))
	f.Add(uint16(5), uint16(70), uint16(2222), uint8(1), uint8(2), uint64(5), uint8(8), uint8(200))
	ks := append(kernels.U8S8Kernels(), kernels.VNNIGoTwinKernels()...)
	f.Fuzz(func(t *testing.T, m, n, k uint16, padA, padC uint8, seed uint64, ep, threads uint8) {
		c := kernelstest.Case{M: int(m % 70), N: int(n % 300), K: int(k % 600), Seed: seed,
			Epilogue: kernelstest.Epilogues[int(ep)%len(kernelstest.Epilogues)], Threads: 1 + int(threads%3)}
		if threads >= 128 { // long K (several K steps), small M and N
			c.M, c.N, c.K = int(m%9), int(n%100), 1500+int(k%3000)
		}
		if padA%4 != 0 {
			c.Lda = c.K + int(padA%8)
		}
		if padC%4 != 0 {
			c.Ldc = c.N + int(padC%8)
		}
		for _, kn := range ks {
			if !kn.Available(cpu.X86) || !kn.Accepts(c.M, c.N, c.K) {
				continue
			}
			if err := kernelstest.Run(kn, c); err != nil {
				t.Fatalf("%s: %s: %v", kn.Name, c, err)
			}
		}
	})
}

// BenchmarkVNNI times the VNNI kernels on one thread on BERT's linear
// shapes (M tokens x K in -> N out) with s32, fused f32 (compensation,
// scales, bias) and fused GELU + u8 destinations, and reports GOP/s (2*M*N*K
// per call). Pin it (taskset -c 1) and compare runs of one invocation only:
// the shared hosts are noisy. BenchmarkVNNIMicro gives the micro-kernels'
// in-L1 ceiling for the ratio.
func BenchmarkVNNI(b *testing.B) {
	shapes := []struct{ m, k, n int }{
		{256, 1024, 1024}, {256, 1024, 4096}, {256, 4096, 1024},
		{128, 768, 768}, {128, 768, 2304}, {128, 768, 3072}, {128, 3072, 768},
	}
	for _, kn := range kernels.VNNIKernels() {
		if !kn.Available(cpu.X86) {
			b.Logf("%s: not available on this CPU (%s)", kn.Name, cpu.X86)
			continue
		}
		for _, s := range shapes {
			r := rand.New(rand.NewPCG(1, 2))
			a := make([]uint8, s.m*s.k)
			for i := range a {
				a[i] = uint8(r.IntN(256))
			}
			w := make([]int8, s.n*s.k)
			for i := range w {
				w[i] = int8(r.IntN(255) - 127)
			}
			p, err := kernels.PackS8(s.n, s.k, w, s.k, kn.NR)
			if err != nil {
				b.Fatal(err)
			}
			cs := make([]float32, s.n)
			bias := make([]float32, s.n)
			for j := range cs {
				cs[j], bias[j] = 1e-4, 0.5
			}
			for _, out := range []string{"s32", "f32", "gelu-u8"} {
				g := &kernels.GEMMU8S8{M: s.m, N: s.n, K: s.k, A: a, Lda: s.k, B: p, Threads: 1}
				switch out {
				case "s32":
					g.Out = kernels.Out{S32: make([]int32, s.m*s.n), Ldc: s.n}
				case "f32":
					g.Out = kernels.Out{F32: make([]float32, s.m*s.n), Ldc: s.n}
					g.Ep = &kernels.Epilogue{ZeroPoint: 128, ColSum: p.ColSum, ActScale: 1.0 / 128, ColScale: cs, Bias: bias}
				case "gelu-u8":
					g.Out = kernels.Out{U8: make([]uint8, s.m*s.n), Ldc: s.n}
					g.Ep = &kernels.Epilogue{ZeroPoint: 128, ColSum: p.ColSum, ActScale: 1.0 / 128, ColScale: cs, Bias: bias, Act: kernels.ActGELU, OutScale: 0.05, OutZeroPoint: 10}
				}
				name := strings.Join([]string{kn.Name, fmt.Sprintf("M%d_K%d_N%d", s.m, s.k, s.n), out}, "/")
				b.Run(name, func(b *testing.B) {
					for b.Loop() {
						if err := kn.RunU8S8(g); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(2*float64(s.m)*float64(s.n)*float64(s.k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GOP/s")
				})
			}
		}
	}
}

// TestVNNIRejectsForeignPacking checks the shape errors of the driver:
// weights packed for another panel width, and K beyond what Accepts takes.
func TestVNNIRejectsForeignPacking(t *testing.T) {
	w := make([]int8, 20*8)
	p, err := kernels.PackS8(20, 8, w, 8, 16)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range append(kernels.VNNIKernels(), kernels.VNNIGoTwinKernels()...) {
		g := &kernels.GEMMU8S8{M: 3, N: 20, K: 8, A: make([]uint8, 24), Lda: 8, B: p, Out: kernels.Out{S32: make([]int32, 60), Ldc: 20}}
		if err := k.RunU8S8(g); !errors.Is(err, kernels.ErrShape) {
			t.Errorf("%s on NR=16 weights: err = %v, want ErrShape", k.Name, err)
		}
		if k.Accepts(1, 1, 1<<16) || !k.Accepts(256, 4096, 4096) {
			t.Errorf("%s: Accepts wrong about K", k.Name)
		}
	}
}
