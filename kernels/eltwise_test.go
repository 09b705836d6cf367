package kernels

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
)

var eltShapes = [][2]int{{0, 5}, {1, 1}, {3, 17}, {5, 768}, {2, 1023}, {128, 1024}}

// eltPaths runs f once per element-wise path: the AVX-512 kernels (skipped,
// with a message, when this build or CPU lacks them) and the Go twins.
func eltPaths(t *testing.T, f func(t *testing.T)) {
	t.Helper()
	for _, generic := range []bool{false, true} {
		name := "avx512"
		if generic {
			name = "generic"
		}
		t.Run(name, func(t *testing.T) {
			defer func(old bool) { eltwiseForceGeneric = old }(eltwiseForceGeneric)
			eltwiseForceGeneric = generic
			if !generic && !eltwiseAVX512() {
				t.Skipf("avx512 element-wise path not live (asm built: %v; cpu.X86 AVX512F/BW off or absent)", eltwiseHaveAsm)
			}
			f(t)
		})
	}
}

// withPath runs f on the generic (generic=true) or the live path.
func withPath(generic bool, f func()) {
	defer func(old bool) { eltwiseForceGeneric = old }(eltwiseForceGeneric)
	eltwiseForceGeneric = generic
	f()
}

const eltGuard = 19

// guarded returns a slice of n elements inside a buffer with guard bands of
// sentinel values, and a function that checks the bands.
func guarded[T any](n int, sentinel T) ([]T, func(t *testing.T)) {
	buf := make([]T, n+2*eltGuard)
	for i := range buf {
		buf[i] = sentinel
	}
	check := func(t *testing.T) {
		t.Helper()
		for i := 0; i < eltGuard; i++ {
			if any(buf[i]) != any(sentinel) || any(buf[eltGuard+n+i]) != any(sentinel) {
				t.Fatalf("guard band overwritten near index %d", i)
			}
		}
	}
	return buf[eltGuard : eltGuard+n : eltGuard+n], check
}

func randF32(r *rand.Rand, n int, scale, offset float64) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64()*scale + offset)
	}
	return x
}

func bitsEqual(a, b []float32) int {
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) && !(a[i] != a[i] && b[i] != b[i]) {
			return i
		}
	}
	return -1
}

func lnRef(x, res []float32, rows, h int, gamma, beta []float32, eps float32) []float64 {
	y := make([]float64, rows*h)
	for i := 0; i < rows; i++ {
		v := make([]float64, h)
		var mean float64
		for j := range v {
			f := x[i*h+j]
			if res != nil {
				f += res[i*h+j] // float32 add, as PyTorch
			}
			v[j] = float64(f)
			mean += v[j]
		}
		mean /= float64(h)
		var vr float64
		for _, f := range v {
			vr += (f - mean) * (f - mean)
		}
		vr /= float64(h)
		rstd := 1 / math.Sqrt(vr+float64(eps))
		for j, f := range v {
			y[i*h+j] = (f-mean)*rstd*float64(gamma[j]) + float64(beta[j])
		}
	}
	return y
}

func TestLayerNorm(t *testing.T) {
	eltPaths(t, func(t *testing.T) {
		for _, sh := range eltShapes {
			for _, withRes := range []bool{false, true} {
				for _, withQ := range []bool{false, true} {
					rows, h := sh[0], sh[1]
					t.Run(fmt.Sprintf("%dx%d/res=%v/q=%v", rows, h, withRes, withQ), func(t *testing.T) {
						r := rand.New(rand.NewPCG(uint64(rows), uint64(h)))
						x := randF32(r, rows*h, 2, 0.3)
						var res []float32
						if withRes {
							res = randF32(r, rows*h, 1, -0.1)
						}
						gamma := randF32(r, h, 0.2, 1)
						beta := randF32(r, h, 0.1, 0)
						var qp *QuantParams
						var q []uint8
						var checkQ func(*testing.T)
						if withQ {
							qp = &QuantParams{PreScale: randF32(r, h, 0.1, 1), Scale: 0.03, ZeroPoint: 120}
							q, checkQ = guarded(rows*h, uint8(0xa5))
						}
						x0, res0 := slices.Clone(x), slices.Clone(res)
						dst, checkDst := guarded(rows*h, float32(-7.5))
						if err := LayerNorm(dst, q, x, res, rows, h, gamma, beta, 1e-12, qp); err != nil {
							t.Fatal(err)
						}
						checkDst(t)
						if !slices.Equal(x, x0) || !slices.Equal(res, res0) {
							t.Fatal("inputs changed")
						}
						ref := lnRef(x, res, rows, h, gamma, beta, 1e-12)
						var worst float64
						for k, want := range ref {
							e := math.Abs(float64(dst[k])-want) / (1 + math.Abs(want))
							worst = max(worst, e)
							if e > 1e-5 {
								t.Fatalf("dst[%d]=%v, want %v (rel err %.3g)", k, dst[k], want, e)
							}
						}
						if withQ {
							checkQ(t)
							for k := range q {
								j := k % h
								want := uint8(Quantize(float64(dst[k]*qp.PreScale[j]), qp.Scale, qp.ZeroPoint, 0, 255))
								if q[k] != want {
									t.Fatalf("q[%d]=%d, want %d (y=%v)", k, q[k], want, dst[k])
								}
							}
						}
						if rows*h > 1000 {
							t.Logf("max err/(1+|ref|) = %.3g", worst)
						}
					})
				}
			}
		}
	})
}

