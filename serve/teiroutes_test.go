package serve

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/int8bert/int8bert/models"
	"github.com/int8bert/int8bert/models/encoder/encodertest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// postJSON marshals v and posts it.
func postJSON(t *testing.T, ts *httptest.Server, route string, v any) (int, []byte) {
	t.Helper()
	js, err := json.Marshal(v)
	require.NoError(t, err)
	return post(t, ts, route, string(js))
}

// get fetches route: its status, body and headers.
func get(t *testing.T, ts *httptest.Server, method, route string) (int, []byte, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, ts.URL+route, nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, b, resp.Header
}

// teiError is a TEI error body and status, checked.
func teiError(t *testing.T, code int, b []byte, status int, has string) {
	t.Helper()
	assert.Equal(t, status, code, "%s", b)
	e := decode[errorBody](t, b)
	assert.Contains(t, e.Error, has)
	assert.NotEmpty(t, e.ErrorType)
}

// TestEmbedAll: /embed_all answers every token's last hidden state,
// special tokens included: the first is the CLS pooling and their mean
// the mean pooling of the library's Embed. A classifier gets TEI's 424;
// empty inputs 400; bad fields 422.
func TestEmbedAll(t *testing.T) {
	dir := embeddingFolder(t)
	_, ts := newServer(t, Config{Models: []ModelSpec{{Name: "bge", Source: dir}, {Name: "sst2", Source: shipped}}, MaxClientBatchSize: 3})
	p, err := models.Load(context.Background(), dir, loadOptions(t))
	require.NoError(t, err)
	defer p.Close()
	texts := []string{"w5", "w6 w7 w8", "w9 w10"}
	cls, err := p.Embed(context.Background(), texts, models.EmbedOptions{Pool: models.PoolCLS})
	require.NoError(t, err)
	mean, err := p.Embed(context.Background(), texts, models.EmbedOptions{Pool: models.PoolMean})
	require.NoError(t, err)

	code, b := postJSON(t, ts, "/embed_all", map[string]any{"inputs": texts})
	require.Equal(t, 200, code, "%s", b)
	all := decode[[][][]float32](t, b)
	require.Len(t, all, 3)
	for i, toks := range all {
		require.Len(t, toks, len(strings.Fields(texts[i]))+2, "text %d: [CLS] words [SEP]", i)
		assert.InDeltaSlice(t, cls[i], toks[0], 1e-5, "text %d: first token", i)
		m := make([]float32, len(toks[0]))
		for _, v := range toks {
			for k, x := range v {
				m[k] += x / float32(len(toks))
			}
		}
		assert.InDeltaSlice(t, mean[i], m, 1e-5, "text %d: mean of the tokens", i)
	}
	code, b = postJSON(t, ts, "/embed_all", map[string]any{"inputs": "w6 w7 w8", "truncation_direction": "right", "truncate": false})
	require.Equal(t, 200, code, "%s", b)
	one := decode[[][][]float32](t, b)
	require.Len(t, one, 1, "a single input is a list of one, as TEI")
	assert.Equal(t, all[1], one[0])

	long := strings.Repeat("w11 ", 600)
	code, b = postJSON(t, ts, "/embed_all", map[string]any{"inputs": long, "truncate": true})
	require.Equal(t, 200, code, "%s", b)
	assert.Len(t, decode[[][][]float32](t, b)[0], p.MaxLength())

	for _, c := range []struct {
		body   any
		status int
		has    string
	}{
		{map[string]any{"inputs": "w5", "model": "sst2"}, 424, "Model is not an embedding model"},
		{map[string]any{"inputs": []string{}}, 400, "`inputs` cannot be empty"},
		{map[string]any{}, 422, "`inputs` is required"},
		{map[string]any{"inputs": []string{"a", "b", "c", "d"}}, 422, "maximum allowed batch size 3"},
		{map[string]any{"inputs": long}, 422, "(the model's maximum input length)"},
		{map[string]any{"inputs": "w5", "truncation_direction": "sideways"}, 422, `truncation_direction "sideways"`},
		{map[string]any{"inputs": "w5", "truncation_direction": nil}, 422, "truncation_direction"},
		{map[string]any{"inputs": "w5", "prompt_name": "query"}, 422, "the model has no prompts"},
		{map[string]any{"inputs": []int{5, 1000}}, 422, "outside the vocabulary"},
	} {
		code, b := postJSON(t, ts, "/embed_all", c.body)
		teiError(t, code, b, c.status, c.has)
	}
}

