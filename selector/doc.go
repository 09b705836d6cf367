// Package selector chooses, per GEMM shape, which implementation runs it: a
// native kernel from package kernels (Go assembly or the generic Go twin) or
// oneDNN through package dnnl. It is the one package that knows both.
//
// It owns
//
//   - the candidates, per operation: for u8s8, every kernel of
//     kernels.U8S8Kernels() this CPU runs (Kernel.Available on cpu.X86) and
//     that accepts the shape; for f32, every kernel of kernels.F32Kernels()
//     likewise; for both, oneDNN when dnnl.Available, and test-only extras
//     (Options.Extra, Options.ExtraF32);
//   - the key a choice is made for (Key: operation, M bucket, K, N, epilogue
//     kind, threads);
//   - benchmark-once tuning: every candidate is first checked against the
//     reference (kernels.GenericU8S8; kernels.GemmF32Ref for f32, within
//     1e-5 of sum_k |a||w| + |bias| + |residual|) on random data of the
//     key's shape and excluded, with the reason recorded, when it differs;
//     the rest are timed a few times each (median) and the fastest is kept;
//   - the persistent JSON tuning cache (Cache), keyed by CPU signature,
//     cache format, oneDNN and Go versions;
//   - Linear (int8) and LinearF32 (float32): one weight matrix prepared
//     once, whose Run is what the INT8 and FP32 encoders call for every
//     linear layer.
//
// Concurrent first calls for one key run the tuning once. The environment
// variable INT8BERT_KERNEL (or Options.Force) forces a kernel family
// ("onednn", "avx512-vnni", "amx", "avx2", "generic", ...) or one kernel by
// name; a forced family this CPU or build lacks is an error, never a
// fallback. Forcing applies to the operations that have a kernel of that
// family (or that kernel): "avx512-vnni" or "amx" force the u8s8 GEMMs and
// leave the f32 ones to their usual choice, "avx512" the reverse,
// "avx2", "generic" and "onednn" force both. A family no operation has is
// an error, and so is "onednn" without oneDNN.
//
// Operations are families of candidates behind one internal interface
// (see family in selector.go): "u8s8" (u8 activations x s8 weights, Key
// from U8S8Key) and "f32" (f32 x f32 -> f32 with bias, activation and
// residual, Key from F32Key). Another is added by the same mechanism: a
// Key.Op, a family value that lists its candidates and builds a checked,
// timed problem, and a Linear-like object for its weights.
//
// selector imports cpu, kernels and dnnl. It must not import models/,
// bench/ or anything else above it.
package selector
