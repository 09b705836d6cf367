//go:build amd64 && gc && !purego && !noasm

package kernels

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/int8bert/int8bert/cpu"
)

// geluErfc is GELU in float64 without cancellation in the negative tail:
// 0.5*x*erfc(-x/sqrt 2). (GELU's 1+erf(x/sqrt 2) cancels for x < -5 and
// is 0 below about -8.3, where the true value is still ~1e-16.)
func geluErfc(x float64) float64 { return 0.5 * x * math.Erfc(-x/math.Sqrt2) }

// TestEpiF32GELU checks the vectorized erf GELU of the fused epilogue
// against the float64 GELU of the same float32 input: relative error at
// most 1e-6 of geluErfc (absolute 1e-37 where the result is denormal or
// nearly), and within 1e-15*max(1,|x|) + 1e-6*|GELU(x)| of the reference
// formula GELU.
func TestEpiF32GELU(t *testing.T) {
	if !f32Available(cpu.X86) {
		t.Skipf("CPU lacks AVX512F/BW (%s)", cpu.X86)
	}
	var xs []float32
	for x := -20.0; x <= 20; x += 1.0 / 1024 {
		xs = append(xs, float32(x))
	}
	for e := -40; e <= 30; e++ {
		for _, m := range []float64{1, 1.1, 1.5, 1.999} {
			xs = append(xs, float32(m*math.Exp2(float64(e))), float32(-m*math.Exp2(float64(e))))
		}
	}
	xs = append(xs, 0, float32(math.Copysign(0, -1)), math.MaxFloat32, -math.MaxFloat32, 1e-45, -1e-45)
	n := len(xs)
	c := append([]float32(nil), xs...)
	// One row, n columns: full vectors and a masked tail.
	epiF32(1, n/16, 1<<uint(n%16)-1, &c[0], n, nil, nil, n, 1)
	worst, worstX := 0.0, float32(0)
	for i, x := range xs {
		want := geluErfc(float64(x))
		got := float64(c[i])
		if ref := GELU(float64(x)); !(math.Abs(got-ref) <= 1e-15*max(1, math.Abs(float64(x)))+1e-6*math.Abs(ref)) {
			t.Errorf("GELU(%v) = %v, reference formula %v", x, got, ref)
		}
		d := math.Abs(got - want)
		rel := d / math.Abs(want)
		if want == 0 {
			rel = d
		}
		if d <= 1e-37 {
			rel = 0
		}
		if rel > worst {
			worst, worstX = rel, x
		}
	}
	t.Logf("vector GELU on %d inputs: worst relative error %.3g at x=%v", n, worst, worstX)
	if worst > 1e-6 {
		t.Fatalf("worst relative error %.3g at x=%v > 1e-6", worst, worstX)
	}
	for _, x := range []float32{float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN())} {
		c := []float32{x}
		epiF32(1, 0, 1, &c[0], 1, nil, nil, 1, 1)
		want := GELU(float64(x))
		if got := float64(c[0]); !(got == want || math.IsNaN(got) && math.IsNaN(want)) {
			t.Errorf("GELU(%v) = %v, want %v", x, got, want)
		}
	}
}

