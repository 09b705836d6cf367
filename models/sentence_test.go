package models_test

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/int8bert/int8bert/models"
	"github.com/int8bert/int8bert/models/encoder/encodertest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// stCase is a fixture of testdata/sentence (made by its make_fixture.py
// with sentence-transformers' own modules): the sentence-transformers
// files of a golden model and the embeddings they give.
type stCase struct {
	Model     string `json:"model"`
	Pooling   string `json:"pooling"`
	Normalize bool   `json:"normalize"`
	// PromptLength is the leading tokens a prompt took, which a Pooling
	// module with include_prompt false leaves out (0: none).
	PromptLength int         `json:"prompt_length"`
	Embeddings   [][]float64 `json:"embeddings"`
	dir          string      // the model folder: the golden model with the case's files
	seqs         []models.Sequence
}

// stCases are the fixtures, each in a model folder of its own.
func stCases(t *testing.T) []*stCase {
	t.Helper()
	names, err := filepath.Glob("testdata/sentence/*/expected.json")
	require.NoError(t, err)
	require.NotEmpty(t, names)
	var cs []*stCase
	for _, n := range names {
		c := &stCase{}
		b, err := os.ReadFile(n)
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(b, c))
		golden := shared(t, filepath.Join("golden", "models", c.Model))
		c.dir = filepath.Join(t.TempDir(), filepath.Base(filepath.Dir(n)))
		require.NoError(t, os.CopyFS(c.dir, os.DirFS(filepath.Dir(n))))
		for _, f := range []string{"config.json", "model.safetensors"} {
			b, err := os.ReadFile(filepath.Join(golden, f))
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(filepath.Join(c.dir, f), b, 0o644))
		}
		var g struct {
			Inputs map[string][][]int32 `json:"inputs"`
		}
		b, err = os.ReadFile(filepath.Join(golden, "golden.json"))
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(b, &g))
		for i, ids := range g.Inputs["input_ids"] {
			n := 0
			for _, m := range g.Inputs["attention_mask"][i] {
				n += int(m)
			}
			var types []int32
			if tt := g.Inputs["token_type_ids"]; tt != nil {
				types = tt[i][:n]
			}
			c.seqs = append(c.seqs, models.SequenceOf(ids[:n], types))
		}
		require.Len(t, c.Embeddings, len(c.seqs))
		cs = append(cs, c)
	}
	return cs
}

// embeddings runs c's sequences through p and returns their embeddings
// (Batch.Embedding with the model's own pooling, normalised as
// sentence-transformers' modules end).
func (c *stCase) embeddings(t *testing.T, p *models.Pipeline) [][]float32 {
	t.Helper()
	out := make([][]float32, len(c.seqs))
	require.NoError(t, p.Run(context.Background(), c.seqs, func(b *models.Batch) error {
		for r, i := range b.Rows() {
			e, err := b.Embedding(r, models.PoolDefault, c.Normalize)
			if c.PromptLength > 0 {
				e, err = models.PromptEmbedding(b, r, c.PromptLength, c.Normalize)
			}
			if err != nil {
				return err
			}
			out[i] = e
		}
		return nil
	}))
	return out
}