func TestLayerNormAliasAndNilAffine(t *testing.T) {
	eltPaths(t, func(t *testing.T) {
		rows, h := 4, 100
		r := rand.New(rand.NewPCG(1, 2))
		x, res := randF32(r, rows*h, 1, 0), randF32(r, rows*h, 1, 0)
		want := make([]float32, rows*h)
		if err := LayerNorm(want, nil, x, res, rows, h, nil, nil, 1e-5, nil); err != nil {
			t.Fatal(err)
		}
		ones, zeros := make([]float32, h), make([]float32, h)
		for j := range ones {
			ones[j] = 1
		}
		got := slices.Clone(x) // dst aliases x
		if err := LayerNorm(got, nil, got, res, rows, h, ones, zeros, 1e-5, nil); err != nil {
			t.Fatal(err)
		}
		if k := bitsEqual(got, want); k >= 0 {
			t.Fatalf("aliased dst[%d]=%v, want %v", k, got[k], want[k])
		}
		got = slices.Clone(res) // dst aliases res
		if err := LayerNorm(got, nil, x, got, rows, h, ones, zeros, 1e-5, nil); err != nil {
			t.Fatal(err)
		}
		if k := bitsEqual(got, want); k >= 0 {
			t.Fatalf("dst aliasing res [%d]=%v, want %v", k, got[k], want[k])
		}
	})
}

func TestSoftmaxInPlace(t *testing.T) {
	eltPaths(t, func(t *testing.T) {
		rows, n := 3, 77
		x := randF32(rand.New(rand.NewPCG(4, 4)), rows*n, 2, 0)
		mask := make([]float32, n)
		mask[5] = -1e9
		for _, m := range [][]float32{nil, mask} {
			want := make([]float32, rows*n)
			if err := Softmax(want, x, rows, n, m); err != nil {
				t.Fatal(err)
			}
			got := slices.Clone(x)
			if err := Softmax(got, got, rows, n, m); err != nil {
				t.Fatal(err)
			}
			if k := bitsEqual(got, want); k >= 0 {
				t.Fatalf("in place [%d]=%v, want %v", k, got[k], want[k])
			}
		}
	})
}

func TestLayerNormMatchesTwin(t *testing.T) {
	if !eltwiseAVX512() {
		t.Skip("avx512 element-wise path not live: nothing to compare")
	}
	for _, sh := range eltShapes {
		rows, h := sh[0], sh[1]
		r := rand.New(rand.NewPCG(7, uint64(h)))
		x, res := randF32(r, rows*h, 3, 1), randF32(r, rows*h, 1, 0)
		gamma, beta := randF32(r, h, 0.3, 1), randF32(r, h, 0.3, 0)
		qp := &QuantParams{Scale: 0.02, ZeroPoint: 128}
		if h%2 == 1 {
			qp.PreScale = randF32(r, h, 0.2, 1)
		}
		run := func(generic bool) ([]float32, []uint8) {
			d, q := make([]float32, rows*h), make([]uint8, rows*h)
			withPath(generic, func() {
				if err := LayerNorm(d, q, x, res, rows, h, gamma, beta, 1e-5, qp); err != nil {
					t.Fatal(err)
				}
			})
			return d, q
		}
		d1, q1 := run(false)
		d2, q2 := run(true)
		if k := bitsEqual(d1, d2); k >= 0 {
			t.Fatalf("%dx%d: asm dst[%d]=%v, generic %v", rows, h, k, d1[k], d2[k])
		}
		if !slices.Equal(q1, q2) {
			t.Fatalf("%dx%d: q differs", rows, h)
		}
	}
}

func TestLayerNormNonFinite(t *testing.T) {
	eltPaths(t, func(t *testing.T) {
		for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))} {
			rows, h := 4, 37
			x := randF32(rand.New(rand.NewPCG(3, 3)), rows*h, 1, 0)
			x[2*h+5] = bad
			err := LayerNorm(make([]float32, rows*h), nil, x, nil, rows, h, nil, nil, 1e-5, nil)
			if !errors.Is(err, ErrNonFinite) || !strings.Contains(err.Error(), "row 2 col 5") {
				t.Fatalf("input %v: err = %v, want ErrNonFinite at row 2 col 5", bad, err)
			}
		}
	})
}

