package models

import (
	"context"
	"fmt"

	"github.com/int8bert/int8bert/models/encoder"
)

// Pooling is how Embed turns token states into one vector.
type Pooling int

// Poolings.
const (
	// PoolMean averages the unmasked tokens' last hidden states.
	PoolMean Pooling = iota
	// PoolCLS takes the first token's last hidden state.
	PoolCLS
)

// String is "mean", "cls", or "Pooling(N)" for a value other than the two.
func (p Pooling) String() string {
	switch p {
	case PoolMean:
		return "mean"
	case PoolCLS:
		return "cls"
	}
	return fmt.Sprintf("Pooling(%d)", int(p))
}

// EmbedOptions control Embed.
type EmbedOptions struct {
	// Pool is how token states become one vector (PoolMean by default).
	Pool Pooling
	// Normalize scales every vector to unit L2 norm (after Dimensions).
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
// truncated), pooled and normalised as o says.
func (p *Pipeline) Embed(ctx context.Context, texts []string, o EmbedOptions) ([][]float32, error) {
	if err := p.m.Enter(); err != nil {
		return nil, err
	}
	defer p.m.Leave()
	if o.Pool != PoolMean && o.Pool != PoolCLS {
		return nil, fmt.Errorf("models: embed: %v: want PoolMean (0, the default) or PoolCLS (1): %w", o.Pool, ErrInput)
	}
	prompt, err := o.check(p)
	if err != nil {
		return nil, err
	}
	encs, err := p.encodeTextsWith(ctx, "embed", texts, prompt, o.Direction)
	if err != nil {
		return nil, err
	}
	res := make([][]float32, len(texts))
	err = p.stream(ctx, encs, func(idx []int, in *encoder.Inputs, out *encoder.TaskOutput) error {
		var v []float32
		if o.Pool == PoolCLS {
			v = out.CLSRows()
		} else {
			v = out.MeanPool(in.Mask)
		}
		h := out.Hidden
		if o.Normalize && o.Dimensions == 0 {
			encoder.Normalize(v, len(idx), h)
		}
		for r, i := range idx {
			res[i] = v[r*h : (r+1)*h : (r+1)*h]
			if o.Dimensions > 0 {
				var err error
				if res[i], err = ShortenEmbedding(res[i], o.Dimensions, o.Normalize); err != nil {
					return err
				}
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
