package models_test

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/int8bert/int8bert/models"
	"github.com/int8bert/int8bert/models/encoder/encodertest"
	"github.com/int8bert/int8bert/tokenizer"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// wordPipeline loads the golden checkpoint rel (a folder of
// ../shared/golden) with a word tokenizer ("wN" is id N, BERT's special
// ids: encodertest.WordFolder) and, when stConfig is set, that text as
// its config_sentence_transformers.json.
func wordPipeline(t *testing.T, rel, stConfig string, o models.Options) *models.Pipeline {
	t.Helper()
	dir := encodertest.WordFolder(t, shared(t, rel), false)
	if stConfig != "" {
		require.NoError(t, os.WriteFile(filepath.Join(dir, models.PromptsFile), []byte(stConfig), 0o644))
	}
	o.Selector = encodertest.Selector(t)
	p, err := models.Load(context.Background(), dir, o)
	require.NoError(t, err)
	t.Cleanup(func() { p.Close() })
	return p
}

// idsOf are the word ids lo to hi-1.
func idsOf(lo, hi int) []int32 {
	var ids []int32
	for i := lo; i < hi; i++ {
		ids = append(ids, int32(i))
	}
	return ids
}

// TestEmbedPrompts: the prompts of config_sentence_transformers.json are
// read at Load; a prompt, given as text or by name, gives exactly the
// vectors of the prefixed texts; an unknown name lists the known ones;
// a prompt and a name together, or a name on a model without prompts,
// are errors; a malformed file fails Load.
func TestEmbedPrompts(t *testing.T) {
	ctx := context.Background()
	p := wordPipeline(t, "golden/models/bert-base",
		`{"prompts": {"query": "w11 w12 ", "passage": ""}, "default_prompt_name": "query", "similarity_fn_name": "cosine"}`, models.Options{})
	assert.Equal(t, map[string]string{"query": "w11 w12 ", "passage": ""}, p.Prompts())
	assert.Equal(t, "query", p.DefaultPromptName())
	texts := []string{"w5 w6 w7", "w9", encodertest.Words(20, 60)}
	prefixed := []string{"w11 w12 w5 w6 w7", "w11 w12 w9", "w11 w12 " + encodertest.Words(20, 60)}

	want, err := p.Embed(ctx, prefixed, models.EmbedOptions{Normalize: true})
	require.NoError(t, err)
	plain, err := p.Embed(ctx, texts, models.EmbedOptions{Normalize: true})
	require.NoError(t, err)
	for _, o := range []models.EmbedOptions{{PromptName: "query"}, {Prompt: "w11 w12 "}} {
		o.Normalize = true
		got, err := p.Embed(ctx, texts, o)
		require.NoError(t, err)
		assert.Equal(t, want, got, "%+v: the vectors of the prefixed texts", o)
		assert.NotEqual(t, plain, got, "%+v changes the vectors", o)
	}
	got, err := p.Embed(ctx, texts, models.EmbedOptions{Normalize: true, PromptName: "passage"})
	require.NoError(t, err)
	assert.Equal(t, plain, got, "an empty prompt")

	_, err = p.Embed(ctx, texts, models.EmbedOptions{PromptName: "doc"})
	require.ErrorIs(t, err, models.ErrInput)
	assert.Contains(t, err.Error(), `"doc" is not one of the model's prompts (passage, query)`)
	_, err = p.Embed(ctx, texts, models.EmbedOptions{PromptName: "query", Prompt: "w3 "})
	assert.ErrorIs(t, err, models.ErrInput)
	text, err := p.Prompt("query")
	require.NoError(t, err)
	assert.Equal(t, "w11 w12 ", text)

	q := wordPipeline(t, "golden/models/bert-base", `{"prompts": {"query": "w11 w12 "}}`, models.Options{Precision: models.PrecisionInt8Dynamic})
	assert.Equal(t, map[string]string{"query": "w11 w12 "}, q.Prompts(), "a model quantized at load keeps its prompts")

	bare := wordPipeline(t, "golden/models/bert-base", "", models.Options{})
	assert.Nil(t, bare.Prompts())
	assert.Empty(t, bare.DefaultPromptName())
	_, err = bare.Prompt("query")
	require.ErrorIs(t, err, models.ErrInput)
	assert.Contains(t, err.Error(), "has no prompts")

	dir := encodertest.WordFolder(t, shared(t, "golden/models/bert-base"), false)
	require.NoError(t, os.WriteFile(filepath.Join(dir, models.PromptsFile), []byte(`{"prompts": ["query: "]}`), 0o644))
	_, err = models.Load(ctx, dir, models.Options{Selector: encodertest.Selector(t)})
	require.ErrorIs(t, err, models.ErrConfig)
	assert.Contains(t, err.Error(), models.PromptsFile)
}