func TestLayerNormShapeErrors(t *testing.T) {
	for _, c := range []struct {
		name string
		f    func() error
	}{
		{"short dst", func() error {
			return LayerNorm(make([]float32, 3), nil, make([]float32, 4), nil, 2, 2, nil, nil, 1e-5, nil)
		}},
		{"short res", func() error {
			return LayerNorm(make([]float32, 4), nil, make([]float32, 4), make([]float32, 3), 2, 2, nil, nil, 1e-5, nil)
		}},
		{"short q", func() error {
			return LayerNorm(make([]float32, 4), make([]uint8, 3), make([]float32, 4), nil, 2, 2, nil, nil, 1e-5, &QuantParams{Scale: 1})
		}},
		{"bad scale", func() error {
			return LayerNorm(make([]float32, 4), make([]uint8, 4), make([]float32, 4), nil, 2, 2, nil, nil, 1e-5, &QuantParams{})
		}},
		{"negative", func() error { return LayerNorm(nil, nil, nil, nil, -1, 2, nil, nil, 1e-5, nil) }},
		{"zero eps", func() error {
			return LayerNorm(make([]float32, 4), nil, make([]float32, 4), nil, 2, 2, nil, nil, 0, nil)
		}},
		{"short gamma", func() error {
			return LayerNorm(make([]float32, 4), nil, make([]float32, 4), nil, 2, 2, make([]float32, 1), nil, 1e-5, nil)
		}},
	} {
		if err := c.f(); !errors.Is(err, ErrShape) || !strings.HasPrefix(err.Error(), "kernels: layernorm rows=") {
			t.Errorf("%s: err = %v, want ErrShape", c.name, err)
		}
	}
}

func softmaxRef(x []float32, rows, n int, mask []float32) ([]float64, []float64) {
	y, d := make([]float64, rows*n), make([]float64, rows*n)
	for i := 0; i < rows; i++ {
		s := make([]float64, n)
		m := math.Inf(-1)
		for j := range s {
			f := x[i*n+j]
			if mask != nil {
				f += mask[j]
			}
			s[j] = float64(f)
			m = math.Max(m, s[j])
		}
		var sum float64
		for j := range s {
			sum += math.Exp(s[j] - m)
		}
		for j := range s {
			y[i*n+j] = math.Exp(s[j]-m) / sum
			d[i*n+j] = s[j] - m
		}
	}
	return y, d
}

func TestSoftmax(t *testing.T) {
	eltPaths(t, func(t *testing.T) {
		for _, sh := range eltShapes {
			for _, withMask := range []bool{false, true} {
				rows, n := sh[0], sh[1]
				t.Run(fmt.Sprintf("%dx%d/mask=%v", rows, n, withMask), func(t *testing.T) {
					r := rand.New(rand.NewPCG(uint64(rows)+9, uint64(n)))
					x := randF32(r, rows*n, 4, 0)
					var mask []float32
					if withMask {
						mask = make([]float32, n)
						for j := n - n/3; j < n; j++ {
							mask[j] = -math.MaxFloat32 // Hugging Face's finfo.min
						}
						if n > 2 {
							mask[1] = float32(math.Inf(-1))
						}
					}
					x0 := slices.Clone(x)
					dst, check := guarded(rows*n, float32(3.25))
					if err := Softmax(dst, x, rows, n, mask); err != nil {
						t.Fatal(err)
					}
					check(t)
					if !slices.Equal(x, x0) {
						t.Fatal("input changed")
					}
					ref, d := softmaxRef(x, rows, n, mask)
					var worst float64
					for k, want := range ref {
						e := math.Abs(float64(dst[k]) - want)
						tol := want*(1e-6+1.2e-7*math.Abs(d[k])) + 1e-30
						if want > 1e-30 {
							worst = max(worst, e/want)
						}
						if e > tol || math.IsNaN(float64(dst[k])) {
							t.Fatalf("dst[%d]=%v, want %v (d=%v)", k, dst[k], want, d[k])
						}
					}
					if rows*n > 1000 {
						t.Logf("max rel err %.3g", worst)
					}
				})
			}
		}
	})
}

func TestSoftmaxMaskedRows(t *testing.T) {
	eltPaths(t, func(t *testing.T) {
		n := 21
		x := randF32(rand.New(rand.NewPCG(5, 5)), 2*n, 1, 0)
		inf := make([]float32, n)
		for j := range inf {
			inf[j] = float32(math.Inf(-1))
		}
		dst := make([]float32, 2*n)
		if err := Softmax(dst, x, 2, n, inf); err != nil {
			t.Fatal(err)
		}
		for k, v := range dst {
			if v != 0 {
				t.Fatalf("-inf mask: dst[%d]=%v, want 0", k, v)
			}
		}
		big := make([]float32, n)
		for j := range big {
			big[j] = -math.MaxFloat32
		}
		if err := Softmax(dst, x, 2, n, big); err != nil {
			t.Fatal(err)
		}
		for k, v := range dst {
			if math.IsNaN(float64(v)) || math.Abs(float64(v)-1/float64(n)) > 1e-6 {
				t.Fatalf("finfo.min mask: dst[%d]=%v, want uniform %v", k, v, 1/float64(n))
			}
		}
	})
}

func TestSoftmaxNonFinite(t *testing.T) {
	eltPaths(t, func(t *testing.T) {
		for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(1))} {
			for _, withMask := range []bool{false, true} {
				rows, n := 3, 40
				x := randF32(rand.New(rand.NewPCG(3, 4)), rows*n, 1, 0)
				x[rows*n-n+33] = bad
				var mask []float32
				if withMask {
					mask = make([]float32, n)
				}
				err := Softmax(make([]float32, rows*n), x, rows, n, mask)
				if !errors.Is(err, ErrNonFinite) || !strings.Contains(err.Error(), "row 2 col 33") {
					t.Fatalf("input %v mask %v: err = %v, want ErrNonFinite at row 2 col 33", bad, withMask, err)
				}
			}
		}
		// NaN in a row that is otherwise -Inf.
		x := []float32{float32(math.Inf(-1)), float32(math.NaN()), float32(math.Inf(-1))}
		if err := Softmax(make([]float32, 3), x, 1, 3, nil); !errors.Is(err, ErrNonFinite) {
			t.Fatalf("NaN among -Inf: err = %v", err)
		}
	})
}

