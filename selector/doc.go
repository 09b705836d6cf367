// Package selector chooses, per GEMM shape, which implementation runs it: a
// native kernel from package kernels (Go assembly or the generic Go twin) or
// oneDNN through package dnnl. It is the one package that knows both.
//
// It owns
//
//   - the candidates: every kernel of kernels.U8S8Kernels() this CPU runs
//     (Kernel.Available on cpu.X86) and that accepts the shape, plus oneDNN
//     when dnnl.Available, plus test-only extras (Options.Extra);
//   - the key a choice is made for (Key: operation, M bucket, K, N, epilogue
//     kind, threads);
//   - benchmark-once tuning: every candidate is first checked against the
//     generic reference (kernels.GenericU8S8) on random data of the key's
//     shape and excluded, with the reason recorded, when it differs; the rest
//     are timed a few times each (median) and the fastest is kept;
//   - the persistent JSON tuning cache (Cache), keyed by CPU signature,
//     cache format, oneDNN and Go versions;
//   - Linear: one weight matrix prepared once, whose Run is what the encoder
//     calls for every linear layer.
//
// Concurrent first calls for one key run the tuning once. The environment
// variable INT8BERT_KERNEL (or Options.Force) forces a kernel family
// ("onednn", "avx512-vnni", "amx", "avx2", "generic", ...) or one kernel by
// name; a forced family this CPU or build lacks is an error, never a
// fallback.
//
// Operations are families of candidates behind one internal interface
// (see family in selector.go); "u8s8" (u8 activations x s8 weights) is the
// first. An f32 family is added by the same mechanism: a Key.Op, a family
// value that lists its candidates and builds a checked, timed problem, and
// a Linear-like object for its weights.
//
// selector imports cpu, kernels and dnnl. It must not import models/,
// bench/ or anything else above it.
package selector
