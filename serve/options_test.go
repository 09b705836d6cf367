package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/int8bert/int8bert/models"
	"github.com/int8bert/int8bert/models/encoder/encodertest"
	"github.com/int8bert/int8bert/tokenizer"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// promptsJSON are the prompts of the test embedder's
// config_sentence_transformers.json.
const promptsJSON = `{"prompts": {"query": "w11 w12 ", "passage": ""}, "default_prompt_name": null}`

// optionsMaxLength is the test models' maximum input length, short so
// that truncation is easy to see.
const optionsMaxLength = 16

// wordModel is a folder of the golden checkpoint rel with a word
// tokenizer ("wN" is id N: encodertest.WordFolder, BERT's layout unless
// xlmr) and, when stConfig is set, that config_sentence_transformers.json.
func wordModel(t *testing.T, rel string, xlmr bool, stConfig string) string {
	t.Helper()
	dir := encodertest.WordFolder(t, sharedModel(t, rel), xlmr)
	if stConfig != "" {
		require.NoError(t, os.WriteFile(filepath.Join(dir, models.PromptsFile), []byte(stConfig), 0o644))
	}
	return dir
}

// wordOptions load the test models as the server does in these tests.
func wordOptions(t *testing.T) models.Options {
	return models.Options{Selector: encodertest.Selector(t), MaxLength: optionsMaxLength}
}

// library loads dir as the server's test models are loaded.
func library(t *testing.T, dir string) *models.Pipeline {
	t.Helper()
	p, err := models.Load(context.Background(), dir, wordOptions(t))
	require.NoError(t, err)
	t.Cleanup(func() { p.Close() })
	return p
}

// embedOK posts body to /embed and returns the vectors of a 200.
func embedOK(t *testing.T, ts *httptest.Server, body string) [][]float32 {
	t.Helper()
	resp, b := post(t, ts, "/embed", body)
	require.Equal(t, 200, resp, "%s: %s", body, b)
	return decode[[][]float32](t, b)
}

// refused posts body to route and checks a 422 whose message holds has.
func refused(t *testing.T, ts *httptest.Server, route, body, has string) {
	t.Helper()
	code, b := post(t, ts, route, body)
	if assert.Equal(t, 422, code, "%s: %s", body, b) {
		assert.Contains(t, decode[errorBody](t, b).Error, has, body)
	}
}

// sameVectors checks got against want row by row, within the parity
// tolerance of the batcher's passes (1e-5).
func sameVectors(t *testing.T, want, got [][]float32, what string) {
	t.Helper()
	require.Len(t, got, len(want), what)
	for i := range want {
		assert.InDeltaSlice(t, want[i], got[i], 1e-5, "%s: vector %d", what, i)
	}
}