func TestSoftmaxMatchesTwin(t *testing.T) {
	if !eltwiseAVX512() {
		t.Skip("avx512 element-wise path not live: nothing to compare")
	}
	for _, sh := range eltShapes {
		rows, n := sh[0], sh[1]
		r := rand.New(rand.NewPCG(8, uint64(n)))
		x := randF32(r, rows*n, 10, -3)
		mask := randF32(r, n, 30, 0)
		for _, m := range [][]float32{nil, mask} {
			run := func(generic bool) []float32 {
				d := make([]float32, rows*n)
				withPath(generic, func() {
					if err := Softmax(d, x, rows, n, m); err != nil {
						t.Fatal(err)
					}
				})
				return d
			}
			a, g := run(false), run(true)
			if k := bitsEqual(a, g); k >= 0 {
				t.Fatalf("%dx%d: asm dst[%d]=%v, generic %v", rows, n, k, a[k], g[k])
			}
		}
	}
}

// TestExpAccuracy checks the vector exp used by Softmax over its range.
func TestExpAccuracy(t *testing.T) {
	var worst float64
	for x := float32(-87); x <= 88; x += 0.0013 {
		got, want := float64(eltExp(x)), math.Exp(float64(x))
		e := math.Abs(got-want) / want
		worst = max(worst, e)
		if e > 3e-7 {
			t.Fatalf("exp(%v) = %v, want %v (rel %.3g)", x, got, want, e)
		}
	}
	t.Logf("max rel err %.3g", worst)
	if eltExp(-200) != 0 || eltExp(float32(math.Inf(-1))) != 0 || !math.IsNaN(float64(eltExp(float32(math.NaN())))) {
		t.Fatal("exp limits")
	}
}

func geluInputs() []float32 {
	var x []float32
	for v := float32(-13); v <= 10; v += 0.00097 {
		x = append(x, v)
	}
	r := rand.New(rand.NewPCG(11, 11))
	for range 5000 {
		x = append(x, float32(r.NormFloat64()*3))
	}
	x = append(x, 0, float32(math.Copysign(0, -1)), 1e-30, -1e-30, 1e-45, 20, 1e10, 3e38, -14.5, -20, -3e38)
	return x
}

func TestGELU(t *testing.T) {
	eltPaths(t, func(t *testing.T) {
		x := geluInputs()
		x0 := slices.Clone(x)
		dst, check := guarded(len(x), float32(9))
		if err := GELUF32(dst, x); err != nil {
			t.Fatal(err)
		}
		check(t)
		if !slices.Equal(x, x0) {
			t.Fatal("input changed")
		}
		var worst float64
		var worstAt float32
		for k, v := range x {
			// kernels.GELU, 0.5x(1+erf(x/sqrt2)), cancels in the negative
			// tail even in float64 (it is 0 below -8.3); the erfc form is
			// the accurate reference, and GELU itself is checked absolutely.
			want := 0.5 * float64(v) * math.Erfc(-float64(v)/math.Sqrt2)
			got := float64(dst[k])
			if g := GELU(float64(v)); math.Abs(got-g) > 1e-6*math.Abs(g)+1e-15 {
				t.Fatalf("gelu(%v) = %v, kernels.GELU %v", v, got, g)
			}
			var e float64
			switch {
			case math.Abs(want) < 1e-34: // x < -12.5: float32 underflow region
				e = math.Abs(got-want) * 1e28
			default:
				e = math.Abs(got-want) / math.Abs(want)
			}
			if e > worst {
				worst, worstAt = e, v
			}
			if e > 1e-6 {
				t.Fatalf("gelu(%v) = %v, want %v (err %.3g)", v, got, want, e)
			}
		}
		t.Logf("max rel err (for x >= -12.5) %.3g at x=%v", worst, worstAt)
		special := []float32{float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN())}
		GELUInPlace(special)
		if !math.IsInf(float64(special[0]), 1) || special[1] != 0 || !math.IsNaN(float64(special[2])) {
			t.Fatalf("gelu(+inf, -inf, nan) = %v", special)
		}
		// In place equals out of place.
		y := slices.Clone(x)
		GELUInPlace(y)
		if k := bitsEqual(y, dst); k >= 0 {
			t.Fatalf("in place [%d] = %v, out of place %v", k, y[k], dst[k])
		}
		if err := GELUF32(make([]float32, 1), make([]float32, 2)); !errors.Is(err, ErrShape) {
			t.Fatalf("short dst: err = %v", err)
		}
	})
}

func TestGELUMatchesTwin(t *testing.T) {
	if !eltwiseAVX512() {
		t.Skip("avx512 element-wise path not live: nothing to compare")
	}
	x := geluInputs()
	for _, n := range []int{0, 1, 15, 17, 1023, len(x)} {
		a, g := make([]float32, n), make([]float32, n)
		withPath(false, func() { copy(a, x[:n]); GELUInPlace(a) })
		withPath(true, func() { copy(g, x[:n]); GELUInPlace(g) })
		if k := bitsEqual(a, g); k >= 0 {
			t.Fatalf("n=%d: asm gelu(%v)=%v, generic %v", n, x[k], a[k], g[k])
		}
	}
}

