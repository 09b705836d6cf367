package selector

import (
	"errors"
	"fmt"
	"strings"

	"github.com/int8bert/int8bert/kernels"
)

// ErrKey is wrapped by every error about a malformed key or epilogue kind.
var ErrKey = errors.New("selector: bad key")

// OpU8S8 is the operation of u8 activations times packed s8 weights
// (kernels.GEMMU8S8).
const OpU8S8 = "u8s8"

// OpF32 is the operation of f32 activations times packed f32 weights
// (kernels.GEMMF32) with an f32 destination. Its epilogue kinds are made of
// bias, an activation and a residual only ("none/f32", "bias+gelu/f32",
// "bias+residual/f32", ...).
const OpF32 = "f32"

// OpBF16 is the operation of f32 activations rounded to bfloat16 in the
// call times weights rounded to bfloat16 and packed once
// (kernels.GEMMBF16), float32 sums, with an f32 destination. Its epilogue
// kinds are OpF32's (bias, an activation, a residual; "bias+gelu/f32").
const OpBF16 = "bf16"

// OpF32Kernel is the operation of an FP32 product the caller runs itself
// on the native kernel the selector chose (Selector.KernelF32), B packed by
// the caller with that kernel's NR, no epilogue: attention's Q K^T and
// P V, whose B is an activation, not weights. Its candidates are those of
// OpF32 but oneDNN, its keys come from F32KernelKey.
const OpF32Kernel = "f32-kernel"

// OpBF16Kernel is OpF32Kernel in bfloat16 (Selector.KernelBF16): the
// product of f32 A rounded to bf16 in the call and B rounded and packed by
// the caller (kernels.PackBF16Into, PackBF16TInto) with the kernel's NR,
// float32 sums, no epilogue: the bf16 precision's attention (docs/DESIGN.md
// section 3.9). Its candidates are OpBF16's but oneDNN, its keys come from
// BF16KernelKey.
const OpBF16Kernel = "bf16-kernel"

// OpU8S8Kernel is the operation of a u8 x s8 product the caller runs
// itself on the native kernel the selector chose (Selector.KernelU8S8),
// B packed by the caller with that kernel's NR: INT8 attention's Q K^T
// and P V (docs/DESIGN.md section 3.10), whose B is an activation. Its
// candidates are those of OpU8S8 but oneDNN, its epilogue kinds those of
// OpU8S8, its keys come from U8S8KernelKey (every dimension bucketed).
const OpU8S8Kernel = "u8s8-kernel"

// BucketM returns the row class a choice is made for: the power of two at
// or above m (1, 2, 4, 8, ...). A class's key is tuned at its own M, and a
// call of fewer rows runs the measured candidate the tile cost model
// (Choice.pickAt, docs/DESIGN.md section 4.4) predicts fastest at its
// exact M, so that the few classes cost little tuning and lose little to
// the register tiles' waste.
func BucketM(m int) int {
	b := 1
	for b < m {
		b <<= 1
	}
	return b
}

// DType is the destination type of a GEMM.
type DType string

// The destination types.
const (
	S32 DType = "s32" // raw accumulators, no epilogue
	F32 DType = "f32"
	U8  DType = "u8" // requantized (Epilogue.OutScale > 0)
	S8  DType = "s8" // requantized (Epilogue.OutScale > 0)
)

// EpilogueKind is the shape of an epilogue, without its values: which
// steps of kernels.Epilogue run and what the destination type is. Kernels
// are chosen per kind, since a fused epilogue changes which is fastest.
type EpilogueKind struct {
	// ZeroPoint: compensation of a shifted u8 source (Epilogue.ZeroPoint).
	ZeroPoint bool
	// ActScale: a per-tensor activation scale; RowScale: one per row. At
	// most one is set (a set RowScale wins, as in kernels.Epilogue).
	ActScale, RowScale bool
	// ColScale: per-output-channel weight scales.
	ColScale bool
	// Bias, Act and Residual are the later steps.
	Bias     bool
	Act      kernels.Activation
	Residual bool
	// Out is the destination type; S32 only without any step.
	Out DType
}

// String returns the kind as steps joined by "+" (or "none"), a slash and
// the destination type: "zp+scale+colscale+bias+gelu/u8", "none/s32".
func (k EpilogueKind) String() string {
	var p []string
	add := func(on bool, s string) {
		if on {
			p = append(p, s)
		}
	}
	add(k.ZeroPoint, "zp")
	add(k.ActScale, "scale")
	add(k.RowScale, "rowscale")
	add(k.ColScale, "colscale")
	add(k.Bias, "bias")
	add(k.Act != kernels.ActNone, k.Act.String())
	add(k.Residual, "residual")
	if len(p) == 0 {
		p = []string{"none"}
	}
	return strings.Join(p, "+") + "/" + string(k.Out)
}

// empty reports whether the kind has no step.
func (k EpilogueKind) empty() bool {
	k.Out = ""
	return k == EpilogueKind{}
}

