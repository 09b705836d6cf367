package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"text/tabwriter"
	"time"

	"github.com/int8bert/int8bert/bench"
	"github.com/int8bert/int8bert/cpu"
)

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "gemm" {
		return fmt.Errorf("bench: want a target: gemm")
	}
	fs := flag.NewFlagSet("bench gemm", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print JSON")
	threads := fs.Int("threads", 1, "threads per GEMM")
	minTime := fs.Duration("time", 300*time.Millisecond, "minimum time per measurement")
	runtimeM := fs.Bool("runtime-m", false, "oneDNN primitives take M at run time (default: one primitive per M)")
	pin := fs.Bool("pin", true, "with one thread, pin it to one CPU")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("bench gemm: unexpected arguments %q", fs.Args())
	}
	if *threads < 1 {
		return fmt.Errorf("bench gemm: -threads must be >= 1, got %d", *threads)
	}
	if os.Getenv("OMP_WAIT_POLICY") == "" {
		fmt.Fprintln(stderr, "note: OMP_WAIT_POLICY is unset; spinning OpenMP threads can slow oneDNN down on small VMs (export OMP_WAIT_POLICY=passive)")
	}
	if *threads == 1 && *pin {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if c, err := pinToOneCPU(); err != nil {
			fmt.Fprintf(stderr, "note: not pinned: %v\n", err)
		} else if !*asJSON {
			fmt.Fprintf(stderr, "pinned to CPU %d\n", c)
		}
	}
	o := bench.GEMMOptions{Threads: *threads, MinTime: *minTime, RuntimeM: *runtimeM}
	if !*asJSON {
		o.Progress = func(s string) { fmt.Fprintf(stderr, "measuring %s\n", s) }
	}
	res, err := bench.DNNLGEMM(ctx, bench.BERTShapes, o)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			CPU     string             `json:"cpu"`
			Threads int                `json:"threads"`
			Results []bench.GEMMResult `json:"results"`
		}{cpu.X86.Brand, *threads, res})
	}
	fmt.Fprintf(stdout, "oneDNN GEMMs on %s, %d thread(s); GOP/s = 2*M*K*N per second\n", cpu.X86.Brand, *threads)
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "shape\tM\tK\tN\tdtype\tkernel\tms\tGOP/s\tvs f32\t")
	for _, r := range res {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%s\t%.3f\t%.1f\t%.2fx\t\n", r.Shape, r.M, r.K, r.N, r.DType, r.Kernel, r.MsPerOp, r.GOPS, r.VsF32)
	}
	return tw.Flush()
}
