package encoder

import (
	"fmt"
	"math"

	"github.com/int8bert/int8bert/kernels"
	"github.com/int8bert/int8bert/selector"
)

// MaskedLMSpec names a family's masked language modeling head (BERT's
// cls.predictions, DistilBERT's vocab_transform / vocab_layer_norm /
// vocab_projector, RoBERTa's lm_head): a dense layer with an activation,
// a LayerNorm, and the projection onto the vocabulary, whose weight is
// the word embeddings when the checkpoint leaves it out (tied, as
// save_pretrained writes it) and whose bias may be saved under several
// names.
type MaskedLMSpec struct {
	// Dense is the transform's dense layer [Hidden][Hidden]; its Act is
	// ignored: the activation is the config's (ConfigAct) or the exact
	// GELU.
	Dense     DenseSpec
	ConfigAct bool
	// LN and LNBias are the transform's LayerNorm (the config's epsilon).
	LN, LNBias string
	// Decoder is the projection's weight [Vocab][Hidden]; absent, the word
	// embeddings (tied weights).
	Decoder string
	// Bias are the names the projection's bias [Vocab] may have, the first
	// present read, the others (tied copies) accepted.
	Bias []string
	// Ignored are tensors of a pre-training checkpoint that the task does
	// not read (BERT's next-sentence head).
	Ignored []string
}

// mlmHead is a loaded masked-LM head.
type mlmHead struct {
	dense   *Dense
	gamma   []float32
	beta    []float32
	eps     float32
	decoder *Dense
}

// newMLMHead reads fam's masked-LM head from l (the base model under
// prefix): dense [h][h], LayerNorm [h], projection [vocab][h] and its bias.
func newMLMHead(l *Loader, sel *selector.Selector, fam *Family, prefix string, ec Config) (*mlmHead, error) {
	s := fam.MaskedLM
	h := &mlmHead{eps: ec.LayerNormEps}
	act := HeadGELU
	if s.ConfigAct {
		act = headActOf(ec.Activation)
	}
	var err error
	if h.dense, err = NewDense(l, sel, s.Dense.Weight, s.Dense.Bias, ec.Hidden, ec.Hidden, act); err != nil {
		return nil, err
	}
	if h.gamma, err = l.Get(s.LN, ec.Hidden); err != nil {
		h.close()
		return nil, err
	}
	if h.beta, err = l.Get(s.LNBias, ec.Hidden); err != nil {
		h.close()
		return nil, err
	}
	weight := fam.Names(prefix).WordEmb
	if s.Decoder != "" && l.Has(s.Decoder) {
		weight = s.Decoder
	}
	bias := ""
	for _, b := range s.Bias {
		if l.Has(b) {
			if bias == "" {
				bias = b
			} else {
				l.MarkUsed(b)
			}
		}
	}
	if bias == "" {
		h.close()
		return nil, fmt.Errorf("encoder: masked-LM head: missing its bias (%v): %w", s.Bias, ErrConfig)
	}
	if h.decoder, err = NewDense(l, sel, weight, bias, ec.Vocab, ec.Hidden, HeadNone); err != nil {
		h.close()
		return nil, err
	}
	for _, n := range s.Ignored {
		if l.Has(n) {
			l.MarkUsed(n)
		}
	}
	return h, nil
}

func (h *mlmHead) close() {
	if h == nil {
		return
	}
	h.dense.Close()
	h.decoder.Close()
}

// logits writes into y ([rows][vocab]) the head's logits of the rows of x
// ([rows][hidden]); t is [rows][hidden] of scratch.
func (h *mlmHead) logits(y, t []float32, rows int, x []float32, threads int) error {
	k := h.dense.K
	if _, err := h.dense.ApplyTo(t, rows, x, k, threads); err != nil {
		return err
	}
	if err := kernels.LayerNorm(t[:rows*k], nil, t[:rows*k], nil, rows, k, h.gamma, h.beta, h.eps, nil); err != nil {
		return err
	}
	_, err := h.decoder.ApplyTo(y, rows, t, k, threads)
	return err
}