// TestEmbedDimensions: Dimensions cuts the full vector to its first N
// values, then normalises when asked (as TEI and sentence-transformers);
// 0 keeps all; negative or more than the hidden size is an error.
func TestEmbedDimensions(t *testing.T) {
	ctx := context.Background()
	p := wordPipeline(t, "golden/models/bert-base", "", models.Options{})
	texts := []string{"w5 w6 w7", "w9", encodertest.Words(20, 60)}
	full, err := p.Embed(ctx, texts, models.EmbedOptions{})
	require.NoError(t, err)
	require.Len(t, full[0], 64)
	cut, err := p.Embed(ctx, texts, models.EmbedOptions{Dimensions: 16})
	require.NoError(t, err)
	norm, err := p.Embed(ctx, texts, models.EmbedOptions{Dimensions: 16, Normalize: true})
	require.NoError(t, err)
	for i := range texts {
		assert.Equal(t, full[i][:16], cut[i], "text %d: the first 16 values", i)
		var s float64
		for _, v := range full[i][:16] {
			s += float64(v) * float64(v)
		}
		require.Len(t, norm[i], 16)
		for k, v := range full[i][:16] {
			assert.InDelta(t, float64(v)/math.Sqrt(s), norm[i][k], 1e-7, "text %d value %d: cut, then normalised", i, k)
		}
	}
	all, err := p.Embed(ctx, texts, models.EmbedOptions{Dimensions: 64})
	require.NoError(t, err)
	assert.Equal(t, full, all)
	for _, d := range []int{65, -1} {
		_, err := p.Embed(ctx, texts, models.EmbedOptions{Dimensions: d})
		assert.ErrorIs(t, err, models.ErrInput, "dimensions %d", d)
	}
	v := []float32{3, 4, 12}
	s, err := models.ShortenEmbedding(append([]float32(nil), v...), 2, true)
	require.NoError(t, err)
	assert.InDeltaSlice(t, []float32{0.6, 0.8}, s, 1e-7)
	s, err = models.ShortenEmbedding(append([]float32(nil), v...), 0, false)
	require.NoError(t, err)
	assert.Equal(t, v, s)
	for _, d := range []int{4, -1} {
		_, err := models.ShortenEmbedding(v, d, true)
		assert.ErrorIs(t, err, models.ErrInput)
	}
}

// TestTruncationDirection: left truncation keeps the end of a text (and
// cuts a prompt first), right its start; Embed and Classify truncate on
// the side asked; only TEI's spellings parse.
func TestTruncationDirection(t *testing.T) {
	ctx := context.Background()
	p := wordPipeline(t, "golden/models/bert-base", "", models.Options{MaxLength: 8})
	long := encodertest.Words(10, 30)
	right, err := p.Encode(long, nil, models.EncodeOptions{Truncate: true})
	require.NoError(t, err)
	assert.Equal(t, append(append([]int32{101}, idsOf(10, 16)...), 102), right.IDs(), "right keeps the start")
	left, err := p.Encode(long, nil, models.EncodeOptions{Truncate: true, Direction: models.TruncateLeft})
	require.NoError(t, err)
	assert.Equal(t, append(append([]int32{101}, idsOf(24, 30)...), 102), left.IDs(), "left keeps the end")
	prompted, err := p.Encode("w40 w41", nil, models.EncodeOptions{Truncate: true, Direction: models.TruncateLeft, Prompt: encodertest.Words(50, 60) + " "})
	require.NoError(t, err)
	assert.Equal(t, []int32{101, 56, 57, 58, 59, 40, 41, 102}, prompted.IDs(), "the prompt is cut first")

	got, err := p.Embed(ctx, []string{long}, models.EmbedOptions{Direction: models.TruncateLeft})
	require.NoError(t, err)
	want, err := p.Embed(ctx, []string{encodertest.Words(24, 30)}, models.EmbedOptions{})
	require.NoError(t, err)
	assert.Equal(t, want, got)
	_, err = p.Embed(ctx, []string{long}, models.EmbedOptions{Direction: 2})
	assert.ErrorIs(t, err, models.ErrInput)
	_, err = p.Encode(long, nil, models.EncodeOptions{Direction: -1})
	assert.ErrorIs(t, err, models.ErrInput)

	for s, want := range map[string]models.TruncationDirection{"": models.TruncateRight, "right": models.TruncateRight,
		"Right": models.TruncateRight, "left": models.TruncateLeft, "Left": models.TruncateLeft} {
		d, err := models.ParseTruncationDirection(s)
		require.NoError(t, err, s)
		assert.Equal(t, want, d, s)
	}
	for _, s := range []string{"LEFT", "sideways", " left"} {
		_, err := models.ParseTruncationDirection(s)
		assert.ErrorIs(t, err, models.ErrInput, s)
	}
	b, err := models.TruncateLeft.MarshalText()
	require.NoError(t, err)
	assert.Equal(t, "left", string(b))
}