// TestSentenceTransformersParity: a golden model with the files of a
// sentence-transformers folder (every pooling mode, several at once,
// Dense modules with each activation, weights in pytorch_model.bin and
// model.safetensors, Normalize, include_prompt false) gives the embeddings sentence-transformers'
// own modules compute from Hugging Face's hidden states: within 1e-5 at
// FP32, and within the INT8 gate of the last hidden state (cosine 0.99)
// when quantized at load.
func TestSentenceTransformersParity(t *testing.T) {
	sel := encodertest.Selector(t)
	for _, c := range stCases(t) {
		name := filepath.Base(c.dir)
		p, err := models.Load(context.Background(), c.dir, models.Options{Selector: sel})
		require.NoError(t, err, name)
		pool, from := p.Pooling()
		assert.Equal(t, c.Pooling, strings.ReplaceAll(pool.String(), "last_token", "lasttoken"), name)
		assert.Contains(t, from, "config.json", name)
		st := p.Sentence()
		assert.Equal(t, c.Normalize, st.Normalize, name)
		assert.Equal(t, len(c.Embeddings[0]), st.Dim, name)
		dim, err := p.EmbeddingDim(models.PoolDefault)
		require.NoError(t, err)
		assert.Equal(t, st.Dim, dim, name)
		if st.Config != "" {
			assert.Equal(t, 64, p.MaxLength(), "%s: max_seq_length", name)
		}
		got := c.embeddings(t, p)
		p.Close()
		for i, want := range c.Embeddings {
			require.Len(t, got[i], len(want), "%s: text %d", name, i)
			var d, m float64
			for j, w := range want {
				d = math.Max(d, math.Abs(float64(got[i][j])-w))
				m = math.Max(m, math.Abs(w))
			}
			assert.Less(t, d/m, 1e-5, "%s: text %d: max difference %.3g relative to %.3g", name, i, d, m)
		}

		q, err := models.Load(context.Background(), c.dir, models.Options{Selector: sel, Precision: models.PrecisionInt8Dynamic})
		require.NoError(t, err, name)
		got = c.embeddings(t, q)
		q.Close()
		for i, want := range c.Embeddings {
			w := make([]float32, len(want))
			for j, x := range want {
				w[j] = float32(x)
			}
			assert.GreaterOrEqual(t, cosine(w, got[i]), 0.99, "%s: int8 text %d", name, i)
		}
	}
}

// writeFiles writes files (name: contents) under dir.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for n, s := range files {
		p := filepath.Join(dir, n)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(s), 0o644))
	}
}

// sentenceFolder is a copy of the shared model name with files added.
func sentenceFolder(t *testing.T, name string, files map[string]string) string {
	t.Helper()
	src := shared(t, filepath.Join("models", name))
	dir := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.CopyFS(dir, os.DirFS(src)))
	writeFiles(t, dir, files)
	return dir
}

const (
	stModulesMeanNormalize = `[{"idx":0,"name":"0","path":"","type":"sentence_transformers.models.Transformer"},
{"idx":1,"name":"1","path":"1_Pooling","type":"sentence_transformers.models.Pooling"},
{"idx":2,"name":"2","path":"2_Normalize","type":"sentence_transformers.models.Normalize"}]`
	stPoolingMean = `{"word_embedding_dimension": 256, "pooling_mode_cls_token": false, "pooling_mode_mean_tokens": true}`
)

// TestSentenceTransformersEmbed: Embed runs the model's modules as
// sentence-transformers' encode does (the Normalize module normalises
// without EmbedOptions.Normalize), Batch.Embedding as TEI does (the
// request's normalize alone decides); max_seq_length caps MaxLength and
// do_lower_case lowercases the texts.
func TestSentenceTransformersEmbed(t *testing.T) {
	ctx := context.Background()
	dir := sentenceFolder(t, "sst2-bert-mini", map[string]string{
		"modules.json":              stModulesMeanNormalize,
		"1_Pooling/config.json":     stPoolingMean,
		"sentence_bert_config.json": `{"max_seq_length": 40, "do_lower_case": true}`,
	})
	p, err := models.Load(ctx, dir, models.Options{Selector: encodertest.Selector(t), Threads: 1})
	require.NoError(t, err)
	defer p.Close()
	assert.Equal(t, 40, p.MaxLength())
	st := p.Sentence()
	assert.Equal(t, models.PoolMean, st.Pooling)
	assert.Equal(t, []string{"Normalize"}, st.Modules)
	assert.True(t, st.DoLowerCase)
	assert.Equal(t, 40, st.MaxSeqLength)

	texts := []string{"A Charming MOVIE", "the plot is thin"}
	own, err := p.Embed(ctx, texts, models.EmbedOptions{})
	require.NoError(t, err)
	asked, err := p.Embed(ctx, texts, models.EmbedOptions{Pool: models.PoolMean, Normalize: true})
	require.NoError(t, err)
	lower, err := p.Embed(ctx, []string{"a charming movie", "the plot is thin"}, models.EmbedOptions{})
	require.NoError(t, err)
	for i := range texts {
		var n float64
		for _, v := range own[i] {
			n += float64(v) * float64(v)
		}
		assert.InDelta(t, 1, n, 1e-5, "text %d: the Normalize module", i)
		assert.Equal(t, asked[i], own[i], "text %d", i)
		assert.Equal(t, lower[i], own[i], "text %d: do_lower_case", i)
	}
	seqs := make([]models.Sequence, len(texts))
	for i, s := range texts {
		seqs[i], err = p.Encode(s, nil, models.EncodeOptions{})
		require.NoError(t, err)
	}
	require.NoError(t, p.Run(ctx, seqs, func(b *models.Batch) error {
		for r, i := range b.Rows() {
			raw, err := b.Embedding(r, models.PoolDefault, false)
			require.NoError(t, err)
			unit, err := b.Embedding(r, models.PoolDefault, true)
			require.NoError(t, err)
			assert.Less(t, relDiff(own[i], unit), 1e-6, "text %d", i)
			assert.Greater(t, cosine(own[i], raw), 0.99999, "text %d", i)
			assert.Greater(t, relDiff(own[i], raw), 1e-3, "text %d: normalize false is not normalised", i)
		}
		return nil
	}))
}

