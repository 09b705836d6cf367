package encoder

import (
	"fmt"
	"time"

	"github.com/int8bert/int8bert/kernels"
	"github.com/int8bert/int8bert/selector"
	"github.com/int8bert/int8bert/smoothquant"
)

// The four linears of a layer, in the order a forward pass runs them.
const (
	linQKV = iota
	linO
	linFFN1
	linFFN2
	numLin
)

// linNames are the linears' names in the INT8 artifact
// ("int8.layer.<i>.<name>.").
var linNames = [numLin]string{"qkv", "o", "ffn1", "ffn2"}

// linDims are the [N, K] of each linear of a layer of c.
func linDims(c Config) [numLin][2]int {
	h, in := c.Hidden, c.Intermediate
	return [numLin][2]int{linQKV: {3 * h, h}, linO: {h, h}, linFFN1: {in, h}, linFFN2: {h, in}}
}

// readLinears reads the FP32 weights and biases of one layer's linears
// from l, Q, K and V fused into one [3H][H] projection (Q rows first).
func readLinears(l *Loader, n LayerNames, c Config) (w, b [numLin][]float32, err error) {
	h, in := c.Hidden, c.Intermediate
	get := func(name string, shape ...int) []float32 {
		if err != nil {
			return nil
		}
		var v []float32
		v, err = l.Get(name, shape...)
		return v
	}
	q, k, v := get(n.Q, h, h), get(n.K, h, h), get(n.V, h, h)
	qb, kb, vb := get(n.QBias, h), get(n.KBias, h), get(n.VBias, h)
	w[linO], b[linO] = get(n.O, h, h), get(n.OBias, h)
	w[linFFN1], b[linFFN1] = get(n.FFN1, in, h), get(n.FFN1Bias, in)
	w[linFFN2], b[linFFN2] = get(n.FFN2, h, in), get(n.FFN2Bias, h)
	if err != nil {
		return w, b, err
	}
	w[linQKV] = append(append(append(make([]float32, 0, 3*h*h), q...), k...), v...)
	b[linQKV] = append(append(append(make([]float32, 0, 3*h), qb...), kb...), vb...)
	return w, b, nil
}

// qlinPrefix is the tensor name prefix of layer li's linear which in the
// INT8 artifact.
func qlinPrefix(li, which int) string {
	return fmt.Sprintf("int8.layer.%d.%s.", li, linNames[which])
}

// observeFunc sees the input x ([rows][k]) of linear which of layer li
// during calibration, with the pass's mask (rows values; nil: every row
// is a real token, as in packed inputs).
type observeFunc func(li, which int, x []float32, k int, mask []int32) error

// qlin is one linear of an INT8 model: int8 weights on the selector, or
// the FP32 weights of a layer that fell back.
type qlin struct {
	q   *smoothquant.QLinear
	lin *selector.Linear[kernels.GEMMU8S8] // nil for a fallback
	f32 *selector.Linear[kernels.GEMMF32]  // fallback only
	// pre is the per-channel 1/s the input is multiplied by before it is
	// quantized (nil: none, or folded into the producer's weights).
	pre []float32
}

// qlayer is one INT8 layer: its linears and LayerNorms.
type qlayer struct {
	lin                [numLin]*qlin
	attnLN, attnLNBias []float32
	outLN, outLNBias   []float32
}

func (q *qlayer) close() {
	for _, l := range q.lin {
		if l == nil {
			continue
		}
		if l.lin != nil {
			l.lin.Close()
		}
		if l.f32 != nil {
			l.f32.Close()
		}
	}
}

// newQlin prepares a quantized linear on sel. folded says its smoothing is
// already in its input (the O projection's, moved into V).
func newQlin(sel *selector.Selector, q *smoothquant.QLinear, folded bool) (*qlin, error) {
	l := &qlin{q: q}
	var err error
	if q.Fallback {
		l.f32, err = sel.NewLinearF32(q.N, q.K, q.WF32, q.K)
		// The selector's Linear holds the weights from now on: the
		// QLinear keeps its scales, bias and smoothing only.
		q.WF32 = nil
		return l, err
	}
	if l.lin, err = sel.NewLinear(q.N, q.K, q.W, q.K); err != nil {
		return nil, err
	}
	q.W = nil
	if q.Smooth != nil && !folded {
		l.pre = make([]float32, q.K)
		for i, s := range q.Smooth {
			l.pre[i] = 1 / s
		}
	}
	return l, nil
}

