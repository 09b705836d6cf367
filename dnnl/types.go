package dnnl

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error this package returns wraps one of them, so
// callers test with errors.Is.
var (
	// ErrUnavailable: this binary was built without oneDNN (CGO_ENABLED=0 or
	// the nodnnl tag).
	ErrUnavailable = errors.New("dnnl: oneDNN is not available in this build")
	// ErrClosed: the engine, primitive or weights were closed.
	ErrClosed = errors.New("dnnl: use after Close")
	// ErrInvalidArgument: a bad shape, size, type or option, found by this
	// package or by oneDNN (dnnl_invalid_arguments).
	ErrInvalidArgument = errors.New("dnnl: invalid argument")
	// ErrUnimplemented: oneDNN has no implementation for this combination on
	// this CPU (dnnl_unimplemented).
	ErrUnimplemented = errors.New("dnnl: unimplemented")
	// ErrOutOfMemory: an allocation failed.
	ErrOutOfMemory = errors.New("dnnl: out of memory")
	// ErrRuntime: oneDNN reported a runtime error.
	ErrRuntime = errors.New("dnnl: runtime error")
	// ErrInUse: Close of an engine that still has open primitives.
	ErrInUse = errors.New("dnnl: engine still has open primitives")
	// ErrSaturation: NewMatMul refused a u8 x s8 or s8 x s8 matmul because
	// oneDNN's effective ISA has no VNNI (ISA.ExactInt8 is false), where its
	// INT8 kernels sum pairs of u8 x s8 products in int16 (VPMADDUBSW),
	// which saturates on full-range data, and the configuration does not
	// declare ranges that cannot saturate (MatMulConfig.Src7Bit,
	// Weights7Bit). It wraps ErrUnimplemented: oneDNN has no exact
	// implementation of the configuration on this CPU. See docs/DESIGN.md
	// section 5.1.
	ErrSaturation = fmt.Errorf("dnnl: INT8 products could saturate in this CPU's oneDNN: %w", ErrUnimplemented)
)

// DataType is an element type of a matmul operand.
type DataType int

// The data types the matmul supports. BF16 values are carried as uint16 (the
// upper half of an IEEE float32).
const (
	F32 DataType = iota + 1
	BF16
	S8
	U8
	S32
)

var dataTypeNames = [...]string{F32: "f32", BF16: "bf16", S8: "s8", U8: "u8", S32: "s32"}

// String returns oneDNN's short name of the type ("f32", "u8", ...).
func (t DataType) String() string {
	if t > 0 && int(t) < len(dataTypeNames) {
		return dataTypeNames[t]
	}
	return fmt.Sprintf("DataType(%d)", int(t))
}

// Size is the size of one element in bytes, or 0 for an unknown type.
func (t DataType) Size() int {
	switch t {
	case F32, S32:
		return 4
	case BF16:
		return 2
	case S8, U8:
		return 1
	}
	return 0
}

// PostOpKind is the kind of a post-op.
type PostOpKind int

// The post-ops the matmul supports.
const (
	// GELUErf is 0.5*x*(1+erf(x/sqrt 2)), the form Hugging Face BERT uses.
	GELUErf PostOpKind = iota + 1
	// GELUTanh is the tanh approximation of GELU.
	GELUTanh
	// ReLU is max(x, 0).
	ReLU
	// Sum adds Scale times the previous contents of dst (a residual).
	Sum
	// Add adds a second f32 operand of shape Shape.
	Add
	// Mul multiplies by a second f32 operand of shape Shape.
	Mul
)

var postOpNames = [...]string{GELUErf: "gelu_erf", GELUTanh: "gelu_tanh", ReLU: "relu", Sum: "sum", Add: "add", Mul: "mul"}

// String names the post-op kind.
func (k PostOpKind) String() string {
	if k > 0 && int(k) < len(postOpNames) {
		return postOpNames[k]
	}
	return fmt.Sprintf("PostOpKind(%d)", int(k))
}

// Broadcast is the shape of the second operand of an Add or Mul post-op.
type Broadcast int

// Operand shapes.
const (
	// PerColumn is [1, N]: one value per output column.
	PerColumn Broadcast = iota + 1
	// PerRow is [M, 1]: one value per output row (e.g. a per-token scale).
	PerRow
	// Full is [M, N].
	Full
)

// String names the shape.
func (b Broadcast) String() string {
	switch b {
	case PerColumn:
		return "[1,N]"
	case PerRow:
		return "[M,1]"
	case Full:
		return "[M,N]"
	}
	return fmt.Sprintf("Broadcast(%d)", int(b))
}