// TestEmbeddingRouteOptions: /embed_all, /embed_sparse and /similarity
// take /embed's encode options, as TEI: truncation_direction, prompt_name
// and the server's default prompt, and (but /similarity) token ids; the
// results are those of the prompted or truncated texts.
func TestEmbeddingRouteOptions(t *testing.T) {
	dir := wordModel(t, "golden/models/bert-base", false, promptsJSON)
	p := library(t, dir)
	cfg := Config{Models: []ModelSpec{{Name: "e", Source: dir}}, Load: wordOptions(t)}
	_, ts := newServer(t, cfg)
	cfg.DefaultPromptName = "query"
	_, named := newServer(t, cfg)
	all := func(ts *httptest.Server, body any) [][][]float32 {
		t.Helper()
		code, b := postJSON(t, ts, "/embed_all", body)
		require.Equal(t, 200, code, "%v: %s", body, b)
		return decode[[][][]float32](t, b)
	}

	prompted := all(ts, map[string]any{"inputs": []string{"w11 w12 w5 w6", "w11 w12 w7"}})
	require.Len(t, prompted[0], 6, "[CLS] w11 w12 w5 w6 [SEP]")
	assert.Equal(t, prompted, all(ts, map[string]any{"inputs": []string{"w5 w6", "w7"}, "prompt_name": "query"}), "prompt_name")
	assert.Equal(t, prompted, all(named, map[string]any{"inputs": []string{"w5 w6", "w7"}}), "the default prompt")
	assert.Equal(t, prompted, all(named, map[string]any{"inputs": []any{[]int{101, 5, 6, 102}, []int{7}}}), "the default prompt with ids")
	plain := all(ts, map[string]any{"inputs": "w5 w6"})
	assert.Equal(t, plain, all(named, map[string]any{"inputs": "w5 w6", "prompt_name": "passage"}), "prompt_name wins over the default")
	assert.Equal(t, plain, all(ts, map[string]any{"inputs": []int{101, 5, 6, 102}}), "ids")

	long := encodertest.Words(10, 40)
	left, err := p.Encode(long, nil, models.EncodeOptions{Truncate: true, Direction: models.TruncateLeft})
	require.NoError(t, err)
	right, err := p.Encode(long, nil, models.EncodeOptions{Truncate: true})
	require.NoError(t, err)
	gotLeft := all(ts, map[string]any{"inputs": long, "truncate": true, "truncation_direction": "left"})
	assert.Equal(t, all(ts, map[string]any{"inputs": left.IDs()}), gotLeft, "left truncation: the tokens of the kept end")
	assert.Equal(t, all(ts, map[string]any{"inputs": right.IDs()}), all(ts, map[string]any{"inputs": long, "truncate": true, "truncation_direction": "Right"}), "right truncation")
	assert.NotEqual(t, all(ts, map[string]any{"inputs": right.IDs()}), gotLeft)
	code, b := postJSON(t, ts, "/embed_all", map[string]any{"inputs": "w5", "prompt_name": "doc"})
	teiError(t, code, b, 422, `"doc" is not one of the model's prompts (passage, query)`)

	// /embed_sparse reads the same fields, then answers 424 without a
	// SPLADE head before it looks a prompt up, as TEI.
	for _, body := range []any{
		map[string]any{"inputs": []any{"w5", []int{5, 6}}, "truncation_direction": "Left", "prompt_name": "query"},
		map[string]any{"inputs": "w5", "prompt_name": "doc"},
	} {
		code, b = postJSON(t, ts, "/embed_sparse", body)
		teiError(t, code, b, 424, "SPLADE pooling")
	}
	code, b = postJSON(t, ts, "/embed_sparse", map[string]any{"inputs": "w5", "truncation_direction": "up"})
	teiError(t, code, b, 422, "truncation_direction")

	// /similarity: the cosines of /embed's unnormalised vectors with the
	// same options.
	sentences := []string{"w5 w6", long}
	for _, par := range []map[string]any{
		{"prompt_name": "query", "truncate": true},
		{"truncate": true, "truncation_direction": "left"},
		{"truncate": true, "truncation_direction": "left", "prompt_name": "query"},
	} {
		embed := map[string]any{"inputs": append([]string{"w7"}, sentences...), "normalize": false}
		for k, v := range par {
			embed[k] = v
		}
		code, b := postJSON(t, ts, "/embed", embed)
		require.Equal(t, 200, code, "%s", b)
		vecs := decode[[][]float32](t, b)
		code, b = postJSON(t, ts, "/similarity", map[string]any{"inputs": map[string]any{"source_sentence": "w7", "sentences": sentences}, "parameters": par})
		require.Equal(t, 200, code, "%v: %s", par, b)
		sims := decode[[]float32](t, b)
		require.Len(t, sims, 2)
		for i, s := range sims {
			assert.InDelta(t, cosine(vecs[0], vecs[i+1]), s, 1e-5, "%v: sentence %d", par, i)
		}
	}
	code, b = postJSON(t, named, "/similarity", map[string]any{"inputs": map[string]any{"source_sentence": "w7", "sentences": sentences[:1]}})
	require.Equal(t, 200, code, "%s", b)
	def := decode[[]float32](t, b)
	code, b = postJSON(t, ts, "/similarity", map[string]any{"inputs": map[string]any{"source_sentence": "w7", "sentences": sentences[:1]}, "parameters": map[string]any{"prompt_name": "query"}})
	require.Equal(t, 200, code, "%s", b)
	assert.InDeltaSlice(t, decode[[]float32](t, b), def, 1e-6, "the default prompt on /similarity")
	code, b = postJSON(t, ts, "/similarity", map[string]any{"inputs": map[string]any{"source_sentence": "w7", "sentences": sentences[:1]}, "parameters": map[string]any{"prompt_name": "doc"}})
	teiError(t, code, b, 422, `"doc" is not one of`)
}

