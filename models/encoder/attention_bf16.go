package encoder

import (
	"fmt"

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
// the scores, the softmax and the context stay float32 (floatHead).
func (m *Model) attentionHeadBF16(in *Inputs, s *scratch, b *attnBuf, bi, hd int, q *attnQuant) error {
	sp := &s.spans[bi]
	b.bfp = bf16Products{b: &b.bf, qk: sp.kr.qkb, pv: sp.kr.pvb}
	return m.floatHead(in, s, b, bi, hd, q, &b.bfp)
}

// bf16Products are the bf16 head's products on the selector's BF16
// kernels (selector.OpBF16Kernel).
type bf16Products struct {
	b      *attnBufBF
	qk, pv *kernels.KernelBF16
}

func (f *bf16Products) pack(rows []float32, ld, seq, d, ko, vo int) error {
	if err := kernels.PackBF16Into(&f.b.k, seq, d, rows[ko:], ld, f.qk.NR); err != nil {
		return err
	}
	return kernels.PackBF16TInto(&f.b.vt, d, seq, rows[vo:], ld, f.pv.NR)
}

func (f *bf16Products) mr() int { return f.qk.MR }

func (f *bf16Products) scores(r, seq, d int, a []float32, lda int, c []float32) error {
	f.b.g = kernels.GEMMBF16{M: r, N: seq, K: d, A: a, Lda: lda, B: &f.b.k, C: c, Ldc: seq}
	return f.qk.Run(&f.b.g)
}

func (f *bf16Products) context(r, seq, d int, p, c []float32, ldc int) error {
	f.b.g = kernels.GEMMBF16{M: r, N: d, K: seq, A: p, Lda: seq, B: &f.b.vt, C: c, Ldc: ldc}
	return f.pv.Run(&f.b.g)
}

func (f *bf16Products) what() string { return "bf16 " }
