package kernels

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/int8bert/int8bert/cpu"
)

// The VNNI variants that remain selectable, as sub-benchmarks named
// key=value so that benchstat can set them side by side (for example
// benchstat -col /path old.txt). Run them pinned on one thread:
//
//	taskset -c 1 go test -run '^$' -bench 'VNNI(Path|GELU|Epilogue)' -count 10 ./kernels

// vnniBenchOperands returns random u8 activations (m x k) and s8 weights
// (n x k) packed for panels nr wide, with column scales and a bias.
func vnniBenchOperands(b testing.TB, m, k, n, nr int) (a []uint8, p *PackedS8, cs, bias []float32) {
	r := rand.New(rand.NewPCG(7, 8))
	a = make([]uint8, m*k)
	for i := range a {
		a[i] = uint8(r.IntN(256))
	}
	w := make([]int8, n*k)
	for i := range w {
		w[i] = int8(r.IntN(255) - 127)
	}
	p, err := PackS8(n, k, w, k, nr)
	if err != nil {
		b.Fatal(err)
	}
	cs, bias = make([]float32, n), make([]float32, n)
	for i := range cs {
		cs[i], bias[i] = 0.0002*float32(r.Float64()+0.5), float32(r.NormFloat64())
	}
	return a, p, cs, bias
}

