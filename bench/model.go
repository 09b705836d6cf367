package bench

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/int8bert/int8bert/models"
	"github.com/int8bert/int8bert/selector"
)

// ModelOptions configure Model.
type ModelOptions struct {
	// Arch is an architecture of Archs (deterministic random weights of
	// its real shapes) or a model folder.
	Arch string
	// Seq tokens per sequence (0: 128), Batch sequences per forward pass
	// (0: 1), Threads per linear (0: 1).
	Seq, Batch, Threads int
	// Precisions to measure (nil: fp32, int8-static, int8-dynamic).
	Precisions []models.Precision
	// Quant controls the quantization (alpha, ...); both modes are
	// calibrated on CalibBatches batches of random token ids (0: 4).
	Quant        models.QuantizeOptions
	CalibBatches int
	// MinTime is the least time spent timing each precision (0: 2s), after
	// one untimed pass; Reps the least number of timed passes (0: 3).
	MinTime time.Duration
	Reps    int
	// PeakTime is the time of the peak microbenchmark (FMA for FP32, VNNI
	// for INT8) run on the calling thread right before each precision is
	// timed, for linear_pct_peak (0: 300ms; negative: none).
	PeakTime time.Duration
	// Selector runs the linears (nil: the process-wide synchronous one,
	// selector.DefaultSync).
	Selector *selector.Selector
	// Progress, when set, hears what is being done.
	Progress func(msg string)
	// Instances > 1 also runs that many instances (models.Instances) of
	// the model loaded once, each making forward passes of the batch
	// concurrently on Threads threads, after the one-instance measurement
	// (also on a pool, of one); 0 or 1: the one-instance measurement only.
	// Pin binds each instance to its own Threads CPUs (Linux).
	Instances int
	Pin       bool
}

// InstancesResult is one precision's multi-instance measurement.
type InstancesResult struct {
	Instances int  `json:"instances"`
	Pinned    bool `json:"pinned"`
	// SeqPerS is the aggregate throughput of the N instances (all passes'
	// sequences over the wall time of the window), OneSeqPerS that of one
	// instance measured the same way right before, Scaling their ratio.
	SeqPerS    float64 `json:"seq_per_s"`
	OneSeqPerS float64 `json:"one_instance_seq_per_s"`
	Scaling    float64 `json:"scaling"`
	// MsPerBatch is each instance's median pass, Passes its timed passes.
	MsPerBatch []float64 `json:"ms_per_batch"`
	Passes     []int     `json:"passes"`
	// RSS is the process's resident memory (VmRSS, bytes) after one
	// instance ran (load and warm pass included), RSSAfter after all N
	// ran; 0 where it is not known (not Linux). ExtraPerInstance is
	// (RSSAfter-RSS)/(N-1), WeightBytes the model's weights
	// ((*TaskModel).WeightBytes, packed forms included) and
	// ExtraPctWeights ExtraPerInstance over it, in percent.
	RSS              int64   `json:"rss_bytes,omitempty"`
	RSSAfter         int64   `json:"rss_after_bytes,omitempty"`
	ExtraPerInstance int64   `json:"extra_rss_per_instance_bytes,omitempty"`
	WeightBytes      int64   `json:"weight_bytes"`
	ExtraPctWeights  float64 `json:"extra_rss_pct_weights,omitempty"`
}

