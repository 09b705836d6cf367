package smoothquant

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/int8bert/int8bert/selector"
)

// ErrCalibration is wrapped by every error about calibration data: a NaN or
// infinite value, or no rows at all.
var ErrCalibration = errors.New("smoothquant: bad calibration data")

// ErrInvalid is wrapped by every error about shapes, options or tensors.
var ErrInvalid = errors.New("smoothquant: invalid argument")

// Mode is how activations are quantized at run time.
type Mode int

const (
	// Dynamic: one symmetric scale per row (token), computed at run time.
	Dynamic Mode = iota
	// Static: one calibrated asymmetric u8 scale and zero point per tensor.
	Static
)

// String returns "dynamic" or "static".
func (m Mode) String() string {
	switch m {
	case Dynamic:
		return "dynamic"
	case Static:
		return "static"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

func (m Mode) valid() bool { return m == Dynamic || m == Static }

// ParseMode accepts "static", "dynamic", "int8-static" and "int8-dynamic"
// (case-insensitive, surrounding spaces ignored).
func ParseMode(s string) (Mode, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "static", "int8-static":
		return Static, nil
	case "dynamic", "int8-dynamic":
		return Dynamic, nil
	}
	return 0, fmt.Errorf("smoothquant: mode %q (want static or dynamic): %w", s, ErrInvalid)
}

// ParseAlpha reads a migration strength: a number in [0,1], or "auto" for a
// per-linear search.
func ParseAlpha(s string) (alpha float64, auto bool, err error) {
	t := strings.ToLower(strings.TrimSpace(s))
	if t == "auto" {
		return 0, true, nil
	}
	a, perr := strconv.ParseFloat(t, 64)
	if perr != nil || math.IsNaN(a) || a < 0 || a > 1 {
		return 0, false, fmt.Errorf("smoothquant: alpha %q (want a number in [0,1] or auto): %w", s, ErrInvalid)
	}
	return a, false, nil
}

// Range names of Options.Range.
const (
	RangeMax        = "max"
	RangePercentile = "percentile"
)

// DefaultPercentile is used when Options.Range is "percentile" and
// Options.Percentile is 0.
const DefaultPercentile = 99.99

// DefaultAlpha is the migration strength of a zero Options.Alpha
// (docs/DESIGN.md section 3.4).
const DefaultAlpha = 0.5

// Options controls QuantizeLinear. The zero value is dynamic mode with
// alpha DefaultAlpha, max ranges and no fallback.
type Options struct {
	Mode Mode
	// Alpha is the fixed migration strength in [0,1], used when !Auto.
	// 0 means DefaultAlpha unless AlphaSet, so that a zero Options has
	// the documented default; ParseAlpha's callers set AlphaSet.
	Alpha float64
	// AlphaSet takes Alpha as given, 0 included (alpha 0 migrates no
	// difficulty from the activations: s_j = 1/max|W_j|).
	AlphaSet bool
	// Auto searches alpha per linear over Grid.
	Auto bool
	// Grid is the candidate alphas of the search (nil: 0, 0.05, ..., 1).
	Grid []float64
	// Range of static activation scales: "max" (default, "" means it) uses
	// the observed minimum and maximum of the smoothed input; "percentile"
	// uses the Percentile-th (high end) and (100-Percentile)-th (low end)
	// percentiles of the smoothed sample values (0 means DefaultPercentile).
	Range      string
	Percentile float64
	// FallbackSQNR: a linear whose best SQNR (dB) is below it stays FP32
	// (0 = never).
	FallbackSQNR float64
	// Threads for the alpha search's GEMMs (0 or 1: one; negative is an
	// error).
	Threads int
	// Selector chooses the kernels of the calibration's GEMMs (the FP32
	// reference output and the simulated u8 x s8 ones), as it does the
	// runtime's; nil means selector.Default().
	Selector *selector.Selector
}

// DefaultGrid returns 0, 0.05, ..., 1 (21 values).
func DefaultGrid() []float64 {
	g := make([]float64, 21)
	for i := range g {
		g[i] = float64(i) / 20
	}
	return g
}

// Validate checks the options.
func (o Options) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("smoothquant: options: %s: %w", fmt.Sprintf(format, args...), ErrInvalid)
	}
	if !o.Mode.valid() {
		return bad("unknown mode %d", int(o.Mode))
	}
	if !o.Auto && !(o.Alpha >= 0 && o.Alpha <= 1) {
		return bad("alpha %v not in [0,1]", o.Alpha)
	}
	if o.Threads < 0 {
		return bad("threads %d is negative (0 or 1: one thread)", o.Threads)
	}
	if o.Grid != nil && len(o.Grid) == 0 {
		return bad("empty alpha grid")
	}
	for _, a := range o.Grid {
		if !(a >= 0 && a <= 1) {
			return bad("grid alpha %v not in [0,1]", a)
		}
	}
	if o.Percentile != 0 && !(o.Percentile > 50 && o.Percentile <= 100) {
		// Checked whatever the range, so that a bad value is not
		// silently ignored by a max range.
		return bad("percentile %v not in (50,100] (0: %v)", o.Percentile, DefaultPercentile)
	}
	switch o.Range {
	case "", RangeMax, RangePercentile:
	default:
		return bad("range %q (want max or percentile)", o.Range)
	}
	if math.IsNaN(o.FallbackSQNR) || math.IsInf(o.FallbackSQNR, 0) {
		return bad("fallback SQNR %v not finite", o.FallbackSQNR)
	}
	return nil
}

// FixedAlpha is the alpha a fixed-alpha quantization uses: Alpha, or
// DefaultAlpha for a zero Alpha without AlphaSet.
func (o Options) FixedAlpha() float64 {
	if o.Alpha == 0 && !o.AlphaSet {
		return DefaultAlpha
	}
	return o.Alpha
}

// grid returns the sorted, de-duplicated alphas to try.
func (o Options) grid() []float64 {
	if !o.Auto {
		return []float64{o.FixedAlpha()}
	}
	src := o.Grid
	if src == nil {
		src = DefaultGrid()
	}
	g := append([]float64(nil), src...)
	// insertion sort: grids are short
	for i := 1; i < len(g); i++ {
		for j := i; j > 0 && g[j] < g[j-1]; j-- {
			g[j], g[j-1] = g[j-1], g[j]
		}
	}
	out := g[:0]
	for i, a := range g {
		if i == 0 || a != g[i-1] {
			out = append(out, a)
		}
	}
	return out
}

func (o Options) percentile() float64 {
	if o.Percentile == 0 {
		return DefaultPercentile
	}
	return o.Percentile
}
