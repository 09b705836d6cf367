package kernels

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

var quantPreShapes = [][2]int{{0, 5}, {1, 1}, {1, 15}, {2, 16}, {3, 17}, {4, 31}, {5, 768}, {2, 1023}, {7, 3072}, {64, 100}}

// quantPreRef is the definition of QuantizeRowsU8Pre in float64 steps that
// round to float32 where the kernel does.
func quantPreRef(x []float32, rows, h int, pre []float32) ([]uint8, []float32) {
	q := make([]uint8, rows*h)
	scales := make([]float32, rows)
	for i := 0; i < rows; i++ {
		v := make([]float32, h)
		var m float32
		for j := range v {
			v[j] = x[i*h+j] * pre[j]
			m = max(m, float32(math.Abs(float64(v[j]))))
		}
		s := m / 127
		if s == 0 {
			s = 1
		}
		scales[i] = s
		for j := range v {
			q[i*h+j] = uint8(int(Quantize(float64(v[j]), s, 0, -128, 127)) + 128)
		}
	}
	return q, scales
}

func randPre(r *rand.Rand, h int) []float32 {
	pre := make([]float32, h+3) // longer than h is allowed
	for j := range pre {
		pre[j] = float32(math.Exp(r.NormFloat64()))
	}
	return pre
}

func TestQuantizeRowsU8Pre(t *testing.T) {
	eltPaths(t, func(t *testing.T) {
		for _, sh := range quantPreShapes {
			rows, h := sh[0], sh[1]
			r := rand.New(rand.NewPCG(31, uint64(h)))
			x := randF32(r, rows*h, 2, 0.1)
			if rows > 1 {
				for j := 0; j < h; j++ {
					x[h+j] = 0 // an all-zero row
				}
			}
			pre := randPre(r, h)
			x0, pre0 := slices.Clone(x), slices.Clone(pre)
			dst, check := guarded(rows*h, uint8(0x5a))
			scales, checkS := guarded(rows, float32(-1))
			if err := QuantizeRowsU8Pre(dst, scales, x, rows, h, pre); err != nil {
				t.Fatal(err)
			}
			check(t)
			checkS(t)
			if !slices.Equal(x, x0) || !slices.Equal(pre, pre0) {
				t.Fatal("input changed")
			}
			wq, ws := quantPreRef(x, rows, h, pre)
			if rows > 1 && h > 0 && scales[1] != 1 {
				t.Fatalf("%dx%d: zero row scale %v, want 1", rows, h, scales[1])
			}
			for i := range ws {
				if math.Float32bits(scales[i]) != math.Float32bits(ws[i]) {
					t.Fatalf("%dx%d: scale[%d]=%v, want %v", rows, h, i, scales[i], ws[i])
				}
			}
			for k := range wq {
				if dst[k] != wq[k] {
					t.Fatalf("%dx%d: q[%d][%d]=%d, want %d", rows, h, k/h, k%h, dst[k], wq[k])
				}
			}
		}
	})
}

// TestQuantizeRowsU8PreMatchesTwin compares the AVX-512 kernels with their
// Go twins bit for bit, including ties, saturation-free extremes and tails.
func TestQuantizeRowsU8PreMatchesTwin(t *testing.T) {
	if !eltwiseAVX512() {
		t.Skipf("avx512 element-wise path not live (asm built: %v)", eltwiseHaveAsm)
	}
	r := rand.New(rand.NewPCG(32, 7))
	for trial := 0; trial < 200; trial++ {
		rows, h := 1+r.IntN(4), 1+r.IntN(300)
		x := randF32(r, rows*h, math.Exp(4*r.NormFloat64()), 0)
		pre := randPre(r, h)
		for k := 0; k < 4 && h > 2; k++ { // exact .5 ties after scaling
			x[r.IntN(rows*h)] = float32(r.IntN(200)-100) + 0.5
			pre[r.IntN(h)] = 1
		}
		var q [2][]uint8
		var s [2][]float32
		for p, generic := range []bool{false, true} {
			q[p], s[p] = make([]uint8, rows*h), make([]float32, rows)
			withPath(generic, func() {
				if err := QuantizeRowsU8Pre(q[p], s[p], x, rows, h, pre); err != nil {
					t.Fatal(err)
				}
			})
		}
		if i := bitsEqual(s[0], s[1]); i >= 0 {
			t.Fatalf("trial %d %dx%d: scale[%d] asm %v, generic %v", trial, rows, h, i, s[0][i], s[1][i])
		}
		if !slices.Equal(q[0], q[1]) {
			t.Fatalf("trial %d %dx%d: asm and generic quantization differ", trial, rows, h)
		}
		// The primitives alone, on unaligned sub-slices.
		off := r.IntN(h)
		xr, pr := x[off:h], pre[off:h]
		if a, g := eltAbsMaxPre(xr, pr), eltAbsMaxPreGeneric(xr, pr); a != g {
			t.Fatalf("trial %d: eltAbsMaxPre %#x, generic %#x", trial, a, g)
		}
		inv := float32(1 / (r.Float64() + 0.01))
		if trial%4 == 0 {
			inv = 1 // the .5 ties with pre 1 reach the rounding as ties
		}
		qa, qg := make([]uint8, len(xr)), make([]uint8, len(xr))
		eltQuantRowPre(qa, xr, pr, inv)
		eltQuantRowPreGeneric(qg, xr, pr, inv)
		if !slices.Equal(qa, qg) {
			t.Fatalf("trial %d: eltQuantRowPre differs from its twin", trial)
		}
	}
}

