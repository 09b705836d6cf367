package kernels

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/int8bert/int8bert/cpu"
)

// bf16Case is one GEMM of the BF16 kernel tests.
type bf16Case struct {
	m, n, k    int
	padA, padC int
	epKind     int // 0 nil, 1 bias, 2 bias+gelu, 3 bias+gelu+residual, 4 residual (strided), 5 bias+relu, 6 gelu_tanh+residual
	threads    int
}

func (c bf16Case) String() string {
	return fmt.Sprintf("m%d_n%d_k%d_pa%d_pc%d_ep%d_t%d", c.m, c.n, c.k, c.padA, c.padC, c.epKind, c.threads)
}

// bf16Problem is a case's random operands.
type bf16Problem struct {
	c        bf16Case
	a, w     []float32
	lda, ldc int
	ep       *Epilogue
}

func newBF16Problem(c bf16Case, seed uint64) *bf16Problem {
	r := rand.New(rand.NewPCG(seed, uint64(c.m*7919+c.n*31+c.k)))
	p := &bf16Problem{c: c, lda: max(c.k+c.padA, 1), ldc: max(c.n+c.padC, 1)}
	p.a = make([]float32, max(0, (c.m-1)*p.lda+c.k)+c.padA)
	p.w = make([]float32, c.n*c.k)
	for i := range p.a {
		p.a[i] = float32(r.NormFloat64())
	}
	for i := range p.w {
		p.w[i] = float32(r.NormFloat64() * 0.3)
	}
	if c.epKind == 0 {
		return p
	}
	ep := &Epilogue{}
	if c.epKind != 4 && c.epKind != 6 {
		ep.Bias = make([]float32, c.n)
		for i := range ep.Bias {
			ep.Bias[i] = float32(r.NormFloat64())
		}
	}
	switch c.epKind {
	case 2, 3:
		ep.Act = ActGELU
	case 5:
		ep.Act = ActReLU
	case 6:
		ep.Act = ActGELUTanh
	}
	if c.epKind == 3 || c.epKind == 4 || c.epKind == 6 {
		ldr := c.n
		if c.epKind == 4 {
			ldr, ep.LdResidual = c.n+3, c.n+3
		}
		ep.Residual = make([]float32, max(0, (c.m-1)*ldr+c.n))
		for i := range ep.Residual {
			ep.Residual[i] = float32(r.NormFloat64())
		}
	}
	p.ep = ep
	return p
}

// run runs kern on the problem and returns C (ldc stride), checking that
// nothing outside C is written and the inputs are left alone.
func (p *bf16Problem) run(kern *KernelBF16, ep *Epilogue) ([]float32, error) {
	c := p.c
	pk, err := PackBF16(c.n, c.k, p.w, max(c.k, 1), kern.NR)
	if err != nil {
		return nil, err
	}
	clen := max(0, (c.m-1)*p.ldc+c.n)
	cbuf := make([]float32, clen+2*f32Guard)
	for i := range cbuf {
		cbuf[i] = f32Sentinel
	}
	out := cbuf[f32Guard : f32Guard+clen]
	a0, pk0 := slices.Clone(p.a), slices.Clone(pk.Data)
	g := &GEMMBF16{M: c.m, N: c.n, K: c.k, A: p.a, Lda: p.lda, B: pk, Ep: ep, C: out, Ldc: p.ldc, Threads: c.threads}
	if err := kern.Run(g); err != nil {
		return nil, err
	}
	if !slices.Equal(p.a, a0) || !slices.Equal(pk.Data, pk0) {
		return nil, errors.New("inputs a or b changed")
	}
	for i := range cbuf {
		if i >= f32Guard && i < f32Guard+clen && (i-f32Guard)%p.ldc < c.n {
			continue
		}
		if math.Float32bits(cbuf[i]) != math.Float32bits(f32Sentinel) {
			return nil, fmt.Errorf("wrote outside C at buffer index %d", i)
		}
	}
	return out, nil
}

func bf16TestCases() []bf16Case {
	var cs []bf16Case
	for _, mnk := range [][3]int{
		{1, 1, 1}, {1, 16, 2}, {1, 64, 768}, {2, 17, 3}, {3, 33, 7}, {5, 48, 16}, {6, 64, 64},
		{7, 65, 33}, {8, 47, 101}, {13, 100, 128}, {14, 32, 9}, {15, 129, 255}, {29, 96, 64},
		{37, 200, 130}, {64, 64, 1}, {100, 40, 257}, {3, 20, 0}, {0, 16, 4},
	} {
		for _, ep := range []int{0, 1, 2, 3, 4, 5, 6} {
			for _, th := range []int{1, 3} {
				c := bf16Case{m: mnk[0], n: mnk[1], k: mnk[2], epKind: ep, threads: th}
				if (mnk[0]+ep)%3 == 0 {
					c.padA, c.padC = 5, 3
				}
				cs = append(cs, c)
			}
		}
	}
	return cs
}

