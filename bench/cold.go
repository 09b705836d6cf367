package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"time"

	"github.com/int8bert/int8bert/cpu"
	"github.com/int8bert/int8bert/internal/threadcpu"
	"github.com/int8bert/int8bert/models"
	"github.com/int8bert/int8bert/selector"
)

// ColdOptions configure Cold: a model's first minutes, from an empty
// tuning cache (docs/DESIGN.md section 4.8).
type ColdOptions struct {
	// Arch is an architecture of Archs (random weights of its real
	// shapes) or a model folder.
	Arch string
	// Precision is the precision to load at (PrecisionAsStored: as the
	// folder holds it, FP32 for an architecture); int8-static needs an
	// artifact folder.
	Precision models.Precision
	// Threads per linear layer (0: 1).
	Threads int
	// WarmBatch and WarmLength are the warm-up's bounds (0: 8 and 128,
	// the README's example).
	WarmBatch, WarmLength int
	// Calls is the number of single-sequence calls of varied lengths, 1
	// to MaxLength tokens (0: 200); MaxLength 0 is 512, at most the
	// model's.
	Calls, MaxLength int
	// WarmRounds is how many times the calls run again once tuned, each
	// call's warm time being its fastest (0: 3).
	WarmRounds int
	// Seed draws the lengths and the token ids.
	Seed uint64
	// Selector is the base of each part's selector options (Reps,
	// RepTime, KeyBudget, ...); its CachePath and Tuning are set to "off"
	// and TuneBackground.
	Selector selector.Options
	// Progress, when set, receives a line per step.
	Progress func(string)
}

// ColdReport is Cold's result. Durations are in nanoseconds in JSON.
type ColdReport struct {
	CPU       string           `json:"cpu"`
	Model     string           `json:"model"`
	Precision models.Precision `json:"precision"`
	Threads   int              `json:"threads"`
	// Load is the time to load the model (the warm-up's load).
	Load time.Duration `json:"load_ns"`
	// Warmup is Pipeline.Warmup with WarmBatch and WarmLength on an empty
	// cache with background tuning, until no key is pending; WarmupKeys
	// the keys it listed, WarmupTuned the tunings it ran.
	Warmup                  time.Duration `json:"warmup_ns"`
	WarmupKeys, WarmupTuned int           `json:"-"`
	WarmBatch, WarmLength   int           `json:"-"`
	// Calls are the calls without a warm-up, on another empty cache with
	// background tuning: each call's length, start (since the load ended),
	// cold time and warm time (the fastest of WarmRounds once every key
	// was tuned).
	Calls []ColdCall `json:"calls"`
	// ColdTotal and WarmTotal sum the calls' times; Worst is the largest
	// cold over warm ratio of a call that started once the process had
	// run a second after its load, WorstAt its index (-1: none did).
	ColdTotal, WarmTotal time.Duration `json:"-"`
	Worst                float64       `json:"worst_ratio_after_1s"`
	WorstAt              int           `json:"worst_call"`
	// ColdCPUTotal, WarmCPUTotal, WorstCPU and WorstCPUAt are the same in
	// thread CPU time (ColdCall.ColdCPU; 0 and -1 where it is not read).
	ColdCPUTotal, WarmCPUTotal time.Duration `json:"-"`
	WorstCPU                   float64       `json:"worst_cpu_ratio_after_1s"`
	WorstCPUAt                 int           `json:"worst_cpu_call"`
	// Defaults and Tuned are the cold run's selector counts: keys that
	// ran a default kernel while queued, and the tunings.
	Defaults, Tuned int `json:"-"`
	// Prechecks are the quick checks of defaults that the background
	// tuner ran ahead of the calls (selector.Precheck).
	Prechecks int `json:"-"`
	// Settle is how long the background tuning ran on after the last
	// cold call.
	Settle time.Duration `json:"settle_ns"`
	// TunerPriority is what the cold run's background tuner ran at
	// (selector.Stats.TunerPriority); Retimed its units timed again
	// after a request interrupted them.
	TunerPriority string `json:"tuner_priority"`
	Retimed       int    `json:"retimed"`
}