// TestEmbedPromptDimensionsDirection: /embed's prompt_name, dimensions,
// truncation_direction, truncate and normalize give what the library
// gives with the same options (as TEI does), and bad values are 422.
func TestEmbedPromptDimensionsDirection(t *testing.T) {
	ctx := context.Background()
	dir := wordModel(t, "golden/models/bert-base", false, promptsJSON)
	p := library(t, dir)
	_, ts := newServer(t, Config{Models: []ModelSpec{{Name: "e", Source: dir}}, Load: wordOptions(t), AutoTruncate: true})
	texts := []string{"w5 w6 w7", "w9", encodertest.Words(20, 60)}
	js, _ := json.Marshal(texts)
	lib := func(o models.EmbedOptions) [][]float32 {
		t.Helper()
		v, err := p.Embed(ctx, texts, o)
		require.NoError(t, err)
		return v
	}

	plain := embedOK(t, ts, fmt.Sprintf(`{"inputs": %s}`, js))
	sameVectors(t, lib(models.EmbedOptions{Normalize: true}), plain, "no options")
	query := embedOK(t, ts, fmt.Sprintf(`{"inputs": %s, "prompt_name": "query"}`, js))
	sameVectors(t, lib(models.EmbedOptions{Normalize: true, PromptName: "query"}), query, "prompt_name")
	assert.Greater(t, maxDiff(plain[0], query[0]), 1e-3, "the prompt changes the vector")
	sameVectors(t, plain, embedOK(t, ts, fmt.Sprintf(`{"inputs": %s, "prompt_name": "passage"}`, js)), "an empty prompt")
	sameVectors(t, plain, embedOK(t, ts, fmt.Sprintf(`{"inputs": %s, "prompt_name": null}`, js)), "prompt_name null")
	refused(t, ts, "/embed", `{"inputs": "w5", "prompt_name": "doc"}`, `"doc" is not one of the model's prompts (passage, query)`)

	short := embedOK(t, ts, fmt.Sprintf(`{"inputs": %s, "dimensions": 16}`, js))
	sameVectors(t, lib(models.EmbedOptions{Normalize: true, Dimensions: 16}), short, "dimensions")
	raw := embedOK(t, ts, fmt.Sprintf(`{"inputs": %s, "normalize": false}`, js))
	sameVectors(t, lib(models.EmbedOptions{}), raw, "normalize false")
	rawShort := embedOK(t, ts, fmt.Sprintf(`{"inputs": %s, "dimensions": 16, "normalize": false}`, js))
	for i := range raw {
		assert.Equal(t, raw[i][:16], rawShort[i], "the first 16 values of vector %d", i)
	}
	sameVectors(t, plain, embedOK(t, ts, fmt.Sprintf(`{"inputs": %s, "dimensions": 64}`, js)), "all the dimensions")
	sameVectors(t, plain, embedOK(t, ts, fmt.Sprintf(`{"inputs": %s, "dimensions": null}`, js)), "dimensions null")
	refused(t, ts, "/embed", `{"inputs": "w5", "dimensions": 65}`, "at most the embedding dimension, 64")
	for _, d := range []string{"0", "-3"} {
		refused(t, ts, "/embed", `{"inputs": "w5", "dimensions": `+d+`}`, "`dimensions` should be positive")
	}
	for _, d := range []string{"16.5", `"16"`} {
		refused(t, ts, "/embed", `{"inputs": "w5", "dimensions": `+d+`}`, "dimensions")
	}

	long := encodertest.Words(10, 40)
	left := embedOK(t, ts, fmt.Sprintf(`{"inputs": %q, "truncate": true, "truncation_direction": "left"}`, long))
	wantLeft, err := p.Embed(ctx, []string{long}, models.EmbedOptions{Normalize: true, Direction: models.TruncateLeft})
	require.NoError(t, err)
	sameVectors(t, wantLeft, left, "truncation_direction left")
	sameVectors(t, left, embedOK(t, ts, fmt.Sprintf(`{"inputs": %q, "truncate": true, "truncation_direction": "Left"}`, long)), "Left")
	right := embedOK(t, ts, fmt.Sprintf(`{"inputs": %q, "truncate": true}`, long))
	sameVectors(t, right, embedOK(t, ts, fmt.Sprintf(`{"inputs": %q, "truncate": true, "truncation_direction": "Right"}`, long)), "Right")
	sameVectors(t, right, embedOK(t, ts, fmt.Sprintf(`{"inputs": %q, "truncate": true, "truncation_direction": "right"}`, long)), "right")
	assert.Greater(t, maxDiff(left[0], right[0]), 1e-3, "left keeps another part than right")
	refused(t, ts, "/embed", fmt.Sprintf(`{"inputs": %q, "truncate": false}`, long), "must have at most 16 tokens")
	for _, d := range []string{`"sideways"`, `"LEFT"`, `""`, `null`, `1`} {
		refused(t, ts, "/embed", `{"inputs": "w5", "truncation_direction": `+d+`}`, "truncation_direction")
	}
}