// int8 reports whether the linear runs in INT8.
func (l *qlin) int8() bool { return l.lin != nil }

// staticParams is the fused quantize step a producer (LayerNorm) runs for
// this linear's input in static mode, written to dst (the pass's scratch:
// nothing allocated per call); nil when the linear is not INT8.
func (l *qlin) staticParams(dst *kernels.QuantParams) *kernels.QuantParams {
	if !l.int8() {
		return nil
	}
	*dst = kernels.QuantParams{PreScale: l.pre, Scale: l.q.ActScale, ZeroPoint: l.q.ActZeroPoint}
	return dst
}

// qin is the quantized input of a linear: u8 rows and, in dynamic mode,
// their scales. ld, when not 0, is the row stride of u8 (u8Ld of K for
// FFN2's input, which FFN1's requantizing epilogue or quantize writes);
// 0 means rows K apart.
type qin struct {
	u8     []uint8
	scales []float32
	ld     int
}

// padU8 enables u8Ld's padding (tests compare with it off).
var padU8 = true

// u8Ld is the row stride of a u8 buffer whose rows are k bytes wide and
// that a GEMM reads as its A: kernels.RowStrideU8(k) (k plus one cache
// line when k is a multiple of 4096, BERT-large's FFN intermediate), the
// stride the selector times the u8s8 kernels at; k when padU8 is off.
func u8Ld(k int) int {
	if !padU8 {
		return k
	}
	return kernels.RowStrideU8(k)
}

// rowStride is the row stride of q for rows k wide.
func (q *qin) rowStride(k int) int {
	if q.ld > 0 {
		return q.ld
	}
	return k
}

// quantize makes the INT8 input of l from x ([rows][K]) into dst: per token
// in dynamic mode, with the calibrated per-tensor scale in static mode
// (used where no producer fused the step).
func (l *qlin) quantize(mode smoothquant.Mode, x []float32, rows int, dst *qin, tmp []float32, threads int) error {
	if threads <= 1 {
		return l.quantizeRows(mode, x, 0, rows, dst, tmp)
	}
	// Each row is quantized alone (its own scale in dynamic mode, the
	// calibrated one in static mode): chunks of rows on the pass's
	// threads give the same bits.
	return kernels.ParallelRows(threads, rows, rowChunk, func(r0, r1 int) error {
		return l.quantizeRows(mode, x, r0, r1, dst, tmp)
	})
}

// quantizeRows is quantize of rows [r0, r1).
func (l *qlin) quantizeRows(mode smoothquant.Mode, x []float32, r0, r1 int, dst *qin, tmp []float32) error {
	k, rows := l.q.K, r1-r0
	if ld := dst.rowStride(k); ld != k {
		// A padded destination (FFN2's input, u8Ld): row by row.
		for i := r0; i < r1; i++ {
			row := qin{u8: dst.u8[i*ld : i*ld+k]}
			if dst.scales != nil {
				row.scales = dst.scales[i : i+1]
			}
			var t []float32 // static mode's pre-scaled row, when l.pre is set
			if tmp != nil {
				t = tmp[i*k:]
			}
			if err := l.quantizeRows(mode, x[i*k:(i+1)*k], 0, 1, &row, t); err != nil {
				return err
			}
		}
		return nil
	}
	x = x[r0*k : r1*k]
	u8 := dst.u8[r0*k : r1*k]
	if mode == smoothquant.Dynamic {
		return kernels.QuantizeRowsU8Pre(u8, dst.scales[r0:r1], x, rows, k, l.pre)
	}
	src := x
	if l.pre != nil {
		src = tmp[r0*k : r1*k]
		for i := 0; i < rows; i++ {
			r, xr := src[i*k:(i+1)*k], x[i*k:(i+1)*k]
			for j, p := range l.pre[:k] {
				r[j] = xr[j] * p
			}
		}
	}
	return kernels.QuantizeTensorU8(u8, src, rows, k, l.q.ActScale, l.q.ActZeroPoint)
}

// epilogue is the INT8 epilogue of l for an input quantized in mode.
func (l *qlin) epilogue(mode smoothquant.Mode, in *qin, rows int) *kernels.Epilogue {
	ep := &kernels.Epilogue{ColSum: l.lin.ColSum(), ColScale: l.q.WScale, Bias: l.q.Bias}
	if mode == smoothquant.Dynamic {
		ep.ZeroPoint = 128
		ep.RowScale = in.scales[:rows]
	} else {
		ep.ZeroPoint = l.q.ActZeroPoint
		ep.ActScale = l.q.ActScale
	}
	return ep
}

