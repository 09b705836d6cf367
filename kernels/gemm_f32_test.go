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

// f32Case is one GEMM of the FP32 kernel tests.
type f32Case struct {
	m, n, k       int
	padA, padC    int // extra stride
	epKind        int // 0 nil, 1 bias, 2 bias+gelu, 3 bias+gelu+residual, 4 residual, 5 relu+bias, 6 gelu_tanh+residual, 7 gelu only
	padR, threads int
}

func (c f32Case) String() string {
	return fmt.Sprintf("m%d_n%d_k%d_pa%d_pc%d_ep%d_pr%d_t%d", c.m, c.n, c.k, c.padA, c.padC, c.epKind, c.padR, c.threads)
}

const f32Guard = 37

var f32Sentinel = float32(math.Float32frombits(0x7fc0dead))

// runF32Case runs kernel kern on case c with random data from seed and
// compares it with GemmF32Ref. It returns a description of the first
// mismatch, or "".
func runF32Case(kern *KernelF32, c f32Case, seed uint64) string {
	r := rand.New(rand.NewPCG(seed, uint64(c.m*7919+c.n*31+c.k)))
	lda, ldc, ldw := c.k+c.padA, c.n+c.padC, c.k+c.padA%3
	lda, ldw = max(lda, 1), max(ldw, 1)
	ldc = max(ldc, 1)
	a := make([]float32, max(0, (c.m-1)*lda+c.k)+c.padA)
	w := make([]float32, max(0, (c.n-1)*ldw+c.k))
	for i := range a {
		a[i] = float32(r.NormFloat64())
	}
	for i := range w {
		w[i] = float32(r.NormFloat64() * 0.3)
	}
	var ep *Epilogue
	ldr := c.n + c.padR
	if c.epKind != 0 {
		ep = &Epilogue{}
		if c.epKind != 4 && c.epKind != 6 && c.epKind != 7 {
			ep.Bias = make([]float32, c.n)
			for i := range ep.Bias {
				ep.Bias[i] = float32(r.NormFloat64())
			}
		}
		switch c.epKind {
		case 2, 3, 7:
			ep.Act = ActGELU
		case 5:
			ep.Act = ActReLU
		case 6:
			ep.Act = ActGELUTanh
		}
		if c.epKind == 3 || c.epKind == 4 || c.epKind == 6 {
			ep.LdResidual = ldr
			if c.padR == 0 {
				ep.LdResidual = 0
				ldr = c.n
			}
			ep.Residual = make([]float32, max(0, (c.m-1)*ldr+c.n))
			for i := range ep.Residual {
				ep.Residual[i] = float32(r.NormFloat64())
			}
		}
	}
	pk, err := PackF32(c.n, c.k, w, ldw, kern.NR)
	if err != nil {
		return "pack: " + err.Error()
	}
	clen := max(0, (c.m-1)*ldc+c.n)
	cbuf := make([]float32, clen+2*f32Guard)
	for i := range cbuf {
		cbuf[i] = f32Sentinel
	}
	cOut := cbuf[f32Guard : f32Guard+clen]
	want := make([]float32, clen)
	if err := GemmF32Ref(c.m, c.n, c.k, a, lda, w, ldw, want, ldc, ep); err != nil {
		return "ref: " + err.Error()
	}
	a0, pk0 := slices.Clone(a), slices.Clone(pk.Data)
	var bias0, res0 []float32
	if ep != nil {
		bias0, res0 = slices.Clone(ep.Bias), slices.Clone(ep.Residual)
	}
	g := &GEMMF32{M: c.m, N: c.n, K: c.k, A: a, Lda: lda, B: pk, Ep: ep, C: cOut, Ldc: ldc, Threads: c.threads}
	if err := kern.Run(g); err != nil {
		return "run: " + err.Error()
	}
	if !slices.Equal(a, a0) || !slices.Equal(pk.Data, pk0) {
		return "inputs a or b changed"
	}
	if ep != nil && (!slices.Equal(ep.Bias, bias0) || !slices.Equal(ep.Residual, res0)) {
		return "epilogue inputs changed"
	}
	for i := range cbuf {
		inC := i >= f32Guard && i < f32Guard+clen
		if inC {
			q := i - f32Guard
			if q%ldc < c.n {
				continue
			}
		}
		if math.Float32bits(cbuf[i]) != math.Float32bits(f32Sentinel) {
			return fmt.Sprintf("wrote outside C at buffer index %d (guard %d, len %d, ldc %d)", i, f32Guard, clen, ldc)
		}
	}
	for i := 0; i < c.m; i++ {
		for j := 0; j < c.n; j++ {
			var s float64
			for p := 0; p < c.k; p++ {
				s += math.Abs(float64(a[i*lda+p]) * float64(w[j*ldw+p]))
			}
			ref := float64(want[i*ldc+j])
			tol := 1e-5*s + 2e-6*math.Abs(ref) + 1e-30
			if ep != nil && ep.Bias != nil {
				tol += 1e-6 * math.Abs(float64(ep.Bias[j]))
			}
			if ep != nil && ep.Residual != nil {
				tol += 1e-6 * math.Abs(float64(ep.Residual[i*ldr+j]))
			}
			got := float64(cOut[i*ldc+j])
			if !(math.Abs(got-ref) <= tol) {
				return fmt.Sprintf("C[%d][%d] = %v, want %v (tol %g)", i, j, got, ref, tol)
			}
		}
	}
	return ""
}