func TestQuantizeRowsU8PreNilAndOnes(t *testing.T) {
	eltPaths(t, func(t *testing.T) {
		for _, sh := range quantPreShapes {
			rows, h := sh[0], sh[1]
			x := randF32(rand.New(rand.NewPCG(33, uint64(h))), rows*h, 3, -0.2)
			ones := make([]float32, h)
			for j := range ones {
				ones[j] = 1
			}
			qw, sw := make([]uint8, rows*h), make([]float32, rows)
			if err := QuantizeRowsU8(qw, sw, x, rows, h); err != nil {
				t.Fatal(err)
			}
			for name, pre := range map[string][]float32{"nil": nil, "ones": ones} {
				q, s := make([]uint8, rows*h), make([]float32, rows)
				if err := QuantizeRowsU8Pre(q, s, x, rows, h, pre); err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(q, qw) || bitsEqual(s, sw) >= 0 {
					t.Fatalf("%dx%d pre %s: differs from QuantizeRowsU8", rows, h, name)
				}
			}
		}
	})
}

func TestQuantizeRowsU8PreNonFinite(t *testing.T) {
	eltPaths(t, func(t *testing.T) {
		nan, inf := float32(math.NaN()), float32(math.Inf(1))
		for _, c := range []struct {
			name   string
			xv, pv float32
			want   string
		}{
			{"x NaN", nan, 1, "row 1 col 49"}, {"x +Inf", inf, 1, "row 1 col 49"},
			{"x -Inf", -inf, 2, "row 1 col 49"}, {"x Inf pre 0", inf, 0, "row 1 col 49"},
			{"overflow", 3e38, 10, "row 1 col 49"},
			// pre[49] is used by every row: row 0's 0*NaN and 0*Inf are NaN.
			{"pre NaN", 1, nan, "row 0 col 49"}, {"pre Inf", 1, inf, "row 0 col 49"},
		} {
			rows, h := 3, 50
			x := randF32(rand.New(rand.NewPCG(3, 5)), rows*h, 1, 0)
			pre := make([]float32, h)
			for j := range pre {
				pre[j] = 0.5
			}
			x[h+49], pre[49] = c.xv, c.pv
			x[49] = 0
			err := QuantizeRowsU8Pre(make([]uint8, rows*h), make([]float32, rows), x, rows, h, pre)
			if !errors.Is(err, ErrNonFinite) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("%s: err = %v, want ErrNonFinite at %s", c.name, err, c.want)
			}
		}
	})
}

func TestQuantizeRowsU8PreShapeErrors(t *testing.T) {
	x := make([]float32, 12)
	for name, err := range map[string]error{
		"short pre":    QuantizeRowsU8Pre(make([]uint8, 12), make([]float32, 3), x, 3, 4, make([]float32, 3)),
		"short scales": QuantizeRowsU8Pre(make([]uint8, 12), make([]float32, 2), x, 3, 4, make([]float32, 4)),
		"short dst":    QuantizeRowsU8Pre(make([]uint8, 11), make([]float32, 3), x, 3, 4, make([]float32, 4)),
		"negative":     QuantizeRowsU8Pre(nil, nil, nil, -1, 4, make([]float32, 4)),
	} {
		if !errors.Is(err, ErrShape) {
			t.Fatalf("%s: err = %v, want ErrShape", name, err)
		}
	}
}

func BenchmarkQuantizeRowsU8Pre(b *testing.B) {
	const rows, h = 128, 768
	r := rand.New(rand.NewPCG(1, 2))
	x, pre := randF32(r, rows*h, 1, 0), randPre(r, h)
	q, s := make([]uint8, rows*h), make([]float32, rows)
	b.SetBytes(rows * h * 4)
	for b.Loop() {
		_ = QuantizeRowsU8Pre(q, s, x, rows, h, pre)
	}
}
