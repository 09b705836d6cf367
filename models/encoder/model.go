package encoder

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
	"weak"

	"github.com/int8bert/int8bert/kernels"
	"github.com/int8bert/int8bert/selector"
)

// Model is an encoder (FP32, or INT8 after quantization). It is safe for
// concurrent Forward calls; Close waits for the calls in flight, and any
// call after it returns ErrClosed.
type Model struct {
	cfg                      Config
	wordEmb, posEmb, typeEmb []float32
	embLN, embLNBias         []float32
	// relBias is the relative position bias of every head as a vector
	// over key - query (relbias.go); nil without one.
	relBias []float32
	// dis is DeBERTa's disentangled attention (disentangled.go); nil
	// without it.
	dis *disentangled
	// proj projects the embeddings onto the hidden size (Config.Projects:
	// ELECTRA's embeddings_project), an FP32 linear at every precision;
	// nil without one.
	proj    *Dense
	sel     *selector.Selector
	threads int
	prof    *Profile
	// (attention's two products run on the kernels sel chooses for them:
	// Selector.KernelF32)
	// src and names are where the weights came from (an FP32 model reads
	// them again to quantize itself).
	src   Source
	names Names
	// pass is the model's precision and its layers (pass.go), chosen
	// when the model is built.
	pass pass
	// attnMode is the attention mode asked for (Options.Attention,
	// resolved); an INT8 pass runs it.
	attnMode AttentionMode
	// attnRows, when > 0, fixes attention's query-row block
	// (attnRowBlock; tests).
	attnRows int
	// scratchPool keeps forward passes' buffers between passes.
	scratchPool bufferPool
	// g admits calls until Close (lifecycle.go).
	g gate
}

// layer is an FP32 or BF16 layer (linear.go).
type layer struct {
	qkv                linear // [3H, H]: Q, K, V rows
	qkvBias            []float32
	o                  linear
	oBias              []float32
	attnLN, attnLNBias []float32
	ffn1               linear
	ffn1Bias           []float32
	ffn2               linear
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
	// AttentionHeads is attention's (sequence, head) tasks' time summed
	// over the goroutines that ran them (work, not wall: Attention is the
	// wall time); AttentionC2P and AttentionP2C are the parts of it spent
	// on DeBERTa's content-to-position and position-to-content terms
	// (disentangled.go: their products, packing and gathers), zero
	// without them. The rest of AttentionHeads is the content term's
	// scores, the softmax and the context.
	AttentionHeads, AttentionC2P, AttentionP2C time.Duration
}

// addHead adds one attention task's time and its relative terms' parts.
func (p *Profile) addHead(head, c2p, p2c time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.AttentionHeads += head
	p.AttentionC2P += c2p
	p.AttentionP2C += p2c
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
		LinearFLOPs: p.LinearFLOPs, Passes: p.Passes,
		AttentionHeads: p.AttentionHeads, AttentionC2P: p.AttentionC2P, AttentionP2C: p.AttentionP2C}
}

// newModel loads the encoder's weights from l (names as given) and
// prepares every linear layer on sel.
func newModel(cfg Config, l *Loader, names Names, sel *selector.Selector, o Options) (*Model, error) {
	p, mk := &floatPass{prec: PrecisionFP32}, newF32Linear
	if o.Precision == PrecisionBF16 {
		p.prec, mk = PrecisionBF16, newBF16Linear
	}
	m, err := newBase(cfg, l, names, sel, o, p)
	if err != nil {
		return nil, err
	}
	if p.prec == PrecisionBF16 {
		if err := checkBF16(sel); err != nil {
			m.Close()
			return nil, err
		}
		p.attnBF16 = m.attnMode == AttentionBF16
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
		var lins [numLin]linear
		for which := range lins {
			if err == nil {
				lins[which], err = mk(sel, dims[which][0], dims[which][1], w[which])
			}
		}
		ly.qkv, ly.o, ly.ffn1, ly.ffn2 = lins[linQKV], lins[linO], lins[linFFN1], lins[linFFN2]
		p.layers = append(p.layers, ly)
		if err != nil {
			m.Close()
			return nil, fmt.Errorf("encoder: layer %d: %w", i, err)
		}
	}
	return m, nil
}

