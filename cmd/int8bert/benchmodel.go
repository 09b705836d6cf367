package main

import (
	"context"
	"flag"
	"fmt"
	"github.com/int8bert/int8bert/models"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/int8bert/int8bert/bench"
	"github.com/int8bert/int8bert/cpu"
	"github.com/int8bert/int8bert/selector"
	"github.com/int8bert/int8bert/smoothquant"
)

func runBenchModel(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench model", flag.ContinueOnError)
	fs.SetOutput(stderr)
	arch := fs.String("arch", "bert-base", "architecture ("+strings.Join(bench.Archs(), ", ")+"; random weights of its real shapes) or a model folder")
	seq := fs.Int("seq", 128, "tokens per sequence")
	batch := fs.Int("batch", 1, "sequences per forward pass")
	threadsArg := fs.String("threads", "1", "threads per forward pass, or an ascending list (1,2 or 1,4,16): each count's time per precision, interleaved round by round, and its scaling over the first count beside the peak loop's own, in one run")
	precs := fs.String("precision", "fp32,int8-static,int8-dynamic", "precisions to measure (fp32, bf16, int8-static, int8-dynamic)")
	alpha := fs.String("alpha", "0.5", "SmoothQuant alpha, or auto")
	minTime := fs.Duration("min-time", 2*time.Second, "least time spent timing each precision")
	reps := fs.Int("reps", 3, "least number of timed passes per precision (the median is reported)")
	asJSON := fs.Bool("json", false, "print JSON")
	pin := fs.Bool("pin", true, "with one thread, pin it to one CPU; with --instances N > 1, pin each instance to its own --threads CPUs")
	instances := fs.Int("instances", 1, "also run N instances of the model loaded once, concurrently, and report the aggregate seq/s, the scaling over one instance and the memory per extra instance (--threads per instance)")
	peakTime := fs.Duration("peak-time", 300*time.Millisecond, "time of the peak microbenchmark run before each precision (0: none)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file (go tool pprof)")
	benchstat := fs.String("benchstat", "", "also write every timed pass in Go's benchmark format to this file (- for stdout), for golang.org/x/perf/cmd/benchstat before/after comparisons")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return fmt.Errorf("bench model: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("bench model: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("bench model: unexpected arguments %q", fs.Args())
	}
	list, err := models.ParsePrecisions(*precs)
	if err != nil {
		return fmt.Errorf("bench model: %w", err)
	}
	a, auto, err := smoothquant.ParseAlpha(*alpha)
	if err != nil {
		return fmt.Errorf("bench model: %w", err)
	}
	if *seq < 1 || *batch < 1 || *reps < 1 || *minTime < 0 {
		return fmt.Errorf("bench model: -seq, -batch and -reps must be positive")
	}
	counts, err := bench.ParseThreadCounts(*threadsArg, runtime.NumCPU())
	if err != nil {
		return fmt.Errorf("bench model: %w", err)
	}
	threads := &counts[0]
	if len(counts) > 1 {
		if *instances > 1 {
			return fmt.Errorf("bench model: --instances %d with --threads %s: give one thread count for instances", *instances, *threadsArg)
		}
		o := bench.ModelOptions{Arch: *arch, Seq: *seq, Batch: *batch, Precisions: list, MinTime: *minTime, Reps: *reps, PeakTime: *peakTime,
			Progress: func(s string) { fmt.Fprintln(stderr, s) }}
		o.Quant.Alpha, o.Quant.AlphaSet, o.Quant.Auto = a, true, auto
		if *peakTime <= 0 {
			o.PeakTime = -1
		}
		defer measureSetup(stderr, false, true)()
		r, err := bench.ModelScaling(ctx, o, counts)
		if err != nil {
			return err
		}
		if *asJSON {
			return writeJSON(stdout, r)
		}
		return printScaling(stdout, r)
	}
	if most := runtime.NumCPU(); *instances < 1 || *instances**threads > most {
		return fmt.Errorf("bench model: --instances %d x --threads %d: want at least one instance and at most %d CPUs in all (the CPUs this process may use)", *instances, *threads, most)
	}
	o := bench.ModelOptions{Arch: *arch, Seq: *seq, Batch: *batch, Threads: *threads, Precisions: list,
		MinTime: *minTime, Reps: *reps, Instances: *instances, Pin: *pin && *instances > 1, PeakTime: *peakTime, Progress: func(s string) { fmt.Fprintln(stderr, s) }}
	o.Quant.Alpha, o.Quant.AlphaSet, o.Quant.Auto = a, true, auto
	if *peakTime <= 0 {
		o.PeakTime = -1
	}
	defer measureSetup(stderr, *threads == 1 && *pin && *instances == 1, true)()
	r, err := bench.Model(ctx, o)
	if err != nil {
		return err
	}
	if err := writeBenchstat(*benchstat, stdout, r.BenchLines()); err != nil {
		return fmt.Errorf("bench model: %w", err)
	}
	if *asJSON {
		return writeJSON(stdout, r)
	}
	fmt.Fprintf(stdout, "%s, seq %d, batch %d, %d thread(s), %d instance(s); median of timed passes (min-max)\n", r.Arch, r.Seq, r.Batch, r.Threads, r.Instances)
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "precision\tseq/s\tms/batch (min-max)\tpasses\tlinear ms\tlinear GOP/s\tlinear % peak\tattention ms\tother ms\tspeed-up vs fp32\tlinear speed-up\t")
	noisy := false
	for _, x := range r.Results {
		sp, lsp, pp := "-", "-", "-"
		if x.SpeedupVsFP32 > 0 {
			sp, lsp = bench.Ratio(x.SpeedupVsFP32, x.SpeedupNoisy), bench.Ratio(x.LinearSpeedupVsFP32, x.SpeedupNoisy)
		}
		if x.LinearPctPeak > 0 {
			pp = fmt.Sprintf("%.1f", x.LinearPctPeak)
		}
		ms := x.Spread.String()
		if x.Noise.Noisy {
			ms, noisy = bench.NoisyMark+ms, true
		}
		fmt.Fprintf(tw, "%s\t%.2f\t%s\t%d\t%.1f\t%.1f\t%s\t%.1f\t%.1f\t%s\t%s\t\n", x.Precision, x.SeqPerS, ms, x.Passes, x.LinearMs,
			x.LinearGOPS, pp, x.AttentionMs, x.OtherMs, sp, lsp)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, x := range r.Results {
		if x.AttentionC2PMs > 0 || x.AttentionP2CMs > 0 {
			fmt.Fprintf(stdout, "%s attention: content %.1f ms, c2p %.1f ms, p2c %.1f ms (split by each term's work over the heads)\n",
				x.Precision, x.AttentionContentMs, x.AttentionC2PMs, x.AttentionP2CMs)
		}
	}
	if noisy {
		fmt.Fprintln(stdout, bench.NoisyLegend)
		for _, x := range r.Results {
			if x.Noise.Noisy {
				fmt.Fprintf(stdout, "  %s: %s\n", x.Precision, x.Noise)
			}
		}
	}
	for _, x := range r.Results {
		if err := printInstances(stdout, x); err != nil {
			return err
		}
	}
	if _, err := fmt.Fprintln(stdout, "linear % peak: over the FMA (FP32), VDPBF16PS (BF16) or INT8 (VNNI, else AVX-VNNI, else VPMADDWD zmm, else ymm) peak measured on one core right before each precision, times the threads"); err != nil {
		return err
	}
	return printInt8Tier(stdout, r.Int8, r.Int8Kernels, peakRatio(r.Results))
}

