//go:build cgo && !nodnnl

package cgo

/*
#cgo pkg-config: dnnl
#cgo LDFLAGS: -ldl
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"runtime"
	"unsafe"
)

// Status is a dnnl_status_t as returned by the shim.
type Status int

// The statuses oneDNN returns; package dnnl maps them to errors.
const (
	Success          Status = C.dnnl_success
	OutOfMemory      Status = C.dnnl_out_of_memory
	InvalidArguments Status = C.dnnl_invalid_arguments
	Unimplemented    Status = C.dnnl_unimplemented
	RuntimeError     Status = C.dnnl_runtime_error
	NotRequired      Status = C.dnnl_not_required
)

// Data types, as the shim numbers them.
const (
	F32  = C.I8B_F32
	BF16 = C.I8B_BF16
	S8   = C.I8B_S8
	U8   = C.I8B_U8
	S32  = C.I8B_S32
)

// Post-op kinds and binary operand shapes, as the shim numbers them.
const (
	PostGELUErf  = C.I8B_PO_GELU_ERF
	PostGELUTanh = C.I8B_PO_GELU_TANH
	PostReLU     = C.I8B_PO_RELU
	PostSum      = C.I8B_PO_SUM
	PostAdd      = C.I8B_PO_ADD
	PostMul      = C.I8B_PO_MUL

	BinRow  = C.I8B_BIN_ROW
	BinCol  = C.I8B_BIN_COL
	BinFull = C.I8B_BIN_FULL

	MaxPostOps = C.I8B_MAX_POST_OPS
)

// Info is the library's version and the ISA it dispatches to.
type Info struct {
	Major, Minor, Patch int
	Hash                string
	CPURuntime          uint
	EffectiveISA        int
}

// GetInfo reads oneDNN's version and effective ISA.
func GetInfo() Info {
	var ci C.i8b_info
	C.i8b_get_info(&ci)
	return Info{
		Major: int(ci.major), Minor: int(ci.minor), Patch: int(ci.patch),
		Hash: C.GoString(ci.hash), CPURuntime: uint(ci.cpu_runtime),
		EffectiveISA: int(ci.effective_isa),
	}
}

// SetMaxISA caps the ISA oneDNN may dispatch to (shim's I8B_ISA_* numbering).
func SetMaxISA(isa int) Status { return Status(C.i8b_set_max_isa(C.int(isa))) }

// Engine is a CPU engine handle.
type Engine struct{ p C.dnnl_engine_t }

// NewEngine creates the CPU engine.
func NewEngine() (*Engine, Status) {
	var e C.dnnl_engine_t
	if st := Status(C.i8b_engine_create(&e)); st != Success {
		return nil, st
	}
	return &Engine{p: e}, Success
}

// Destroy releases the engine.
func (e *Engine) Destroy() Status { return Status(C.i8b_engine_destroy(e.p)) }

// PostOp is one post-op of a matmul.
type PostOp struct {
	Kind, Shape int
	Scale       float32
}

// Config mirrors i8b_matmul_config.
type Config struct {
	M, K, N                          int64
	Src, Wei, Dst                    int
	Bias, SrcScale, WeiScales, SrcZP bool
	DstQuant                         bool
	DstScale                         float32
	DstZeroPoint                     int32
	PostOps                          []PostOp
}

// MatMul is a created matmul primitive.
type MatMul struct{ p *C.i8b_matmul }

func cbool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

// NewMatMul creates the primitive. len(cfg.PostOps) must not exceed MaxPostOps.
func NewMatMul(e *Engine, cfg *Config) (*MatMul, Status) {
	if len(cfg.PostOps) > MaxPostOps {
		return nil, InvalidArguments
	}
	var c C.i8b_matmul_config
	c.m, c.k, c.n = C.int64_t(cfg.M), C.int64_t(cfg.K), C.int64_t(cfg.N)
	c.src_dt, c.wei_dt, c.dst_dt = C.int(cfg.Src), C.int(cfg.Wei), C.int(cfg.Dst)
	c.bias = cbool(cfg.Bias)
	c.src_scale = cbool(cfg.SrcScale)
	c.wei_scales = cbool(cfg.WeiScales)
	c.src_zero_point = cbool(cfg.SrcZP)
	c.dst_quant = cbool(cfg.DstQuant)
	c.dst_scale = C.float(cfg.DstScale)
	c.dst_zero_point = C.int32_t(cfg.DstZeroPoint)
	c.n_post_ops = C.int(len(cfg.PostOps))
	for i, p := range cfg.PostOps {
		c.post_ops[i].kind = C.int(p.Kind)
		c.post_ops[i].shape = C.int(p.Shape)
		c.post_ops[i].scale = C.float(p.Scale)
	}
	var mm *C.i8b_matmul
	if st := Status(C.i8b_matmul_create(e.p, &c, &mm)); st != Success {
		return nil, st
	}
	return &MatMul{p: mm}, Success
}

// Destroy releases the primitive.
func (m *MatMul) Destroy() { C.i8b_matmul_destroy(m.p) }

// WeightsSize is the size in bytes of the packed weights.
func (m *MatMul) WeightsSize() int { return int(C.i8b_matmul_weights_size(m.p)) }

// ScratchpadSize is the size in bytes of the scratchpad one execution needs.
func (m *MatMul) ScratchpadSize() int { return int(C.i8b_matmul_scratchpad_size(m.p)) }

// Impl is the name of the implementation oneDNN chose.
func (m *MatMul) Impl() string { return C.GoString(C.i8b_matmul_impl(m.p)) }

// PackWeights reorders w ([N][K] row-major of type srcType) into packed, which
// must be C memory of WeightsSize bytes (see Alloc).
func (m *MatMul) PackWeights(srcType int, w unsafe.Pointer, packed unsafe.Pointer, threads int) Status {
	var pin runtime.Pinner
	defer pin.Unpin()
	pin.Pin(w)
	return Status(C.i8b_matmul_pack_weights(m.p, C.int(srcType), w, packed, C.int(threads)))
}

// ExecArgs mirrors i8b_exec_args. Pointers may point to Go memory: Execute
// pins them for the duration of the call.
type ExecArgs struct {
	M            int64
	Src, Weights unsafe.Pointer
	Bias         *float32
	Dst          unsafe.Pointer
	SrcScale     float32
	WeiScales    *float32
	SrcZeroPoint int32
	Binary       [MaxPostOps]*float32
	Scratchpad   unsafe.Pointer
	Threads      int
}

// Execute runs the primitive once on the calling thread.
func (m *MatMul) Execute(a *ExecArgs) Status {
	var pin runtime.Pinner
	defer pin.Unpin()
	var c C.i8b_exec_args
	c.m = C.int64_t(a.M)
	c.src = pinned(&pin, a.Src)
	c.weights = a.Weights
	c.dst = pinned(&pin, a.Dst)
	c.bias = (*C.float)(pinned(&pin, unsafe.Pointer(a.Bias)))
	c.src_scale = C.float(a.SrcScale)
	c.wei_scales = (*C.float)(pinned(&pin, unsafe.Pointer(a.WeiScales)))
	c.src_zero_point = C.int32_t(a.SrcZeroPoint)
	for i, b := range a.Binary {
		c.binary[i] = (*C.float)(pinned(&pin, unsafe.Pointer(b)))
	}
	c.scratchpad = a.Scratchpad
	c.threads = C.int(a.Threads)
	return Status(C.i8b_matmul_execute(m.p, &c))
}

func pinned(pin *runtime.Pinner, p unsafe.Pointer) unsafe.Pointer {
	if p != nil {
		pin.Pin(p)
	}
	return p
}

// Alloc returns size bytes of 64-byte aligned C memory, or nil.
func Alloc(size int) unsafe.Pointer { return C.i8b_aligned_alloc(C.size_t(size)) }

// Free releases memory from Alloc.
func Free(p unsafe.Pointer) { C.i8b_free(p) }

// Layout is a copy of a primitive's packed-weights descriptor.
type Layout struct{ p *C.i8b_layout }

// Layout copies the primitive's packed-weights descriptor.
func (m *MatMul) Layout() (*Layout, Status) {
	var l *C.i8b_layout
	if st := Status(C.i8b_matmul_layout(m.p, &l)); st != Success {
		return nil, st
	}
	return &Layout{p: l}, Success
}

// Accepts reports whether weights packed in layout l serve this primitive.
func (m *MatMul) Accepts(l *Layout) bool { return C.i8b_layout_equal(m.p, l.p) != 0 }

// Destroy releases the layout.
func (l *Layout) Destroy() { C.i8b_layout_destroy(l.p) }

// LiveCounts are the shim's handles created and not yet released.
type LiveCounts struct {
	Engines, MatMuls, Layouts, Allocs int
}

// Live reads the shim's counts of live handles (process-wide).
func Live() LiveCounts {
	var c C.i8b_live_counts
	C.i8b_live(&c)
	return LiveCounts{Engines: int(c.engines), MatMuls: int(c.matmuls), Layouts: int(c.layouts), Allocs: int(c.allocs)}
}
