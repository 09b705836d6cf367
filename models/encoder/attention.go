package encoder

import (
	"fmt"
	"math"
	"sync"

	"github.com/int8bert/int8bert/kernels"
)

// maskValue is what a padded key adds to a score: float32's lowest value,
// as Hugging Face uses.
const maskValue = -math.MaxFloat32

// attnBuf is one worker's scratch for one (sequence, head) pair: the
// scores, the additive mask of the sequence, and K and V^T packed as the
// "weights" of the two products. Reused through attnPool, so a forward pass
// allocates nothing per head once the pool is warm.
type attnBuf struct {
	scores, mask []float32
	bias         []float32 // a row's relative bias plus mask (relbias.go)
	k, vt        kernels.PackedF32
	g            kernels.GEMMF32
	i8           attnBuf8  // INT8 attention's (attention8.go)
	bf           attnBufBF // bf16 attention's (attention_bf16.go)
}

var attnPool = sync.Pool{New: func() any { return new(attnBuf) }}

func growF32(b []float32, n int) []float32 {
	if cap(b) < n {
		return make([]float32, n)
	}
	return b[:n]
}

// attention computes the context of every head from the fused QKV rows:
// softmax(Q K^T / sqrt(d) + mask) V, both products on the FP32 GEMM
// kernels the selector chose for them (selector.OpF32Kernel) with K (and V
// transposed) packed per head as the "weights". The 1/sqrt(d)
// scale is fused into softmax's first pass (kernels.SoftmaxScaled, equal
// bit for bit to scaling the scores first). The (sequence, head) pairs are
// split over m.threads goroutines; each product runs on one.
func (m *Model) attention(in *Inputs, s *scratch) error { return m.attentionQ(in, s, nil) }

// attnQuant is the static quantization of attention's output for the O
// projection: each head's context rows are quantized to u8 as soon as
// they are computed, while they are in cache (no pass over the whole
// context afterwards).
type attnQuant struct {
	dst   []uint8 // [rows][Hidden]
	scale float32
	zp    int32
}

// attentionQ is attention that also writes the context in u8 when q is
// set. It runs per (sequence, head) over the sequence's own rows
// (s.spans): Seq rows each in the padded layout, each sequence's length
// in the packed one (docs/DESIGN.md section 2.2), so that no padding is
// computed there.
func (m *Model) attentionQ(in *Inputs, s *scratch, q *attnQuant) error {
	if s.spans == nil { // a scratch not made by forward
		sp, err := m.spans(in, nil)
		if err != nil {
			return err
		}
		s.spans = sp
	}
	heads := m.cfg.Heads
	tasks := len(s.spans) * heads
	head := m.attentionHead
	switch m.Attention() {
	case AttentionInt8:
		head = m.attentionHead8
		if err := m.quantQKV(s); err != nil {
			return err
		}
	case AttentionBF16:
		head = m.attentionHeadBF16
	}
	if m.threads <= 1 || tasks == 1 {
		b := attnPool.Get().(*attnBuf)
		defer attnPool.Put(b)
		for t := 0; t < tasks; t++ {
			if err := head(in, s, b, t/heads, t%heads, q); err != nil {
				return err
			}
		}
		return nil
	}
	var mu sync.Mutex
	var first error
	firstAt := tasks
	kernels.Parallel(m.threads, tasks, func(t int) {
		b := attnPool.Get().(*attnBuf)
		err := head(in, s, b, t/heads, t%heads, q)
		attnPool.Put(b)
		if err != nil {
			mu.Lock()
			if t < firstAt { // the error of the lowest pair, as the serial loop
				first, firstAt = err, t
			}
			mu.Unlock()
		}
	})
	return first
}

