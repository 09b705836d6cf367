package selector

import (
	"fmt"
	"sort"
	"strings"

	"github.com/int8bert/int8bert/cpu"
	"github.com/int8bert/int8bert/dnnl"
	"github.com/int8bert/int8bert/kernels"
)

// Int8Tier is what a CPU gives INT8 inference: the tier its instructions
// put it in, how the u8 x s8 products are computed there, the native
// kernels that can run, and whether oneDNN's INT8 matmul is a candidate
// (docs/DESIGN.md section 4.10). `int8bert info`, the demo and
// `bench model` print it, so that a user on any CPU knows what to expect
// of INT8 and why.
type Int8Tier struct {
	// Tier names the tier: "AMX", "AVX512-VNNI", "AVX-VNNI",
	// "AVX-512 without VNNI", "AVX2" or "generic".
	Tier string `json:"tier"`
	// ISA is the best int8 kernel ISA (cpu.Features.Int8Path).
	ISA cpu.ISA `json:"isa"`
	// Scheme says how the products are summed and that the sums are exact.
	Scheme string `json:"scheme"`
	// Ceiling is what a linear layer can gain at most: the multiply-adds
	// of one INT8 multiply instruction over those of one FP32 FMA, each on
	// the widest registers its kernels use here (for AMX, per cycle of
	// TDPBUSD's throughput of 16). The measured ratio comes from the peak
	// loops (bench model).
	Ceiling float64 `json:"ceiling"`
	// Kernels lists the native u8 x s8 kernels this CPU runs, best tier
	// first (the generic Go kernel last).
	Kernels []string `json:"kernels"`
	// OneDNN says whether oneDNN's INT8 matmul is a candidate here, and why
	// not where it is not.
	OneDNN string `json:"onednn"`
}

// DescribeInt8 returns the INT8 tier of a CPU with features f (normally
// cpu.X86, after INT8BERT_CPU_DISABLE). The tier comes from the CPU; the
// scheme and the ceiling from the best kernel this build has for it.
func DescribeInt8(f cpu.Features) Int8Tier {
	t := Int8Tier{ISA: f.Int8Path()}
	avx512 := f.AVX512F && f.AVX512BW && f.AVX512VL
	switch t.ISA {
	case cpu.ISAAMX:
		t.Tier = "AMX"
	case cpu.ISAAVX512VNNI:
		t.Tier = "AVX512-VNNI"
	case cpu.ISAAVXVNNI:
		t.Tier = "AVX-VNNI"
	case cpu.ISAAVX2:
		t.Tier = "AVX2"
		if avx512 {
			t.Tier = "AVX-512 without VNNI"
		}
	default:
		t.Tier = "generic"
	}
	var best cpu.ISA
	for _, k := range kernels.U8S8Kernels() {
		if !k.Available(f) {
			continue
		}
		t.Kernels = append(t.Kernels, k.Name)
		if best == "" || rankISA(k.ISA, OpU8S8) > rankISA(best, OpU8S8) {
			best = k.ISA
		}
	}
	sort.SliceStable(t.Kernels, func(i, j int) bool {
		return rankISA(kernelISA(t.Kernels[i]), OpU8S8) > rankISA(kernelISA(t.Kernels[j]), OpU8S8)
	})
	fmaLanes := 8.0 // FP32 lanes of one FMA: ymm
	if f.AVX512F {
		fmaLanes = 16
	}
	if r, ok := int8Schemes[best]; ok {
		t.Scheme = r.scheme
		t.Ceiling = max(1, r.macs/fmaLanes)
	}
	if t.Scheme == "" || t.Kernels == nil {
		t.Scheme, t.Ceiling = "no kernels in this build", 0
	}
	if t.ISA != cpu.ISAGeneric && best != t.ISA && rankISA(best, OpU8S8) < rankISA(t.ISA, OpU8S8) {
		t.Scheme += " (this build has no " + string(t.ISA) + " kernel)"
	}
	info, err := dnnl.GetInfo()
	switch {
	case err != nil:
		t.OneDNN = "not in this build: " + err.Error()
	case info.ISA.ExactInt8():
		t.OneDNN = fmt.Sprintf("a candidate: oneDNN %s runs INT8 exactly at its ISA %s", info.Version, info.ISAName)
	default:
		t.OneDNN = fmt.Sprintf("refused: oneDNN %s at its ISA %s sums u8 x s8 pairs in int16, which saturates (docs/DESIGN.md section 5.1)",
			info.Version, info.ISAName)
	}
	return t
}

// int8Schemes says, per u8 x s8 kernel ISA, how its kernels compute and
// the multiply-adds of one of their multiply instructions (for AMX, a
// cycle of TDPBUSD's throughput: 16x64 by 64x16 every 16 cycles, against
// one FMA on each of two pipes, hence the halving). Their order is
// rankISA's.
var int8Schemes = map[cpu.ISA]struct {
	scheme string
	macs   float64
}{
	cpu.ISAAMX:        {"u8 x s8 tile products (TDPBUSD) summed in int32: exact", 16384 / 16 / 2},
	cpu.ISAAVX512VNNI: {"u8 x s8 with VPDPBUSD on zmm, four products a lane summed in int32: exact", 64},
	cpu.ISAAVXVNNI:    {"u8 x s8 with VEX VPDPBUSD on ymm, four products a lane summed in int32: exact", 32},
	cpu.ISAAVX512: {"u8 and s8 widened to int16, pairs summed by VPMADDWD on zmm into int32: exact " +
		"(VPMADDUBSW's int16 pair sums would saturate on full-range data)", 32},
	cpu.ISAAVX2: {"u8 and s8 widened to int16, pairs summed by VPMADDWD on ymm into int32: exact " +
		"(VPMADDUBSW's int16 pair sums would saturate on full-range data)", 16},
	cpu.ISAGeneric: {"plain Go int32 products: exact, and no faster than FP32", 0},
}

func kernelISA(name string) cpu.ISA {
	for _, k := range kernels.U8S8Kernels() {
		if k.Name == name {
			return k.ISA
		}
	}
	return ""
}

// String is the tier in one line: "AVX2: u8 and s8 widened ...; up to 2x
// FP32 a linear".
func (t Int8Tier) String() string {
	return fmt.Sprintf("%s: %s; INT8 linears can reach at most %.4gx FP32 per instruction here", t.Tier, t.Scheme, t.Ceiling)
}

// ChosenU8S8 counts the u8 x s8 keys by the kernel the selector chose
// for them, for a report of which kernels ran: "gemmAVX2w_6x16 x36,
// onednn x2", most used first.
func (s *Selector) ChosenU8S8() string {
	count := map[string]int{}
	for _, ch := range s.Choices() {
		if strings.HasPrefix(ch.Key, OpU8S8+" ") {
			count[ch.Kernel]++
		}
	}
	names := make([]string, 0, len(count))
	for n := range count {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		if count[names[i]] != count[names[j]] {
			return count[names[i]] > count[names[j]]
		}
		return names[i] < names[j]
	})
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s x%d", n, count[n])
	}
	return strings.Join(parts, ", ")
}

// Features returns the CPU features the selector's native candidates run
// on (Options.Features, else cpu.X86).
func (s *Selector) Features() cpu.Features { return s.features }
