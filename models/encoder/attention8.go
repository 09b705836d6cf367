package encoder

import (
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/int8bert/int8bert/cpu"

	"github.com/int8bert/int8bert/kernels"
	"github.com/int8bert/int8bert/selector"
	"github.com/int8bert/int8bert/smoothquant"
)

// AttentionMode is the arithmetic of an INT8 model's attention
// (Options.Attention; docs/DESIGN.md section 3.10).
type AttentionMode int

const (
	// AttentionAuto is $INT8BERT_ATTENTION when set, else AttentionInt8
	// where it pays (AVX-512 VNNI, AMX or AVX-VNNI: int8AttentionPays) and
	// AttentionF32 elsewhere.
	AttentionAuto AttentionMode = iota
	// AttentionF32 runs Q K^T, the softmax and P V in FP32 (what an FP32
	// model always runs).
	AttentionF32
	// AttentionInt8 runs Q K^T and P V on the u8 x s8 kernels: Q per row
	// and K per key quantized dynamically, P to u8 per row, V per head.
	AttentionInt8
	// AttentionBF16 runs a bf16 model's Q K^T and P V on the BF16 kernels
	// (Q, K, P and V rounded to bfloat16, float32 sums) and the softmax in
	// FP32: what a bf16 model runs unless told AttentionF32.
	AttentionBF16
)

// EnvAttention names the environment variable AttentionAuto reads: "f32"
// (every model's attention in FP32), "int8" (INT8 models' in INT8) or
// "bf16" (bf16 models' in bf16); "" or unset: INT8 models as
// int8AttentionPays says for the CPU, bf16 models in bf16.
const EnvAttention = "INT8BERT_ATTENTION"

// String is the mode as EnvAttention spells it ("auto" for AttentionAuto).
func (a AttentionMode) String() string {
	switch a {
	case AttentionAuto:
		return "auto"
	case AttentionF32:
		return "f32"
	case AttentionInt8:
		return "int8"
	case AttentionBF16:
		return "bf16"
	}
	return fmt.Sprintf("AttentionMode(%d)", int(a))
}

func (a AttentionMode) valid() bool { return a >= AttentionAuto && a <= AttentionBF16 }

// int8AttentionPays reports whether INT8 attention is faster than FP32's
// on a CPU of features f: with AVX-512 VNNI (or AMX) kernels and the
// AVX-512 element-wise passes, yes (one BERT-large layer at 256 tokens:
// 0.83 against 1.47 ms on a Zen 5); with AVX-VNNI (VEX VPDPBUSD on ymm)
// and the AVX2 passes, yes too (BERT-base INT8-static at 512 tokens:
// attention 77-103 against 130-140 ms); on the AVX2 tier its exact int16
// products lose, even with the u8 softmax and the packs in AVX2 assembly
// (attention 143-151 against FP32's 133 ms, FP32's since 123-125), so FP32
// attention stays there (docs/DESIGN.md section 3.10).
func int8AttentionPays(f cpu.Features) bool {
	p := f.Int8Path()
	return p == cpu.ISAAVX512VNNI || p == cpu.ISAAMX || p == cpu.ISAAVXVNNI
}

