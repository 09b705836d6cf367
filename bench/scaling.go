package bench

import (
	"cmp"
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/int8bert/int8bert/kernels/peak"
	"github.com/int8bert/int8bert/models"
	"github.com/int8bert/int8bert/selector"
)

// ScalingReport is ModelScaling's result: each precision's passes on each
// thread count, timed round by round in one run, and their scaling over
// the first count beside the peak loop's own.
type ScalingReport struct {
	Arch  string `json:"arch"`
	Seq   int    `json:"seq"`
	Batch int    `json:"batch"`
	// Threads are the counts measured, ascending; the scaling is over the
	// first (the base).
	Threads    []int              `json:"threads"`
	Precisions []PrecisionScaling `json:"precisions"`
	Int8       selector.Int8Tier  `json:"int8"`
}

// PrecisionScaling is one precision's points, one per thread count (the
// base's first, its scaling 1).
type PrecisionScaling struct {
	Precision string         `json:"precision"`
	Points    []ScalingPoint `json:"points"`
}

// ScalingPoint is one precision on one thread count.
type ScalingPoint struct {
	Threads int `json:"threads"`
	// Spread is its timed passes (ms per batch), MsPerBatch their median;
	// LinearMs, AttentionMs and OtherMs the parts of the median pass (as
	// in ModelResult).
	Spread      Spread  `json:"spread"`
	MsPerBatch  float64 `json:"ms_per_batch"`
	LinearMs    float64 `json:"linear_ms"`
	AttentionMs float64 `json:"attention_ms"`
	OtherMs     float64 `json:"other_ms"`
	// Scaling is the median over rounds of the base's pass over this
	// count's pass of the same round (each round runs one pass on every
	// count, back to back), ScalingSpread their minimum, median and
	// maximum.
	Scaling       float64 `json:"scaling"`
	ScalingSpread Spread  `json:"scaling_spread"`
	// PeakScaling is the precision's peak loop (peak.Rate: FMA, VNNI or
	// the INT8 tier's, VDPBF16PS) run on Threads goroutines at once, each
	// locked to its thread, over the same loop on the base's count,
	// measured right before the passes (PeakScalingAfter: right after);
	// 0 without a peak loop.
	PeakScaling      float64 `json:"peak_scaling,omitempty"`
	PeakScalingAfter float64 `json:"peak_scaling_after,omitempty"`
	// OfPeak is Scaling over PeakScaling: how much of what the cores
	// gave the peak loop the pass turned into speed (0 without a peak).
	OfPeak float64 `json:"of_peak_scaling,omitempty"`
	// Noise is the verdict on the passes (Classify, with this count's
	// summed peak loop before and after).
	Noise Noise `json:"noise"`
}

// ParseThreadCounts reads a --threads value: one count ("2") or an
// ascending list without repeats ("1,2", "1,4,16"), each 1 to most.
func ParseThreadCounts(s string, most int) ([]int, error) {
	var out []int
	for _, f := range splitList(s) {
		var n int
		if _, err := fmt.Sscanf(f, "%d", &n); err != nil || fmt.Sprint(n) != f {
			return nil, fmt.Errorf("--threads %q: %q is not a number of threads", s, f)
		}
		if n < 1 || n > most {
			if f == strings.TrimSpace(s) { // one count: the other commands' wording
				return nil, fmt.Errorf("--threads %d: want 1 to %d (the CPUs this process may use)", n, most)
			}
			return nil, fmt.Errorf("--threads %q: %d: want 1 to %d (the CPUs this process may use)", s, n, most)
		}
		if len(out) > 0 && n <= out[len(out)-1] {
			return nil, fmt.Errorf("--threads %q: want the counts ascending, each once", s)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--threads %q: want a count or a list such as 1,2", s)
	}
	return out, nil
}

// splitList splits a comma-separated list, trimming spaces and dropping
// empty items.
func splitList(s string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == ',' {
			f := s[start:i]
			for len(f) > 0 && f[0] == ' ' {
				f = f[1:]
			}
			for len(f) > 0 && f[len(f)-1] == ' ' {
				f = f[:len(f)-1]
			}
			if f != "" {
				out = append(out, f)
			}
			start = i + 1
		}
	}
	return out
}