// TestEmbedTokenIDs: /embed takes token ids as TEI's Input does (a list
// of ints, or a batch mixing texts and lists of ints): the ids of a text
// embed as the text; ids are truncated on the side asked; with a prompt
// they are decoded and the prompted text tokenized again, as TEI; ids
// outside the vocabulary or malformed ids are 422.
func TestEmbedTokenIDs(t *testing.T) {
	dir := wordModel(t, "golden/models/bert-base", false, promptsJSON)
	p := library(t, dir)
	_, ts := newServer(t, Config{Models: []ModelSpec{{Name: "e", Source: dir}}, Load: wordOptions(t)})

	text := embedOK(t, ts, `{"inputs": ["w5 w6 w7", "w9"]}`)
	ids := embedOK(t, ts, `{"inputs": [101, 5, 6, 7, 102]}`)
	sameVectors(t, text[:1], ids, "a list of ints is one input")
	mixed := embedOK(t, ts, `{"inputs": [[101, 5, 6, 7, 102], "w9"]}`)
	sameVectors(t, text, mixed, "a batch of ids and texts")
	bare := embedOK(t, ts, `{"inputs": [5, 6, 7]}`)
	assert.Greater(t, maxDiff(ids[0], bare[0]), 1e-3, "no special tokens are added to ids")

	long := make([]int, 30)
	for i := range long {
		long[i] = 10 + i
	}
	js, _ := json.Marshal(long)
	left := embedOK(t, ts, fmt.Sprintf(`{"inputs": %s, "truncate": true, "truncation_direction": "left"}`, js))
	end, _ := json.Marshal(long[len(long)-optionsMaxLength:])
	sameVectors(t, embedOK(t, ts, fmt.Sprintf(`{"inputs": %s}`, end)), left, "left truncation keeps the last ids")
	right := embedOK(t, ts, fmt.Sprintf(`{"inputs": %s, "truncate": true}`, js))
	start, _ := json.Marshal(long[:optionsMaxLength])
	sameVectors(t, embedOK(t, ts, fmt.Sprintf(`{"inputs": %s}`, start)), right, "right truncation keeps the first ids")
	refused(t, ts, "/embed", fmt.Sprintf(`{"inputs": %s, "truncate": false}`, js), "must have at most 16 tokens")

	seq, err := p.EncodeIDs([]int32{101, 5, 6, 7, 102}, models.EncodeOptions{})
	require.NoError(t, err)
	enc, err := p.Encode("w5 w6 w7", nil, models.EncodeOptions{})
	require.NoError(t, err)
	assert.Equal(t, enc.IDs(), seq.IDs())

	refused(t, ts, "/embed", `{"inputs": [5, 1000]}`, "outside the vocabulary")
	refused(t, ts, "/embed", `{"inputs": [5, 3000000000]}`, "outside the vocabulary")
	for _, bad := range []string{`[-1]`, `[1.5]`, `[1, "a"]`, `["a", [1, -2]]`, `[[1], null]`} {
		code, b := post(t, ts, "/embed", `{"inputs": `+bad+`}`)
		assert.Equal(t, 422, code, "%s: %s", bad, b)
	}

	// A prompt with ids, as TEI: the ids are decoded without their special
	// tokens, the prompt prefixed, and the text tokenized again with them;
	// an empty prompt too.
	query := embedOK(t, ts, `{"inputs": ["w5 w6 w7", "w9"], "prompt_name": "query"}`)
	sameVectors(t, query[:1], embedOK(t, ts, `{"inputs": [101, 5, 6, 7, 102], "prompt_name": "query"}`), "ids with a prompt")
	sameVectors(t, query[:1], embedOK(t, ts, `{"inputs": [5, 6, 7], "prompt_name": "query"}`), "special tokens are added to the prompted text")
	sameVectors(t, query, embedOK(t, ts, `{"inputs": [[5, 6, 7], "w9"], "prompt_name": "query"}`), "a batch of ids and texts with a prompt")
	sameVectors(t, text, embedOK(t, ts, `{"inputs": [[5, 6, 7], "w9"], "prompt_name": "passage"}`), "an empty prompt re-tokenizes the ids")
	promptLeft := embedOK(t, ts, fmt.Sprintf(`{"inputs": %s, "truncate": true, "truncation_direction": "left", "prompt_name": "query"}`, js))
	wantLeft, err := p.Embed(context.Background(), []string{encodertest.Words(10, 40)}, models.EmbedOptions{Normalize: true, PromptName: "query", Direction: models.TruncateLeft})
	require.NoError(t, err)
	sameVectors(t, wantLeft, promptLeft, "ids with a prompt are truncated as the prompted text")
	refused(t, ts, "/embed", `{"inputs": [5, 1000], "prompt_name": "query"}`, "outside the vocabulary")
}

