package models_test

import (
	"context"
	"testing"

	"github.com/int8bert/int8bert/models"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTokenEmbeddings: a row's token embeddings are one vector a token,
// special tokens included; their first is the CLS pooling and their mean
// the mean pooling of the same row.
func TestTokenEmbeddings(t *testing.T) {
	texts := sst2(t, "dev.tsv", 12)
	p := sst2Model(t, "sst2-bert-mini", models.Options{MaxBatchTokens: 100})
	seqs := make([]models.Sequence, len(texts))
	for i, s := range texts {
		var err error
		seqs[i], err = p.Encode(s, nil, models.EncodeOptions{})
		require.NoError(t, err)
	}
	h := p.Config().Hidden
	seen := 0
	err := p.Run(context.Background(), seqs, func(b *models.Batch) error {
		for r, i := range b.Rows() {
			seen++
			toks, err := b.TokenEmbeddings(r)
			require.NoError(t, err)
			require.Len(t, toks, seqs[i].Len(), "sequence %d", i)
			mean := make([]float32, h)
			for _, v := range toks {
				require.Len(t, v, h)
				for k, x := range v {
					mean[k] += x / float32(len(toks))
				}
			}
			cls, err := b.Embedding(r, models.PoolCLS, false)
			require.NoError(t, err)
			assert.Equal(t, cls, toks[0], "sequence %d: first token is CLS", i)
			want, err := b.Embedding(r, models.PoolMean, false)
			require.NoError(t, err)
			assert.Less(t, relDiff(want, mean), 1e-5, "sequence %d: mean of the tokens", i)
		}
		_, err := b.TokenEmbeddings(len(b.Rows()))
		assert.ErrorIs(t, err, models.ErrInput)
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, len(texts), seen)
}