// ModelResult is one precision's measurement.
type ModelResult struct {
	Precision string `json:"precision"`
	// SeqPerS is sequences per second; MsPerBatch the median time of one
	// forward pass of Batch sequences.
	SeqPerS    float64 `json:"seq_per_s"`
	MsPerBatch float64 `json:"ms_per_batch"`
	// LinearMs is the time of the linear layers in one pass (the median
	// pass); AttentionMs and OtherMs the attention and the rest
	// (embeddings, LayerNorm); LayerNormMs is the LayerNorms' part of
	// OtherMs (the embeddings' LayerNorm is counted with the embeddings).
	LinearMs    float64 `json:"linear_ms"`
	AttentionMs float64 `json:"attention_ms"`
	OtherMs     float64 `json:"other_ms"`
	LayerNormMs float64 `json:"layernorm_ms"`
	// AttentionC2PMs and AttentionP2CMs are the parts of AttentionMs
	// spent on DeBERTa's content-to-position and position-to-content
	// terms, AttentionContentMs the rest (the content-to-content scores,
	// the softmax and the context): AttentionMs split in proportion to
	// each part's work summed over the attention's goroutines
	// (models.Profile.AttentionHeads). All three are 0 for the families
	// without these terms.
	AttentionContentMs float64 `json:"attention_content_ms,omitempty"`
	AttentionC2PMs     float64 `json:"attention_c2p_ms,omitempty"`
	AttentionP2CMs     float64 `json:"attention_p2c_ms,omitempty"`
	// LinearGOPS is the linears' throughput (2*M*N*K per linear).
	LinearGOPS float64 `json:"linear_gops"`
	// PeakGOPS is the peak of this precision's arithmetic (FMA for FP32,
	// VNNI for INT8) measured on one core right before it was timed, times
	// Threads; LinearPctPeak is LinearGOPS over it, in percent (0 without
	// a peak: PeakTime < 0, or a CPU without that instruction set).
	PeakGOPS      float64 `json:"peak_gops,omitempty"`
	LinearPctPeak float64 `json:"linear_pct_peak,omitempty"`
	// SpeedupVsFP32 is FP32's ms_per_batch over this one's, and
	// LinearSpeedupVsFP32 the same of linear_ms (0 without an fp32 run).
	SpeedupVsFP32       float64 `json:"speedup_vs_fp32"`
	LinearSpeedupVsFP32 float64 `json:"linear_speedup_vs_fp32"`
	Passes              int     `json:"passes"`
	// Spread is the minimum, median and maximum of the timed passes (ms;
	// its median is MsPerBatch), PassesMs every timed pass in the order
	// it ran (the -benchstat lines).
	Spread   Spread    `json:"spread"`
	PassesMs []float64 `json:"passes_ms"`
	// PeakBefore and PeakAfter are this precision's peak loop (one run of
	// ModelOptions.PeakTime, peak.Rate, times Threads; GOP/s) right before
	// and right after the timed passes, 0 without a peak; Noise is the
	// verdict on the figure (Classify), and SpeedupNoisy says whether this
	// figure or FP32's is noisy, which makes the speed-ups noisy too.
	PeakBefore   float64 `json:"peak_before_gops,omitempty"`
	PeakAfter    float64 `json:"peak_after_gops,omitempty"`
	Noise        Noise   `json:"noise"`
	SpeedupNoisy bool    `json:"speedup_noisy,omitempty"`
	// Instances is the multi-instance measurement (ModelOptions.Instances
	// > 1), nil otherwise.
	Instances *InstancesResult `json:"instances,omitempty"`
	// settled is the settle step before the timed passes, and allocs
	// the heap bytes each timed pass allocated (its order as PassesMs;
	// one instance only), for the tests.
	settled settleRecord
	allocs  []uint64
}

// ModelReport is the result of Model.
type ModelReport struct {
	Arch    string `json:"arch"`
	Seq     int    `json:"seq"`
	Batch   int    `json:"batch"`
	Threads int    `json:"threads"`
	// Instances is ModelOptions.Instances (at least 1), Loads the number
	// of times the model was loaded (once, whatever the instances).
	Instances int           `json:"instances"`
	Loads     int           `json:"loads"`
	Results   []ModelResult `json:"results"`
	// Int8 is this CPU's INT8 tier (selector.DescribeInt8), and
	// Int8Kernels the u8 x s8 kernels the selector chose for the keys of
	// the run, with how many keys each ("gemmVNNI_8x48 x30, ...").
	Int8        selector.Int8Tier `json:"int8"`
	Int8Kernels string            `json:"int8_kernels,omitempty"`
}