// PostOp is one step applied to the matmul result, in order.
type PostOp struct {
	Kind PostOpKind
	// Shape of the second operand, for Add and Mul.
	Shape Broadcast
	// Scale of the previous dst contents, for Sum (0 means 1).
	Scale float32
}

// MaxPostOps is the largest number of post-ops one matmul takes.
const MaxPostOps = 7

// RuntimeM as MatMulConfig.M makes the number of rows a run-time argument:
// one primitive serves every M.
const RuntimeM = 0

// MatMulConfig describes a matmul dst[M,N] = src[M,K] x W^T where W is given
// as [N][K] (a PyTorch Linear weight).
type MatMulConfig struct {
	// M is the number of rows, or RuntimeM to choose it per call.
	M int
	// K is the number of input features, N the number of outputs.
	K, N int
	// Src, Weights and Dst are the operand types. Supported combinations:
	// f32 x f32 -> f32; bf16 x bf16 -> f32 or bf16; u8 or s8 x s8 -> f32,
	// s32, s8 or u8.
	Src, Weights, Dst DataType
	// Bias adds an f32 vector of N values after scaling.
	Bias bool
	// SrcScale multiplies by one f32 scale given per call (INT8 only).
	SrcScale bool
	// WeightScales multiplies column n by a per-output-channel scale given
	// to PackWeights (INT8 only).
	WeightScales bool
	// SrcZeroPoint subtracts an int32 zero point, given per call, from every
	// source value (INT8 only).
	SrcZeroPoint bool
	// DstScale and DstZeroPoint requantize an s8 or u8 destination:
	// q = saturate(roundHalfEven(x*(1/DstScale) + DstZeroPoint)) in float32
	// (kernels.Quantize). DstScale must be > 0 for an s8 or u8 destination
	// and 0 otherwise.
	DstScale     float32
	DstZeroPoint int32
	// PostOps run in order after scaling and bias.
	PostOps []PostOp
	// Src7Bit declares that every source value fits in 7 bits of its type
	// ([0, 127] for u8, [-64, 63] for s8), Weights7Bit that every weight is
	// in [-64, 63]. Where oneDNN has no VNNI (ISA.ExactInt8) it sums pairs
	// of u8 x s8 products in int16, which saturates on full-range data:
	// there NewMatMul refuses, with ErrSaturation, a u8 x s8 matmul that
	// declares neither and an s8 x s8 one that does not declare both
	// (oneDNN shifts one s8 operand to u8, the source or the weights
	// depending on the shape). A declaration is held on every CPU:
	// PackWeights refuses a weight outside [-64, 63] and Execute a source
	// value outside the declared range, with ErrInvalidArgument. See
	// docs/DESIGN.md section 5.1.
	Src7Bit, Weights7Bit bool
}

func (c *MatMulConfig) isInt8() bool { return c.Src == U8 || c.Src == S8 }

// Validate reports the first problem with the configuration, wrapping
// ErrInvalidArgument.
func (c *MatMulConfig) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("dnnl: matmul config: %s: %w", fmt.Sprintf(format, args...), ErrInvalidArgument)
	}
	if c.M < 0 || c.K <= 0 || c.N <= 0 {
		return bad("shape m=%d k=%d n=%d: k and n must be > 0 and m >= 0 (0: run-time M)", c.M, c.K, c.N)
	}
	ok := false
	switch c.Src {
	case F32:
		ok = c.Weights == F32 && c.Dst == F32
	case BF16:
		ok = c.Weights == BF16 && (c.Dst == F32 || c.Dst == BF16)
	case U8, S8:
		ok = c.Weights == S8 && (c.Dst == F32 || c.Dst == S32 || c.Dst == S8 || c.Dst == U8)
	}
	if !ok {
		return bad("unsupported types %v x %v -> %v", c.Src, c.Weights, c.Dst)
	}
	if !c.isInt8() && (c.SrcScale || c.WeightScales || c.SrcZeroPoint) {
		return bad("scales and zero points need an INT8 source, not %v", c.Src)
	}
	if c.Src7Bit && !c.isInt8() {
		return bad("Src7Bit declares a u8 or s8 source, not a %v one", c.Src)
	}
	if c.Weights7Bit && c.Weights != S8 {
		return bad("Weights7Bit declares s8 weights in [-64, 63], not %v weights", c.Weights)
	}
	quant := c.Dst == S8 || c.Dst == U8
	if quant && !(c.DstScale > 0) {
		return bad("an %v destination needs DstScale > 0, got %v", c.Dst, c.DstScale)
	}
	if !quant && (c.DstScale != 0 || c.DstZeroPoint != 0) {
		return bad("DstScale and DstZeroPoint apply only to s8 or u8 destinations, not %v", c.Dst)
	}
	if len(c.PostOps) > MaxPostOps {
		return bad("%d post-ops, at most %d", len(c.PostOps), MaxPostOps)
	}
	for i, p := range c.PostOps {
		switch p.Kind {
		case GELUErf, GELUTanh, ReLU, Sum:
		case Add, Mul:
			if p.Shape < PerColumn || p.Shape > Full {
				return bad("post-op %d (%v): unknown operand shape %d", i, p.Kind, int(p.Shape))
			}
		default:
			return bad("post-op %d: unknown kind %d", i, int(p.Kind))
		}
	}
	return nil
}

