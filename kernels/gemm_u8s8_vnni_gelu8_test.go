package kernels

import (
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/int8bert/int8bert/cpu"
)

// geluQ8Xs are the inputs of the GELU8 tests: those of geluXs, a fine sweep
// of [-6, 6] (the clamp is 5.4), every float32 power of two with both
// signs, the float32 extremes and random bit patterns of every magnitude.
func geluQ8Xs() []float32 {
	xs := geluXs()
	for x := -6.0; x <= 6; x += 1.0 / 16384 {
		xs = append(xs, float32(x))
	}
	for e := -149; e <= 127; e++ {
		v := float32(math.Ldexp(1, e))
		xs = append(xs, v, -v, v*1.7, -v*1.3)
	}
	xs = append(xs, math.MaxFloat32, -math.MaxFloat32, math.SmallestNonzeroFloat32, 5.4, -5.4,
		math.Nextafter32(5.4, 0), math.Nextafter32(-5.4, 0), math.Nextafter32(5.4, 9), math.Nextafter32(-5.4, -9))
	r := rand.New(rand.NewPCG(31, 32))
	for range 50000 {
		b := r.Uint32()
		if b&0x7f800000 == 0x7f800000 { // no Inf/NaN here
			continue
		}
		xs = append(xs, math.Float32frombits(b))
	}
	return xs
}

// checkGELUQ8 checks the GELU of 8-bit outputs: absolute error against the
// float64 erf GELU below 1e-6*max(1, |x|) over the float32 range (it is an
// input to a requantization step of ~1e-2, not an f32 output).
func checkGELUQ8(t *testing.T, name string, xs, ys []float32) {
	t.Helper()
	worst, wx := 0.0, float32(0)
	for i, x := range xs {
		want := geluAccurate(float64(x))
		got := float64(ys[i])
		e := math.Abs(got-want) / max(1, math.Abs(float64(x)))
		if !(e < 1e-6) {
			t.Fatalf("%s(%g) = %.9g, want %.9g (error %.3g*max(1,|x|))", name, x, got, want, e)
		}
		if e > worst {
			worst, wx = e, x
		}
		if x <= -5.4 && got != 0 {
			t.Fatalf("%s(%g) = %g, want 0 below the clamp", name, x, got)
		}
	}
	t.Logf("%s: worst absolute error %.3g*max(1,|x|) at x = %g over %d inputs", name, worst, wx, len(xs))
}

func TestGELUQ8Accuracy(t *testing.T) {
	xs := geluQ8Xs()
	ys := make([]float32, len(xs))
	for i, x := range xs {
		ys[i] = geluQ8F32(x)
	}
	checkGELUQ8(t, "geluQ8F32", xs, ys)
	if y := geluQ8F32(float32(math.NaN())); y == y {
		t.Errorf("geluQ8F32(NaN) = %v, want NaN", y)
	}
	if y := geluQ8F32(float32(math.Inf(1))); !math.IsInf(float64(y), 1) {
		t.Errorf("geluQ8F32(+Inf) = %v, want +Inf", y)
	}
}

// TestFMA32 checks fma32 against one rounding of a*b+c to float32 where
// that sum is exact in float64, and on a case that rounding float64(a*b+c)
// to float32 gets wrong (a tie after the first rounding).
func TestFMA32(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 42))
	for range 200000 {
		a := float32(r.NormFloat64())
		b := float32(r.NormFloat64())
		c := float32(r.NormFloat64() * math.Ldexp(1, r.IntN(40)-20))
		want := float32(math.FMA(float64(a), float64(b), float64(c)))
		// With a*b exact and |c| within 2^29 of it, the float64 sum is exact
		// except in rare cases; compare only where it is exact.
		p := float64(a) * float64(b)
		s := p + float64(c)
		if s-p != float64(c) || s-float64(c) != p {
			continue
		}
		if got := fma32(a, b, c); got != want {
			t.Fatalf("fma32(%g, %g, %g) = %g, want %g", a, b, c, got, want)
		}
	}
	// A double-rounding case: a*b = 1 + 2^-24 exactly (a tie between two
	// float32), c = 2^-70: the true sum is above the tie (rounds up), the
	// float64 sum rounds to the tie, which then rounds to even (down).
	a, b := float32(1+math.Ldexp(1, -12)), float32(1+math.Ldexp(1, -12)) // 1 + 2^-11 + 2^-24
	c := float32(math.Ldexp(1, -70))
	exact := 1 + math.Ldexp(1, -11) + math.Ldexp(1, -24) // the tie, plus c
	up, down := math.Nextafter32(float32(exact), 2), float32(1+math.Ldexp(1, -11))
	if got := fma32(a, b, c); got != up {
		t.Fatalf("fma32 tie + tiny = %v, want %v (not %v)", got, up, down)
	}
	if got := fma32(a, b, -c); got != down {
		t.Fatalf("fma32 tie - tiny = %v, want %v", got, down)
	}
}

