// Package selector chooses, per GEMM shape, which implementation runs it: a
// native kernel from package kernels (Go assembly or the generic Go twin) or
// oneDNN through package dnnl. It is the one package that knows both.
//
// It owns
//
//   - the candidates, per operation: for u8s8, every kernel of
//     kernels.U8S8Kernels() this CPU runs (Kernel.Available on cpu.X86) and
//     that accepts the shape; for f32, every kernel of kernels.F32Kernels()
//     likewise; for bf16, every kernel of kernels.BF16Kernels() likewise;
//     for all three, oneDNN when dnnl.Available; for f32-kernel
//     (attention's products, run by the caller on the kernel chosen) the
//     FP32 kernels alone; for bf16-kernel (the bf16 precision's attention)
//     the BF16 kernels alone; for u8s8-kernel (INT8 attention's) the u8s8
//     kernels and kernels.AttentionU8S8Kernels(), each of which takes one
//     form of call (Kernel.Takes: the Q Kᵀ scores kernel) and declines the
//     keys of any other;
//   - the key a choice is made for (Key: operation, M bucket, K, N, epilogue
//     kind, threads);
//   - benchmark-once tuning: every candidate is first checked against the
//     reference (kernels.GenericU8S8; kernels.GemmF32Ref for f32, within
//     1e-5 of sum_k |a||w| + |bias| + |residual|; kernels.GemmBF16Ref, the
//     bf16-rounded operands in float64, for bf16, with the same bound on
//     the rounded operands) on random data of the
//     key's shape and excluded, with the reason recorded, when it differs;
//     the rest are timed a few times each (median) and the fastest is kept;
//   - the persistent JSON tuning cache (CacheFile: one section, Cache, per
//     header: CPU signature, cache format, oneDNN and Go versions,
//     candidates, so that the cgo and pure-Go builds keep their own), the
//     tuning records that travel with a model (ImportRecord,
//     ExportRecord), and the record of the choices in use
//     (Selector.Choices);
//   - when a key is tuned (Options.Tuning): on its first call (TuneSync),
//     or in a background goroutine while a default kernel, the
//     highest-ranked candidate that passes a quick check, runs at once
//     (TuneBackground); Tune waits for a tuning in either mode (a
//     warm-up);
//   - Linear[G]: one weight matrix prepared once, whose Run(*G) is what the
//     encoders call for every linear layer, G being the kernels descriptor
//     of the operation's calls (kernels.GEMMU8S8 from NewLinear for int8,
//     kernels.GEMMF32 from NewLinearF32 for float32, kernels.GEMMBF16 from
//     NewLinearBF16 for bfloat16); and
//     Selector.KernelF32, KernelBF16 and KernelU8S8, the kernel of an
//     f32-kernel, bf16-kernel or u8s8-kernel product (attention's, FP32,
//     BF16 and INT8).
//
// Nothing else in the module picks a kernel: the encoders' linears and
// attention and the calibration all ask a Selector, so INT8BERT_KERNEL,
// INT8BERT_CPU_DISABLE and the tuning cache hold everywhere.
//
// Concurrent first calls for one key run the tuning once. The environment
// variable INT8BERT_KERNEL (or Options.Force) forces a kernel ISA (a
// cpu.ISA: "avx512-vnni", "amx", "avx2", "avx512", "avx512-bf16",
// "generic", or "onednn")
// or one kernel by name; a forced ISA this CPU or build lacks is an error,
// never a fallback. Forcing applies to the operations that have a kernel
// of that ISA (or that kernel): "avx512-vnni" or "amx" force the u8s8
// GEMMs and leave the f32 ones to their usual choice, "avx512" the
// reverse, "avx512-bf16" the bf16 and bf16-kernel ones only, "avx2" the
// u8s8, f32, f32-kernel and u8s8-kernel ones, "generic" all, "onednn" u8s8,
// f32 and bf16 (the -kernel operations have no oneDNN candidate). An ISA no operation has is an
// error, and so is "onednn" without oneDNN.
//
// Operations are generic (op.go): an operation is an opSet[G] over the
// calls G, built from an opSpec[G], the page of code that differs between
// operations: its kernels, its oneDNN candidate, the check and key of a
// call, and a trial's random problem and reference check. "u8s8" (u8
// activations x s8 weights, Key from U8S8Key; u8s8.go), "f32" (f32 x f32
// -> f32 with bias, activation and residual, Key from F32Key; f32.go) and
// "f32-kernel" (the f32 spec without oneDNN, Key from F32KernelKey) and
// "bf16" (f32 activations and weights rounded to bfloat16, float32 sums,
// the f32 epilogue, Key from BF16Key; bf16.go), "bf16-kernel" (the bf16
// spec without oneDNN, Key from BF16KernelKey) and "u8s8-kernel" (the
// u8s8 spec without oneDNN, Key from U8S8KernelKey). Another (s8 x s8)
// costs a Key.Op, an opSpec and its line in New with a constructor of its
// Linear. The operations on float32 activations (f32, f32-kernel, bf16,
// bf16-kernel)
// share one generic spec, floatSpec[G] (float.go), each a small
// descriptor of what differs: its packing, its reference, the data type
// of its oneDNN matmul.
//
// selector imports cpu, kernels and dnnl. It must not import models/,
// bench/ or anything else above it.
package selector