// ColdCall is one call of Cold. Defaults, Checks, Tuned and Packs are
// what the cold call added to the selector's counts (selector.Stats): keys
// that met a default, quick checks of a default's candidates run on the
// call, tunings that ended during it, and linears' weight forms packed
// other than in the background (Packs less PacksLater); Pending is the keys waiting for the
// background tuner when the call began. They say why a call was slow.
//
// ColdCPU and WarmCPU are the same calls in the calling thread's CPU time
// (Linux; 0 elsewhere): the pass runs on that thread with one thread per
// linear, and CPU time leaves out the time that other processes of a
// shared machine held its core, which wall time counts.
type ColdCall struct {
	Length   int           `json:"length"`
	Start    time.Duration `json:"start_ns"`
	Cold     time.Duration `json:"cold_ns"`
	Warm     time.Duration `json:"warm_ns"`
	ColdCPU  time.Duration `json:"cold_cpu_ns,omitempty"`
	WarmCPU  time.Duration `json:"warm_cpu_ns,omitempty"`
	Defaults int           `json:"defaults"`
	Checks   int           `json:"checks"`
	Tuned    int           `json:"tuned"`
	Pending  int           `json:"pending"`
	Packs    int           `json:"packs"`
}

// Ratio is the report's cold total over its warm total.
func (r *ColdReport) Ratio() float64 {
	if r.WarmTotal <= 0 {
		return 0
	}
	return float64(r.ColdTotal) / float64(r.WarmTotal)
}