func TestQuantizeRowsU8(t *testing.T) {
	eltPaths(t, func(t *testing.T) {
		for _, sh := range eltShapes {
			rows, h := sh[0], sh[1]
			r := rand.New(rand.NewPCG(21, uint64(h)))
			x := randF32(r, rows*h, 2, 0.1)
			if rows > 1 {
				for j := 0; j < h; j++ {
					x[h+j] = 0 // an all-zero row
				}
			}
			x0 := slices.Clone(x)
			dst, check := guarded(rows*h, uint8(0x5a))
			scales, checkS := guarded(rows, float32(-1))
			if err := QuantizeRowsU8(dst, scales, x, rows, h); err != nil {
				t.Fatal(err)
			}
			check(t)
			checkS(t)
			if !slices.Equal(x, x0) {
				t.Fatal("input changed")
			}
			for i := 0; i < rows && h > 0; i++ {
				var m float64
				for _, v := range x[i*h : i*h+h] {
					m = math.Max(m, math.Abs(float64(v)))
				}
				ws := float32(m) / 127
				if ws == 0 {
					ws = 1
				}
				if scales[i] != ws {
					t.Fatalf("%dx%d: scale[%d]=%v, want %v", rows, h, i, scales[i], ws)
				}
				for j := 0; j < h; j++ {
					want := uint8(int(Quantize(float64(x[i*h+j]), ws, 0, -128, 127)) + 128)
					if dst[i*h+j] != want {
						t.Fatalf("%dx%d: q[%d][%d]=%d, want %d", rows, h, i, j, dst[i*h+j], want)
					}
				}
			}
			// Round trip within half a step.
			back := make([]float32, rows*h)
			if err := DequantizeU8(back, dst, rows, h, scales, 128); err != nil {
				t.Fatal(err)
			}
			for k := range back {
				if d := math.Abs(float64(back[k] - x[k])); d > 0.5001*float64(scales[k/h]) {
					t.Fatalf("round trip [%d]: %v -> %v", k, x[k], back[k])
				}
			}
		}
	})
}

func TestQuantizeTensor(t *testing.T) {
	eltPaths(t, func(t *testing.T) {
		for _, sh := range eltShapes {
			rows, h := sh[0], sh[1]
			r := rand.New(rand.NewPCG(22, uint64(h)))
			x := randF32(r, rows*h, 3, 0)
			if len(x) > 4 {
				x[0], x[1], x[2], x[3] = 1e30, -1e30, 0.5*0.05, 1.5*0.05 // saturation and ties
			}
			u8, cu := guarded(rows*h, uint8(0x33))
			s8, cs := guarded(rows*h, int8(0x33))
			if err := QuantizeTensorU8(u8, x, rows, h, 0.05, 100); err != nil {
				t.Fatal(err)
			}
			if err := QuantizeTensorS8(s8, x, rows, h, 0.05, -3); err != nil {
				t.Fatal(err)
			}
			cu(t)
			cs(t)
			for k, v := range x {
				if w := uint8(Quantize(float64(v), 0.05, 100, 0, 255)); u8[k] != w {
					t.Fatalf("u8[%d] of %v = %d, want %d", k, v, u8[k], w)
				}
				if w := int8(Quantize(float64(v), 0.05, -3, -128, 127)); s8[k] != w {
					t.Fatalf("s8[%d] of %v = %d, want %d", k, v, s8[k], w)
				}
			}
		}
	})
}

func TestQuantizeNonFinite(t *testing.T) {
	eltPaths(t, func(t *testing.T) {
		for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))} {
			rows, h := 3, 50
			x := randF32(rand.New(rand.NewPCG(3, 5)), rows*h, 1, 0)
			x[h+49] = bad
			want := "row 1 col 49"
			for name, err := range map[string]error{
				"rows": QuantizeRowsU8(make([]uint8, rows*h), make([]float32, rows), x, rows, h),
				"u8":   QuantizeTensorU8(make([]uint8, rows*h), x, rows, h, 0.1, 128),
				"s8":   QuantizeTensorS8(make([]int8, rows*h), x, rows, h, 0.1, 0),
			} {
				if !errors.Is(err, ErrNonFinite) || !strings.Contains(err.Error(), want) {
					t.Fatalf("%s with %v: err = %v, want ErrNonFinite at %s", name, bad, err, want)
				}
			}
		}
	})
}

