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
	// Normalize scales every vector to unit L2 norm.
	Normalize bool
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
	encs, err := p.encodeTexts(ctx, "embed", texts)
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
		if o.Normalize {
			encoder.Normalize(v, len(idx), h)
		}
		for r, i := range idx {
			res[i] = v[r*h : (r+1)*h : (r+1)*h]
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}