// TestSentenceTransformersDefaultPooling: without a pooling config the
// model's own pooling is CLS, TEI's default for BERT-type models; with
// only 1_Pooling/config.json (no modules.json) it is that file's, as TEI
// reads it.
func TestSentenceTransformersDefaultPooling(t *testing.T) {
	ctx := context.Background()
	sel := encodertest.Selector(t)
	for name, want := range map[string]models.Pooling{"sst2-bert-mini": models.PoolCLS, "sst2-xlmr-mini": models.PoolCLS} {
		p, err := models.Load(ctx, shared(t, filepath.Join("models", name)), models.Options{Selector: sel})
		require.NoError(t, err)
		pool, from := p.Pooling()
		assert.Equal(t, want, pool, name)
		assert.Contains(t, from, "default", name)
		texts := []string{"a charming movie"}
		def, err := p.Embed(ctx, texts, models.EmbedOptions{})
		require.NoError(t, err)
		cls, err := p.Embed(ctx, texts, models.EmbedOptions{Pool: models.PoolCLS})
		require.NoError(t, err)
		assert.Equal(t, cls, def, name)
		p.Close()
	}
	dir := sentenceFolder(t, "sst2-bert-mini", map[string]string{
		"1_Pooling/config.json": `{"word_embedding_dimension": 256, "pooling_mode_cls_token": false, "pooling_mode_mean_tokens": false, "pooling_mode_lasttoken": true}`,
	})
	p, err := models.Load(ctx, dir, models.Options{Selector: sel})
	require.NoError(t, err)
	defer p.Close()
	pool, from := p.Pooling()
	assert.Equal(t, models.PoolLastToken, pool)
	assert.Equal(t, filepath.Join(dir, "1_Pooling", "config.json"), from)
}