// TestEpiF32GELU8 checks the rational GELU of the fused FP32 epilogue (act
// 3, the default for ActGELU) bit for bit against its Go model geluQ8F32,
// with bias and residual around it, on full vectors, pairs and a masked
// tail, and that the kernel picks it unless Epilogue.PreciseGELU is set.
func TestEpiF32GELU8(t *testing.T) {
	if !f32Available(cpu.X86) {
		t.Skipf("CPU lacks AVX512F/BW (%s)", cpu.X86)
	}
	var xs []float32
	for x := -12.0; x <= 12; x += 1.0 / 512 {
		xs = append(xs, float32(x))
	}
	for e := -40; e <= 30; e++ {
		xs = append(xs, float32(math.Exp2(float64(e))), float32(-math.Exp2(float64(e))))
	}
	xs = append(xs, 0, float32(math.Copysign(0, -1)), math.MaxFloat32, -math.MaxFloat32, 1e-45, -1e-45,
		float32(math.Inf(1)), float32(math.NaN()), 5.39902306, -5.39902306, 5.4, -5.4)
	const rows = 3
	n := len(xs)
	bias := make([]float32, n)
	res := make([]float32, rows*(n+5))
	c := make([]float32, rows*(n+7))
	for i := range bias {
		bias[i] = float32(i%7) * 0.125
	}
	for i := range res {
		res[i] = float32(i%11) * -0.25
	}
	for r := range rows {
		for j, x := range xs {
			c[r*(n+7)+j] = x - bias[j] + float32(r) // exact for the small values
		}
	}
	in := append([]float32(nil), c...)
	epiF32(rows, n/16, 1<<uint(n%16)-1, &c[0], n+7, &bias[0], &res[0], n+5, 3)
	for r := range rows {
		for j := range n {
			y := in[r*(n+7)+j] + bias[j]
			want := geluQ8F32(y) + res[r*(n+5)+j]
			got := c[r*(n+7)+j]
			if math.Float32bits(got) != math.Float32bits(want) && !(got != got && want != want) {
				t.Fatalf("row %d col %d: GELU8(%v) + res = %v, want %v (geluQ8F32)", r, j, y, got, want)
			}
		}
		if g := c[r*(n+7)+n : r*(n+7)+n+7]; r < rows-1 && g[0] != 0 {
			t.Fatalf("row %d: the padding changed: %v", r, g)
		}
	}
	// The driver's choice of act.
	for _, precise := range []bool{false, true} {
		// Small integers: every accumulator is exact, in any order.
		a, w := make([]float32, 2*8), make([]float32, 16*8)
		for i := range a {
			a[i] = float32(i%5) - 2
		}
		for i := range w {
			w[i] = float32(i%3) - 1
		}
		pk, err := PackF32(16, 8, w, 8, f32Drivers[0].nr)
		if err != nil {
			t.Fatal(err)
		}
		g := &GEMMF32{M: 2, N: 16, K: 8, A: a, Lda: 8, B: pk, C: make([]float32, 2*16), Ldc: 16, Threads: 1,
			Ep: &Epilogue{Act: ActGELU, PreciseGELU: precise}}
		if err := f32Drivers[0].run(g); err != nil {
			t.Fatal(err)
		}
		acc := make([]float32, 2*16)
		if err := runGenericF32(&GEMMF32{M: 2, N: 16, K: 8, A: g.A, Lda: 8, B: g.B, C: acc, Ldc: 16}); err != nil {
			t.Fatal(err)
		}
		for i, a := range acc {
			want := geluQ8F32(a)
			if precise {
				c := []float32{a}
				epiF32(1, 0, 1, &c[0], 1, nil, nil, 1, 1)
				want = c[0]
			}
			if g.C[i] != want {
				t.Errorf("precise=%v: C[%d] = %v, want %v", precise, i, g.C[i], want)
			}
		}
	}
}

// TestF32Blocking runs the assembly tile drivers with their plan changed
// (small K slabs, so C accumulates over several passes; the A copy on and
// off; the slab prefetch on and off), on shapes that also reach the
// automatic multi-slab and copy paths (K = 1024, 2500).
func TestF32Blocking(t *testing.T) {
	if !f32Available(cpu.X86) {
		t.Skipf("CPU lacks AVX512F/BW (%s)", cpu.X86)
	}
	cases := []f32Case{
		{m: 30, n: 70, k: 301, padA: 1, padC: 3, epKind: 3, padR: 1, threads: 1},
		{m: 17, n: 33, k: 1024, epKind: 2, threads: 2},
		{m: 64, n: 40, k: 2500, epKind: 6, threads: 1},
		{m: 9, n: 100, k: 130, padA: 2, epKind: 5, threads: 3},
	}
	drivers := append(slices.Clone(f32Drivers), f32AVX2Driver)
	for _, knob := range []struct {
		kc, copyA int // kc 0: the plan's; copyA 1 always, -1 never, 0 the plan's
		noPF      bool
	}{
		{0, 0, false}, {64, 1, false}, {50, -1, true}, {128, 1, true}, {0, -1, false}, {0, 1, false},
	} {
		for _, f := range drivers {
			kern := &KernelF32{Name: fmt.Sprintf("gemmF32_%dx%d(avx2=%v)", f.mr, f.nr, f.avx2), MR: f.mr, NR: f.nr, Run: f.run}
			for _, c := range cases {
				f.tune = func(pl f32Plan) f32Plan {
					if knob.kc > 0 {
						pl.kc = f32SlabLen(c.k, knob.kc)
					}
					if knob.copyA != 0 {
						pl.copyA = knob.copyA > 0
					}
					pl.prefetch = !knob.noPF
					return pl
				}
				if msg := runF32Case(kern, c, 3); msg != "" {
					t.Fatalf("%s %v knobs %+v: %s", kern.Name, c, knob, msg)
				}
			}
		}
	}
}

func TestF32Aliased(t *testing.T) {
	for _, c := range []struct {
		lda, mr int
		want    bool
	}{{1024, 14, true}, {4096, 6, false}, {4096, 8, true}, {3072, 14, true}, {768, 14, false}, {1040, 14, false}, {2304, 14, false}} {
		if got := f32Aliased(c.lda, c.mr); got != c.want {
			t.Errorf("f32Aliased(%d, %d) = %v, want %v", c.lda, c.mr, got, c.want)
		}
	}
}