// resolve returns the mode a model of precision prec runs on a CPU of
// features f: a set mode as it is (AttentionBF16 only for a bf16 model,
// AttentionInt8 not for one), AttentionAuto as EnvAttention says, else
// AttentionBF16 for a bf16 model and, for the others, as
// int8AttentionPays says (an FP32 model runs FP32 attention whatever its
// mode: the mode it resolves to is what its INT8 twin inherits). An
// unknown value or a mode the precision cannot run is an error wrapping
// ErrConfig.
func (a AttentionMode) resolve(f cpu.Features, prec Precision) (AttentionMode, error) {
	if !a.valid() {
		return 0, fmt.Errorf("encoder: options: %v: want AttentionAuto, AttentionF32, AttentionInt8 or AttentionBF16: %w", a, ErrConfig)
	}
	bf16 := prec == PrecisionBF16
	switch {
	case a == AttentionBF16 && !bf16:
		return 0, fmt.Errorf("encoder: options: bf16 attention is for bf16 models, not %s: %w", prec, ErrConfig)
	case a == AttentionInt8 && bf16:
		return 0, fmt.Errorf("encoder: options: int8 attention is for INT8 models: a bf16 model runs bf16 or f32 attention: %w", ErrConfig)
	case a != AttentionAuto:
		return a, nil
	}
	auto := func() AttentionMode {
		switch {
		case bf16:
			return AttentionBF16
		case int8AttentionPays(f):
			return AttentionInt8
		}
		return AttentionF32
	}
	switch v := strings.TrimSpace(os.Getenv(EnvAttention)); strings.ToLower(v) {
	case "", "bf16":
		return auto(), nil
	case "int8":
		if bf16 {
			return AttentionBF16, nil
		}
		return AttentionInt8, nil
	case "f32", "fp32":
		return AttentionF32, nil
	default:
		return 0, fmt.Errorf("encoder: %s=%q: want f32, int8 or bf16: %w", EnvAttention, v, ErrConfig)
	}
}

// Attention returns the arithmetic this model's attention runs in:
// AttentionF32 for FP32 models and for INT8 and bf16 ones loaded with it,
// AttentionInt8 or AttentionBF16 otherwise.
func (m *Model) Attention() AttentionMode { return m.pass.attention() }

// attnBuf8 is the INT8 half of an attnBuf: P in u8 with its row scales,
// and the two epilogues. Q, K and V^T come quantized from the pass's qkv8.
type attnBuf8 struct {
	p        []uint8
	ps       []float32
	g        kernels.GEMMU8S8
	epS, epC kernels.Epilogue
}

// qkv8 is a pass's quantized Q, K and V^T (and V's absolute maxima), all
// sequences and heads, written token by token before the heads run
// (quantQKV): Q's u8 rows [tokens][hidden], the scales [heads][tokens],
// one kernels.QKVQuant per sequence (which holds its K packs).
type qkv8 struct {
	q      []uint8
	qs, ks []float32
	vb     []uint32
	seqs   []kernels.QKVQuant
	first  []int // quantQKV's first task of each sequence
	// vt are V^T packed per sequence and head ([sequence][head]), with
	// their scales vs ([sequence*heads + head]): a second token-major pass
	// once V's maxima are known.
	vt [][]kernels.PackedS8
	vs []float32
}

// qkvChunk is how many tokens one task of quantQKV takes.
const qkvChunk = 32