// runQ computes out = act(l(x)) + residual. in is the INT8 input when a
// producer already made it (static mode); otherwise it is made here from
// x. act and residual may be zero; a u8 destination requantizes to
// (outScale, outZP).
func (p *int8Pass) runQ(m *Model, l *qlin, rows int, x []float32, in *qin, quantized bool, act kernels.Activation, res []float32,
	out kernels.Out, outScale float32, outZP int32, s *qscratch) error {
	if !l.int8() {
		ep := &kernels.Epilogue{Bias: l.q.Bias, Act: act, Residual: res}
		return l.f32.RunAs(&kernels.GEMMF32{M: rows, A: x, Lda: l.q.K, Ep: ep, C: out.F32, Ldc: out.Ldc, Threads: m.threads}, s.asRows)
	}
	mode := p.mode
	if !quantized {
		if err := l.quantize(mode, x, rows, in, s.tmp, m.threads); err != nil {
			return err
		}
	}
	lda := in.rowStride(l.q.K)
	ep := l.epilogue(mode, in, rows)
	ep.Act, ep.Residual = act, res
	ep.OutScale, ep.OutZeroPoint = outScale, outZP
	return l.lin.RunAs(&kernels.GEMMU8S8{M: rows, A: in.u8, Lda: lda, Ep: ep, Out: out, Threads: m.threads}, s.asRows)
}

// qscratch is an INT8 forward pass's buffers (a view of buffers): the
// FP32 intermediates and the u8 inputs of the linears.
type qscratch struct {
	*scratch
	xq, ctxq, fq qin
	tmp          []float32
	qp           kernels.QuantParams // staticParams's, one at a time
}

