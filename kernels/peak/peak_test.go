package peak

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/int8bert/int8bert/cpu"
	"github.com/int8bert/int8bert/kernels"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// dpbf16Ref is VDPBF16PS's arithmetic on one lane as the SDM states it:
// acc += a[1]*b[1], then += a[0]*b[0], each product exact (bf16 x bf16 fits
// float32), each sum rounded to float32 (round to nearest even), with
// denormal inputs and outputs flushed to zero.
func dpbf16Ref(acc float32, a, b [2]uint16) float32 {
	daz := func(x float32) float32 {
		if x != 0 && math.Abs(float64(x)) < 0x1p-126 {
			return float32(math.Copysign(0, float64(x)))
		}
		return x
	}
	acc = daz(acc)
	for _, i := range []int{1, 0} {
		acc = daz(acc + daz(kernels.FromBF16(a[i]))*daz(kernels.FromBF16(b[i])))
	}
	return acc
}

func TestDPBF16PSEncoding(t *testing.T) {
	if !haveAsm {
		t.Skip("built without assembly (purego/noasm/not amd64): no VDPBF16PS probe")
	}
	if !cpu.Detected.AVX512BF16 || !cpu.Detected.AVX512F {
		t.Skipf("CPU lacks AVX512-BF16 (%s): cannot execute VDPBF16PS", cpu.Detected)
	}
	r := rand.New(rand.NewPCG(11, 12))
	for _, fn := range []struct {
		name string
		f    func(*[16]float32, *[32]uint16, *[32]uint16)
	}{{"Z17+=Z9.Z30", dpbf16psHigh}, {"Z2+=Z5.Z6", dpbf16psLow}} {
		// Exact cases: small integers, every sum exact whatever the
		// order or rounding; then random values within 2 ulp.
		for trial := 0; trial < 200; trial++ {
			exact := trial < 50
			var acc, got [16]float32
			var a, b [32]uint16
			for i := range a {
				if exact {
					a[i] = kernels.ToBF16(float32(r.IntN(200) - 100))
					b[i] = kernels.ToBF16(float32(r.IntN(200) - 100))
				} else {
					a[i] = kernels.ToBF16(float32(r.NormFloat64() * math.Exp2(float64(r.IntN(20)-10))))
					b[i] = kernels.ToBF16(float32(r.NormFloat64()))
				}
			}
			for i := range acc {
				if exact {
					acc[i] = float32(r.IntN(2000) - 1000)
				} else {
					acc[i] = float32(r.NormFloat64())
				}
			}
			got = acc
			fn.f(&got, &a, &b)
			for i := range acc {
				want := dpbf16Ref(acc[i], [2]uint16{a[2*i], a[2*i+1]}, [2]uint16{b[2*i], b[2*i+1]})
				if exact && got[i] != want {
					t.Fatalf("%s lane %d: acc %v a %v,%v b %v,%v: got %v, want %v", fn.name, i, acc[i],
						kernels.FromBF16(a[2*i]), kernels.FromBF16(a[2*i+1]), kernels.FromBF16(b[2*i]), kernels.FromBF16(b[2*i+1]), got[i], want)
				}
				// Hardware may round once (fused) rather than twice:
				// allow 2 ulp of the largest term.
				mag := max(abs32(acc[i]), abs32(kernels.FromBF16(a[2*i])*kernels.FromBF16(b[2*i])), abs32(kernels.FromBF16(a[2*i+1])*kernels.FromBF16(b[2*i+1])))
				if d := abs32(got[i] - want); d > 2*mag*0x1p-23 {
					t.Fatalf("%s lane %d: got %v, want %v (diff %g)", fn.name, i, got[i], want, d)
				}
			}
		}
	}
}

func abs32(x float32) float32 { return float32(math.Abs(float64(x))) }

