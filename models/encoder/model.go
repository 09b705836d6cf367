package encoder

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
	"weak"

	"github.com/int8bert/int8bert/kernels"
	"github.com/int8bert/int8bert/selector"
	"github.com/int8bert/int8bert/smoothquant"
)

// Model is an encoder (FP32, or INT8 after quantization). It is safe for
// concurrent Forward calls; Close waits for the calls in flight, and any
// call after it returns ErrClosed.
type Model struct {
	cfg                      Config
	wordEmb, posEmb, typeEmb []float32
	embLN, embLNBias         []float32
	layers                   []layer
	sel                      *selector.Selector
	threads                  int
	prof                     *Profile
	// (attention's two products run on the kernels sel chooses for them:
	// Selector.KernelF32)
	// src and names are where the weights came from (an FP32 model reads
	// them again to quantize itself).
	src   Source
	names Names
	// prec is the precision of the linears; qlayers hold the INT8 ones
	// (prec != PrecisionFP32), layers the FP32 ones.
	prec    Precision
	qlayers []qlayer
	// recipe is how an INT8 model was quantized.
	recipe *smoothquant.Recipe
	// scratchPool keeps forward passes' buffers between passes.
	scratchPool bufferPool
	// g admits calls until Close (lifecycle.go).
	g gate
}

type layer struct {
	qkv                *selector.Linear[kernels.GEMMF32] // [3H, H]: Q, K, V rows
	qkvBias            []float32
	o                  *selector.Linear[kernels.GEMMF32]
	oBias              []float32
	attnLN, attnLNBias []float32
	ffn1               *selector.Linear[kernels.GEMMF32]
	ffn1Bias           []float32
	ffn2               *selector.Linear[kernels.GEMMF32]
	ffn2Bias           []float32
	outLN, outLNBias   []float32
}

// Profile accumulates the time of each part of the forward passes that
// report to it (safe for concurrent passes).
type Profile struct {
	mu                                       sync.Mutex
	Embeddings, Linear, Attention, LayerNorm time.Duration
	// LinearFLOPs counts 2*M*K*N of every linear layer run.
	LinearFLOPs float64
	Passes      int
}

// Parts of a forward pass, for Profile.add.
const (
	partEmbeddings = iota
	partLinear
	partAttention
	partLayerNorm
)

func (p *Profile) add(part int, since time.Time, flops float64) {
	if p == nil {
		return
	}
	el := time.Since(since)
	p.mu.Lock()
	defer p.mu.Unlock()
	switch part {
	case partEmbeddings:
		p.Embeddings += el
		p.Passes++
	case partLinear:
		p.Linear += el
		p.LinearFLOPs += flops
	case partAttention:
		p.Attention += el
	case partLayerNorm:
		p.LayerNorm += el
	}
}

// Snapshot returns a copy of the counters.
func (p *Profile) Snapshot() Profile {
	p.mu.Lock()
	defer p.mu.Unlock()
	return Profile{Embeddings: p.Embeddings, Linear: p.Linear, Attention: p.Attention, LayerNorm: p.LayerNorm,
		LinearFLOPs: p.LinearFLOPs, Passes: p.Passes}
}

// newModel loads the encoder's weights from l (names as given) and
// prepares every linear layer on sel.
func newModel(cfg Config, l *Loader, names Names, sel *selector.Selector, o Options) (*Model, error) {
	m, err := newBase(cfg, l, names, sel, o)
	if err != nil {
		return nil, err
	}
	h := cfg.Hidden
	get := func(dst *[]float32, name string, shape ...int) {
		if err == nil {
			*dst, err = l.Get(name, shape...)
		}
	}
	dims := linDims(cfg)
	for i := 0; i < cfg.Layers; i++ {
		n := names.Layer(i)
		var ly layer
		w, b, lerr := readLinears(l, n, cfg)
		err = lerr
		get(&ly.attnLN, n.AttnLN, h)
		get(&ly.attnLNBias, n.AttnLNBias, h)
		get(&ly.outLN, n.OutLN, h)
		get(&ly.outLNBias, n.OutLNBias, h)
		if err != nil {
			m.Close()
			return nil, err
		}
		ly.qkvBias, ly.oBias, ly.ffn1Bias, ly.ffn2Bias = b[linQKV], b[linO], b[linFFN1], b[linFFN2]
		var lins [numLin]*selector.Linear[kernels.GEMMF32]
		for which := range lins {
			if err == nil {
				lins[which], err = sel.NewLinearF32(dims[which][0], dims[which][1], w[which], dims[which][1])
			}
		}
		ly.qkv, ly.o, ly.ffn1, ly.ffn2 = lins[linQKV], lins[linO], lins[linFFN1], lins[linFFN2]
		m.layers = append(m.layers, ly)
		if err != nil {
			m.Close()
			return nil, fmt.Errorf("encoder: layer %d: %w", i, err)
		}
	}
	return m, nil
}

