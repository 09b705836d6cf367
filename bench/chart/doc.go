// Package chart draws the charts of `int8bert bench paper` with
// gonum.org/v1/plot: a roofline (WriteRoofline: log-log, attainable GOP/s
// against arithmetic intensity, one roof min(peak, AI x bandwidth) per
// ceiling and the measured kernels as labelled marks), grouped bars
// (WriteBars: GOP/s or speed-ups per shape and precision, with an optional
// reference line such as 1.0) and stacked bars (WriteStacked: where a pass
// spends its time, per precision; Share puts percentages on a 0-100 axis).
//
// What gonum/plot leaves to chance is laid out here (layout.go): point
// labels are nudged until none overlaps another label, a mark or the
// legend; the legend is drawn inside the plot area (in the roofline's
// emptiest corner, beside a share chart's bars); every bar carries its
// value (or Series.Labels, such as a noisy figure's mark); a roof and the
// points of its data type (Ceiling.Series) share one colour.
//
// Every writer takes a path without extension and writes path+".svg" and
// path+".png", each through a temporary file in the same folder renamed
// into place. Bad input (no data, NaN, Inf or negative values, values a
// log axis cannot show, lengths that disagree, an empty path) returns an
// error wrapping ErrInput; a missing folder returns an error wrapping the
// file system's; a panic inside gonum/plot is recovered into an error.
//
// chart imports no int8bert package; the bench command feeds it figures.
package chart
