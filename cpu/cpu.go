package cpu

import (
	"fmt"
	"os"
	"runtime"
	"strings"

	"github.com/klauspost/cpuid/v2"
)

// EnvDisable names the environment variable read at start-up: a comma-separated,
// case-insensitive list of feature names to turn off (see Features.Apply).
const EnvDisable = "INT8BERT_CPU_DISABLE"

// ISA names an instruction set a kernel is written for. It is the one
// vocabulary of kernel ISAs: kernels' Kernel.ISA and KernelF32.ISA, the
// paths Features.Int8Path, FP32Path and BF16Path return, the selector's
// INT8BERT_KERNEL forcing and its tuning cache all use these constants.
type ISA string

// The ISAs.
const (
	ISAAMX        ISA = "amx"         // int8: AMX-INT8 tiles
	ISAAVX512VNNI ISA = "avx512-vnni" // int8: EVEX VPDPBUSD
	ISAAVXVNNI    ISA = "avx-vnni"    // int8: VEX VPDPBUSD on 256-bit registers
	ISAAVX2       ISA = "avx2"        // int8: VPMADDUBSW/VPMADDWD; fp32: 256-bit FMA (AVX2 + FMA3)
	ISAGeneric    ISA = "generic"     // int8/fp32: pure Go
	ISAAVX512     ISA = "avx512"      // fp32: 512-bit FMA
	ISAAMXBF16    ISA = "amx-bf16"    // bf16: AMX-BF16 tiles
	ISAAVX512BF16 ISA = "avx512-bf16" // bf16: VDPBF16PS
	ISANone       ISA = "none"        // bf16: no native path
)

// AMXState is the outcome of the AMX permission request.
type AMXState string

// AMX permission outcomes.
const (
	AMXGranted      AMXState = "granted"       // the kernel allows AMX tile data
	AMXRefused      AMXState = "refused"       // the request failed; see Reason
	AMXNotRequested AMXState = "not requested" // see Reason
)

// AMXPermission reports whether this process may use AMX tile data, and why not.
type AMXPermission struct {
	State  AMXState `json:"state"`
	Reason string   `json:"reason,omitempty"`
}

// Granted reports whether AMX tiles may be used.
func (p AMXPermission) Granted() bool { return p.State == AMXGranted }

// String returns "granted", "refused: <reason>" or "not requested: <reason>"
// ("unknown" for the zero value).
func (p AMXPermission) String() string {
	if p.State == "" {
		return "unknown"
	}
	if p.Reason == "" {
		return string(p.State)
	}
	return string(p.State) + ": " + p.Reason
}

// Features describes the CPU: identity, caches, feature flags and AMX permission.
// Cache sizes are in bytes, 0 when CPUID does not report them.
type Features struct {
	Vendor        string `json:"vendor"`
	Brand         string `json:"brand"`
	Family        int    `json:"family"`
	Model         int    `json:"model"`
	Stepping      int    `json:"stepping"`
	LogicalCores  int    `json:"logical_cores"`  // as CPUID reports them
	PhysicalCores int    `json:"physical_cores"` // as CPUID reports them
	NumCPU        int    `json:"num_cpu"`        // usable by this process (runtime.NumCPU)
	CacheLine     int    `json:"cache_line"`
	L1D           int    `json:"l1d"`
	L2            int    `json:"l2"`
	L3            int    `json:"l3"`

	AVX2       bool `json:"avx2"`
	FMA        bool `json:"fma"`
	AVX512F    bool `json:"avx512f"`
	AVX512BW   bool `json:"avx512bw"`
	AVX512VL   bool `json:"avx512vl"`
	AVX512VNNI bool `json:"avx512vnni"`
	AVXVNNI    bool `json:"avxvnni"`
	AVX512BF16 bool `json:"avx512bf16"`
	AMXTile    bool `json:"amxtile"`
	AMXInt8    bool `json:"amxint8"`
	AMXBF16    bool `json:"amxbf16"`

	AMX      AMXPermission `json:"amx_permission"`
	Disabled []string      `json:"disabled,omitempty"` // flags turned off by Apply
}

var (
	// Detected is what CPUID reported, with the process's AMX permission outcome.
	Detected Features
	// X86 is Detected after the INT8BERT_CPU_DISABLE override: the features
	// kernels may use.
	X86         Features
	overrideErr error
)