// TestFMA32FastPath checks fma32 (the float64 FMA with a tie and
// subnormal check) against fma32Exact (round to odd) on random operands of
// every magnitude, with ties and results near float32's subnormal range
// and overflow made on purpose.
func TestFMA32FastPath(t *testing.T) {
	r := rand.New(rand.NewPCG(43, 44))
	f := func() float32 {
		switch r.IntN(8) {
		case 0:
			return float32(math.Ldexp(r.Float64()+1, r.IntN(300)-150)) // subnormal to huge
		case 1:
			return float32(1 + math.Ldexp(float64(r.IntN(1<<12)), -12)) // short mantissas: exact products, ties
		case 2:
			return float32(math.Ldexp(1, r.IntN(80)-40))
		case 3:
			return -float32(math.Ldexp(r.Float64()+1, r.IntN(60)-140))
		}
		return float32(r.NormFloat64() * math.Ldexp(1, r.IntN(40)-20))
	}
	for i := range 2000000 {
		a, b, c := f(), f(), f()
		if i%3 == 0 { // c cancels most of a*b
			c = -float32(float64(a) * float64(b) * (1 + math.Ldexp(float64(r.IntN(5)-2), -25)))
		}
		got, want := fma32(a, b, c), fma32Exact(a, b, c)
		if math.Float32bits(got) != math.Float32bits(want) && !(got != got && want != want) {
			t.Fatalf("fma32(%g, %g, %g) = %g (%#x), exact %g (%#x)", a, b, c, got, math.Float32bits(got), want, math.Float32bits(want))
		}
	}
	for _, v := range [][3]float32{{0, 0, 0}, {float32(math.Copysign(0, -1)), 1, 0}, {float32(math.Inf(1)), 1, 1}, {float32(math.Inf(1)), 0, 1},
		{float32(math.NaN()), 1, 1}, {math.MaxFloat32, 2, 0}, {math.MaxFloat32, 1, math.MaxFloat32}, {1e-45, 0.5, 0}, {1e-45, 1e-45, 0}} {
		got, want := fma32(v[0], v[1], v[2]), fma32Exact(v[0], v[1], v[2])
		if math.Float32bits(got) != math.Float32bits(want) && !(got != got && want != want) {
			t.Errorf("fma32(%v) = %v, exact %v", v, got, want)
		}
	}
}

// epiGELU8 calls epi with the GELU of 8-bit outputs on y = 0*1 + bias = x,
// storing f32 (so the GELU itself is seen).
func epiGELU8(epi vnniEpi, xs []float32) []float32 {
	ys := make([]float32, len(xs))
	acc := make([]int32, len(xs))
	epi((*byte)(unsafe.Pointer(&ys[0])), len(xs), &acc[0], len(xs), 1, len(xs), nil, 0, nil, 1, nil, &xs[0], nil, 0, vnniGELU8, 0, 0, 0, 0)
	return ys
}

// vnniAllEpilogues are the assembly epilogues (Horner and split, 2 and 3
// chunks; call them only where vnniAvailable).
var vnniAllEpilogues = []struct {
	name string
	epi  vnniEpi
}{{"vnniEpilogue", vnniEpilogue}, {"vnniEpilogue3", vnniEpilogue3}, {"vnniEpilogueS", vnniEpilogueS}, {"vnniEpilogue3S", vnniEpilogue3S}}

// TestVNNIEpilogueGELU8Exact checks that every epilogue computes the GELU of
// 8-bit outputs bit for bit as geluQ8F32 (f32 stores, so every bit shows),
// NaN included.
func TestVNNIEpilogueGELU8Exact(t *testing.T) {
	xs := append(geluQ8Xs(), float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)))
	want := make([]float32, len(xs))
	for i, x := range xs {
		if x == 0 {
			x = 0 // the epilogue's input is 0*1 + x: -0 becomes +0
		}
		want[i] = geluQ8F32(x)
	}
	checkGELUQ8(t, "vnniEpilogueGo", xs[:len(xs)-3], epiGELU8(vnniEpilogueGo, xs[:len(xs)-3]))
	if !vnniAvailable(cpu.X86) {
		t.Skipf("the VNNI assembly epilogue is not available here (asm build %v): checked the Go twin only: %s", vnniAsm, cpu.X86)
	}
	for _, e := range vnniAllEpilogues {
		got := epiGELU8(e.epi, xs)
		for i := range xs {
			g, w := got[i], want[i]
			if math.Float32bits(g) != math.Float32bits(w) && !(g != g && w != w) {
				t.Fatalf("%s: GELU8(%g) = %g (%#x), geluQ8F32 %g (%#x)", e.name, xs[i], g, math.Float32bits(g), w, math.Float32bits(w))
			}
		}
	}
}

