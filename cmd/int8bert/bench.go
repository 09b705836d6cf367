package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/int8bert/int8bert/bench"
)

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "model" {
		return runBenchModel(ctx, args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "paper" {
		return runBenchPaper(ctx, args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "serve" {
		return runBenchServe(ctx, args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "cold" {
		return runBenchCold(ctx, args[1:], stdout, stderr)
	}
	if len(args) == 0 || args[0] != "gemm" {
		return fmt.Errorf("bench: want a target: gemm, model, paper, serve or cold")
	}
	fs := flag.NewFlagSet("bench gemm", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print JSON")
	threads := fs.Int("threads", 1, "threads per GEMM")
	repTime := fs.Duration("rep-time", 20*time.Millisecond, "least time of one timed repetition")
	reps := fs.Int("reps", 5, "timed repetitions per candidate (median)")
	peakTime := fs.Duration("peak-time", 300*time.Millisecond, "time of the peak microbenchmarks")
	dtypes := fs.String("dtypes", "int8,fp32", "data types to measure: int8, fp32, bf16")
	pin := fs.Bool("pin", true, "with one thread, pin it to one CPU")
	shapes := fs.String("shapes", "", "MxKxN,... instead of the BERT shapes")
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("bench gemm: unexpected arguments %q", fs.Args())
	}
	if err := checkThreads("bench gemm", *threads); err != nil {
		return err
	}
	if *reps < 1 || *repTime <= 0 || *peakTime <= 0 {
		return fmt.Errorf("bench gemm: -reps, -rep-time and -peak-time must be positive")
	}
	defer measureSetup(stderr, *threads == 1 && *pin, !*asJSON)()
	o := bench.GEMMOptions{Threads: *threads, RepTime: *repTime, Reps: *reps, PeakTime: *peakTime,
		DTypes: strings.Split(*dtypes, ",")}
	if *shapes != "" {
		list, err := parseShapes(*shapes)
		if err != nil {
			return fmt.Errorf("bench gemm: %w", err)
		}
		o.Shapes = list
	}
	o.Progress = func(s string) { fmt.Fprintf(stderr, "measuring %s\n", s) }
	if *asJSON {
		o.Progress = nil
	}
	r, err := bench.GEMM(ctx, o)
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(stdout, r)
	}
	fmt.Fprintf(stdout, "GEMMs on %s, %d thread(s); GOP/s = 2*M*K*N per second\n", r.CPU, r.Threads)
	fmt.Fprintf(stdout, "measured peak: FP32 FMA %.1f GFLOP/s, VNNI %.1f GOP/s, BF16 %.1f GFLOP/s, AVX-VNNI %.1f GOP/s, AVX-512 VPMADDWD %.1f GOP/s, AVX2 VPMADDWD %.1f GOP/s (%% peak: the median over the timed repetitions of each one's rate over the FMA, VNNI (else AVX-VNNI, else VPMADDWD zmm, else ymm) peak loop run next to it; - without one)\n",
		r.Peak.FP32GFLOPS, r.Peak.VNNIGOPS, r.Peak.BF16GFLOPS, r.Peak.AVXVNNIGOPS, r.Peak.AVX512Int16GOPS, r.Peak.AVX2Int8GOPS)
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	if len(r.Schemes) > 0 {
		fmt.Fprintln(stdout, "INT8 schemes without VNNI (inner-loop instruction mix; GOP/s = 2 ops per multiply-add):")
		fmt.Fprintln(tw, "scheme	bits	GOP/s	vs int16	exact on	")
		for _, x := range r.Schemes {
			fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.2fx\t%s\t\n", x.Scheme, x.Bits, x.GOPS, x.VsInt16, x.Range)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	fmt.Fprintln(tw, "shape\tM\tK\tN\tdtype\tepilogue\tkernel\tms (min-max)\tGOP/s\t% peak\tvs oneDNN\tchosen\t")
	noisy := false
	for _, x := range r.Results {
		vs := "-"
		if x.VsDNNL > 0 {
			vs = fmt.Sprintf("%.2fx", x.VsDNNL)
		}
		chosen := ""
		if x.Chosen {
			chosen = "*"
		}
		pct := "-"
		if x.PctPeak > 0 {
			pct = fmt.Sprintf("%.1f", x.PctPeak)
		}
		ms := fmt.Sprintf("%.3f", x.MsPerOp)
		if x.Spread.N > 1 {
			ms = fmt.Sprintf("%.3f (%.3f-%.3f)", x.Spread.Median, x.Spread.Min, x.Spread.Max)
		}
		if x.Noise.Noisy {
			ms, noisy = bench.NoisyMark+ms, true
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%.1f\t%s\t%s\t%s\t\n",
			x.Shape, x.M, x.K, x.N, x.DType, x.Epilogue, x.Kernel, ms, x.GOPS, pct, vs, chosen)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if noisy {
		fmt.Fprintln(stdout, bench.NoisyLegend)
	}
	// The same kernel skipped for the same reason on several keys (the
	// generic twins on every large shape) is one line.
	type why struct{ kernel, reason string }
	var order []why
	keys := map[why][]string{}
	for _, s := range r.Skipped {
		w := why{s.Kernel, s.Reason}
		if _, ok := keys[w]; !ok {
			order = append(order, w)
		}
		keys[w] = append(keys[w], s.Shape+" "+s.DType+" "+s.Epilogue)
	}
	for _, w := range order {
		if k := keys[w]; len(k) == 1 {
			fmt.Fprintf(stdout, "not measured: %s %s: %s\n", k[0], w.kernel, w.reason)
		} else {
			fmt.Fprintf(stdout, "not measured on %d keys (%s, ...): %s: %s\n", len(k), k[0], w.kernel, w.reason)
		}
	}
	return nil
}

// measureSetup prepares a measurement: a note when OpenMP threads would
// spin, and with pin the calling goroutine pinned to one CPU (said on
// stderr when verbose). The result undoes the pinning.
func measureSetup(stderr io.Writer, pin, verbose bool) (undo func()) {
	if os.Getenv("OMP_WAIT_POLICY") == "" {
		fmt.Fprintln(stderr, "note: OMP_WAIT_POLICY is unset; spinning OpenMP threads can slow oneDNN down on small VMs (export OMP_WAIT_POLICY=passive)")
	}
	if !pin {
		return func() {}
	}
	unpin, c, err := pinThread()
	if err != nil {
		fmt.Fprintf(stderr, "note: not pinned: %v\n", err)
		return func() {}
	}
	if verbose {
		fmt.Fprintf(stderr, "pinned to CPU %d\n", c)
	}
	return unpin
}

// pinThread locks the goroutine to its OS thread and that thread to one
// CPU; unpin restores the thread's CPU mask and unlocks it.
func pinThread() (unpin func(), cpuID int, err error) {
	runtime.LockOSThread()
	c, restore, err := pinToOneCPU()
	if err != nil {
		runtime.UnlockOSThread()
		return nil, -1, err
	}
	return func() {
		restore()
		runtime.UnlockOSThread()
	}, c, nil
}
