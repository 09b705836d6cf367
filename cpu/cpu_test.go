package cpu

import (
	"encoding/json"
	"os"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// all returns a Features value with every flag on and AMX granted.
func all() Features {
	var f Features
	for _, fl := range flags {
		*fl.field(&f) = true
	}
	f.AMX = AMXPermission{State: AMXGranted}
	return f
}

func TestApplyNames(t *testing.T) {
	avx512 := []string{"avx512f", "avx512bw", "avx512vl", "avx512vnni", "avx512bf16"}
	for _, tc := range []struct {
		in  string
		off []string
	}{
		{"", nil},
		{" , ,", nil},
		{"fma", []string{"fma"}},
		{"avx2", append([]string{"avx2", "avxvnni"}, avx512...)},
		{"avx512", avx512},
		{"avx512f", avx512},
		{"avx512bw", []string{"avx512bw"}},
		{"avx512vl", []string{"avx512vl"}},
		{"avx512vnni", []string{"avx512vnni"}},
		{"avx512bf16", []string{"avx512bf16"}},
		{"avxvnni", []string{"avxvnni"}},
		{"amx", []string{"amxtile", "amxint8", "amxbf16"}},
		{"amxtile", []string{"amxtile", "amxint8", "amxbf16"}},
		{"amxint8", []string{"amxint8"}},
		{"amxbf16", []string{"amxbf16"}},
		{" AVX512VNNI , AmxInt8 ,", []string{"avx512vnni", "amxint8"}},
		{"avx512bw,avx512,avx512bw", avx512},
	} {
		got, err := all().Apply(tc.in)
		if err != nil {
			t.Errorf("Apply(%q): %v", tc.in, err)
		}
		var off []string
		for _, fl := range flags {
			if !*fl.field(&got) {
				off = append(off, fl.name)
			}
		}
		want := slices.Clone(tc.off)
		slices.Sort(want)
		slices.Sort(off)
		if !slices.Equal(off, want) {
			t.Errorf("Apply(%q) turned off %v, want %v", tc.in, off, want)
		}
		if d := slices.Sorted(slices.Values(got.Disabled)); !slices.Equal(d, want) {
			t.Errorf("Apply(%q).Disabled = %v, want %v", tc.in, got.Disabled, want)
		}
	}
}

func TestApplyUnknown(t *testing.T) {
	got, err := all().Apply("avx2, sse9 ,AVX1024")
	if err == nil || !strings.Contains(err.Error(), `"sse9"`) || !strings.Contains(err.Error(), `"AVX1024"`) {
		t.Fatalf("Apply with unknown names: err = %v, want one naming both", err)
	}
	if got.AVX2 || got.AVX512F || !got.FMA {
		t.Errorf("known name not applied next to unknown ones: %+v", got)
	}
}

func TestApplyNeverTurnsOn(t *testing.T) {
	var names []string
	for _, fl := range flags {
		names = append(names, fl.name)
	}
	names = append(names, "avx512", "amx", "bogus", "")
	for _, n := range names {
		got, _ := Features{}.Apply(n)
		if l := got.List(); len(l) != 0 || len(got.Disabled) != 0 {
			t.Errorf("Apply(%q) on no features: on %v, disabled %v", n, l, got.Disabled)
		}
		if got.Int8Path() != ISAGeneric || got.FP32Path() != ISAGeneric || got.BF16Path() != ISANone {
			t.Errorf("Apply(%q) on no features: %v", n, got)
		}
	}
}

func TestApplyDoesNotAlias(t *testing.T) {
	in := all()
	in.Disabled = make([]string, 0, 16) // spare capacity invites aliasing
	f, _ := in.Apply("fma")
	g, _ := f.Apply("avxvnni")
	h, _ := f.Apply("amxbf16")
	if len(in.Disabled) != 0 || !slices.Equal(f.Disabled, []string{"fma"}) ||
		!slices.Equal(g.Disabled, []string{"fma", "avxvnni"}) || !slices.Equal(h.Disabled, []string{"fma", "amxbf16"}) {
		t.Errorf("Apply shares state between values: in=%v f=%v g=%v h=%v", in.Disabled, f.Disabled, g.Disabled, h.Disabled)
	}
}

func TestPaths(t *testing.T) {
	for _, tc := range []struct {
		disable          string
		int8, fp32, bf16 ISA
		granted          bool
	}{
		{"", ISAAMX, ISAAVX512, ISAAMXBF16, true},
		{"", ISAAVX512VNNI, ISAAVX512, ISAAVX512BF16, false},
		{"amx", ISAAVX512VNNI, ISAAVX512, ISAAVX512BF16, true},
		{"amxint8,avx512vl", ISAAVXVNNI, ISAAVX512, ISAAMXBF16, true},
		{"amx,avx512vnni,avxvnni", ISAAVX2, ISAAVX512, ISAAVX512BF16, true},
		{"amx,avx512", ISAAVXVNNI, ISAAVX2, ISANone, true},
		{"amx,avx2", ISAGeneric, ISAGeneric, ISANone, true},
		{"amx,avx512,fma", ISAAVXVNNI, ISAGeneric, ISANone, true},
	} {
		in := all()
		if !tc.granted {
			in.AMX = AMXPermission{AMXRefused, "test"}
		}
		f, err := in.Apply(tc.disable)
		if err != nil {
			t.Fatal(err)
		}
		if f.Int8Path() != tc.int8 || f.FP32Path() != tc.fp32 || f.BF16Path() != tc.bf16 {
			t.Errorf("Apply(%q) granted=%v: paths %s/%s/%s, want %s/%s/%s", tc.disable, tc.granted,
				f.Int8Path(), f.FP32Path(), f.BF16Path(), tc.int8, tc.fp32, tc.bf16)
		}
		s := f.String()
		for _, want := range []string{"int8: " + string(tc.int8), "fp32: " + string(tc.fp32), "bf16: " + string(tc.bf16), "amx: " + f.AMX.String()} {
			if !strings.Contains(s, want) {
				t.Errorf("String() = %q, missing %q", s, want)
			}
		}
	}
	f, _ := all().Apply("amx")
	if f.AMX.State != AMXNotRequested || !strings.Contains(f.AMX.Reason, "disabled") {
		t.Errorf("AMX after override = %v, want not requested: disabled", f.AMX)
	}
}

func TestHost(t *testing.T) {
	t.Logf("X86: %v", X86)
	t.Logf("signature: %s", X86.Signature())
	t.Logf("caches: L1d %d, L2 %d, L3 %d; cores %d logical, %d usable", X86.L1D, X86.L2, X86.L3, X86.LogicalCores, X86.NumCPU)
	if err := OverrideError(); err != nil {
		t.Logf("%s=%q: %v", EnvDisable, os.Getenv(EnvDisable), err)
	}
	if X86.AMX != Detected.AMX {
		t.Errorf("AMX permission differs: X86 %v, Detected %v", X86.AMX, Detected.AMX)
	}
	want, err := Detected.Apply(os.Getenv(EnvDisable))
	if (err != nil) != (OverrideError() != nil) || want.String() != X86.String() {
		t.Errorf("X86 = %v, want Detected.Apply(env) = %v", X86, want)
	}
	for _, fl := range flags {
		if *fl.field(&X86) && !*fl.field(&Detected) {
			t.Errorf("%s on in X86 but not detected", fl.name)
		}
	}
	amx := X86.AMX
	switch {
	case !Detected.AMXTile:
		if amx.State != AMXNotRequested || amx.Reason != "CPU lacks AMX-TILE" {
			t.Errorf("CPU lacks AMX-TILE, AMX = %v", amx)
		}
	case !X86.AMXTile:
		if amx.State != AMXNotRequested || !strings.Contains(amx.Reason, EnvDisable) {
			t.Errorf("AMX disabled by override, AMX = %v", amx)
		}
	case runtime.GOOS != "linux" || runtime.GOARCH != "amd64":
		if amx.State != AMXNotRequested {
			t.Errorf("not linux/amd64, AMX = %v", amx)
		}
	case amx.State == AMXNotRequested:
		t.Errorf("AMX-TILE on linux/amd64 but not requested: %v", amx)
	}
	if amx.State == AMXRefused && amx.Reason == "" {
		t.Errorf("refusal without reason: %v", amx)
	}
	// The raw request must agree with CPUID whatever the override says.
	if p := archRequestAMX(); p.Granted() && !Detected.AMXTile {
		t.Errorf("AMX granted on a CPU without AMX-TILE: %v", p)
	} else {
		t.Logf("direct AMX request: %v", p)
	}
}

func TestSignature(t *testing.T) {
	if a, b := X86.Signature(), X86.Signature(); a != b || a == "" {
		t.Fatalf("Signature unstable: %q vs %q", a, b)
	}
	if again := probe(); again.Signature() != Detected.Signature() {
		t.Errorf("re-probe signature %q, want %q", again.Signature(), Detected.Signature())
	}
	f := all()
	g, _ := f.Apply("avx512vnni")
	if f.Signature() == g.Signature() {
		t.Errorf("Signature ignores the live feature set: %q", f.Signature())
	}
}

func TestJSON(t *testing.T) {
	b, err := json.Marshal(X86)
	if err != nil {
		t.Fatal(err)
	}
	var back Features
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, X86) {
		t.Errorf("JSON round trip: %s gives %+v", b, back)
	}
	for _, key := range []string{`"avx512vnni":`, `"amx_permission":{"state":`, `"l2":`, `"brand":`} {
		if !strings.Contains(string(b), key) {
			t.Errorf("JSON %s lacks %s", b, key)
		}
	}
}