// newBase makes a model of pass p with its embeddings (p's layers are
// the caller's to add).
func newBase(cfg Config, l *Loader, names Names, sel *selector.Selector, o Options, p pass) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if sel == nil {
		return nil, fmt.Errorf("encoder: nil selector: %w", ErrConfig)
	}
	h := cfg.EmbeddingWidth()
	m := &Model{cfg: cfg, sel: sel, threads: o.Threads, prof: o.Profile,
		src: l.src, names: names, pass: p}
	var err error
	if m.attnMode, err = o.Attention.resolve(sel.Features(), p.precision()); err != nil {
		return nil, err
	}
	get := func(dst *[]float32, name string, shape ...int) {
		if err == nil {
			*dst, err = l.Get(name, shape...)
		}
	}
	get(&m.wordEmb, names.WordEmb, cfg.Vocab, h)
	if !cfg.NoPositions {
		get(&m.posEmb, names.PosEmb, cfg.MaxPositions, h)
	}
	if cfg.TypeVocab > 0 {
		get(&m.typeEmb, names.TypeEmb, cfg.TypeVocab, h)
	}
	get(&m.embLN, names.EmbLN, h)
	get(&m.embLNBias, names.EmbLNBias, h)
	if cfg.RelBuckets > 0 {
		var table []float32
		get(&table, names.RelBias, cfg.RelTable, cfg.Heads)
		if err == nil {
			m.relBias = relBiasVectors(cfg, table)
		}
	}
	if err == nil && cfg.Dis.Span > 0 {
		err = m.newDisentangled(l, names)
	}
	if err == nil && cfg.Projects() {
		if names.EmbProj == "" {
			return nil, fmt.Errorf("encoder: embeddings of %d values for a hidden size of %d, and the family names no projection: %w",
				h, cfg.Hidden, ErrConfig)
		}
		m.proj, err = NewDense(l, sel, names.EmbProj, names.EmbProjBias, cfg.Hidden, h, HeadNone)
	}
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
		m.pass.close()
		m.proj.Close()
		m.scratchPool.keep(nil)
		return nil
	})
}

// Inputs are the token ids of one forward pass, in one of two layouts
// (docs/DESIGN.md section 2.2). TypeIDs may be nil (all 0) in either.
//
// Padded (Lens nil): Batch sequences of Seq tokens each, row-major
// ([Batch][Seq]); Mask is 1 for tokens and 0 for padding, and every
// linear computes the padding too.
//
// Packed (Lens set): len(Lens) sequences of Lens[b] tokens each (1 to the
// model's MaxSeq), back to back: IDs (and TypeIDs) hold sum(Lens) tokens,
// sequence b's from sum(Lens[:b]) on. Batch must be len(Lens), and Seq 0
// or the longest of Lens. Mask may be nil (every token is real); when set
// (sum(Lens) values) it masks keys within each sequence as the padded
// layout's does. No padding is computed: the embeddings, linears and
// LayerNorms run on sum(Lens) rows, attention on each sequence's own
// tokens, and positions restart with every sequence.
type Inputs struct {
	Batch, Seq int
	IDs        []int32
	TypeIDs    []int32
	Mask       []int32
	Lens       []int
}

// Tokens is the number of tokens (rows) the pass computes: Batch x Seq
// padded, sum(Lens) packed.
func (in *Inputs) Tokens() int {
	if in.Lens == nil {
		return in.Batch * in.Seq
	}
	n := 0
	for _, l := range in.Lens {
		n += l
	}
	return n
}

// RealTokens is the number of tokens the mask marks as real (all of them
// when Mask is nil).
func (in *Inputs) RealTokens() int {
	if in.Mask == nil {
		return in.Tokens()
	}
	n := 0
	for _, v := range in.Mask {
		n += int(v)
	}
	return n
}

// Output is the last hidden state and, when asked for, the embeddings' and
// every layer's output (named for per-layer diffs against the reference:
// HiddenStates[0] is the embeddings), in the layout of the inputs: Last is
// [Batch][Seq][Hidden] for padded inputs, [sum(Lens)][Hidden] for packed
// ones (Seq is then the longest sequence). Rows says where a sequence's
// rows are in either layout.
type Output struct {
	Batch, Seq, Hidden int
	Last               []float32
	HiddenStates       [][]float32
	// Offsets are, for packed inputs, the first row of every sequence and
	// the end of the last ([Batch+1]; sequence b is rows Offsets[b] to
	// Offsets[b+1]); nil for padded inputs.
	Offsets []int
}