// quantQKV quantizes Q, K and the maxima of V of every sequence in s,
// reading each token's fused QKV row once (kernels.QKVQuant; docs/DESIGN.md
// section 3.10), split over m.threads goroutines by chunks of tokens.
func (m *Model) quantQKV(s *scratch) error {
	if s.a8 == nil {
		s.a8 = new(qkv8)
	}
	a := s.a8
	h, heads := m.cfg.Hidden, m.cfg.Heads
	d := h / heads
	ld := 3 * h
	rows := 0
	for _, sp := range s.spans {
		rows = max(rows, sp.off+sp.n)
	}
	a.q = growU8(a.q, rows*h)
	a.qs = growF32(a.qs, heads*rows)
	a.ks = growF32(a.ks, heads*rows)
	if cap(a.vb) < heads*rows {
		a.vb = make([]uint32, heads*rows)
	}
	a.vb = a.vb[:heads*rows]
	if cap(a.seqs) < len(s.spans) {
		// Grown keeping the sequences' K storage.
		a.seqs = append(a.seqs[:cap(a.seqs)], make([]kernels.QKVQuant, len(s.spans)-cap(a.seqs))...)
	}
	a.seqs = a.seqs[:len(s.spans)]
	scale := float32(1 / math.Sqrt(float64(d)))
	if m.dis != nil {
		scale = m.dis.scale // 1/sqrt(d * (1 + relative terms)) (section 3.11)
	}
	tasks := 0
	for bi, sp := range s.spans {
		qa := &a.seqs[bi]
		qa.Heads, qa.D, qa.QMul, qa.Q, qa.Ldq = heads, d, scale, a.q[sp.off*h:], h
		qa.QScale, qa.KScale, qa.VBits, qa.Lds = a.qs[sp.off:], a.ks[sp.off:], a.vb[sp.off:], rows
		if err := qa.ReserveKeys(sp.n, sp.kr.qk8.NR); err != nil {
			return fmt.Errorf("int8 attention k (sequence %d): %w", bi, err)
		}
		tasks += (sp.n + qkvChunk - 1) / qkvChunk
	}
	quant := func(bi, t0, t1 int) error {
		sp := &s.spans[bi]
		if err := a.seqs[bi].Rows(s.qkv[sp.off*ld:], ld, t0, t1); err != nil {
			return fmt.Errorf("int8 attention (sequence %d): %w", bi, err)
		}
		return nil
	}
	if err := m.qkvTasks(s, tasks, quant); err != nil {
		return err
	}
	// V^T of every head, with the scale of its maximum over the sequence,
	// token-major again: the chunk's V rows are read once for all heads,
	// where a head at a time reads 64 floats of every row (a 12 KB stride
	// for BERT-large) from beyond L2.
	if cap(a.vt) < len(s.spans) {
		a.vt = append(a.vt[:cap(a.vt)], make([][]kernels.PackedS8, len(s.spans)-cap(a.vt))...)
	}
	a.vt = a.vt[:len(s.spans)]
	a.vs = growF32(a.vs, len(s.spans)*heads)
	for bi, sp := range s.spans {
		if cap(a.vt[bi]) < heads {
			a.vt[bi] = append(a.vt[bi][:cap(a.vt[bi])], make([]kernels.PackedS8, heads-cap(a.vt[bi]))...)
		}
		a.vt[bi] = a.vt[bi][:heads]
		for hd := range heads {
			a.vs[bi*heads+hd] = a.seqs[bi].VScale(hd, 0, sp.n)
			if err := a.vt[bi][hd].ReserveT(d, sp.n, sp.kr.pv8.NR); err != nil {
				return fmt.Errorf("int8 attention v (sequence %d, head %d): %w", bi, hd, err)
			}
		}
	}
	packV := func(bi, t0, t1 int) error {
		sp := &s.spans[bi]
		x := s.qkv[sp.off*ld:]
		for hd := range heads {
			if err := kernels.PackQuantS8TScaledRows(&a.vt[bi][hd], t0, t1, x[2*h+hd*d:], ld, a.vs[bi*heads+hd]); err != nil {
				return fmt.Errorf("int8 attention v (sequence %d, head %d): %w", bi, hd, err)
			}
		}
		return nil
	}
	return m.qkvTasks(s, tasks, packV)
}

// qkvTasks runs f(sequence, t0, t1) over every sequence of s by chunks
// of qkvChunk tokens (tasks of them in all), on m.threads goroutines, and
// returns the error of the lowest chunk that failed (the serial order's).
func (m *Model) qkvTasks(s *scratch, tasks int, f func(bi, t0, t1 int) error) error {
	if m.threads <= 1 || tasks <= 1 {
		for bi, sp := range s.spans {
			for t0 := 0; t0 < sp.n; t0 += qkvChunk {
				if err := f(bi, t0, min(t0+qkvChunk, sp.n)); err != nil {
					return err
				}
			}
		}
		return nil
	}
	// Task t is chunk t - first[bi] of sequence bi.
	a := s.a8
	a.first = append(a.first[:0], make([]int, len(s.spans)+1)...)
	first := a.first
	for bi, sp := range s.spans {
		first[bi+1] = first[bi] + (sp.n+qkvChunk-1)/qkvChunk
	}
	var mu sync.Mutex
	var firstErr error
	firstAt := tasks
	kernels.Parallel(m.threads, tasks, func(t int) {
		bi, _ := slices.BinarySearch(first, t+1)
		bi--
		t0 := (t - first[bi]) * qkvChunk
		if err := f(bi, t0, min(t0+qkvChunk, s.spans[bi].n)); err != nil {
			mu.Lock()
			if t < firstAt { // the error of the lowest chunk, as the serial loop
				firstErr, firstAt = err, t
			}
			mu.Unlock()
		}
	})
	return firstErr
}

