package smoothquant

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/int8bert/int8bert/selector"
)

// randMatrix returns rows x cols normal values times scale.
func randMatrix(r *rand.Rand, rows, cols int, scale float32) []float32 {
	v := make([]float32, rows*cols)
	for i := range v {
		v[i] = float32(r.NormFloat64()) * scale
	}
	return v
}

// outlierLayer builds a synthetic linear layer whose input has a few
// outlier channels (x20 ... x60), observed over rows rows.
func outlierLayer(seed uint64, n, k, rows int) (LinearSpec, []float32) {
	r := rand.New(rand.NewPCG(seed, 1))
	x := randMatrix(r, rows, k, 1)
	outliers := []int{3, k / 3, k/2 + 1, k - 2}
	mult := []float32{20, 35, 50, 60}
	for i := 0; i < rows; i++ {
		for c, j := range outliers {
			x[i*k+j] = x[i*k+j]*mult[c] + mult[c]/4
		}
	}
	w := randMatrix(r, n, k, 0.05)
	bias := randMatrix(r, 1, n, 0.1)
	obs := NewObserver(k, 256, seed)
	if err := obs.Observe(x, rows, k); err != nil {
		panic(err)
	}
	return LinearSpec{Name: "synthetic", N: n, K: k, W: w, Bias: bias, Obs: obs}, x
}

// refSimulate is the slow reference of SimulateOutput: plain loops, exact
// int64 accumulation, the dequantization in float64.
func refSimulate(q *QLinear, mode Mode, x []float32, rows int) []float32 {
	n, k := q.N, q.K
	xs := make([]float32, rows*k)
	for i := range xs {
		xs[i] = x[i]
		if q.Smooth != nil {
			inv := float32(1) / q.Smooth[i%k]
			xs[i] = float32(x[i] * inv)
		}
	}
	y := make([]float32, rows*n)
	a := make([]int64, k) // the centred integer input
	for i := 0; i < rows; i++ {
		row := xs[i*k : i*k+k]
		var rowScale float64
		if mode == Static {
			inv := float32(1) / q.ActScale
			for j, v := range row {
				t := float32(float32(v*inv) + float32(q.ActZeroPoint))
				u := math.Min(math.Max(math.RoundToEven(float64(t)), 0), 255)
				a[j] = int64(u) - int64(q.ActZeroPoint)
			}
			rowScale = float64(q.ActScale)
		} else {
			var m float32
			for _, v := range row {
				m = max(m, float32(math.Abs(float64(v))))
			}
			s := m / 127
			if s == 0 {
				s = 1
			}
			inv := 1 / s
			for j, v := range row {
				u := math.Min(math.Max(math.RoundToEven(float64(float32(v*inv))), -128), 127)
				a[j] = int64(u)
			}
			rowScale = float64(s)
		}
		for c := 0; c < n; c++ {
			var acc int64
			for j := 0; j < k; j++ {
				acc += a[j] * int64(q.W[c*k+j])
			}
			y[i*n+c] = float32(float64(acc) * rowScale * float64(q.WScale[c]))
		}
	}
	return y
}

func finite32(v []float32) bool {
	for _, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return false
		}
	}
	return true
}

// testSel is the selector the tests give the calibration (Options.Selector,
// SimulateOutput): one that tunes briefly and keeps no cache file, in place
// of selector.Default(); it still reads INT8BERT_KERNEL and cpu.X86.
var testSel *selector.Selector

func TestMain(m *testing.M) {
	sel, err := selector.New(selector.Options{CachePath: "off", Reps: 1, RepTime: 100 * time.Microsecond})
	if err != nil {
		fmt.Fprintln(os.Stderr, "smoothquant tests: selector:", err)
		os.Exit(1)
	}
	testSel = sel
	code := m.Run()
	sel.Close()
	os.Exit(code)
}