// Cold measures a model's first minutes as a new user meets them, each on
// a selector of its own with an empty cache and background tuning (the
// library's and serve's mode): the README's warm-up until no key is
// pending, then, without a warm-up, Calls single-sequence passes of
// varied lengths timed one by one, and the same passes again once
// every key is tuned.
func Cold(ctx context.Context, o ColdOptions) (*ColdReport, error) {
	if o.Threads == 0 {
		o.Threads = 1
	}
	if o.WarmBatch == 0 {
		o.WarmBatch = 8
	}
	if o.WarmLength == 0 {
		o.WarmLength = 128
	}
	if o.Calls == 0 {
		o.Calls = 200
	}
	if o.MaxLength == 0 {
		o.MaxLength = 512
	}
	if o.WarmRounds == 0 {
		o.WarmRounds = 3
	}
	if o.Threads < 1 || o.WarmBatch < 1 || o.WarmLength < 1 || o.Calls < 1 || o.MaxLength < 1 || o.WarmRounds < 1 {
		return nil, fmt.Errorf("bench: cold: threads %d, warm-up %d x %d, calls %d, max length %d and warm rounds %d must be positive: %w",
			o.Threads, o.WarmBatch, o.WarmLength, o.Calls, o.MaxLength, o.WarmRounds, models.ErrConfig)
	}
	say := sayer(o.Progress)
	rep := &ColdReport{CPU: cpu.X86.Brand, Model: o.Arch, Precision: o.Precision, Threads: o.Threads,
		WarmBatch: o.WarmBatch, WarmLength: o.WarmLength, WorstAt: -1, WorstCPUAt: -1}

	// The warm-up.
	say("warm-up %d x %d on an empty cache", o.WarmBatch, o.WarmLength)
	err := withCold(ctx, o, func(p *models.Pipeline, sel *selector.Selector, load time.Duration) error {
		rep.Load = load
		wo := models.WarmupOptions{MaxBatch: o.WarmBatch, MaxLength: o.WarmLength}
		keys, err := p.WarmupKeys(wo)
		if err != nil {
			return err
		}
		rep.WarmupKeys = len(keys)
		t0 := time.Now()
		if err := p.Warmup(ctx, wo); err != nil {
			return err
		}
		if err := sel.WaitTuned(ctx); err != nil {
			return err
		}
		rep.Warmup = time.Since(t0)
		rep.WarmupTuned = sel.Stats().Tuned
		return nil
	})
	if err != nil {
		return nil, err
	}

	// The calls, cold, then warm.
	say("%d calls of 1-%d tokens on an empty cache, no warm-up", o.Calls, o.MaxLength)
	err = withCold(ctx, o, func(p *models.Pipeline, sel *selector.Selector, _ time.Duration) error {
		cfg := p.Config()
		maxLen := min(o.MaxLength, p.MaxLength())
		r := rand.New(rand.NewPCG(o.Seed, 0xc01d))
		ins := make([]*models.Inputs, o.Calls)
		rep.Calls = make([]ColdCall, o.Calls)
		for i := range ins {
			n := 1 + r.IntN(maxLen)
			ins[i] = randomInputs(cfg, 1, n, o.Seed+uint64(i))
			rep.Calls[i].Length = n
		}
		// The passes run on this goroutine (one thread per linear): on
		// its thread for the thread's CPU time.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		loaded := time.Now()
		for i, in := range ins {
			st0 := sel.Stats()
			c0, cpuOK := threadcpu.Now()
			t0 := time.Now()
			if _, err := p.Forward(ctx, in, false); err != nil {
				return fmt.Errorf("cold call %d (%d tokens): %w", i, in.Seq, err)
			}
			c := &rep.Calls[i]
			c.Start, c.Cold = t0.Sub(loaded), time.Since(t0)
			if c1, ok := threadcpu.Now(); ok && cpuOK {
				c.ColdCPU = max(c1-c0, 1)
			}
			st := sel.Stats()
			c.Defaults, c.Checks, c.Tuned, c.Pending = st.Defaults-st0.Defaults, st.Checks-st0.Checks, st.Tuned-st0.Tuned, st0.Pending
			c.Packs = (st.Packs - st.PacksLater) - (st0.Packs - st0.PacksLater)
		}
		st := sel.Stats()
		rep.Defaults, rep.Tuned, rep.Prechecks = st.Defaults, st.Tuned, st.Prechecks
		t0 := time.Now()
		if err := sel.WaitTuned(ctx); err != nil {
			return err
		}
		rep.Settle = time.Since(t0)
		st = sel.Stats()
		rep.TunerPriority, rep.Retimed = st.TunerPriority, st.Retimed
		say("warm: %d rounds of the same calls", o.WarmRounds)
		for round := range o.WarmRounds {
			for i, in := range ins {
				c0, cpuOK := threadcpu.Now()
				t0 := time.Now()
				if _, err := p.Forward(ctx, in, false); err != nil {
					return fmt.Errorf("warm call %d (%d tokens): %w", i, in.Seq, err)
				}
				c := &rep.Calls[i]
				if d := time.Since(t0); round == 0 || d < c.Warm {
					c.Warm = d
				}
				if c1, ok := threadcpu.Now(); ok && cpuOK {
					if d := max(c1-c0, 1); round == 0 || d < c.WarmCPU {
						c.WarmCPU = d
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for i, c := range rep.Calls {
		rep.ColdTotal += c.Cold
		rep.WarmTotal += c.Warm
		rep.ColdCPUTotal += c.ColdCPU
		rep.WarmCPUTotal += c.WarmCPU
		if c.Start >= time.Second && c.Warm > 0 {
			if x := float64(c.Cold) / float64(c.Warm); x > rep.Worst {
				rep.Worst, rep.WorstAt = x, i
			}
		}
		if c.Start >= time.Second && c.WarmCPU > 0 {
			if x := float64(c.ColdCPU) / float64(c.WarmCPU); x > rep.WorstCPU {
				rep.WorstCPU, rep.WorstCPUAt = x, i
			}
		}
	}
	return rep, nil
}

// withCold loads the model on a new selector with an empty cache and
// background tuning and runs f; it closes both.
func withCold(ctx context.Context, o ColdOptions, f func(p *models.Pipeline, sel *selector.Selector, load time.Duration) error) error {
	so := o.Selector
	so.CachePath, so.Tuning = "off", selector.TuneBackground
	sel, err := selector.New(so)
	if err != nil {
		return err
	}
	defer sel.Close()
	t0 := time.Now()
	p, err := loadArch(ctx, o.Arch, models.Options{Selector: sel, Threads: o.Threads, Precision: o.Precision})
	if err != nil {
		return err // loadArch and models.Load say what failed
	}
	defer p.Close()
	return f(p, sel, time.Since(t0))
}

// CPURatio is the report's cold total over its warm total in thread CPU
// time (0 where it was not read).
func (r *ColdReport) CPURatio() float64 {
	if r.WarmCPUTotal <= 0 {
		return 0
	}
	return float64(r.ColdCPUTotal) / float64(r.WarmCPUTotal)
}

// Percentile is the q-th quantile (0..1) of the calls' cold over warm
// ratios, for a report's spread.
func (r *ColdReport) Percentile(q float64) float64 {
	var xs []float64
	for _, c := range r.Calls {
		if c.Warm > 0 {
			xs = append(xs, float64(c.Cold)/float64(c.Warm))
		}
	}
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	return xs[min(len(xs)-1, int(q*float64(len(xs))))]
}
