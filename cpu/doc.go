// Package cpu probes the host CPU once at start-up and says which kernel paths
// are live.
//
// It owns the x86 feature flags that int8bert's kernels depend on (AVX2, FMA,
// AVX-512 F/BW/VL/VNNI/BF16, AVX-VNNI, AMX TILE/INT8/BF16), the Linux AMX
// permission request (arch_prctl ARCH_REQ_XCOMP_PERM for XTILEDATA), the CPU's
// identity and cache sizes, and the INT8BERT_CPU_DISABLE override, which can
// only turn features off.
//
// It also names the instruction sets (ISA, ISAAVX2, ISAAVX512VNNI, ...):
// the one vocabulary of kernel ISAs that kernels, the selector, its
// INT8BERT_KERNEL forcing and its tuning cache share.
//
// Detected holds what CPUID reported; X86 holds the effective features after
// the override. Both are set once in init and must be treated as read-only.
// Code that wants other combinations (tests, benchmarks) derives them with
// Features.Apply, which is pure.
//
// This package sits at the bottom of the import graph: it must not import any
// other int8bert package.
package cpu
