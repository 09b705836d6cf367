package smoothquant

import (
	"fmt"
	"math"

	"github.com/int8bert/int8bert/kernels"
	"github.com/int8bert/int8bert/selector"
)

// LinearSpec is one FP32 linear layer to quantize: W is [N][K] row-major
// (PyTorch Linear layout), Bias [N] or nil.
type LinearSpec struct {
	Name string
	N, K int
	W    []float32
	Bias []float32
	// Obs holds the statistics of the layer's input.
	Obs *Observer
	// NoSmooth: smoothing is not allowed for this linear (s = 1; alpha
	// reported as 0), e.g. when its input's quantization has no per-channel
	// pre-scale.
	NoSmooth bool
}

// QLinear is a quantized linear layer.
type QLinear struct {
	Name string
	N, K int
	// W is [N][K]: clamp(roundHalfEven(W[n][k]*Smooth[k] / WScale[n]), -127,
	// 127), symmetric per output channel.
	W []int8
	// WScale is [N]: max_k |W[n][k]*Smooth[k]| / 127 (an all-zero row: 1).
	WScale []float32
	// Bias is [N] FP32 (a copy) or nil.
	Bias []float32
	// Smooth is [K] s: the input is multiplied by 1/s before quantization;
	// nil means no smoothing (all ones).
	Smooth []float32
	// Static mode: per-tensor asymmetric u8 parameters of the smoothed input
	// X/s: q = sat_u8(RNE(x*(1/ActScale) + ActZeroPoint)); see
	// StaticActParams. Zero in dynamic mode.
	ActScale     float32
	ActZeroPoint int32
	// Alpha is the migration strength used (0 when smoothing is not allowed).
	Alpha float64
	// SQNR (dB) of the layer output on the observer's sample,
	// 10*log10(sum y_fp32^2 / sum (y_q - y_fp32)^2) with y without bias;
	// +Inf when exact. SQNRs holds the SQNR of every alpha tried.
	SQNR  float64
	SQNRs map[float64]float64
	// Fallback: the layer stays FP32 (Options.FallbackSQNR); WF32 then holds
	// a copy of its FP32 weights and W, WScale, Smooth and the activation
	// parameters are empty.
	Fallback bool
	WF32     []float32
}

// selectorOr returns sel, or selector.Default() when sel is nil.
func selectorOr(sel *selector.Selector) (*selector.Selector, error) {
	if sel != nil {
		return sel, nil
	}
	sel, err := selector.Default()
	if err != nil {
		return nil, fmt.Errorf("smoothquant: %w", err)
	}
	return sel, nil
}

// fp32Output returns x ([rows][k]) times w^T ([n][k]), no bias, on the
// kernel sel chooses.
func fp32Output(sel *selector.Selector, w []float32, n, k int, x []float32, rows, threads int) ([]float32, error) {
	l, err := sel.NewLinearF32(n, k, w, k)
	if err != nil {
		return nil, fmt.Errorf("smoothquant: %w: %w", ErrInvalid, err)
	}
	defer l.Close()
	c := make([]float32, rows*n)
	if err := l.Run(&kernels.GEMMF32{M: rows, A: x, Lda: k, C: c, Ldc: n, Threads: threads}); err != nil {
		return nil, fmt.Errorf("smoothquant: fp32 gemm: %w: %w", ErrInvalid, err)
	}
	return c, nil
}

// invSmooth returns the runtime's per-channel pre-scale 1/s in float32
// (nil for no smoothing).
func invSmooth(s []float32) []float32 {
	if s == nil {
		return nil
	}
	inv := make([]float32, len(s))
	for j, v := range s {
		inv[j] = 1 / v
	}
	return inv
}

// smoothInput returns x*inv per channel, rounded to float32 as the runtime's
// fused quantize step does (x itself when inv is nil).
func smoothInput(x []float32, rows, k int, inv []float32) []float32 {
	if inv == nil {
		return x
	}
	xs := make([]float32, rows*k)
	for i := 0; i < rows; i++ {
		src, dst := x[i*k:i*k+k], xs[i*k:i*k+k]
		for j, v := range src {
			dst[j] = v * inv[j]
		}
	}
	return xs
}