// TestEmbedSparse: without a SPLADE head /embed_sparse reads and checks
// the request as TEI does, then answers TEI's 424.
func TestEmbedSparse(t *testing.T) {
	_, ts := newServer(t, Config{Models: []ModelSpec{{Name: "bge", Source: embeddingFolder(t)}}})
	code, b := postJSON(t, ts, "/embed_sparse", map[string]any{"inputs": "w5"})
	teiError(t, code, b, 424, "Model is not an embedding model with SPLADE pooling")
	assert.Equal(t, "Backend", decode[errorBody](t, b).ErrorType)
	// [] is one input of no ids (TEI's untagged Input); TEI's infer checks
	// for a SPLADE model before it tokenizes: 424 before the 400 Empty.
	code, b = postJSON(t, ts, "/embed_sparse", map[string]any{"inputs": []string{}})
	teiError(t, code, b, 424, "Model is not an embedding model with SPLADE pooling")
	code, b = post(t, ts, "/embed_sparse", `{"inputs": 5}`)
	teiError(t, code, b, 422, "invalid JSON")
}

// TestSimilarity: /similarity is the cosine of the source sentence's
// embedding to each sentence's, as TEI computes it from /embed's
// vectors; its inputs are checked as TEI does.
func TestSimilarity(t *testing.T) {
	_, ts := newServer(t, Config{Models: []ModelSpec{{Name: "bge", Source: embeddingFolder(t)}, {Name: "sst2", Source: shipped}}, MaxClientBatchSize: 4})
	sentences := []string{"w5 w6", "w7", "w8 w9 w10"}
	code, b := postJSON(t, ts, "/embed", map[string]any{"inputs": append([]string{"w5 w6"}, sentences...), "normalize": false})
	require.Equal(t, 200, code, "%s", b)
	vecs := decode[[][]float32](t, b)
	req := map[string]any{"inputs": map[string]any{"source_sentence": "w5 w6", "sentences": sentences},
		"parameters": map[string]any{"truncate": true, "truncation_direction": "Right"}}
	code, b = postJSON(t, ts, "/similarity", req)
	require.Equal(t, 200, code, "%s", b)
	sims := decode[[]float32](t, b)
	require.Len(t, sims, 3)
	for i, s := range sims {
		assert.InDelta(t, cosine(vecs[0], vecs[i+1]), s, 1e-5, "sentence %d", i)
	}
	assert.InDelta(t, 1, sims[0], 1e-5, "the same sentence")
	assert.Less(t, sims[2], float32(0.9999))

	long := strings.Repeat("w11 ", 600)
	for _, c := range []struct {
		body   any
		status int
		has    string
	}{
		{map[string]any{"inputs": map[string]any{"source_sentence": "w5", "sentences": []string{}}}, 400, "`inputs.sentences` cannot be empty"},
		{map[string]any{"inputs": map[string]any{"source_sentence": "w5", "sentences": []string{"a", "b", "c", "d"}}}, 422, "batch size 5 > maximum allowed batch size 4"},
		{map[string]any{"inputs": map[string]any{"sentences": []string{"a"}}}, 422, "source_sentence"},
		{map[string]any{"inputs": map[string]any{"source_sentence": "w5"}}, 422, "`inputs.sentences` is required"},
		{map[string]any{}, 422, "`inputs` is required"},
		{map[string]any{"inputs": map[string]any{"source_sentence": long, "sentences": []string{"w5"}}, "parameters": map[string]any{"truncate": false}}, 422, "(the model's maximum input length)"},
		{map[string]any{"inputs": map[string]any{"source_sentence": "w5", "sentences": []string{"w5"}}, "parameters": map[string]any{"prompt_name": "q"}}, 422, "prompt_name"},
		{map[string]any{"inputs": map[string]any{"source_sentence": "w5", "sentences": []string{"w5"}}, "model": "sst2"}, 424, "Model is not an embedding model"},
	} {
		code, b := postJSON(t, ts, "/similarity", c.body)
		teiError(t, code, b, c.status, c.has)
	}
}