// Rows returns the rows [start, end) of Last (and of the per-token head
// outputs) that hold sequence b: its Seq rows, padding included, in the
// padded layout; its own tokens in the packed one.
func (o *Output) Rows(b int) (start, end int) {
	if o.Offsets != nil {
		return o.Offsets[b], o.Offsets[b+1]
	}
	return b * o.Seq, (b + 1) * o.Seq
}

// rows is the number of rows of Last.
func (o *Output) rows() int {
	if o.Offsets != nil {
		return o.Offsets[len(o.Offsets)-1]
	}
	return o.Batch * o.Seq
}

func (m *Model) check(in *Inputs) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("encoder: inputs: %s: %w", fmt.Sprintf(format, args...), ErrInput)
	}
	most := m.cfg.MaxSeq()
	var n int
	if in.Lens == nil {
		n = in.Batch * in.Seq
		switch {
		case in.Batch <= 0 || in.Seq <= 0:
			return bad("batch %d x seq %d", in.Batch, in.Seq)
		case in.Seq > most:
			return bad("sequence of %d tokens, the model takes at most %d", in.Seq, most)
		case len(in.IDs) != n || len(in.Mask) != n || (in.TypeIDs != nil && len(in.TypeIDs) != n):
			return bad("want %d ids, mask values and type ids, have %d, %d, %d", n, len(in.IDs), len(in.Mask), len(in.TypeIDs))
		}
	} else {
		// Packed (docs/DESIGN.md section 2.2).
		if len(in.Lens) == 0 || in.Batch != len(in.Lens) {
			return bad("packed inputs of %d lengths with batch %d (want batch = the number of lengths, at least 1)", len(in.Lens), in.Batch)
		}
		longest := 0
		for b, l := range in.Lens {
			if l < 1 || l > most {
				return bad("packed sequence %d has %d tokens (want 1 to %d)", b, l, most)
			}
			n += l
			longest = max(longest, l)
		}
		switch {
		case in.Seq != 0 && in.Seq != longest:
			return bad("packed inputs with seq %d, the longest sequence has %d tokens (want 0 or %d)", in.Seq, longest, longest)
		case len(in.IDs) != n:
			return bad("packed lengths sum to %d tokens, have %d ids", n, len(in.IDs))
		case in.Mask != nil && len(in.Mask) != n:
			return bad("packed lengths sum to %d tokens, have %d mask values (or leave the mask nil)", n, len(in.Mask))
		case in.TypeIDs != nil && len(in.TypeIDs) != n:
			return bad("packed lengths sum to %d tokens, have %d type ids", n, len(in.TypeIDs))
		}
	}
	seqOf := func(i int) (b, t int) {
		if in.Lens == nil {
			return i / in.Seq, i % in.Seq
		}
		for b, l := range in.Lens {
			if i < l {
				return b, i
			}
			i -= l
		}
		return len(in.Lens), i
	}
	for i := 0; i < n; i++ {
		if id := in.IDs[i]; id < 0 || int(id) >= m.cfg.Vocab {
			b, t := seqOf(i)
			return bad("token %d of sequence %d: id %d outside the vocabulary of %d", t, b, id, m.cfg.Vocab)
		}
		if in.Mask != nil {
			if mk := in.Mask[i]; mk != 0 && mk != 1 {
				return bad("attention mask value %d at %d (want 0 or 1)", mk, i)
			}
		}
		if in.TypeIDs != nil {
			if t := in.TypeIDs[i]; t < 0 || int(t) >= max(m.cfg.TypeVocab, 1) {
				return bad("token type %d at %d outside [0,%d)", t, i, max(m.cfg.TypeVocab, 1))
			}
		}
	}
	return nil
}

// span is one sequence of a pass: its first row, its length in rows
// (Seq in the padded layout) and attention's kernels for that length.
type span struct {
	off, n int
	kr     attnPair
}