// TestVNNIEpilogueU8Exact compares the epilogues with their Go twin, byte for
// byte, on random tiles requantized to u8 or s8 with every option (GELU8,
// ReLU or none; compensation, row or tensor scale, column scales, bias,
// residual), with padded strides and guard bytes after each row, and
// pre-activations spread over the whole GELU (and a few NaNs).
func TestVNNIEpilogueU8Exact(t *testing.T) {
	if !vnniAvailable(cpu.X86) {
		t.Skipf("the VNNI assembly epilogue is not available here (asm build %v): %s", vnniAsm, cpu.X86)
	}
	r := rand.New(rand.NewPCG(51, 52))
	vec := func(n int, s float64) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(r.NormFloat64() * s)
		}
		return v
	}
	for it := 0; it < 6000; it++ {
		n, rows := 1+it%70, 1+r.IntN(9)
		ldacc, ldd, ldres := n+r.IntN(3), n+r.IntN(3)+1, n+r.IntN(3)
		acc := make([]int32, rows*ldacc)
		sums := make([]int32, n)
		for i := range acc {
			acc[i] = int32(r.IntN(1<<22) - 1<<21)
		}
		for i := range sums {
			sums[i] = int32(r.IntN(1<<14) - 1<<13)
		}
		opt := func(v []float32) *float32 {
			if r.IntN(2) == 0 {
				return nil
			}
			return &v[0]
		}
		var colSum *int32
		zp := int32(0)
		if r.IntN(2) == 0 {
			colSum, zp = &sums[0], int32(r.IntN(256))
		}
		bv := vec(n, 2)
		if r.IntN(8) == 0 {
			bv[r.IntN(n)] = float32(math.NaN())
		}
		colScale, bias, res := opt(vec(n, 1)), opt(bv), opt(vec(rows*ldres, 2))
		rowScale := opt(vec(rows, 3e-6))
		scale := float32(3e-6 * (0.5 + r.Float64()))
		flags := []int{vnniGELU8, vnniGELU8, vnniReLU, 0, vnniGELU8 | vnniGELU}[r.IntN(5)] | []int{vnniU8, vnniS8}[r.IntN(2)]
		// (Zero points inside the output's range: the assembly stores a
		// NaN's zero point unsaturated.)
		invOut, outZP, lo, hi := float32(40*r.Float64()), float32(r.IntN(20)), float32(0), float32(255)
		if flags&vnniS8 != 0 {
			outZP, lo, hi = outZP-10, -128, 127
		}
		want := make([]byte, rows*ldd+8)
		for i := range want {
			want[i] = 0xa5
		}
		vnniEpilogueGo(&want[0], ldd, &acc[0], ldacc, rows, n, colSum, zp, rowScale, scale, colScale, bias, res, ldres, flags, invOut, outZP, lo, hi)
		for _, e := range vnniAllEpilogues {
			got := make([]byte, rows*ldd+8)
			for i := range got {
				got[i] = 0xa5
			}
			e.epi(&got[0], ldd, &acc[0], ldacc, rows, n, colSum, zp, rowScale, scale, colScale, bias, res, ldres, flags, invOut, outZP, lo, hi)
			for p := range got {
				if got[p] != want[p] {
					t.Fatalf("it %d %s rows=%d n=%d ldd=%d flags=%d: byte %d (row %d col %d) = %d, want %d", it, e.name, rows, n, ldd, flags, p, p/ldd, p%ldd, got[p], want[p])
				}
			}
		}
	}
}

// TestVNNIGELU8Selected checks that the driver picks the rational GELU
// (geluQ8F32) for every destination, and the erfc one (geluF32) exactly
// for f32 outputs with PreciseGELU.
func TestVNNIGELU8Selected(t *testing.T) {
	for _, c := range []struct {
		out     Out
		precise bool
		want    int
	}{
		{Out{F32: []float32{0}}, false, vnniGELU8},
		{Out{F32: []float32{0}}, true, vnniGELU},
		{Out{U8: []uint8{0}}, false, vnniGELU8 | vnniU8},
		{Out{U8: []uint8{0}}, true, vnniGELU8 | vnniU8},
		{Out{S8: []int8{0}}, false, vnniGELU8 | vnniS8},
		{Out{S8: []int8{0}}, true, vnniGELU8 | vnniS8},
	} {
		ep := &Epilogue{Act: ActGELU, OutScale: 0.1, PreciseGELU: c.precise}
		if got := newVNNIEp(&GEMMU8S8{Ep: ep, Out: c.out}).flags; got != c.want {
			t.Errorf("%+v precise=%v: flags = %d, want %d", c.out, c.precise, got, c.want)
		}
	}
}