func f32TestCases() []f32Case {
	var cs []f32Case
	for _, mnk := range [][3]int{
		{0, 5, 5}, {5, 0, 5}, {5, 5, 0}, {0, 0, 0}, {1, 1, 1}, {1, 16, 1}, {1, 17, 3}, {2, 33, 5},
		{3, 31, 7}, {14, 32, 8}, {15, 32, 9}, {16, 48, 16}, {29, 64, 33}, {7, 65, 100}, {31, 97, 257},
		{6, 200, 1}, {45, 50, 400}, {13, 130, 70},
	} {
		for _, ep := range []int{0, 1, 3} {
			cs = append(cs, f32Case{m: mnk[0], n: mnk[1], k: mnk[2], epKind: ep, threads: 1})
		}
	}
	for ep := 0; ep <= 7; ep++ {
		cs = append(cs, f32Case{m: 19, n: 75, k: 41, padA: 3, padC: 5, epKind: ep, padR: 2, threads: 1})
		cs = append(cs, f32Case{m: 37, n: 130, k: 300, padA: 1, padC: 2, epKind: ep, padR: 3, threads: 2})
	}
	for _, th := range []int{1, 2, 3} {
		cs = append(cs, f32Case{m: 64, n: 100, k: 700, epKind: 3, threads: th})
		cs = append(cs, f32Case{m: 5, n: 300, k: 20, epKind: 1, threads: th})
		cs = append(cs, f32Case{m: 100, n: 20, k: 20, epKind: 2, threads: th})
	}
	return cs
}

func TestF32Kernels(t *testing.T) {
	for _, kern := range F32Kernels() {
		t.Run(kern.Name, func(t *testing.T) {
			if !kern.Available(cpu.X86) {
				t.Skipf("%s: CPU lacks %s (%s)", kern.Name, kern.ISA, cpu.X86)
			}
			for _, c := range f32TestCases() {
				if msg := runF32Case(kern, c, 1); msg != "" {
					t.Fatalf("%s %v: %s", kern.Name, c, msg)
				}
			}
		})
	}
}

func TestF32KernelNames(t *testing.T) {
	ks := F32Kernels()
	if ks[0] != GenericF32 {
		t.Fatalf("first kernel %s, want the generic one", ks[0].Name)
	}
	seen := map[string]bool{}
	for _, k := range ks {
		if seen[k.Name] {
			t.Fatalf("duplicate kernel name %s", k.Name)
		}
		seen[k.Name] = true
		if want := fmt.Sprintf("_%dx%d", k.MR, k.NR); !containsSuffix(k.Name, want) {
			t.Errorf("kernel %s: name does not carry its tile %s", k.Name, want)
		}
	}
	t.Logf("%d fp32 kernels (assembly compiled in: %v)", len(ks), len(ks) > 1)
}

func containsSuffix(s, suf string) bool { return len(s) >= len(suf) && s[len(s)-len(suf):] == suf }