// layer runs INT8 layer li of m in place on x (pass.layer; the pass has
// no observer). xqReady says s.xq already holds x quantized for the QKV
// projection (static mode); the result says the same of the next layer.
func (p *int8Pass) layer(m *Model, li int, x []float32, in *Inputs, s *qscratch, _ observeFunc, xqReady bool) (bool, error) {
	ly := &p.layers[li]
	h, rows, inter := m.cfg.Hidden, s.rows, m.cfg.Intermediate
	static := p.mode == smoothquant.Static
	prof := m.prof
	fl := func(n, k int) float64 { return 2 * float64(rows) * float64(n) * float64(k) }
	qkv, o, f1, f2 := ly.lin[linQKV], ly.lin[linO], ly.lin[linFFN1], ly.lin[linFFN2]

	t := time.Now()
	if err := p.runQ(m, qkv, rows, x, &s.xq, xqReady, kernels.ActNone, nil, kernels.Out{F32: s.qkv, Ldc: 3 * h}, 0, 0, s); err != nil {
		return false, fmt.Errorf("qkv: %w", err)
	}
	prof.add(partLinear, t, fl(3*h, h))
	t = time.Now()
	// In static mode attention writes the O projection's u8 input itself
	// (O's smoothing is folded into V, so no per-channel multiply).
	var aq *attnQuant
	if static && o.int8() && o.pre == nil {
		aq = &attnQuant{dst: s.ctxq.u8, scale: o.q.ActScale, zp: o.q.ActZeroPoint}
	}
	s.layer = li
	// A one-thread dynamic pass quantizes each sequence's context for O
	// as soon as its last head is done, while its rows are in L2 (the
	// separate step read the whole context back); when the spans cover
	// the rows in order, so that this quantizes each row once.
	ctxQ := aq != nil
	if !static && o.int8() && m.threads <= 1 && spansCover(s.spans, rows) {
		s.seqDone = func(bi int) error {
			sp := &s.spans[bi]
			if err := o.quantizeRows(smoothquant.Dynamic, s.ctx, sp.off, sp.off+sp.n, &s.ctxq, nil); err != nil {
				return fmt.Errorf("attention output: %w", err)
			}
			return nil
		}
		ctxQ = true
	}
	err := m.attentionQ(in, s.scratch, aq)
	s.seqDone = nil
	if err != nil {
		return false, err
	}
	prof.add(partAttention, t, 0)

	t = time.Now()
	if err := p.runQ(m, o, rows, s.ctx, &s.ctxq, ctxQ, kernels.ActNone, x, kernels.Out{F32: s.t, Ldc: h}, 0, 0, s); err != nil {
		return false, fmt.Errorf("attention output: %w", err)
	}
	prof.add(partLinear, t, fl(h, h))

	t = time.Now()
	var qp *kernels.QuantParams
	var q []uint8
	if static {
		if qp = f1.staticParams(&s.qp); qp != nil {
			q = s.xq.u8
		}
	}
	// ffnQ: s.xq holds x quantized for FFN1 (the LayerNorm's fused step,
	// static, or its row blocks quantized as they come, dynamic).
	ffnQ := qp != nil
	if static {
		if err := m.layerNorm(x, q, s.t, rows, ly.attnLN, ly.attnLNBias, qp); err != nil {
			return false, fmt.Errorf("attention layer norm: %w", err)
		}
	} else {
		var err error
		if ffnQ, err = p.layerNormDyn(m, f1, x, s.t, rows, ly.attnLN, ly.attnLNBias, &s.xq); err != nil {
			return false, fmt.Errorf("attention layer norm: %w", err)
		}
	}
	prof.add(partLayerNorm, t, 0)

	t = time.Now()
	// FFN1 writes u8 for FFN2 in static mode when both are INT8 and FFN2
	// has no per-channel smoothing (the epilogue requantizes per tensor
	// only; an artifact whose FFN2 is smoothed is quantized separately).
	f1Out := kernels.Out{F32: s.f, Ldc: inter}
	var outScale float32
	var outZP int32
	fused := static && f1.int8() && f2.int8() && f2.pre == nil
	if fused {
		f1Out = kernels.Out{U8: s.fq.u8, Ldc: s.fq.ld}
		outScale, outZP = f2.q.ActScale, f2.q.ActZeroPoint
	}
	if err := p.ffn(m, f1, f2, rows, x, ffnQ, fused, f1Out, outScale, outZP, s); err != nil {
		return false, err
	}
	prof.add(partLinear, t, 2*fl(inter, h))

	t = time.Now()
	if !static {
		var next *qlin
		if li+1 < len(p.layers) {
			next = p.layers[li+1].lin[linQKV]
		}
		ready, err := p.layerNormDyn(m, next, x, s.t, rows, ly.outLN, ly.outLNBias, &s.xq)
		if err != nil {
			return false, fmt.Errorf("output layer norm: %w", err)
		}
		prof.add(partLayerNorm, t, 0)
		return ready, nil
	}
	qp, q = nil, nil
	if li+1 < len(p.layers) {
		if qp = p.layers[li+1].lin[linQKV].staticParams(&s.qp); qp != nil {
			q = s.xq.u8
		}
	}
	if err := m.layerNorm(x, q, s.t, rows, ly.outLN, ly.outLNBias, qp); err != nil {
		return false, fmt.Errorf("output layer norm: %w", err)
	}
	prof.add(partLayerNorm, t, 0)
	return qp != nil, nil
}

// spansCover reports whether spans are the rows [0, rows) in order, one
// after the other.
func spansCover(spans []span, rows int) bool {
	off := 0
	for _, sp := range spans {
		if sp.off != off {
			return false
		}
		off += sp.n
	}
	return off == rows
}

// lnQuantRows is how many rows a dynamic pass's LayerNorm normalizes
// before it quantizes them for the next linear (layerNormDyn): 8 rows of
// BERT-base's 768 floats are 24 KiB, in L1.
const lnQuantRows = 8

// layerNormDyn is the LayerNorm of src into x ([rows][Hidden]) of a
// one-thread dynamic pass, each block of lnQuantRows rows quantized per row for l
// into dst as soon as it is normalized, while it is in L1: the separate
// quantize step read the whole of x back (3 MiB at 1,024 rows of
// BERT-base, from L3 or memory). Each row is normalized and quantized
// alone, as before: the same bits. l nil or not INT8, or more threads
// (each quantizes its rows in runQ): the LayerNorm only; the result says
// dst holds x quantized.
func (p *int8Pass) layerNormDyn(m *Model, l *qlin, x, src []float32, rows int, gamma, beta []float32, dst *qin) (bool, error) {
	if l == nil || !l.int8() || m.threads > 1 {
		return false, m.layerNorm(x, nil, src, rows, gamma, beta, nil)
	}
	h := m.cfg.Hidden
	for a := 0; a < rows; a += lnQuantRows {
		b := min(a+lnQuantRows, rows)
		if err := m.layerNorm(x[a*h:b*h], nil, src[a*h:b*h], b-a, gamma, beta, nil); err != nil {
			return false, err
		}
		if err := l.quantizeRows(smoothquant.Dynamic, x, a, b, dst, nil); err != nil {
			return false, fmt.Errorf("quantize: %w", err)
		}
	}
	return true, nil
}

