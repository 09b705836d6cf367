package smoothquant

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

func TestSmoothFactorsFormula(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	act := randMatrix(r, 1, 50, 10)
	wc := randMatrix(r, 1, 50, 0.1)
	for j := range act {
		act[j] = float32(math.Abs(float64(act[j]))) + 0.01
		wc[j] = float32(math.Abs(float64(wc[j]))) + 1e-3
	}
	for _, alpha := range []float64{0, 0.25, 0.5, 0.85, 1} {
		s := SmoothFactors(act, wc, alpha)
		for j := range s {
			want := math.Pow(float64(act[j]), alpha) / math.Pow(float64(wc[j]), 1-alpha)
			want = math.Min(math.Max(want, 1e-5), 1e5)
			if float64(s[j]) != float64(float32(want)) {
				t.Fatalf("alpha %v channel %d: s=%v, want %v", alpha, j, s[j], want)
			}
		}
	}
	// clamping, zero and non-finite channels, short wColMax
	inf := float32(math.Inf(1))
	s := SmoothFactors([]float32{1e12, 1e-12, 0, 5, inf, 5, 2}, []float32{1e-12, 1e12, 3, 0, 1, inf}, 0.5)
	want := []float32{1e5, 1e-5, 1, 1, 1, 1, 1}
	for j := range want {
		if s[j] != want[j] {
			t.Errorf("channel %d: s=%v, want %v", j, s[j], want[j])
		}
	}
}

func TestWeightColMax(t *testing.T) {
	w := []float32{1, -4, 0, -2, 3, 0}
	got := WeightColMax(w, 2, 3)
	for j, want := range []float32{2, 4, 0} {
		if got[j] != want {
			t.Errorf("col %d: %v, want %v", j, got[j], want)
		}
	}
	if WeightColMax(w, 3, 3) != nil {
		t.Error("short weights accepted")
	}
}

func TestQuantizeWeightsRoundTrip(t *testing.T) {
	const n, k = 17, 40
	r := rand.New(rand.NewPCG(2, 1))
	w := randMatrix(r, n, k, 0.3)
	for j := 0; j < k; j++ { // row 5 all zero
		w[5*k+j] = 0
	}
	smooth := make([]float32, k)
	for j := range smooth {
		smooth[j] = float32(0.1 + 3*r.Float64())
	}
	for _, s := range [][]float32{nil, smooth} {
		q, scale := QuantizeWeights(w, n, k, s)
		if len(q) != n*k || len(scale) != n {
			t.Fatalf("lengths %d %d", len(q), len(scale))
		}
		if scale[5] != 1 {
			t.Errorf("all-zero row scale %v, want 1", scale[5])
		}
		for i := 0; i < n; i++ {
			var m float64
			for j := 0; j < k; j++ {
				v := w[i*k+j]
				if s != nil {
					v *= s[j]
				}
				m = max(m, math.Abs(float64(v)))
				e := math.Abs(float64(q[i*k+j])*float64(scale[i]) - float64(v))
				if e > float64(scale[i])/2*(1+1e-6) {
					t.Fatalf("[%d][%d]: error %v > scale/2 = %v", i, j, e, scale[i]/2)
				}
				if q[i*k+j] < -127 {
					t.Fatalf("q=%d below -127", q[i*k+j])
				}
			}
			if m > 0 && scale[i] != float32(m/127) {
				t.Errorf("row %d scale %v, want %v", i, scale[i], m/127)
			}
		}
	}
	if q, s := QuantizeWeights(w, n, k, smooth[:3]); q != nil || s != nil {
		t.Error("short smooth accepted")
	}
}

func TestStaticActParams(t *testing.T) {
	cases := []struct {
		name     string
		lo, hi   float32
		scale    float32
		zp       int32
		checkMap bool
	}{
		{"positive", 2, 10.2, 10.2 / 255, 0, true},
		{"negative", -5.1, -1, 5.1 / 255, 255, true},
		{"mixed", -1, 3, 4.0 / 255, 64, true}, // 1/(4/255) = 63.75 -> 64
		{"zero", 0, 0, 1, 0, false},
	}
	for _, c := range cases {
		s, zp := StaticActParams(c.lo, c.hi)
		if math.Abs(float64(s-c.scale)) > 1e-7*float64(c.scale) || zp != c.zp {
			t.Errorf("%s: scale %v zp %d, want %v %d", c.name, s, zp, c.scale, c.zp)
		}
		if s <= 0 || zp < 0 || zp > 255 {
			t.Errorf("%s: invalid params %v %d", c.name, s, zp)
		}
		// 0 is exactly representable: it quantizes to zp.
		if q := math.RoundToEven(float64(0*(1/s) + float32(zp))); q != float64(zp) {
			t.Errorf("%s: 0 quantizes to %v", c.name, q)
		}
		if c.checkMap {
			// the extremes map to within half a step of 0 and 255
			for _, v := range []float32{min(0, c.lo), max(0, c.hi)} {
				q := float64(v)/float64(s) + float64(zp)
				if q < -0.5-1e-3 || q > 255.5+1e-3 {
					t.Errorf("%s: %v maps to %v", c.name, v, q)
				}
			}
		}
	}
}