// TestF32FeatureOff turns features off as INT8BERT_CPU_DISABLE would and
// checks that the assembly kernels that need them say they are unavailable
// and refuse to run, while the others (the generic one; with AVX-512 off,
// the AVX2 tile, as on a CPU without AVX-512) still run correctly.
func TestF32FeatureOff(t *testing.T) {
	saved := cpu.X86
	defer func() { cpu.X86 = saved }()
	for _, c := range []struct {
		disable string
		runs    func(isa cpu.ISA) bool
	}{
		{"avx512f", func(isa cpu.ISA) bool { return isa == cpu.ISAGeneric || isa == cpu.ISAAVX2 }},
		{"avx2", func(isa cpu.ISA) bool { return isa == cpu.ISAGeneric }},
	} {
		off, err := saved.Apply(c.disable)
		if err != nil {
			t.Fatal(err)
		}
		cpu.X86 = off
		for _, k := range F32Kernels() {
			if c.runs(k.ISA) {
				if !k.Available(saved) {
					continue // this CPU never had it
				}
				if !k.Available(cpu.X86) {
					t.Fatalf("%s unavailable with %s disabled", k.Name, c.disable)
				}
				for _, fc := range []f32Case{{m: 3, n: 20, k: 5, epKind: 3, threads: 1}, {m: 13, n: 37, k: 70, epKind: 2, threads: 2}} {
					if msg := runF32Case(k, fc, 2); msg != "" {
						t.Fatalf("%s disabled: %s", c.disable, msg)
					}
				}
				continue
			}
			if k.Available(cpu.X86) {
				t.Errorf("%s available with %s disabled", k.Name, c.disable)
			}
			pk, _ := PackF32(4, 4, make([]float32, 16), 4, k.NR)
			g := &GEMMF32{M: 1, N: 4, K: 4, A: make([]float32, 4), Lda: 4, B: pk, C: make([]float32, 4), Ldc: 4}
			if err := k.Run(g); err == nil {
				t.Errorf("%s ran with %s disabled", k.Name, c.disable)
			}
		}
	}
}

func TestF32BadShapes(t *testing.T) {
	pk, err := PackF32(4, 8, make([]float32, 32), 8, 16)
	if err != nil {
		t.Fatal(err)
	}
	good := func() *GEMMF32 {
		return &GEMMF32{M: 2, N: 4, K: 8, A: make([]float32, 16), Lda: 8, B: pk, C: make([]float32, 8), Ldc: 4}
	}
	bad := []func(*GEMMF32){
		func(g *GEMMF32) { g.M = -1 },
		func(g *GEMMF32) { g.Lda = 7 },
		func(g *GEMMF32) { g.A = g.A[:15] },
		func(g *GEMMF32) { g.Ldc = 3 },
		func(g *GEMMF32) { g.C = g.C[:7] },
		func(g *GEMMF32) { g.B = nil },
		func(g *GEMMF32) { g.N = 5 },
		func(g *GEMMF32) { g.K = 9; g.Lda = 9; g.A = make([]float32, 18) },
		func(g *GEMMF32) { g.Ep = &Epilogue{Bias: make([]float32, 3)} },
		func(g *GEMMF32) { g.Ep = &Epilogue{Residual: make([]float32, 7)} },
		func(g *GEMMF32) { g.Ep = &Epilogue{Residual: make([]float32, 100), LdResidual: 3} },
		func(g *GEMMF32) { g.Ep = &Epilogue{Act: 99} },
		func(g *GEMMF32) { g.B = &PackedF32{N: 4, K: 8, NR: 16, Data: make([]float32, 10)} },
	}
	for _, k := range F32Kernels() {
		if !k.Available(cpu.X86) {
			continue
		}
		p2, _ := PackF32(4, 8, make([]float32, 32), 8, k.NR)
		for i, mod := range bad {
			g := good()
			g.B = p2
			mod(g)
			if g.B != nil && g.B.NR != k.NR && i != 12 {
				continue
			}
			if err := k.Run(g); !errors.Is(err, ErrShape) {
				t.Errorf("%s: bad case %d: err = %v, want ErrShape", k.Name, i, err)
			}
		}
		if !slices.ContainsFunc(F32Kernels(), func(x *KernelF32) bool { return x == k }) {
			t.Fatal("unreachable")
		}
	}
	for _, c := range []struct{ n, k, ldw, nr int }{{-1, 1, 1, 16}, {1, 2, 1, 16}, {1, 1, 1, 8}, {1, 1, 1, 0}, {2, 4, 4, 16}} {
		w := make([]float32, 4)
		if _, err := PackF32(c.n, c.k, w, c.ldw, c.nr); !errors.Is(err, ErrShape) {
			t.Errorf("PackF32(%+v): err = %v, want ErrShape", c, err)
		}
	}
}

