package models_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/int8bert/int8bert/models"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRunMatchesPipelineCalls: sequences from Encode, run in passes by
// Run, give the embeddings and classifications of Embed and Classify on
// the same texts, each row under its own options; Encode refuses a text
// longer than MaxLength unless asked to truncate.
func TestRunMatchesPipelineCalls(t *testing.T) {
	ctx := context.Background()
	texts := sst2(t, "dev.tsv", 40)
	p := sst2Model(t, "sst2-bert-mini", models.Options{MaxBatchTokens: 300})
	seqs := make([]models.Sequence, len(texts))
	for i, s := range texts {
		var err error
		seqs[i], err = p.Encode(s, nil, models.EncodeOptions{})
		require.NoError(t, err)
	}
	wantE, err := p.Embed(ctx, texts, models.EmbedOptions{Pool: models.PoolMean, Normalize: true})
	require.NoError(t, err)
	wantC, err := p.Classify(ctx, texts, models.ClassifyOptions{})
	require.NoError(t, err)
	seen := make([]int, len(texts))
	passes := 0
	err = p.Run(ctx, seqs, func(b *models.Batch) error {
		passes++
		real, computed := b.Tokens()
		assert.LessOrEqual(t, real, computed)
		for r, i := range b.Rows() {
			seen[i]++
			e, err := b.Embedding(r, models.PoolMean, true)
			require.NoError(t, err)
			assert.Less(t, relDiff(wantE[i], e), 1e-5, "embedding %d", i)
			c, err := b.Classification(r, models.ClassifyOptions{})
			require.NoError(t, err)
			assert.Equal(t, wantC[i].Label, c.Label, "label %d", i)
			assert.Less(t, relDiff(wantC[i].Logits, c.Logits), 1e-5, "logits %d", i)
		}
		return nil
	})
	require.NoError(t, err)
	assert.Greater(t, passes, 1, "a 300-token budget splits 40 sentences")
	for i, n := range seen {
		assert.Equal(t, 1, n, "sequence %d ran %d times", i, n)
	}

	long := strings.Repeat("a very long review ", 400)
	_, err = p.Encode(long, nil, models.EncodeOptions{})
	require.Error(t, err)
	assert.True(t, errors.Is(err, models.ErrTooLong) && errors.Is(err, models.ErrInput), "%v", err)
	s, err := p.Encode(long, nil, models.EncodeOptions{Truncate: true})
	require.NoError(t, err)
	assert.Equal(t, p.MaxLength(), s.Len())
	pair := "and a second text"
	s, err = p.Encode(long, &pair, models.EncodeOptions{Truncate: true})
	require.NoError(t, err)
	assert.Equal(t, p.MaxLength(), s.Len())
	_, err = p.Encode("bad \xff utf-8", nil, models.EncodeOptions{})
	assert.ErrorIs(t, err, models.ErrInput)
	assert.ErrorIs(t, p.Run(ctx, []models.Sequence{{}}, func(*models.Batch) error { return nil }), models.ErrInput)
}