// loadFP32 opens the architecture or folder o.Arch (a folder as it holds
// the model: FP32, or an INT8 artifact), counting where its passes spend
// their time (models.Options.Profile).
func loadFP32(ctx context.Context, o *ModelOptions, sel *selector.Selector) (*models.Pipeline, error) {
	return loadAt(ctx, o, sel, models.PrecisionAsStored)
}

// loadAt is loadFP32 at precision prec (PrecisionBF16 rounds the FP32
// weights to bfloat16 at load).
func loadAt(ctx context.Context, o *ModelOptions, sel *selector.Selector, prec models.Precision) (*models.Pipeline, error) {
	return loadArch(ctx, o.Arch, models.Options{Selector: sel, Threads: o.Threads, Profile: true, Precision: prec})
}

// loadArch loads arch with opts: a model folder, or an architecture of
// Archs with random weights of its real shapes.
func loadArch(ctx context.Context, arch string, opts models.Options) (*models.Pipeline, error) {
	if st, err := os.Stat(arch); err == nil && st.IsDir() {
		return models.Load(ctx, arch, opts)
	}
	a, err := LookupArch(arch)
	if err != nil {
		return nil, fmt.Errorf("bench: %q is neither a model folder nor a known architecture: %w", arch, err)
	}
	return models.New(RandomWeights(a, models.TaskBase, 1), a.Config, opts)
}

// randomInputs is a batch of random token ids (no padding) valid for cfg.
func randomInputs(cfg models.Config, batch, seq int, seed uint64) *models.Inputs {
	r := rand.New(rand.NewPCG(seed, 0x1e7))
	in := &models.Inputs{Batch: batch, Seq: seq}
	for i := 0; i < batch*seq; i++ {
		// Skip the low ids (padding and special tokens in every family).
		in.IDs = append(in.IDs, int32(10+r.IntN(cfg.Vocab-10)))
		in.Mask = append(in.Mask, 1)
	}
	if cfg.TypeVocab > 0 {
		in.TypeIDs = make([]int32, batch*seq)
	}
	return in
}