// TestEncodeIDs: token ids make the sequence of the text they come from
// (special tokens as given, none added), truncated on the side asked;
// with a prompt they are decoded and the prompted text encoded again, as
// TEI does; no ids, ids outside the vocabulary, or too many ids without
// truncation are errors.
func TestEncodeIDs(t *testing.T) {
	ctx := context.Background()
	p := wordPipeline(t, "golden/models/bert-base", "", models.Options{MaxLength: 8})
	text, err := p.Encode("w5 w6 w7", nil, models.EncodeOptions{})
	require.NoError(t, err)
	ids, err := p.EncodeIDs(text.IDs(), models.EncodeOptions{})
	require.NoError(t, err)
	assert.Equal(t, text.IDs(), ids.IDs())
	var vt, vi []float32
	require.NoError(t, p.Run(ctx, []models.Sequence{text, ids}, func(b *models.Batch) error {
		for r, i := range b.Rows() {
			v, err := b.Embedding(r, models.PoolMean, true)
			require.NoError(t, err)
			if i == 0 {
				vt = v
			} else {
				vi = v
			}
		}
		return nil
	}))
	assert.Equal(t, vt, vi, "the ids embed as the text")
	bare, err := p.EncodeIDs([]int32{5, 6}, models.EncodeOptions{})
	require.NoError(t, err)
	assert.Equal(t, []int32{5, 6}, bare.IDs(), "no special tokens added")

	long := idsOf(10, 30)
	_, err = p.EncodeIDs(long, models.EncodeOptions{})
	assert.True(t, errors.Is(err, models.ErrTooLong) && errors.Is(err, models.ErrInput), "%v", err)
	r, err := p.EncodeIDs(long, models.EncodeOptions{Truncate: true})
	require.NoError(t, err)
	assert.Equal(t, idsOf(10, 18), r.IDs())
	l, err := p.EncodeIDs(long, models.EncodeOptions{Truncate: true, Direction: models.TruncateLeft})
	require.NoError(t, err)
	assert.Equal(t, idsOf(22, 30), l.IDs())

	for _, bad := range [][]int32{nil, {5, 1000}, {-1}} {
		_, err := p.EncodeIDs(bad, models.EncodeOptions{})
		assert.ErrorIs(t, err, models.ErrInput, "%v", bad)
	}
	// A prompt: the ids are decoded without their special tokens, the
	// prompt prefixed and the text encoded again with special tokens and
	// the truncation asked, as TEI's tokenize_input.
	prompted, err := p.Encode("w5 w6 w7", nil, models.EncodeOptions{Prompt: "w3 "})
	require.NoError(t, err)
	assert.Equal(t, []int32{101, 3, 5, 6, 7, 102}, prompted.IDs())
	for _, in := range [][]int32{text.IDs(), {5, 6, 7}} {
		q, err := p.EncodeIDs(in, models.EncodeOptions{Prompt: "w3 "})
		require.NoError(t, err)
		assert.Equal(t, prompted.IDs(), q.IDs(), "ids %v with a prompt", in)
	}
	for _, d := range []models.TruncationDirection{models.TruncateRight, models.TruncateLeft} {
		o := models.EncodeOptions{Prompt: "w3 ", Truncate: true, Direction: d}
		want, err := p.Encode(encodertest.Words(10, 30), nil, o)
		require.NoError(t, err)
		q, err := p.EncodeIDs(long, o)
		require.NoError(t, err)
		assert.Equal(t, want.IDs(), q.IDs(), "direction %v: truncated as the prompted text", d)
	}
	_, err = p.EncodeIDs(long, models.EncodeOptions{Prompt: "w3 "})
	assert.ErrorIs(t, err, models.ErrTooLong)
	_, err = p.EncodeIDs([]int32{5, 1000}, models.EncodeOptions{Prompt: "w3 "})
	assert.ErrorIs(t, err, models.ErrInput, "ids are checked before they are decoded")
	asText, err := p.EncodeIDsAsText([]int32{5, 6, 7}, models.EncodeOptions{})
	require.NoError(t, err)
	assert.Equal(t, text.IDs(), asText.IDs(), "an empty prompt: the decoded text, special tokens added")
	_, err = p.EncodeIDsAsText(nil, models.EncodeOptions{Prompt: "w3 "})
	assert.ErrorIs(t, err, models.ErrInput)
	_, err = p.EncodeIDs([]int32{5}, models.EncodeOptions{Direction: 3})
	assert.ErrorIs(t, err, models.ErrInput)
}