func init() {
	Detected = probe()
	X86, overrideErr = Detected.Apply(os.Getenv(EnvDisable))
	X86.AMX = requestAMX(Detected, X86)
	Detected.AMX = X86.AMX
}

// OverrideError returns the error from parsing INT8BERT_CPU_DISABLE at start-up,
// or nil. Unknown names are ignored by the probe; callers decide whether to fail.
func OverrideError() error { return overrideErr }

func probe() Features {
	c := cpuid.CPU
	pos := func(n int) int { return max(n, 0) }
	return Features{
		Vendor: c.VendorString, Brand: strings.TrimSpace(c.BrandName),
		Family: c.Family, Model: c.Model, Stepping: c.Stepping,
		LogicalCores: c.LogicalCores, PhysicalCores: c.PhysicalCores, NumCPU: runtime.NumCPU(),
		CacheLine: c.CacheLine, L1D: pos(c.Cache.L1D), L2: pos(c.Cache.L2), L3: pos(c.Cache.L3),

		AVX2: c.Has(cpuid.AVX2), FMA: c.Has(cpuid.FMA3),
		AVX512F: c.Has(cpuid.AVX512F), AVX512BW: c.Has(cpuid.AVX512BW), AVX512VL: c.Has(cpuid.AVX512VL),
		AVX512VNNI: c.Has(cpuid.AVX512VNNI), AVXVNNI: c.Has(cpuid.AVXVNNI), AVX512BF16: c.Has(cpuid.AVX512BF16),
		AMXTile: c.Has(cpuid.AMXTILE), AMXInt8: c.Has(cpuid.AMXINT8), AMXBF16: c.Has(cpuid.AMXBF16),
	}
}

// requestAMX asks the OS for AMX tile data when the CPU has AMX-TILE and the
// override left it on; otherwise it says why it did not ask.
func requestAMX(detected, eff Features) AMXPermission {
	switch {
	case !detected.AMXTile:
		return AMXPermission{AMXNotRequested, "CPU lacks AMX-TILE"}
	case !eff.AMXTile:
		return AMXPermission{AMXNotRequested, "disabled by " + EnvDisable}
	}
	return archRequestAMX()
}

// flag is one override name: its field and the feature it depends on.
type flag struct {
	name, parent string
	field        func(*Features) *bool
}

var flags = []flag{
	{"avx2", "", func(f *Features) *bool { return &f.AVX2 }},
	{"fma", "", func(f *Features) *bool { return &f.FMA }},
	{"avx512f", "avx2", func(f *Features) *bool { return &f.AVX512F }},
	{"avx512bw", "avx512f", func(f *Features) *bool { return &f.AVX512BW }},
	{"avx512vl", "avx512f", func(f *Features) *bool { return &f.AVX512VL }},
	{"avx512vnni", "avx512f", func(f *Features) *bool { return &f.AVX512VNNI }},
	{"avx512bf16", "avx512f", func(f *Features) *bool { return &f.AVX512BF16 }},
	{"avxvnni", "avx2", func(f *Features) *bool { return &f.AVXVNNI }},
	{"amxtile", "", func(f *Features) *bool { return &f.AMXTile }},
	{"amxint8", "amxtile", func(f *Features) *bool { return &f.AMXInt8 }},
	{"amxbf16", "amxtile", func(f *Features) *bool { return &f.AMXBF16 }},
}

var aliases = map[string]string{"avx512": "avx512f", "amx": "amxtile"}

// disable turns off name and, recursively, every feature that depends on it.
func (f *Features) disable(name string) {
	for _, fl := range flags {
		if fl.name == name {
			if p := fl.field(f); *p {
				*p = false
				f.Disabled = append(f.Disabled, name)
			}
		} else if fl.parent == name {
			f.disable(fl.name)
		}
	}
}