// newBase makes a model with its embeddings and no layers.
func newBase(cfg Config, l *Loader, names Names, sel *selector.Selector, o Options) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if sel == nil {
		return nil, fmt.Errorf("encoder: nil selector: %w", ErrConfig)
	}
	h := cfg.Hidden
	m := &Model{cfg: cfg, sel: sel, threads: o.Threads, prof: o.Profile,
		src: l.src, names: names, prec: PrecisionFP32}
	var err error
	get := func(dst *[]float32, name string, shape ...int) {
		if err == nil {
			*dst, err = l.Get(name, shape...)
		}
	}
	get(&m.wordEmb, names.WordEmb, cfg.Vocab, h)
	get(&m.posEmb, names.PosEmb, cfg.MaxPositions, h)
	if cfg.TypeVocab > 0 {
		get(&m.typeEmb, names.TypeEmb, cfg.TypeVocab, h)
	}
	get(&m.embLN, names.EmbLN, h)
	get(&m.embLNBias, names.EmbLNBias, h)
	if err != nil {
		return nil, err
	}
	return m, nil
}

// Config returns the model's configuration.
func (m *Model) Config() Config { return m.cfg }

// Selector returns the selector the model's linears run on.
func (m *Model) Selector() *selector.Selector { return m.sel }

// Threads is the thread count per linear.
func (m *Model) Threads() int { return m.threads }

// Close waits for the calls in flight, then releases the prepared
// linears; every call after it (or racing with it) returns ErrClosed, and
// a second Close returns nil. It must not be called from inside a call on
// the model (a Progress callback, say): it would wait for itself.
func (m *Model) Close() error {
	return m.g.close(func() error {
		for _, ly := range m.layers {
			for _, l := range []*selector.Linear[kernels.GEMMF32]{ly.qkv, ly.o, ly.ffn1, ly.ffn2} {
				if l != nil {
					l.Close()
				}
			}
		}
		m.layers = nil
		for _, q := range m.qlayers {
			q.close()
		}
		m.qlayers = nil
		m.scratchPool.keep(nil)
		return nil
	})
}

// Inputs is a padded batch: Batch sequences of Seq tokens, row-major.
// TypeIDs may be nil (all 0); Mask is 1 for tokens and 0 for padding.
type Inputs struct {
	Batch, Seq int
	IDs        []int32
	TypeIDs    []int32
	Mask       []int32
}

// Output is the last hidden state [Batch][Seq][Hidden] and, when asked for,
// the embeddings' and every layer's output (named for per-layer diffs
// against the reference: HiddenStates[0] is the embeddings).
type Output struct {
	Batch, Seq, Hidden int
	Last               []float32
	HiddenStates       [][]float32
}

func (m *Model) check(in *Inputs) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("encoder: inputs: %s: %w", fmt.Sprintf(format, args...), ErrInput)
	}
	n := in.Batch * in.Seq
	switch {
	case in.Batch <= 0 || in.Seq <= 0:
		return bad("batch %d x seq %d", in.Batch, in.Seq)
	case in.Seq > m.cfg.MaxSeq():
		return bad("sequence of %d tokens, the model takes at most %d", in.Seq, m.cfg.MaxSeq())
	case len(in.IDs) != n || len(in.Mask) != n || (in.TypeIDs != nil && len(in.TypeIDs) != n):
		return bad("want %d ids, mask values and type ids, have %d, %d, %d", n, len(in.IDs), len(in.Mask), len(in.TypeIDs))
	}
	for i := 0; i < n; i++ {
		if id := in.IDs[i]; id < 0 || int(id) >= m.cfg.Vocab {
			return bad("token %d of sequence %d: id %d outside the vocabulary of %d", i%in.Seq, i/in.Seq, id, m.cfg.Vocab)
		}
		if mk := in.Mask[i]; mk != 0 && mk != 1 {
			return bad("attention mask value %d at %d (want 0 or 1)", mk, i)
		}
		if in.TypeIDs != nil {
			if t := in.TypeIDs[i]; t < 0 || int(t) >= max(m.cfg.TypeVocab, 1) {
				return bad("token type %d at %d outside [0,%d)", t, i, max(m.cfg.TypeVocab, 1))
			}
		}
	}
	return nil
}