// TestDecodeRoute: /decode turns ids back into text with the
// tokenizer's decoder, without the special tokens unless
// skip_special_tokens is false (TEI's default is true); /tokenize's ids
// of a text decode to the text.
func TestDecodeRoute(t *testing.T) {
	_, ts := newServer(t, Config{Models: []ModelSpec{{Name: "bge", Source: embeddingFolder(t)}, {Name: "sst2", Source: shipped}}, MaxClientBatchSize: 2})
	for _, c := range []struct {
		body any
		want []string
	}{
		{map[string]any{"ids": []int{101, 5, 6, 102}}, []string{"w5 w6"}},
		{map[string]any{"ids": []int{101, 5, 6, 102}, "skip_special_tokens": false}, []string{"[CLS] w5 w6 [SEP]"}},
		{map[string]any{"ids": [][]int{{5}, {6, 7}}}, []string{"w5", "w6 w7"}},
		{map[string]any{"ids": []int{5, 4000000000, 6}}, []string{"w5 w6"}},
	} {
		code, b := postJSON(t, ts, "/decode", c.body)
		require.Equal(t, 200, code, "%v: %s", c.body, b)
		assert.Equal(t, c.want, decode[[]string](t, b), "%v", c.body)
	}
	text := "a charming and often affecting journey"
	code, b := postJSON(t, ts, "/tokenize", map[string]any{"inputs": text, "model": "sst2"})
	require.Equal(t, 200, code, "%s", b)
	var ids []int32
	for _, tk := range decode[[][]simpleToken](t, b)[0] {
		ids = append(ids, tk.ID)
	}
	code, b = postJSON(t, ts, "/decode", map[string]any{"ids": ids, "model": "sst2"})
	require.Equal(t, 200, code, "%s", b)
	assert.Equal(t, []string{text}, decode[[]string](t, b))

	for _, c := range []struct {
		body   string
		status int
		has    string
	}{
		{`{"ids": []}`, 400, "`input_ids` cannot be empty"},
		{`{"ids": [[5], []]}`, 400, "`input_ids` cannot be empty"},
		{`{"ids": [[5], [6], [7]]}`, 422, "maximum allowed batch size 2"},
		{`{"ids": [-1]}`, 422, "a list of token ids"},
		{`{"ids": "w5"}`, 422, "a list of token ids"},
		{`{}`, 422, "`ids` is required"},
	} {
		code, b := post(t, ts, "/decode", c.body)
		teiError(t, code, b, c.status, c.has)
	}
}