// writeBenchstat writes lines in Go's benchmark format to path ("-":
// stdout; "": nothing).
func writeBenchstat(path string, stdout io.Writer, lines []bench.BenchLine) error {
	switch path {
	case "":
		return nil
	case "-":
		return bench.WriteBenchstat(stdout, cpu.X86.Brand, lines)
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("-benchstat: %w", err)
	}
	if err := bench.WriteBenchstat(f, cpu.X86.Brand, lines); err != nil {
		f.Close()
		return fmt.Errorf("-benchstat: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("-benchstat: %w", err)
	}
	return nil
}

// printInstances prints a precision's multi-instance figures, if any.
func printInstances(w io.Writer, x bench.ModelResult) error {
	ir := x.Instances
	if ir == nil {
		return nil
	}
	pin := "not pinned"
	if ir.Pinned {
		pin = "pinned"
	}
	ms := make([]string, len(ir.MsPerBatch))
	for i, m := range ir.MsPerBatch {
		ms[i] = fmt.Sprintf("%.1f", m)
	}
	mib := func(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
	rss := "RSS n/a"
	if ir.RSS > 0 {
		rss = fmt.Sprintf("RSS after 1 instance %s, after %d %s: %s per extra instance = %.1f%% of the weights (%s)",
			mib(ir.RSS), ir.Instances, mib(ir.RSSAfter), mib(ir.ExtraPerInstance), ir.ExtraPctWeights, mib(ir.WeightBytes))
	}
	_, err := fmt.Fprintf(w, "%s: %d instances (%s): %.2f seq/s vs %.2f for one: %d instances: %.2fx one instance; ms/batch per instance %s\n  %s\n",
		x.Precision, ir.Instances, pin, ir.SeqPerS, ir.OneSeqPerS, ir.Instances, ir.Scaling, strings.Join(ms, ", "), rss)
	return err
}

// peakRatio is the measured INT8 peak over the FP32 one of a run's
// results (0 where either was not measured).
func peakRatio(rs []bench.ModelResult) float64 {
	var f32, i8 float64
	for _, x := range rs {
		switch {
		case x.Precision == models.PrecisionFP32.String():
			f32 = x.PeakGOPS
		case x.PeakGOPS > 0:
			i8 = x.PeakGOPS
		}
	}
	if f32 == 0 || i8 == 0 {
		return 0
	}
	return i8 / f32
}

// printInt8Tier says what INT8 this CPU gives next to a speed-up: the
// tier and its scheme, the kernels that ran, and the ceiling (the
// measured peak ratio where there is one).
func printInt8Tier(w io.Writer, t selector.Int8Tier, chosen string, measured float64) error {
	ceiling := fmt.Sprintf("at most %.4gx FP32 per instruction", t.Ceiling)
	if measured > 0 {
		ceiling += fmt.Sprintf(" (peak loops measured here: %.2fx)", measured)
	}
	if chosen == "" {
		chosen = "none ran"
	}
	_, err := fmt.Fprintf(w, "int8 tier: %s: %s\nint8 kernels chosen: %s; INT8 linears can reach %s\n", t.Tier, t.Scheme, chosen, ceiling)
	return err
}

// printScaling prints bench model --threads 1,2,...: per precision and
// thread count the median pass with its spread and parts, the scaling over
// the first count (the median of the rounds' ratios, min-max) and the
// peak loop's own scaling right before and after, and their ratio.
func printScaling(w io.Writer, r *bench.ScalingReport) error {
	base := r.Threads[0]
	fmt.Fprintf(w, "%s, seq %d, batch %d, threads %v: one pass on each count per round, back to back; median of timed passes (min-max)\n", r.Arch, r.Seq, r.Batch, r.Threads)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "precision\tthreads\tms/batch (min-max)\tpasses\tlinear ms\tattention ms\tother ms\tscaling vs %d (min-max)\tpeak loop scaling (before/after)\tof peak scaling\t\n", base)
	noisy := false
	for _, p := range r.Precisions {
		for _, x := range p.Points {
			ms := x.Spread.String()
			if x.Noise.Noisy {
				ms, noisy = bench.NoisyMark+ms, true
			}
			sc, pk, of := "1.00x", "-", "-"
			if x.Threads != base {
				sc = fmt.Sprintf("%s (%.2f-%.2f)", bench.Ratio(x.Scaling, x.Noise.Noisy || p.Points[0].Noise.Noisy), x.ScalingSpread.Min, x.ScalingSpread.Max)
			}
			if x.PeakScaling > 0 && x.Threads != base {
				pk = fmt.Sprintf("%.2fx/%.2fx", x.PeakScaling, x.PeakScalingAfter)
				of = fmt.Sprintf("%.2f", x.OfPeak)
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%.1f\t%.1f\t%.1f\t%s\t%s\t%s\t\n", p.Precision, x.Threads, ms, x.Spread.N,
				x.LinearMs, x.AttentionMs, x.OtherMs, sc, pk, of)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if noisy {
		fmt.Fprintln(w, bench.NoisyLegend)
		for _, p := range r.Precisions {
			for _, x := range p.Points {
				if x.Noise.Noisy {
					fmt.Fprintf(w, "  %s on %d thread(s): %s\n", p.Precision, x.Threads, x.Noise)
				}
			}
		}
	}
	_, err := fmt.Fprintf(w, "peak loop scaling: the precision's peak loop (FMA, the INT8 tier's, VDPBF16PS) on N goroutines at once, each on its own OS thread, over %d, right before/after the passes; of peak scaling: the pass's scaling over it\n", base)
	return err
}
