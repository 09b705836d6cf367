// Package kernels holds int8bert's native GEMM and element-wise kernels. This
// file set is the reference: plain Go GEMMs (u8 x s8 -> s32, s8 x s8 -> s32,
// f32) and the epilogue of the W8A8 design (scales, compensation, bias, GELU,
// residual, requantize). They are the oracle every faster kernel, and oneDNN,
// is tested against, so they favour clarity over speed.
//
// Conventions: row-major matrices; M tokens, K input features, N output
// features. A is [M][lda], B is a weight in PyTorch Linear layout [N][ldb]
// (row j holds output feature j), C is [M][ldc].
//
// kernels must not import dnnl, selector or any model package.
package kernels