// benchVNNIRun times kn on g and reports GOP/s (2*M*N*K per call).
func benchVNNIRun(b *testing.B, kn *Kernel, g *GEMMU8S8) {
	for b.Loop() {
		if err := kn.RunU8S8(g); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(2*float64(g.M*g.N*g.K)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GOP/s")
}

// BenchmarkVNNIPath times gemmVNNI_8x48 on BERT's GEMMs with their encoder
// epilogues along its two paths: path=fused, the micro-kernels with the
// epilogue in registers (what the registered kernel runs), and
// path=unfused, the tile store and assembly epilogue that activations
// without an assembly form take; path=s32 is the same GEMM without an
// epilogue.
func BenchmarkVNNIPath(b *testing.B) {
	if !vnniAvailable(cpu.X86) {
		b.Skipf("the VNNI assembly is not available here (asm build %v): %s", vnniAsm, cpu.X86)
	}
	const mr, nr = 8, 48
	fused := newVNNIKernel(mr, nr)
	unfused := vnniKernel("unfused", mr, nr, vnniMicros[nr][:mr+1], vnniEpilogueFor(nr), vnniAvailable)
	for _, sh := range []struct {
		name    string
		m, k, n int
	}{
		{"QKV_f32_bias", 256, 1024, 3072},
		{"FFN1_u8_gelu", 256, 1024, 4096},
		{"FFN2_f32_residual", 256, 4096, 1024},
		{"baseQKV_f32_bias", 128, 768, 2304},
	} {
		m, k, n := sh.m, sh.k, sh.n
		a, p, cs, bias := vnniBenchOperands(b, m, k, n, nr)
		ep := &Epilogue{ZeroPoint: 128, ColSum: p.ColSum, ActScale: 1.0 / 128, ColScale: cs, Bias: bias}
		out := Out{F32: make([]float32, m*n), Ldc: n}
		switch sh.name {
		case "FFN1_u8_gelu":
			ep.Act, ep.OutScale, ep.OutZeroPoint = ActGELU, 0.03, 6
			out = Out{U8: make([]uint8, m*n), Ldc: n}
		case "FFN2_f32_residual":
			ep.Residual = make([]float32, m*n)
		}
		for _, v := range []struct {
			path string
			kn   *Kernel
			ep   *Epilogue
			out  Out
		}{{"fused", fused, ep, out}, {"unfused", unfused, ep, out}, {"s32", fused, nil, Out{S32: make([]int32, m*n), Ldc: n}}} {
			b.Run(fmt.Sprintf("gemm=%s/path=%s", sh.name, v.path), func(b *testing.B) {
				benchVNNIRun(b, v.kn, &GEMMU8S8{M: m, N: n, K: k, A: a, Lda: k, B: p, Ep: v.ep, Out: v.out, Threads: 1})
			})
		}
	}
}

// BenchmarkVNNIGELU times the FFN up-projection's GEMM with its GELU on
// gemmVNNI_8x48: gelu=rational, the rational GELU (geluQ8F32) of every u8
// output and of f32 ones by default, and gelu=precise, the erfc form an
// f32 output gets with Epilogue.PreciseGELU.
func BenchmarkVNNIGELU(b *testing.B) {
	if !vnniAvailable(cpu.X86) {
		b.Skipf("the VNNI assembly is not available here (asm build %v): %s", vnniAsm, cpu.X86)
	}
	kn := newVNNIKernel(8, 48)
	for _, sh := range [][3]int{{256, 1024, 4096}, {128, 768, 3072}} {
		m, k, n := sh[0], sh[1], sh[2]
		a, p, cs, bias := vnniBenchOperands(b, m, k, n, kn.NR)
		for _, v := range []struct {
			name    string
			u8      bool
			precise bool
		}{{"out=u8/gelu=rational", true, false}, {"out=f32/gelu=rational", false, false}, {"out=f32/gelu=precise", false, true}} {
			ep := &Epilogue{ZeroPoint: 128, ColSum: p.ColSum, ActScale: 1.0 / 128, ColScale: cs, Bias: bias, Act: ActGELU, PreciseGELU: v.precise}
			out := Out{F32: make([]float32, m*n), Ldc: n}
			if v.u8 {
				ep.OutScale, ep.OutZeroPoint = 0.03, 6
				out = Out{U8: make([]uint8, m*n), Ldc: n}
			}
			b.Run(fmt.Sprintf("shape=%dx%dx%d/%s", m, k, n, v.name), func(b *testing.B) {
				benchVNNIRun(b, kn, &GEMMU8S8{M: m, N: n, K: k, A: a, Lda: k, B: p, Ep: ep, Out: out, Threads: 1})
			})
		}
	}
}

// BenchmarkVNNIEpilogue times the assembly epilogues alone on one tile in
// L1, with and without GELU: poly=split, the driver's (two Horner chains
// per polynomial), and poly=horner, the plain Horner ones of the same
// bits; ns/vector is per 16 outputs.
func BenchmarkVNNIEpilogue(b *testing.B) {
	if !vnniAvailable(cpu.X86) {
		b.Skipf("the VNNI assembly is not available here (asm build %v): %s", vnniAsm, cpu.X86)
	}
	r := rand.New(rand.NewPCG(5, 6))
	for _, c := range []struct {
		name    string
		rows, n int
		epi     vnniEpi
	}{
		{"tile=8x48/poly=horner", 8, 48, vnniEpilogue3}, {"tile=8x48/poly=split", 8, 48, vnniEpilogue3S},
		{"tile=6x64/poly=horner", 6, 64, vnniEpilogue}, {"tile=6x64/poly=split", 6, 64, vnniEpilogueS},
	} {
		acc := make([]int32, c.rows*c.n)
		for i := range acc {
			acc[i] = int32(r.IntN(1<<16) - 1<<15)
		}
		dst := make([]float32, c.rows*c.n)
		cs, bias := make([]float32, c.n), make([]float32, c.n)
		for i := range cs {
			cs[i], bias[i] = 1e-4, float32(r.NormFloat64())
		}
		for _, act := range []struct {
			name  string
			flags int
		}{{"none", 0}, {"gelu", vnniGELU}} {
			b.Run(c.name+"/act="+act.name, func(b *testing.B) {
				for b.Loop() {
					c.epi((*byte)(unsafe.Pointer(&dst[0])), c.n, &acc[0], c.n, c.rows, c.n, nil, 0, nil, 1, &cs[0], &bias[0], nil, 0, act.flags, 0, 0, 0, 0)
				}
				b.ReportMetric(b.Elapsed().Seconds()*1e9/float64(b.N)/float64(c.rows*c.n/16), "ns/vector")
			})
		}
	}
}
