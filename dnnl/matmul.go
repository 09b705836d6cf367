package dnnl

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"unsafe"
)

// Engine is a oneDNN CPU engine. Create primitives with NewMatMul; Close the
// engine after them.
type Engine struct {
	mu      sync.Mutex
	impl    engineImpl
	open    int
	closed  bool
	cleanup runtime.Cleanup // destroys impl if the engine is dropped unclosed
}

var (
	defaultOnce sync.Once
	defaultEng  *Engine
	defaultErr  error
)

// DefaultEngine returns a process-wide engine that is never closed.
func DefaultEngine() (*Engine, error) {
	defaultOnce.Do(func() { defaultEng, defaultErr = NewEngine() })
	return defaultEng, defaultErr
}

// NewEngine creates a CPU engine.
func NewEngine() (*Engine, error) {
	impl, err := newEngineImpl()
	if err != nil {
		return nil, fmt.Errorf("dnnl: engine: %w", err)
	}
	e := &Engine{impl: impl}
	// The cleanup gets the C handle, never e, so that e can be collected.
	// Every MatMul's cleanup holds its engine, so an engine is destroyed
	// only after the primitives made from it.
	e.cleanup = runtime.AddCleanup(e, engineImpl.destroy, impl)
	return e, nil
}

// Close releases the engine. It fails with ErrInUse while primitives made
// from it are open, and with ErrClosed the second time.
func (e *Engine) Close() error {
	if e == nil {
		return fmt.Errorf("dnnl: close of nil engine: %w", ErrInvalidArgument)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return fmt.Errorf("dnnl: engine close: %w", ErrClosed)
	}
	if e.open > 0 {
		return fmt.Errorf("dnnl: engine close with %d open: %w", e.open, ErrInUse)
	}
	e.closed = true
	e.cleanup.Stop() // e is reachable here, so the cleanup was not queued
	e.impl.destroy()
	return nil
}

// MatMul is a created matmul primitive. It is safe for concurrent use.
type MatMul struct {
	cfg     MatMulConfig
	eng     *Engine
	mu      sync.RWMutex // Execute holds R, Close holds W
	closed  bool
	impl    matmulImpl
	scratch *scratchPool
	cleanup runtime.Cleanup // releases matmulRes if mm is dropped unclosed
}

// scratchPool holds a primitive's free scratchpads (C memory of the
// primitive's scratchpad size). It is its own object so that the cleanup of
// a dropped MatMul can free them without referring to the MatMul.
type scratchPool struct {
	mu   sync.Mutex
	free []unsafe.Pointer
}

// matmulRes is what a MatMul owns outside the Go heap, and the engine
// count it holds: the argument of its cleanup, which must not refer to the
// MatMul itself.
type matmulRes struct {
	impl    matmulImpl
	scratch *scratchPool
	eng     *Engine
}

// releaseMatMul destroys the primitive, frees its scratchpads and gives its
// count back to the engine: on Close, or from the cleanup of a MatMul
// dropped without Close.
func releaseMatMul(r matmulRes) {
	r.impl.destroy()
	r.scratch.mu.Lock()
	for _, p := range r.scratch.free {
		freeC(p)
	}
	r.scratch.free = nil
	r.scratch.mu.Unlock()
	r.eng.mu.Lock()
	r.eng.open--
	r.eng.mu.Unlock()
}