// mlmChunkValues bounds the logits one step of MaskedLMLogits or Splade
// holds: a chunk of rows times the vocabulary (16 MB), so that a pass of
// 2,048 tokens on a 250,002-token vocabulary does not hold 2 GB.
const mlmChunkValues = 4 << 20

// MaskedLMLogits returns the masked-LM head's logits of the given rows of
// out.Last ([len(rows)][Vocab]): a pipeline scores only the rows it
// needs (fill-mask's mask tokens). The model must have a masked-LM head.
func (m *TaskModel) MaskedLMLogits(out *Output, rows []int) ([]float32, error) {
	if err := m.enter(); err != nil {
		return nil, err
	}
	defer m.leave()
	if m.mlm == nil {
		return nil, fmt.Errorf("encoder: %s has no masked-LM head: %w", m.Family.Describe(m.Task), ErrConfig)
	}
	hd, v := out.Hidden, m.mlm.decoder.N
	total := out.rows()
	x := make([]float32, len(rows)*hd)
	for i, r := range rows {
		if r < 0 || r >= total {
			return nil, fmt.Errorf("encoder: masked-LM row %d of %d: %w", r, total, ErrInput)
		}
		copy(x[i*hd:(i+1)*hd], out.Last[r*hd:(r+1)*hd])
	}
	y := make([]float32, len(rows)*v)
	if len(rows) == 0 {
		return y, nil
	}
	if err := m.mlm.logits(y, make([]float32, len(rows)*hd), len(rows), x, m.Encoder.Threads()); err != nil {
		return nil, fmt.Errorf("encoder: masked-LM head: %w", err)
	}
	return y, nil
}

// Splade writes into dst ([Vocab]) sequence b's SPLADE vector: for every
// vocabulary entry, the largest log(1 + ReLU(logit)) over the sequence's
// rows whose mask is 1 (mask nil: every row), as SPLADE's max pooling and
// TEI's splade pooling compute it. The logits are made a chunk of rows
// at a time (mlmChunkValues).
func (m *TaskModel) Splade(dst []float32, out *Output, b int, mask []int32) error {
	if err := m.enter(); err != nil {
		return err
	}
	defer m.leave()
	if m.mlm == nil {
		return fmt.Errorf("encoder: %s has no masked-LM head: %w", m.Family.Describe(m.Task), ErrConfig)
	}
	hd, v := out.Hidden, m.mlm.decoder.N
	if len(dst) < v {
		return fmt.Errorf("encoder: splade: %d values for a vocabulary of %d: %w", len(dst), v, ErrInput)
	}
	dst = dst[:v]
	clear(dst)
	start, end := out.Rows(b)
	var rows []int
	for r := start; r < end; r++ {
		if mask == nil || mask[r] != 0 {
			rows = append(rows, r)
		}
	}
	chunk := max(1, min(len(rows), mlmChunkValues/v))
	x := make([]float32, chunk*hd)
	t := make([]float32, chunk*hd)
	y := make([]float32, chunk*v)
	for lo := 0; lo < len(rows); lo += chunk {
		n := min(chunk, len(rows)-lo)
		for i, r := range rows[lo : lo+n] {
			copy(x[i*hd:(i+1)*hd], out.Last[r*hd:(r+1)*hd])
		}
		if err := m.mlm.logits(y, t, n, x, m.Encoder.Threads()); err != nil {
			return fmt.Errorf("encoder: masked-LM head: %w", err)
		}
		for i := 0; i < n; i++ {
			for j, z := range y[i*v : (i+1)*v] {
				// log1p(relu(z)) is increasing in z: the max of the
				// logits gives the max of the values; ReLU keeps 0.
				if z > dst[j] {
					dst[j] = z
				}
			}
		}
	}
	for j, z := range dst {
		if z > 0 {
			dst[j] = float32(math.Log1p(float64(z)))
		}
	}
	return nil
}

// Vocab is the size of a masked-LM head's output (the vocabulary), 0
// without one.
func (m *TaskModel) Vocab() int {
	if m.mlm == nil {
		return 0
	}
	return m.mlm.decoder.N
}
