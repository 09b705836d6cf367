package selector

import (
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/int8bert/int8bert/kernels"
)

// TestF32FormsOnce checks that an FP32 Linear holds W once: its compact
// copy goes at the first packed form, a further form is unpacked from it
// exactly, and with SetSingleForm a new form replaces those unused since
// the last Trim.
func TestF32FormsOnce(t *testing.T) {
	s, err := New(Options{CachePath: "off"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	n, k := 70, 45
	r := rand.New(rand.NewPCG(1, 2))
	w := make([]float32, n*k)
	for i := range w {
		w[i] = float32(r.NormFloat64())
	}
	l, err := s.NewLinearF32(n, k, w, k)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	want := func(nr int) []float32 {
		p, err := kernels.PackF32(n, k, w, k, nr)
		if err != nil {
			t.Fatal(err)
		}
		return p.Data
	}
	form := func(nr int) []float32 {
		p, err := l.packed(nr)
		if err != nil {
			t.Fatal(err)
		}
		return p.(*kernels.PackedF32).Data
	}
	if got := form(16); !slices.Equal(got, want(16)) {
		t.Fatal("the first form differs from W packed")
	}
	if c, _ := l.w.([]float32); c != nil {
		t.Error("the compact copy is still held after the first packed form")
	}
	if got := form(32); !slices.Equal(got, want(32)) {
		t.Fatal("a form unpacked from another differs from W packed")
	}
	if len(l.packs) != 2 {
		t.Fatalf("%d forms, want 2", len(l.packs))
	}
	l.Trim() // both were used: both kept, marked unused
	l.SetSingleForm(true)
	if got := form(48); !slices.Equal(got, want(48)) {
		t.Fatal("a form made in single-form mode differs from W packed")
	}
	if len(l.packs) != 1 || l.packs[48] == nil {
		t.Errorf("single-form mode kept %d forms, want the new one only", len(l.packs))
	}
	if c, _ := l.w.([]float32); c != nil {
		t.Error("the compact copy is held after the new form")
	}
	if got, min := l.Bytes(), 4*n*k; got < min || got > 2*min {
		t.Errorf("Bytes() = %d, want one form (%d to %d)", got, min, 2*min)
	}
}

// TestLinearCompact checks that Compact keeps one packed form, the one
// most calls ran on since the last Trim (and a warm-up's pinned ones),
// that a released form is made again exactly from the kept one, and
// that it reports the bytes it released.
func TestLinearCompact(t *testing.T) {
	s, err := New(Options{CachePath: "off"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	n, k := 70, 45
	r := rand.New(rand.NewPCG(3, 4))
	w := make([]int8, n*k)
	for i := range w {
		w[i] = int8(r.IntN(255) - 127)
	}
	l, err := s.NewLinear(n, k, w, k)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	want := func(nr int) []int8 {
		p, err := kernels.PackS8(n, k, w, k, nr)
		if err != nil {
			t.Fatal(err)
		}
		return p.Data
	}
	form := func(nr int) []int8 {
		p, err := l.packed(nr)
		if err != nil {
			t.Fatal(err)
		}
		return p.(*kernels.PackedS8).Data
	}
	form(16)
	form(32)
	form(32)
	form(48)
	before := l.Bytes()
	freed := l.Compact()
	if len(l.packs) != 1 || l.packs[32] == nil {
		t.Fatalf("Compact kept forms %v, want the busiest (32) only", slices.Sorted(maps.Keys(l.packs)))
	}
	if after := l.Bytes(); freed <= 0 || before-after != freed {
		t.Errorf("Compact released %d bytes; Bytes %d -> %d", freed, before, after)
	}
	if got := form(16); !slices.Equal(got, want(16)) {
		t.Fatal("a form made again after Compact differs from W packed")
	}
	// Equal counts (16 made again: one call; 32: none since Compact, then
	// one): the widest stays; a pinned form stays whatever its count.
	form(32)
	if _, err := l.pin(64); err != nil {
		t.Fatal(err)
	}
	l.Compact()
	if len(l.packs) != 2 || l.packs[32] == nil || l.packs[64] == nil {
		t.Fatalf("Compact kept forms %v, want 32 (the widest of equal counts) and the pinned 64", slices.Sorted(maps.Keys(l.packs)))
	}
}