// TestTaskRoutes: POST / and /invocations answer what the default
// model's task routes them to, as TEI (TASK=sentence-similarity picks
// /similarity for an embedding model); GET / and /ping are /health.
func TestTaskRoutes(t *testing.T) {
	same := func(ts *httptest.Server, route string, body any) {
		t.Helper()
		code, want := postJSON(t, ts, route, body)
		require.Equal(t, 200, code, "%s", want)
		for _, r := range []string{"/", "/invocations"} {
			code, got := postJSON(t, ts, r, body)
			require.Equal(t, 200, code, "%s", got)
			assert.JSONEq(t, string(want), string(got), "%s is %s", r, route)
		}
	}
	_, ts := newServer(t, Config{Models: []ModelSpec{{Name: "sst2", Source: shipped}}})
	same(ts, "/predict", map[string]any{"inputs": "a charming journey"})
	for _, r := range []string{"/", "/ping", "/health"} {
		code, b, _ := get(t, ts, "GET", r)
		require.Equal(t, 200, code, "%s", b)
		assert.JSONEq(t, `{"status": "ok"}`, string(b), r)
	}

	dir := embeddingFolder(t)
	_, ts = newServer(t, Config{Models: []ModelSpec{{Name: "bge", Source: dir}}})
	same(ts, "/embed", map[string]any{"inputs": []string{"w5", "w6 w7"}})
	t.Setenv("TASK", "sentence-similarity")
	_, ts = newServer(t, Config{Models: []ModelSpec{{Name: "bge", Source: dir}}})
	same(ts, "/similarity", map[string]any{"inputs": map[string]any{"source_sentence": "w5", "sentences": []string{"w5", "w6"}}})

	rr := encodertest.WordFolder(t, sharedModel(t, "golden/heads/xlm-roberta-crossencoder"), true)
	_, ts = newServer(t, Config{Models: []ModelSpec{{Name: "rr", Source: rr}}})
	same(ts, "/rerank", map[string]any{"query": "w5", "texts": []string{"w6", "w7 w8"}})
}

// TestVertex: /vertex answers {"predictions": [...]}, an instance that
// reads as a rerank request from /rerank and the others from the route
// the model's task routes them to; an instance's error is the answer.
func TestVertex(t *testing.T) {
	rr := encodertest.WordFolder(t, sharedModel(t, "golden/heads/xlm-roberta-crossencoder"), true)
	_, ts := newServer(t, Config{Models: []ModelSpec{{Name: "bge", Source: embeddingFolder(t)}, {Name: "rr", Source: rr}, {Name: "sst2", Source: shipped}}})
	instances := []map[string]any{
		{"inputs": "w5"},
		{"inputs": []string{"w6", "w7 w8"}, "normalize": false},
		{"query": "w5", "texts": []string{"w6", "w7"}, "model": "rr", "return_text": true},
		{"inputs": "a charming journey", "model": "sst2"},
	}
	routes := []string{"/embed", "/embed", "/rerank", "/predict"}
	code, b := postJSON(t, ts, "/vertex", map[string]any{"instances": instances})
	require.Equal(t, 200, code, "%s", b)
	var got struct {
		Predictions []json.RawMessage `json:"predictions"`
	}
	require.NoError(t, json.Unmarshal(b, &got))
	require.Len(t, got.Predictions, len(instances))
	for i, inst := range instances {
		code, want := postJSON(t, ts, routes[i], inst)
		require.Equal(t, 200, code, "%s", want)
		assert.JSONEq(t, string(want), string(got.Predictions[i]), "instance %d is %s", i, routes[i])
	}
	code, b = post(t, ts, "/vertex", `{"instances": []}`)
	require.Equal(t, 200, code, "%s", b)
	assert.JSONEq(t, `{"predictions": []}`, string(b))
	code, b = post(t, ts, "/vertex", `{"instances": [{"inputs": "w5"}, {"inputs": []}]}`)
	teiError(t, code, b, 400, "`inputs` cannot be empty") // the failing instance's 400 Empty, as TEI
	code, b = post(t, ts, "/vertex", `{}`)
	teiError(t, code, b, 422, "`instances` is required")
}

