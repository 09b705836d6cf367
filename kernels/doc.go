// Package kernels holds int8bert's native GEMM and element-wise kernels: the
// u8 x s8 -> s32 GEMM with the W8A8 epilogue (scales, compensation, bias,
// GELU, residual, requantize), the FP32 GEMM with the same epilogues, and the
// element-wise steps of the encoder (LayerNorm, softmax, GELU, quantize,
// dequantize), each in plain Go and in assembly for the ISAs that have it.
//
// Conventions: row-major matrices; M tokens, K input features, N output
// features. A is [M][lda], B is a weight in PyTorch Linear layout [N][ldb]
// (row j holds output feature j), C is [M][ldc].
//
// # Terms
//
// A reference is plain, obviously correct Go that defines what an
// operation computes, written for clarity rather than speed and never on
// the hot path: GemmU8S8S32Ref, GemmS8S8S32Ref and GemmF32Ref with
// Epilogue.Value (ref.go). Every kernel, and oneDNN, is tested against the
// references.
//
// A generic kernel is a kernel in portable Go that runs on every CPU and
// build, registered with ISA "generic" so that the selector can always fall
// back to it (and INT8BERT_KERNEL=generic forces it): GenericU8S8 (gemm.go),
// GenericF32 (gemm_f32.go), and the element-wise path "generic"
// (eltwise_generic.go). The u8 x s8 sums are exact, so every u8 x s8 kernel
// must equal GenericU8S8 bit for bit (kernelstest checks it).
//
// A twin is the Go function that computes, bit for bit, what one assembly
// function computes: the same arguments and the same float32 operations in
// the same order. Tests hold each assembly function to its twin, and a
// build without assembly (tags noasm or purego, or not amd64) runs the
// twins under the assembly's names (the *_noasm.go files). The FP32
// micro-kernels have none: they are checked against GemmF32Ref within
// rounding, and without assembly GenericF32 runs instead. A twin
// of an element-wise kernel is also the generic kernel; a GEMM
// micro-kernel's twin (vnniMicroGo, amxTileGo ...) is not a kernel by
// itself, the driver around it is.
//
// A tile driver is the Go code that walks a GEMM in blocks and register
// tiles around the micro-kernels of one tile shape (runVNNI, runAVX2U8S8,
// f32Driver, runAMXU8S8); it is the same for the assembly and for the
// twins. ("Family" is reserved for model architectures, encoder.Family.)
//
// # Files
//
// Every file is named <op>[_<isa>][_<part>][_<goarch>|_noasm][_test]: op
// is gemm_u8s8, gemm_f32, eltwise or another operation (twin_arith holds
// what the twins share); isa is one of
// generic, avx2, avxvnni (VEX AVX-VNNI), avx512, vnni (AVX512-VNNI) and
// amx, left out where a file
// serves every ISA of its op; part names a piece (stub: the generated Go
// declarations of an .s file; table, epi, export, bench ...); _amd64 files
// hold or need assembly, _noasm ones hold the twins of builds without it.
// The generator of <op>_<isa>_amd64.s is _gen/<op>_<isa> (an avo command,
// run by go generate through generate.go; scripts/check-generate.sh checks
// that the committed output is what the generators write). Generated files
// start with "Code generated ... DO NOT EDIT."; gemm_u8s8_amx_amd64.s is
// written by hand.
//
//	gemm.go                  PackedS8, Out, GEMMU8S8, Kernel, U8S8Kernels; GenericU8S8
//	ref.go                   the references, Epilogue, activations, CheckGEMM
//	gemm_u8s8_vnni*.go/.s    AVX512-VNNI u8 x s8: tile driver runVNNI, micro-kernels
//	                         (fused epilogue included), their twins (_noasm, generated)
//	gemm_u8s8_avx2*.go/.s    AVX2 u8 x s8: drivers runAVX2U8S8 and runAVX2WideU8S8,
//	                         micro-kernels, epilogue, twins; the int16 zmm kernels
//	                         gemmAVX512w (AVX-512 without VNNI, runAVX512WideU8S8)
//	gemm_u8s8_avxvnni*.go/.s AVX-VNNI u8 x s8 (VEX VPDPBUSD ymm): driver runAVXVNNIU8S8
//	                         (the AVX2 epilogue), micro-kernels, twins
//	gemm_u8s8_amx*.go/.s     AMX u8 x s8: driver runAMXU8S8, the hand-written tile
//	                         kernel, its twin amxTileGo
//	gemm_f32.go              PackedF32, GEMMF32, KernelF32, F32Kernels; GenericF32
//	gemm_f32_amd64.go        the FP32 tile driver f32Driver (AVX-512 and AVX2 tiles)
//	gemm_f32_avx512*.go/.s   AVX-512 FP32 micro-kernels, epilogue and their table
//	gemm_f32_avx2*.go/.s     AVX2 + FMA3 FP32 micro-kernels and epilogue
//	gemm_bf16.go             PackedBF16, GEMMBF16, KernelBF16, BF16Kernels; GenericBF16,
//	                         GemmBF16Ref, the row packer's twin packBF16Row
//	gemm_bf16_amd64.go       the AVX512-BF16 tile driver bf16Driver (the FP32 epilogue)
//	gemm_bf16_avx512*.go/.s  AVX512-BF16 (VDPBF16PS, byte-encoded) micro-kernels, the
//	                         row packer cvtBF16Row and their table
//	pack_f32_into.go         PackF32Into, the allocation-free repack (attention's K)
//	eltwise.go               the element-wise API (LayerNorm, Softmax, GELU, Quantize*,
//	                         Dequantize*) and its per-call dispatch
//	eltwise_quant.go         the quantize and dequantize steps (QuantizeRowsU8 ...)
//	eltwise_attn.go          INT8 attention's steps: Q rows to u8, K and V^T quantized
//	                         into PackedS8 panels, softmax to u8 P (DESIGN 3.10)
//	eltwise_generic.go       the element-wise twins, which are the generic path
//	eltwise_avx512*.go/.s    the AVX-512 element-wise kernels
//	eltwise_avx2*.go/.s      the AVX2 passes (softmax, LayerNorm sums, quantizers)
//	twin_arith.go            float32 arithmetic the twins share: fma32, the GELU models
//	bf16.go                  ToBF16, FromBF16
//	pool.go                  Parallel, the process-wide worker pool
//	generate.go              every go:generate line
//	kernelstest/             the suite every u8 x s8 kernel runs
//	peak/                    package peak: the CPU's arithmetic peak, for benchmarks
//	_gen/                    the avo generators (their own module)
//
// kernels must not import dnnl, selector or any model package.
package kernels
