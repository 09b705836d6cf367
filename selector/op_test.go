package selector

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/int8bert/int8bert/cpu"
	"github.com/int8bert/int8bert/kernels"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestChoicesRecord checks that Choices records every key chosen, in key
// order, with the winner's ISA, whichever operation made it.
func TestChoicesRecord(t *testing.T) {
	var w warnings
	s := newSelector(t, testOptions(t, &w))
	assert.Empty(t, s.Choices())
	keys := []Key{
		mustKey(t, 3, 16, 32, "zp+scale+colscale+bias/f32", 1),
		F32Key(3, 16, 32, &kernels.Epilogue{Bias: make([]float32, 32)}, 1),
		F32KernelKey(3, 16, 20, 1),
	}
	for _, k := range keys {
		_, err := s.Choose(k)
		require.NoError(t, err, k.String())
	}
	got := s.Choices()
	require.Len(t, got, len(keys))
	var names []string
	for _, ch := range got {
		names = append(names, ch.Key)
		assert.NotEmpty(t, ch.ISA, ch.Key)
		if ch.Backend == BackendNative {
			assert.NotEqual(t, cpu.ISA(OneDNN), ch.ISA, ch.Key)
		}
	}
	assert.True(t, slices.IsSorted(names), "%v", names)
	for _, k := range keys {
		assert.Contains(t, names, k.String())
	}
}

// TestKernelF32 checks the f32-kernel operation: its keys are bucketed in
// every size, it has no oneDNN candidate, its kernel is one of
// kernels.F32Kernels() this CPU runs, and forcing holds for it.
func TestKernelF32(t *testing.T) {
	key := F32KernelKey(37, 64, 37, 0)
	assert.Equal(t, Key{Op: OpF32Kernel, M: 64, K: 64, N: 64, Epilogue: EpilogueKind{Out: F32}, Threads: 1}, key)
	require.NoError(t, key.Validate())
	bad := key
	bad.N = 37
	require.ErrorIs(t, bad.Validate(), ErrKey)
	bad = key
	bad.Epilogue.Bias = true
	require.ErrorIs(t, bad.Validate(), ErrKey)

	var w warnings
	s := newSelector(t, testOptions(t, &w))
	assert.NotContains(t, s.CandidatesOf(OpF32Kernel), OneDNN)
	k, err := s.KernelF32(37, 64, 37, 1)
	require.NoError(t, err)
	assert.Contains(t, kernels.F32Kernels(), k)
	assert.True(t, k.Available(cpu.X86))

	o := testOptions(t, &w)
	o.Force = string(cpu.ISAGeneric)
	g := newSelector(t, o)
	k, err = g.KernelF32(37, 64, 37, 1)
	require.NoError(t, err)
	assert.Same(t, kernels.GenericF32, k)
}

// TestKernelBF16 checks the bf16-kernel operation as TestKernelF32 does
// f32-kernel's, and that forcing avx512-bf16 holds for it where the CPU
// has AVX512-BF16.
func TestKernelBF16(t *testing.T) {
	key := BF16KernelKey(37, 64, 300, 0)
	assert.Equal(t, Key{Op: OpBF16Kernel, M: 64, K: 64, N: 512, Epilogue: EpilogueKind{Out: F32}, Threads: 1}, key)
	require.NoError(t, key.Validate())
	bad := key
	bad.K = 37
	require.ErrorIs(t, bad.Validate(), ErrKey)
	bad = key
	bad.Epilogue.Act = kernels.ActGELU
	require.ErrorIs(t, bad.Validate(), ErrKey)

	var w warnings
	s := newSelector(t, testOptions(t, &w))
	assert.NotContains(t, s.CandidatesOf(OpBF16Kernel), OneDNN)
	k, err := s.KernelBF16(37, 64, 300, 1)
	require.NoError(t, err)
	assert.Contains(t, kernels.BF16Kernels(), k)
	assert.True(t, k.Available(cpu.X86))

	o := testOptions(t, &w)
	o.Force = string(cpu.ISAGeneric)
	g := newSelector(t, o)
	k, err = g.KernelBF16(37, 64, 300, 1)
	require.NoError(t, err)
	assert.Same(t, kernels.GenericBF16, k)

	if !cpu.X86.AVX512BF16 {
		t.Logf("CPU lacks AVX512-BF16 (%s): forcing avx512-bf16 on bf16-kernel not checked", cpu.X86)
		return
	}
	o = testOptions(t, &w)
	o.Force = string(cpu.ISAAVX512BF16)
	f := newSelector(t, o)
	k, err = f.KernelBF16(37, 64, 300, 1)
	require.NoError(t, err)
	assert.Equal(t, cpu.ISAAVX512BF16, k.ISA)
}