// TestOpenAPIDocument: /api-doc/openapi.json describes exactly the
// routes the server has (every path and method of routeMethods but the
// documentation's own), every reference in it resolves, and /docs is a
// Swagger UI page that loads it.
func TestOpenAPIDocument(t *testing.T) {
	_, ts := newServer(t, Config{Models: []ModelSpec{{Name: "sst2", Source: shipped}}})
	code, b, h := get(t, ts, "GET", "/api-doc/openapi.json")
	require.Equal(t, 200, code, "%s", b)
	assert.Equal(t, "application/json", h.Get("Content-Type"))
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	require.NoError(t, json.Unmarshal(b, &doc))
	assert.Equal(t, "3.0.3", doc.OpenAPI)
	var inDoc, served []string
	for p, ops := range doc.Paths {
		for m := range ops {
			inDoc = append(inDoc, strings.ToUpper(m)+" "+p)
		}
	}
	for p, ms := range routeMethods {
		if p == "/docs" || p == "/api-doc/openapi.json" {
			continue
		}
		for _, m := range strings.Split(ms, ", ") {
			served = append(served, m+" "+p)
		}
	}
	sort.Strings(inDoc)
	sort.Strings(served)
	assert.Equal(t, served, inDoc)

	var all any
	require.NoError(t, json.Unmarshal(b, &all))
	var refs []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if s, ok := x.(string); ok && k == "$ref" {
					refs = append(refs, s)
				}
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(all)
	require.NotEmpty(t, refs)
	for _, r := range refs {
		require.True(t, strings.HasPrefix(r, "#/"), r)
		var at any = all
		for _, part := range strings.Split(r[2:], "/") {
			m, ok := at.(map[string]any)
			require.True(t, ok, "%s", r)
			at, ok = m[part]
			require.True(t, ok, "%s does not resolve", r)
		}
	}

	for _, r := range []string{"/docs", "/docs/"} {
		code, b, h := get(t, ts, "GET", r)
		require.Equal(t, 200, code, "%s", b)
		assert.Contains(t, h.Get("Content-Type"), "text/html")
		assert.Contains(t, string(b), "SwaggerUIBundle")
		assert.Contains(t, string(b), `url: "/api-doc/openapi.json"`)
	}
}

// TestRouteLists: 405 names the methods of a known path (Allow), 404
// lists the routes, the new ones included.
func TestRouteLists(t *testing.T) {
	_, ts := newServer(t, Config{Models: []ModelSpec{{Name: "sst2", Source: shipped}}})
	for path, methods := range map[string]string{"/": "GET, POST", "/decode": "POST", "/embed_all": "POST",
		"/ping": "GET", "/invocations": "POST", "/api-doc/openapi.json": "GET", "/embeddings": "POST"} {
		method := "PUT"
		code, b, h := get(t, ts, method, path)
		assert.Equal(t, 405, code, "%s %s: %s", method, path, b)
		assert.Equal(t, methods, h.Get("Allow"), path)
	}
	code, b, _ := get(t, ts, "GET", "/nope")
	teiError(t, code, b, 404, "no route GET /nope")
	for _, r := range []string{"/embed_all", "/embed_sparse", "/similarity", "/decode", "/vertex", "/invocations", "/ping", "/embeddings"} {
		assert.Contains(t, string(b), r)
	}
}