// TestBF16GenericRef holds the generic kernel to GemmBF16Ref (float64 sums
// of the same bf16 products): float32 summation error only.
func TestBF16GenericRef(t *testing.T) {
	for _, c := range bf16TestCases() {
		p := newBF16Problem(c, 1)
		got, err := p.run(GenericBF16, p.ep)
		if err != nil {
			t.Fatalf("%v: %v", c, err)
		}
		want := make([]float32, len(got))
		abs := make([]float64, c.m*c.n)
		if err := GemmBF16Ref(c.m, c.n, c.k, p.a, p.lda, p.w, max(c.k, 1), want, p.ldc, p.ep, abs); err != nil {
			t.Fatal(err)
		}
		if msg := bf16Compare(p, got, want, abs, 1e-6, 4e-7); msg != "" {
			t.Fatalf("%v: %s", c, msg)
		}
	}
}

// bf16Compare compares got with want on the case's elements within
// rel*sum|a||w| plus epi times the magnitudes of the epilogue's terms.
func bf16Compare(p *bf16Problem, got, want []float32, abs []float64, rel, epi float64) string {
	c := p.c
	for i := 0; i < c.m; i++ {
		for j := 0; j < c.n; j++ {
			x, y := float64(got[i*p.ldc+j]), float64(want[i*p.ldc+j])
			tol := rel*abs[i*c.n+j] + epi*math.Abs(y) + 1e-30
			if p.ep != nil {
				tol *= 1.2
				if p.ep.Bias != nil {
					tol += epi * math.Abs(float64(p.ep.Bias[j]))
				}
				if p.ep.Residual != nil {
					tol += epi * math.Abs(float64(p.ep.Residual[i*p.ep.ldr(c.n)+j]))
				}
				if p.ep.Act != ActNone {
					tol += 4e-7 // the rational GELU's absolute error
				}
			}
			if !(math.Abs(x-y) <= tol) {
				return fmt.Sprintf("C[%d][%d] = %v, want %v (tol %g)", i, j, x, y, tol)
			}
		}
	}
	return ""
}

// TestBF16Kernels holds every kernel to the generic one: the accumulators
// (no epilogue) bit for bit, since both sum the same products in the same
// order; with an epilogue within a few float32 roundings (the assembly
// epilogue sums in float32 and uses the rational GELU).
func TestBF16Kernels(t *testing.T) {
	for _, kern := range BF16Kernels() {
		if kern.ISA == cpu.ISAGeneric {
			continue
		}
		t.Run(kern.Name, func(t *testing.T) {
			if !kern.Available(cpu.X86) {
				t.Skipf("CPU lacks %s (%s): cannot run %s", kern.ISA, cpu.X86, kern.Name)
			}
			for _, c := range bf16TestCases() {
				p := newBF16Problem(c, 2)
				want, err := p.run(GenericBF16, p.ep)
				if err != nil {
					t.Fatalf("%v generic: %v", c, err)
				}
				got, err := p.run(kern, p.ep)
				if err != nil {
					t.Fatalf("%v: %v", c, err)
				}
				if p.ep == nil {
					for i := range got {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) && i%p.ldc < c.n {
							t.Fatalf("%v: C[%d][%d] = %v, generic %v (not bit-exact)", c, i/p.ldc, i%p.ldc, got[i], want[i])
						}
					}
					continue
				}
				// The epilogue alone differs: compare with the generic
				// result's own accumulators as the scale.
				acc, err := p.run(GenericBF16, nil)
				if err != nil {
					t.Fatal(err)
				}
				abs := make([]float64, c.m*c.n)
				for i := range abs {
					abs[i] = math.Abs(float64(acc[i/c.n*p.ldc+i%c.n]))
				}
				if msg := bf16Compare(p, got, want, abs, 1e-6, 1e-6); msg != "" {
					t.Fatalf("%v: %s", c, msg)
				}
			}
		})
	}
}

// TestBF16LongK runs K over several slabs (bf16KC): the kernels start each
// slab from C, so the summation stays one chain, bit for bit the generic
// kernel's.
func TestBF16LongK(t *testing.T) {
	for _, kern := range BF16Kernels()[1:] {
		if !kern.Available(cpu.X86) {
			t.Skipf("CPU lacks %s (%s): cannot run %s", kern.ISA, cpu.X86, kern.Name)
		}
		for _, c := range []bf16Case{{m: 9, n: 70, k: 9001, threads: 2}, {m: 3, n: 17, k: 8193, epKind: 3, threads: 1}} {
			p := newBF16Problem(c, 3)
			want, err := p.run(GenericBF16, nil)
			if err != nil {
				t.Fatal(err)
			}
			got, err := p.run(kern, nil)
			if err != nil {
				t.Fatal(err)
			}
			for i := range got {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("%s %v: C[%d][%d] = %v, generic %v", kern.Name, c, i/p.ldc, i%p.ldc, got[i], want[i])
				}
			}
		}
	}
}

