//go:build !(amd64 && gc && !purego && !noasm)

package kernels

// Without assembly there is no AVX512-BF16 tile driver
// (gemm_bf16_avx512_amd64.s): BF16Kernels lists GenericBF16 only.