// Apply returns f with the features named in disable turned off, as
// INT8BERT_CPU_DISABLE does: a comma-separated, case-insensitive list of
// avx2, fma, avx512 (all AVX-512), avx512f, avx512bw, avx512vl, avx512vnni,
// avxvnni, avx512bf16, amx (all AMX), amxtile, amxint8, amxbf16. Turning a
// feature off turns off what depends on it (avx2: AVX-512 and AVX-VNNI;
// avx512f: the other AVX-512 flags; amxtile: AMX-INT8 and AMX-BF16). Apply
// never turns a feature on. Unknown names produce an error; the known names are
// still applied. Apply does not touch the OS: when it turns AMX-TILE off, the
// AMX permission reads "not requested".
func (f Features) Apply(disable string) (Features, error) {
	f.Disabled = append([]string(nil), f.Disabled...)
	hadTile := f.AMXTile
	var unknown []string
	for tok := range strings.SplitSeq(disable, ",") {
		name := strings.ToLower(strings.TrimSpace(tok))
		if a, ok := aliases[name]; ok {
			name = a
		}
		switch {
		case name == "":
		case !known(name):
			unknown = append(unknown, strings.TrimSpace(tok))
		default:
			f.disable(name)
		}
	}
	if hadTile && !f.AMXTile {
		f.AMX = AMXPermission{AMXNotRequested, "disabled by " + EnvDisable}
	}
	if len(unknown) > 0 {
		return f, fmt.Errorf("cpu: %s: unknown feature names %q (known: %s)", EnvDisable, unknown, knownNames())
	}
	return f, nil
}

func known(name string) bool {
	for _, fl := range flags {
		if fl.name == name {
			return true
		}
	}
	return false
}

func knownNames() string {
	names := []string{"avx512", "amx"}
	for _, fl := range flags {
		names = append(names, fl.name)
	}
	return strings.Join(names, ", ")
}

// List returns the names of the feature flags that are on, in a fixed order.
func (f Features) List() []string {
	var on []string
	for _, fl := range flags {
		if *fl.field(&f) {
			on = append(on, fl.name)
		}
	}
	return on
}

func (f Features) avx512Core() bool { return f.AVX512F && f.AVX512BW && f.AVX512VL }

// Int8Path names the best live int8 GEMM path: amx, avx512-vnni, avx-vnni,
// avx2 or generic. AMX needs AMX-TILE, AMX-INT8 and granted permission.
func (f Features) Int8Path() ISA {
	switch {
	case f.AMXTile && f.AMXInt8 && f.AMX.Granted():
		return ISAAMX
	case f.avx512Core() && f.AVX512VNNI:
		return ISAAVX512VNNI
	case f.AVX2 && f.AVXVNNI:
		return ISAAVXVNNI
	case f.AVX2:
		return ISAAVX2
	}
	return ISAGeneric
}

// FP32Path names the best live fp32 GEMM path: avx512, avx2 (AVX2 and FMA3)
// or generic.
func (f Features) FP32Path() ISA {
	switch {
	case f.AVX512F:
		return ISAAVX512
	case f.AVX2 && f.FMA:
		return ISAAVX2
	}
	return ISAGeneric
}

// BF16Path names the best live bf16 GEMM path: amx-bf16, avx512-bf16 or none.
func (f Features) BF16Path() ISA {
	switch {
	case f.AMXTile && f.AMXBF16 && f.AMX.Granted():
		return ISAAMXBF16
	case f.avx512Core() && f.AVX512BF16:
		return ISAAVX512BF16
	}
	return ISANone
}

// String says which paths are live and lists the feature flags that are on, e.g.
// "int8: avx512-vnni (amx: not requested: CPU lacks AMX-TILE); fp32: avx512;
// bf16: avx512-bf16; features: avx2,fma,...".
func (f Features) String() string {
	s := fmt.Sprintf("int8: %s (amx: %s); fp32: %s; bf16: %s; features: %s",
		f.Int8Path(), f.AMX, f.FP32Path(), f.BF16Path(), strings.Join(f.List(), ","))
	if len(f.Disabled) > 0 {
		s += "; disabled: " + strings.Join(f.Disabled, ",")
	}
	return s
}

// Signature identifies the CPU and its live feature set, for keying a tuning
// cache: vendor, brand, family/model/stepping, live paths and flags.
func (f Features) Signature() string {
	return fmt.Sprintf("%s|%s|%d/%d/%d|int8=%s,fp32=%s,bf16=%s|%s", f.Vendor, f.Brand,
		f.Family, f.Model, f.Stepping, f.Int8Path(), f.FP32Path(), f.BF16Path(), strings.Join(f.List(), ","))
}