// Validate reports an inconsistent kind.
func (k EpilogueKind) Validate() error {
	switch k.Out {
	case S32:
		if !k.empty() {
			return fmt.Errorf("selector: epilogue %v: an s32 destination takes no epilogue: %w", k, ErrKey)
		}
	case F32, U8, S8:
	default:
		return fmt.Errorf("selector: epilogue %v: unknown destination %q: %w", k, k.Out, ErrKey)
	}
	if k.ActScale && k.RowScale {
		return fmt.Errorf("selector: epilogue %v: scale and rowscale together: %w", k, ErrKey)
	}
	if k.Act < kernels.ActNone || k.Act > kernels.ActReLU {
		return fmt.Errorf("selector: epilogue: unknown activation %d: %w", int(k.Act), ErrKey)
	}
	return nil
}

// ParseEpilogueKind parses the form EpilogueKind.String prints. The
// destination may be omitted ("bias+gelu" means "bias+gelu/f32"; "none"
// means "none/s32").
func ParseEpilogueKind(s string) (EpilogueKind, error) {
	var k EpilogueKind
	steps, out, ok := strings.Cut(strings.TrimSpace(s), "/")
	if ok {
		k.Out = DType(out)
	}
	for _, st := range strings.Split(steps, "+") {
		switch st {
		case "none", "":
		case "zp":
			k.ZeroPoint = true
		case "scale":
			k.ActScale = true
		case "rowscale":
			k.RowScale = true
		case "colscale":
			k.ColScale = true
		case "bias":
			k.Bias = true
		case "gelu":
			k.Act = kernels.ActGELU
		case "gelu_tanh":
			k.Act = kernels.ActGELUTanh
		case "relu":
			k.Act = kernels.ActReLU
		case "residual":
			k.Residual = true
		default:
			return EpilogueKind{}, fmt.Errorf("selector: epilogue %q: unknown step %q: %w", s, st, ErrKey)
		}
	}
	if k.Out == "" {
		k.Out = F32
		if k.empty() {
			k.Out = S32
		}
	}
	if err := k.Validate(); err != nil {
		return EpilogueKind{}, err
	}
	return k, nil
}

// KindOf returns the kind of ep writing to out. It fails when out has no or
// several destinations, or when ep and out do not fit together.
func KindOf(ep *kernels.Epilogue, out kernels.Out) (EpilogueKind, error) {
	var k EpilogueKind
	n := 0
	if out.S32 != nil {
		k.Out, n = S32, n+1
	}
	if out.F32 != nil {
		k.Out, n = F32, n+1
	}
	if out.U8 != nil {
		k.Out, n = U8, n+1
	}
	if out.S8 != nil {
		k.Out, n = S8, n+1
	}
	if n != 1 {
		return EpilogueKind{}, fmt.Errorf("selector: out has %d destinations, want 1: %w", n, ErrKey)
	}
	if ep != nil {
		k.ZeroPoint = ep.ZeroPoint != 0
		k.RowScale = ep.RowScale != nil
		k.ActScale = !k.RowScale && ep.ActScale != 0
		k.ColScale = ep.ColScale != nil
		k.Bias = ep.Bias != nil
		k.Act = ep.Act
		k.Residual = ep.Residual != nil
		if (k.Out == U8 || k.Out == S8) && !(ep.OutScale > 0) {
			return EpilogueKind{}, fmt.Errorf("selector: a %s destination needs Epilogue.OutScale > 0: %w", k.Out, ErrKey)
		}
		if k.Out == S32 {
			return EpilogueKind{}, fmt.Errorf("selector: an s32 destination takes no epilogue: %w", ErrKey)
		}
	} else if k.Out == U8 || k.Out == S8 {
		return EpilogueKind{}, fmt.Errorf("selector: a %s destination needs an epilogue with OutScale > 0: %w", k.Out, ErrKey)
	}
	return k, k.Validate()
}

// Key is what one choice is made for.
type Key struct {
	// Op is the operation: OpU8S8, OpF32, OpBF16, OpF32Kernel,
	// OpBF16Kernel or OpU8S8Kernel.
	Op string
	// M is the bucketed row count (BucketM), K the input features, N the
	// output features.
	M, K, N int
	// Epilogue is the kind of the fused epilogue and the destination type.
	Epilogue EpilogueKind
	// Threads is the thread count per call (>= 1).
	Threads int
}

// U8S8Key returns the key of a u8 x s8 GEMM of m rows with epilogue ep
// writing to out on threads threads (<= 1 means 1). M is bucketed.
func U8S8Key(m, k, n int, ep *kernels.Epilogue, out kernels.Out, threads int) (Key, error) {
	kind, err := KindOf(ep, out)
	if err != nil {
		return Key{}, err
	}
	return NewKey(OpU8S8, m, k, n, kind, threads)
}

// F32Kind returns the epilogue kind of an FP32 GEMM with epilogue ep: its
// bias, activation and residual, and an f32 destination. The INT8 fields of
// ep (zero point, scales, requantization) are ignored, as kernels.GEMMF32
// ignores them.
func F32Kind(ep *kernels.Epilogue) EpilogueKind {
	k := EpilogueKind{Out: F32}
	if ep != nil {
		k.Bias = ep.Bias != nil
		k.Act = ep.Act
		k.Residual = ep.Residual != nil
	}
	return k
}