// positions returns the position ids of the batch.
func (m *Model) positions(in *Inputs) []int {
	pos := make([]int, in.Batch*in.Seq)
	for b := 0; b < in.Batch; b++ {
		c := 0
		for s := 0; s < in.Seq; s++ {
			i := b*in.Seq + s
			if !m.cfg.PositionsFromPadding {
				pos[i] = s
				continue
			}
			// XLM-R: count the non-padding tokens, offset by the padding index.
			if int(in.IDs[i]) != m.cfg.PaddingIdx {
				c++
				pos[i] = c + m.cfg.PaddingIdx
			} else {
				pos[i] = m.cfg.PaddingIdx
			}
		}
	}
	return pos
}

// Forward runs the encoder on a batch. keepHidden also returns every
// layer's output.
func (m *Model) Forward(in *Inputs, keepHidden bool) (*Output, error) {
	return m.ForwardContext(context.Background(), in, keepHidden)
}

// ForwardContext is Forward that stops between layers once ctx is done,
// returning ctx.Err() (context.Canceled or context.DeadlineExceeded).
func (m *Model) ForwardContext(ctx context.Context, in *Inputs, keepHidden bool) (*Output, error) {
	if err := m.g.enter(); err != nil {
		return nil, err
	}
	defer m.g.leave()
	return m.forward(ctx, in, keepHidden, nil, nil)
}

// forward is Forward that shows every linear's input to obs (FP32
// models), for a caller inside m's gate. b are the buffers of a pipeline
// call's micro-batches (Pipeline.stream), at least as large as in; the
// output's Last then aliases them and is valid until their next pass.
// With b nil the pass takes buffers from the pool and Last is its own.
func (m *Model) forward(ctx context.Context, in *Inputs, keepHidden bool, obs observeFunc, b *buffers) (*Output, error) {
	int8 := m.prec != PrecisionFP32
	if int8 && obs != nil {
		return nil, fmt.Errorf("encoder: calibration needs an FP32 model: %w", ErrConfig)
	}
	if err := m.check(in); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	h, rows := m.cfg.Hidden, in.Batch*in.Seq
	t0 := time.Now()
	var x []float32
	if b == nil {
		b = m.getBuffers(rows)
		defer m.putBuffers(b)
		x = make([]float32, rows*h)
	} else {
		if b.rows < rows {
			return nil, fmt.Errorf("encoder: internal error: buffers of %d tokens for a pass of %d", b.rows, rows)
		}
		x = b.x[:rows*h]
	}
	qs := b.view(m.cfg, rows)
	m.embed(in, x)
	// In static mode the embeddings' LayerNorm also quantizes the first
	// layer's input.
	var qp *kernels.QuantParams
	var q []uint8
	if int8 && m.prec == PrecisionInt8Static && len(m.qlayers) > 0 {
		if qp = m.qlayers[0].lin[linQKV].staticParams(); qp != nil {
			q = qs.xq.u8
		}
	}
	if err := kernels.LayerNorm(x, q, x, nil, rows, h, m.embLN, m.embLNBias, m.cfg.LayerNormEps, qp); err != nil {
		return nil, fmt.Errorf("encoder: embeddings: %w", err)
	}
	m.prof.add(partEmbeddings, t0, 0)
	out := &Output{Batch: in.Batch, Seq: in.Seq, Hidden: h}
	if keepHidden {
		out.HiddenStates = append(out.HiddenStates, append([]float32(nil), x...))
	}
	xqReady := qp != nil
	for li := 0; li < len(m.layers)+len(m.qlayers); li++ {
		// A cancelled call stops at the next layer boundary: the longest
		// it runs on is one layer of one micro-batch.
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var err error
		if int8 {
			xqReady, err = m.qlayer(li, x, in, qs, xqReady)
		} else {
			err = m.layer(li, x, in, qs.scratch, obs)
		}
		if err != nil {
			return nil, fmt.Errorf("encoder: layer %d: %w", li, err)
		}
		if keepHidden {
			out.HiddenStates = append(out.HiddenStates, append([]float32(nil), x...))
		}
	}
	out.Last = x
	return out, nil
}