// TestBF16Rounding checks that both operands are rounded to bf16 (half to
// even) before the products: values whose bf16 products are exact give an
// exact result that differs from the f32 product.
func TestBF16Rounding(t *testing.T) {
	// 1 + 2^-8 rounds to 1 (tie, even), 1 + 3*2^-8 to 1 + 2^-6 (tie, up to
	// even mantissa 0000010).
	a := []float32{1 + 0x1p-8, 1 + 3*0x1p-8, 3}
	w := []float32{1, 1, 1 + 0x1p-9}
	want := float32(1 + (1 + 0x1p-6) + 3)
	for _, kern := range BF16Kernels() {
		if !kern.Available(cpu.X86) {
			continue
		}
		pk, err := PackBF16(1, 3, w, 3, kern.NR)
		if err != nil {
			t.Fatal(err)
		}
		c := make([]float32, 1)
		if err := kern.Run(&GEMMBF16{M: 1, N: 1, K: 3, A: a, Lda: 3, B: pk, C: c, Ldc: 1}); err != nil {
			t.Fatal(err)
		}
		if c[0] != want {
			t.Errorf("%s: got %v, want %v", kern.Name, c[0], want)
		}
	}
}

// TestBF16FeatureOff disables AVX512-BF16: the assembly kernels become
// unavailable and refuse to run; the generic one still runs.
func TestBF16FeatureOff(t *testing.T) {
	saved := cpu.X86
	defer func() { cpu.X86 = saved }()
	off, err := saved.Apply("avx512bf16")
	if err != nil {
		t.Fatal(err)
	}
	cpu.X86 = off
	for _, k := range BF16Kernels() {
		pk, _ := PackBF16(4, 4, make([]float32, 16), 4, k.NR)
		g := &GEMMBF16{M: 1, N: 4, K: 4, A: make([]float32, 4), Lda: 4, B: pk, C: make([]float32, 4), Ldc: 4}
		err := k.Run(g)
		if k.ISA == cpu.ISAGeneric {
			if err != nil {
				t.Errorf("%s: %v", k.Name, err)
			}
			continue
		}
		if k.Available(cpu.X86) {
			t.Errorf("%s available with avx512bf16 disabled", k.Name)
		}
		if err == nil {
			t.Errorf("%s ran with avx512bf16 disabled", k.Name)
		}
	}
}

func TestBF16BadShapes(t *testing.T) {
	if _, err := PackBF16(4, 8, make([]float32, 32), 8, 24); !errors.Is(err, ErrShape) {
		t.Errorf("nr=24: %v", err)
	}
	if _, err := PackBF16(4, 8, make([]float32, 31), 8, 16); !errors.Is(err, ErrShape) {
		t.Errorf("short w: %v", err)
	}
	for _, kern := range BF16Kernels() {
		if !kern.Available(cpu.X86) {
			continue
		}
		pk, err := PackBF16(4, 8, make([]float32, 32), 8, kern.NR)
		if err != nil {
			t.Fatal(err)
		}
		other, _ := PackBF16(4, 8, make([]float32, 32), 8, kern.NR+16)
		c := make([]float32, 8)
		for name, g := range map[string]*GEMMBF16{
			"nil b":     {M: 2, N: 4, K: 8, A: make([]float32, 16), Lda: 8, C: c, Ldc: 4},
			"short a":   {M: 2, N: 4, K: 8, A: make([]float32, 15), Lda: 8, B: pk, C: c, Ldc: 4},
			"small lda": {M: 2, N: 4, K: 8, A: make([]float32, 16), Lda: 7, B: pk, C: c, Ldc: 4},
			"short c":   {M: 2, N: 4, K: 8, A: make([]float32, 16), Lda: 8, B: pk, C: c[:7], Ldc: 4},
			"wrong k":   {M: 2, N: 4, K: 6, A: make([]float32, 16), Lda: 8, B: pk, C: c, Ldc: 4},
			"a is c":    {M: 1, N: 4, K: 8, A: c, Lda: 8, B: pk, C: c, Ldc: 4},
			"bias":      {M: 2, N: 4, K: 8, A: make([]float32, 16), Lda: 8, B: pk, C: c, Ldc: 4, Ep: &Epilogue{Bias: make([]float32, 3)}},
			"residual":  {M: 2, N: 4, K: 8, A: make([]float32, 16), Lda: 8, B: pk, C: c, Ldc: 4, Ep: &Epilogue{Residual: c}},
			"act":       {M: 2, N: 4, K: 8, A: make([]float32, 16), Lda: 8, B: pk, C: c, Ldc: 4, Ep: &Epilogue{Act: 9}},
		} {
			if err := kern.Run(g); !errors.Is(err, ErrShape) {
				t.Errorf("%s %s: %v", kern.Name, name, err)
			}
		}
		if kern.ISA != cpu.ISAGeneric {
			g := &GEMMBF16{M: 2, N: 4, K: 8, A: make([]float32, 16), Lda: 8, B: other, C: c, Ldc: 4}
			if err := kern.Run(g); !errors.Is(err, ErrShape) {
				t.Errorf("%s wrong nr: %v", kern.Name, err)
			}
		}
	}
}

