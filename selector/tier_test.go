package selector

import (
	"slices"
	"strings"
	"testing"

	"github.com/int8bert/int8bert/cpu"
	"github.com/int8bert/int8bert/kernels"
)

// TestDescribeInt8 names the tier of each CPU class from its features
// alone (the features are made up, so every tier is covered on any
// machine), lists only the kernels those features run, and gives the
// ceiling of the best kernel this build has for the tier.
func TestDescribeInt8(t *testing.T) {
	avx2 := cpu.Features{AVX2: true, FMA: true}
	avx512 := avx2
	avx512.AVX512F, avx512.AVX512BW, avx512.AVX512VL = true, true, true
	vnni := avx512
	vnni.AVX512VNNI = true
	avxvnni := avx2
	avxvnni.AVXVNNI = true
	for _, c := range []struct {
		name string
		f    cpu.Features
		tier string
	}{
		{"none", cpu.Features{}, "generic"},
		{"avx2", avx2, "AVX2"},
		{"avx512", avx512, "AVX-512 without VNNI"},
		{"avx512vnni", vnni, "AVX512-VNNI"},
		{"avxvnni", avxvnni, "AVX-VNNI"},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := DescribeInt8(c.f)
			if d.Tier != c.tier || d.ISA != c.f.Int8Path() {
				t.Errorf("tier %q isa %s, want %q %s", d.Tier, d.ISA, c.tier, c.f.Int8Path())
			}
			var want []string
			var best cpu.ISA
			for _, k := range kernels.U8S8Kernels() {
				if k.Available(c.f) {
					want = append(want, k.Name)
					if best == "" || rankISA(k.ISA, OpU8S8) > rankISA(best, OpU8S8) {
						best = k.ISA
					}
				}
			}
			got := slices.Clone(d.Kernels)
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("kernels %v, want those the features run: %v", d.Kernels, want)
			}
			if d.Kernels[len(d.Kernels)-1] != kernels.GenericU8S8.Name {
				t.Errorf("kernels %v: the generic one is not last", d.Kernels)
			}
			if r := int8Schemes[best]; !strings.HasPrefix(d.Scheme, r.scheme) {
				t.Errorf("scheme %q, want the best kernel's (%s): %q", d.Scheme, best, r.scheme)
			}
			if d.Ceiling < 1 {
				t.Errorf("ceiling %v below 1", d.Ceiling)
			}
			if c.name == "none" && (d.Ceiling != 1 || len(d.Kernels) != 1) {
				t.Errorf("no SIMD: ceiling %v kernels %v, want 1 and the generic one", d.Ceiling, d.Kernels)
			}
			if d.OneDNN == "" || !strings.Contains(d.String(), d.Tier) {
				t.Errorf("oneDNN %q, String %q", d.OneDNN, d.String())
			}
		})
	}
	// On AVX2 with the exact int16 kernels in the build, the ceiling is
	// VPMADDWD's 16 multiply-adds over FMA's 8: 2x.
	if d := DescribeInt8(avx2); slices.Contains(d.Kernels, "gemmAVX2w_6x16") && d.Ceiling != 2 {
		t.Errorf("AVX2 ceiling %v, want 2", d.Ceiling)
	}
}

// TestChosenU8S8 counts the u8 x s8 choices by kernel, and only those.
func TestChosenU8S8(t *testing.T) {
	s, err := New(Options{CachePath: "off", Reps: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := s.ChosenU8S8(); got != "" {
		t.Errorf("a new selector reports %q", got)
	}
	const k, n = 8, 16
	w := make([]int8, n*k)
	for i := range w {
		w[i] = int8(i%7 - 3)
	}
	lin, err := s.NewLinear(n, k, w, k)
	if err != nil {
		t.Fatal(err)
	}
	defer lin.Close()
	for _, m := range []int{1, 3} {
		x := make([]uint8, m*k)
		out := make([]int32, m*n)
		if err := lin.Run(&kernels.GEMMU8S8{M: m, A: x, Lda: k, Out: kernels.Out{S32: out, Ldc: n}, Threads: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.KernelF32(4, 8, 16, 1); err != nil {
		t.Fatal(err)
	}
	var u8s8 []Choice
	for _, ch := range s.Choices() {
		if strings.HasPrefix(ch.Key, OpU8S8+" ") {
			u8s8 = append(u8s8, ch)
		}
	}
	if len(u8s8) != 2 {
		t.Fatalf("%d u8s8 choices, want 2: %+v", len(u8s8), s.Choices())
	}
	got := s.ChosenU8S8()
	for _, ch := range u8s8 {
		if !strings.Contains(got, ch.Kernel+" x") {
			t.Errorf("ChosenU8S8 %q lacks %s", got, ch.Kernel)
		}
	}
	if strings.Contains(got, "F32") {
		t.Errorf("ChosenU8S8 %q counts an FP32 choice", got)
	}
}
