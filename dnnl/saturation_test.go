//go:build cgo && !nodnnl

package dnnl_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/int8bert/int8bert/cpu"
	"github.com/int8bert/int8bert/dnnl"
	"github.com/int8bert/int8bert/kernels"
)

// envMaxISA caps oneDNN in the child processes of TestMaxISA. oneDNN takes
// a cap only before its first primitive, so TestMain applies it
// (dnnl.SetMaxISA) before any test runs.
const envMaxISA = "INT8BERT_TEST_MAX_ISA"

func TestMain(m *testing.M) {
	if s := os.Getenv(envMaxISA); s != "" {
		isa, err := dnnl.ParseISA(s)
		if err == nil {
			err = dnnl.SetMaxISA(isa)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s=%s: %v\n", envMaxISA, s, err)
			os.Exit(2)
		}
	}
	os.Exit(m.Run())
}

// tier is oneDNN's effective ISA in this test process (after
// DNNL_MAX_CPU_ISA, or the cap of a TestMaxISA child).
func tier(t testing.TB) dnnl.Info {
	t.Helper()
	info, err := dnnl.GetInfo()
	if err != nil {
		t.Fatalf("oneDNN is built in but GetInfo fails: %v", err)
	}
	return info
}

// fit makes an INT8 cfg acceptable where oneDNN's INT8 could saturate
// (dnnl.ISA.ExactInt8 false) by declaring narrow ranges: both for an s8
// source, and for a u8 one Weights7Bit on even seeds and Src7Bit on odd
// ones, so that the tests that use it check each declaration there;
// makeProblem's data then keeps to them. With VNNI it leaves cfg full
// range. TestSaturation checks the refusal itself.
func fit(t testing.TB, cfg *dnnl.MatMulConfig, seed uint64) {
	t.Helper()
	if cfg.Src != dnnl.U8 && cfg.Src != dnnl.S8 || tier(t).ISA.ExactInt8() {
		return
	}
	switch {
	case cfg.Src == dnnl.S8:
		cfg.Src7Bit, cfg.Weights7Bit = true, true
	case seed%2 == 1:
		cfg.Src7Bit = true
	default:
		cfg.Weights7Bit = true
	}
}

// skipUnimplementedBF16 skips, saying why, a bf16 matmul that oneDNN
// refused as unimplemented at an effective ISA below avx512_core, where
// oneDNN 2.x has no bf16 matmul (3.x adds avx2_vnni_2, which this binding
// reports as avx2_vnni and which then runs it). Any other error is left to
// the caller to fail on, so nothing this oneDNN runs is skipped.
func skipUnimplementedBF16(t testing.TB, cfg dnnl.MatMulConfig, err error) {
	t.Helper()
	info := tier(t)
	if cfg.Src == dnnl.BF16 && errors.Is(err, dnnl.ErrUnimplemented) && info.ISA < dnnl.ISAAVX512Core {
		t.Skipf("%v x %v -> %v not checked: oneDNN %s has no bf16 matmul at its effective ISA %s, below avx512_core "+
			"(DNNL_MAX_CPU_ISA=%q, %s=%q; this CPU's own bf16 path: %s): %v",
			cfg.Src, cfg.Weights, cfg.Dst, info.Version, info.ISA, os.Getenv("DNNL_MAX_CPU_ISA"),
			envMaxISA, os.Getenv(envMaxISA), cpu.X86.BF16Path(), err)
	}
}

// skipWithoutBF16 probes a small matmul of the combination tc and skips,
// with skipUnimplementedBF16's reason, a bf16 one that this oneDNN does
// not implement: once per combination, not once per shape.
func skipWithoutBF16(t *testing.T, eng *dnnl.Engine, tc typeCombo) {
	t.Helper()
	if tc.src != dnnl.BF16 {
		return
	}
	cfg := dnnl.MatMulConfig{M: 1, K: 4, N: 4, Src: tc.src, Weights: tc.wei, Dst: tc.dst}
	mm, err := eng.NewMatMul(cfg)
	if err != nil {
		skipUnimplementedBF16(t, cfg, err)
		t.Fatalf("%v: %v", tc, err)
	}
	mm.Close()
}