func TestPackBF16Layout(t *testing.T) {
	n, k := 37, 9
	w := make([]float32, n*k)
	for i := range w {
		w[i] = float32(i%251) - 100.5
	}
	for _, nr := range []int{16, 32, 48, 64} {
		p, err := PackBF16(n, k, w, k, nr)
		if err != nil {
			t.Fatal(err)
		}
		if p.KP() != 10 || len(p.Data) != (n+nr-1)/nr*nr*10 {
			t.Fatalf("nr %d: kp %d len %d", nr, p.KP(), len(p.Data))
		}
		nonzero := 0
		for _, h := range p.Data {
			if h != 0 {
				nonzero++
			}
		}
		for j := 0; j < n; j++ {
			for q := 0; q < p.KP(); q++ {
				want := uint16(0)
				if q < k {
					want = ToBF16(w[j*k+q])
				}
				if got := p.At(j, q); got != want {
					t.Fatalf("nr %d: W[%d][%d] = %#x, want %#x", nr, j, q, got, want)
				}
			}
		}
		if nonzero > n*k {
			t.Fatalf("nr %d: %d nonzero values in the padding", nr, nonzero-n*k)
		}
	}
}

func TestBF16DAZ(t *testing.T) {
	for _, c := range []struct {
		x    float32
		want uint16
	}{
		{1, 0x3f80}, {-2, 0xc000}, {math.Float32frombits(0x00400000), 0}, {-math.Float32frombits(0x00010000), 0x8000},
		{math.Float32frombits(0x007fffff), 0x0080}, // rounds up to the least normal
		{float32(math.Inf(-1)), 0xff80}, {math.Float32frombits(0x7f800001), 0x7fc0},
	} {
		if got := bf16DAZ(c.x); got != c.want {
			t.Errorf("bf16DAZ(%v = %#x) = %#x, want %#x", c.x, math.Float32bits(c.x), got, c.want)
		}
	}
}

// BenchmarkBF16 times the BF16 kernels against the FP32 ones on one
// thread, 256 x 1024 x 1024 (a BERT-base-like linear), in GFLOP/s
// (2 M N K per call).
func BenchmarkBF16(b *testing.B) {
	const m, k, n = 256, 1024, 1024
	r := rand.New(rand.NewPCG(1, 2))
	a := make([]float32, m*k)
	w := make([]float32, n*k)
	for i := range a {
		a[i] = float32(r.NormFloat64())
	}
	for i := range w {
		w[i] = float32(r.NormFloat64() * 0.05)
	}
	flops := func(b *testing.B) {
		b.ReportMetric(2*float64(m*n*k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	}
	for _, kern := range BF16Kernels() {
		if kern.ISA == cpu.ISAGeneric {
			continue
		}
		b.Run(fmt.Sprintf("M%d_K%d_N%d/bf16/%s", m, k, n, kern.Name), func(b *testing.B) {
			if !kern.Available(cpu.X86) {
				b.Skipf("CPU lacks %s", kern.ISA)
			}
			pk, err := PackBF16(n, k, w, k, kern.NR)
			if err != nil {
				b.Fatal(err)
			}
			g := &GEMMBF16{M: m, N: n, K: k, A: a, Lda: k, B: pk, C: make([]float32, m*n), Ldc: n, Threads: 1}
			for b.Loop() {
				if err := kern.Run(g); err != nil {
					b.Fatal(err)
				}
			}
			flops(b)
		})
	}
	for _, kern := range F32Kernels() {
		if kern.ISA == cpu.ISAGeneric {
			continue
		}
		b.Run(fmt.Sprintf("M%d_K%d_N%d/f32/%s", m, k, n, kern.Name), func(b *testing.B) {
			if !kern.Available(cpu.X86) {
				b.Skipf("CPU lacks %s", kern.ISA)
			}
			pk, err := PackF32(n, k, w, k, kern.NR)
			if err != nil {
				b.Fatal(err)
			}
			g := &GEMMF32{M: m, N: n, K: k, A: a, Lda: k, B: pk, C: make([]float32, m*n), Ldc: n, Threads: 1}
			for b.Loop() {
				if err := kern.Run(g); err != nil {
					b.Fatal(err)
				}
			}
			flops(b)
		})
	}
}