// embed writes the sum of the word, position and token type embeddings
// of every token into x ([rows][Hidden]).
func (m *Model) embed(in *Inputs, x []float32) {
	h, rows := m.cfg.Hidden, in.Batch*in.Seq
	pos := m.positions(in)
	for i := 0; i < rows; i++ {
		row := x[i*h : (i+1)*h]
		w := m.wordEmb[int(in.IDs[i])*h:]
		p := m.posEmb[pos[i]*h:]
		for j := range row {
			row[j] = w[j] + p[j]
		}
		if m.typeEmb != nil {
			t := 0
			if in.TypeIDs != nil {
				t = int(in.TypeIDs[i])
			}
			te := m.typeEmb[t*h:]
			for j := range row {
				row[j] += te[j]
			}
		}
	}
}

// scratch is an FP32 forward pass's intermediates, each exactly the
// pass's size (a view of buffers).
type scratch struct {
	qkv, ctx, t, f []float32
}

// buffers hold the scratch of forward passes of up to rows tokens (rows x
// padded length), and the hidden state of a pipeline call's passes. A
// pass takes a view of exactly its size, so one set serves every
// micro-batch of a call (Pipeline.stream) and, through the model's pool,
// later passes of any shape that fits. int8 adds the INT8 passes' u8
// inputs; a model's precision never changes, so its pool holds one kind.
type buffers struct {
	rows              int
	int8              bool
	x, qkv, ctx, t, f []float32
	xq, ctxq, fq      qin
	tmp               []float32
}

// newBuffers makes buffers for passes of up to rows tokens of m.
func (m *Model) newBuffers(rows int) *buffers {
	h, in := m.cfg.Hidden, m.cfg.Intermediate
	b := &buffers{rows: rows, int8: m.prec != PrecisionFP32,
		x: make([]float32, rows*h), qkv: make([]float32, rows*3*h), ctx: make([]float32, rows*h),
		t: make([]float32, rows*h), f: make([]float32, rows*in)}
	if b.int8 {
		mk := func(k int) qin { return qin{u8: make([]uint8, rows*k), scales: make([]float32, rows)} }
		b.xq, b.ctxq, b.fq = mk(h), mk(h), mk(in)
		b.tmp = make([]float32, rows*max(h, in))
	}
	return b
}

// getBuffers returns buffers for passes of up to rows tokens: idle ones
// when they are large enough (a pass of BERT-large needs ~17 MB of them
// per 512 tokens, which would otherwise be allocated and cleared every
// time), else new ones.
func (m *Model) getBuffers(rows int) *buffers {
	if b := m.scratchPool.get(rows); b != nil {
		return b
	}
	return m.newBuffers(rows)
}

// putBuffers gives buffers back to the pool.
func (m *Model) putBuffers(b *buffers) { m.scratchPool.put(b) }

// maxIdleBuffers bounds the idle sets a pool remembers.
const maxIdleBuffers = 8

// bufferPool keeps idle buffers for later passes. It holds them weakly,
// as a sync.Pool does, so a garbage collection frees the idle ones; but
// any get may take any idle set, where a sync.Pool's get looks first in
// its own P's slot and often misses a set another P left: back-to-back
// calls of a service then held two or three sets of a budget's size
// where one serves. One set may be kept strongly (keep: a warmed-up
// model's, sized to its warm-up's largest pass), so that a call after a
// collection does not allocate and clear tens of megabytes again.
type bufferPool struct {
	mu   sync.Mutex
	idle []weak.Pointer[buffers]
	// kept is held until the model closes; keptIdle says no pass has it.
	kept     *buffers
	keptIdle bool
}

// get takes an idle set of at least rows tokens (the kept one first, then
// the most recently put); nil when there is none.
func (p *bufferPool) get(rows int) *buffers {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.kept != nil && p.keptIdle && p.kept.rows >= rows {
		p.keptIdle = false
		return p.kept
	}
	for i := len(p.idle) - 1; i >= 0; i-- {
		b := p.idle[i].Value()
		if b != nil && b.rows < rows {
			continue
		}
		p.idle = slices.Delete(p.idle, i, i+1)
		if b != nil {
			return b
		}
	}
	return nil
}

// put makes b idle (forgetting the oldest idle set when there are
// maxIdleBuffers already).
func (p *bufferPool) put(b *buffers) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if b == p.kept {
		p.keptIdle = true
		return
	}
	if len(p.idle) == maxIdleBuffers {
		p.idle = slices.Delete(p.idle, 0, 1)
	}
	p.idle = append(p.idle, weak.Make(b))
}

// keep holds b strongly from now on, in place of the kept set (nil: none,
// as Close does). A kept set that a pass holds is simply forgotten: its
// put then makes it an ordinary idle set.
func (p *bufferPool) keep(b *buffers) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.kept, p.keptIdle = b, b != nil
}