// saturating fills an m x k source and an n x k weight with the extremes
// of their ranges (the declared ones, else the full ones), every other row
// and column, and random values of the same ranges elsewhere: every pair
// of extreme products overflows int16 unless a range is declared narrow.
func saturating(cfg dnnl.MatMulConfig, m int, seed uint64) (src any, w []int8, want []int32) {
	r := rng(seed)
	k, n := cfg.K, cfg.N
	wlo, whi := -128, 127
	if cfg.Weights7Bit {
		wlo, whi = -64, 63
	}
	w = make([]int8, n*k)
	for j := 0; j < n; j++ {
		for q := 0; q < k; q++ {
			v := wlo + r.IntN(whi-wlo+1)
			switch j % 4 {
			case 0:
				v = whi
			case 2:
				v = wlo
			}
			w[j*k+q] = int8(v)
		}
	}
	want = make([]int32, m*n)
	if cfg.Src == dnnl.U8 {
		hi := 255
		if cfg.Src7Bit {
			hi = 127
		}
		a := make([]uint8, m*k)
		for i := range a {
			a[i] = uint8(r.IntN(hi + 1))
			if (i/k)%2 == 0 {
				a[i] = uint8(hi)
			}
		}
		if err := kernels.GemmU8S8S32Ref(m, n, k, a, k, w, k, want, n); err != nil {
			panic(err)
		}
		return a, w, want
	}
	lo, hi := -128, 127
	if cfg.Src7Bit {
		lo, hi = -64, 63
	}
	a := make([]int8, m*k)
	for i := range a {
		a[i] = int8(lo + r.IntN(hi-lo+1))
		switch (i / k) % 4 {
		case 0:
			// oneDNN runs s8 x s8 as (s8 + 128) x s8 or s8 x (s8 + 128):
			// the extremes of both.
			a[i] = int8(hi)
		case 2:
			a[i] = int8(lo)
		}
	}
	if err := kernels.GemmS8S8S32Ref(m, n, k, a, k, w, k, want, n); err != nil {
		panic(err)
	}
	return a, w, want
}

// TestSaturation holds NewMatMul to the rule of docs/DESIGN.md section 5.1
// at this process's oneDNN tier, on data that saturates VPMADDUBSW's int16
// pair sums: without a declaration, a u8 x s8 or s8 x s8 matmul is exact
// where oneDNN has VNNI and refused with ErrSaturation where it has not;
// with Src7Bit (u8 sources) or Weights7Bit, and data at the extremes of
// the declared range, it is exact everywhere. TestMaxISA runs it again
// with oneDNN capped at the tiers below this CPU's.
func TestSaturation(t *testing.T) {
	eng := engine(t)
	info := tier(t)
	t.Logf("oneDNN %s, effective ISA %s (exact INT8 on full-range data: %v; cpu: %s)", info.Version, info.ISA, info.ISA.ExactInt8(), cpu.X86)
	type decl struct {
		name                 string
		src7, weights7, safe bool
	}
	// The shapes: a run-time M, and M or N of 1, where oneDNN takes its
	// matrix-vector kernels (which swap the operands' roles).
	shapes := []struct{ m, n, k int }{{dnnl.RuntimeM, 48, 64}, {1, 48, 64}, {17, 1, 67}, {1, 1, 67}, {17, 33, 67}}
	seed := uint64(3000)
	for _, src := range []dnnl.DataType{dnnl.U8, dnnl.S8} {
		decls := []decl{{"full range", false, false, false},
			{"Weights7Bit", false, true, src == dnnl.U8}, {"Src7Bit", true, false, src == dnnl.U8},
			{"Src7Bit+Weights7Bit", true, true, true}}
		for _, d := range decls {
			for _, dst := range []dnnl.DataType{dnnl.S32, dnnl.F32} {
				for _, sh := range shapes {
					seed++
					m := sh.m
					cfg := dnnl.MatMulConfig{M: m, K: sh.k, N: sh.n, Src: src, Weights: dnnl.S8, Dst: dst,
						Src7Bit: d.src7, Weights7Bit: d.weights7}
					rows := m
					if m == dnnl.RuntimeM {
						rows = 6
					}
					name := fmt.Sprintf("%vx%v->%v %s m=%d n=%d k=%d", src, dnnl.S8, dst, d.name, m, sh.n, sh.k)
					mm, err := eng.NewMatMul(cfg)
					if !d.safe && !info.ISA.ExactInt8() {
						if assert.Error(t, err, "%s: oneDNN %s could saturate, want ErrSaturation", name, info.ISA) {
							assert.ErrorIs(t, err, dnnl.ErrSaturation, name)
							assert.ErrorIs(t, err, dnnl.ErrUnimplemented, name)
							assert.Contains(t, err.Error(), info.ISA.String(), "%s: the error names the ISA", name)
							assert.Contains(t, err.Error(), "Weights7Bit", "%s: the error says what to declare", name)
						} else {
							mm.Close()
						}
						continue
					}
					require.NoError(t, err, name)
					a, w, want := saturating(cfg, rows, seed)
					pw, err := mm.PackWeights(w, nil, 1)
					require.NoError(t, err, name)
					var out any = make([]int32, rows*cfg.N)
					if dst == dnnl.F32 {
						out = make([]float32, rows*cfg.N) // |sums| < 2^22: exact in f32
					}
					require.NoError(t, mm.Execute(pw, &dnnl.Args{M: rows, Src: a, Dst: out, Threads: 1}), name)
					bad, first := 0, ""
					for i, v := range want {
						var g int64
						if o, ok := out.([]int32); ok {
							g = int64(o[i])
						} else {
							g = int64(out.([]float32)[i])
						}
						if g != int64(v) {
							if bad == 0 {
								first = fmt.Sprintf("[%d,%d] = %d, want %d", i/cfg.N, i%cfg.N, g, v)
							}
							bad++
						}
					}
					assert.Zero(t, bad, "%s on oneDNN %s (%s): %d of %d sums differ, first %s", name, info.ISA, mm.Impl(), bad, len(want), first)
					pw.Close()
					mm.Close()
				}
			}
		}
	}
}