// simulate runs the quantized GEMM on the smoothed input xs ([rows][K])
// with q's weights, on the kernel sel chooses, as the runtime does.
func (q *QLinear) simulate(sel *selector.Selector, mode Mode, xs []float32, rows int, threads int) ([]float32, error) {
	n, k := q.N, q.K
	l, err := sel.NewLinear(n, k, q.W, k)
	if err != nil {
		return nil, fmt.Errorf("smoothquant: %s: %w: %w", q.Name, ErrInvalid, err)
	}
	defer l.Close()
	a := make([]uint8, rows*k)
	ep := &kernels.Epilogue{ColSum: l.ColSum(), ColScale: q.WScale}
	switch mode {
	case Static:
		if !(q.ActScale > 0) || q.ActZeroPoint < 0 || q.ActZeroPoint > 255 {
			return nil, fmt.Errorf("smoothquant: %s: static mode needs act_scale > 0 and a zero point in [0,255] (have %v, %d): %w", q.Name, q.ActScale, q.ActZeroPoint, ErrInvalid)
		}
		if err := kernels.QuantizeTensorU8(a, xs, rows, k, q.ActScale, q.ActZeroPoint); err != nil {
			return nil, fmt.Errorf("smoothquant: %s: %w: %w", q.Name, ErrCalibration, err)
		}
		ep.ZeroPoint, ep.ActScale = q.ActZeroPoint, q.ActScale
	case Dynamic:
		scales := make([]float32, rows)
		if err := kernels.QuantizeRowsU8(a, scales, xs, rows, k); err != nil {
			return nil, fmt.Errorf("smoothquant: %s: %w: %w", q.Name, ErrCalibration, err)
		}
		ep.ZeroPoint, ep.RowScale = 128, scales
	default:
		return nil, fmt.Errorf("smoothquant: unknown mode %d: %w", int(mode), ErrInvalid)
	}
	y := make([]float32, rows*n)
	if err := l.Run(&kernels.GEMMU8S8{M: rows, A: a, Lda: k, Ep: ep, Out: kernels.Out{F32: y, Ldc: n}, Threads: threads}); err != nil {
		return nil, fmt.Errorf("smoothquant: %s: u8s8 gemm: %w: %w", q.Name, ErrInvalid, err)
	}
	return y, nil
}

func (q *QLinear) check() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("smoothquant: qlinear %q: %s: %w", q.Name, fmt.Sprintf(format, args...), ErrInvalid)
	}
	if q.N <= 0 || q.K <= 0 {
		return bad("n=%d k=%d", q.N, q.K)
	}
	if q.Bias != nil && len(q.Bias) != q.N {
		return bad("len(bias)=%d, want %d", len(q.Bias), q.N)
	}
	if q.Fallback {
		if len(q.WF32) != q.N*q.K {
			return bad("len(weight_f32)=%d, want %d", len(q.WF32), q.N*q.K)
		}
		return nil
	}
	if len(q.W) != q.N*q.K || len(q.WScale) != q.N {
		return bad("len(weight)=%d len(weight_scale)=%d, want %d and %d", len(q.W), len(q.WScale), q.N*q.K, q.N)
	}
	if q.Smooth != nil && len(q.Smooth) != q.K {
		return bad("len(smooth)=%d, want %d", len(q.Smooth), q.K)
	}
	return nil
}

