package encoder

import (
	"fmt"
	"math"

	"github.com/int8bert/int8bert/kernels"
	"github.com/int8bert/int8bert/selector"
)

// Model is an FP32 encoder. It is safe for concurrent Forward calls.
type Model struct {
	cfg                      Config
	wordEmb, posEmb, typeEmb []float32
	embLN, embLNBias         []float32
	layers                   []layer
	sel                      *selector.Selector
	threads                  int
}

type layer struct {
	qkv                *selector.LinearF32 // [3H, H]: Q, K, V rows
	qkvBias            []float32
	o                  *selector.LinearF32
	oBias              []float32
	attnLN, attnLNBias []float32
	ffn1               *selector.LinearF32
	ffn1Bias           []float32
	ffn2               *selector.LinearF32
	ffn2Bias           []float32
	outLN, outLNBias   []float32
}

// Options tune a model.
type Options struct {
	// Threads per linear layer (<= 1: the calling goroutine).
	Threads int
}

// New loads the encoder's weights from l (names as given) and prepares
// every linear layer on sel.
func New(cfg Config, l *Loader, names Names, sel *selector.Selector, o Options) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if sel == nil {
		return nil, fmt.Errorf("encoder: nil selector: %w", ErrConfig)
	}
	h, in := cfg.Hidden, cfg.Intermediate
	m := &Model{cfg: cfg, sel: sel, threads: o.Threads}
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
	for i := 0; i < cfg.Layers; i++ {
		n := names.Layer(i)
		var q, k, v, qb, kb, vb, o, f1, f2 []float32
		var ly layer
		get(&q, n.Q, h, h)
		get(&k, n.K, h, h)
		get(&v, n.V, h, h)
		get(&qb, n.QBias, h)
		get(&kb, n.KBias, h)
		get(&vb, n.VBias, h)
		get(&o, n.O, h, h)
		get(&ly.oBias, n.OBias, h)
		get(&ly.attnLN, n.AttnLN, h)
		get(&ly.attnLNBias, n.AttnLNBias, h)
		get(&f1, n.FFN1, in, h)
		get(&ly.ffn1Bias, n.FFN1Bias, in)
		get(&f2, n.FFN2, h, in)
		get(&ly.ffn2Bias, n.FFN2Bias, h)
		get(&ly.outLN, n.OutLN, h)
		get(&ly.outLNBias, n.OutLNBias, h)
		if err != nil {
			m.Close()
			return nil, err
		}
		qkv := append(append(append(make([]float32, 0, 3*h*h), q...), k...), v...)
		ly.qkvBias = append(append(append(make([]float32, 0, 3*h), qb...), kb...), vb...)
		lin := func(w []float32, n, k int) *selector.LinearF32 {
			if err != nil {
				return nil
			}
			var x *selector.LinearF32
			x, err = sel.NewLinearF32(n, k, w, k)
			return x
		}
		ly.qkv = lin(qkv, 3*h, h)
		ly.o = lin(o, h, h)
		ly.ffn1 = lin(f1, in, h)
		ly.ffn2 = lin(f2, h, in)
		m.layers = append(m.layers, ly)
		if err != nil {
			m.Close()
			return nil, fmt.Errorf("encoder: layer %d: %w", i, err)
		}
	}
	return m, nil
}

// Config returns the model's configuration.
func (m *Model) Config() Config { return m.cfg }

// Selector returns the selector the model's linears run on.
func (m *Model) Selector() *selector.Selector { return m.sel }

// Threads is the thread count per linear.
func (m *Model) Threads() int { return m.threads }

// Close releases the prepared linears.
func (m *Model) Close() error {
	for _, ly := range m.layers {
		for _, l := range []*selector.LinearF32{ly.qkv, ly.o, ly.ffn1, ly.ffn2} {
			if l != nil {
				l.Close()
			}
		}
	}
	m.layers = nil
	return nil
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
	if err := m.check(in); err != nil {
		return nil, err
	}
	h, rows := m.cfg.Hidden, in.Batch*in.Seq
	x := make([]float32, rows*h)
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
	if err := kernels.LayerNorm(x, nil, x, nil, rows, h, m.embLN, m.embLNBias, m.cfg.LayerNormEps, nil); err != nil {
		return nil, fmt.Errorf("encoder: embeddings: %w", err)
	}
	out := &Output{Batch: in.Batch, Seq: in.Seq, Hidden: h}
	if keepHidden {
		out.HiddenStates = append(out.HiddenStates, append([]float32(nil), x...))
	}
	s := newScratch(m.cfg, in.Batch, in.Seq)
	for li := range m.layers {
		if err := m.layer(li, x, in, s); err != nil {
			return nil, fmt.Errorf("encoder: layer %d: %w", li, err)
		}
		if keepHidden {
			out.HiddenStates = append(out.HiddenStates, append([]float32(nil), x...))
		}
	}
	out.Last = x
	return out, nil
}