// spans lists the sequences of in into dst (reused), with attention's
// kernels asked once per run of equal lengths.
func (m *Model) spans(in *Inputs, dst []span) ([]span, error) {
	dst = dst[:0]
	var kr attnPair
	last, off := -1, 0
	for b := 0; b < in.Batch; b++ {
		n := in.Seq
		if in.Lens != nil {
			n = in.Lens[b]
		}
		if n != last {
			var err error
			if kr, err = m.attnKernels(n); err != nil {
				return nil, err
			}
			last = n
		}
		dst = append(dst, span{off: off, n: n, kr: kr})
		off += n
	}
	return dst, nil
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
// call's micro-batches (TaskModel.Stream), at least as large as in; the
// output's Last then aliases them and is valid until their next pass.
// With b nil the pass takes buffers from the pool and Last is its own.
func (m *Model) forward(ctx context.Context, in *Inputs, keepHidden bool, obs observeFunc, b *buffers) (*Output, error) {
	return m.forwardLive(ctx, in, keepHidden, obs, b, nil)
}

// forwardLive is forward that, with live set (a pipeline call's pass: b
// set, packed inputs, keepHidden false), asks before every layer which
// sequences are still wanted and drops the others from the pass
// (passLive.drop); it returns errNoneLive once none is left.
func (m *Model) forwardLive(ctx context.Context, in *Inputs, keepHidden bool, obs observeFunc, b *buffers, live *passLive) (*Output, error) {
	p := m.pass
	if live != nil && (b == nil || in.Lens == nil || keepHidden) {
		return nil, fmt.Errorf("encoder: internal error: live rows need a packed pipeline pass without hidden states")
	}
	if obs != nil && p.precision() != PrecisionFP32 {
		return nil, fmt.Errorf("encoder: calibration needs an FP32 model: %w", ErrConfig)
	}
	if err := m.check(in); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// A pass is a request in flight: the background tuner waits for it
	// (docs/DESIGN.md section 4.8).
	m.sel.BeginRequest()
	defer m.sel.EndRequest()
	h, rows := m.cfg.Hidden, in.Tokens()
	t0 := time.Now()
	var x []float32
	lone := b == nil
	if lone {
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
	if live != nil {
		live.batch0, live.rows0 = in.Batch, rows
	}
	spans, err := m.spans(in, b.spans)
	if err != nil {
		return nil, err
	}
	b.spans, qs.spans = spans, spans
	var xqReady bool
	if m.proj == nil {
		m.embed(in, spans, x)
		xqReady, err = p.embedNorm(m, x, qs)
	} else {
		err = m.embedProjected(in, spans, b.emb[:rows*m.cfg.EmbeddingWidth()], x)
	}
	if err != nil {
		return nil, fmt.Errorf("encoder: embeddings: %w", err)
	}
	m.prof.add(partEmbeddings, t0, 0)
	out := &Output{Batch: in.Batch, Seq: in.Seq, Hidden: h}
	if in.Lens != nil {
		// Packed: Offsets are the pipeline buffers' own (valid as long as
		// Last), or the lone pass's.
		offs := b.offs[:0]
		if lone {
			offs = make([]int, 0, len(spans)+1)
		}
		out.Seq = 0
		for _, sp := range spans {
			offs = append(offs, sp.off)
			out.Seq = max(out.Seq, sp.n)
		}
		out.Offsets = append(offs, rows)
		if !lone {
			b.offs = out.Offsets
		}
	}
	if keepHidden {
		out.HiddenStates = append(out.HiddenStates, append([]float32(nil), x...))
	}
	for li := range p.numLayers() {
		// A cancelled call stops at the next layer boundary: the longest
		// it runs on is one layer of one micro-batch.
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if live != nil {
			if x, qs, err = live.drop(m, li, in, out, b, x, qs, xqReady); err != nil {
				return nil, err
			}
			live.tokenLayers += qs.rows
		}
		var err error
		if xqReady, err = p.layer(m, li, x, in, qs, obs, xqReady); err != nil {
			return nil, fmt.Errorf("encoder: layer %d: %w", li, err)
		}
		if keepHidden {
			out.HiddenStates = append(out.HiddenStates, append([]float32(nil), x...))
		}
	}
	if live != nil {
		// Rows gone after the last layer leave before the heads.
		if x, _, err = live.drop(m, p.numLayers(), in, out, b, x, qs, false); err != nil {
			return nil, err
		}
	}
	out.Last = x
	return out, nil
}

// embed writes the sum of the word, position and token type embeddings
// of every token into x ([rows][Config.EmbeddingWidth]). Positions restart at every
// sequence of spans: 0, 1, ... (BERT, DistilBERT), or for XLM-R counted
// over the sequence's non-padding tokens from PaddingIdx+1 (padding
// tokens get PaddingIdx), as Hugging Face's
// create_position_ids_from_input_ids does per row.
//
// The spans are back to back from row 0; on more than one thread the rows
// are cut into chunks (kernels.ParallelRows), each token's row summed
// alone, so the bits do not depend on the count.
func (m *Model) embed(in *Inputs, spans []span, x []float32) {
	rows := 0
	if n := len(spans); n > 0 {
		rows = spans[n-1].off + spans[n-1].n
	}
	if m.threads <= 1 {
		m.embedRows(in, spans, 0, rows, x)
		return
	}
	_ = kernels.ParallelRows(m.threads, rows, rowChunk, func(r0, r1 int) error {
		m.embedRows(in, spans, r0, r1, x)
		return nil
	})
}

// embedRows is embed of the rows [r0, r1).
func (m *Model) embedRows(in *Inputs, spans []span, r0, r1 int, x []float32) {
	// The first span that ends after r0.
	first, _ := slices.BinarySearchFunc(spans, r0, func(sp span, r int) int { return cmp.Compare(sp.off+sp.n, r+1) })
	for _, sp := range spans[first:] {
		if sp.off >= r1 {
			break
		}
		s0, s1 := max(r0-sp.off, 0), min(r1-sp.off, sp.n)
		// c counts the sequence's non-padding tokens before s0 (XLM-R).
		c := 0
		if m.cfg.PositionsFromPadding {
			for s := range s0 {
				if int(in.IDs[sp.off+s]) != m.cfg.PaddingIdx {
					c++
				}
			}
		}
		for s := s0; s < s1; s++ {
			m.embedToken(in, sp.off+s, m.position(in, sp.off+s, s, &c), x)
		}
	}
}

// embedProjected writes the embeddings of a model with a projection into
// x: the sum of the embeddings and their LayerNorm into e ([rows][Embedding]),
// then the projection of e onto the hidden size into x. The first layer
// quantizes its input itself (no LayerNorm produces it).
func (m *Model) embedProjected(in *Inputs, spans []span, e, x []float32) error {
	w, rows := m.cfg.EmbeddingWidth(), len(x)/m.cfg.Hidden
	m.embed(in, spans, e)
	if err := m.layerNormW(e, nil, e, rows, w, m.embLN, m.embLNBias, nil); err != nil {
		return err
	}
	if _, err := m.proj.ApplyTo(x, rows, e, w, m.threads); err != nil {
		return fmt.Errorf("projection: %w", err)
	}
	return nil
}

// embedNorm is the embeddings' LayerNorm of rows rows, in place on x,
// with a fused quantize step qp into q when qp is set (pass.embedNorm).
func (m *Model) embedNorm(x []float32, rows int, q []uint8, qp *kernels.QuantParams) error {
	return m.layerNorm(x, q, x, rows, m.embLN, m.embLNBias, qp)
}

// rowChunk is the fewest rows a task of a pass's row-wise steps
// (LayerNorm, the quantization of a linear's input) takes: below it the
// hand-off to another thread costs more than the rows.
const rowChunk = 16

// layerNorm is kernels.LayerNorm of rows rows of the hidden size (no
// residual: the linears' epilogues add it), in place or from src to dst,
// with the fused quantize step qp into q when set, on the model's threads
// by chunks of rows (kernels.ParallelRows: the same bits on any count).
func (m *Model) layerNorm(dst []float32, q []uint8, src []float32, rows int, gamma, beta []float32, qp *kernels.QuantParams) error {
	return m.layerNormW(dst, q, src, rows, m.cfg.Hidden, gamma, beta, qp)
}

// layerNormW is layerNorm of rows of width h (the embeddings' width where
// they are projected).
func (m *Model) layerNormW(dst []float32, q []uint8, src []float32, rows, h int, gamma, beta []float32, qp *kernels.QuantParams) error {
	eps := m.cfg.LayerNormEps
	if m.threads <= 1 {
		return kernels.LayerNorm(dst, q, src, nil, rows, h, gamma, beta, eps, qp)
	}
	return kernels.ParallelRows(m.threads, rows, rowChunk, func(r0, r1 int) error {
		var qr []uint8
		if q != nil {
			qr = q[r0*h : r1*h]
		}
		return kernels.LayerNorm(dst[r0*h:r1*h], qr, src[r0*h:r1*h], nil, r1-r0, h, gamma, beta, eps, qp)
	})
}

// position is the position id of token i, the s-th of its sequence; c
// counts the sequence's non-padding tokens so far (XLM-R).
func (m *Model) position(in *Inputs, i, s int, c *int) int {
	if !m.cfg.PositionsFromPadding {
		return s
	}
	if int(in.IDs[i]) == m.cfg.PaddingIdx {
		return m.cfg.PaddingIdx
	}
	*c++
	return *c + m.cfg.PaddingIdx
}

// embedToken writes token i's embeddings at position pos into its row of x
// (rows of the embeddings' width).
func (m *Model) embedToken(in *Inputs, i, pos int, x []float32) {
	h := m.cfg.EmbeddingWidth()
	row := x[i*h : (i+1)*h]
	w := m.wordEmb[int(in.IDs[i])*h:]
	if m.posEmb == nil {
		copy(row, w)
	} else {
		p := m.posEmb[pos*h:]
		for j := range row {
			row[j] = w[j] + p[j]
		}
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

// scratch is an FP32 forward pass's intermediates, each exactly the
// pass's size (a view of buffers).
type scratch struct {
	qkv, ctx, t, f []float32
	// rows is the pass's tokens; spans its sequences (forward).
	rows  int
	spans []span
	// layer is the layer whose attention runs (disentangled attention's
	// position projections are per layer).
	layer int
	// asRows is the tokens the pass started with when rows have left it
	// since (passLive): its linears keep the kernels chosen for those;
	// 0 while none has.
	asRows int
	// a8 is INT8 attention's quantized Q and K (quantQKV), made on
	// first use.
	a8 *qkv8
	// seqDone, when set, runs after the last head of each sequence bi
	// (attentionQ), on the goroutine that ran it while its context rows
	// are in cache (a one-thread dynamic pass quantizes them for O).
	seqDone func(bi int) error
}

// buffers hold the scratch of forward passes of up to rows tokens (rows x
// padded length), and the hidden state of a pipeline call's passes. A
// pass takes a view of exactly its size, so one set serves every
// micro-batch of a call (TaskModel.Stream) and, through the model's pool,
// later passes of any shape that fits. int8 adds the INT8 passes' u8
// inputs; a model's pass never changes, so its pool holds one kind.
type buffers struct {
	rows              int
	int8              bool
	x, qkv, ctx, t, f []float32
	xq, ctxq, fq      qin
	tmp               []float32
	// spans and offs are a pass's sequences and a packed pass's Offsets,
	// grown as needed and reused.
	spans []span
	offs  []int
	a8    qkv8
	// emb holds the embeddings before their projection (Config.Projects).
	emb []float32
}

// newBuffers makes buffers for passes of up to rows tokens of m.
func (m *Model) newBuffers(rows int) *buffers { return newBuffersFor(m.cfg, m.pass.int8(), rows) }

// newBuffersFor makes buffers for passes of up to rows tokens of a model
// of configuration c (int8: an INT8 pass's).
func newBuffersFor(c Config, int8 bool, rows int) *buffers {
	h, in := c.Hidden, c.Intermediate
	b := &buffers{rows: rows, int8: int8,
		x: make([]float32, rows*h), qkv: make([]float32, rows*3*h), ctx: make([]float32, rows*h),
		t: make([]float32, rows*h), f: make([]float32, rows*in)}
	if c.Projects() {
		b.emb = make([]float32, rows*c.EmbeddingWidth())
	}
	if b.int8 {
		// FFN1's requantizing epilogue writes FFN2's input at the
		// stride u8Ld; LayerNorm and attention write theirs K apart.
		mk := func(ld int) qin { return qin{u8: make([]uint8, rows*ld), scales: make([]float32, rows), ld: ld} }
		b.xq, b.ctxq, b.fq = mk(h), mk(h), mk(u8Ld(in))
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
	s := &qscratch{scratch: &scratch{qkv: b.qkv[:rows*3*h], ctx: b.ctx[:rows*h], t: b.t[:rows*h], f: b.f[:rows*in], rows: rows}}
	if b.int8 {
		v := func(q qin) qin { return qin{u8: q.u8[:rows*q.ld], scales: q.scales[:rows], ld: q.ld} }
		s.xq, s.ctxq, s.fq = v(b.xq), v(b.ctxq), v(b.fq)
		s.tmp = b.tmp[:rows*max(h, in)]
		s.a8 = &b.a8
	}
	return s
}

// layer runs FP32 or BF16 layer ly (layer li) in place on x.
func (m *Model) layer(ly *layer, li int, x []float32, in *Inputs, s *scratch, obs observeFunc) error {
	h, rows, th, inter := m.cfg.Hidden, s.rows, m.threads, m.cfg.Intermediate
	p := m.prof
	fl := func(n, k int) float64 { return 2 * float64(rows) * float64(n) * float64(k) }
	see := func(which int, x []float32, k int) error {
		if obs == nil {
			return nil
		}
		return obs(li, which, x[:rows*k], k, in.Mask)
	}
	if err := see(linQKV, x, h); err != nil {
		return err
	}
	t := time.Now()
	if err := ly.qkv.RunAs(&kernels.GEMMF32{M: rows, A: x, Lda: h, Ep: &kernels.Epilogue{Bias: ly.qkvBias}, C: s.qkv, Ldc: 3 * h, Threads: th}, s.asRows); err != nil {
		return fmt.Errorf("qkv: %w", err)
	}
	p.add(partLinear, t, fl(3*h, h))
	t = time.Now()
	s.layer = li
	if err := m.attention(in, s); err != nil {
		return err
	}
	p.add(partAttention, t, 0)
	// t = O(ctx) + b + x, then x = LN(t).
	if err := see(linO, s.ctx, h); err != nil {
		return err
	}
	t = time.Now()
	if err := ly.o.RunAs(&kernels.GEMMF32{M: rows, A: s.ctx, Lda: h, Ep: &kernels.Epilogue{Bias: ly.oBias, Residual: x}, C: s.t, Ldc: h, Threads: th}, s.asRows); err != nil {
		return fmt.Errorf("attention output: %w", err)
	}
	p.add(partLinear, t, fl(h, h))
	t = time.Now()
	if err := m.layerNorm(x, nil, s.t, rows, ly.attnLN, ly.attnLNBias, nil); err != nil {
		return fmt.Errorf("attention layer norm: %w", err)
	}
	p.add(partLayerNorm, t, 0)
	if err := see(linFFN1, x, h); err != nil {
		return err
	}
	t = time.Now()
	if err := ly.ffn1.RunAs(&kernels.GEMMF32{M: rows, A: x, Lda: h, Ep: &kernels.Epilogue{Bias: ly.ffn1Bias, Act: m.cfg.Activation}, C: s.f, Ldc: inter, Threads: th}, s.asRows); err != nil {
		return fmt.Errorf("ffn1: %w", err)
	}
	if err := see(linFFN2, s.f, inter); err != nil {
		return err
	}
	if err := ly.ffn2.RunAs(&kernels.GEMMF32{M: rows, A: s.f, Lda: inter, Ep: &kernels.Epilogue{Bias: ly.ffn2Bias, Residual: x}, C: s.t, Ldc: h, Threads: th}, s.asRows); err != nil {
		return fmt.Errorf("ffn2: %w", err)
	}
	p.add(partLinear, t, 2*fl(inter, h))
	t = time.Now()
	if err := m.layerNorm(x, nil, s.t, rows, ly.outLN, ly.outLNBias, nil); err != nil {
		return fmt.Errorf("output layer norm: %w", err)
	}
	p.add(partLayerNorm, t, 0)
	return nil
}