// Model measures forward passes of one model at each precision in one
// run: sequences per second, the linear layers' share, and the speed-up of
// each INT8 precision over FP32.
func Model(ctx context.Context, o ModelOptions) (*ModelReport, error) {
	if o.Seq == 0 {
		o.Seq = 128
	}
	if o.Batch == 0 {
		o.Batch = 1
	}
	if o.Threads == 0 {
		o.Threads = 1
	}
	if o.Precisions == nil {
		o.Precisions = []models.Precision{models.PrecisionFP32, models.PrecisionInt8Static, models.PrecisionInt8Dynamic}
	}
	if o.CalibBatches == 0 {
		o.CalibBatches = 4
	}
	if o.MinTime == 0 {
		o.MinTime = 2 * time.Second
	}
	if o.Reps == 0 {
		o.Reps = 3
	}
	if o.Instances == 0 {
		o.Instances = 1
	}
	if o.Seq < 1 || o.Batch < 1 || o.Threads < 1 || o.Instances < 1 {
		return nil, fmt.Errorf("bench: seq %d, batch %d, threads %d must be positive (instances %d): %w", o.Seq, o.Batch, o.Threads, o.Instances, models.ErrConfig)
	}
	say := sayer(o.Progress)
	sel, err := syncOr(o.Selector)
	if err != nil {
		return nil, err
	}
	var one, many *models.Instances
	if o.Instances > 1 {
		var err error
		if one, err = models.NewInstances(models.InstanceOptions{Instances: 1, Threads: o.Threads, Pin: o.Pin}); err != nil {
			return nil, err
		}
		if many, err = models.NewInstances(models.InstanceOptions{Instances: o.Instances, Threads: o.Threads, Pin: o.Pin}); err != nil {
			return nil, err
		}
	}
	// Collect harder while models are built (the FP32 one first: its
	// random weights are made and copied, so half its heap is garbage),
	// quantized, warmed (the untimed pass packs the weights) and
	// released: the heap of a run is a few models' weights,
	// and the default GOGC lets it grow to twice the largest before a
	// collection (6 GB for xlmr-base's 250k token embeddings); at 5% the
	// collections are cheap, the weights holding no pointers. Timed
	// passes run at the default.
	defer debug.SetGCPercent(debug.SetGCPercent(leanGCPercent))
	say("loading %s", o.Arch)
	fp32, err := loadFP32(ctx, &o, sel)
	if err != nil {
		return nil, err
	}
	loads := 1
	// fp32 is closed as soon as no precision left needs it (the INT8
	// ones are quantized from it); closing twice is harmless.
	defer func() {
		if fp32 != nil {
			fp32.Close()
		}
	}()
	cfg := fp32.Config()
	if o.Seq > cfg.MaxSeq() {
		return nil, fmt.Errorf("bench: seq %d: %s takes at most %d tokens: %w", o.Seq, o.Arch, cfg.MaxSeq(), models.ErrConfig)
	}
	in := randomInputs(cfg, o.Batch, o.Seq, 7)
	rep := &ModelReport{Arch: o.Arch, Seq: o.Seq, Batch: o.Batch, Threads: o.Threads, Instances: o.Instances, Loads: loads, Int8: selector.DescribeInt8(sel.Features())}
	var fp32Res *ModelResult
	order := buildOrder(o.Precisions)
	results := map[models.Precision]ModelResult{}
	// The INT8 models quantized and not yet timed.
	quantized := map[models.Precision]*models.Pipeline{}
	defer func() {
		for _, q := range quantized {
			q.Close()
		}
	}()
	for i, p := range order {
		var m *models.Pipeline
		switch {
		case p.Int8():
			if quantized[p] == nil {
				// Every INT8 precision left is quantized from the FP32
				// model now, before any is timed: the FP32 model is
				// released before they run (its embeddings alone are
				// 768 MB for xlmr-base, its packed linears 342 MB),
				// and an INT8 model waiting holds its int8 weights
				// (85 MB).
				// While they are quantized the heap holds the FP32
				// model and the quantization's buffers, allocated and
				// dropped layer by layer: a soft limit a little above
				// the FP32 model makes the runtime give the dropped
				// ones back to the system at once rather than at the
				// scavenger's pace (at 5% GOGC alone xlmr-base's heap
				// held 1.21 GB live but 1.46 GB resident).
				release()
				limit := debug.SetMemoryLimit(heapLive() + quantHeadroom)
				var calib []*models.Inputs
				for i := 0; i < o.CalibBatches; i++ {
					calib = append(calib, randomInputs(cfg, o.Batch, o.Seq, uint64(100+i)))
				}
				var lastInt8 models.Precision
				for _, q := range order[i:] {
					if q.Int8() {
						lastInt8 = q
					}
				}
				for _, q := range order[i:] {
					if !q.Int8() {
						continue
					}
					say("quantizing to %s", q)
					qo := o.Quant
					qo.Profile = true
					// The last model quantized from the FP32 one
					// consumes it: its packed linears (342 MB for
					// xlmr-base) go once the calibration has run.
					qo.Consume = q == lastInt8 && !slices.ContainsFunc(order[i:], func(r models.Precision) bool {
						return !r.Int8() && r != models.PrecisionBF16
					})
					qm, err := fp32.QuantizeInputs(ctx, calib, q, qo)
					if err != nil {
						debug.SetMemoryLimit(limit)
						return nil, err
					}
					quantized[q] = qm
				}
				debug.SetMemoryLimit(limit)
			}
			m = quantized[p]
			delete(quantized, p)
		case p == models.PrecisionBF16:
			m = nil // loaded below, once the FP32 model is released
		default:
			m = fp32
		}
		if fp32 != nil && !needsFP32(order[i+1:], quantized) && m != fp32 {
			fp32.Close()
			fp32 = nil
			release()
		}
		if p == models.PrecisionBF16 {
			say("loading %s at bf16", o.Arch)
			if m, err = loadAt(ctx, &o, sel, p); err != nil {
				return nil, err
			}
		}
		r, err := measure(ctx, m, p, in, &o, one, many, say)
		if m != fp32 {
			m.Close()
			release()
		} else if !needsFP32(order[i+1:], quantized) {
			fp32.Close()
			fp32 = nil
			release()
		}
		if err != nil {
			return nil, fmt.Errorf("bench: %s: %w", p, err)
		}
		results[p] = r
	}
	for _, p := range o.Precisions {
		rep.Results = append(rep.Results, results[p])
		if p == models.PrecisionFP32 {
			fp32Res = &rep.Results[len(rep.Results)-1]
		}
	}
	rep.Int8Kernels = sel.ChosenU8S8()
	if fp32Res != nil {
		for i := range rep.Results {
			r := &rep.Results[i]
			r.SpeedupVsFP32 = fp32Res.MsPerBatch / r.MsPerBatch
			r.SpeedupNoisy = r.Noise.Noisy || fp32Res.Noise.Noisy
			if r.LinearMs > 0 {
				r.LinearSpeedupVsFP32 = fp32Res.LinearMs / r.LinearMs
			}
		}
	}
	return rep, nil
}

