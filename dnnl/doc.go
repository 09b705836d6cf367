// Package dnnl is an idiomatic Go API over oneDNN's C API, covering what
// int8bert needs: a CPU engine, matmul primitives in f32, bf16 and INT8 (u8 or
// s8 source, s8 weights, f32/s32/s8/u8 destination) with bias, per-tensor
// source scale, per-output-channel weight scales, a source zero point and
// post-ops (GELU erf and tanh, ReLU, sum, binary add and mul), weights packed
// once into oneDNN's preferred layout, a runtime or fixed M, and the thread
// count per call.
//
// The semantics are oneDNN 3.x's on every version:
//
//	dst = requant(post_ops(src_scale*wei_scale[n]*acc + bias[n]))
//
// where acc is the exact int32 (or float) product, post-ops run in the order
// given and requant is roundHalfEven(x*(1/DstScale)+DstZeroPoint) saturated
// to the destination type. With oneDNN 2.x (Debian 12 ships 2.6.3) the C
// shim in dnnl/cgo rewrites this into 2.x's output scales and post-ops.
//
// Concurrency: a MatMul and its Weights may be used by any number of
// goroutines at once. Each call brings its own scratchpad (oneDNN's
// user-managed scratchpad mode) and its own stream, so no state is tied to the
// OS thread that created the primitive. Close waits for calls in flight.
//
// INT8 where oneDNN has no VNNI: there its u8 x s8 products are summed in
// pairs in int16 with saturation, so NewMatMul refuses a u8 x s8 or s8 x s8
// matmul with ErrSaturation unless MatMulConfig declares ranges that cannot
// saturate (Src7Bit, Weights7Bit), which PackWeights and Execute then hold
// the data to (docs/DESIGN.md section 5.1; ISA.ExactInt8).
//
// Built with CGO_ENABLED=0 or -tags nodnnl, the package compiles and every
// call returns ErrUnavailable; Available reports which build this is.
//
// dnnl must not import package kernels, selector or anything above them.
package dnnl