// SimulateOutput computes, on rows x ([rows][K]), the layer output
// y = Q(x) W_q^T dequantized (no bias) the way the runtime does: the input
// is multiplied per channel by the float32 1/s (Smooth), then
//
//   - Static: per-tensor asymmetric u8 with ActScale and ActZeroPoint
//     (kernels.QuantizeTensorU8);
//   - Dynamic: per-row symmetric, scale_i = max_j |x_ij/s_j| / 127 (a zero
//     row: 1), q = clamp(RNE((x_ij/s_j) * (1/scale_i)), -128, 127), stored as
//     u8 with +128 (kernels.QuantizeRowsU8),
//
// and the u8 x s8 GEMM's epilogue removes the zero point with the weights'
// column sums and applies the activation and weight scales. A fallback layer
// returns its FP32 output x*WF32^T. The GEMMs run on the kernels sel
// chooses (nil: selector.Default()).
func (q *QLinear) SimulateOutput(sel *selector.Selector, mode Mode, x []float32, rows int) ([]float32, error) {
	if q == nil {
		return nil, fmt.Errorf("smoothquant: nil qlinear: %w", ErrInvalid)
	}
	if err := q.check(); err != nil {
		return nil, err
	}
	if !mode.valid() {
		return nil, fmt.Errorf("smoothquant: unknown mode %d: %w", int(mode), ErrInvalid)
	}
	if rows < 0 || len(x) < rows*q.K {
		return nil, fmt.Errorf("smoothquant: %s: simulate rows=%d k=%d: len(x)=%d: %w", q.Name, rows, q.K, len(x), ErrInvalid)
	}
	if err := checkFinite(x, rows, q.K); err != nil {
		return nil, err
	}
	if rows == 0 {
		return []float32{}, nil
	}
	sel, err := selectorOr(sel)
	if err != nil {
		return nil, err
	}
	if q.Fallback {
		return fp32Output(sel, q.WF32, q.N, q.K, x, rows, 1)
	}
	return q.simulate(sel, mode, smoothInput(x, rows, q.K, invSmooth(q.Smooth)), rows, 1)
}

func checkFinite(x []float32, rows, k int) error {
	for i := 0; i < rows; i++ {
		for j, v := range x[i*k : i*k+k] {
			if f := float64(v); math.IsNaN(f) || math.IsInf(f, 0) {
				return fmt.Errorf("smoothquant: row %d column %d is %v: %w", i, j, v, ErrCalibration)
			}
		}
	}
	return nil
}

