// Package bench measures int8bert on the host the way the paper evaluates
// it: GEMM throughput per shape and backend, and (in later issues) model
// throughput, linear-block time, hotspots and multi-instance runs. Every
// figure is reported with ratios measured in the same run (INT8 vs FP32,
// ours vs oneDNN), never as an absolute target.
//
// bench may import every int8bert package below the command; nothing but
// cmd/int8bert imports it.
package bench