func TestPackF32Layout(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, c := range []struct{ n, k, nr int }{{1, 1, 16}, {17, 5, 16}, {50, 67, 48}, {64, 8, 64}, {33, 3, 32}} {
		ldw := c.k + 2
		w := make([]float32, c.n*ldw)
		for i := range w {
			w[i] = r.Float32()
		}
		p, err := PackF32(c.n, c.k, w, ldw, c.nr)
		if err != nil {
			t.Fatal(err)
		}
		np := (c.n + c.nr - 1) / c.nr * c.nr
		if len(p.Data) != np*c.k {
			t.Fatalf("%+v: len %d, want %d", c, len(p.Data), np*c.k)
		}
		for j := 0; j < np; j++ {
			for q := 0; q < c.k; q++ {
				want := float32(0)
				if j < c.n {
					want = w[j*ldw+q]
				}
				if got := p.At(j, q); got != want {
					t.Fatalf("%+v: W[%d][%d] = %v, want %v", c, j, q, got, want)
				}
			}
		}
	}
}

func FuzzGEMMF32(f *testing.F) {
	f.Add(uint8(3), uint8(20), uint8(5), uint8(1), uint8(0), uint8(1), uint64(1))
	f.Add(uint8(15), uint8(33), uint8(17), uint8(3), uint8(2), uint8(2), uint64(2))
	f.Add(uint8(40), uint8(97), uint8(200), uint8(6), uint8(1), uint8(1), uint64(3))
	f.Fuzz(func(t *testing.T, m, n, k, ep, pad, threads uint8, seed uint64) {
		c := f32Case{m: int(m % 64), n: int(n), k: int(k), epKind: int(ep % 8), padA: int(pad % 4), padC: int(pad / 4 % 4), padR: int(pad / 16 % 4), threads: int(threads%3) + 1}
		for _, kern := range F32Kernels() {
			if !kern.Available(cpu.X86) {
				continue
			}
			if msg := runF32Case(kern, c, seed); msg != "" {
				t.Fatalf("%s %v seed %d: %s", kern.Name, c, seed, msg)
			}
		}
	})
}

// f32BenchShapes are BERT's linears: M tokens, K in, N out.
var f32BenchShapes = []struct{ m, k, n int }{
	{256, 1024, 1024}, {256, 1024, 4096}, {256, 4096, 1024},
	{128, 768, 768}, {128, 768, 2304}, {128, 768, 3072}, {128, 3072, 768},
}

// BenchmarkF32 times every available assembly FP32 kernel on one thread on
// BERT's shapes and reports GFLOP/s (2*M*N*K per op). Run it pinned:
//
//	taskset -c 1 go test -run - -bench F32 ./kernels
//
// The "ep" variants fuse bias + GELU (N = 3072, 4096) or bias + residual.
func BenchmarkF32(b *testing.B) {
	for _, s := range f32BenchShapes {
		for _, kern := range F32Kernels() {
			if kern.ISA == "generic" {
				continue
			}
			for _, withEp := range []bool{false, true} {
				name := fmt.Sprintf("M%d_K%d_N%d/%s", s.m, s.k, s.n, kern.Name)
				if withEp {
					name += "/ep"
				}
				b.Run(name, func(b *testing.B) {
					if !kern.Available(cpu.X86) {
						b.Skipf("CPU lacks %s", kern.ISA)
					}
					r := rand.New(rand.NewPCG(1, 2))
					a := make([]float32, s.m*s.k)
					w := make([]float32, s.n*s.k)
					for i := range a {
						a[i] = float32(r.NormFloat64())
					}
					for i := range w {
						w[i] = float32(r.NormFloat64() * 0.05)
					}
					pk, err := PackF32(s.n, s.k, w, s.k, kern.NR)
					if err != nil {
						b.Fatal(err)
					}
					g := &GEMMF32{M: s.m, N: s.n, K: s.k, A: a, Lda: s.k, B: pk, C: make([]float32, s.m*s.n), Ldc: s.n, Threads: 1}
					if withEp {
						g.Ep = &Epilogue{Bias: make([]float32, s.n)}
						if s.n > s.k {
							g.Ep.Act = ActGELU
						} else {
							g.Ep.Residual = make([]float32, s.m*s.n)
						}
					}
					for b.Loop() {
						if err := kern.Run(g); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(2*float64(s.m*s.n*s.k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
				})
			}
		}
	}
}

// TestPackF32ZeroK: weights of no inputs (k = 0) pack to an empty panel
// without reading w, however many outputs there are, as PackBF16 does.
func TestPackF32ZeroK(t *testing.T) {
	for _, n := range []int{0, 1, 5, 40} {
		p, err := PackF32(n, 0, nil, 1, 16)
		if err != nil {
			t.Fatalf("n=%d k=0: %v", n, err)
		}
		if p.N != n || p.K != 0 || len(p.Data) != 0 {
			t.Errorf("n=%d k=0: packed N=%d K=%d, %d values", n, p.N, p.K, len(p.Data))
		}
	}
}