// QuantizeLinear quantizes spec under o. It chooses alpha (o.FixedAlpha(), or with
// o.Auto the alpha of the grid whose SQNR on the observer's sample is
// highest, the smaller alpha on a tie; 0 with spec.NoSmooth), computes
// Smooth, the int8 weights, the static activation parameters (Static mode;
// 0 and 0 for Dynamic), the SQNR, and the fallback decision
// (o.FallbackSQNR). The FP32 reference output and the quantized outputs
// are computed on the kernels o.Selector (or selector.Default()) chooses, as
// the runtime's are, on o.Threads goroutines.
func QuantizeLinear(spec LinearSpec, o Options) (*QLinear, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	n, k := spec.N, spec.K
	bad := func(format string, args ...any) error {
		return fmt.Errorf("smoothquant: linear %q: %s: %w", spec.Name, fmt.Sprintf(format, args...), ErrInvalid)
	}
	if n <= 0 || k <= 0 {
		return nil, bad("n=%d k=%d", n, k)
	}
	if len(spec.W) != n*k {
		return nil, bad("len(W)=%d, want %d", len(spec.W), n*k)
	}
	if spec.Bias != nil && len(spec.Bias) != n {
		return nil, bad("len(bias)=%d, want %d", len(spec.Bias), n)
	}
	for i, v := range spec.W {
		if f := float64(v); math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, bad("weight [%d][%d] is %v", i/k, i%k, v)
		}
	}
	for i, v := range spec.Bias {
		if f := float64(v); math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, bad("bias [%d] is %v", i, v)
		}
	}
	if spec.Obs == nil {
		return nil, bad("no observer")
	}
	if spec.Obs.K != k {
		return nil, bad("observer has %d channels, want %d", spec.Obs.K, k)
	}
	x, rows := spec.Obs.Sample()
	if spec.Obs.Rows() == 0 || rows == 0 {
		return nil, fmt.Errorf("smoothquant: linear %q: observer saw no rows: %w", spec.Name, ErrCalibration)
	}
	threads := max(o.Threads, 1)
	sel, err := selectorOr(o.Selector)
	if err != nil {
		return nil, err
	}
	ref, err := fp32Output(sel, spec.W, n, k, x, rows, threads)
	if err != nil {
		return nil, err
	}
	actAbs, cmin, cmax := spec.Obs.AbsMax(), spec.Obs.ChannelMin(), spec.Obs.ChannelMax()
	wcol := WeightColMax(spec.W, n, k)
	alphas := o.grid()
	if spec.NoSmooth {
		alphas = []float64{0}
	}
	var best *QLinear
	sqnrs := make(map[float64]float64, len(alphas))
	for _, alpha := range alphas {
		c := &QLinear{Name: spec.Name, N: n, K: k, Alpha: alpha}
		if !spec.NoSmooth {
			c.Smooth = SmoothFactors(actAbs, wcol, alpha)
		}
		c.W, c.WScale = quantizeWeights(spec.W, n, k, c.Smooth, threads)
		inv := invSmooth(c.Smooth)
		xs := smoothInput(x, rows, k, inv)
		if o.Mode == Static {
			var lo, hi float32
			if o.Range == RangePercentile {
				lo, hi = percentileRange(xs, o.percentile())
			} else {
				lo, hi = smoothedRange(cmin, cmax, inv)
			}
			c.ActScale, c.ActZeroPoint = StaticActParams(lo, hi)
		}
		y, err := c.simulate(sel, o.Mode, xs, rows, threads)
		if err != nil {
			return nil, err
		}
		c.SQNR = SQNR(ref, y)
		sqnrs[alpha] = c.SQNR
		if best == nil || c.SQNR > best.SQNR {
			best = c
		}
	}
	best.SQNRs = sqnrs
	if spec.Bias != nil {
		best.Bias = append([]float32(nil), spec.Bias...)
	}
	if o.FallbackSQNR != 0 && best.SQNR < o.FallbackSQNR {
		best.Fallback = true
		best.WF32 = append([]float32(nil), spec.W...)
		best.W, best.WScale, best.Smooth = nil, nil, nil
		best.ActScale, best.ActZeroPoint = 0, 0
	}
	return best, nil
}

// smoothedRange returns the minimum and maximum over channels of the
// observed signed extremes times the pre-scale inv (nil: 1). Multiplying by
// a positive float32 is monotone, so these are the extremes of the smoothed
// input the runtime would have seen.
func smoothedRange(cmin, cmax, inv []float32) (lo, hi float32) {
	for j := range cmin {
		a, b := cmin[j], cmax[j]
		if inv != nil {
			a, b = a*inv[j], b*inv[j]
		}
		lo, hi = min(lo, a), max(hi, b)
	}
	return lo, hi
}

// percentileRange returns the nearest-rank (100-p)-th and p-th percentiles
// of v: with c = ceil(p/100 * len(v)) values kept at each end, hi is the c-th
// smallest value and lo the c-th largest. v is not modified.
func percentileRange(v []float32, p float64) (lo, hi float32) {
	n := len(v)
	if n == 0 {
		return 0, 0
	}
	c := int(math.Ceil(p / 100 * float64(n)))
	c = min(max(c, 1), n)
	w := append([]float32(nil), v...)
	hi = selectNth(w, c-1)
	lo = selectNth(w, n-c)
	return lo, hi
}

// selectNth reorders v so that v[k] is the value it would hold sorted
// ascending, and returns it (Hoare's quickselect, middle pivot).
func selectNth(v []float32, k int) float32 {
	lo, hi := 0, len(v)-1
	for lo < hi {
		pivot := v[lo+(hi-lo)/2]
		i, j := lo, hi
		for i <= j {
			for v[i] < pivot {
				i++
			}
			for v[j] > pivot {
				j--
			}
			if i <= j {
				v[i], v[j] = v[j], v[i]
				i++
				j--
			}
		}
		switch {
		case k <= j:
			hi = j
		case k >= i:
			lo = i
		default:
			return v[k]
		}
	}
	return v[k]
}