// NewMatMul creates a matmul primitive for cfg on the engine.
func (e *Engine) NewMatMul(cfg MatMulConfig) (*MatMul, error) {
	if e == nil {
		return nil, fmt.Errorf("dnnl: matmul on nil engine: %w", ErrInvalidArgument)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := refuseSaturating(&cfg); err != nil {
		return nil, err
	}
	cfg.PostOps = append([]PostOp(nil), cfg.PostOps...)
	for i := range cfg.PostOps {
		if cfg.PostOps[i].Kind == Sum && cfg.PostOps[i].Scale == 0 {
			cfg.PostOps[i].Scale = 1
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, fmt.Errorf("dnnl: matmul: %w", ErrClosed)
	}
	impl, err := newMatMulImpl(e.impl, &cfg)
	if err != nil && cfg.M == RuntimeM && hasRowOperand(&cfg) && !errors.Is(err, ErrUnavailable) {
		err = fmt.Errorf("this oneDNN does not take [M,1] or [M,N] post-op operands with a run-time M; use a fixed M: %w", ErrUnimplemented)
	}
	if err != nil {
		return nil, fmt.Errorf("dnnl: matmul m=%d k=%d n=%d %v x %v -> %v: %w",
			cfg.M, cfg.K, cfg.N, cfg.Src, cfg.Weights, cfg.Dst, err)
	}
	e.open++
	mm := &MatMul{cfg: cfg, eng: e, impl: impl, scratch: new(scratchPool)}
	mm.cleanup = runtime.AddCleanup(mm, releaseMatMul, mm.res())
	return mm, nil
}

// refuseSaturating returns ErrSaturation for an INT8 configuration whose
// products oneDNN could saturate on this CPU: its effective ISA has no
// VNNI and the configuration declares no range that keeps VPMADDUBSW's
// int16 pair sums exact (docs/DESIGN.md section 5.1). A u8 x s8 pair sum is
// at most 2 x 127 x 128 = 32512 with a 7-bit source and 2 x 255 x 64 =
// 32640 with 7-bit weights. oneDNN runs s8 x s8 as u8 x s8 with one operand
// shifted by 128, the source or the weights depending on the shape (its
// matrix-vector kernels swap them), so there both must be 7-bit:
// 2 x 191 x 64 = 24448.
func refuseSaturating(c *MatMulConfig) error {
	if !c.isInt8() || (c.Src == U8 && (c.Src7Bit || c.Weights7Bit)) || (c.Src == S8 && c.Src7Bit && c.Weights7Bit) {
		return nil
	}
	info, err := GetInfo()
	if err != nil {
		return fmt.Errorf("dnnl: matmul: %w", err)
	}
	if info.ISA.ExactInt8() {
		return nil
	}
	declare := "declare Src7Bit (every source value in [0, 127]) or Weights7Bit (every weight in [-64, 63])"
	if c.Src == S8 {
		declare = "declare both Src7Bit and Weights7Bit (every source value and weight in [-64, 63]): oneDNN shifts one s8 operand to u8, the source or the weights depending on the shape"
	}
	return fmt.Errorf("dnnl: %v x %v matmul refused: oneDNN's effective ISA %v has no VNNI and sums pairs of u8 x s8 products in int16 (VPMADDUBSW), which saturates on full-range data; %s: %w",
		c.Src, c.Weights, info.ISA, declare, ErrSaturation)
}

// Config returns the configuration the primitive was made with.
func (mm *MatMul) Config() MatMulConfig {
	c := mm.cfg
	c.PostOps = append([]PostOp(nil), c.PostOps...)
	return c
}

// Impl names the implementation oneDNN chose, e.g. "brg:avx512_core_vnni".
func (mm *MatMul) Impl() string {
	mm.mu.RLock()
	defer mm.mu.RUnlock()
	if mm.closed {
		return ""
	}
	return mm.impl.implName()
}

func (mm *MatMul) res() matmulRes {
	return matmulRes{impl: mm.impl, scratch: mm.scratch, eng: mm.eng}
}

// Close releases the primitive after the calls in flight. The second Close
// returns ErrClosed.
func (mm *MatMul) Close() error {
	if mm == nil {
		return fmt.Errorf("dnnl: close of nil matmul: %w", ErrInvalidArgument)
	}
	mm.mu.Lock()
	defer mm.mu.Unlock()
	if mm.closed {
		return fmt.Errorf("dnnl: matmul close: %w", ErrClosed)
	}
	mm.closed = true
	mm.cleanup.Stop() // mm is reachable here, so the cleanup was not queued
	releaseMatMul(mm.res())
	return nil
}

// Weights are weights packed once into a primitive's preferred layout. They
// serve every primitive whose layout is the same (see MatMul.Accepts) and
// are safe for concurrent use.
type Weights struct {
	mu      sync.RWMutex
	closed  bool
	packed  unsafe.Pointer // C memory
	size    int
	scales  []float32
	layout  layoutImpl
	k, n    int
	typ     DataType
	narrow  bool            // s8 weights, all in [-64, 63] (what Weights7Bit declares)
	cleanup runtime.Cleanup // releases weightsRes if w is dropped unclosed
}

// weightsRes is what Weights own outside the Go heap: the argument of their
// cleanup, which must not refer to the Weights.
type weightsRes struct {
	packed unsafe.Pointer
	layout layoutImpl
}

// releaseWeights frees the packed weights and their layout: on Close, or
// from the cleanup of Weights dropped without Close.
func releaseWeights(r weightsRes) {
	freeC(r.packed)
	r.layout.destroy()
}

// PackWeights packs w, given as [N][K] row-major (a PyTorch Linear weight),
// into the primitive's layout. w is a []float32 (for f32 or bf16 weights), a
// []uint16 holding bf16 values, or a []int8. scales holds N per-output-channel
// weight scales when the config has WeightScales, and must be nil otherwise.
// threads <= 0 leaves the runtime's thread count.
func (mm *MatMul) PackWeights(w any, scales []float32, threads int) (*Weights, error) {
	c := &mm.cfg
	fail := func(format string, args ...any) (*Weights, error) {
		return nil, fmt.Errorf("dnnl: pack weights k=%d n=%d: %s: %w", c.K, c.N, fmt.Sprintf(format, args...), ErrInvalidArgument)
	}
	var ptr unsafe.Pointer
	var have int
	var srcType DataType
	switch v := w.(type) {
	case []float32:
		ptr, have, srcType = sliceData(v), len(v), F32
	case []uint16:
		ptr, have, srcType = sliceData(v), len(v), BF16
	case []int8:
		ptr, have, srcType = sliceData(v), len(v), S8
	case nil:
		return fail("nil weights")
	default:
		return fail("unsupported weights type %T", w)
	}
	okType := srcType == c.Weights || (srcType == F32 && c.Weights == BF16)
	if !okType {
		return fail("%v weights for a primitive with %v weights", srcType, c.Weights)
	}
	if have != c.K*c.N {
		return fail("got %d values, want n*k = %d", have, c.K*c.N)
	}
	if srcType == F32 {
		if i := firstNonFinite(w.([]float32)); i >= 0 {
			return fail("weight %d (row %d, column %d) is %v", i, i/c.K, i%c.K, w.([]float32)[i])
		}
	}
	// Whether every weight is in [-64, 63], for this primitive's
	// Weights7Bit and for the primitives that may share the weights.
	narrow := false
	if srcType == S8 {
		i := firstOutside7Bit(w.([]int8))
		if i >= 0 && c.Weights7Bit {
			return fail("weight %d (row %d, column %d) is %d, outside the [-64, 63] the config declares (Weights7Bit)", i, i/c.K, i%c.K, w.([]int8)[i])
		}
		narrow = i < 0
	}
	if c.WeightScales {
		if len(scales) != c.N {
			return fail("got %d weight scales, want n = %d", len(scales), c.N)
		}
		if i := firstNonFinite(scales); i >= 0 {
			return fail("weight scale %d is %v", i, scales[i])
		}
	} else if scales != nil {
		return fail("weight scales given but the config has no WeightScales")
	}
	if threads < 0 {
		return fail("threads = %d", threads)
	}
	mm.mu.RLock()
	defer mm.mu.RUnlock()
	if mm.closed {
		return nil, fmt.Errorf("dnnl: pack weights: %w", ErrClosed)
	}
	size := mm.impl.weightsSize()
	packed := allocC(size)
	if packed == nil {
		return nil, fmt.Errorf("dnnl: pack weights: %d bytes: %w", size, ErrOutOfMemory)
	}
	if err := mm.impl.pack(srcType, ptr, packed, threads); err != nil {
		freeC(packed)
		return nil, fmt.Errorf("dnnl: pack weights k=%d n=%d: %w", c.K, c.N, err)
	}
	layout, err := mm.impl.layout()
	if err != nil {
		freeC(packed)
		return nil, fmt.Errorf("dnnl: pack weights: %w", err)
	}
	wt := &Weights{packed: packed, size: size, layout: layout, k: c.K, n: c.N, typ: c.Weights, narrow: narrow}
	if scales != nil {
		wt.scales = append([]float32(nil), scales...)
	}
	wt.cleanup = runtime.AddCleanup(wt, releaseWeights, weightsRes{packed: packed, layout: layout})
	return wt, nil
}

// Size is the packed size in bytes.
func (w *Weights) Size() int { return w.size }

// Close frees the packed weights after the calls in flight. The second Close
// returns ErrClosed.
func (w *Weights) Close() error {
	if w == nil {
		return fmt.Errorf("dnnl: close of nil weights: %w", ErrInvalidArgument)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return fmt.Errorf("dnnl: weights close: %w", ErrClosed)
	}
	w.closed = true
	w.cleanup.Stop() // w is reachable here, so the cleanup was not queued
	releaseWeights(weightsRes{packed: w.packed, layout: w.layout})
	w.packed = nil
	return nil
}

// Accepts reports whether w, packed by any primitive, can be used with mm:
// the same layout, and weights in [-64, 63] for a primitive that declares
// Weights7Bit.
func (mm *MatMul) Accepts(w *Weights) bool {
	if w == nil {
		return false
	}
	mm.mu.RLock()
	defer mm.mu.RUnlock()
	w.mu.RLock()
	defer w.mu.RUnlock()
	return !mm.closed && !w.closed && mm.accepts(w)
}

func (mm *MatMul) accepts(w *Weights) bool {
	return w.k == mm.cfg.K && w.n == mm.cfg.N && w.typ == mm.cfg.Weights &&
		(w.scales != nil) == mm.cfg.WeightScales && (w.narrow || !mm.cfg.Weights7Bit) &&
		mm.impl.accepts(w.layout)
}

// Args are the per-call operands of MatMul.Execute.
type Args struct {
	// M is the number of rows; it must equal the config's M unless that is
	// RuntimeM. M = 0 does nothing.
	M int
	// Src is [M][K] row-major: []float32, []uint16 (bf16), []uint8 or []int8.
	Src any
	// Dst is [M][N] row-major: []float32, []uint16 (bf16), []int32, []int8
	// or []uint8. With a Sum post-op it holds the addend on entry.
	Dst any
	// Bias holds N values when the config has Bias.
	Bias []float32
	// SrcScale is the per-tensor source scale when the config has SrcScale.
	SrcScale float32
	// SrcZeroPoint is the source zero point when the config has SrcZeroPoint.
	SrcZeroPoint int32
	// Binary holds the second operand of each Add and Mul post-op, in the
	// order of the post-ops: N, M or M*N values for PerColumn, PerRow, Full.
	Binary [][]float32
	// Threads is the thread count for this call; <= 0 leaves the runtime's.
	Threads int
}

// execArgs is what the backend receives.
type execArgs struct {
	m                 int
	src, weights, dst unsafe.Pointer
	bias, weiScales   *float32
	srcScale          float32
	srcZeroPoint      int32
	binary            [MaxPostOps + 1]*float32
	scratchpad        unsafe.Pointer
	threads           int
}

func sliceData[T any](s []T) unsafe.Pointer {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Pointer(&s[0])
}

// firstAbove127 is the index of the first value of v above 127, or -1. It
// runs on every call of a Src7Bit primitive, so it tests 8 bytes at a time.
func firstAbove127(v []uint8) int {
	i := 0
	for ; i+8 <= len(v); i += 8 {
		if binary.LittleEndian.Uint64(v[i:])&0x8080808080808080 != 0 {
			break
		}
	}
	for ; i < len(v); i++ {
		if v[i] > 127 {
			return i
		}
	}
	return -1
}

// firstOutside7Bit is the index of the first value of v outside [-64, 63],
// or -1: one whose bits 7 and 6 differ. It runs on every call of an s8
// Src7Bit primitive, so it tests 8 bytes at a time.
func firstOutside7Bit(v []int8) int {
	i := 0
	if len(v) >= 8 {
		b := unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), len(v))
		for ; i+8 <= len(b); i += 8 {
			x := binary.LittleEndian.Uint64(b[i:])
			if (x^x<<1)&0x8080808080808080 != 0 {
				break
			}
		}
	}
	for ; i < len(v); i++ {
		if v[i] < -64 || v[i] > 63 {
			return i
		}
	}
	return -1
}