// The epilogue kinds of INT8 attention's products: the scores
// (dequantized, f32) and the context (f32, or u8 for the O projection in
// static mode).
var (
	kindScores  = selector.EpilogueKind{ZeroPoint: true, RowScale: true, ColScale: true, Out: selector.F32}
	kindCtxF32  = selector.EpilogueKind{RowScale: true, Out: selector.F32}
	kindCtxU8   = selector.EpilogueKind{RowScale: true, Out: selector.U8}
	kindsStatic = [2]selector.EpilogueKind{kindScores, kindCtxU8}
	kindsDyn    = [2]selector.EpilogueKind{kindScores, kindCtxF32}
)

// attnKinds are the epilogue kinds of m's INT8 attention products.
func (m *Model) attnKinds() [2]selector.EpilogueKind {
	if p, ok := m.pass.(*int8Pass); ok && p.mode == smoothquant.Static {
		return kindsStatic
	}
	return kindsDyn
}

// attnKernels8 asks the selector for the u8 x s8 kernels of Q K^T
// (seq x d by d x seq) and P V (seq x seq by seq x d), each on one
// goroutine (selector.OpU8S8Kernel, whose candidates for Q K^T include
// the scores kernel, kernels.ScoresU8S8).
func (m *Model) attnKernels8(seq int) (qk, pv *kernels.Kernel, err error) {
	d := m.cfg.Hidden / m.cfg.Heads
	kinds := m.attnKinds()
	if qk, err = m.sel.KernelU8S8(seq, d, seq, kinds[0], 1); err != nil {
		return nil, nil, fmt.Errorf("encoder: int8 attention scores: %w", err)
	}
	if pv, err = m.sel.KernelU8S8(seq, seq, d, kinds[1], 1); err != nil {
		return nil, nil, fmt.Errorf("encoder: int8 attention context: %w", err)
	}
	return qk, pv, nil
}

func growU8(b []uint8, n int) []uint8 {
	if cap(b) < n {
		return make([]uint8, n)
	}
	return b[:n]
}

