package bench

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// The thresholds that make a timed figure noisy (docs/DESIGN.md section
// 7.2): its peak loop, run right before and right after it, moved by more
// than NoisyPeakDrift of the first run, or its passes spread (max - min)
// by more than NoisySpread of their median. Both are fractions.
const (
	NoisyPeakDrift = 0.10
	NoisySpread    = 0.15
)

// NoisyMark is what a table prints beside a noisy figure, and the ratios
// made from one; NoisyLegend explains it under the table.
const (
	NoisyMark   = "~"
	NoisyLegend = "~: a noisy figure (its passes spread by more than 15% of their median, or the peak loop run before and after it moved by more than 10%), or a ratio made from one: rerun on a quiet machine before quoting it"
)

// Spread is the minimum, median and maximum of a figure's timed passes
// (milliseconds), and their number.
type Spread struct {
	Min    float64 `json:"min_ms"`
	Median float64 `json:"median_ms"`
	Max    float64 `json:"max_ms"`
	N      int     `json:"passes"`
}

// SpreadOf is the spread of samples (any order; NaNs are not expected);
// the zero Spread for none. The median of an even count is the upper
// middle sample, as the median pass is elsewhere in the bench.
func SpreadOf(samples []float64) Spread {
	if len(samples) == 0 {
		return Spread{}
	}
	s := slices.Clone(samples)
	slices.Sort(s)
	return Spread{Min: s[0], Median: s[len(s)/2], Max: s[len(s)-1], N: len(s)}
}

// Rel is (max - min) / median, 0 for an empty or zero spread.
func (s Spread) Rel() float64 {
	if s.Median <= 0 {
		return 0
	}
	return (s.Max - s.Min) / s.Median
}

// String prints "median (min-max)" with one decimal.
func (s Spread) String() string {
	if s.N == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f (%.1f-%.1f)", s.Median, s.Min, s.Max)
}

// Noise is the verdict on one timed figure.
type Noise struct {
	Noisy bool `json:"noisy"`
	// Why lists the reasons, empty when not noisy.
	Why []string `json:"why,omitempty"`
	// SpreadPct is the spread's Rel in percent, PeakDriftPct
	// |after - before| / before in percent (0 without both peaks).
	SpreadPct    float64 `json:"spread_pct,omitempty"`
	PeakDriftPct float64 `json:"peak_drift_pct,omitempty"`
}

// Classify judges a figure from its spread and the peak loop's rates
// right before and right after it (either 0: not measured, no peak
// verdict).
func Classify(s Spread, peakBefore, peakAfter float64) Noise {
	n := Noise{SpreadPct: 100 * s.Rel()}
	if s.Rel() > NoisySpread {
		n.Why = append(n.Why, fmt.Sprintf("passes spread %.0f%% of their median (%.1f-%.1f ms)", n.SpreadPct, s.Min, s.Max))
	}
	if peakBefore > 0 && peakAfter > 0 && !math.IsInf(peakBefore, 0) && !math.IsInf(peakAfter, 0) {
		d := math.Abs(peakAfter-peakBefore) / peakBefore
		n.PeakDriftPct = 100 * d
		if d > NoisyPeakDrift {
			n.Why = append(n.Why, fmt.Sprintf("peak loop moved %.0f%% (%.0f -> %.0f GOP/s)", n.PeakDriftPct, peakBefore, peakAfter))
		}
	}
	n.Noisy = len(n.Why) > 0
	return n
}

// String is "" or "noisy: reason; reason".
func (n Noise) String() string {
	if !n.Noisy {
		return ""
	}
	return "noisy: " + strings.Join(n.Why, "; ")
}

// markIf is v with NoisyMark in front when noisy.
func markIf(v string, noisy bool) string {
	if noisy && v != "-" {
		return NoisyMark + v
	}
	return v
}

// Ratio prints a ratio as "2.00x", "-" for 0, with NoisyMark in front when
// either figure it was made from is noisy: the one way the bench prints
// a speed-up.
func Ratio(v float64, noisy bool) string {
	if v == 0 {
		return "-"
	}
	return markIf(fmt.Sprintf("%.2fx", v), noisy)
}
