package encoder

import (
	"errors"
	"fmt"

	"github.com/int8bert/int8bert/kernels"
)

// ErrConfig is wrapped by every configuration error.
var ErrConfig = errors.New("encoder: unsupported configuration")

// ErrInput is wrapped by every error about the inputs of a forward pass.
var ErrInput = errors.New("encoder: bad input")

// Config is the shape and numerics of an encoder.
type Config struct {
	Vocab, Hidden, Layers, Heads, Intermediate int
	// MaxPositions is the size of the position embedding table.
	MaxPositions int
	// TypeVocab is the number of token types; 0 means no token type
	// embeddings (DistilBERT).
	TypeVocab int
	// LayerNormEps is the epsilon of every LayerNorm.
	LayerNormEps float32
	// Activation is the FFN activation (kernels.ActGELU for "gelu").
	Activation kernels.Activation
	// PaddingIdx and PositionsFromPadding: XLM-R numbers positions from
	// PaddingIdx+1 over the non-padding tokens (padding keeps PaddingIdx);
	// BERT and DistilBERT number them 0, 1, ... .
	PaddingIdx           int
	PositionsFromPadding bool
	// RelBuckets, when > 0, adds a relative position bias to every
	// layer's attention scores before the softmax (MPNet; relbias.go):
	// key j's bias for query i is row bucket(j-i) of a table of RelTable
	// (>= RelBuckets) rows x Heads (Names.RelBias), shared by all layers,
	// bucketed into RelBuckets buckets as T5's bidirectional buckets, the
	// log-spaced ones up to RelMaxDistance. 0 means no bias.
	RelBuckets, RelMaxDistance, RelTable int
	// Embedding is the width of the embeddings (ELECTRA's
	// embedding_size); 0 means Hidden. When it differs from Hidden a
	// linear projects the embeddings' LayerNorm output onto Hidden
	// (Names.EmbProj; docs/DESIGN.md section 2.6).
	Embedding int
}

// EmbeddingWidth is the width of the embeddings: Embedding, or Hidden
// when it is 0.
func (c Config) EmbeddingWidth() int {
	if c.Embedding > 0 {
		return c.Embedding
	}
	return c.Hidden
}

// Projects says the embeddings are projected onto the hidden size.
func (c Config) Projects() bool { return c.EmbeddingWidth() != c.Hidden }

// Validate reports the first unsupported or inconsistent value.
func (c *Config) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("encoder: config: %s: %w", fmt.Sprintf(format, args...), ErrConfig)
	}
	switch {
	case c.Vocab <= 0 || c.Hidden <= 0 || c.Layers <= 0 || c.Heads <= 0 || c.Intermediate <= 0 || c.MaxPositions <= 0:
		return bad("sizes must be positive (vocab %d, hidden %d, layers %d, heads %d, intermediate %d, positions %d)",
			c.Vocab, c.Hidden, c.Layers, c.Heads, c.Intermediate, c.MaxPositions)
	case c.Hidden%c.Heads != 0:
		return bad("hidden size %d is not divisible by %d heads", c.Hidden, c.Heads)
	case c.Embedding < 0:
		return bad("embedding size %d", c.Embedding)
	case c.TypeVocab < 0:
		return bad("type vocabulary %d", c.TypeVocab)
	case !(c.LayerNormEps > 0):
		return bad("layer norm epsilon %v must be positive", c.LayerNormEps)
	case c.Activation != kernels.ActGELU && c.Activation != kernels.ActGELUTanh && c.Activation != kernels.ActReLU:
		return bad("activation %v", c.Activation)
	case c.PositionsFromPadding && (c.PaddingIdx < 0 || c.PaddingIdx+1 >= c.MaxPositions):
		return bad("padding index %d with %d positions", c.PaddingIdx, c.MaxPositions)
	case c.RelBuckets < 0 || c.RelBuckets > 0 && (c.RelBuckets < 4 || c.RelBuckets%2 != 0):
		return bad("%d relative position buckets (want 0, or an even number of at least 4)", c.RelBuckets)
	case c.RelBuckets > 0 && c.RelMaxDistance <= c.RelBuckets/4:
		return bad("relative position max distance %d with %d buckets (want more than %d)", c.RelMaxDistance, c.RelBuckets, c.RelBuckets/4)
	case c.RelBuckets > 0 && c.RelTable < c.RelBuckets:
		return bad("a relative attention bias of %d buckets, %d are used", c.RelTable, c.RelBuckets)
	}
	return nil
}

// MaxSeq is the longest sequence the position table allows.
func (c Config) MaxSeq() int {
	if c.PositionsFromPadding {
		return c.MaxPositions - c.PaddingIdx - 1
	}
	return c.MaxPositions
}