// buildOrder is the order Model builds and times the precisions in (the
// results keep o.Precisions' order), each once: FP32 (as stored) first,
// then the INT8 ones, quantized from it, then BF16, which loads its own
// model once the FP32 one is released, so that the two are never held
// at once.
func buildOrder(precs []models.Precision) []models.Precision {
	rank := func(p models.Precision) int {
		switch {
		case p.Int8():
			return 1
		case p == models.PrecisionBF16:
			return 2
		}
		return 0
	}
	var order []models.Precision
	for _, p := range precs {
		if !slices.Contains(order, p) {
			order = append(order, p)
		}
	}
	slices.SortStableFunc(order, func(a, b models.Precision) int { return cmp.Compare(rank(a), rank(b)) })
	return order
}

// needsFP32 says whether a precision of rest still needs the FP32 model:
// FP32 itself, or an INT8 one not quantized yet.
func needsFP32(rest []models.Precision, quantized map[models.Precision]*models.Pipeline) bool {
	return slices.ContainsFunc(rest, func(p models.Precision) bool {
		if p.Int8() {
			return quantized[p] == nil
		}
		return p != models.PrecisionBF16
	})
}

// measure times m at precision p: an untimed pass, the peak loop, the
// timed passes, the peak loop again.
//
// The untimed pass packs the weights for the kernels chosen (an FP32 or
// INT8 linear then drops its compact copy) and tunes the shapes the
// cache lacks; it runs at the lean GOGC Model sets, so that the copies
// dropped are collected as the forms are made rather than held beside
// them through the timed passes, which run at the default GOGC (at 100
// the dropped copies, 342 MB for xlmr-base at FP32, stayed resident
// until the model was closed).
func measure(ctx context.Context, m *models.Pipeline, p models.Precision, in *models.Inputs, o *ModelOptions,
	one, many *models.Instances, say func(string, ...any)) (ModelResult, error) {
	say("untimed pass at %s", p)
	if _, err := m.Forward(ctx, in, false); err != nil {
		return ModelResult{}, err
	}
	var peak, before float64
	pt := cmp.Or(o.PeakTime, 300*time.Millisecond)
	if o.PeakTime >= 0 {
		say("peak microbenchmark")
		peak = measurePeak(pt, p, o.Threads)
		before = peakRate(pt, p, o.Threads)
	}
	var r ModelResult
	release()
	normal := debug.SetGCPercent(100)
	say("settling %s", p)
	st, err := settle(ctx, m, in, m.Profile, o)
	if err == nil {
		say("timing %s", p)
		if one == nil {
			r, err = timeModel(ctx, m, in, m.Profile, o)
		} else {
			r, err = timeInstances(ctx, m, in, m.Profile, o, one, many, say)
		}
	}
	debug.SetGCPercent(normal)
	if err != nil {
		return r, err
	}
	r.settled = st
	if o.PeakTime >= 0 {
		r.PeakBefore, r.PeakAfter = before, peakRate(pt, p, o.Threads)
	}
	r.Precision = p.String()
	r.Noise = Classify(r.Spread, r.PeakBefore, r.PeakAfter)
	if peak > 0 {
		r.PeakGOPS, r.LinearPctPeak = peak, 100*r.LinearGOPS/peak
	}
	return r, nil
}

