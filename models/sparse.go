package models

import (
	"context"
	"fmt"

	"github.com/int8bert/int8bert/models/encoder"
)

// SparseValue is one non-zero value of a sparse embedding: its index in
// the vocabulary and its value, as TEI's /embed_sparse gives them.
type SparseValue struct {
	Index int     `json:"index"`
	Value float32 `json:"value"`
}

// SparseOptions control EmbedSparse: the options of Embed about texts.
type SparseOptions struct {
	// Prompt or PromptName is prefixed to every text, as EmbedOptions'.
	Prompt, PromptName string
	// Direction is the side texts longer than MaxLength lose tokens from.
	Direction TruncationDirection
}

// EmbedSparse returns each text's SPLADE vector (texts longer than
// MaxLength are truncated) as its non-zero values, by index: for every
// vocabulary entry, the largest log(1 + ReLU(logit)) of the masked-LM
// head over the text's tokens, special tokens included, as SPLADE's max
// pooling and TEI's splade pooling compute it. The model must have a
// masked language modeling head (an error wrapping ErrConfig otherwise).
func (p *Pipeline) EmbedSparse(ctx context.Context, texts []string, o SparseOptions) ([][]SparseValue, error) {
	if err := p.refuseClosed("EmbedSparse"); err != nil {
		return nil, err
	}
	dense, err := p.embedSplade(ctx, texts, o)
	if err != nil {
		return nil, err
	}
	res := make([][]SparseValue, len(dense))
	for i, v := range dense {
		res[i] = Sparsify(v)
	}
	return res, nil
}

// Sparsify lists v's non-zero values by index.
func Sparsify(v []float32) []SparseValue {
	n := 0
	for _, x := range v {
		if x != 0 {
			n++
		}
	}
	out := make([]SparseValue, 0, n)
	for j, x := range v {
		if x != 0 {
			out = append(out, SparseValue{Index: j, Value: x})
		}
	}
	return out
}

// embedSplade is EmbedSparse's vectors, dense ([len(texts)][Vocab]).
func (p *Pipeline) embedSplade(ctx context.Context, texts []string, o SparseOptions) ([][]float32, error) {
	if err := p.m.Enter(); err != nil {
		return nil, err
	}
	defer p.m.Leave()
	if err := p.needMaskedLM("embed sparse"); err != nil {
		return nil, err
	}
	if err := o.Direction.valid(); err != nil {
		return nil, err
	}
	prompt, err := p.promptOf(o.Prompt, o.PromptName)
	if err != nil {
		return nil, err
	}
	encs, err := p.encodeTextsWith(ctx, "embed sparse", texts, prompt, o.Direction)
	if err != nil {
		return nil, err
	}
	res := make([][]float32, len(texts))
	err = p.stream(ctx, encs, func(idx []int, in *encoder.Inputs, out *encoder.TaskOutput) error {
		for r, i := range idx {
			res[i] = make([]float32, p.m.Vocab())
			if err := p.m.Splade(res[i], out.Output, r, in.Mask); err != nil {
				return fmt.Errorf("models: embed sparse: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// SparseOf is sequence b's SPLADE vector (EmbedSparse's) from the output
// of Forward on token ids, over its rows whose mask is 1 (mask: the
// inputs', nil for all).
func (p *Pipeline) SparseOf(out *Output, b int, mask []int32) ([]SparseValue, error) {
	if err := p.refuseClosed("SparseOf"); err != nil {
		return nil, err
	}
	if err := p.needMaskedLM("sparse"); err != nil {
		return nil, err
	}
	if b < 0 || b >= out.Batch {
		return nil, fmt.Errorf("models: sparse: sequence %d of %d: %w", b, out.Batch, ErrInput)
	}
	v := make([]float32, p.m.Vocab())
	if err := p.m.Splade(v, out.engine(), b, mask); err != nil {
		return nil, fmt.Errorf("models: sparse: %w", err)
	}
	return Sparsify(v), nil
}

// Sparse is row r's SPLADE vector (EmbedSparse's) as its non-zero values
// by index; the model must have a masked language modeling head.
func (b *Batch) Sparse(r int) ([]SparseValue, error) {
	if r < 0 || r >= len(b.idx) {
		return nil, fmt.Errorf("models: batch row %d of %d: %w", r, len(b.idx), ErrInput)
	}
	if err := b.p.needMaskedLM("sparse"); err != nil {
		return nil, err
	}
	v := make([]float32, b.p.m.Vocab())
	if err := b.p.m.Splade(v, b.out.Output, r, b.in.Mask); err != nil {
		return nil, fmt.Errorf("models: sparse: %w", err)
	}
	return Sparsify(v), nil
}
