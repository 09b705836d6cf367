package kernels

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/int8bert/int8bert/cpu"
)

// scoresCase builds a Q Kᵀ of INT8 attention's form: A u8 (lda > k), K
// packed with NR 64, the zero point 128 with its column sums, row and
// column scales, f32 out with ldc > n and a sentinel past each row's n.
func scoresCase(r *rand.Rand, m, n, k int) (*GEMMU8S8, []float32) {
	lda, ldc := k+5, n+3
	a := make([]uint8, max(m*lda, 1))
	for i := range a {
		a[i] = uint8(r.IntN(256))
	}
	w := make([]int8, max(n*k, 1))
	for i := range w {
		w[i] = int8(r.IntN(256) - 128)
	}
	p, err := PackS8(n, k, w, max(k, 1), 64)
	if err != nil {
		panic(err)
	}
	rs, ks := make([]float32, m), make([]float32, n)
	for i := range rs {
		rs[i] = float32(r.Float64()*0.01 + 1e-4)
	}
	for i := range ks {
		ks[i] = float32(r.Float64()*0.02 + 1e-4)
	}
	out := make([]float32, max(m*ldc, 1))
	for i := range out {
		out[i] = float32(math.NaN())
	}
	g := &GEMMU8S8{M: m, N: n, K: k, A: a, Lda: lda, B: p, Out: Out{F32: out, Ldc: ldc},
		Ep: &Epilogue{ZeroPoint: 128, ColSum: p.ColSum, RowScale: rs, ColScale: ks}}
	return g, out
}

// TestScoresU8S8 holds the scores kernels (vnniScores_<mr>x64, through
// runScoresU8S8) and their Go twins bit for bit to the exact sums with
// vnniEpilogueGo's float32 steps (what gemmVNNI_6x64 gives, checked too
// where it runs), with and without row scales, over
// row counts with every tail of 6, key counts under, at and over a panel
// of 64 with tails, and K from 0 to 128; what lies past n in each row is
// left alone; GEMMs of another form are declined.
func TestScoresU8S8(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	var twins [7]func(a *uint8, lda int, b *int8, k int, c *float32, ldc int, n int, colSum *int32, zp int32, rowScale *float32, colScale *float32)
	for mr := 1; mr <= 6; mr++ {
		twins[mr] = func(a *uint8, lda int, b *int8, k int, c *float32, ldc int, n int, colSum *int32, zp int32, rowScale *float32, colScale *float32) {
			vnniScoresGo(mr, a, lda, b, k, c, ldc, n, colSum, zp, rowScale, colScale)
		}
	}
	asm := vnniAsm && vnniAvailable(cpu.X86)
	k6 := newVNNIKernel(6, 64)
	if !asm {
		t.Logf("%s: the VNNI assembly is not available here (asm build %v): the Go twins only", t.Name(), vnniAsm)
	}
	for _, m := range []int{1, 5, 6, 7, 13, 40} {
		for _, n := range []int{1, 17, 63, 64, 65, 130, 256} {
			for _, k := range []int{0, 4, 8, 64, 128} {
				g, out := scoresCase(r, m, n, k)
				if k == 8 || k == 64 {
					g.Ep.RowScale = nil // the form INT8 attention runs where Q's scale goes to the softmax
				}
				// The reference: the exact sums (the generic kernel), then
				// vnniEpilogueGo's float32 steps; with VNNI, gemmVNNI_6x64
				// must give the same bits.
				want := slices.Clone(out)
				ref := *g
				ref.Ep = nil
				acc := make([]int32, max(m*n, 1))
				ref.Out = Out{S32: acc, Ldc: n}
				if err := GenericU8S8.RunU8S8(&ref); err != nil {
					t.Fatal(err)
				}
				ep := g.Ep
				for i := 0; i < m; i++ {
					for j := 0; j < n; j++ {
						v := float32(acc[i*n+j] - ep.ZeroPoint*ep.ColSum[j])
						if ep.RowScale != nil {
							v = float32(v * ep.RowScale[i])
						}
						want[i*g.Out.Ldc+j] = v * ep.ColScale[j]
					}
				}
				if asm {
					k6out := slices.Clone(out)
					k6g := *g
					k6g.Out.F32 = k6out
					if err := k6.RunU8S8(&k6g); err != nil {
						t.Fatal(err)
					}
					if !slices.EqualFunc(k6out, want, func(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) }) {
						t.Fatalf("m=%d n=%d k=%d: the reference differs from gemmVNNI_6x64", m, n, k)
					}
				}
				tw := *g
				tw.Out.F32 = slices.Clone(out)
				runScores(&tw, twins[:])
				same := func(got []float32) bool {
					for i := range got {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							return false
						}
					}
					return true
				}
				if !same(tw.Out.F32) {
					t.Fatalf("m=%d n=%d k=%d: the Go twin differs from the reference", m, n, k)
				}
				ok, err := runScoresU8S8(g)
				if err != nil {
					t.Fatal(err)
				}
				if ok != asm {
					t.Fatalf("m=%d n=%d k=%d: runScoresU8S8 took it %v, want %v", m, n, k, ok, asm)
				}
				if asm && !same(out) {
					t.Fatalf("m=%d n=%d k=%d: vnniScores differs from the reference", m, n, k)
				}
			}
		}
	}
	// Other forms: declined, nothing written.
	for name, f := range map[string]func(g *GEMMU8S8){
		"nr 32":    func(g *GEMMU8S8) { g.B, _ = PackS8(g.N, g.K, make([]int8, g.N*g.K), g.K, 32) },
		"k 6":      func(g *GEMMU8S8) { g.K = 6 },
		"bias":     func(g *GEMMU8S8) { g.Ep.Bias = make([]float32, g.N) },
		"threads":  func(g *GEMMU8S8) { g.Threads = 2 },
		"u8 out":   func(g *GEMMU8S8) { g.Out = Out{U8: make([]uint8, g.M*g.N), Ldc: g.N} },
		"no zp":    func(g *GEMMU8S8) { g.Ep.ZeroPoint = 0 },
		"no scale": func(g *GEMMU8S8) { g.Ep.ColScale = nil },
		"gelu":     func(g *GEMMU8S8) { g.Ep.Act = ActGELU },
	} {
		g, out := scoresCase(r, 7, 70, 8)
		f(g)
		if ok, err := runScoresU8S8(g); ok || err != nil {
			t.Errorf("%s: runScoresU8S8 = %v, %v: want declined", name, ok, err)
		}
		for _, v := range out {
			if v == v {
				t.Fatalf("%s: declined but wrote", name)
			}
		}
	}
	if asm {
		g, _ := scoresCase(r, 7, 70, 8)
		g.Ep.RowScale = g.Ep.RowScale[:3]
		if ok, err := runScoresU8S8(g); !ok || err == nil {
			t.Errorf("short row scales: runScoresU8S8 = %v, %v: want an error", ok, err)
		}
	}
}

