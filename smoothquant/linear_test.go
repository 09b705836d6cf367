package smoothquant

import (
	"errors"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
)

func TestSimulateOutputMatchesReference(t *testing.T) {
	shapes := []struct{ rows, n, k int }{{1, 1, 1}, {3, 5, 7}, {9, 33, 50}, {17, 48, 64}, {20, 70, 131}}
	for _, sh := range shapes {
		for _, mode := range []Mode{Static, Dynamic} {
			for _, smooth := range []bool{false, true} {
				spec, x := outlierLayer(uint64(sh.n*sh.k), sh.n, max(sh.k, 6), sh.rows)
				k := spec.K
				spec.NoSmooth = !smooth
				q, err := QuantizeLinear(spec, Options{Mode: mode, Alpha: 0.5, Selector: testSel})
				if err != nil {
					t.Fatal(err)
				}
				got, err := q.SimulateOutput(testSel, mode, x, sh.rows)
				if err != nil {
					t.Fatal(err)
				}
				want := refSimulate(q, mode, x, sh.rows)
				for i := range want {
					if d := math.Abs(float64(got[i] - want[i])); d > 1e-6*math.Abs(float64(want[i]))+1e-30 {
						t.Fatalf("%v smooth=%v rows=%d n=%d k=%d: y[%d] = %v, reference %v", mode, smooth, sh.rows, sh.n, k, i, got[i], want[i])
					}
				}
				// the search's SQNR is the SQNR of this output against the
				// exact FP32 product
				ref := make([]float32, len(want))
				for i := 0; i < sh.rows; i++ {
					for c := 0; c < sh.n; c++ {
						var s float64
						for j := 0; j < k; j++ {
							s += float64(x[i*k+j]) * float64(spec.W[c*k+j])
						}
						ref[i*sh.n+c] = float32(s)
					}
				}
				if s := SQNR(ref, got); math.Abs(s-q.SQNR) > 0.01 {
					t.Errorf("%v smooth=%v: QLinear.SQNR %v, recomputed %v", mode, smooth, q.SQNR, s)
				}
			}
		}
	}
}

func TestSimulateOutputErrors(t *testing.T) {
	spec, x := outlierLayer(1, 8, 16, 4)
	q, err := QuantizeLinear(spec, Options{Mode: Dynamic, Alpha: 0.5, Selector: testSel})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.SimulateOutput(testSel, Dynamic, x[:20], 4); !errors.Is(err, ErrInvalid) {
		t.Errorf("short x: %v", err)
	}
	if _, err := q.SimulateOutput(testSel, Static, x, 4); !errors.Is(err, ErrInvalid) {
		t.Errorf("static without act scale: %v", err)
	}
	if _, err := q.SimulateOutput(testSel, Mode(9), x, 4); !errors.Is(err, ErrInvalid) {
		t.Errorf("bad mode: %v", err)
	}
	bad := slices.Clone(x)
	bad[17] = float32(math.NaN())
	if _, err := q.SimulateOutput(testSel, Dynamic, bad, 4); !errors.Is(err, ErrCalibration) {
		t.Errorf("NaN input: %v", err)
	}
	q.WScale = q.WScale[:3]
	if _, err := q.SimulateOutput(testSel, Dynamic, x, 4); !errors.Is(err, ErrInvalid) {
		t.Errorf("short scales: %v", err)
	}
}

func TestSQNR(t *testing.T) {
	ref := []float32{1, 2, 3, 4}
	if s := SQNR(ref, ref); !math.IsInf(s, 1) {
		t.Errorf("exact: %v", s)
	}
	got := []float32{1.1, 2, 3, 4} // noise 0.01, signal 30
	if s, want := SQNR(ref, got), 10*math.Log10(30/0.01); math.Abs(s-want) > 1e-4 {
		t.Errorf("SQNR %v, want %v", s, want)
	}
	if !math.IsNaN(SQNR(ref, got[:2])) {
		t.Error("length mismatch not NaN")
	}
}