func TestDequantize(t *testing.T) {
	eltPaths(t, func(t *testing.T) {
		for _, sh := range eltShapes {
			rows, n := sh[0], sh[1]
			r := rand.New(rand.NewPCG(23, uint64(n)))
			q := make([]uint8, rows*n)
			acc := make([]int32, rows*n)
			for k := range q {
				q[k] = uint8(r.Uint32())
				acc[k] = int32(r.Uint32()) >> uint(r.IntN(20))
			}
			rs := randF32(r, max(rows, 1), 0.01, 0.02)
			cs := randF32(r, n, 0.01, 0.02)
			d, check := guarded(rows*n, float32(1.5))
			if err := DequantizeU8(d, q, rows, n, rs, 7); err != nil {
				t.Fatal(err)
			}
			check(t)
			for k := range d {
				if w := (float32(q[k]) - 7) * rs[k/n]; d[k] != w {
					t.Fatalf("u8 [%d] = %v, want %v", k, d[k], w)
				}
			}
			if err := DequantizeU8(d, q, rows, n, rs[:1], 0); err != nil {
				t.Fatal(err)
			}
			for k := range d {
				if w := float32(q[k]) * rs[0]; d[k] != w {
					t.Fatalf("u8 per tensor [%d] = %v, want %v", k, d[k], w)
				}
			}
			for _, c := range [][]float32{nil, cs} {
				if err := DequantizeS32(d, acc, rows, n, rs, c); err != nil {
					t.Fatal(err)
				}
				check(t)
				for k := range d {
					w := float32(acc[k]) * rs[k/n]
					if c != nil {
						w = float32(w) * c[k%n]
					}
					if d[k] != w {
						t.Fatalf("s32 [%d] = %v, want %v", k, d[k], w)
					}
				}
			}
		}
	})
}

func TestEltwisePath(t *testing.T) {
	t.Logf("element-wise path: %s", EltwisePath())
	withPath(true, func() {
		if EltwisePath() != "generic" {
			t.Fatal("forcing the twin did not select it")
		}
	})
}

func floatsFromBytes(b []byte) []float32 {
	x := make([]float32, len(b)/4)
	for i := range x {
		x[i] = math.Float32frombits(uint32(b[4*i]) | uint32(b[4*i+1])<<8 | uint32(b[4*i+2])<<16 | uint32(b[4*i+3])<<24)
	}
	return x
}

// FuzzLayerNorm checks that the live path and the Go twin agree bit for bit
// (outputs and errors) on arbitrary bits, including NaN and Inf.
func FuzzLayerNorm(f *testing.F) {
	f.Add([]byte{0, 0, 128, 63, 0, 0, 0, 64, 0, 0, 64, 64, 1, 2, 3, 4}, uint8(2), true)
	f.Add(make([]byte, 4*70), uint8(17), false)
	f.Fuzz(func(t *testing.T, b []byte, hh uint8, withQ bool) {
		x := floatsFromBytes(b)
		h := int(hh)%40 + 1
		rows := len(x) / h / 2
		if rows == 0 {
			return
		}
		res := x[rows*h : 2*rows*h]
		x = x[:rows*h]
		gamma, beta := make([]float32, h), make([]float32, h)
		for j := range gamma {
			gamma[j], beta[j] = 1+float32(j)/16, float32(j)/32
		}
		var qp *QuantParams
		if withQ {
			qp = &QuantParams{Scale: 0.05, ZeroPoint: 128, PreScale: gamma}
		}
		run := func(generic bool) ([]float32, []uint8, error) {
			d, q := make([]float32, rows*h), make([]uint8, rows*h)
			var err error
			withPath(generic, func() { err = LayerNorm(d, q, x, res, rows, h, gamma, beta, 1e-5, qp) })
			return d, q, err
		}
		d1, q1, e1 := run(false)
		d2, q2, e2 := run(true)
		if fmt.Sprint(e1) != fmt.Sprint(e2) {
			t.Fatalf("errors differ: %v vs %v", e1, e2)
		}
		if k := bitsEqual(d1, d2); k >= 0 || !slices.Equal(q1, q2) {
			t.Fatalf("outputs differ at %d", k)
		}
	})
}

// FuzzSoftmax checks the live path against the Go twin, and that a
// successful result is finite and sums to 1 per row (or is an all-zero row).
func FuzzSoftmax(f *testing.F) {
	f.Add([]byte{0, 0, 128, 63, 0, 0, 0, 64, 0, 0, 64, 64, 0, 0, 128, 255}, uint8(3), true)
	f.Add(make([]byte, 4*70), uint8(33), false)
	f.Fuzz(func(t *testing.T, b []byte, nn uint8, withMask bool) {
		x := floatsFromBytes(b)
		n := int(nn)%40 + 1
		rows := len(x) / n
		if rows == 0 {
			return
		}
		var mask []float32
		if withMask {
			mask = x[(rows-1)*n : rows*n]
		}
		x = x[:rows*n]
		run := func(generic bool) ([]float32, error) {
			d := make([]float32, rows*n)
			var err error
			withPath(generic, func() { err = Softmax(d, x, rows, n, mask) })
			return d, err
		}
		d1, e1 := run(false)
		d2, e2 := run(true)
		if fmt.Sprint(e1) != fmt.Sprint(e2) {
			t.Fatalf("errors differ: %v vs %v", e1, e2)
		}
		if k := bitsEqual(d1, d2); k >= 0 {
			t.Fatalf("outputs differ at %d: %v vs %v", k, d1[k], d2[k])
		}
		if e1 != nil {
			return
		}
		for i := 0; i < rows; i++ {
			var s float64
			for _, v := range d1[i*n : i*n+n] {
				if !(v >= 0 && v <= 1) {
					t.Fatalf("row %d: value %v", i, v)
				}
				s += float64(v)
			}
			if s != 0 && math.Abs(s-1) > 1e-4 {
				t.Fatalf("row %d sums to %v", i, s)
			}
		}
	})
}