// ModelScaling measures forward passes of one model at each precision on
// each of counts threads (ascending, at least two) in one run: a model is
// loaded (and quantized) per count, one untimed pass tunes each, then
// rounds of one pass per count, back to back (the order reversed every
// other round), run until o.Reps rounds and o.MinTime are reached. The
// peak loop of the precision's arithmetic runs on 1 and on each count of
// goroutines at once right before and after, for its own scaling.
// o.Threads and o.Instances are ignored.
func ModelScaling(ctx context.Context, o ModelOptions, counts []int) (*ScalingReport, error) {
	if len(counts) < 2 || !slices.IsSorted(counts) || counts[0] < 1 {
		return nil, fmt.Errorf("bench: thread counts %v: want at least two, ascending: %w", counts, models.ErrConfig)
	}
	o.Seq, o.Batch = cmp.Or(o.Seq, 128), cmp.Or(o.Batch, 1)
	o.CalibBatches, o.MinTime, o.Reps = cmp.Or(o.CalibBatches, 4), cmp.Or(o.MinTime, 2*time.Second), cmp.Or(o.Reps, 3)
	if o.Precisions == nil {
		o.Precisions = []models.Precision{models.PrecisionFP32, models.PrecisionInt8Static}
	}
	say := sayer(o.Progress)
	sel, err := syncOr(o.Selector)
	if err != nil {
		return nil, err
	}
	defer debug.SetGCPercent(debug.SetGCPercent(leanGCPercent))
	// The FP32 models, one per count, are kept while a precision left
	// needs them (the INT8 ones are quantized from them).
	fp32 := make([]*models.Pipeline, len(counts))
	closeFP32 := func() {
		for i, m := range fp32 {
			if m != nil {
				m.Close()
				fp32[i] = nil
			}
		}
		release()
	}
	defer closeFP32()
	loadFP32At := func(i int) error {
		if fp32[i] != nil {
			return nil
		}
		oo := o
		oo.Threads = counts[i]
		say("loading %s on %d thread(s)", o.Arch, counts[i])
		m, err := loadFP32(ctx, &oo, sel)
		fp32[i] = m
		return err
	}
	if err := loadFP32At(0); err != nil {
		return nil, err
	}
	cfg := fp32[0].Config()
	if o.Seq > cfg.MaxSeq() {
		return nil, fmt.Errorf("bench: seq %d: %s takes at most %d tokens: %w", o.Seq, o.Arch, cfg.MaxSeq(), models.ErrConfig)
	}
	in := randomInputs(cfg, o.Batch, o.Seq, 7)
	rep := &ScalingReport{Arch: o.Arch, Seq: o.Seq, Batch: o.Batch, Threads: slices.Clone(counts), Int8: selector.DescribeInt8(sel.Features())}
	for pi, p := range o.Precisions {
		if !slices.ContainsFunc(o.Precisions[pi:], func(q models.Precision) bool { return q != models.PrecisionBF16 }) {
			closeFP32()
		}
		ms := make([]*models.Pipeline, len(counts))
		for i := range counts {
			var err error
			switch {
			case p == models.PrecisionBF16:
				oo := o
				oo.Threads = counts[i]
				say("loading %s at bf16 on %d thread(s)", o.Arch, counts[i])
				ms[i], err = loadAt(ctx, &oo, sel, p)
			case p.Int8():
				if err = loadFP32At(i); err != nil {
					break
				}
				var calib []*models.Inputs
				for c := 0; c < o.CalibBatches; c++ {
					calib = append(calib, randomInputs(cfg, o.Batch, o.Seq, uint64(100+c)))
				}
				say("quantizing to %s on %d thread(s)", p, counts[i])
				qo := o.Quant
				qo.Profile = true
				ms[i], err = fp32[i].QuantizeInputs(ctx, calib, p, qo)
			default:
				if err = loadFP32At(i); err == nil {
					ms[i] = fp32[i]
				}
			}
			if err != nil {
				closeAll(ms, fp32)
				return nil, err
			}
		}
		say("timing %s on %v threads", p, counts)
		ps, err := timeScaling(ctx, ms, counts, in, p, &o)
		closeAll(ms, fp32)
		if err != nil {
			return nil, fmt.Errorf("bench: %s: %w", p, err)
		}
		ps.Precision = p.String()
		rep.Precisions = append(rep.Precisions, ps)
	}
	return rep, nil
}