// TestOutlierAlpha is the point of SmoothQuant: with a few input channels
// 20-60 times larger than the rest, static per-tensor quantization of the
// raw input loses the small channels; migrating the scale into the weights
// recovers them.
func TestOutlierAlpha(t *testing.T) {
	spec, _ := outlierLayer(42, 96, 128, 300)
	run := func(o Options) *QLinear {
		q, err := QuantizeLinear(spec, o)
		if err != nil {
			t.Fatal(err)
		}
		return q
	}
	// The three on the same threads: the selector keys a GEMM by its
	// threads too, and where several FP32 kernels pass (the AVX2 tier) two
	// keys may time to kernels that sum in different orders, which would
	// make auto's SQNRs differ from the fixed runs' in the last bits.
	q0 := run(Options{Mode: Static, Alpha: 0, AlphaSet: true, Threads: 2, Selector: testSel})
	q5 := run(Options{Mode: Static, Alpha: 0.5, Threads: 2, Selector: testSel})
	qa := run(Options{Mode: Static, Auto: true, Threads: 2, Selector: testSel})
	noSmooth := spec
	noSmooth.NoSmooth = true
	qn, err := QuantizeLinear(noSmooth, Options{Mode: Static, Alpha: 0.5, Selector: testSel})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("static SQNR: alpha 0: %.2f dB, alpha 0.5: %.2f dB, auto (alpha %.2f): %.2f dB, no smoothing: %.2f dB",
		q0.SQNR, q5.SQNR, qa.Alpha, qa.SQNR, qn.SQNR)
	for _, a := range DefaultGrid() {
		t.Logf("  alpha %.2f: %.2f dB", a, qa.SQNRs[a])
	}
	if q5.SQNR < q0.SQNR+6 || qa.SQNR < q0.SQNR+6 {
		t.Errorf("alpha 0.5 (%.2f dB) and auto (%.2f dB) not clearly above alpha 0 (%.2f dB)", q5.SQNR, qa.SQNR, q0.SQNR)
	}
	if len(qa.SQNRs) != 21 {
		t.Errorf("auto tried %d alphas, want 21", len(qa.SQNRs))
	}
	best, bestA := math.Inf(-1), -1.0
	for _, a := range DefaultGrid() {
		s, ok := qa.SQNRs[a]
		if !ok {
			t.Fatalf("no SQNR for alpha %v", a)
		}
		if s > best {
			best, bestA = s, a
		}
	}
	if qa.Alpha != bestA || qa.SQNR != best {
		t.Errorf("auto picked alpha %v (%v dB), grid max is alpha %v (%v dB)", qa.Alpha, qa.SQNR, bestA, best)
	}
	if qa.SQNRs[0] != q0.SQNR || qa.SQNRs[0.5] != q5.SQNR {
		t.Errorf("auto's SQNRs (%v, %v) differ from the fixed runs (%v, %v)", qa.SQNRs[0], qa.SQNRs[0.5], q0.SQNR, q5.SQNR)
	}
	if qn.Smooth != nil || qn.Alpha != 0 {
		t.Errorf("NoSmooth: smooth %v alpha %v", qn.Smooth != nil, qn.Alpha)
	}
	if q5.Smooth == nil || q5.ActScale <= 0 || q5.Bias == nil || &q5.Bias[0] == &spec.Bias[0] {
		t.Error("alpha 0.5: missing smooth, act scale, or bias copy")
	}
	// dynamic mode: no static parameters, smoothing still helps
	d0 := run(Options{Mode: Dynamic, Alpha: 0, AlphaSet: true, Selector: testSel})
	d5 := run(Options{Mode: Dynamic, Alpha: 0.5, Selector: testSel})
	t.Logf("dynamic SQNR: alpha 0: %.2f dB, alpha 0.5: %.2f dB", d0.SQNR, d5.SQNR)
	if d5.ActScale != 0 || d5.ActZeroPoint != 0 {
		t.Errorf("dynamic act params %v %v", d5.ActScale, d5.ActZeroPoint)
	}
	if d5.SQNR <= d0.SQNR {
		t.Errorf("dynamic: alpha 0.5 (%.2f) not above alpha 0 (%.2f)", d5.SQNR, d0.SQNR)
	}
	// percentile range clips the outliers: a smaller scale than max
	qp := run(Options{Mode: Static, Alpha: 0, AlphaSet: true, Range: RangePercentile, Percentile: 99, Selector: testSel})
	if !(qp.ActScale < q0.ActScale) {
		t.Errorf("percentile act scale %v not below max's %v", qp.ActScale, q0.ActScale)
	}
}

// TestAutoModerate runs the full search on a moderate layer with several
// threads.
func TestAutoModerate(t *testing.T) {
	spec, _ := outlierLayer(5, 384, 256, 512)
	q, err := QuantizeLinear(spec, Options{Mode: Static, Auto: true, Threads: 4, Selector: testSel})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("384x256, 256 sample rows: auto alpha %.2f, %.2f dB", q.Alpha, q.SQNR)
	if q.SQNR < q.SQNRs[0]+6 || len(q.SQNRs) != 21 {
		t.Errorf("auto %.2f dB vs alpha 0 %.2f dB, %d alphas", q.SQNR, q.SQNRs[0], len(q.SQNRs))
	}
}