// attentionHead computes head hd of sequence bi (s.spans[bi]) into s.ctx
// with the span's kernels. K and V^T are packed once; the query rows run
// in blocks of attnRowBlock (scores, softmax and P V of a block before the
// next), so that a long head's f32 scores stay in L2 instead of a
// seq x seq matrix written and read back (docs/DESIGN.md section 3.10).
// Every row's arithmetic is the unblocked head's, bit for bit.
func (m *Model) attentionHead(in *Inputs, s *scratch, b *attnBuf, bi, hd int, q *attnQuant) error {
	sp := &s.spans[bi]
	h, heads, seq, off := m.cfg.Hidden, m.cfg.Heads, sp.n, sp.off
	d := h / heads
	scale := float32(1 / math.Sqrt(float64(d)))
	ld := 3 * h
	qk, pv := sp.kr.qk, sp.kr.pv
	mask := b.keyMask(in, off, seq)
	rows := s.qkv[off*ld : (off+seq)*ld]
	qo, ko, vo := hd*d, h+hd*d, 2*h+hd*d
	if err := kernels.PackF32Into(&b.k, seq, d, rows[ko:], ld, qk.NR); err != nil {
		return err
	}
	// V's rows are V^T's columns: W = V^T ([d][seq]) given transposed.
	if err := kernels.PackF32TInto(&b.vt, d, seq, rows[vo:], ld, pv.NR); err != nil {
		return err
	}
	rb := m.attnRowBlock(seq)
	if rb < seq && qk.MR > 1 && rb >= qk.MR {
		rb -= rb % qk.MR // whole register tiles but in the last block
	}
	b.scores = growF32(b.scores, rb*seq)
	for i0 := 0; i0 < seq; i0 += rb {
		r := min(rb, seq-i0)
		b.g = kernels.GEMMF32{M: r, N: seq, K: d, A: rows[i0*ld+qo:], Lda: ld, B: &b.k, C: b.scores, Ldc: seq}
		if err := qk.Run(&b.g); err != nil {
			return fmt.Errorf("attention scores (sequence %d, head %d): %w", bi, hd, err)
		}
		var err error
		if m.relBias == nil {
			err = kernels.SoftmaxScaled(b.scores, b.scores, r, seq, scale, mask)
		} else {
			err = m.softmaxBiased(b, hd, i0, r, seq, scale, mask)
		}
		if err != nil {
			return fmt.Errorf("attention softmax (sequence %d, head %d): %w", bi, hd, err)
		}
		o := (off+i0)*h + hd*d
		b.g = kernels.GEMMF32{M: r, N: d, K: seq, A: b.scores, Lda: seq, B: &b.vt, C: s.ctx[o:], Ldc: h}
		if err := pv.Run(&b.g); err != nil {
			return fmt.Errorf("attention context (sequence %d, head %d): %w", bi, hd, err)
		}
		if q != nil {
			if err := kernels.QuantizeBlockU8(q.dst[o:], h, s.ctx[o:], h, r, d, q.scale, q.zp); err != nil {
				return fmt.Errorf("attention context (sequence %d, head %d): %w", bi, hd, err)
			}
		}
	}
	return nil
}

// keyMask returns the additive mask of the seq keys of the span at row
// off (0 for a key, maskValue for padding) in b.mask, or nil when it masks
// none of them: most spans, the padding being cut off; adding zeros
// changes no score (x*scale + 0 is x*scale) and costs the softmax a pass
// of loads and stores.
func (b *attnBuf) keyMask(in *Inputs, off, seq int) []float32 {
	if in.Mask == nil {
		return nil
	}
	b.mask = growF32(b.mask, seq)
	masked := false
	for j, mk := range in.Mask[off : off+seq] {
		b.mask[j] = 0
		if mk == 0 {
			b.mask[j] = maskValue
			masked = true
		}
	}
	if !masked {
		return nil
	}
	return b.mask
}

// attnPair is the kernels of attention's two products: FP32, u8 x s8
// for INT8 attention or BF16 for bf16 attention (the others nil).
type attnPair struct {
	qk, pv   *kernels.KernelF32
	qk8, pv8 *kernels.Kernel
	qkb, pvb *kernels.KernelBF16
}

// attnKernels asks the selector for the kernels of Q K^T (seq x d by
// d x seq) and P V (seq x seq by seq x d) for sequences of seq tokens,
// each product on one goroutine: chosen, like every GEMM, by the selector
// (INT8BERT_KERNEL, INT8BERT_CPU_DISABLE and the tuning cache hold).
func (m *Model) attnKernels(seq int) (attnPair, error) {
	if m.sel == nil {
		return attnPair{}, fmt.Errorf("encoder: attention: nil selector: %w", ErrConfig)
	}
	switch m.Attention() {
	case AttentionInt8:
		qk8, pv8, err := m.attnKernels8(seq)
		return attnPair{qk8: qk8, pv8: pv8}, err
	case AttentionBF16:
		return m.attnKernelsBF16(seq)
	}
	d := m.cfg.Hidden / m.cfg.Heads
	qk, err := m.sel.KernelF32(seq, d, seq, 1)
	if err != nil {
		return attnPair{}, fmt.Errorf("encoder: attention scores: %w", err)
	}
	pv, err := m.sel.KernelF32(seq, seq, d, 1)
	if err != nil {
		return attnPair{}, fmt.Errorf("encoder: attention context: %w", err)
	}
	return attnPair{qk: qk, pv: pv}, nil
}
