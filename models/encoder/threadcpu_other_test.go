//go:build !linux

package encoder

// threadCPUNanos is Linux's per-thread CPU time; elsewhere there is none
// (BenchmarkAttentionLayer then reports wall time alone).
func threadCPUNanos() (int64, bool) { return 0, false }