// TestDefaultPrompt: the server's default prompt (by name or as text)
// applies to every request without a prompt_name, as TEI's
// --default-prompt-name and --default-prompt: on /embed, /tokenize and a
// classifier's /predict, and to token ids as TEI applies it; a pair with
// it is 422. A name the
// model lacks, or both settings, fail New.
func TestDefaultPrompt(t *testing.T) {
	ctx := context.Background()
	dir := wordModel(t, "golden/models/bert-base", false, promptsJSON)
	_, named := newServer(t, Config{Models: []ModelSpec{{Name: "e", Source: dir}}, Load: wordOptions(t), DefaultPromptName: "query"})
	_, plain := newServer(t, Config{Models: []ModelSpec{{Name: "e", Source: dir}}, Load: wordOptions(t)})
	_, text := newServer(t, Config{Models: []ModelSpec{{Name: "e", Source: dir}}, Load: wordOptions(t), DefaultPrompt: "w11 w12 "})

	body := `{"inputs": ["w5 w6", "w7"]}`
	want := embedOK(t, plain, `{"inputs": ["w5 w6", "w7"], "prompt_name": "query"}`)
	sameVectors(t, want, embedOK(t, named, body), "--default-prompt-name")
	sameVectors(t, want, embedOK(t, text, body), "--default-prompt")
	sameVectors(t, embedOK(t, plain, body), embedOK(t, named, `{"inputs": ["w5 w6", "w7"], "prompt_name": "passage"}`),
		"a request's prompt_name wins over the default")
	sameVectors(t, want[:1], embedOK(t, named, `{"inputs": [101, 5, 6, 102]}`), "the default prompt with token ids, as TEI")

	code, b := post(t, named, "/tokenize", `{"inputs": "w5"}`)
	require.Equal(t, 200, code, "%s", b)
	toks := decode[[][]simpleToken](t, b)
	require.Len(t, toks, 1)
	var ids []int32
	for _, tk := range toks[0] {
		ids = append(ids, tk.ID)
	}
	assert.Equal(t, []int32{101, 11, 12, 5, 102}, ids, "the prompted text's tokens")
	w5 := toks[0][3]
	require.NotNil(t, w5.Start)
	assert.Equal(t, "w5", w5.Text)
	assert.Equal(t, [2]int{8, 10}, [2]int{*w5.Start, *w5.Stop}, "offsets in the prompted text")
	code, b = post(t, plain, "/tokenize", `{"inputs": "w5", "prompt_name": "query", "add_special_tokens": false}`)
	require.Equal(t, 200, code, "%s", b)
	toks = decode[[][]simpleToken](t, b)
	require.Len(t, toks[0], 3)
	assert.Equal(t, []int32{11, 12, 5}, []int32{toks[0][0].ID, toks[0][1].ID, toks[0][2].ID})
	refused(t, plain, "/tokenize", `{"inputs": "w5", "prompt_name": "doc"}`, `"doc" is not one of`)

	cls := wordModel(t, "golden/models/bert-seqcls", false, promptsJSON)
	_, cs := newServer(t, Config{Models: []ModelSpec{{Name: "c", Source: cls}}, Load: wordOptions(t), DefaultPromptName: "query"})
	wantC, err := library(t, cls).Classify(ctx, []string{"w5 w6"}, models.ClassifyOptions{Prompt: "w11 w12 "})
	require.NoError(t, err)
	code, b = post(t, cs, "/predict", `{"inputs": "w5 w6", "raw_scores": true}`)
	require.Equal(t, 200, code, "%s", b)
	preds := decode[[]prediction](t, b)
	assert.InDelta(t, wantC[0].Logits[wantC[0].Index], preds[0].Score, 1e-5, "/predict applies the default prompt")
	refused(t, cs, "/predict", `{"inputs": ["w5", "w6"]}`, "cannot be set with a pair of texts")

	for _, c := range []struct {
		cfg Config
		has string
	}{
		{Config{Models: []ModelSpec{{"e", dir}}, DefaultPromptName: "query", DefaultPrompt: "q: "}, "give one"},
		{Config{Models: []ModelSpec{{"e", dir}}, DefaultPromptName: "doc"}, `"doc" is not one of the model's prompts (passage, query)`},
		{Config{Models: []ModelSpec{{"e", dir}, {"s", shipped}}, DefaultPromptName: "query"}, "model s"},
	} {
		c.cfg.Load = wordOptions(t)
		_, err := New(ctx, c.cfg)
		if assert.Error(t, err, "%+v", c.cfg) {
			assert.Contains(t, err.Error(), c.has)
		}
	}
}