// TestEmbedSparseSplade: a masked-LM model served with splade pooling
// answers /embed_sparse with the library's EmbedSparse, in TEI's shape
// ([[{"index", "value"}]]); splade pooling on a model without a
// masked-LM head fails start-up with TEI's message.
func TestEmbedSparseSplade(t *testing.T) {
	dir := filepath.Join("..", "models", "testdata", "mlm", "bert-mlm")
	_, ts := newServer(t, Config{Models: []ModelSpec{{Name: "splade", Source: dir}}, Pooling: "splade"})
	p, err := models.Load(context.Background(), dir, loadOptions(t))
	require.NoError(t, err)
	defer p.Close()
	texts := []string{"the man went to the city.", "a good song"}
	want, err := p.EmbedSparse(context.Background(), texts, models.SparseOptions{})
	require.NoError(t, err)
	code, b := postJSON(t, ts, "/embed_sparse", map[string]any{"inputs": texts})
	require.Equal(t, 200, code, "%s", b)
	got := decode[[][]struct {
		Index *int     `json:"index"`
		Value *float32 `json:"value"`
	}](t, b)
	require.Len(t, got, len(texts))
	for i := range texts {
		require.Len(t, got[i], len(want[i]))
		for k, v := range got[i] {
			require.NotNil(t, v.Index)
			require.NotNil(t, v.Value)
			assert.Equal(t, want[i][k].Index, *v.Index)
			assert.InDelta(t, want[i][k].Value, *v.Value, 1e-6)
		}
	}
	code, b = postJSON(t, ts, "/embed_sparse", map[string]any{"inputs": "a good song"})
	require.Equal(t, 200, code, "%s", b)
	require.Len(t, decode[[][]map[string]float64](t, b), 1)
	// POST / answers as /embed_sparse on a SPLADE model, as TEI.
	code, b2 := postJSON(t, ts, "/", map[string]any{"inputs": "a good song"})
	require.Equal(t, 200, code, "%s", b2)
	assert.JSONEq(t, string(b), string(b2))

	_, err = New(context.Background(), Config{Models: []ModelSpec{{Name: "bge", Source: embeddingFolder(t)}}, Pooling: "splade", Load: loadOptions(t), Instances: 1})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "Splade pooling is not supported: model is not a ForMaskedLM model")
}

// TestFillMaskRoute: /fill-mask answers the library's FillMask in the
// Hugging Face pipeline's shape (a list for a text with one mask, a list
// of lists for several, one result per text of a list); a text without a
// mask is 422; a model without a masked-LM head is 424.
func TestFillMaskRoute(t *testing.T) {
	dir := filepath.Join("..", "models", "testdata", "mlm", "bert-mlm")
	_, ts := newServer(t, Config{Models: []ModelSpec{{Name: "mlm", Source: dir}, {Name: "sst2", Source: shipped}}})
	p, err := models.Load(context.Background(), dir, loadOptions(t))
	require.NoError(t, err)
	defer p.Close()
	want, err := p.FillMask(context.Background(), []string{"the man went to the [MASK].", "the [MASK] of the [MASK]"}, models.FillMaskOptions{TopK: 3, Targets: []string{"house", "city", "car", "music"}})
	require.NoError(t, err)

	code, b := postJSON(t, ts, "/fill-mask", map[string]any{"model": "mlm", "inputs": "the man went to the [MASK].", "top_k": 3, "targets": []string{"house", "city", "car", "music"}})
	require.Equal(t, 200, code, "%s", b)
	assert.Equal(t, want[0].Masks[0], decode[[]models.FillMaskToken](t, b))
	code, b = postJSON(t, ts, "/fill-mask", map[string]any{"model": "mlm", "inputs": []string{"the man went to the [MASK].", "the [MASK] of the [MASK]"}, "top_k": 3, "targets": []string{"house", "city", "car", "music"}})
	require.Equal(t, 200, code, "%s", b)
	both := decode[[]json.RawMessage](t, b)
	require.Len(t, both, 2)
	assert.Equal(t, want[0].Masks[0], decode[[]models.FillMaskToken](t, both[0]))
	assert.Equal(t, want[1].Masks, decode[[][]models.FillMaskToken](t, both[1]))

	code, b = postJSON(t, ts, "/fill-mask", map[string]any{"model": "mlm", "inputs": "no mask"})
	teiError(t, code, b, 422, "no mask token")
	code, b = postJSON(t, ts, "/fill-mask", map[string]any{"model": "sst2", "inputs": "the [MASK]"})
	teiError(t, code, b, 424, "masked language model")
}
