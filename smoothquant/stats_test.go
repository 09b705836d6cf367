package smoothquant

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sqnrLoop is SQNR as it was written by hand before gonum: float64 sums of
// squares accumulated in order.
func sqnrLoop(ref, got []float32) float64 {
	if len(ref) != len(got) {
		return math.NaN()
	}
	var sig, noise float64
	for i, r := range ref {
		d := float64(got[i]) - float64(r)
		sig += float64(r) * float64(r)
		noise += d * d
	}
	if noise == 0 {
		return math.Inf(1)
	}
	return 10 * math.Log10(sig/noise)
}

// weightColMaxLoop is WeightColMax as it was written by hand before gonum.
func weightColMaxLoop(w []float32, n, k int) []float32 {
	if n < 0 || k < 0 || len(w) < n*k {
		return nil
	}
	m := make([]float32, k)
	for r := 0; r < n; r++ {
		for j, v := range w[r*k : r*k+k] {
			if a := abs32(v); a > m[j] {
				m[j] = a
			}
		}
	}
	return m
}

// TestSQNRGonumMatchesLoop: the gonum SQNR equals the summed one within
// float rounding. Each of the two sums of n squares is within gamma64(n)
// of its exact value (relative: the terms are non-negative), and gonum's
// norms within a few u64, so the two dB values differ by at most
// 10/ln(10) * 2 * (gamma64(n) + 4*u64) (d log10(x) = dx / (x ln 10)), plus
// the rounding of log10 and of the product by 10 or 20 on each side, a u64
// of |dB| each.
func TestSQNRGonumMatchesLoop(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{1, 2, 17, 768, 256 * 768, 256 * 3072} {
		for _, noise := range []float64{0, 1e-6, 1e-3, 0.3, 10} {
			ref := make([]float32, n)
			got := make([]float32, n)
			for i := range ref {
				ref[i] = float32(r.NormFloat64() * 3)
				got[i] = ref[i] + float32(r.NormFloat64()*noise)
			}
			old, gon := sqnrLoop(ref, got), SQNR(ref, got)
			if noise == 0 {
				assert.True(t, math.IsInf(gon, 1), "n=%d: SQNR of equal slices %v, want +Inf", n, gon)
				continue
			}
			u := 0x1p-53
			g := float64(n) * u / (1 - float64(n)*u)
			tol := 10/math.Ln10*2*(g+4*u) + 2*u*(math.Abs(old)+math.Abs(gon))
			assert.InDelta(t, old, gon, tol, "n=%d noise=%g", n, noise)
		}
	}
	// The edge cases keep their meaning.
	assert.True(t, math.IsInf(SQNR(nil, nil), 1), "empty")
	assert.True(t, math.IsInf(SQNR([]float32{0, 0}, []float32{0, 0}), 1), "both zero")
	assert.True(t, math.IsInf(SQNR([]float32{0, 0}, []float32{0, 1}), -1), "zero reference")
	assert.True(t, math.IsNaN(SQNR([]float32{1, 2}, []float32{1})), "lengths differ")
	// Magnitudes whose squares overflow float32 and whose sums of squares
	// stay far inside float64: both forms agree.
	big := []float32{3e38, -3e38, 1e38}
	near := []float32{3e38, -2.9e38, 1e38}
	assert.InDelta(t, sqnrLoop(big, near), SQNR(big, near), 1e-12)
}

// TestWeightColMaxGonumMatchesLoop: the column infinity norms are maxima
// of exactly converted values, so gonum's and the loop's are equal bit for
// bit, signed zeros, infinities and subnormals included.
func TestWeightColMaxGonumMatchesLoop(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, nk := range [][2]int{{0, 0}, {0, 5}, {5, 0}, {1, 1}, {3, 7}, {768, 768}, {3072, 768}, {768, 3072}} {
		n, k := nk[0], nk[1]
		w := make([]float32, n*k)
		for i := range w {
			switch r.IntN(50) {
			case 0:
				w[i] = float32(math.Copysign(0, -1))
			case 1:
				w[i] = math.Float32frombits(uint32(r.IntN(1 << 23))) // subnormal
			default:
				w[i] = float32(r.NormFloat64() * 0.05)
			}
		}
		if n*k > 4 {
			w[3] = float32(math.Inf(-1))
		}
		old, gon := weightColMaxLoop(w, n, k), WeightColMax(w, n, k)
		require.Len(t, gon, k)
		for j := range old {
			require.Equalf(t, math.Float32bits(old[j]), math.Float32bits(gon[j]), "n=%d k=%d column %d: %v, loop %v", n, k, j, gon[j], old[j])
		}
	}
	assert.Nil(t, WeightColMax(make([]float32, 5), 2, 3), "short input")
	assert.Nil(t, WeightColMax(nil, -1, 3), "negative n")
}