// TestClassifyPromptAndDirection: Classify's prompt gives the logits of
// the prefixed texts, its direction those of the kept end; a prompt with
// pairs, or tokenizing options where inputs are tokenized, are errors.
func TestClassifyPromptAndDirection(t *testing.T) {
	ctx := context.Background()
	p := wordPipeline(t, "golden/models/bert-seqcls", "", models.Options{MaxLength: 8})
	texts := []string{"w5 w6", encodertest.Words(10, 30)}
	want, err := p.Classify(ctx, []string{"w3 w4 w5 w6", "w3 w4 " + encodertest.Words(10, 30)}, models.ClassifyOptions{})
	require.NoError(t, err)
	got, err := p.Classify(ctx, texts, models.ClassifyOptions{Prompt: "w3 w4 "})
	require.NoError(t, err)
	assert.Equal(t, want, got)
	want, err = p.Classify(ctx, []string{encodertest.Words(24, 30)}, models.ClassifyOptions{})
	require.NoError(t, err)
	got, err = p.Classify(ctx, texts[1:], models.ClassifyOptions{Direction: models.TruncateLeft})
	require.NoError(t, err)
	assert.Equal(t, want, got)

	pairs := []tokenizer.Pair{{A: "w5", B: encodertest.Words(10, 30)}}
	_, err = p.ClassifyPairs(ctx, pairs, models.ClassifyOptions{Prompt: "w3 "})
	assert.ErrorIs(t, err, models.ErrInput)
	_, err = p.Encode("w5", &pairs[0].B, models.EncodeOptions{Prompt: "w3 "})
	assert.ErrorIs(t, err, models.ErrInput)
	leftPair, err := p.ClassifyPairs(ctx, pairs, models.ClassifyOptions{Direction: models.TruncateLeft})
	require.NoError(t, err)
	rightPair, err := p.ClassifyPairs(ctx, pairs, models.ClassifyOptions{})
	require.NoError(t, err)
	assert.NotEqual(t, leftPair[0].Logits, rightPair[0].Logits, "the pair is cut on the side asked")
	_, err = p.Postprocess(want[0].Logits, models.ClassifyOptions{Prompt: "w3 "})
	assert.ErrorIs(t, err, models.ErrInput)
	_, err = p.Postprocess(want[0].Logits, models.ClassifyOptions{Direction: models.TruncateLeft})
	assert.ErrorIs(t, err, models.ErrInput)
}

// TestEncodeIDsRetokenized: ids without a prompt are read as TEI reads
// them, decoded with their special tokens and tokenized again without
// adding any: the tokenizer's own split of a text comes back unchanged,
// another split of the same text becomes the tokenizer's, special tokens
// stay where they were, and the checks and truncation are EncodeIDs'.
func TestEncodeIDsRetokenized(t *testing.T) {
	p := sst2Model(t, "sst2-bert-mini", models.Options{MaxLength: 8})
	own, err := p.Encode("a playing cat", nil, models.EncodeOptions{})
	require.NoError(t, err)
	q, err := p.EncodeIDsRetokenized(own.IDs(), models.EncodeOptions{})
	require.NoError(t, err)
	assert.Equal(t, own.IDs(), q.IDs(), "the tokenizer's own ids, special tokens kept")
	id := func(tok string) int32 {
		v, ok := p.Tok.ID(tok)
		require.True(t, ok, tok)
		return v
	}
	split := []int32{id("play"), id("##ing")} // "playing" has an id of its own
	q, err = p.EncodeIDsRetokenized(split, models.EncodeOptions{})
	require.NoError(t, err)
	assert.Equal(t, []int32{id("playing")}, q.IDs(), "another split of the text becomes the tokenizer's; none added")
	asGiven, err := p.EncodeIDs(split, models.EncodeOptions{})
	require.NoError(t, err)
	assert.Equal(t, split, asGiven.IDs(), "EncodeIDs keeps them as given")

	long := make([]int32, 12)
	for i := range long {
		long[i] = id("cat")
	}
	_, err = p.EncodeIDsRetokenized(long, models.EncodeOptions{})
	assert.ErrorIs(t, err, models.ErrTooLong)
	cut, err := p.EncodeIDsRetokenized(long, models.EncodeOptions{Truncate: true})
	require.NoError(t, err)
	assert.Equal(t, long[:8], cut.IDs())
	for _, bad := range [][]int32{nil, {-1}, {int32(p.Tok.VocabSize())}} {
		_, err := p.EncodeIDsRetokenized(bad, models.EncodeOptions{})
		assert.ErrorIs(t, err, models.ErrInput, "%v", bad)
	}
	withPrompt, err := p.EncodeIDsRetokenized(split, models.EncodeOptions{Prompt: "query: "})
	require.NoError(t, err)
	want, err := p.Encode("playing", nil, models.EncodeOptions{Prompt: "query: "})
	require.NoError(t, err)
	assert.Equal(t, want.IDs(), withPrompt.IDs(), "with a prompt: EncodeIDsAsText")
}
