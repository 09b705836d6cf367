//go:build !(amd64 && gc && !purego && !noasm)

package kernels

// Without assembly there is no AVX2 FP32 tile driver (gemm_f32_avx2_amd64.s):
// F32Kernels lists GenericF32 only.