// TestScoresKernel: ScoresU8S8 is a candidate of attention's products
// only (AttentionU8S8Kernels where the build has the assembly, never
// U8S8Kernels), its Takes admits exactly the scores form, and its RunU8S8
// computes that form as gemmVNNI_6x64 does, bit for bit, and refuses any
// other (ErrShape) without writing.
func TestScoresKernel(t *testing.T) {
	if slices.Contains(U8S8Kernels(), ScoresU8S8) {
		t.Fatal("ScoresU8S8 is among U8S8Kernels: it takes one form only")
	}
	if got := slices.Contains(AttentionU8S8Kernels(), ScoresU8S8); got != vnniAsm {
		t.Fatalf("ScoresU8S8 in AttentionU8S8Kernels: %v, want %v (asm build)", got, vnniAsm)
	}
	if ScoresU8S8.Takes == nil || ScoresU8S8.NR != 64 || !ScoresU8S8.Accepts(7, 70, 8) || ScoresU8S8.Accepts(7, 70, 6) {
		t.Fatal("ScoresU8S8: want a Takes, NR 64, and K a multiple of 4")
	}
	r := rand.New(rand.NewPCG(13, 14))
	g, out := scoresCase(r, 13, 130, 64)
	if !ScoresU8S8.Takes(g) {
		t.Fatal("Takes refuses the scores form")
	}
	if vnniAsm && ScoresU8S8.Available(cpu.X86) {
		want := slices.Clone(out)
		k6g := *g
		k6g.Out.F32 = want
		if err := newVNNIKernel(6, 64).RunU8S8(&k6g); err != nil {
			t.Fatal(err)
		}
		if err := ScoresU8S8.RunU8S8(g); err != nil {
			t.Fatal(err)
		}
		if !slices.EqualFunc(out, want, func(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) }) {
			t.Fatal("ScoresU8S8 differs from gemmVNNI_6x64")
		}
	}
	for name, f := range map[string]func(g *GEMMU8S8){
		"nr 32":   func(g *GEMMU8S8) { g.B, _ = PackS8(g.N, g.K, make([]int8, g.N*g.K), g.K, 32) },
		"bias":    func(g *GEMMU8S8) { g.Ep.Bias = make([]float32, g.N) },
		"threads": func(g *GEMMU8S8) { g.Threads = 2 },
		"u8 out":  func(g *GEMMU8S8) { g.Out = Out{U8: make([]uint8, g.M*g.N), Ldc: g.N} },
		"no ep":   func(g *GEMMU8S8) { g.Ep = nil },
	} {
		g, out := scoresCase(r, 7, 70, 8)
		f(g)
		if ScoresU8S8.Takes(g) {
			t.Errorf("%s: Takes admits it", name)
		}
		if err := ScoresU8S8.RunU8S8(g); !errors.Is(err, ErrShape) {
			t.Errorf("%s: RunU8S8 = %v, want ErrShape", name, err)
		}
		for _, v := range out {
			if v == v {
				t.Fatalf("%s: refused but wrote", name)
			}
		}
	}
}

// BenchmarkScoresU8S8 is one head of BERT-large's Q Kᵀ at 256 tokens
// (256x64x256, the scores epilogue): the scores kernels against the 6x64
// kernel through its driver.
func BenchmarkScoresU8S8(b *testing.B) {
	if !vnniAsm || !vnniAvailable(cpu.X86) {
		b.Skipf("the VNNI assembly is not available here (asm build %v)", vnniAsm)
	}
	r := rand.New(rand.NewPCG(1, 1))
	g, _ := scoresCase(r, 256, 256, 64)
	k6 := newVNNIKernel(6, 64)
	for _, c := range []struct {
		name string
		run  func() error
	}{
		{"scores", func() error { _, err := runScoresU8S8(g); return err }},
		{"gemmVNNI_6x64", func() error { return k6.RunU8S8(g) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if err := c.run(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(2*256*256*64*float64(b.N)/b.Elapsed().Seconds()/1e9, "GOP/s")
		})
	}
}