func firstNonFinite(v []float32) int {
	for i, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return i
		}
	}
	return -1
}

func operand(v any) (unsafe.Pointer, int, DataType, bool) {
	switch s := v.(type) {
	case []float32:
		return sliceData(s), len(s), F32, true
	case []uint16:
		return sliceData(s), len(s), BF16, true
	case []uint8:
		return sliceData(s), len(s), U8, true
	case []int8:
		return sliceData(s), len(s), S8, true
	case []int32:
		return sliceData(s), len(s), S32, true
	}
	return nil, 0, 0, false
}

// Execute runs dst = src x W^T with the configured scales, bias and post-ops.
// It checks every operand's type and size first and returns an error
// wrapping ErrInvalidArgument on a mismatch, or ErrClosed after Close.
func (mm *MatMul) Execute(w *Weights, a *Args) error {
	if mm == nil || a == nil {
		return fmt.Errorf("dnnl: execute: nil matmul or args: %w", ErrInvalidArgument)
	}
	c := &mm.cfg
	m := a.M
	fail := func(format string, args ...any) error {
		return fmt.Errorf("dnnl: matmul m=%d k=%d n=%d: %s: %w", m, c.K, c.N, fmt.Sprintf(format, args...), ErrInvalidArgument)
	}
	if m < 0 || (c.M != RuntimeM && m != c.M && m != 0) {
		return fail("m must be %d for this primitive", c.M)
	}
	if w == nil {
		return fail("nil weights")
	}
	if a.Threads < 0 {
		return fail("threads = %d", a.Threads)
	}
	src, nSrc, tSrc, ok := operand(a.Src)
	if !ok || tSrc != c.Src {
		return fail("src is %T, want a slice of %v", a.Src, c.Src)
	}
	dst, nDst, tDst, ok := operand(a.Dst)
	if !ok || tDst != c.Dst {
		return fail("dst is %T, want a slice of %v", a.Dst, c.Dst)
	}
	if nSrc < m*c.K {
		return fail("src has %d values, want m*k = %d", nSrc, m*c.K)
	}
	if nDst < m*c.N {
		return fail("dst has %d values, want m*n = %d", nDst, m*c.N)
	}
	if c.Bias && len(a.Bias) < c.N {
		return fail("bias has %d values, want n = %d", len(a.Bias), c.N)
	}
	if !c.Bias && a.Bias != nil {
		return fail("bias given but the config has no Bias")
	}
	if c.SrcScale && (math.IsNaN(float64(a.SrcScale)) || math.IsInf(float64(a.SrcScale), 0)) {
		return fail("src scale is %v", a.SrcScale)
	}
	if c.Src7Bit {
		switch s := a.Src.(type) {
		case []uint8:
			if i := firstAbove127(s[:m*c.K]); i >= 0 {
				return fail("src value %d (row %d, column %d) is %d, outside the [0, 127] the config declares (Src7Bit)", i, i/c.K, i%c.K, s[i])
			}
		case []int8:
			if i := firstOutside7Bit(s[:m*c.K]); i >= 0 {
				return fail("src value %d (row %d, column %d) is %d, outside the [-64, 63] the config declares (Src7Bit)", i, i/c.K, i%c.K, s[i])
			}
		}
	}
	var ea execArgs
	nb := 0
	for i, p := range c.PostOps {
		if p.Kind != Add && p.Kind != Mul {
			continue
		}
		if nb >= len(a.Binary) {
			return fail("post-op %d (%v) has no operand in Binary", i, p.Kind)
		}
		if want := binaryLen(p, m, c.N); len(a.Binary[nb]) < want {
			return fail("post-op %d (%v %v) operand has %d values, want %d", i, p.Kind, p.Shape, len(a.Binary[nb]), want)
		}
		if m > 0 {
			ea.binary[i] = &a.Binary[nb][0]
		}
		nb++
	}
	if nb != len(a.Binary) {
		return fail("%d binary operands for %d binary post-ops", len(a.Binary), nb)
	}
	mm.mu.RLock()
	defer mm.mu.RUnlock()
	if mm.closed {
		return fmt.Errorf("dnnl: execute: %w", ErrClosed)
	}
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.closed {
		return fmt.Errorf("dnnl: execute: weights: %w", ErrClosed)
	}
	if c.Weights7Bit && !w.narrow {
		return fail("the weights hold values outside the [-64, 63] the config declares (Weights7Bit)")
	}
	if !mm.accepts(w) {
		return fail("weights were packed for another layout (k=%d n=%d %v)", w.k, w.n, w.typ)
	}
	if m == 0 {
		return nil
	}
	ea.m, ea.src, ea.dst, ea.weights = m, src, dst, w.packed
	if c.Bias {
		ea.bias = &a.Bias[0]
	}
	if c.WeightScales {
		ea.weiScales = &w.scales[0]
	}
	ea.srcScale, ea.srcZeroPoint, ea.threads = a.SrcScale, a.SrcZeroPoint, a.Threads
	sp, err := mm.getScratch()
	if err != nil {
		return err
	}
	ea.scratchpad = sp
	err = mm.impl.execute(&ea)
	mm.putScratch(sp)
	runtime.KeepAlive(a)
	if err != nil {
		return fmt.Errorf("dnnl: matmul m=%d k=%d n=%d: %w", m, c.K, c.N, err)
	}
	return nil
}

func (mm *MatMul) getScratch() (unsafe.Pointer, error) {
	size := mm.impl.scratchpadSize()
	if size == 0 {
		return nil, nil
	}
	sp := mm.scratch
	sp.mu.Lock()
	if n := len(sp.free); n > 0 {
		p := sp.free[n-1]
		sp.free = sp.free[:n-1]
		sp.mu.Unlock()
		return p, nil
	}
	sp.mu.Unlock()
	p := allocC(size)
	if p == nil {
		return nil, fmt.Errorf("dnnl: scratchpad of %d bytes: %w", size, ErrOutOfMemory)
	}
	return p, nil
}

func (mm *MatMul) putScratch(p unsafe.Pointer) {
	if p == nil {
		return
	}
	sp := mm.scratch
	sp.mu.Lock()
	sp.free = append(sp.free, p)
	sp.mu.Unlock()
}

func hasRowOperand(c *MatMulConfig) bool {
	for _, p := range c.PostOps {
		if (p.Kind == Add || p.Kind == Mul) && p.Shape != PerColumn {
			return true
		}
	}
	return false
}
