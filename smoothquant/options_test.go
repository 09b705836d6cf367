package smoothquant

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestZeroOptionsAlpha: a zero Options.Alpha is DefaultAlpha, as the docs
// say (it used to be alpha 0); AlphaSet asks for alpha 0 itself.
func TestZeroOptionsAlpha(t *testing.T) {
	spec, _ := outlierLayer(7, 32, 48, 64)
	for _, c := range []struct {
		o    Options
		want float64
	}{
		{Options{}, DefaultAlpha},
		{Options{Mode: Static}, DefaultAlpha},
		{Options{Alpha: 0, AlphaSet: true}, 0},
		{Options{Alpha: 0.25}, 0.25},
		{Options{Alpha: 1, AlphaSet: true}, 1},
	} {
		assert.Equal(t, c.want, c.o.FixedAlpha(), "%+v", c.o)
		o := c.o
		o.Selector = testSel
		q, err := QuantizeLinear(spec, o)
		require.NoError(t, err)
		assert.Equal(t, c.want, q.Alpha, "%+v", c.o)
		want := SmoothFactors(spec.Obs.AbsMax(), WeightColMax(spec.W, spec.N, spec.K), c.want)
		assert.True(t, slices.Equal(want, q.Smooth), "%+v: smoothing factors of alpha %v", c.o, c.want)
	}
}

// TestOptionsThreads: a negative thread count is refused, naming it.
func TestOptionsThreads(t *testing.T) {
	err := Options{Threads: -3}.Validate()
	require.ErrorIs(t, err, ErrInvalid)
	assert.Contains(t, err.Error(), "threads -3")
	assert.NoError(t, Options{Threads: 0}.Validate())
}
