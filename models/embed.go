package models

import (
	"context"
	"fmt"

	"github.com/int8bert/int8bert/models/encoder"
)

// EmbedOptions control Embed.
type EmbedOptions struct {
	// Pool is how token states become one vector (PoolDefault: the
	// model's own, Pipeline.Pooling).
	Pool Pooling
	// Normalize scales every vector to unit L2 norm (after the model's
	// Dense modules and Dimensions; a model whose sentence-transformers
	// modules include Normalize is normalised without it, as
	// sentence-transformers does).
	Normalize bool
	// Dimensions, when above 0, keeps the first Dimensions values of
	// every vector, then normalises them when Normalize is set
	// (ShortenEmbedding: Matryoshka embeddings, as sentence-transformers'
	// truncate_dim and TEI's dimensions do). More than the vectors have,
	// or negative, is an error wrapping ErrInput.
	Dimensions int
	// Prompt is prefixed to every text before it is tokenized, as
	// sentence-transformers' prompt (EncodeOptions.Prompt); PromptName
	// names one of the model's prompts (Pipeline.Prompts, from
	// config_sentence_transformers.json) instead: an unknown name is an
	// error wrapping ErrInput that lists the known ones, and so is setting
	// both. Neither set: no prompt (DefaultPromptName is not applied by
	// itself).
	Prompt, PromptName string
	// Direction is the side texts longer than MaxLength lose tokens from
	// (TruncateRight, the default, keeps their start).
	Direction TruncationDirection
}

// Embed returns one vector per text (texts longer than MaxLength are
// truncated), pooled and normalised as o says, run through the model's
// sentence-transformers modules as sentence-transformers' encode does
// (Pipeline.Sentence). An unknown pooling is an error wrapping ErrInput,
// splade one wrapping ErrConfig.
func (p *Pipeline) Embed(ctx context.Context, texts []string, o EmbedOptions) ([][]float32, error) {
	if err := p.refuseClosed("Embed"); err != nil {
		return nil, err
	}
	if err := p.m.Enter(); err != nil {
		return nil, err
	}
	defer p.m.Leave()
	pool, err := p.pooling(o.Pool)
	if err != nil {
		return nil, fmt.Errorf("models: embed: %w", err)
	}
	prompt, err := o.check(p)
	if err != nil {
		return nil, err
	}
	if w := p.st.width(pool.modes() * p.m.Encoder.Config().Hidden); o.Dimensions > w {
		return nil, fmt.Errorf("models: embed: dimensions %d: want 1 to %d, the embedding's size (0: all): %w", o.Dimensions, w, ErrInput)
	}
	skip, err := p.promptLength("embed", prompt)
	if err != nil {
		return nil, err
	}
	encs, err := p.encodeTextsWith(ctx, "embed", texts, prompt, o.Direction)
	if err != nil {
		return nil, err
	}
	res := make([][]float32, len(texts))
	err = p.stream(ctx, encs, func(idx []int, in *encoder.Inputs, out *encoder.TaskOutput) error {
		for r, i := range idx {
			var err error
			// The modules (Normalize included), then the cut, then
			// Normalize: sentence-transformers' encode with truncate_dim.
			v := p.embedRow(out.Output, r, in.Mask, pool, skip, false, false)
			if res[i], err = ShortenEmbedding(v, o.Dimensions, o.Normalize); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// check reports bad options (errors wrapping ErrInput) and returns the
// prompt of the call.
func (o EmbedOptions) check(p *Pipeline) (string, error) {
	if err := o.Direction.valid(); err != nil {
		return "", err
	}
	if o.Dimensions < 0 {
		return "", fmt.Errorf("models: embed: dimensions %d is negative (0 keeps every value): %w", o.Dimensions, ErrInput)
	}
	return p.promptOf(o.Prompt, o.PromptName)
}

// ShortenEmbedding keeps the first dims values of the embedding v (0:
// all of them) and scales them to unit L2 norm when normalize is set:
// cut, then normalise, as sentence-transformers' truncate_dim and TEI's
// dimensions do for Matryoshka embeddings. It works in v's memory and
// returns v[:dims]. dims negative or above len(v) is an error wrapping
// ErrInput.
func ShortenEmbedding(v []float32, dims int, normalize bool) ([]float32, error) {
	switch {
	case dims < 0 || dims > len(v):
		return nil, fmt.Errorf("models: dimensions %d: want 1 to %d, the embedding's size (0: all): %w", dims, len(v), ErrInput)
	case dims > 0:
		v = v[:dims:dims]
	}
	if normalize {
		encoder.Normalize(v, 1, len(v))
	}
	return v, nil
}