// TestSentenceTransformersErrors: what Load and Embed cannot honour is an
// error naming it: splade (no masked-LM head yet), unknown modules and
// activations, Dense shapes that do not fit, a pooling that does not fit
// the model's Dense module.
func TestSentenceTransformersErrors(t *testing.T) {
	ctx := context.Background()
	sel := encodertest.Selector(t)
	dense := func(in int, act string) string {
		return `{"in_features": ` + itoa(in) + `, "out_features": 8, "bias": false, "activation_function": "` + act + `"}`
	}
	modules := func(types ...string) string {
		s := `[{"idx":0,"name":"0","path":"","type":"sentence_transformers.models.Transformer"}`
		for i, ty := range types {
			path := map[string]string{"Pooling": "1_Pooling", "Dense": "2_Dense", "Normalize": "3_Normalize"}[ty]
			if path == "" {
				path = ty
				ty = strings.TrimPrefix(ty, "x.")
			}
			s += `,{"idx":` + itoa(i+1) + `,"name":"x","path":"` + path + `","type":"sentence_transformers.models.` + ty + `"}`
		}
		return s + "]"
	}
	for _, c := range []struct {
		name  string
		files map[string]string
		has   string
	}{
		{"splade module", map[string]string{"modules.json": modules("SpladePooling")}, "EmbedSparse"},
		{"unknown module", map[string]string{"modules.json": modules("Pooling", "LayerNorm"), "1_Pooling/config.json": stPoolingMean}, "not supported"},
		{"no pooling mode", map[string]string{"1_Pooling/config.json": `{"pooling_mode_mean_tokens": false}`}, "no pooling_mode"},
		{"bad pooling_mode", map[string]string{"1_Pooling/config.json": `{"pooling_mode": "median"}`}, "median"},
		{"wrong width", map[string]string{"1_Pooling/config.json": `{"word_embedding_dimension": 64}`}, "word_embedding_dimension 64"},
		{"missing pooling", map[string]string{"modules.json": modules("Pooling")}, "1_Pooling"},
		{"dense activation", map[string]string{"modules.json": modules("Pooling", "Dense"), "1_Pooling/config.json": stPoolingMean,
			"2_Dense/config.json": dense(256, "torch.nn.modules.activation.Softsign")}, "Softsign"},
		{"dense in_features", map[string]string{"modules.json": modules("Pooling", "Dense"), "1_Pooling/config.json": stPoolingMean,
			"2_Dense/config.json": dense(128, "torch.nn.modules.linear.Identity")}, "in_features 128"},
		{"dense weights", map[string]string{"modules.json": modules("Pooling", "Dense"), "1_Pooling/config.json": stPoolingMean,
			"2_Dense/config.json": dense(256, "torch.nn.modules.linear.Identity")}, "2_Dense"},
		{"max_seq_length", map[string]string{"sentence_bert_config.json": `{"max_seq_length": 0}`}, "max_seq_length 0"},
		{"malformed", map[string]string{"modules.json": `{`}, "modules.json"},
	} {
		dir := sentenceFolder(t, "sst2-bert-mini", c.files)
		_, err := models.Load(ctx, dir, models.Options{Selector: sel})
		if assert.Error(t, err, c.name) {
			assert.ErrorIs(t, err, models.ErrConfig, c.name)
			assert.Contains(t, err.Error(), c.has, c.name)
		}
	}

	p := sst2Model(t, "sst2-bert-mini", models.Options{})
	_, err := p.Embed(ctx, []string{"x"}, models.EmbedOptions{Pool: models.PoolSplade})
	require.Error(t, err)
	assert.ErrorIs(t, err, models.ErrConfig)
	assert.Contains(t, err.Error(), "masked-LM")

	// A pooling whose width does not fit the model's Dense module.
	cs := stCases(t)
	for _, c := range cs {
		if !strings.HasSuffix(c.dir, "cls_max_mean_dense") {
			continue
		}
		q, err := models.Load(ctx, c.dir, models.Options{Selector: sel})
		require.NoError(t, err)
		defer q.Close()
		_, err = q.EmbeddingDim(models.PoolMean)
		require.Error(t, err)
		assert.ErrorIs(t, err, models.ErrInput)
		dim, err := q.EmbeddingDim(models.PoolCLS | models.PoolMax | models.PoolMean)
		require.NoError(t, err)
		assert.Equal(t, 32, dim)
	}
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

// TestPoolingNames: ParsePooling reads what String writes, TEI's and
// sentence-transformers' spellings; ParseTEIPooling only TEI's.
func TestPoolingNames(t *testing.T) {
	for s, want := range map[string]models.Pooling{
		"": models.PoolDefault, "cls": models.PoolCLS, "mean": models.PoolMean, "last-token": models.PoolLastToken,
		"lasttoken": models.PoolLastToken, "last_token": models.PoolLastToken, "max": models.PoolMax,
		"weightedmean": models.PoolWeightedMean, "mean_sqrt_len_tokens": models.PoolMeanSqrtLen, "splade": models.PoolSplade,
		"cls+max+mean": models.PoolCLS | models.PoolMax | models.PoolMean,
	} {
		got, err := models.ParsePooling(s)
		require.NoError(t, err, s)
		assert.Equal(t, want, got, s)
		back, err := models.ParsePooling(got.String())
		require.NoError(t, err, s)
		assert.Equal(t, got, back, s)
	}
	type box struct{ P models.Pooling }
	js, err := json.Marshal(box{models.PoolCLS | models.PoolMean})
	require.NoError(t, err)
	assert.JSONEq(t, `{"P": "cls+mean"}`, string(js))
	var back box
	require.NoError(t, json.Unmarshal(js, &back))
	assert.Equal(t, models.PoolCLS|models.PoolMean, back.P)
	assert.Equal(t, "last_token", models.PoolLastToken.String())
	assert.Equal(t, "cls+mean", (models.PoolMean | models.PoolCLS).String())
	for _, s := range []string{"median", "cls+", "sideways"} {
		_, err := models.ParsePooling(s)
		assert.ErrorIs(t, err, models.ErrConfig, s)
	}
	for s, want := range map[string]models.Pooling{"cls": models.PoolCLS, "mean": models.PoolMean, "splade": models.PoolSplade, "last-token": models.PoolLastToken} {
		got, err := models.ParseTEIPooling(s)
		require.NoError(t, err, s)
		assert.Equal(t, want, got, s)
	}
	for _, s := range []string{"max", "last_token", "weightedmean"} {
		_, err := models.ParseTEIPooling(s)
		assert.ErrorIs(t, err, models.ErrConfig, s)
	}
}

// TestPyLower: do_lower_case lowercases as Python's str.lower.
func TestPyLower(t *testing.T) {
	for in, want := range map[string]string{ // Python 3.11's "...".lower()
		"Hello WORLD": "hello world", "İstanbul": "i̇stanbul", "ΟΔΟΣ": "οδος", "ΣΑΣ ΟΔΟΣ.": "σας οδος.", "Σ": "σ", "AΣB": "aσb",
		"already lower": "already lower",
	} {
		assert.Equal(t, want, models.PyLower(in), in)
	}
}

// TestSentenceTransformersFromHub: Load of a hub id fetches the
// sentence-transformers files with the model (a fake hub serving a
// folder), so that the model's own pooling and modules apply.
func TestSentenceTransformersFromHub(t *testing.T) {
	dir := sentenceFolder(t, "sst2-bert-mini", map[string]string{
		"modules.json":              stModulesMeanNormalize,
		"1_Pooling/config.json":     stPoolingMean,
		"sentence_bert_config.json": `{"max_seq_length": 40}`,
	})
	asked := fakeHub(t, "org/st-mini", dir)
	p, err := models.Load(context.Background(), "org/st-mini", models.Options{Selector: encodertest.Selector(t)})
	require.NoError(t, err)
	defer p.Close()
	pool, from := p.Pooling()
	assert.Equal(t, models.PoolMean, pool)
	assert.True(t, strings.HasSuffix(from, filepath.Join("1_Pooling", "config.json")), from)
	assert.Equal(t, []string{"Normalize"}, p.Sentence().Modules)
	assert.Equal(t, 40, p.MaxLength())
	assert.Contains(t, asked(), "modules.json")
	assert.Contains(t, asked(), "1_Pooling/config.json")
	assert.Contains(t, asked(), "sentence_bert_config.json")
	assert.NotContains(t, asked(), "sentence_roberta_config.json", "the first ST config found ends the search")
}

// TestSentenceTransformersSaved: an INT8 pipeline saved from a
// sentence-transformers folder keeps its files, so the saved folder
// embeds as the pipeline did.
func TestSentenceTransformersSaved(t *testing.T) {
	sel := encodertest.Selector(t)
	for _, c := range stCases(t) {
		if !strings.HasSuffix(c.dir, "cls_max_mean_dense") {
			continue
		}
		q, err := models.Load(context.Background(), c.dir, models.Options{Selector: sel, Precision: models.PrecisionInt8Dynamic})
		require.NoError(t, err)
		defer q.Close()
		out := t.TempDir()
		require.NoError(t, q.Save(out))
		back, err := models.Load(context.Background(), out, models.Options{Selector: sel})
		require.NoError(t, err)
		defer back.Close()
		want, got := q.Sentence(), back.Sentence()
		want.PoolingFrom, want.Config = "", ""
		got.PoolingFrom, got.Config = "", ""
		assert.Equal(t, want, got)
		assert.Equal(t, c.embeddings(t, q), c.embeddings(t, back))
	}
}