func TestZeroChannels(t *testing.T) {
	const n, k, rows = 6, 8, 5
	r := rand.New(rand.NewPCG(3, 3))
	x := randMatrix(r, rows, k, 1)
	w := randMatrix(r, n, k, 0.2)
	for i := 0; i < rows; i++ {
		x[i*k+2] = 0 // activation channel 2 all zero
	}
	for c := 0; c < n; c++ {
		w[c*k+5] = 0 // weight column 5 all zero
	}
	for j := 0; j < k; j++ {
		w[4*k+j] = 0 // output row 4 all zero
	}
	obs := NewObserver(k, 0, 1)
	if err := obs.Observe(x, rows, k); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []Mode{Static, Dynamic} {
		q, err := QuantizeLinear(LinearSpec{Name: "z", N: n, K: k, W: w, Obs: obs}, Options{Mode: mode, Auto: true, Selector: testSel})
		if err != nil {
			t.Fatal(err)
		}
		if q.Smooth[2] != 1 || q.Smooth[5] != 1 {
			t.Errorf("%v: s[2]=%v s[5]=%v, want 1", mode, q.Smooth[2], q.Smooth[5])
		}
		if !finite32(q.Smooth) || !finite32(q.WScale) || q.WScale[4] != 1 || math.IsNaN(q.SQNR) {
			t.Errorf("%v: non-finite result: smooth %v scale %v sqnr %v", mode, q.Smooth, q.WScale, q.SQNR)
		}
		for a, s := range q.SQNRs {
			if math.IsNaN(s) {
				t.Errorf("%v: alpha %v SQNR NaN", mode, a)
			}
		}
		y, err := q.SimulateOutput(testSel, mode, x, rows)
		if err != nil || !finite32(y) {
			t.Errorf("%v: simulate: %v", mode, err)
		}
	}
	// an all-zero input: static range is zero, scale 1
	zobs := NewObserver(k, 0, 1)
	if err := zobs.Observe(make([]float32, rows*k), rows, k); err != nil {
		t.Fatal(err)
	}
	q, err := QuantizeLinear(LinearSpec{Name: "z0", N: n, K: k, W: w, Obs: zobs}, Options{Mode: Static, Auto: true, Grid: []float64{0.7, 0.3, 0.9}, Selector: testSel})
	if err != nil {
		t.Fatal(err)
	}
	if q.ActScale != 1 || q.ActZeroPoint != 0 || !math.IsInf(q.SQNR, 1) {
		t.Errorf("zero input: act %v %d sqnr %v", q.ActScale, q.ActZeroPoint, q.SQNR)
	}
	if q.Alpha != 0.3 {
		t.Errorf("tie: alpha %v, want the smallest 0.3", q.Alpha)
	}
}

func TestFallback(t *testing.T) {
	spec, x := outlierLayer(9, 16, 32, 20)
	q, err := QuantizeLinear(spec, Options{Mode: Static, Alpha: 0, AlphaSet: true, FallbackSQNR: 200, Selector: testSel})
	if err != nil {
		t.Fatal(err)
	}
	if !q.Fallback || !slices.Equal(q.WF32, spec.W) || q.W != nil || q.WScale != nil || q.Smooth != nil || q.ActScale != 0 {
		t.Fatalf("fallback layer: %+v", q)
	}
	if &q.WF32[0] == &spec.W[0] {
		t.Error("WF32 aliases the spec's weights")
	}
	if q.SQNR >= 200 || math.IsNaN(q.SQNR) {
		t.Errorf("fallback SQNR %v", q.SQNR)
	}
	y, err := q.SimulateOutput(testSel, Static, x, 20)
	if err != nil {
		t.Fatal(err)
	}
	if y[0] == 0 || !finite32(y) {
		t.Errorf("fallback output %v", y[:3])
	}
	q2, err := QuantizeLinear(spec, Options{Mode: Static, Alpha: 0.5, FallbackSQNR: 1, Selector: testSel})
	if err != nil || q2.Fallback {
		t.Errorf("low threshold fell back: %v", err)
	}
}

func TestQuantizeLinearErrors(t *testing.T) {
	spec, _ := outlierLayer(1, 8, 16, 4)
	mut := func(f func(*LinearSpec)) LinearSpec { s := spec; f(&s); return s }
	nanW := slices.Clone(spec.W)
	nanW[3] = float32(math.Inf(-1))
	invalid := []LinearSpec{
		mut(func(s *LinearSpec) { s.N = 0 }),
		mut(func(s *LinearSpec) { s.W = s.W[:10] }),
		mut(func(s *LinearSpec) { s.Bias = s.Bias[:2] }),
		mut(func(s *LinearSpec) { s.W = nanW }),
		mut(func(s *LinearSpec) { s.Obs = nil }),
		mut(func(s *LinearSpec) { s.Obs = NewObserver(15, 0, 1) }),
	}
	for i, s := range invalid {
		if _, err := QuantizeLinear(s, Options{Selector: testSel}); !errors.Is(err, ErrInvalid) {
			t.Errorf("case %d: %v, want ErrInvalid", i, err)
		}
	}
	empty := mut(func(s *LinearSpec) { s.Obs = NewObserver(16, 0, 1) })
	if _, err := QuantizeLinear(empty, Options{Selector: testSel}); !errors.Is(err, ErrCalibration) {
		t.Errorf("no rows: %v, want ErrCalibration", err)
	}
	if _, err := QuantizeLinear(spec, Options{Alpha: 3, Selector: testSel}); !errors.Is(err, ErrInvalid) {
		t.Errorf("bad options: %v", err)
	}
}

// BenchmarkQuantizeLinearAuto is the alpha search on a BERT-large FFN2
// shape (N=1024, K=4096, 256 sample rows, 21 alphas).
func BenchmarkQuantizeLinearAuto(b *testing.B) {
	spec, _ := outlierLayer(1, 1024, 4096, 256)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := QuantizeLinear(spec, Options{Mode: Static, Auto: true, Threads: runtime.NumCPU(), Selector: testSel}); err != nil {
			b.Fatal(err)
		}
	}
}