// TestPredictRerankDirection: /predict and /rerank cut on the side
// truncation_direction says, as the library does with Direction; any
// other value is 422 (the "sideways").
func TestPredictRerankDirection(t *testing.T) {
	ctx := context.Background()
	cls := wordModel(t, "golden/models/bert-seqcls", false, "")
	rr := wordModel(t, "golden/heads/xlm-roberta-crossencoder", true, "")
	_, ts := newServer(t, Config{Models: []ModelSpec{{Name: "c", Source: cls}, {Name: "r", Source: rr}}, Load: wordOptions(t)})
	long := encodertest.Words(10, 40)

	pc := library(t, cls)
	for _, d := range []models.TruncationDirection{models.TruncateLeft, models.TruncateRight} {
		want, err := pc.Classify(ctx, []string{long}, models.ClassifyOptions{Direction: d})
		require.NoError(t, err)
		code, b := post(t, ts, "/predict", fmt.Sprintf(`{"model": "c", "inputs": %q, "truncate": true, "raw_scores": true, "truncation_direction": %q}`, long, d))
		require.Equal(t, 200, code, "%s", b)
		preds := decode[[]prediction](t, b)
		assert.InDelta(t, want[0].Logits[want[0].Index], preds[0].Score, 1e-5, "/predict %v", d)
	}
	refused(t, ts, "/predict", `{"model": "c", "inputs": "w5", "truncation_direction": "sideways"}`, "truncation_direction")

	pr := library(t, rr)
	scores := map[models.TruncationDirection]float32{}
	for _, d := range []models.TruncationDirection{models.TruncateLeft, models.TruncateRight} {
		want, err := pr.ClassifyPairs(ctx, []tokenizer.Pair{{A: "w5 w6", B: long}}, models.ClassifyOptions{Direction: d, FunctionToApply: models.FunctionNone})
		require.NoError(t, err)
		code, b := post(t, ts, "/rerank", fmt.Sprintf(`{"model": "r", "query": "w5 w6", "texts": [%q], "truncate": true, "raw_scores": true, "truncation_direction": %q}`, long, d))
		require.Equal(t, 200, code, "%s", b)
		ranks := decode[[]rank](t, b)
		require.Len(t, ranks, 1)
		assert.InDelta(t, want[0].Scores[0], ranks[0].Score, 1e-5, "/rerank %v", d)
		scores[d] = ranks[0].Score
	}
	assert.NotEqual(t, scores[models.TruncateLeft], scores[models.TruncateRight], "the directions cut different tokens")
	refused(t, ts, "/rerank", `{"model": "r", "query": "w5", "texts": ["w6"], "truncation_direction": "sideways"}`, "truncation_direction")
	refused(t, ts, "/rerank", `{"model": "r", "query": "w5", "texts": "w6"}`, "must be a list of strings")
}

