package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/int8bert/int8bert/bench"
	"github.com/int8bert/int8bert/models/encoder"
	"github.com/int8bert/int8bert/selector"
	"github.com/int8bert/int8bert/smoothquant"
)

func runBenchModel(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench model", flag.ContinueOnError)
	fs.SetOutput(stderr)
	arch := fs.String("arch", "bert-base", "architecture ("+strings.Join(bench.Archs(), ", ")+"; random weights of its real shapes) or a model folder")
	seq := fs.Int("seq", 128, "tokens per sequence")
	batch := fs.Int("batch", 1, "sequences per forward pass")
	threads := fs.Int("threads", 1, "threads per linear layer")
	precs := fs.String("precision", "fp32,int8-static,int8-dynamic", "precisions to measure")
	alpha := fs.String("alpha", "0.5", "SmoothQuant alpha, or auto")
	minTime := fs.Duration("min-time", 2*time.Second, "least time spent timing each precision")
	reps := fs.Int("reps", 3, "least number of timed passes per precision (the median is reported)")
	asJSON := fs.Bool("json", false, "print JSON")
	pin := fs.Bool("pin", true, "with one thread, pin it to one CPU")
	peakTime := fs.Duration("peak-time", 300*time.Millisecond, "time of the peak microbenchmark run before each precision (0: none)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file (go tool pprof)")
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
	list, err := encoder.ParsePrecisions(*precs)
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
	if err := checkThreads("bench model", *threads); err != nil {
		return err
	}
	o := bench.ModelOptions{Arch: *arch, Seq: *seq, Batch: *batch, Threads: *threads, Precisions: list,
		MinTime: *minTime, Reps: *reps, PeakTime: *peakTime, Progress: func(s string) { fmt.Fprintln(stderr, s) }}
	o.Quant.Alpha, o.Quant.AlphaSet, o.Quant.Auto = a, true, auto
	if *peakTime <= 0 {
		o.PeakTime = -1
	}
	defer measureSetup(stderr, *threads == 1 && *pin, true)()
	r, err := bench.Model(ctx, o)
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(stdout, r)
	}
	fmt.Fprintf(stdout, "%s, seq %d, batch %d, %d thread(s); median of timed passes\n", r.Arch, r.Seq, r.Batch, r.Threads)
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "precision\tseq/s\tms/batch\tlinear ms\tlinear GOP/s\tlinear % peak\tattention ms\tother ms\tspeed-up vs fp32\tlinear speed-up\t")
	for _, x := range r.Results {
		sp, lsp, pp := "-", "-", "-"
		if x.SpeedupVsFP32 > 0 {
			sp, lsp = fmt.Sprintf("%.2fx", x.SpeedupVsFP32), fmt.Sprintf("%.2fx", x.LinearSpeedupVsFP32)
		}
		if x.LinearPctPeak > 0 {
			pp = fmt.Sprintf("%.1f", x.LinearPctPeak)
		}
		fmt.Fprintf(tw, "%s\t%.2f\t%.1f\t%.1f\t%.1f\t%s\t%.1f\t%.1f\t%s\t%s\t\n", x.Precision, x.SeqPerS, x.MsPerBatch, x.LinearMs,
			x.LinearGOPS, pp, x.AttentionMs, x.OtherMs, sp, lsp)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if _, err := fmt.Fprintln(stdout, "linear % peak: over the FMA (FP32) or INT8 (VNNI, else AVX-VNNI, else VPMADDWD zmm, else ymm) peak measured on one core right before each precision, times the threads"); err != nil {
		return err
	}
	return printInt8Tier(stdout, r.Int8, r.Int8Kernels, peakRatio(r.Results))
}

// peakRatio is the measured INT8 peak over the FP32 one of a run's
// results (0 where either was not measured).
func peakRatio(rs []bench.ModelResult) float64 {
	var f32, i8 float64
	for _, x := range rs {
		switch {
		case x.Precision == encoder.PrecisionFP32.String():
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