func TestParse(t *testing.T) {
	for s, want := range map[string]Mode{"static": Static, "dynamic": Dynamic, "int8-static": Static, " INT8-Dynamic ": Dynamic} {
		m, err := ParseMode(s)
		if err != nil || m != want {
			t.Errorf("ParseMode(%q) = %v, %v", s, m, err)
		}
	}
	if _, err := ParseMode("fp32"); !errors.Is(err, ErrInvalid) {
		t.Errorf("ParseMode(fp32): %v", err)
	}
	if Static.String() != "static" || Dynamic.String() != "dynamic" {
		t.Error("Mode.String")
	}
	if a, auto, err := ParseAlpha("0.5"); a != 0.5 || auto || err != nil {
		t.Errorf("ParseAlpha(0.5) = %v %v %v", a, auto, err)
	}
	if _, auto, err := ParseAlpha("auto"); !auto || err != nil {
		t.Errorf("ParseAlpha(auto) = %v %v", auto, err)
	}
	for _, s := range []string{"1.5", "-0.1", "NaN", "x", ""} {
		if _, _, err := ParseAlpha(s); !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseAlpha(%q): %v", s, err)
		}
	}
	good := []Options{{}, {Mode: Static, Alpha: 1}, {Auto: true, Alpha: 7}, {Range: "percentile", Percentile: 99.9}, {Range: "percentile"}}
	for _, o := range good {
		if err := o.Validate(); err != nil {
			t.Errorf("%+v: %v", o, err)
		}
	}
	bad := []Options{{Mode: 5}, {Alpha: 1.1}, {Alpha: math.NaN()}, {Auto: true, Grid: []float64{}},
		{Auto: true, Grid: []float64{0.5, 2}}, {Range: "minmax"}, {Range: "percentile", Percentile: 30},
		{Percentile: math.NaN()}, {Range: "max", Percentile: 101}, {FallbackSQNR: math.Inf(1)}}
	for _, o := range bad {
		if err := o.Validate(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: %v, want ErrInvalid", o, err)
		}
	}
	g := Options{Auto: true}.grid()
	if len(g) != 21 || g[0] != 0 || g[20] != 1 || g[10] != 0.5 || g[3] != 0.15 {
		t.Errorf("default grid %v", g)
	}
	if g := (Options{Auto: true, Grid: []float64{0.9, 0.1, 0.5, 0.1}}).grid(); len(g) != 3 || g[0] != 0.1 || g[2] != 0.9 {
		t.Errorf("grid %v", g)
	}
}

func TestPercentileRange(t *testing.T) {
	v := make([]float32, 1000)
	for i := range v {
		v[i] = float32((i*7919)%1000) - 300 // a permutation of -300 ... 699
	}
	lo, hi := percentileRange(v, 99)
	if lo != -290 || hi != 689 { // ten values cut at each end
		t.Errorf("99th: %v %v, want -290 689", lo, hi)
	}
	lo, hi = percentileRange(v, 100)
	if lo != -300 || hi != 699 {
		t.Errorf("100th: %v %v", lo, hi)
	}
	if v[0] != -300 {
		t.Error("percentileRange modified its input")
	}
}

func TestRoundDiv(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	check := func(x, d float64) {
		want := math.Min(math.Max(math.RoundToEven(x/d), -127), 127)
		if got := roundDiv(x, d, 1/d); float64(got) != want {
			t.Fatalf("roundDiv(%v, %v) = %d, want %v", x, d, got, want)
		}
	}
	for i := 0; i < 200000; i++ {
		d := float64(float32(r.ExpFloat64() * 0.01))
		x := float64(float32(r.NormFloat64() * 60 * d))
		check(x, d)
		// exact ties: x = (h + 0.5)*d, representable in float32 for d = m*2^e
		dd := float64(float32(r.IntN(1<<12)+1) * float32(math.Ldexp(1, -r.IntN(20))))
		h := float64(r.IntN(254) - 127)
		check(float64(float32((h+0.5)*dd)), dd)
	}
	check(1e6, 1)
	check(-1e6, 1)
}