// TestLinearRunRefusesWhatItOwns checks that a call may leave N and K to
// the Linear or repeat them, but not contradict them nor bring its own B,
// and that a nil call is an error.
func TestLinearRunRefusesWhatItOwns(t *testing.T) {
	var w warnings
	s := newSelector(t, testOptions(t, &w))
	const m, k, n = 2, 8, 16
	l, err := s.NewLinearF32(n, k, make([]float32, n*k), k)
	require.NoError(t, err)
	defer l.Close()
	assert.Equal(t, OpF32, l.Op())
	assert.Nil(t, l.ColSum())
	a, c := make([]float32, m*k), make([]float32, m*n)
	require.NoError(t, l.Run(&kernels.GEMMF32{M: m, A: a, Lda: k, C: c, Ldc: n}))
	require.NoError(t, l.Run(&kernels.GEMMF32{M: m, N: n, K: k, A: a, Lda: k, C: c, Ldc: n}))
	for name, g := range map[string]*kernels.GEMMF32{
		"other n": {M: m, N: n + 1, A: a, Lda: k, C: c, Ldc: n},
		"other k": {M: m, K: k - 1, A: a, Lda: k, C: c, Ldc: n},
		"own b":   {M: m, A: a, Lda: k, B: &kernels.PackedF32{}, C: c, Ldc: n},
		"nil":     nil,
	} {
		assert.ErrorIs(t, l.Run(g), kernels.ErrShape, name)
	}
	_, err = l.Key(&kernels.GEMMF32{A: a, Lda: k, C: c, Ldc: n})
	assert.ErrorIs(t, err, ErrKey, "a call of no rows has no key")

	q, err := s.NewLinear(n, k, make([]int8, n*k), k)
	require.NoError(t, err)
	defer q.Close()
	assert.Equal(t, OpU8S8, q.Op())
	assert.Len(t, q.ColSum(), n)
	assert.ErrorIs(t, q.Run(&kernels.GEMMU8S8{M: m, A: make([]uint8, m*k), Lda: k, B: &kernels.PackedS8{}, Out: kernels.Out{S32: make([]int32, m*n), Ldc: n}}), kernels.ErrShape)
	assert.ErrorIs(t, q.Run(nil), kernels.ErrShape)
}

// TestChoiceJSONNamesTheISA checks the cache layout of a choice: its
// kernel's instruction set under "isa" (since CacheFormat 2), and no
// field for what is not saved (FromCache, Default, the fallback).
func TestChoiceJSONNamesTheISA(t *testing.T) {
	b, err := json.Marshal(Choice{Key: "k", Kernel: "gemmAVX2_2x16", Backend: BackendNative, ISA: cpu.ISAAVX2})
	require.NoError(t, err)
	assert.Contains(t, string(b), `"isa":"avx2"`)
	assert.NotContains(t, string(b), "family")
	assert.NotContains(t, string(b), "default")
	assert.NotContains(t, string(b), "fallback")
	assert.GreaterOrEqual(t, CacheFormat, 3)
}