const benchRows, benchH = 256, 1024

func benchBoth(b *testing.B, f func(b *testing.B)) {
	for _, generic := range []bool{false, true} {
		name := "avx512"
		if generic {
			name = "generic"
		}
		b.Run(name, func(b *testing.B) {
			if !generic && !eltwiseAVX512() {
				b.Skip("avx512 element-wise path not live")
			}
			defer func(old bool) { eltwiseForceGeneric = old }(eltwiseForceGeneric)
			eltwiseForceGeneric = generic
			f(b)
		})
	}
}

// BenchmarkLayerNorm: 256x1024, residual fused, f32 and u8 out. Bytes are
// those moved: x, res, dst (4 each) and q (1).
func BenchmarkLayerNorm(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	n := benchRows * benchH
	x, res := randF32(r, n, 1, 0), randF32(r, n, 1, 0)
	gamma, beta := randF32(r, benchH, 0.1, 1), randF32(r, benchH, 0.1, 0)
	dst, q := make([]float32, n), make([]uint8, n)
	qp := &QuantParams{PreScale: gamma, Scale: 0.05, ZeroPoint: 128}
	benchBoth(b, func(b *testing.B) {
		b.Run("f32", func(b *testing.B) {
			b.SetBytes(int64(n * 12))
			for b.Loop() {
				_ = LayerNorm(dst, nil, x, res, benchRows, benchH, gamma, beta, 1e-12, nil)
			}
		})
		b.Run("f32+u8", func(b *testing.B) {
			b.SetBytes(int64(n * 13))
			for b.Loop() {
				_ = LayerNorm(dst, q, x, res, benchRows, benchH, gamma, beta, 1e-12, qp)
			}
		})
	})
}

// BenchmarkSoftmax: 256 rows of 1024 scores with a padding mask.
func BenchmarkSoftmax(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	n := benchRows * benchH
	x := randF32(r, n, 3, 0)
	mask := make([]float32, benchH)
	for j := benchH - 100; j < benchH; j++ {
		mask[j] = -math.MaxFloat32
	}
	dst := make([]float32, n)
	benchBoth(b, func(b *testing.B) {
		b.SetBytes(int64(n * 8))
		for b.Loop() {
			_ = Softmax(dst, x, benchRows, benchH, mask)
		}
	})
}

// BenchmarkGELU: 256x1024 out of place.
func BenchmarkGELU(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 3))
	n := benchRows * benchH
	x := randF32(r, n, 2, 0)
	dst := make([]float32, n)
	benchBoth(b, func(b *testing.B) {
		b.SetBytes(int64(n * 8))
		for b.Loop() {
			_ = GELUF32(dst, x)
		}
	})
}

// BenchmarkQuantize: 256x1024 per token (rows) and per tensor (static), and
// s32 -> f32 dequantize.
func BenchmarkQuantize(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 4))
	n := benchRows * benchH
	x := randF32(r, n, 2, 0)
	q := make([]uint8, n)
	acc := make([]int32, n)
	for k := range acc {
		acc[k] = int32(r.Uint32()) >> 12
	}
	scales := make([]float32, benchRows)
	cs := randF32(r, benchH, 0.01, 0.02)
	f := make([]float32, n)
	benchBoth(b, func(b *testing.B) {
		b.Run("rows-u8", func(b *testing.B) {
			b.SetBytes(int64(n * 5))
			for b.Loop() {
				_ = QuantizeRowsU8(q, scales, x, benchRows, benchH)
			}
		})
		b.Run("tensor-u8", func(b *testing.B) {
			b.SetBytes(int64(n * 5))
			for b.Loop() {
				_ = QuantizeTensorU8(q, x, benchRows, benchH, 0.05, 128)
			}
		})
		b.Run("dequant-s32", func(b *testing.B) {
			b.SetBytes(int64(n * 8))
			for b.Loop() {
				_ = DequantizeS32(f, acc, benchRows, benchH, scales, cs)
			}
		})
	})
}