// maxDiff is the largest absolute difference of a and b.
func maxDiff(a, b []float32) float64 {
	var d float64
	for i := range a {
		d = max(d, float64(a[i]-b[i]), float64(b[i]-a[i]))
	}
	return d
}

// TestNullBooleansAreRefused: the boolean fields TEI declares with a
// default (not optional) refuse null, as serde does; truncate, which is
// optional, takes it as absent.
func TestNullBooleansAreRefused(t *testing.T) {
	_, ts := newServer(t, Config{Models: []ModelSpec{{Name: "sst2", Source: shipped}}})
	for _, c := range []struct{ route, body string }{
		{"/embed", `{"inputs": "a", "normalize": null}`},
		{"/predict", `{"inputs": "a", "raw_scores": null}`},
		{"/rerank", `{"query": "q", "texts": ["a"], "raw_scores": null}`},
		{"/rerank", `{"query": "q", "texts": ["a"], "return_text": null}`},
		{"/tokenize", `{"inputs": "a", "add_special_tokens": null}`},
	} {
		refused(t, ts, c.route, c.body, "is null: want true or false")
	}
	for _, body := range []string{`{"inputs": "a", "truncate": null}`, `{"inputs": "a", "normalize": true}`} {
		embedOK(t, ts, body)
	}
	code, b := post(t, ts, "/predict", `{"inputs": "a", "raw_scores": false, "truncate": null}`)
	assert.Equal(t, 200, code, "%s", b)
	code, b = post(t, ts, "/tokenize", `{"inputs": "a", "add_special_tokens": true}`)
	assert.Equal(t, 200, code, "%s", b)
}

// TestCharacterLimit: as TEI, an input of more characters than 250 times
// the maximum input length is refused without truncation, and with it
// cut to that many bytes before it is tokenized (so that left truncation
// keeps the end of the cut text); /tokenize, which never truncates,
// refuses it.
func TestCharacterLimit(t *testing.T) {
	ctx := context.Background()
	dir := wordModel(t, "golden/models/bert-base", false, "")
	p := library(t, dir)
	_, ts := newServer(t, Config{Models: []ModelSpec{{Name: "e", Source: dir}}, Load: wordOptions(t)})
	limit := optionsMaxLength * teiCharsPerToken
	long := encodertest.Words(10, 1000)
	require.Greater(t, len(long), limit)
	js, _ := json.Marshal(long)

	refused(t, ts, "/embed", fmt.Sprintf(`{"inputs": %s}`, js), fmt.Sprintf("at most %d characters", limit))
	refused(t, ts, "/tokenize", fmt.Sprintf(`{"inputs": %s}`, js), fmt.Sprintf("at most %d characters", limit))
	got := embedOK(t, ts, fmt.Sprintf(`{"inputs": %s, "truncate": true, "truncation_direction": "left"}`, js))
	want, err := p.Embed(ctx, []string{long[:limit]}, models.EmbedOptions{Normalize: true, Direction: models.TruncateLeft})
	require.NoError(t, err)
	sameVectors(t, want, got, "the text is cut to the limit, then its tokens from the left")
	whole, err := p.Embed(ctx, []string{long}, models.EmbedOptions{Normalize: true, Direction: models.TruncateLeft})
	require.NoError(t, err)
	assert.Greater(t, maxDiff(whole[0], got[0]), 1e-3, "the cut changes what left truncation keeps")

	ids := make([]int, limit+1)
	for i := range ids {
		ids[i] = 5
	}
	js, _ = json.Marshal(ids)
	refused(t, ts, "/embed", fmt.Sprintf(`{"inputs": %s}`, js), fmt.Sprintf("at most %d characters", limit))
	embedOK(t, ts, fmt.Sprintf(`{"inputs": %s, "truncate": true}`, js))
}