// attentionHead8 is attentionHead in INT8 (docs/DESIGN.md section 3.10):
//
//	Q rows -> u8 (symmetric s8 + 128, one scale per row, times 1/sqrt(d))
//	K rows -> s8 packed as the weights of Q K^T, one scale per key
//	S = (acc - 128*colsum(K)) * qscale[i] * kscale[j]   (the kernel's epilogue)
//	e = exp(S + mask - max), P = round(255*e) in u8, pscale[i] = 1/(255*sum e)
//	V -> s8 packed as V^T, one scale for the head
//	ctx = acc * pscale[i] * vscale   (f32, or requantized to u8 for O)
//
// on the kernels the selector chose for the span (sp.kr.qk8, sp.kr.pv8).
func (m *Model) attentionHead8(in *Inputs, s *scratch, b *attnBuf, bi, hd int, q *attnQuant) error {
	sp := &s.spans[bi]
	h, seq, off := m.cfg.Hidden, sp.n, sp.off
	d := h / m.cfg.Heads
	qk, pv := sp.kr.qk8, sp.kr.pv8
	e := &b.i8
	qa := &s.a8.seqs[bi]
	mask := b.keyMask(in, off, seq)
	rb := m.attnRowBlock(seq)
	b.scores = growF32(b.scores, rb*seq)
	e.p = growU8(e.p, rb*seq)
	e.ps = growF32(e.ps, rb)
	fail := func(what string, err error) error {
		return fmt.Errorf("int8 attention %s (sequence %d, head %d): %w", what, bi, hd, err)
	}
	so := hd * qa.Lds
	kp := &qa.K[hd]
	vs := s.a8.vs[bi*m.cfg.Heads+hd]
	// DeBERTa's relative terms: FP32 products of the FP32 Q and K rows
	// with the position projections, scaled as the INT8 scores are
	// (their Q carries the scale) and added before the softmax
	// (docs/DESIGN.md section 3.11).
	ld := 3 * h
	var rows []float32
	if m.dis != nil {
		rows = s.qkv[off*ld : (off+seq)*ld]
		if err := m.disPrepare(b, s.layer, hd, seq, rows, ld); err != nil {
			return fail("relative positions", err)
		}
	}
	// Where nothing is added to the scores before the softmax, Q's row
	// scales go to the softmax, folded into its exponent's FMA, instead
	// of the scores kernel's epilogue (a multiply per score less;
	// docs/DESIGN.md section 3.10).
	fold := m.relBias == nil && m.dis == nil
	for i0 := 0; i0 < seq; i0 += rb {
		r := min(rb, seq-i0)
		qs := qa.QScale[so+i0 : so+i0+r]
		e.epS = kernels.Epilogue{ZeroPoint: 128, ColSum: kp.ColSum, RowScale: qs, ColScale: qa.KScale[so : so+seq]}
		var xscale []float32 // the softmax's factor: 1, or Q's row scales
		if fold {
			e.epS.RowScale, xscale = nil, qs
		}
		e.g = kernels.GEMMU8S8{M: r, N: seq, K: d, A: qa.Q[i0*h+hd*d:], Lda: h, B: kp, Ep: &e.epS, Out: kernels.Out{F32: b.scores, Ldc: seq}}
		if err := qk.RunU8S8(&e.g); err != nil {
			return fail("scores", err)
		}
		if m.dis != nil {
			if err := m.disScores(b, hd, i0, r, seq, rows, ld, b.scores, m.dis.scale); err != nil {
				return fail("relative scores", err)
			}
		}
		var err error
		if m.relBias == nil {
			err = kernels.SoftmaxU8(e.p, seq, e.ps[:r], b.scores, r, seq, mask, xscale)
		} else {
			err = m.softmaxU8Biased(b, e.p, e.ps, hd, i0, r, seq, mask)
		}
		if err != nil {
			return fail("softmax", err)
		}
		for i := range e.ps[:r] {
			e.ps[i] *= vs
		}
		o := (off+i0)*h + hd*d
		e.epC = kernels.Epilogue{RowScale: e.ps[:r]}
		out := kernels.Out{F32: s.ctx[o:], Ldc: h}
		if q != nil {
			e.epC.OutScale, e.epC.OutZeroPoint = q.scale, q.zp
			out = kernels.Out{U8: q.dst[o:], Ldc: h}
		}
		e.g = kernels.GEMMU8S8{M: r, N: d, K: seq, A: e.p, Lda: seq, B: &s.a8.vt[bi][hd], Ep: &e.epC, Out: out}
		if err := pv.RunU8S8(&e.g); err != nil {
			return fail("context", err)
		}
	}
	return nil
}

// attnRowBlock is how many query rows attentionHead8 and attentionHead
// (FP32) take at a time:
// every row while a head's f32 scores fit in 256 KB (seq <= 256; L2 holds
// them), else 96 rows (a multiple of every kernel's MR), so the scores
// and probabilities stay in L2 at seq 512 (docs/DESIGN.md section 3.10).
// m.attnRows > 0 fixes it (tests: blocked equals unblocked bit for bit).
func (m *Model) attnRowBlock(seq int) int {
	if m.attnRows > 0 {
		return min(m.attnRows, seq)
	}
	if seq*seq*4 <= 256<<10 {
		return seq
	}
	return 96
}