// TestRangeDeclarations: a declaration is a promise about the data, held
// on every tier: Validate refuses one that does not fit the types,
// PackWeights a weight outside [-64, 63] under Weights7Bit, Execute a
// source value outside [0, 127] (u8) or [-64, 63] (s8) under Src7Bit (in
// the 8-byte body and the tail of the scan alike), each with
// ErrInvalidArgument.
func TestRangeDeclarations(t *testing.T) {
	eng := engine(t)
	for name, cfg := range map[string]dnnl.MatMulConfig{
		"Src7Bit on f32":          {M: 2, K: 4, N: 4, Src: dnnl.F32, Weights: dnnl.F32, Dst: dnnl.F32, Src7Bit: true},
		"Weights7Bit on f32":      {M: 2, K: 4, N: 4, Src: dnnl.F32, Weights: dnnl.F32, Dst: dnnl.F32, Weights7Bit: true},
		"Weights7Bit on bf16":     {M: 2, K: 4, N: 4, Src: dnnl.BF16, Weights: dnnl.BF16, Dst: dnnl.F32, Weights7Bit: true},
		"Src7Bit with u8 weights": {M: 2, K: 4, N: 4, Src: dnnl.U8, Weights: dnnl.U8, Dst: dnnl.S32, Src7Bit: true},
	} {
		err := cfg.Validate()
		assert.ErrorIs(t, err, dnnl.ErrInvalidArgument, name)
		mm, err := eng.NewMatMul(cfg)
		if !assert.ErrorIs(t, err, dnnl.ErrInvalidArgument, "NewMatMul: %s", name) {
			mm.Close()
		}
	}

	const k, n = 21, 5
	wcfg := dnnl.MatMulConfig{M: dnnl.RuntimeM, K: k, N: n, Src: dnnl.U8, Weights: dnnl.S8, Dst: dnnl.S32, Weights7Bit: true}
	mm, err := eng.NewMatMul(wcfg)
	require.NoError(t, err)
	defer mm.Close()
	for _, bad := range []int8{64, -65, 127, -128} {
		w := make([]int8, n*k)
		w[len(w)-1] = bad
		pw, err := mm.PackWeights(w, nil, 1)
		if assert.ErrorIs(t, err, dnnl.ErrInvalidArgument, "weight %d under Weights7Bit", bad) {
			assert.Contains(t, err.Error(), "Weights7Bit")
		} else {
			pw.Close()
		}
	}
	w := make([]int8, n*k)
	w[0], w[1] = 63, -64
	pw, err := mm.PackWeights(w, nil, 1)
	require.NoError(t, err, "weights 63 and -64 under Weights7Bit")
	pw.Close()
	// Full-range weights packed by a primitive that declares nothing about
	// them (Src7Bit) do not serve one that declares Weights7Bit.
	wide, err := eng.NewMatMul(dnnl.MatMulConfig{M: dnnl.RuntimeM, K: k, N: n, Src: dnnl.U8, Weights: dnnl.S8, Dst: dnnl.S32, Src7Bit: true})
	require.NoError(t, err)
	defer wide.Close()
	w[2] = 127
	ww, err := wide.PackWeights(w, nil, 1)
	require.NoError(t, err)
	defer ww.Close()
	assert.False(t, mm.Accepts(ww), "Weights7Bit primitive accepts weights with a 127")
	err = mm.Execute(ww, &dnnl.Args{M: 1, Src: make([]uint8, k), Dst: make([]int32, n)})
	if assert.ErrorIs(t, err, dnnl.ErrInvalidArgument, "full-range weights under Weights7Bit") {
		assert.Contains(t, err.Error(), "Weights7Bit")
	}
	w[2] = 0
	nw, err := wide.PackWeights(w, nil, 1)
	require.NoError(t, err)
	defer nw.Close()
	if mm.Accepts(nw) != wide.Accepts(nw) {
		t.Errorf("weights in [-64, 63]: accepted by the Weights7Bit primitive %v, by the one that packed them %v", mm.Accepts(nw), wide.Accepts(nw))
	}

	scfg := dnnl.MatMulConfig{M: dnnl.RuntimeM, K: k, N: n, Src: dnnl.U8, Weights: dnnl.S8, Dst: dnnl.S32, Src7Bit: true}
	sm, err := eng.NewMatMul(scfg)
	require.NoError(t, err)
	defer sm.Close()
	// Full-range weights are fine under Src7Bit.
	w = make([]int8, n*k)
	for i := range w {
		w[i] = int8(i*37 - 128)
	}
	sw, err := sm.PackWeights(w, nil, 1)
	require.NoError(t, err)
	defer sw.Close()
	const m = 3
	for _, at := range []int{0, 7, 8, 40, m*k - 1} {
		a := make([]uint8, m*k+5) // longer than m*k: only m*k is read
		for i := range a {
			a[i] = 127
		}
		a[m*k+2] = 255 // beyond the call's rows: not its business
		a[at] = 128
		err := sm.Execute(sw, &dnnl.Args{M: m, Src: a, Dst: make([]int32, m*n)})
		if assert.ErrorIs(t, err, dnnl.ErrInvalidArgument, "src value 128 at %d under Src7Bit", at) {
			assert.Contains(t, err.Error(), "Src7Bit")
			assert.Contains(t, err.Error(), fmt.Sprintf("row %d, column %d", at/k, at%k))
		}
		a[at] = 127
		got := make([]int32, m*n)
		require.NoError(t, sm.Execute(sw, &dnnl.Args{M: m, Src: a, Dst: got}), "src in [0, 127] under Src7Bit")
		want := make([]int32, m*n)
		require.NoError(t, kernels.GemmU8S8S32Ref(m, n, k, a, k, w, k, want, n))
		assert.Equal(t, want, got)
	}

	// An s8 source under Src7Bit (with Weights7Bit, as s8 x s8 needs below
	// VNNI): [-64, 63].
	s8cfg := dnnl.MatMulConfig{M: dnnl.RuntimeM, K: k, N: n, Src: dnnl.S8, Weights: dnnl.S8, Dst: dnnl.S32, Src7Bit: true, Weights7Bit: true}
	s8m, err := eng.NewMatMul(s8cfg)
	require.NoError(t, err)
	defer s8m.Close()
	for i := range w {
		w[i] = int8(i%128 - 64)
	}
	s8w, err := s8m.PackWeights(w, nil, 1)
	require.NoError(t, err)
	defer s8w.Close()
	for _, bad := range []int8{64, -65, 127, -128} {
		for _, at := range []int{0, 9, m*k - 1} {
			a := make([]int8, m*k)
			for i := range a {
				a[i] = int8(63 - i%128)
			}
			a[at] = bad
			err := s8m.Execute(s8w, &dnnl.Args{M: m, Src: a, Dst: make([]int32, m*n)})
			if assert.ErrorIs(t, err, dnnl.ErrInvalidArgument, "s8 src value %d at %d under Src7Bit", bad, at) {
				assert.Contains(t, err.Error(), "[-64, 63]")
			}
		}
	}
	a := make([]int8, m*k)
	for i := range a {
		a[i] = int8(63 - i%128)
	}
	got := make([]int32, m*n)
	require.NoError(t, s8m.Execute(s8w, &dnnl.Args{M: m, Src: a, Dst: got}), "s8 src in [-64, 63] under Src7Bit")
	want := make([]int32, m*n)
	require.NoError(t, kernels.GemmS8S8S32Ref(m, n, k, a, k, w, k, want, n))
	assert.Equal(t, want, got)
}