// settleRecord is what settle did before a precision's timed passes (for
// the tests: nothing of it is printed).
type settleRecord struct {
	// GCs is the collections completed when settle began (release's
	// among them), Passes the untimed passes it made, Stable whether the
	// last two agreed (settleTol) before settleMaxPasses or the time cap.
	GCs    uint32
	Passes int
	Stable bool
}

// settle makes untimed passes of m after the release that precedes a
// precision's timed passes, at the timed passes' GOGC, until the
// timed passes will find what a long run finds (docs/DESIGN.md section
// 7.2): the collection frees the idle scratch (the model's pool holds it
// weakly) and returns it to the OS, so the first pass after it allocates
// and faults in its buffers again (13.6 MB and 1,500-2,500 page faults
// at BERT-base 8 x 32, +20-37 ms of CPU) and the attention's buffers
// (a sync.Pool) are made anew. It makes at least settleMinPasses, then
// more until the last two passes' total and their non-linear part
// (attention and the rest: total - linear) agree within settleTol, at
// most settleMaxPasses and, beyond the minimum, for at most a quarter of
// o.MinTime.
func settle(ctx context.Context, m *models.Pipeline, in *models.Inputs, prof func() models.Profile, o *ModelOptions) (settleRecord, error) {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	st := settleRecord{GCs: ms.NumGC}
	type split struct{ total, rest time.Duration }
	var last, prev split
	start := time.Now()
	for st.Passes < settleMaxPasses {
		if err := ctx.Err(); err != nil {
			return st, err
		}
		before := prof()
		t := time.Now()
		if _, err := m.Forward(ctx, in, false); err != nil {
			return st, err
		}
		el := time.Since(t)
		after := prof()
		prev, last = last, split{el, el - (after.Linear - before.Linear)}
		st.Passes++
		if st.Passes < settleMinPasses {
			continue
		}
		if st.Stable = agree(prev.total, last.total) && agree(prev.rest, last.rest); st.Stable {
			break
		}
		if time.Since(start) > o.MinTime/4 {
			break
		}
	}
	return st, nil
}

// agree says whether two passes' times are within settleTol of the
// larger.
func agree(a, b time.Duration) bool {
	d := a - b
	if d < 0 {
		d = -d
	}
	return float64(d) <= settleTol*float64(max(a, b))
}

// The settle step's bounds: at least settleMinPasses untimed passes after
// the release (the first allocates the buffers, the second runs on them
// as every timed pass does), at most settleMaxPasses, until the last two
// agree within settleTol.
const (
	settleMinPasses = 2
	settleMaxPasses = 8
	settleTol       = 0.10
)

// timeModel runs timed passes until both o.Reps and o.MinTime are
// reached, and reports the median pass with its parts from the profile;
// the untimed pass that tunes every shape and packs the weights is the
// caller's (measure).
func timeModel(ctx context.Context, m *models.Pipeline, in *models.Inputs, prof func() models.Profile, o *ModelOptions) (ModelResult, error) {
	r, _, err := timePasses(ctx, m, in, prof, o, time.Now())
	return r, err
}

