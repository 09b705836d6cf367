package serve

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/int8bert/int8bert/models"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSentenceTransformersPooling: a sentence-transformers folder's
// pooling is the model's (/info says where from), --pooling overrides it
// as TEI's does, and a request's normalize alone decides the
// normalisation of a model with a Normalize module, as TEI.
func TestSentenceTransformersPooling(t *testing.T) {
	dir := stFolder(t, map[string]string{
		"modules.json": `[{"idx":0,"name":"0","path":"","type":"sentence_transformers.models.Transformer"},
{"idx":1,"name":"1","path":"1_Pooling","type":"sentence_transformers.models.Pooling"},
{"idx":2,"name":"2","path":"2_Normalize","type":"sentence_transformers.models.Normalize"}]`,
		"1_Pooling/config.json": `{"word_embedding_dimension": 256, "pooling_mode_cls_token": false, "pooling_mode_mean_tokens": true}`,
	})
	info := func(ts string) modelInfo {
		resp, err := http.Get(ts + "/info")
		require.NoError(t, err)
		defer resp.Body.Close()
		var b infoBody
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&b))
		require.Len(t, b.Models, 1)
		return b.Models[0]
	}
	p, err := models.Load(context.Background(), dir, loadOptions(t))
	require.NoError(t, err)
	defer p.Close()
	want, err := p.Embed(context.Background(), []string{"a charming movie"}, models.EmbedOptions{})
	require.NoError(t, err)

	_, ts := newServer(t, Config{Models: []ModelSpec{{"st", dir}}})
	mi := info(ts.URL)
	assert.Equal(t, "mean", mi.Pooling)
	assert.True(t, strings.HasSuffix(mi.PoolingFrom, filepath.Join("1_Pooling", "config.json")), mi.PoolingFrom)
	code, b := post(t, ts, "/embed", `{"inputs": "a charming movie"}`)
	require.Equal(t, 200, code, "%s", b)
	unit := decode[[][]float32](t, b)[0]
	assert.Greater(t, cosine(want[0], unit), 0.99999)
	code, b = post(t, ts, "/embed", `{"inputs": "a charming movie", "normalize": false}`)
	require.Equal(t, 200, code, "%s", b)
	raw := decode[[][]float32](t, b)[0]
	var n float64
	for _, v := range raw {
		n += float64(v) * float64(v)
	}
	assert.Greater(t, math.Abs(math.Sqrt(n)-1), 1e-3, "normalize false: TEI does not apply the Normalize module")
	assert.Greater(t, cosine(want[0], raw), 0.99999)

	_, ts = newServer(t, Config{Models: []ModelSpec{{"st", dir}}, Pooling: "cls"})
	mi = info(ts.URL)
	assert.Equal(t, "cls", mi.Pooling)
	assert.Equal(t, "--pooling", mi.PoolingFrom)
	cls, err := p.Embed(context.Background(), []string{"a charming movie"}, models.EmbedOptions{Pool: models.PoolCLS})
	require.NoError(t, err)
	code, b = post(t, ts, "/embed", `{"inputs": "a charming movie"}`)
	require.Equal(t, 200, code, "%s", b)
	assert.Greater(t, cosine(cls[0], decode[[][]float32](t, b)[0]), 0.99999)
}

// TestEmbedPromptIncludePromptFalse: /embed with a prompt_name on a model
// whose Pooling module has include_prompt false pools as the library's
// Embed does (without the prompt's tokens), and dimensions above the
// embedding's width is 422.
func TestEmbedPromptIncludePromptFalse(t *testing.T) {
	dir := stFolder(t, map[string]string{
		"modules.json": `[{"idx":0,"name":"0","path":"","type":"sentence_transformers.models.Transformer"},
{"idx":1,"name":"1","path":"1_Pooling","type":"sentence_transformers.models.Pooling"}]`,
		"1_Pooling/config.json":             `{"word_embedding_dimension": 256, "pooling_mode_mean_tokens": true, "include_prompt": false}`,
		"config_sentence_transformers.json": `{"prompts": {"query": "query: a long prompt "}}`,
	})
	p, err := models.Load(context.Background(), dir, loadOptions(t))
	require.NoError(t, err)
	defer p.Close()
	texts := []string{"a charming movie", "dull"}
	want, err := p.Embed(context.Background(), texts, models.EmbedOptions{PromptName: "query", Normalize: true})
	require.NoError(t, err)
	prefixed, err := p.Embed(context.Background(), []string{"query: a long prompt a charming movie"}, models.EmbedOptions{Normalize: true})
	require.NoError(t, err)
	_, ts := newServer(t, Config{Models: []ModelSpec{{"st", dir}}})
	got := embedOK(t, ts, `{"inputs": ["a charming movie", "dull"], "prompt_name": "query"}`)
	sameVectors(t, want, got, "prompt_name with include_prompt false")
	assert.Less(t, cosine(prefixed[0], got[0]), 0.99999, "the prompt's tokens are left out")
	refused(t, ts, "/embed", `{"inputs": "dull", "dimensions": 257}`, "at most the embedding dimension, 256")
}

// stFolder is a copy of the shared sst2-bert-mini model with files
// (paths relative to the folder) written into it.
func stFolder(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "st")
	require.NoError(t, os.CopyFS(dir, os.DirFS(sharedModel(t, "models/sst2-bert-mini"))))
	for n, s := range files {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, n)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, n), []byte(s), 0o644))
	}
	return dir
}