// TestSoftmaxScaled checks that the fused scaling equals a float32 multiply
// followed by Softmax, bit for bit, on each path, and that the paths agree.
func TestSoftmaxScaled(t *testing.T) {
	var paths [2][]float32
	for p, generic := range []bool{false, true} {
		if !generic && !eltwiseAVX512() {
			t.Log("avx512 element-wise path not live: generic path only")
			continue
		}
		withPath(generic, func() {
			var all []float32
			for _, sh := range eltShapes {
				rows, n := sh[0], sh[1]
				r := rand.New(rand.NewPCG(9, uint64(n)))
				x := randF32(r, rows*n, 40, -3)
				mask := randF32(r, n, 30, 0)
				if n > 3 {
					mask[1], mask[2] = -math.MaxFloat32, float32(math.Inf(-1))
				}
				for _, sc := range []float32{0.125, float32(1 / math.Sqrt(48))} {
					for _, m := range [][]float32{nil, mask} {
						xs := slices.Clone(x)
						for k := range xs {
							xs[k] *= sc
						}
						want := make([]float32, rows*n)
						if err := Softmax(want, xs, rows, n, m); err != nil {
							t.Fatal(err)
						}
						got, check := guarded(rows*n, float32(7))
						if err := SoftmaxScaled(got, x, rows, n, sc, m); err != nil {
							t.Fatal(err)
						}
						check(t)
						if k := bitsEqual(got, want); k >= 0 {
							t.Fatalf("generic=%v %dx%d scale %v: dst[%d]=%v, want %v", generic, rows, n, sc, k, got[k], want[k])
						}
						inPlace := slices.Clone(x)
						if err := SoftmaxScaled(inPlace, inPlace, rows, n, sc, m); err != nil {
							t.Fatal(err)
						}
						if k := bitsEqual(inPlace, want); k >= 0 {
							t.Fatalf("generic=%v %dx%d in place: dst[%d]=%v, want %v", generic, rows, n, k, inPlace[k], want[k])
						}
						all = append(all, got...)
					}
				}
			}
			paths[p] = all
		})
	}
	if paths[0] != nil {
		if k := bitsEqual(paths[0], paths[1]); k >= 0 {
			t.Fatalf("asm and generic differ at %d: %v vs %v", k, paths[0][k], paths[1][k])
		}
	}
	x := []float32{1, float32(math.NaN()), 2}
	if err := SoftmaxScaled(x, x, 1, 3, 0.5, nil); !errors.Is(err, ErrNonFinite) || !strings.Contains(err.Error(), "row 0 col 1") {
		t.Fatalf("NaN: err = %v", err)
	}
}

// TestQuantizeBlockU8: a strided block equals QuantizeTensorU8 of the
// same rows, leaves the rest of dst alone, and reports bad input.
func TestQuantizeBlockU8(t *testing.T) {
	rows, cols, ldx, ldd := 7, 19, 40, 33
	x := make([]float32, rows*ldx)
	for i := range x {
		x[i] = float32(i%23)*0.37 - 3
	}
	dst := make([]uint8, rows*ldd)
	for i := range dst {
		dst[i] = 0xAA
	}
	if err := QuantizeBlockU8(dst, ldd, x, ldx, rows, cols, 0.05, 60); err != nil {
		t.Fatal(err)
	}
	want := make([]uint8, cols)
	for i := 0; i < rows; i++ {
		if err := QuantizeTensorU8(want, x[i*ldx:i*ldx+cols], 1, cols, 0.05, 60); err != nil {
			t.Fatal(err)
		}
		for j := 0; j < ldd; j++ {
			got := dst[i*ldd+j]
			switch {
			case j < cols && got != want[j]:
				t.Fatalf("row %d col %d: %d, want %d", i, j, got, want[j])
			case j >= cols && got != 0xAA:
				t.Fatalf("row %d col %d outside the block was written: %d", i, j, got)
			}
		}
	}
	x[3*ldx+5] = float32(math.NaN())
	err := QuantizeBlockU8(dst, ldd, x, ldx, rows, cols, 0.05, 60)
	if !errors.Is(err, ErrNonFinite) || !strings.Contains(err.Error(), "row 3 col 5") {
		t.Errorf("NaN: %v", err)
	}
	for _, bad := range []func() error{
		func() error { return QuantizeBlockU8(dst, cols-1, x, ldx, rows, cols, 0.05, 60) },
		func() error { return QuantizeBlockU8(dst[:10], ldd, x, ldx, rows, cols, 0.05, 60) },
		func() error { return QuantizeBlockU8(dst, ldd, x, ldx, rows, cols, 0, 60) },
		func() error { return QuantizeBlockU8(dst, ldd, x, ldx, rows, cols, 0.05, 256) },
	} {
		if err := bad(); !errors.Is(err, ErrShape) {
			t.Errorf("bad arguments: %v, want ErrShape", err)
		}
	}
}

// TestParallelRows checks that ParallelRows covers every row once, in
// chunks of at least minRows, and returns the lowest chunk's error.
func TestParallelRows(t *testing.T) {
	for _, threads := range []int{1, 2, 3, 8} {
		for _, rows := range []int{0, 1, 15, 16, 31, 32, 128, 1000} {
			seen := make([]int32, rows)
			var mu sync.Mutex
			err := ParallelRows(threads, rows, 16, func(r0, r1 int) error {
				if threads > 1 && rows >= 32 && r1-r0 < 16 {
					t.Errorf("threads %d rows %d: chunk [%d, %d) under 16 rows", threads, rows, r0, r1)
				}
				mu.Lock()
				defer mu.Unlock()
				for i := r0; i < r1; i++ {
					seen[i]++
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			for i, n := range seen {
				if n != 1 {
					t.Fatalf("threads %d rows %d: row %d ran %d times", threads, rows, i, n)
				}
			}
		}
		err := ParallelRows(threads, 256, 16, func(r0, r1 int) error {
			if r1 > 100 {
				return fmt.Errorf("rows from %d", r0)
			}
			return nil
		})
		want := "rows from 0"
		if threads > 1 {
			chunks := min(256/16, 4*threads)
			for c := 0; c < chunks; c++ {
				if r0, r1 := 256*c/chunks, 256*(c+1)/chunks; r1 > 100 {
					want = fmt.Sprintf("rows from %d", r0)
					break
				}
			}
		}
		if err == nil || err.Error() != want {
			t.Errorf("threads %d: error %v, want %q", threads, err, want)
		}
	}
}