// closeAll closes the models of ms that are not FP32 models of keep.
func closeAll(ms, keep []*models.Pipeline) {
	for _, m := range ms {
		if m != nil && !slices.Contains(keep, m) {
			m.Close()
		}
	}
	release()
}

// timeScaling times ms (ms[i] on counts[i] threads) round by round.
func timeScaling(ctx context.Context, ms []*models.Pipeline, counts []int, in *models.Inputs, p models.Precision, o *ModelOptions) (PrecisionScaling, error) {
	n := len(ms)
	for _, m := range ms { // tunes every key of each count
		if _, err := m.Forward(ctx, in, false); err != nil {
			return PrecisionScaling{}, err
		}
	}
	pt := cmp.Or(o.PeakTime, 300*time.Millisecond)
	var before, after []float64
	if o.PeakTime >= 0 {
		before = peakRates(pt, p, counts)
	}
	type part struct{ total, linear, attention time.Duration }
	passes := make([][]part, n)
	release()
	normal := debug.SetGCPercent(100)
	start := time.Now()
	for r := 0; r < o.Reps || time.Since(start) < o.MinTime; r++ {
		for j := range n {
			i := j
			if r%2 == 1 {
				i = n - 1 - j
			}
			if err := ctx.Err(); err != nil {
				debug.SetGCPercent(normal)
				return PrecisionScaling{}, err
			}
			b := ms[i].Profile()
			t := time.Now()
			if _, err := ms[i].Forward(ctx, in, false); err != nil {
				debug.SetGCPercent(normal)
				return PrecisionScaling{}, err
			}
			el := time.Since(t)
			a := ms[i].Profile()
			passes[i] = append(passes[i], part{el, a.Linear - b.Linear, a.Attention - b.Attention})
		}
	}
	debug.SetGCPercent(normal)
	if o.PeakTime >= 0 {
		after = peakRates(pt, p, counts)
	}
	msOf := func(d time.Duration) float64 { return float64(d) / 1e6 }
	ps := PrecisionScaling{}
	for i := range n {
		samples := make([]float64, len(passes[i]))
		ratios := make([]float64, len(passes[i]))
		for r, x := range passes[i] {
			samples[r] = msOf(x.total)
			ratios[r] = float64(passes[0][r].total) / float64(x.total)
		}
		sorted := slices.Clone(passes[i])
		sort.Slice(sorted, func(a, b int) bool { return sorted[a].total < sorted[b].total })
		med := sorted[len(sorted)/2]
		pt := ScalingPoint{Threads: counts[i], Spread: SpreadOf(samples), MsPerBatch: msOf(med.total), LinearMs: msOf(med.linear),
			AttentionMs: msOf(med.attention), ScalingSpread: SpreadOf(ratios)}
		pt.OtherMs = pt.MsPerBatch - pt.LinearMs - pt.AttentionMs
		pt.Scaling = pt.ScalingSpread.Median
		var pb, pa float64
		if before != nil && after != nil {
			pb, pa = before[i], after[i]
			if before[0] > 0 && after[0] > 0 {
				pt.PeakScaling, pt.PeakScalingAfter = before[i]/before[0], after[i]/after[0]
				pt.OfPeak = pt.Scaling / pt.PeakScaling
			}
		}
		pt.Noise = Classify(pt.Spread, pb, pa)
		ps.Points = append(ps.Points, pt)
	}
	return ps, nil
}

// peakRates runs the peak loop of prec's arithmetic for d on counts[i]
// goroutines at once, each locked to its OS thread, and returns the
// summed rates (GOP/s), one per count.
func peakRates(d time.Duration, prec models.Precision, counts []int) []float64 {
	kind := peakKind(prec)
	out := make([]float64, len(counts))
	for i, c := range counts {
		out[i] = concurrentRate(kind, d, c)
	}
	return out
}

// concurrentRate is the sum of n concurrent runs of kind's peak loop
// (GOP/s).
func concurrentRate(kind peak.Kind, d time.Duration, n int) float64 {
	rates := make([]float64, n)
	var wg sync.WaitGroup
	for g := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			rates[g] = peak.Rate(kind, d) / 1e9
		}()
	}
	wg.Wait()
	var sum float64
	for _, r := range rates {
		sum += r
	}
	return sum
}