// TestMaxISA runs the tests that depend on oneDNN's tier again in child
// processes with oneDNN capped (TestMain applies the cap): avx2 (AMD Zen
// 2/3: the refusal and the declared ranges), avx512_core (AVX-512 without
// VNNI, Skylake-SP: the same) and avx2_vnni (Sierra Forest, Zen 5 with
// AVX-512 off: exact without a declaration). A cap this CPU cannot reach
// (the effective ISA is below it) is a skip that names both. The
// children do not inherit DNNL_MAX_CPU_ISA.
func TestMaxISA(t *testing.T) {
	if isa := os.Getenv(envMaxISA); isa != "" {
		want, err := dnnl.ParseISA(isa)
		require.NoError(t, err)
		info := tier(t)
		if info.ISA > want {
			t.Fatalf("effective ISA %v above the cap %v", info.ISA, want)
		}
		// The parent reads this line.
		t.Logf("capped at %v: effective %v", want, info.ISA)
		cfg := dnnl.MatMulConfig{M: 3, K: 8, N: 8, Src: dnnl.F32, Weights: dnnl.F32, Dst: dnnl.F32}
		makeProblem(t, cfg, 3, 1).run(t, engine(t))
		if err := dnnl.SetMaxISA(dnnl.ISAAll); err == nil {
			t.Error("SetMaxISA after primitives were created succeeded; oneDNN should refuse")
		}
		return
	}
	exe, err := os.Executable()
	require.NoError(t, err)
	// -short leaves TestShapes out of the children: TestPostOps covers every
	// type combination and odd K there.
	tests := "^(TestMaxISA|TestSaturation|TestRangeDeclarations|TestShapes|TestPostOps|TestWeightsSharedAcrossM|TestRequantRounding|TestRuntimeMWithRowOperands)$"
	if testing.Short() {
		tests = strings.Replace(tests, "|TestShapes", "", 1)
	}
	for _, isa := range []dnnl.ISA{dnnl.ISAAVX2, dnnl.ISAAVX512Core, dnnl.ISAAVX2VNNI} {
		t.Run(isa.String(), func(t *testing.T) {
			args := []string{"-test.run=" + tests, "-test.v", "-test.count=1"}
			if testing.Short() {
				args = append(args, "-test.short")
			}
			cmd := exec.Command(exe, args...)
			// The child's cap is its own: not the one this process may run under.
			var env []string
			for _, e := range os.Environ() {
				if !strings.HasPrefix(e, "DNNL_MAX_CPU_ISA=") {
					env = append(env, e)
				}
			}
			cmd.Env = append(env, envMaxISA+"="+isa.String(), "OMP_NUM_THREADS=1")
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "child capped at %s:\n%s", isa, out)
			effective := ""
			for _, line := range strings.Split(string(out), "\n") {
				if _, after, ok := strings.Cut(line, "capped at "+isa.String()+": effective "); ok {
					effective = strings.TrimSpace(after)
				}
				if strings.Contains(line, "--- SKIP") || strings.Contains(line, "not checked") {
					t.Log(strings.TrimSpace(line))
				}
			}
			require.NotEmpty(t, effective, "the child did not report its tier:\n%s", out)
			t.Logf("capped at %s: effective %s", isa, effective)
			if effective != isa.String() {
				t.Skipf("the %s tier is not checked on this CPU: capped at %s, oneDNN's effective ISA is %s (cpu: %s); the child ran at %s",
					isa, isa, effective, cpu.X86, effective)
			}
		})
	}
}
