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
	// NoPositions says the embeddings have no absolute positions
	// (DeBERTa's position_biased_input false): no position table is read.
	NoPositions bool
	// Dis, when Dis.Span > 0, is DeBERTa's disentangled attention
	// (disentangled.go; docs/DESIGN.md section 3.11).
	Dis Disentangled
}

// Disentangled is DeBERTa-v2's relative attention: every layer adds to
// the score of query i and key j the content-to-position term Q_i .
// PK[r] and the position-to-content term K_j . PQ[r], r = clamp(bucket(i -
// j) + Span, 0, 2 Span - 1), where PK and PQ are the layer's key and
// query projections of the 2 Span shared relative embeddings (after
// their LayerNorm when NormLN), and scales all three terms by
// 1/sqrt(d (1 + C2P + P2C)).
type Disentangled struct {
	// Span is the attention span (position_buckets, or
	// max_relative_positions, or max_position_embeddings); 0: none.
	Span int
	// Buckets and MaxPos are make_log_bucket_position's bucket_size and
	// max_position; Buckets 0 leaves the relative positions unbucketed.
	Buckets, MaxPos int
	// C2P and P2C are the two relative terms pos_att_type names.
	C2P, P2C bool
	// NormLN: norm_rel_ebd holds "layer_norm".
	NormLN bool
	// Shared: share_att_key (the positions are projected by the layer's
	// own query and key linears, else by pos_query_proj / pos_key_proj).
	Shared bool
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
	case c.Dis.Span < 0 || c.Dis.Span > 0 && c.RelBuckets > 0:
		return bad("disentangled attention span %d (with %d relative bias buckets)", c.Dis.Span, c.RelBuckets)
	case c.Dis.Span > 0 && c.Dis.Buckets != 0 && (c.Dis.Buckets < 2 || c.Dis.MaxPos <= c.Dis.Buckets/2+1):
		return bad("%d position buckets up to position %d (want at least 2 buckets and a max position above %d)",
			c.Dis.Buckets, c.Dis.MaxPos, c.Dis.Buckets/2+1)
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
