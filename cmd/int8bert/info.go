package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/int8bert/int8bert/cpu"
	"github.com/int8bert/int8bert/dnnl"
	"github.com/int8bert/int8bert/internal/cgroup"
	"github.com/int8bert/int8bert/kernels/peak"
	"github.com/int8bert/int8bert/selector"
)

// infoReport is what "int8bert info -json" prints.
type infoReport struct {
	CPU      cpu.Features      `json:"cpu"`
	Override string            `json:"override_error,omitempty"`
	Paths    paths             `json:"paths"`
	Int8     selector.Int8Tier `json:"int8"`
	DNNL     dnnlReport        `json:"onednn"`
	Peak     *peak.Figures     `json:"peak,omitempty"`
	// Resources are the container's limits and the defaults derived from
	// them (docs/DESIGN.md section 9.10).
	Resources cgroup.Resources `json:"resources"`
}

// resourceLines are info's lines on the container's limits: the CPUs
// the instances fill and the memory limit, each with where it came from.
func resourceLines(r cgroup.Resources) []string {
	out := []string{"cpus:     " + r.CPULine(), "memory:   " + r.MemoryLine()}
	if r.Note != "" {
		out = append(out, "note:     "+r.Note)
	}
	return out
}

type paths struct {
	Int8 cpu.ISA `json:"int8"`
	FP32 cpu.ISA `json:"fp32"`
	BF16 cpu.ISA `json:"bf16"`
}

type dnnlReport struct {
	Available bool   `json:"available"`
	Version   string `json:"version,omitempty"`
	Runtime   string `json:"runtime,omitempty"`
	ISA       string `json:"isa,omitempty"`
	Reason    string `json:"reason,omitempty"`
}

func gatherInfo() infoReport {
	f := cpu.X86
	r := infoReport{CPU: f, Paths: paths{f.Int8Path(), f.FP32Path(), f.BF16Path()}, Int8: selector.DescribeInt8(f),
		Resources: cgroup.Current()}
	if err := cpu.OverrideError(); err != nil {
		r.Override = err.Error()
	}
	info, err := dnnl.GetInfo()
	if err != nil {
		r.DNNL = dnnlReport{Reason: err.Error() + " (rebuild with cgo and oneDNN: scripts/setup.sh)"}
	} else {
		r.DNNL = dnnlReport{Available: true, Version: info.Version, Runtime: info.Runtime, ISA: info.ISAName}
	}
	return r
}

func runInfo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("info", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print JSON")
	withPeak := fs.Bool("peak", false, "also measure the FP32 FMA, VNNI and BF16 peak of one core")
	model := fs.String("model", "", "describe this model (folder or Hugging Face model id) instead of the host: family, task, precision, recipe, tuning state")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("info: unexpected arguments %q", fs.Args())
	}
	if *model != "" {
		if *withPeak {
			return fmt.Errorf("info: -peak measures the host; it does not go with --model")
		}
		return runInfoModel(ctx, *model, *asJSON, stdout, stderr)
	}
	r := gatherInfo()
	if *withPeak {
		if unpin, _, err := pinThread(); err == nil {
			p := peak.Measure(500 * time.Millisecond)
			unpin()
			r.Peak = &p
		} else {
			p := peak.Measure(500 * time.Millisecond)
			r.Peak = &p
		}
	}
	if *asJSON {
		return writeJSON(stdout, r)
	}
	f := r.CPU
	fmt.Fprintf(stdout, "cpu:      %s (%s, family %d model %d stepping %d)\n", f.Brand, f.Vendor, f.Family, f.Model, f.Stepping)
	fmt.Fprintf(stdout, "cores:    %d usable; caches L1d %s, L2 %s, L3 %s\n", f.NumCPU, kib(f.L1D), kib(f.L2), kib(f.L3))
	for _, l := range resourceLines(r.Resources) {
		fmt.Fprintln(stdout, l)
	}
	fmt.Fprintf(stdout, "features: %v\n", f.List())
	if len(f.Disabled) > 0 {
		fmt.Fprintf(stdout, "disabled: %v (by %s)\n", f.Disabled, cpu.EnvDisable)
	}
	if r.Override != "" {
		fmt.Fprintf(stdout, "warning:  %s\n", r.Override)
	}
	fmt.Fprintf(stdout, "amx:      %s\n", f.AMX)
	fmt.Fprintf(stdout, "paths:    int8 %s, fp32 %s, bf16 %s\n", r.Paths.Int8, r.Paths.FP32, r.Paths.BF16)
	fmt.Fprintf(stdout, "int8:     %s tier: %s\n", r.Int8.Tier, r.Int8.Scheme)
	fmt.Fprintf(stdout, "          kernels %s; oneDNN's INT8 %s\n", strings.Join(r.Int8.Kernels, ", "), r.Int8.OneDNN)
	fmt.Fprintf(stdout, "          INT8 linears can reach at most %.4gx FP32 per instruction on this tier\n", r.Int8.Ceiling)
	if r.DNNL.Available {
		fmt.Fprintf(stdout, "oneDNN:   %s (%s runtime), ISA %s\n", r.DNNL.Version, r.DNNL.Runtime, r.DNNL.ISA)
	} else {
		fmt.Fprintf(stdout, "oneDNN:   unavailable: %s\n", r.DNNL.Reason)
	}
	if r.Peak != nil {
		if !peak.Available() {
			fmt.Fprintln(stdout, "peak:     not measured: no assembly peak loops in this build, or neither AVX-512 nor AVX2")
		} else {
			fmt.Fprintf(stdout, "peak:     FP32 FMA %.1f GFLOP/s, VNNI %.1f GOP/s, BF16 %.1f GFLOP/s, AVX-VNNI %.1f GOP/s, AVX-512 VPMADDWD %.1f GOP/s, AVX2 VPMADDWD %.1f GOP/s (one core)\n",
				r.Peak.FP32GFLOPS, r.Peak.VNNIGOPS, r.Peak.BF16GFLOPS, r.Peak.AVXVNNIGOPS, r.Peak.AVX512Int16GOPS, r.Peak.AVX2Int8GOPS)
			if note := bf16PeakNote(r.Peak.FP32GFLOPS, r.Peak.BF16GFLOPS); note != "" {
				fmt.Fprintf(stdout, "note:     %s\n", note)
			}
		}
	}
	return nil
}

// bf16PeakNote warns when this core's VDPBF16PS peak loop is below its
// FP32 FMA loop (a Xeon without AMX measured 75-90 against 176-179
// GFLOP/s): --precision bf16 then runs slower than fp32 (docs/DESIGN.md
// section 3.9). "" when BF16 is faster or was not measured.
func bf16PeakNote(fp32, bf16 float64) string {
	if bf16 <= 0 || fp32 <= 0 || bf16 >= fp32 {
		return ""
	}
	return fmt.Sprintf("BF16's peak (VDPBF16PS) is %.2fx FP32's FMA on this core: --precision bf16 runs slower than fp32 here; int8 is the faster choice", bf16/fp32)
}

func kib(b int) string {
	if b == 0 {
		return "unknown"
	}
	if b >= 1<<20 {
		return fmt.Sprintf("%d MiB", b>>20)
	}
	return fmt.Sprintf("%d KiB", b>>10)
}
