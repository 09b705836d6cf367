package encoder

import (
	"fmt"
	"math"
	"sync"
	"time"

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
	dis          disBuf    // disentangled attention's (disentangled.go)
	// f32p and bfp are the float heads' products (floatHead), kept here
	// so that passing them as an interface allocates nothing.
	f32p f32Products
	bfp  bf16Products
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
	if prof := m.prof; prof != nil {
		// Each task's time, and its relative terms' (disPrepare and
		// disScores add them to b.dis), for the profile.
		inner := head
		head = func(in *Inputs, s *scratch, b *attnBuf, bi, hd int, q *attnQuant) error {
			b.dis.c2pTime, b.dis.p2cTime = 0, 0
			t := time.Now()
			err := inner(in, s, b, bi, hd, q)
			prof.addHead(time.Since(t), b.dis.c2pTime, b.dis.p2cTime)
			return err
		}
	}
	if m.threads <= 1 || tasks == 1 {
		b := attnPool.Get().(*attnBuf)
		defer attnPool.Put(b)
		for t := 0; t < tasks; t++ {
			if err := head(in, s, b, t/heads, t%heads, q); err != nil {
				return err
			}
			if s.seqDone != nil && t%heads == heads-1 {
				if err := s.seqDone(t / heads); err != nil {
					return err
				}
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
	if first != nil || s.seqDone == nil {
		return first
	}
	for bi := range s.spans {
		if err := s.seqDone(bi); err != nil {
			return err
		}
	}
	return nil
}

// attentionHead computes head hd of sequence bi (s.spans[bi]) into s.ctx
// with the span's FP32 kernels (floatHead).
func (m *Model) attentionHead(in *Inputs, s *scratch, b *attnBuf, bi, hd int, q *attnQuant) error {
	sp := &s.spans[bi]
	b.f32p = f32Products{b: b, qk: sp.kr.qk, pv: sp.kr.pv}
	return m.floatHead(in, s, b, bi, hd, q, &b.f32p)
}

// floatProducts are the two products of a float attention head, FP32
// (f32Products) or bf16 (bf16Products, attention_bf16.go): K and V^T are
// packed once per head, then Q K^T and P V run per block of query rows.
type floatProducts interface {
	// pack packs K ([seq][d] at rows[ko:], stride ld) and V^T (V at
	// rows[vo:]) for the two kernels.
	pack(rows []float32, ld, seq, d, ko, vo int) error
	// mr is the scores kernel's register tile height.
	mr() int
	// scores computes the r x seq scores of the r query rows a (stride
	// lda) into c (stride seq); context the r x d context of the r
	// probability rows p (stride seq) into c (stride ldc).
	scores(r, seq, d int, a []float32, lda int, c []float32) error
	context(r, seq, d int, p, c []float32, ldc int) error
	// what names the arithmetic in errors ("" for FP32).
	what() string
}

// f32Products are the FP32 head's products on the selector's FP32
// kernels (selector.OpF32Kernel).
type f32Products struct {
	b      *attnBuf
	qk, pv *kernels.KernelF32
}

func (f *f32Products) pack(rows []float32, ld, seq, d, ko, vo int) error {
	if err := kernels.PackF32Into(&f.b.k, seq, d, rows[ko:], ld, f.qk.NR); err != nil {
		return err
	}
	// V's rows are V^T's columns: W = V^T ([d][seq]) given transposed.
	return kernels.PackF32TInto(&f.b.vt, d, seq, rows[vo:], ld, f.pv.NR)
}

func (f *f32Products) mr() int { return f.qk.MR }

func (f *f32Products) scores(r, seq, d int, a []float32, lda int, c []float32) error {
	f.b.g = kernels.GEMMF32{M: r, N: seq, K: d, A: a, Lda: lda, B: &f.b.k, C: c, Ldc: seq}
	return f.qk.Run(&f.b.g)
}

func (f *f32Products) context(r, seq, d int, p, c []float32, ldc int) error {
	f.b.g = kernels.GEMMF32{M: r, N: d, K: seq, A: p, Lda: seq, B: &f.b.vt, C: c, Ldc: ldc}
	return f.pv.Run(&f.b.g)
}

func (f *f32Products) what() string { return "" }

// floatHead computes head hd of sequence bi (s.spans[bi]) into s.ctx
// with the products p: K and V^T packed once; the query rows run in
// blocks of attnRowBlock (scores, softmax and P V of a block before the
// next), so that a long head's f32 scores stay in L2 instead of a
// seq x seq matrix written and read back (docs/DESIGN.md section 3.10).
// Every row's arithmetic is the unblocked head's, bit for bit.
func (m *Model) floatHead(in *Inputs, s *scratch, b *attnBuf, bi, hd int, q *attnQuant, p floatProducts) error {
	sp := &s.spans[bi]
	h, heads, seq, off := m.cfg.Hidden, m.cfg.Heads, sp.n, sp.off
	d := h / heads
	scale := float32(1 / math.Sqrt(float64(d)))
	ld := 3 * h
	mask := b.keyMask(in, off, seq)
	rows := s.qkv[off*ld : (off+seq)*ld]
	qo, ko, vo := hd*d, h+hd*d, 2*h+hd*d
	fail := func(step string, err error) error {
		return fmt.Errorf("%sattention %s (sequence %d, head %d): %w", p.what(), step, bi, hd, err)
	}
	if err := p.pack(rows, ld, seq, d, ko, vo); err != nil {
		return fail("k and v", err)
	}
	if m.dis != nil {
		scale = m.dis.scale
		if err := m.disPrepare(b, s.layer, hd, seq, rows, ld); err != nil {
			return fail("relative positions", err)
		}
	}
	rb := m.attnRowBlock(seq)
	if mr := p.mr(); rb < seq && mr > 1 && rb >= mr {
		rb -= rb % mr // whole register tiles but in the last block
	}
	b.scores = growF32(b.scores, rb*seq)
	for i0 := 0; i0 < seq; i0 += rb {
		r := min(rb, seq-i0)
		if err := p.scores(r, seq, d, rows[i0*ld+qo:], ld, b.scores); err != nil {
			return fail("scores", err)
		}
		if m.dis != nil {
			if err := m.disScores(b, hd, i0, r, seq, rows, ld, b.scores, 1); err != nil {
				return fail("relative scores", err)
			}
		}
		var err error
		if m.relBias == nil {
			err = kernels.SoftmaxScaled(b.scores, b.scores, r, seq, scale, mask)
		} else {
			err = m.softmaxBiased(b, hd, i0, r, seq, scale, mask)
		}
		if err != nil {
			return fail("softmax", err)
		}
		o := (off+i0)*h + hd*d
		if err := p.context(r, seq, d, b.scores, s.ctx[o:], h); err != nil {
			return fail("context", err)
		}
		if q != nil {
			if err := kernels.QuantizeBlockU8(q.dst[o:], h, s.ctx[o:], h, r, d, q.scale, q.zp); err != nil {
				return fail("context", err)
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
