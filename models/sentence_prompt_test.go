package models_test

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/int8bert/int8bert/models"
	"github.com/int8bert/int8bert/models/encoder/encodertest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPromptLengthIncludePromptFalse: with a Pooling module whose
// include_prompt is false, Embed with a prompt and Batch.Embedding of a
// sequence encoded with it pool the prompted text's token states without
// sentence-transformers' prompt_length leading tokens (the CLS token and
// the prompt's: 3 for "w11 w12 "), computed here by hand from the states
// as Pooling.py's max and mean compute them.
func TestPromptLengthIncludePromptFalse(t *testing.T) {
	ctx := context.Background()
	dir := encodertest.WordFolder(t, shared(t, "golden/models/bert-base"), false)
	files := map[string]string{
		models.ModulesFile: `[{"idx":0,"name":"0","path":"","type":"sentence_transformers.models.Transformer"},
			{"idx":1,"name":"1","path":"1_Pooling","type":"sentence_transformers.models.Pooling"}]`,
		"1_Pooling/config.json": `{"word_embedding_dimension": 64, "pooling_mode_mean_tokens": true, "pooling_mode_max_tokens": true, "include_prompt": false}`,
		models.PromptsFile:      `{"prompts": {"query": "w11 w12 "}}`,
	}
	for f, s := range files {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, f)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), []byte(s), 0o644))
	}
	p, err := models.Load(ctx, dir, models.Options{Selector: encodertest.Selector(t)})
	require.NoError(t, err)
	defer p.Close()
	assert.False(t, p.Sentence().IncludePrompt)
	texts := []string{"w5 w6 w7", "w9", encodertest.Words(20, 60)}

	const promptLength = 3 // [CLS] w11 w12, as tokenize(["w11 w12 "]) less one
	want := make([][]float32, len(texts))
	viaBatch := make([][]float32, len(texts))
	seqs := make([]models.Sequence, len(texts))
	for i, s := range texts {
		seqs[i], err = p.Encode(s, nil, models.EncodeOptions{Truncate: true, Prompt: "w11 w12 "})
		require.NoError(t, err)
	}
	require.NoError(t, p.Run(ctx, seqs, func(b *models.Batch) error {
		for r, i := range b.Rows() {
			states := models.TokenStates(b, r)
			h := len(states[0])
			v := make([]float32, 2*h)
			for j := range h {
				mx, sum := float32(-1e9), 0.0
				for _, st := range states[promptLength:] {
					mx = max(mx, st[j])
					sum += float64(st[j])
				}
				v[j], v[h+j] = mx, float32(sum/float64(len(states)-promptLength))
			}
			want[i] = v
			e, err := b.Embedding(r, models.PoolDefault, false)
			if err != nil {
				return err
			}
			viaBatch[i] = e
		}
		return nil
	}))
	got, err := p.Embed(ctx, texts, models.EmbedOptions{PromptName: "query"})
	require.NoError(t, err)
	plain, err := p.Embed(ctx, []string{"w11 w12 w5 w6 w7"}, models.EmbedOptions{})
	require.NoError(t, err)
	for i := range texts {
		for _, g := range [][]float32{got[i], viaBatch[i]} {
			require.Len(t, g, len(want[i]))
			for j := range g {
				assert.InDelta(t, want[i][j], g[j], 1e-5*math.Max(1, math.Abs(float64(want[i][j]))), "text %d value %d", i, j)
			}
		}
	}
	assert.NotEqual(t, plain[0], got[0], "without a prompt the same text pools every token")
}

// TestDimensionsAfterDense: Dimensions cuts the vector after the Dense
// modules (the embedding's width is the last Dense module's, not the
// hidden size) and before Normalize, as sentence-transformers'
// truncate_dim; more than that width is ErrInput.
func TestDimensionsAfterDense(t *testing.T) {
	ctx := context.Background()
	var c *stCase
	for _, x := range stCases(t) {
		if filepath.Base(x.dir) == "bert-base-mean_two_dense" {
			c = x
		}
	}
	require.NotNil(t, c)
	words := encodertest.WordFolder(t, shared(t, "golden/models/bert-base"), false)
	b, err := os.ReadFile(filepath.Join(words, "vocab.txt"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(c.dir, "vocab.txt"), b, 0o644))
	p, err := models.Load(ctx, c.dir, models.Options{Selector: encodertest.Selector(t)})
	require.NoError(t, err)
	defer p.Close()
	w, err := p.EmbeddingDim(models.PoolDefault)
	require.NoError(t, err)
	require.Equal(t, 16, w, "the last Dense module's out_features")
	texts := []string{"w5 w6 w7", "w9 w10"}
	full, err := p.Embed(ctx, texts, models.EmbedOptions{})
	require.NoError(t, err)
	short, err := p.Embed(ctx, texts, models.EmbedOptions{Dimensions: 8, Normalize: true})
	require.NoError(t, err)
	for i := range texts {
		want, err := models.ShortenEmbedding(append([]float32(nil), full[i]...), 8, true)
		require.NoError(t, err)
		assert.InDeltaSlice(t, want, short[i], 1e-6)
	}
	_, err = p.Embed(ctx, texts, models.EmbedOptions{Dimensions: 17})
	assert.ErrorIs(t, err, models.ErrInput)
	got, err := p.Embed(ctx, texts, models.EmbedOptions{Dimensions: 16})
	require.NoError(t, err)
	assert.Equal(t, full, got)
}
