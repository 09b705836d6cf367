package encoder

import (
	"fmt"
	"math"

	"github.com/int8bert/int8bert/kernels"
)

// attnBufBF is the bf16 half of an attnBuf: K and V^T rounded and packed
// for the BF16 kernels, and their call.
type attnBufBF struct {
	k, vt kernels.PackedBF16
	g     kernels.GEMMBF16
}

// attnKernelsBF16 asks the selector for the BF16 kernels of Q K^T
// (seq x d by d x seq) and P V (seq x seq by seq x d), each on one
// goroutine (selector.OpBF16Kernel).
func (m *Model) attnKernelsBF16(seq int) (attnPair, error) {
	d := m.cfg.Hidden / m.cfg.Heads
	qk, err := m.sel.KernelBF16(seq, d, seq, 1)
	if err != nil {
		return attnPair{}, fmt.Errorf("encoder: bf16 attention scores: %w", err)
	}
	pv, err := m.sel.KernelBF16(seq, seq, d, 1)
	if err != nil {
		return attnPair{}, fmt.Errorf("encoder: bf16 attention context: %w", err)
	}
	return attnPair{qkb: qk, pvb: pv}, nil
}

// attentionHeadBF16 is attentionHead with both products in bf16
// (docs/DESIGN.md section 3.9): K and V^T rounded to bfloat16 and packed
// once per head, Q and P rounded inside the kernels' calls, float32 sums;
// the scores, the softmax (scaled by 1/sqrt(d), masked, with a relative
// position bias where the family has one) and the context
// stay float32. Long heads run in blocks of query rows as the FP32 head.
func (m *Model) attentionHeadBF16(in *Inputs, s *scratch, b *attnBuf, bi, hd int, q *attnQuant) error {
	sp := &s.spans[bi]
	h, heads, seq, off := m.cfg.Hidden, m.cfg.Heads, sp.n, sp.off
	d := h / heads
	scale := float32(1 / math.Sqrt(float64(d)))
	ld := 3 * h
	qk, pv := sp.kr.qkb, sp.kr.pvb
	e := &b.bf
	mask := b.keyMask(in, off, seq)
	rows := s.qkv[off*ld : (off+seq)*ld]
	qo, ko, vo := hd*d, h+hd*d, 2*h+hd*d
	if err := kernels.PackBF16Into(&e.k, seq, d, rows[ko:], ld, qk.NR); err != nil {
		return err
	}
	if err := kernels.PackBF16TInto(&e.vt, d, seq, rows[vo:], ld, pv.NR); err != nil {
		return err
	}
	rb := m.attnRowBlock(seq)
	if rb < seq && qk.MR > 1 && rb >= qk.MR {
		rb -= rb % qk.MR
	}
	b.scores = growF32(b.scores, rb*seq)
	for i0 := 0; i0 < seq; i0 += rb {
		r := min(rb, seq-i0)
		e.g = kernels.GEMMBF16{M: r, N: seq, K: d, A: rows[i0*ld+qo:], Lda: ld, B: &e.k, C: b.scores, Ldc: seq}
		if err := qk.Run(&e.g); err != nil {
			return fmt.Errorf("bf16 attention scores (sequence %d, head %d): %w", bi, hd, err)
		}
		var err error
		if m.relBias == nil {
			err = kernels.SoftmaxScaled(b.scores, b.scores, r, seq, scale, mask)
		} else {
			err = m.softmaxBiased(b, hd, i0, r, seq, scale, mask)
		}
		if err != nil {
			return fmt.Errorf("bf16 attention softmax (sequence %d, head %d): %w", bi, hd, err)
		}
		o := (off+i0)*h + hd*d
		e.g = kernels.GEMMBF16{M: r, N: d, K: seq, A: b.scores, Lda: seq, B: &e.vt, C: s.ctx[o:], Ldc: h}
		if err := pv.Run(&e.g); err != nil {
			return fmt.Errorf("bf16 attention context (sequence %d, head %d): %w", bi, hd, err)
		}
		if q != nil {
			if err := kernels.QuantizeBlockU8(q.dst[o:], h, s.ctx[o:], h, r, d, q.scale, q.zp); err != nil {
				return fmt.Errorf("bf16 attention context (sequence %d, head %d): %w", bi, hd, err)
			}
		}
	}
	return nil
}