// keepBuffers makes the model hold one set of buffers for passes of up to
// rows tokens until it closes (unless it holds one at least that large).
func (m *Model) keepBuffers(rows int) {
	if rows > 0 && !m.scratchPool.keeps(rows) {
		m.scratchPool.keep(m.newBuffers(rows))
	}
}

// keeps reports whether the kept set serves passes of rows tokens.
func (p *bufferPool) keeps(rows int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.kept != nil && p.kept.rows >= rows
}

// view is the scratch of one pass of rows tokens (rows <= b.rows). Every
// buffer is written before it is read in a pass, so reused buffers need
// no clearing.
func (b *buffers) view(c Config, rows int) *qscratch {
	h, in := c.Hidden, c.Intermediate
	s := &qscratch{scratch: &scratch{qkv: b.qkv[:rows*3*h], ctx: b.ctx[:rows*h], t: b.t[:rows*h], f: b.f[:rows*in]}}
	if b.int8 {
		v := func(q qin, k int) qin { return qin{u8: q.u8[:rows*k], scales: q.scales[:rows]} }
		s.xq, s.ctxq, s.fq = v(b.xq, h), v(b.ctxq, h), v(b.fq, in)
		s.tmp = b.tmp[:rows*max(h, in)]
	}
	return s
}

// layer runs one post-LayerNorm layer in place on x.
func (m *Model) layer(li int, x []float32, in *Inputs, s *scratch, obs observeFunc) error {
	ly := &m.layers[li]
	h, rows, th, inter := m.cfg.Hidden, in.Batch*in.Seq, m.threads, m.cfg.Intermediate
	p := m.prof
	fl := func(n, k int) float64 { return 2 * float64(rows) * float64(n) * float64(k) }
	see := func(which int, x []float32, k int) error {
		if obs == nil {
			return nil
		}
		return obs(li, which, x, k, in.Mask)
	}
	if err := see(linQKV, x, h); err != nil {
		return err
	}
	t := time.Now()
	if err := ly.qkv.Run(&kernels.GEMMF32{M: rows, A: x, Lda: h, Ep: &kernels.Epilogue{Bias: ly.qkvBias}, C: s.qkv, Ldc: 3 * h, Threads: th}); err != nil {
		return fmt.Errorf("qkv: %w", err)
	}
	p.add(partLinear, t, fl(3*h, h))
	t = time.Now()
	if err := m.attention(in, s); err != nil {
		return err
	}
	p.add(partAttention, t, 0)
	// t = O(ctx) + b + x, then x = LN(t).
	if err := see(linO, s.ctx, h); err != nil {
		return err
	}
	t = time.Now()
	if err := ly.o.Run(&kernels.GEMMF32{M: rows, A: s.ctx, Lda: h, Ep: &kernels.Epilogue{Bias: ly.oBias, Residual: x}, C: s.t, Ldc: h, Threads: th}); err != nil {
		return fmt.Errorf("attention output: %w", err)
	}
	p.add(partLinear, t, fl(h, h))
	t = time.Now()
	if err := kernels.LayerNorm(x, nil, s.t, nil, rows, h, ly.attnLN, ly.attnLNBias, m.cfg.LayerNormEps, nil); err != nil {
		return fmt.Errorf("attention layer norm: %w", err)
	}
	p.add(partLayerNorm, t, 0)
	if err := see(linFFN1, x, h); err != nil {
		return err
	}
	t = time.Now()
	if err := ly.ffn1.Run(&kernels.GEMMF32{M: rows, A: x, Lda: h, Ep: &kernels.Epilogue{Bias: ly.ffn1Bias, Act: m.cfg.Activation}, C: s.f, Ldc: inter, Threads: th}); err != nil {
		return fmt.Errorf("ffn1: %w", err)
	}
	if err := see(linFFN2, s.f, inter); err != nil {
		return err
	}
	if err := ly.ffn2.Run(&kernels.GEMMF32{M: rows, A: s.f, Lda: inter, Ep: &kernels.Epilogue{Bias: ly.ffn2Bias, Residual: x}, C: s.t, Ldc: h, Threads: th}); err != nil {
		return fmt.Errorf("ffn2: %w", err)
	}
	p.add(partLinear, t, 2*fl(inter, h))
	t = time.Now()
	if err := kernels.LayerNorm(x, nil, s.t, nil, rows, h, ly.outLN, ly.outLNBias, m.cfg.LayerNormEps, nil); err != nil {
		return fmt.Errorf("output layer norm: %w", err)
	}
	p.add(partLayerNorm, t, 0)
	return nil
}