type scratch struct {
	qkv, ctx, t, f, scores []float32
	mask                   []float32
}

func newScratch(c Config, batch, seq int) *scratch {
	rows := batch * seq
	return &scratch{
		qkv: make([]float32, rows*3*c.Hidden), ctx: make([]float32, rows*c.Hidden),
		t: make([]float32, rows*c.Hidden), f: make([]float32, rows*c.Intermediate),
		scores: make([]float32, seq*seq), mask: make([]float32, seq),
	}
}

// layer runs one post-LayerNorm layer in place on x.
func (m *Model) layer(li int, x []float32, in *Inputs, s *scratch) error {
	ly := &m.layers[li]
	h, rows, th := m.cfg.Hidden, in.Batch*in.Seq, m.threads
	if err := ly.qkv.Run(rows, x, h, &kernels.Epilogue{Bias: ly.qkvBias}, s.qkv, 3*h, th); err != nil {
		return fmt.Errorf("qkv: %w", err)
	}
	if err := m.attention(in, s); err != nil {
		return err
	}
	// t = O(ctx) + b + x, then x = LN(t).
	if err := ly.o.Run(rows, s.ctx, h, &kernels.Epilogue{Bias: ly.oBias, Residual: x}, s.t, h, th); err != nil {
		return fmt.Errorf("attention output: %w", err)
	}
	if err := kernels.LayerNorm(x, nil, s.t, nil, rows, h, ly.attnLN, ly.attnLNBias, m.cfg.LayerNormEps, nil); err != nil {
		return fmt.Errorf("attention layer norm: %w", err)
	}
	if err := ly.ffn1.Run(rows, x, h, &kernels.Epilogue{Bias: ly.ffn1Bias, Act: m.cfg.Activation}, s.f, m.cfg.Intermediate, th); err != nil {
		return fmt.Errorf("ffn1: %w", err)
	}
	if err := ly.ffn2.Run(rows, s.f, m.cfg.Intermediate, &kernels.Epilogue{Bias: ly.ffn2Bias, Residual: x}, s.t, h, th); err != nil {
		return fmt.Errorf("ffn2: %w", err)
	}
	if err := kernels.LayerNorm(x, nil, s.t, nil, rows, h, ly.outLN, ly.outLNBias, m.cfg.LayerNormEps, nil); err != nil {
		return fmt.Errorf("output layer norm: %w", err)
	}
	return nil
}

// maskValue is what a padded key adds to a score: float32's lowest value,
// as Hugging Face uses.
const maskValue = -math.MaxFloat32

// attention computes the context of every head from the fused QKV rows:
// softmax(Q K^T / sqrt(d) + mask) V.
func (m *Model) attention(in *Inputs, s *scratch) error {
	h, heads, seq := m.cfg.Hidden, m.cfg.Heads, in.Seq
	d := h / heads
	scale := float32(1 / math.Sqrt(float64(d)))
	ld := 3 * h
	for b := 0; b < in.Batch; b++ {
		for j := 0; j < seq; j++ {
			s.mask[j] = 0
			if in.Mask[b*seq+j] == 0 {
				s.mask[j] = maskValue
			}
		}
		base := b * seq
		for hd := 0; hd < heads; hd++ {
			qo, ko, vo := hd*d, h+hd*d, 2*h+hd*d
			for i := 0; i < seq; i++ {
				q := s.qkv[(base+i)*ld+qo : (base+i)*ld+qo+d]
				row := s.scores[i*seq : (i+1)*seq]
				for j := 0; j < seq; j++ {
					k := s.qkv[(base+j)*ld+ko : (base+j)*ld+ko+d]
					row[j] = dot(q, k) * scale
				}
			}
			if err := kernels.Softmax(s.scores, s.scores, seq, seq, s.mask); err != nil {
				return fmt.Errorf("attention softmax (sequence %d, head %d): %w", b, hd, err)
			}
			for i := 0; i < seq; i++ {
				c := s.ctx[(base+i)*h+hd*d : (base+i)*h+hd*d+d]
				for t := range c {
					c[t] = 0
				}
				p := s.scores[i*seq : (i+1)*seq]
				for j, pj := range p {
					if pj == 0 {
						continue
					}
					v := s.qkv[(base+j)*ld+vo : (base+j)*ld+vo+d]
					axpy(pj, v, c)
				}
			}
		}
	}
	return nil
}

func dot(a, b []float32) float32 {
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

func axpy(a float32, x, y []float32) {
	for i, v := range x {
		y[i] += a * v
	}
}

func kernelsBias(b []float32) *kernels.Epilogue { return &kernels.Epilogue{Bias: b} }

const reluAct = kernels.ActReLU
