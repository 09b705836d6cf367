package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/int8bert/int8bert/bench"
	"github.com/int8bert/int8bert/models"
)

// runBenchCold is `int8bert bench cold`: a model's first minutes from an
// empty tuning cache (bench.Cold).
func runBenchCold(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench cold", flag.ContinueOnError)
	fs.SetOutput(stderr)
	arch := fs.String("arch", "bert-base", "architecture ("+strings.Join(bench.Archs(), ", ")+"; random weights of its real shapes) or a model folder")
	prec := fs.String("precision", "", "fp32, bf16 or int8-dynamic (default: as the folder holds it; FP32 for an architecture); int8-static needs an artifact folder")
	threads := fs.Int("threads", 1, "threads per linear layer")
	warmBatch := fs.Int("warm-batch", 8, "the warm-up's largest batch")
	warmLength := fs.Int("warm-length", 128, "the warm-up's longest sequence")
	calls := fs.Int("calls", 200, "single-sequence calls of varied lengths without a warm-up")
	maxLength := fs.Int("max-length", 512, "the calls' longest sequence (at most the model's)")
	rounds := fs.Int("warm-rounds", 3, "warm rounds of the same calls (each call's fastest counts)")
	seed := fs.Uint64("seed", 1, "seed of the lengths and token ids")
	pin := fs.Bool("pin", true, "with one thread, pin it to one CPU")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("bench cold: unexpected arguments %q", fs.Args())
	}
	if err := checkThreads("bench cold", *threads); err != nil {
		return err
	}
	// bench.ColdOptions takes 0 as "the default": a 0 given here would
	// silently run the default's 200 calls (or 8 x 128 warm-up, 3 rounds).
	for _, f := range []struct {
		name string
		v    int
	}{{"calls", *calls}, {"warm-batch", *warmBatch}, {"warm-length", *warmLength}, {"max-length", *maxLength}, {"warm-rounds", *rounds}} {
		if f.v == 0 {
			return fmt.Errorf("bench cold: --%s 0: want at least 1 (leave the flag out for its default, %s): %w",
				f.name, fs.Lookup(f.name).DefValue, models.ErrConfig)
		}
	}
	o := bench.ColdOptions{Arch: *arch, Threads: *threads, WarmBatch: *warmBatch, WarmLength: *warmLength,
		Calls: *calls, MaxLength: *maxLength, WarmRounds: *rounds, Seed: *seed}
	if *prec != "" {
		p, err := models.ParsePrecision(*prec)
		if err != nil {
			return fmt.Errorf("bench cold: %w", err)
		}
		o.Precision = p
	}
	if !*asJSON {
		o.Progress = func(s string) { fmt.Fprintf(stderr, "measuring %s\n", s) }
	}
	defer measureSetup(stderr, *threads == 1 && *pin, !*asJSON)()
	r, err := bench.Cold(ctx, o)
	if err != nil {
		return fmt.Errorf("bench cold: %w", err)
	}
	if *asJSON {
		return writeJSON(stdout, r)
	}
	sec := func(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }
	fmt.Fprintf(stdout, "%s at %s, %d thread(s), on %s; each part on its own selector, empty cache, background tuning\n",
		r.Model, precisionName(*prec), r.Threads, r.CPU)
	fmt.Fprintf(stdout, "load                      %s\n", sec(r.Load))
	fmt.Fprintf(stdout, "warm-up %d x %d            %s until no key is pending (%d keys listed, %d tunings)\n",
		r.WarmBatch, r.WarmLength, sec(r.Warmup), r.WarmupKeys, r.WarmupTuned)
	fmt.Fprintf(stdout, "%d calls, no warm-up       cold %s, warm %s: %.2fx (per call: median %.2fx, p90 %.2fx, max %.2fx)\n",
		len(r.Calls), sec(r.ColdTotal), sec(r.WarmTotal), r.Ratio(), r.Percentile(0.5), r.Percentile(0.9), r.Percentile(1))
	if r.WorstAt >= 0 {
		c := r.Calls[r.WorstAt]
		fmt.Fprintf(stdout, "worst after 1 s            %.2fx: call %d, %d tokens, %v cold against %v warm\n",
			r.Worst, r.WorstAt, c.Length, c.Cold.Round(time.Microsecond), c.Warm.Round(time.Microsecond))
	} else {
		fmt.Fprintf(stdout, "worst after 1 s            - (every call started within a second of the load)\n")
	}
	if r.WorstCPUAt >= 0 {
		c := r.Calls[r.WorstCPUAt]
		fmt.Fprintf(stdout, "in thread CPU time         cold %s, warm %s: %.2fx; worst after 1 s %.2fx: call %d, %d tokens, %v against %v\n",
			sec(r.ColdCPUTotal), sec(r.WarmCPUTotal), r.CPURatio(), r.WorstCPU, r.WorstCPUAt, c.Length,
			c.ColdCPU.Round(time.Microsecond), c.WarmCPU.Round(time.Microsecond))
	}
	fmt.Fprintf(stdout, "background tuning          %d keys ran a default while queued, %d tunings, %d default checks ahead of the calls; %s more after the last call\n",
		r.Defaults, r.Tuned, r.Prechecks, sec(r.Settle))
	if r.TunerPriority != "" {
		fmt.Fprintf(stdout, "background work ran at      %s\n", r.TunerPriority)
	}
	return nil
}