// F32Key returns the key of an f32 x f32 GEMM of m rows with epilogue ep
// (F32Kind) on threads threads (<= 1 means 1). M is bucketed. A key of
// bad sizes or an unknown activation fails Key.Validate (and Choose).
func F32Key(m, k, n int, ep *kernels.Epilogue, threads int) Key {
	return floatKey(OpF32, m, k, n, ep, threads)
}

// BF16Key returns the key of a BF16 GEMM (OpBF16) of m rows with epilogue
// ep (F32Kind) on threads threads (<= 1 means 1). M is bucketed.
func BF16Key(m, k, n int, ep *kernels.Epilogue, threads int) Key {
	return floatKey(OpBF16, m, k, n, ep, threads)
}

// floatKey is the key of a call of op (OpF32, OpBF16) on float32
// activations.
func floatKey(op string, m, k, n int, ep *kernels.Epilogue, threads int) Key {
	return Key{Op: op, M: BucketM(m), K: k, N: n, Epilogue: F32Kind(ep), Threads: max(threads, 1)}
}

// F32KernelKey returns the key of an OpF32Kernel product of m x k by k x n
// on threads threads (<= 1 means 1). M, K and N are all bucketed
// (BucketM): attention's sizes are sequence lengths, tuned once per bucket.
func F32KernelKey(m, k, n, threads int) Key {
	return Key{Op: OpF32Kernel, M: BucketM(m), K: BucketM(k), N: BucketM(n), Epilogue: EpilogueKind{Out: F32}, Threads: max(threads, 1)}
}

// BF16KernelKey returns the key of an OpBF16Kernel product of m x k by
// k x n on threads threads (<= 1 means 1), every dimension bucketed as
// F32KernelKey's.
func BF16KernelKey(m, k, n, threads int) Key {
	return Key{Op: OpBF16Kernel, M: BucketM(m), K: BucketM(k), N: BucketM(n), Epilogue: EpilogueKind{Out: F32}, Threads: max(threads, 1)}
}

// U8S8KernelKey returns the key of an OpU8S8Kernel product of m x k by
// k x n with epilogue kind kind (KindOf) on threads threads (<= 1 means
// 1). M, K and N are all bucketed (BucketM), as F32KernelKey's.
func U8S8KernelKey(m, k, n int, kind EpilogueKind, threads int) (Key, error) {
	key := Key{Op: OpU8S8Kernel, M: BucketM(m), K: BucketM(k), N: BucketM(n), Epilogue: kind, Threads: max(threads, 1)}
	return key, key.Validate()
}

// NewKey returns a validated key with M bucketed and threads >= 1.
func NewKey(op string, m, k, n int, kind EpilogueKind, threads int) (Key, error) {
	key := Key{Op: op, M: BucketM(m), K: k, N: n, Epilogue: kind, Threads: max(threads, 1)}
	return key, key.Validate()
}

// Validate reports a malformed key.
func (k Key) Validate() error {
	switch k.Op {
	case OpU8S8:
	case OpF32, OpBF16:
		e := k.Epilogue
		if e.Out != F32 || e.ZeroPoint || e.ActScale || e.RowScale || e.ColScale {
			return fmt.Errorf("selector: key %v: an %s GEMM takes only bias, an activation and a residual, to f32: %w", k, k.Op, ErrKey)
		}
	case OpU8S8Kernel:
		if k.K != BucketM(k.K) || k.N != BucketM(k.N) {
			return fmt.Errorf("selector: key %v: a u8s8-kernel key's k and n are buckets (BucketM): %w", k, ErrKey)
		}
	case OpF32Kernel, OpBF16Kernel:
		if k.Epilogue != (EpilogueKind{Out: F32}) {
			return fmt.Errorf("selector: key %v: an %s product takes no epilogue (none/f32): %w", k, k.Op, ErrKey)
		}
		if k.K != BucketM(k.K) || k.N != BucketM(k.N) {
			return fmt.Errorf("selector: key %v: an %s key's k and n are buckets (BucketM): %w", k, k.Op, ErrKey)
		}
	default:
		return fmt.Errorf("selector: key %v: unknown operation %q: %w", k, k.Op, ErrKey)
	}
	if k.M < 1 || k.K < 1 || k.N < 1 || k.Threads < 1 {
		return fmt.Errorf("selector: key %v: sizes and threads must be >= 1: %w", k, ErrKey)
	}
	if k.M != BucketM(k.M) {
		return fmt.Errorf("selector: key %v: m=%d is not a bucket (BucketM gives %d): %w", k, k.M, BucketM(k.M), ErrKey)
	}
	return k.Epilogue.Validate()
}

// String is the key as the cache stores it:
// "u8s8 m=128 k=768 n=3072 ep=zp+scale+colscale+bias+gelu/u8 threads=1",
// "f32 m=128 k=768 n=3072 ep=bias+gelu/f32 threads=1".
func (k Key) String() string {
	return fmt.Sprintf("%s m=%d k=%d n=%d ep=%v threads=%d", k.Op, k.M, k.K, k.N, k.Epilogue, k.Threads)
}