func TestMeasure(t *testing.T) {
	p := Measure(30 * time.Millisecond)
	t.Logf("peak (unpinned, short, under load of other tests: not a benchmark): %s", p)
	if !Available() {
		require.Equal(t, Figures{}, p, "no assembly or no AVX-512F")
		t.Skipf("peak not measurable here (assembly=%v, %s): Measure returns zeros", haveAsm, cpu.X86)
	}
	f := cpu.X86
	check := func(name string, on bool, v float64) {
		if on {
			assert.Positive(t, v, "%s: feature on", name)
		} else {
			assert.Zero(t, v, "%s: feature off", name)
		}
	}
	check("fp32", f.AVX512F || f.AVX2 && f.FMA, p.FP32GFLOPS)
	check("vnni", f.AVX512F && f.AVX512VNNI, p.VNNIGOPS)
	check("bf16", f.AVX512F && f.AVX512BF16, p.BF16GFLOPS)
	check("avx2 int8", f.AVX2, p.AVX2Int8GOPS)
	check("avx512 int16", f.AVX512F && f.AVX512BW, p.AVX512Int16GOPS)
	check("avx-vnni", f.AVX2 && f.AVXVNNI, p.AVXVNNIGOPS)
	switch {
	case p.VNNIGOPS > 0:
		assert.Equal(t, p.VNNIGOPS, p.Int8(), "Int8 is the VNNI figure")
	case p.AVXVNNIGOPS > 0:
		assert.Equal(t, p.AVXVNNIGOPS, p.Int8(), "no VNNI: Int8 is the AVX-VNNI figure")
	case p.AVX512Int16GOPS > 0:
		assert.Equal(t, p.AVX512Int16GOPS, p.Int8(), "no VNNI nor AVX-VNNI, AVX512BW: Int8 is the VPMADDWD zmm figure")
	default:
		assert.Equal(t, p.AVX2Int8GOPS, p.Int8(), "no VNNI nor AVX-VNNI: Int8 is the AVX2 figure")
	}
}

// TestFiguresInt8Order pins Int8's preference: VNNI zmm, else AVX-VNNI,
// else AVX2 VPMADDWD.
func TestFiguresInt8Order(t *testing.T) {
	assert.Equal(t, 4.0, Figures{VNNIGOPS: 4, AVXVNNIGOPS: 2, AVX2Int8GOPS: 1}.Int8())
	assert.Equal(t, 2.0, Figures{AVXVNNIGOPS: 2, AVX2Int8GOPS: 1}.Int8())
	assert.Equal(t, 1.0, Figures{AVX2Int8GOPS: 1}.Int8())
	assert.Contains(t, Figures{AVXVNNIGOPS: 2}.String(), "int8 avx-vnni 2.0 GOP/s")
}

func TestMeasureFeatureOff(t *testing.T) {
	saved := cpu.X86
	defer func() { cpu.X86 = saved }()
	cpu.X86, _ = saved.Apply("avx512bf16,avx512vnni")
	p := Measure(3 * time.Millisecond)
	assert.Zero(t, p.VNNIGOPS, "vnni disabled")
	assert.Zero(t, p.BF16GFLOPS, "bf16 disabled")
	// Without AVX-512F: the ymm FMA and VPMADDWD loops, where the CPU has
	// AVX2 (and FMA3); nothing without AVX2.
	cpu.X86, _ = saved.Apply("avx512f")
	p = Measure(3 * time.Millisecond)
	assert.Zero(t, p.VNNIGOPS, "avx512f disabled")
	assert.Zero(t, p.BF16GFLOPS, "avx512f disabled")
	assert.Equal(t, haveAsm && saved.AVX2 && saved.FMA, p.FP32GFLOPS > 0, "avx512f disabled: ymm FMA figure %v", p.FP32GFLOPS)
	assert.Equal(t, haveAsm && saved.AVX2, p.AVX2Int8GOPS > 0, "avx512f disabled: VPMADDWD figure %v", p.AVX2Int8GOPS)
	assert.Zero(t, p.AVX512Int16GOPS, "avx512f disabled: no VPMADDWD zmm figure")
	assert.Equal(t, haveAsm && saved.AVX2 && saved.AVXVNNI, p.AVXVNNIGOPS > 0, "avx512f disabled: AVX-VNNI figure %v", p.AVXVNNIGOPS)
	cpu.X86, _ = saved.Apply("avxvnni")
	assert.Zero(t, Measure(time.Millisecond).AVXVNNIGOPS, "avxvnni disabled")
	cpu.X86, _ = saved.Apply("avx512f,avx2")
	assert.Equal(t, Figures{}, Measure(time.Millisecond), "avx512f and avx2 disabled")
}

func TestRate(t *testing.T) {
	saved := cpu.X86
	defer func() { cpu.X86 = saved }()
	f := cpu.X86
	for _, c := range []struct {
		kind Kind
		on   bool
	}{{FP32, f.AVX512F || f.AVX2 && f.FMA}, {VNNI, f.AVX512F && f.AVX512VNNI}, {BF16, f.AVX512F && f.AVX512BF16},
		{AVX2Int8, f.AVX2}, {AVX512Int16, f.AVX512F && f.AVX512BW}, {AVXVNNI, f.AVX2 && f.AVXVNNI}, {Int8, f.AVX2 || f.AVX512F && f.AVX512VNNI}} {
		r := Rate(c.kind, 5*time.Millisecond)
		if Available() && c.on {
			assert.Positive(t, r, "kind %d", c.kind)
		} else {
			assert.Zero(t, r, "kind %d: not measurable here (assembly=%v, %s)", c.kind, haveAsm, cpu.X86)
		}
	}
	cpu.X86, _ = saved.Apply("avx512vnni")
	assert.Zero(t, Rate(VNNI, time.Millisecond), "vnni disabled")
	assert.Equal(t, haveAsm && saved.AVX2, Rate(Int8, time.Millisecond) > 0, "vnni disabled: Int8 is the AVX-VNNI or AVX2 loop where AVX2 is")
	cpu.X86, _ = saved.Apply("avxvnni")
	assert.Zero(t, Rate(AVXVNNI, time.Millisecond), "avxvnni disabled")
	assert.Zero(t, Rate(Kind(-1), time.Millisecond), "kind -1")
	assert.Zero(t, Rate(Kind(9), time.Millisecond), "unknown kind")
}