// binaryLen is the number of f32 values the operand of post-op p needs.
func binaryLen(p PostOp, m, n int) int {
	switch p.Shape {
	case PerColumn:
		return n
	case PerRow:
		return m
	}
	return m * n
}

// ISA is an instruction-set level of oneDNN's CPU dispatcher.
type ISA int

// ISA levels known to both oneDNN 2.x and 3.x.
const (
	ISAAll ISA = iota
	ISASSE41
	ISAAVX
	ISAAVX2
	ISAAVX2VNNI
	ISAAVX512Core
	ISAAVX512CoreVNNI
	ISAAVX512CoreBF16
	ISAAVX512CoreAMX
	ISAOther ISA = 99
)

var isaNames = map[ISA]string{
	ISAAll: "all", ISASSE41: "sse41", ISAAVX: "avx", ISAAVX2: "avx2",
	ISAAVX2VNNI: "avx2_vnni", ISAAVX512Core: "avx512_core",
	ISAAVX512CoreVNNI: "avx512_core_vnni", ISAAVX512CoreBF16: "avx512_core_bf16",
	ISAAVX512CoreAMX: "avx512_core_amx", ISAOther: "other",
}

// ExactInt8 reports whether oneDNN's INT8 matmul at this effective ISA
// level is exact on full-range u8 x s8 and s8 x s8 data: the levels with
// VNNI (avx2_vnni, avx512_core_vnni, avx512_core_bf16, avx512_core_amx),
// whose VPDPBUSD adds each product to an int32. Below them (sse41, avx,
// avx2, avx512_core) oneDNN multiplies with VPMADDUBSW, whose int16 sum of
// two u8 x s8 products saturates (2 x 255 x 127 > 32767). "all" and "other"
// are levels this binding cannot vouch for and count as not exact.
// NewMatMul refuses what could saturate (ErrSaturation; docs/DESIGN.md
// section 5.1).
func (i ISA) ExactInt8() bool {
	switch i {
	case ISAAVX2VNNI, ISAAVX512CoreVNNI, ISAAVX512CoreBF16, ISAAVX512CoreAMX:
		return true
	}
	return false
}

// String returns oneDNN's name of the ISA level.
func (i ISA) String() string {
	if s, ok := isaNames[i]; ok {
		return s
	}
	return fmt.Sprintf("ISA(%d)", int(i))
}

// ParseISA turns a name printed by ISA.String (case-sensitive) into an ISA.
func ParseISA(s string) (ISA, error) {
	for k, v := range isaNames {
		if v == s && k != ISAOther {
			return k, nil
		}
	}
	return 0, fmt.Errorf("dnnl: unknown ISA %q: %w", s, ErrInvalidArgument)
}

// Info describes the oneDNN library this binary uses.
type Info struct {
	// Version is "major.minor.patch".
	Version string `json:"version"`
	// Hash is the git hash oneDNN was built from, if known.
	Hash string `json:"hash,omitempty"`
	// Runtime is the CPU threading runtime: "omp", "tbb", "seq", ...
	Runtime string `json:"runtime"`
	// ISA is the ISA level oneDNN dispatches to on this CPU.
	ISA ISA `json:"-"`
	// ISAName is ISA.String(), for JSON.
	ISAName string `json:"isa"`
}

func runtimeName(r uint) string {
	switch r {
	case 0:
		return "none"
	case 1:
		return "seq"
	case 2:
		return "omp"
	case 4:
		return "tbb"
	case 8:
		return "threadpool"
	}
	return fmt.Sprintf("runtime(%d)", r)
}