// timePasses is timeModel; with a non-zero start (a window shared by
// instances) it skips the untimed pass and times from start. It also
// returns the time from start to the end of the last pass. prof reads
// the model's profile (nil: none, as the instances' concurrent passes
// would share it).
func timePasses(ctx context.Context, m *models.Pipeline, in *models.Inputs, prof func() models.Profile, o *ModelOptions, start time.Time) (ModelResult, time.Duration, error) {
	// allocs reads the heap bytes allocated so far (runtime/metrics:
	// no stop of the world), outside each timed pass, for the tests'
	// check that the first timed pass is as warm as the rest; not with
	// the instances' concurrent passes (prof nil).
	var allocs func() uint64
	if prof == nil {
		prof = func() models.Profile { return models.Profile{} }
	} else {
		sample := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
		allocs = func() uint64 {
			metrics.Read(sample)
			if sample[0].Value.Kind() != metrics.KindUint64 {
				return 0
			}
			return sample[0].Value.Uint64()
		}
	}
	if start.IsZero() {
		if _, err := m.Forward(ctx, in, false); err != nil {
			return ModelResult{}, 0, err
		}
		start = time.Now()
	}
	type pass struct {
		total, linear, attention, ln time.Duration
		heads, c2p, p2c              time.Duration
		flops                        float64
	}
	var passes []pass
	var allocated []uint64
	for len(passes) < o.Reps || time.Since(start) < o.MinTime {
		if err := ctx.Err(); err != nil {
			return ModelResult{}, 0, err
		}
		var a0 uint64
		if allocs != nil {
			a0 = allocs()
		}
		before := prof()
		t := time.Now()
		if _, err := m.Forward(ctx, in, false); err != nil {
			return ModelResult{}, 0, err
		}
		el := time.Since(t)
		after := prof()
		if allocs != nil {
			allocated = append(allocated, allocs()-a0)
		}
		passes = append(passes, pass{el, after.Linear - before.Linear, after.Attention - before.Attention,
			after.LayerNorm - before.LayerNorm, after.AttentionHeads - before.AttentionHeads,
			after.AttentionC2P - before.AttentionC2P, after.AttentionP2C - before.AttentionP2C,
			after.LinearFLOPs - before.LinearFLOPs})
	}
	window := time.Since(start)
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	samples := make([]float64, len(passes))
	for i, p := range passes {
		samples[i] = ms(p.total)
	}
	sort.Slice(passes, func(i, j int) bool { return passes[i].total < passes[j].total })
	med := passes[len(passes)/2]
	r := ModelResult{MsPerBatch: ms(med.total), LinearMs: ms(med.linear), AttentionMs: ms(med.attention),
		LayerNormMs: ms(med.ln), Passes: len(passes), Spread: SpreadOf(samples), PassesMs: samples, allocs: allocated}
	r.OtherMs = r.MsPerBatch - r.LinearMs - r.AttentionMs
	r.AttentionContentMs, r.AttentionC2PMs, r.AttentionP2CMs = splitAttention(r.AttentionMs, med.heads, med.c2p, med.p2c)
	r.SeqPerS = float64(in.Batch) / med.total.Seconds()
	if med.linear > 0 {
		r.LinearGOPS = med.flops / med.linear.Seconds() / 1e9
	}
	return r, window, nil
}

// splitAttention splits the attention's wall time (ms) into the content
// term, c2p and p2c in proportion to their work (heads: all of the
// attention's work, of which c2p and p2c are parts); all zero without
// relative terms.
func splitAttention(ms float64, heads, c2p, p2c time.Duration) (content, c2pMs, p2cMs float64) {
	if heads <= 0 || c2p+p2c <= 0 {
		return 0, 0, 0
	}
	c2pMs = ms * float64(c2p) / float64(heads)
	p2cMs = ms * float64(p2c) / float64(heads)
	return ms - c2pMs - p2cMs, c2pMs, p2cMs
}