// BenchmarkMeasure reports the three peaks of the calling thread (locked);
// run it pinned: taskset -c 1 go test -run - -bench Measure ./kernels/peak.
func BenchmarkMeasure(b *testing.B) {
	if !Available() {
		b.Skipf("peak not measurable here (assembly=%v, %s)", haveAsm, cpu.X86)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var p Figures
	for b.Loop() {
		q := Measure(300 * time.Millisecond)
		p.FP32GFLOPS = max(p.FP32GFLOPS, q.FP32GFLOPS)
		p.VNNIGOPS = max(p.VNNIGOPS, q.VNNIGOPS)
		p.BF16GFLOPS = max(p.BF16GFLOPS, q.BF16GFLOPS)
	}
	b.ReportMetric(p.FP32GFLOPS, "fp32-GFLOP/s")
	b.ReportMetric(p.VNNIGOPS, "vnni-GOP/s")
	b.ReportMetric(p.BF16GFLOPS, "bf16-GFLOP/s")
}

func TestRun(t *testing.T) {
	saved := cpu.X86
	defer func() { cpu.X86 = saved }()
	f := cpu.X86
	if Available() && (f.AVX512F || f.AVX2 && f.FMA) {
		done := Run(FP32, 1e5)
		require.Positive(t, done)
		assert.InDelta(t, 1e5, done, 24*32, "FP32: about the ops asked for, whole iterations")
		assert.Positive(t, Run(FP32, 0), "FP32: at least one iteration")
	} else {
		assert.Zero(t, Run(FP32, 1e5))
	}
	assert.Zero(t, Run(Kind(-1), 1e5))
	assert.Zero(t, Run(Kind(9), 1e5))
	cpu.X86, _ = saved.Apply("avx512vnni")
	assert.Zero(t, Run(VNNI, 1e5), "vnni disabled")
}

// TestFiguresJSON pins the JSON names of the figures, which bench gemm
// -json and info -json print.
func TestFiguresJSON(t *testing.T) {
	b, err := json.Marshal(Figures{FP32GFLOPS: 1, VNNIGOPS: 2, BF16GFLOPS: 3, AVX2Int8GOPS: 4, AVX512Int16GOPS: 5, AVXVNNIGOPS: 6})
	require.NoError(t, err)
	assert.JSONEq(t, `{"fp32_gflops":1,"vnni_gops":2,"bf16_gflops":3,"avx2_int8_gops":4,"avx512_int16_gops":5,"avxvnni_gops":6}`, string(b))
}

// TestSchemes checks that every scheme loop this CPU runs gives a rate,
// the int16 one a ratio of 1, and that disabling AVX-512 leaves the ymm
// lines only.
func TestSchemes(t *testing.T) {
	if !Available() {
		t.Skipf("TestSchemes: peak not measurable here (assembly=%v, %s)", haveAsm, cpu.X86)
	}
	saved := cpu.X86
	defer func() { cpu.X86 = saved }()
	s := Schemes(16 * time.Millisecond)
	want := 0
	if saved.AVX2 {
		want += 4
	}
	if saved.AVX512F && saved.AVX512BW {
		want += 4
	}
	require.Len(t, s, want)
	for _, r := range s {
		assert.Positive(t, r.GOPS, "%s %d", r.Scheme, r.Bits)
		assert.Positive(t, r.VsInt16, "%s %d", r.Scheme, r.Bits)
		if r.Scheme == "int16" {
			assert.Equal(t, 1.0, r.VsInt16)
		}
	}
	cpu.X86, _ = saved.Apply("avx512f")
	for _, r := range Schemes(8 * time.Millisecond) {
		assert.Equal(t, 256, r.Bits, "avx512f disabled: ymm only")
	}
}

// TestSchemesNoAsm: without assembly there is nothing to measure.
func TestSchemesNoAsm(t *testing.T) {
	if haveAsm {
		t.Skip("TestSchemesNoAsm: this build has the assembly loops")
	}
	assert.Nil(t, Schemes(time.Millisecond))
}
