package encoder

import (
	"fmt"
	"math"

	"github.com/int8bert/int8bert/kernels"
)

// maskValue is what a padded key adds to a score: float32's lowest value,
// as Hugging Face uses.
const maskValue = -math.MaxFloat32

// attention computes the context of every head from the fused QKV rows:
// softmax(Q K^T / sqrt(d) + mask) V, both products on an FP32 GEMM kernel
// with K (and V transposed) packed per head as the "weights".
func (m *Model) attention(in *Inputs, s *scratch) error {
	h, heads, seq := m.cfg.Hidden, m.cfg.Heads, in.Seq
	d := h / heads
	scale := float32(1 / math.Sqrt(float64(d)))
	ld := 3 * h
	nr := m.attn.NR
	vt := make([]float32, d*seq)
	for b := 0; b < in.Batch; b++ {
		for j := 0; j < seq; j++ {
			s.mask[j] = 0
			if in.Mask[b*seq+j] == 0 {
				s.mask[j] = maskValue
			}
		}
		rows := s.qkv[b*seq*ld:]
		for hd := 0; hd < heads; hd++ {
			qo, ko, vo := hd*d, h+hd*d, 2*h+hd*d
			kp, err := kernels.PackF32(seq, d, rows[ko:], ld, nr)
			if err != nil {
				return err
			}
			g := &kernels.GEMMF32{M: seq, N: seq, K: d, A: rows[qo:], Lda: ld, B: kp, C: s.scores, Ldc: seq}
			if err := m.attn.Run(g); err != nil {
				return fmt.Errorf("attention scores (sequence %d, head %d): %w", b, hd, err)
			}
			for i := range s.scores[:seq*seq] {
				s.scores[i] *= scale
			}
			if err := kernels.Softmax(s.scores, s.scores, seq, seq, s.mask); err != nil {
				return fmt.Errorf("attention softmax (sequence %d, head %d): %w", b, hd, err)
			}
			for j := 0; j < seq; j++ {
				v := rows[j*ld+vo : j*ld+vo+d]
				for t, x := range v {
					vt[t*seq+j] = x
				}
			}
			vp, err := kernels.PackF32(d, seq, vt, seq, nr)
			if err != nil {
				return err
			}
			g = &kernels.GEMMF32{M: seq, N: d, K: seq, A: s.scores, Lda: seq, B: vp, C: s.ctx[b*seq*h+hd*d:], Ldc: h}
			if err := m.attn.Run(g); err != nil {
				return fmt.Errorf("attention context (sequence %d, head %d): %w", b, hd, err)
			}
		}
	}
	return nil
}
