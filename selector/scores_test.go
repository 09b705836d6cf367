package selector

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/int8bert/int8bert/cpu"
	"github.com/int8bert/int8bert/kernels"
)

// TestScoresCandidate: the scores kernel (kernels.ScoresU8S8) is a
// candidate of the u8s8-kernel operation only, where this CPU runs it;
// on INT8 attention's Q Kᵀ key it passes the reference check and is
// timed like the others, on P V's key (another epilogue) it declines;
// forced by name, KernelU8S8 returns it for the scores and fails for P V.
func TestScoresCandidate(t *testing.T) {
	var w warnings
	s := newSelector(t, testOptions(t, &w))
	sk := kernels.ScoresU8S8
	avail := slices.Contains(kernels.AttentionU8S8Kernels(), sk) && sk.Available(cpu.X86)
	if got := slices.Contains(s.CandidatesOf(OpU8S8Kernel), sk.Name); got != avail {
		t.Fatalf("%s a u8s8-kernel candidate: %v, want %v (available here)", sk.Name, got, avail)
	}
	if slices.Contains(s.CandidatesOf(OpU8S8), sk.Name) {
		t.Fatalf("%s is a u8s8 (linear) candidate", sk.Name)
	}
	if got := slices.Contains(s.Header().Candidates, OpU8S8Kernel+":"+sk.Name); got != avail {
		t.Fatalf("cache header names %s: %v, want %v", sk.Name, got, avail)
	}
	if !avail {
		t.Logf("%s: not available here (%s): a candidate nowhere", sk.Name, cpu.X86.Int8Path())
		return
	}
	scores := EpilogueKind{ZeroPoint: true, RowScale: true, ColScale: true, Out: F32}
	ctx := EpilogueKind{RowScale: true, Out: F32}
	qk, err := U8S8KernelKey(37, 64, 37, scores, 1)
	if err != nil {
		t.Fatal(err)
	}
	pv, err := U8S8KernelKey(37, 37, 64, ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	ch, err := s.Tune(context.Background(), qk)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(ch.Measured, func(m Measurement) bool { return m.Kernel == sk.Name }) {
		t.Fatalf("%v: %s not measured:\n%v", qk, sk.Name, ch)
	}
	ch, err = s.Tune(context.Background(), pv)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(ch.Excluded, func(e Exclusion) bool {
		return e.Kernel == sk.Name && strings.HasPrefix(e.Reason, "declines the key")
	}) {
		t.Fatalf("%v: %s does not decline it:\n%v", pv, sk.Name, ch)
	}
	o := testOptions(t, &w)
	o.Force = sk.Name
	f := newSelector(t, o)
	if got := f.ForcedOps(); !slices.Equal(got, []string{OpU8S8Kernel}) {
		t.Fatalf("forced %s: ops %v, want [%s]", sk.Name, got, OpU8S8Kernel)
	}
	k, err := f.KernelU8S8(37, 64, 37, scores, 1)
	if err != nil || k != sk {
		t.Fatalf("forced %s: scores kernel %v, %v", sk.Name, k, err)
	}
	if _, err := f.KernelU8S8(37, 37, 64, ctx, 1); err == nil {
		t.Fatalf("forced %s: a kernel for P V", sk.Name)
	}
	// K not a multiple of 4 (its own bucket): another kernel.
	if k, err := s.KernelU8S8(37, 6, 37, scores, 1); err != nil || k == sk {
		t.Fatalf("k=6: kernel %v, %v: want another than %s", k, err, sk.Name)
	}
}
