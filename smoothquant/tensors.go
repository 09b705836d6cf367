package smoothquant

import (
	"fmt"
	"math"
	"slices"

	"github.com/int8bert/int8bert/checkpoint"
)

// Tensor name suffixes of a quantized linear layer in the artifact.
const (
	TensorWeight       = "weight"         // I8 [N,K]
	TensorWeightScale  = "weight_scale"   // F32 [N]
	TensorBias         = "bias"           // F32 [N], optional
	TensorSmooth       = "smooth"         // F32 [K], optional
	TensorActScale     = "act_scale"      // F32 [1], static mode
	TensorActZeroPoint = "act_zero_point" // F32 [1], static mode
	TensorWeightF32    = "weight_f32"     // F32 [N,K], fallback layers only
)

// Tensors returns the artifact's tensors of q, named prefix + suffix
// (e.g. "int8.layer.3.ffn1.weight"): "weight" I8 [N,K], "weight_scale" F32
// [N], "bias" F32 [N] (if any), "smooth" F32 [K] (if any), "act_scale" and
// "act_zero_point" F32 [1] (when ActScale is set, i.e. static mode), and for
// a fallback layer "weight_f32" F32 [N,K] and "bias" only.
func (q *QLinear) Tensors(prefix string) map[string]checkpoint.Tensor {
	t := make(map[string]checkpoint.Tensor)
	if q.Bias != nil {
		t[prefix+TensorBias] = checkpoint.Float32Tensor([]int{len(q.Bias)}, q.Bias)
	}
	if q.Fallback {
		t[prefix+TensorWeightF32] = checkpoint.Float32Tensor([]int{q.N, q.K}, q.WF32)
		return t
	}
	t[prefix+TensorWeight] = checkpoint.Int8Tensor([]int{q.N, q.K}, q.W)
	t[prefix+TensorWeightScale] = checkpoint.Float32Tensor([]int{len(q.WScale)}, q.WScale)
	if q.Smooth != nil {
		t[prefix+TensorSmooth] = checkpoint.Float32Tensor([]int{len(q.Smooth)}, q.Smooth)
	}
	if q.ActScale != 0 {
		t[prefix+TensorActScale] = checkpoint.Float32Tensor([]int{1}, []float32{q.ActScale})
		t[prefix+TensorActZeroPoint] = checkpoint.Float32Tensor([]int{1}, []float32{float32(q.ActZeroPoint)})
	}
	return t
}

// TensorSource is what LoadQLinear reads from (checkpoint.Safetensors
// satisfies it).
type TensorSource interface {
	Float32(name string) ([]float32, []int, error)
	Int8(name string) ([]int8, []int, error)
	Names() []string
}

// LoadQLinear reads the tensors written by Tensors under prefix into a new
// QLinear (every slice a copy, so it outlives src), checking each shape
// against n and k and each value: weight scales finite and > 0, smooth
// factors finite and > 0, bias and FP32 weights finite, and in static mode
// act_scale finite and > 0 with an integer zero point in [0,255]. A missing,
// misshapen or invalid tensor is an error wrapping ErrInvalid that names it.
// In dynamic mode the activation parameters, if present, are ignored.
// Metadata (Name is prefix; Alpha, SQNR) comes from the recipe, not the
// tensors.
func LoadQLinear(src TensorSource, prefix string, n, k int, mode Mode) (*QLinear, error) {
	if src == nil || n <= 0 || k <= 0 || !mode.valid() {
		return nil, fmt.Errorf("smoothquant: load %q: n=%d k=%d mode=%v: %w", prefix, n, k, mode, ErrInvalid)
	}
	have := make(map[string]bool)
	for _, name := range src.Names() {
		have[name] = true
	}
	bad := func(suffix, format string, args ...any) error {
		return fmt.Errorf("smoothquant: tensor %q: %s: %w", prefix+suffix, fmt.Sprintf(format, args...), ErrInvalid)
	}
	f32 := func(suffix string, shape ...int) ([]float32, error) {
		v, sh, err := src.Float32(prefix + suffix)
		if err != nil {
			return nil, fmt.Errorf("smoothquant: tensor %q: %w: %w", prefix+suffix, ErrInvalid, err)
		}
		if !slices.Equal(sh, shape) || len(v) != product(shape) {
			return nil, bad(suffix, "shape %v (%d values), want %v", sh, len(v), shape)
		}
		for i, x := range v {
			if f := float64(x); math.IsNaN(f) || math.IsInf(f, 0) {
				return nil, bad(suffix, "value %d is %v", i, x)
			}
		}
		return append([]float32(nil), v...), nil
	}
	positive := func(suffix string, v []float32) error {
		for i, x := range v {
			if !(x > 0) {
				return bad(suffix, "value %d is %v, want > 0", i, x)
			}
		}
		return nil
	}
	q := &QLinear{Name: prefix, N: n, K: k}
	var err error
	if have[prefix+TensorBias] {
		if q.Bias, err = f32(TensorBias, n); err != nil {
			return nil, err
		}
	}
	if have[prefix+TensorWeightF32] {
		if have[prefix+TensorWeight] {
			return nil, bad(TensorWeightF32, "both FP32 (fallback) and int8 weights present")
		}
		q.Fallback = true
		if q.WF32, err = f32(TensorWeightF32, n, k); err != nil {
			return nil, err
		}
		return q, nil
	}
	w, sh, err := src.Int8(prefix + TensorWeight)
	if err != nil {
		return nil, fmt.Errorf("smoothquant: tensor %q: %w: %w", prefix+TensorWeight, ErrInvalid, err)
	}
	if !slices.Equal(sh, []int{n, k}) || len(w) != n*k {
		return nil, bad(TensorWeight, "shape %v (%d values), want [%d %d]", sh, len(w), n, k)
	}
	q.W = append([]int8(nil), w...)
	if q.WScale, err = f32(TensorWeightScale, n); err != nil {
		return nil, err
	}
	if err := positive(TensorWeightScale, q.WScale); err != nil {
		return nil, err
	}
	if have[prefix+TensorSmooth] {
		if q.Smooth, err = f32(TensorSmooth, k); err != nil {
			return nil, err
		}
		if err := positive(TensorSmooth, q.Smooth); err != nil {
			return nil, err
		}
	}
	if mode == Static {
		s, err := f32(TensorActScale, 1)
		if err != nil {
			return nil, err
		}
		if err := positive(TensorActScale, s); err != nil {
			return nil, err
		}
		zp, err := f32(TensorActZeroPoint, 1)
		if err != nil {
			return nil, err
		}
		if z := zp[0]; z != float32(math.Trunc(float64(z))) || z < 0 || z > 255 {
			return nil, bad(TensorActZeroPoint, "%v is not an integer in [0,255]", z)
		}
		q.ActScale, q.ActZeroPoint = s[0], int32(zp[0])
	}
	return q, nil
}

func product(shape []int) int {
	p := 1
	for _, d := range shape {
		p *= d
	}
	return p
}