// ffnChunkRows is the rows of the chunks a one-thread dynamic pass runs its
// FFN in (int8Pass.ffn). It is the largest row class the selector times
// (selector.Options.DeriveAbove's default): the classes above it take its
// choice, so a pass that meets a larger class has tuned this one.
const ffnChunkRows = selector.DefaultDeriveAbove

// ffnChunkScratch is where a chunk of n rows of int8Pass.ffn puts FFN1's
// FP32 output and its quantization for FFN2: the first n rows of s.f and
// s.fq, the same for every chunk. A chunk's intermediate is dead once
// FFN2 has read it, so the chunks need not keep theirs apart: 3 MiB of
// FP32 and 768 KiB of u8 at 256 rows of BERT-base, which stay in the
// caches from one chunk to the next, where a region per chunk (12 MiB
// of FP32 at 1,024 rows, 48 MiB at 4,096) was written back to memory
// and read again (write-allocated) by every layer.
func ffnChunkScratch(s *qscratch, n, inter int) ([]float32, qin) {
	ld := s.fq.rowStride(inter)
	return s.f[:n*inter], qin{u8: s.fq.u8[:n*ld], scales: s.fq.scales[:n], ld: ld}
}

// ffn runs FFN1 (x to s.f, or to s.fq's u8 when fused) and FFN2 (to s.t,
// x its residual) over rows. A one-thread dynamic pass of more than
// ffnChunkRows rows runs both in chunks of ffnChunkRows rows, each chunk's
// FFN1 output quantized and used by FFN2 while it is still in the caches:
// its FP32 intermediate (rows x Intermediate, 48 MiB at 4096 rows of
// BERT-base) otherwise went to memory and came back for the quantization.
// Each row is computed alone (its own scale in dynamic mode, and a
// kernel's bits do not depend on M): the chunks give the same bits.
func (p *int8Pass) ffn(m *Model, f1, f2 *qlin, rows int, x []float32, quantized, fused bool, f1Out kernels.Out,
	outScale float32, outZP int32, s *qscratch) error {
	h, inter := m.cfg.Hidden, m.cfg.Intermediate
	if p.mode != smoothquant.Dynamic || fused || m.threads > 1 || !f1.int8() || !f2.int8() || rows <= ffnChunkRows {
		if err := p.runQ(m, f1, rows, x, &s.xq, quantized, m.cfg.Activation, nil, f1Out, outScale, outZP, s); err != nil {
			return fmt.Errorf("ffn1: %w", err)
		}
		if err := p.runQ(m, f2, rows, s.f, &s.fq, fused, kernels.ActNone, x, kernels.Out{F32: s.t, Ldc: h}, 0, 0, s); err != nil {
			return fmt.Errorf("ffn2: %w", err)
		}
		return nil
	}
	// Every chunk, the last one's fewer rows included, runs the kernels
	// chosen for ffnChunkRows rows (the row model picks within the class).
	defer func(as int) { s.asRows = as }(s.asRows)
	s.asRows = ffnChunkRows
	for r0 := 0; r0 < rows; r0 += ffnChunkRows {
		n := min(ffnChunkRows, rows-r0)
		xr := x[r0*h : (r0+n)*h]
		xq := qin{u8: s.xq.u8[r0*h:], scales: s.xq.scales[r0:]}
		f, fq := ffnChunkScratch(s, n, inter)
		if err := p.runQ(m, f1, n, xr, &xq, quantized, m.cfg.Activation, nil, kernels.Out{F32: f, Ldc: inter}, 0, 0, s); err != nil {
			return fmt.Errorf("ffn1 rows %d-%d: %w", r0, r0+n, err)
		}
		if err := p.runQ(m, f2, n, f, &fq, false, kernels.ActNone, xr, kernels.Out{F32: s.t[r0*h : (r0+n)*h], Ldc: h}, 0, 0, s); err != nil {
			return fmt.Errorf("ffn2 rows %d-%d: %w", r0, r0+n, err)
		}
	}
	return nil
}