// timeInstances measures m on the pool one (the result, with its profile
// parts), then on many at once, and the resident memory around it.
func timeInstances(ctx context.Context, m *models.Pipeline, in *models.Inputs, prof func() models.Profile, o *ModelOptions,
	one, many *models.Instances, say func(string, ...any)) (ModelResult, error) {
	var r ModelResult
	var oneWindow time.Duration
	err := one.Run(ctx, func(ctx context.Context, _ int) error {
		var err error
		r, oneWindow, err = timePasses(ctx, m, in, prof, o, time.Time{})
		return err
	})
	if err != nil {
		return r, err
	}
	n := many.Len()
	ir := &InstancesResult{Instances: n, Pinned: many.Pinned(0) != nil, MsPerBatch: make([]float64, n), Passes: make([]int, n),
		OneSeqPerS: float64(r.Passes*in.Batch) / oneWindow.Seconds(), WeightBytes: int64(m.WeightBytes())}
	ir.RSS = residentBytes()
	say("timing %d instances", n)
	// Each instance makes one untimed pass (its own scratch), then all
	// start the window together.
	var ready sync.WaitGroup
	ready.Add(n)
	var start time.Time
	gate := make(chan struct{})
	go func() {
		ready.Wait()
		start = time.Now()
		close(gate)
	}()
	windows := make([]time.Duration, n)
	err = many.Run(ctx, func(ctx context.Context, i int) error {
		_, err := m.Forward(ctx, in, false)
		ready.Done()
		<-gate
		if err != nil {
			return err
		}
		x, w, err := timePasses(ctx, m, in, nil, o, start)
		ir.MsPerBatch[i], ir.Passes[i], windows[i] = x.MsPerBatch, x.Passes, w
		return err
	})
	if err != nil {
		return r, err
	}
	total, wall := 0, time.Duration(0)
	for i := range n {
		total += ir.Passes[i]
		wall = max(wall, windows[i])
	}
	ir.SeqPerS = float64(total*in.Batch) / wall.Seconds()
	ir.Scaling = ir.SeqPerS / ir.OneSeqPerS
	if ir.RSS > 0 {
		ir.RSSAfter = residentBytes()
		ir.ExtraPerInstance = (ir.RSSAfter - ir.RSS) / int64(n-1)
		ir.ExtraPctWeights = 100 * float64(ir.ExtraPerInstance) / float64(ir.WeightBytes)
	}
	r.Instances = ir
	return r, nil
}

// leanGCPercent is GOGC while models are built, quantized and released
// (5: xlmr-base quantized at 20 peaked at 1.70 GB, its load, made at
// the default GOGC before, at 1.55 GB; docs/PERFORMANCE.md).
const leanGCPercent = 5

// quantHeadroom is the soft memory limit's room above the FP32 model
// while it is quantized: the calibration's observers and a layer's
// weights and int8 copies (about 100 MB for a base model's layers of
// 768 x 3072), and the INT8 models quantized before.
const quantHeadroom = 160 << 20

// heapLive is the Go heap's live bytes after the last collection.
func heapLive() int64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// release collects what was dropped and gives it back to the OS.
func release() {
	runtime.GC()
	debug.FreeOSMemory()
}

// PeakResidentBytes is the process's peak resident memory so far (VmHWM
// of /proc/self/status), 0 where it is not known (not Linux).
func PeakResidentBytes() int64 { return statusBytes("VmHWM:") }

// residentBytes is the process's VmRSS after a collection that returns
// freed memory to the OS; 0 where /proc/self/status does not say.
func residentBytes() int64 {
	release()
	return statusBytes("VmRSS:")
}

// statusBytes is a "KEY: N kB" line of /proc/self/status in bytes, 0
// where it is not there.
func statusBytes(key string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, key); ok {
			var kb int64
			if _, err := fmt.Sscanf(strings.TrimSpace(rest), "%d kB", &kb); err == nil {
				return kb << 10
			}
		}
	}
	return 0
}
