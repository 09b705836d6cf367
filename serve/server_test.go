package serve

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/int8bert/int8bert/models"
	"github.com/int8bert/int8bert/models/encoder/encodertest"
	"github.com/int8bert/int8bert/tokenizer"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// shipped is the SST-2 XLM-R classifier in assets/, always in the
// repository.
const shipped = "../assets/sst2-xlmr-mini"

// sharedDir is the project's shared test material.
func sharedDir() string {
	if d := os.Getenv("INT8BERT_SHARED"); d != "" {
		return d
	}
	return "../../shared"
}

// sharedModel is a folder of the shared material, skipping the test by
// name when it is absent.
func sharedModel(t *testing.T, rel string) string {
	t.Helper()
	dir := filepath.Join(sharedDir(), rel)
	if _, err := os.Stat(filepath.Join(dir, "config.json")); err != nil {
		t.Skipf("%s not found (the project's shared folder; set INT8BERT_SHARED): %v", dir, err)
	}
	return dir
}

// newServer starts a server on c (models loaded on a quick-tuning
// selector) behind httptest, closed at the end of the test.
func newServer(t *testing.T, c Config) (*Server, *httptest.Server) {
	t.Helper()
	if c.Load.Selector == nil {
		c.Load = loadOptions(t)
	}
	if c.Instances == 0 {
		c.Instances = 1
	}
	s, err := New(context.Background(), c)
	require.NoError(t, err)
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		ts.Close()
		s.Close()
	})
	return s, ts
}

// loadOptions load the test models on a quick-tuning selector.
func loadOptions(t *testing.T) models.Options {
	return models.Options{Selector: encodertest.Selector(t)}
}

// post sends body to route and returns the status and the body.
func post(t *testing.T, ts *httptest.Server, route, body string) (int, []byte) {
	t.Helper()
	resp, err := http.Post(ts.URL+route, "application/json", strings.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, b
}

// decode parses b into a new T.
func decode[T any](t *testing.T, b []byte) T {
	t.Helper()
	var v T
	require.NoError(t, json.Unmarshal(b, &v), "%s", b)
	return v
}

func cosine(a, b []float32) float64 {
	var ab, aa, bb float64
	for i := range a {
		ab += float64(a[i]) * float64(b[i])
		aa += float64(a[i]) * float64(a[i])
		bb += float64(b[i]) * float64(b[i])
	}
	return ab / math.Sqrt(aa*bb)
}

// TestRoutesMatchThePipeline: /predict, /embed, /v1/embeddings and
// /tokenize give what the library gives on the same model, in TEI's
// shapes (a single input answers one result, a batch a list).
func TestRoutesMatchThePipeline(t *testing.T) {
	ctx := context.Background()
	_, ts := newServer(t, Config{Models: []ModelSpec{{Name: "sst2", Source: shipped}}})
	p, err := models.Load(ctx, shipped, models.Options{Selector: encodertest.Selector(t)})
	require.NoError(t, err)
	defer p.Close()
	texts := []string{"a charming and often affecting journey", "the plot is nowhere", "w"}

	want, err := p.Classify(ctx, texts, models.ClassifyOptions{})
	require.NoError(t, err)
	code, b := post(t, ts, "/predict", `{"inputs": "a charming and often affecting journey"}`)
	require.Equal(t, 200, code, "%s", b)
	one := decode[[]prediction](t, b)
	require.Len(t, one, 2)
	assert.Equal(t, want[0].Label, one[0].Label)
	assert.InDelta(t, want[0].Score, one[0].Score, 1e-5)
	assert.GreaterOrEqual(t, one[0].Score, one[1].Score, "labels best first")

	js, _ := json.Marshal(map[string]any{"inputs": [][]string{{texts[0]}, {texts[1]}, {texts[2]}}, "raw_scores": true})
	code, b = post(t, ts, "/predict", string(js))
	require.Equal(t, 200, code, "%s", b)
	batch := decode[[][]prediction](t, b)
	require.Len(t, batch, 3)
	for i, preds := range batch {
		assert.Equal(t, want[i].Label, preds[0].Label, "text %d", i)
		assert.InDelta(t, want[i].Logits[want[i].Index], preds[0].Score, 1e-4, "raw score of text %d", i)
	}

	// A pair ["a", "b"] is one input.
	wantPair, err := p.ClassifyPairs(ctx, []tokenizer.Pair{{A: "good", B: "bad"}}, models.ClassifyOptions{})
	require.NoError(t, err)
	code, b = post(t, ts, "/predict", `{"inputs": ["good", "bad"]}`)
	require.Equal(t, 200, code, "%s", b)
	pair := decode[[]prediction](t, b)
	assert.Equal(t, wantPair[0].Label, pair[0].Label)
	assert.InDelta(t, wantPair[0].Score, pair[0].Score, 1e-5)

	wantE, err := p.Embed(ctx, texts, models.EmbedOptions{Normalize: true})
	require.NoError(t, err)
	js, _ = json.Marshal(map[string]any{"inputs": texts})
	code, b = post(t, ts, "/embed", string(js))
	require.Equal(t, 200, code, "%s", b)
	vecs := decode[[][]float32](t, b)
	require.Len(t, vecs, 3)
	for i := range vecs {
		assert.Greater(t, cosine(wantE[i], vecs[i]), 0.99999, "embedding %d", i)
	}
	code, b = post(t, ts, "/embed", `{"inputs": "w", "normalize": false}`)
	require.Equal(t, 200, code, "%s", b)
	raw := decode[[][]float32](t, b)
	require.Len(t, raw, 1)
	assert.Greater(t, cosine(wantE[2], raw[0]), 0.99999)

	js, _ = json.Marshal(map[string]any{"input": texts[:2], "encoding_format": "base64", "model": "sst2"})
	code, b = post(t, ts, "/v1/embeddings", string(js))
	require.Equal(t, 200, code, "%s", b)
	var oa struct {
		Object string `json:"object"`
		Model  string `json:"model"`
		Data   []struct {
			Object    string `json:"object"`
			Embedding string `json:"embedding"`
			Index     int    `json:"index"`
		} `json:"data"`
		Usage openAIUsage `json:"usage"`
	}
	require.NoError(t, json.Unmarshal(b, &oa))
	assert.Equal(t, "list", oa.Object)
	assert.Equal(t, "sst2", oa.Model)
	require.Len(t, oa.Data, 2)
	tokens := 0
	for i, d := range oa.Data {
		assert.Equal(t, i, d.Index)
		raw, err := base64.StdEncoding.DecodeString(d.Embedding)
		require.NoError(t, err)
		v := make([]float32, len(raw)/4)
		for k := range v {
			v[k] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*k:]))
		}
		assert.Greater(t, cosine(wantE[i], v), 0.99999, "openai embedding %d", i)
		e, err := p.Tok.Encode(texts[i])
		require.NoError(t, err)
		tokens += e.Len()
	}
	assert.Equal(t, openAIUsage{PromptTokens: tokens, TotalTokens: tokens}, oa.Usage)

	code, b = post(t, ts, "/tokenize", `{"inputs": "héllo world"}`)
	require.Equal(t, 200, code, "%s", b)
	toks := decode[[][]simpleToken](t, b)
	e, err := p.Tok.Encode("héllo world")
	require.NoError(t, err)
	require.Len(t, toks, 1)
	require.Len(t, toks[0], e.Len())
	var rebuilt string
	for k, tk := range toks[0] {
		assert.Equal(t, e.IDs[k], tk.ID)
		if tk.Special {
			assert.Nil(t, tk.Start)
			continue
		}
		assert.Equal(t, "héllo world"[*tk.Start:*tk.Stop], tk.Text, "byte offsets")
		rebuilt += tk.Text
	}
	assert.Equal(t, "héllo world", rebuilt)
	code, b = post(t, ts, "/tokenize", `{"inputs": ["x"], "add_special_tokens": false}`)
	require.Equal(t, 200, code, "%s", b)
	for _, tk := range decode[[][]simpleToken](t, b)[0] {
		assert.False(t, tk.Special)
	}
}

// TestErrorsAreJSON: every refusal is TEI's {"error", "error_type"} with
// its status: 400 for a body that is not JSON, 422 for bad input, 400 for
// an empty one, 424 for a route the model's task cannot serve, 413 past the
// body limit, 404 and 405 for unknown routes. (The /v1 routes answer
// OpenAI's shape: TestOpenAIErrors.)
func TestErrorsAreJSON(t *testing.T) {
	_, ts := newServer(t, Config{Models: []ModelSpec{{Name: "sst2", Source: shipped}}, MaxClientBatchSize: 2, MaxBodyBytes: 4000})
	long := strings.Repeat("word ", 600)
	for _, c := range []struct {
		route, body string
		status      int
		has         string
	}{
		{"/embed", `{bad`, 400, "invalid JSON"},
		{"/embed", ``, 400, "empty request body"},
		{"/embed", `{"inputs": "a"} {"inputs": "b"}`, 400, "more than one value"},
		{"/embed", `{"inputs": "a"`, 400, "invalid JSON"},
		{"/embed", `{}`, 422, "`inputs` is required"},
		{"/embed", `{"inputs": []}`, 400, "cannot be empty"},
		{"/embed", `{"inputs": 7}`, 422, "a string or a list of strings"},
		{"/embed", `{"inputs": ["a", "b", "c"]}`, 422, "maximum allowed batch size 2"},
		{"/embed", `{"inputs": "` + long[:3000] + `"}`, 422, "at most 512 tokens (the model's maximum input length); given: 603"},
		{"/embed", `{"inputs": "a", "model": "nope"}`, 422, `model "nope" is not served here`},
		{"/embed", `{"inputs": "` + strings.Repeat("x", 5000) + `"}`, 413, "larger than 4000 bytes"},
		{"/embed", "{\"inputs\": \"bad \xff utf-8\"}", 400, "not valid UTF-8"},
		{"/predict", `{"inputs": [["a", "b", "c"]]}`, 422, "batch item 0"},
		{"/predict", `{"inputs": ["a", "b", "c"]}`, 422, "a list of strings is one input"},
		{"/predict", `{"inputs": null}`, 422, "`inputs` is required"},
		{"/rerank", `{"query": "q", "texts": ["a"]}`, 424, "needs a reranker"},
		{"/qa", `{"question": "q", "context": "c"}`, 424, "needs a question answering model"},
		{"/nope", `{}`, 404, "no route POST /nope"},
	} {
		code, b := post(t, ts, c.route, c.body)
		assert.Equal(t, c.status, code, "%s %.60s: %s", c.route, c.body, b)
		e := decode[errorBody](t, b)
		assert.Contains(t, e.Error, c.has, "%s %.60s", c.route, c.body)
		assert.NotEmpty(t, e.ErrorType)
	}
	code, b := post(t, ts, "/embed", `{"inputs": "`+long[:3000]+`", "truncate": true}`)
	assert.Equal(t, 200, code, "%s", b)
	resp, err := http.Get(ts.URL + "/embed")
	require.NoError(t, err)
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, 405, resp.StatusCode, "%s", b)
	assert.Contains(t, decode[errorBody](t, b).Error, "POST")
}

// TestOverloadAndDrain: MaxConcurrentRequests counts the inputs in flight,
// as TEI's permits: a request whose inputs do not all fit gets 429
// (Overloaded) whole, one that fits runs, and the routes without inference
// take none; while draining, requests and /health get 503 with
// "Connection: close".
func TestOverloadAndDrain(t *testing.T) {
	s, ts := newServer(t, Config{Models: []ModelSpec{{Name: "sst2", Source: shipped}}, MaxConcurrentRequests: 3})
	require.NoError(t, s.permits.take(2))
	code, b := post(t, ts, "/embed", `{"inputs": ["a", "b"]}`)
	assert.Equal(t, 429, code, "two inputs, one permit free")
	assert.Equal(t, errOverloaded, decode[errorBody](t, b).ErrorType)
	assert.Contains(t, decode[errorBody](t, b).Error, "--max-concurrent-requests")
	code, b = post(t, ts, "/embed", `{"inputs": "a"}`)
	assert.Equal(t, 200, code, "one input, one permit free: %s", b)
	assert.Equal(t, 2, s.permits.inUse(), "the request gave its permit back")
	require.NoError(t, s.permits.take(1))
	code, _ = post(t, ts, "/predict", `{"inputs": "a"}`)
	assert.Equal(t, 429, code, "none free")
	code, b = post(t, ts, "/tokenize", `{"inputs": "a"}`)
	assert.Equal(t, 200, code, "/tokenize takes no permit, as in TEI: %s", b)
	s.permits.give(3)
	code, b = post(t, ts, "/embed", `{"inputs": ["a", "b", "c"]}`)
	assert.Equal(t, 200, code, "three inputs, three free: %s", b)
	code, _ = post(t, ts, "/embed", `{"inputs": ["a", "b", "c", "d"]}`)
	assert.Equal(t, 429, code, "more inputs than the bound")
	assert.Equal(t, 0, s.permits.inUse())

	s.draining.Store(true)
	resp, err := http.Post(ts.URL+"/predict", "application/json", strings.NewReader(`{"inputs": "a"}`))
	require.NoError(t, err)
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, 503, resp.StatusCode)
	assert.Equal(t, errUnhealthy, decode[errorBody](t, b).ErrorType)
	assert.True(t, resp.Close, "Connection: close while draining")
	resp, err = http.Get(ts.URL + "/health")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 503, resp.StatusCode)
	s.draining.Store(false)
}

// TestPanicsAreContained: a panic in a handler answers 500 and one in a
// batch fails that batch's jobs; the server and its instance go on.
func TestPanicsAreContained(t *testing.T) {
	s, ts := newServer(t, Config{Models: []ModelSpec{{Name: "sst2", Source: shipped}}})
	h := s.wrap("/boom", false, func(http.ResponseWriter, *http.Request) error { panic("boom") })
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("POST", "/boom", nil))
	assert.Equal(t, 500, rec.Code)
	assert.Contains(t, decode[errorBody](t, rec.Body.Bytes()).Error, "boom")

	err := s.sched.submit(&job{ctx: context.Background(), m: s.models[0], run: func() error { panic("in a batch") }}, false)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "in a batch")
	code, b := post(t, ts, "/predict", `{"inputs": "still serving"}`)
	assert.Equal(t, 200, code, "%s", b)
	assert.Equal(t, 2.0, counterValue(t, ts, "int8bert_panics_total"))
}

// counterValue reads an unlabelled series from /metrics.
func counterValue(t *testing.T, ts *httptest.Server, name string) float64 {
	t.Helper()
	resp, err := http.Get(ts.URL + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			var f float64
			_, err := fmt.Sscan(v, &f)
			require.NoError(t, err)
			return f
		}
	}
	t.Fatalf("/metrics has no %s", name)
	return 0
}

// TestConcurrentRequestsAreBatched: requests sent together to one
// instance are answered as if alone, in fewer batches than requests, and
// every route is counted in /metrics.
func TestConcurrentRequestsAreBatched(t *testing.T) {
	s, ts := newServer(t, Config{Models: []ModelSpec{{Name: "sst2", Source: shipped}}, BatchWindow: 20 * time.Millisecond})
	ctx := context.Background()
	p := s.models[0].p
	texts := make([]string, 48)
	for i := range texts {
		texts[i] = strings.Repeat("a fine film ", 1+i%7)
	}
	want, err := p.Classify(ctx, texts, models.ClassifyOptions{})
	require.NoError(t, err)
	// Hold the only instance so that the requests queue up behind it.
	release := make(chan struct{})
	held := make(chan struct{})
	go s.sched.submit(&job{ctx: ctx, m: s.models[0], run: func() error { close(held); <-release; return nil }}, false)
	<-held
	var wg sync.WaitGroup
	got := make([][]prediction, len(texts))
	for i := range texts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			js, _ := json.Marshal(map[string]any{"inputs": texts[i]})
			code, b := post(t, ts, "/predict", string(js))
			if assert.Equal(t, 200, code, "%s", b) {
				got[i] = decode[[]prediction](t, b)
			}
		}()
	}
	require.Eventually(t, func() bool {
		s.sched.mu.Lock()
		defer s.sched.mu.Unlock()
		return len(s.sched.queue) == len(texts)
	}, 10*time.Second, time.Millisecond, "every request queued")
	close(release)
	wg.Wait()
	for i := range texts {
		require.NotNil(t, got[i])
		assert.Equal(t, want[i].Label, got[i][0].Label)
		assert.InDelta(t, want[i].Score, got[i][0].Score, 1e-5)
	}
	batches := histogramCount(t, ts, "int8bert_batch_size")
	assert.Less(t, batches, float64(len(texts)/4), "48 queued requests ran in a few batches")
	assert.Equal(t, float64(len(texts)), counterLabelled(t, ts, `int8bert_requests_total{route="/predict",status="200"}`))
}

func histogramCount(t *testing.T, ts *httptest.Server, name string) float64 {
	return counterValue(t, ts, name+"_count")
}

func counterLabelled(t *testing.T, ts *httptest.Server, series string) float64 {
	return counterValue(t, ts, series)
}

// TestSeveralModels: the "model" field picks a model; /info lists them
// with their tasks and the TEI fields of the default.
func TestSeveralModels(t *testing.T) {
	qa := encodertest.WordFolder(t, sharedModel(t, "golden/models/bert-qa"), false)
	rr := encodertest.WordFolder(t, sharedModel(t, "golden/heads/xlm-roberta-crossencoder"), true)
	_, ts := newServer(t, Config{Models: []ModelSpec{{Name: "sst2", Source: shipped}, {Name: "qa", Source: qa}, {Name: "rr", Source: rr}}})

	code, b := post(t, ts, "/qa", `{"model": "qa", "question": "w5 w6", "context": "w10 w11 w12 w13 w14", "top_k": 2}`)
	require.Equal(t, 200, code, "%s", b)
	answers := decode[[]models.Answer](t, b)
	require.Len(t, answers, 2)
	for _, a := range answers {
		assert.Equal(t, "w10 w11 w12 w13 w14"[a.Start:a.End], a.Text)
	}
	code, b = post(t, ts, "/rerank", `{"model": "rr", "query": "w5 w6", "texts": ["w7 w8", "w9", "w10 w11 w12"], "return_text": true}`)
	require.Equal(t, 200, code, "%s", b)
	ranks := decode[[]rank](t, b)
	require.Len(t, ranks, 3)
	seen := map[int]bool{}
	for i, r := range ranks {
		seen[r.Index] = true
		require.NotNil(t, r.Text)
		assert.Equal(t, []string{"w7 w8", "w9", "w10 w11 w12"}[r.Index], *r.Text)
		assert.True(t, r.Score >= 0 && r.Score <= 1, "sigmoid score")
		if i > 0 {
			assert.GreaterOrEqual(t, ranks[i-1].Score, r.Score, "best first")
		}
	}
	assert.Len(t, seen, 3)
	code, b = post(t, ts, "/predict", `{"model": "qa", "inputs": "w5"}`)
	assert.Equal(t, 424, code, "%s", b)
	code, b = post(t, ts, "/predict", `{"model": "qa", "inputs": []}`)
	assert.Equal(t, 400, code, "TEI checks an empty list before the model's type: %s", b)
	code, b = post(t, ts, "/embed", `{"model": "qa", "inputs": "w5 w6"}`)
	require.Equal(t, 200, code, "%s", b)
	assert.Len(t, decode[[][]float32](t, b)[0], 64, "the QA model's hidden size")

	resp, err := http.Get(ts.URL + "/info")
	require.NoError(t, err)
	defer resp.Body.Close()
	var info infoBody
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&info))
	assert.Equal(t, shipped, info.ModelID)
	assert.Contains(t, info.ModelType, "classifier")
	require.Len(t, info.Models, 3)
	assert.Equal(t, []string{"classifier", "question-answering", "reranker"}, []string{info.Models[0].Task, info.Models[1].Task, info.Models[2].Task})
	assert.Equal(t, 1, info.Instances)
	assert.NotEmpty(t, info.CPU.Tier)
	assert.Equal(t, 512, info.MaxInputLength)
}

// TestConfigErrors: bad settings are errors that say what is wrong.
func TestConfigErrors(t *testing.T) {
	for _, c := range []struct {
		cfg Config
		has string
	}{
		{Config{}, "no model"},
		{Config{Models: []ModelSpec{{"a", shipped}, {"a", shipped}}}, `two models are named "a"`},
		{Config{Models: []ModelSpec{{"a", shipped}}, Pooling: "max"}, `pooling "max"`},
		// TEI's --pooling takes clap's spelling of Pool::LastToken only.
		{Config{Models: []ModelSpec{{"a", shipped}}, Pooling: "last_token"}, `pooling "last_token"`},
		{Config{Models: []ModelSpec{{"a", shipped}}, Pooling: "lasttoken"}, `pooling "lasttoken"`},
		{Config{Models: []ModelSpec{{"a", shipped}}, MaxBatchTokens: -1}, "max batch tokens -1"},
		{Config{Models: []ModelSpec{{"a", shipped}}, Instances: -1}, "instances -1"},
		// TEI refuses a model longer than the batch budget without auto-truncate.
		{Config{Models: []ModelSpec{{"a", shipped}}, MaxBatchTokens: 8}, "exceeds the max batch tokens (8)"},
		{Config{Models: []ModelSpec{{"a", "./no-such-model"}}}, "no-such-model"},
	} {
		_, err := New(context.Background(), c.cfg)
		if assert.Error(t, err, "%+v", c.cfg) {
			assert.Contains(t, err.Error(), c.has)
		}
	}
	for in, want := range map[string]ModelSpec{"x=dir": {"x", "dir"}, "org/model": {"model", "org/model"}, "./a/b/": {"b", "./a/b/"}} {
		got, err := ParseModelSpec(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for _, in := range []string{"", "=dir", "x=", "a b=dir"} {
		_, err := ParseModelSpec(in)
		assert.Error(t, err, "%q", in)
	}
}

// TestBodyLimitCountsBytes: a body at the limit is read, one byte more is
// 413.
func TestBodyLimitCountsBytes(t *testing.T) {
	_, ts := newServer(t, Config{Models: []ModelSpec{{Name: "sst2", Source: shipped}}, MaxBodyBytes: 64})
	body := `{"inputs": "` + strings.Repeat("a", 64-14) + `"}`
	require.Len(t, body, 64)
	code, b := post(t, ts, "/embed", body)
	assert.Equal(t, 200, code, "%s", b)
	code, _ = post(t, ts, "/embed", body+" ")
	assert.Equal(t, 413, code)
}

// TestMaxBatchTokensCutsTheModel: with auto-truncate, a model longer than
// the batch budget serves inputs cut to the budget, as TEI (lib.rs).
func TestMaxBatchTokensCutsTheModel(t *testing.T) {
	_, ts := newServer(t, Config{Models: []ModelSpec{{Name: "sst2", Source: shipped}}, MaxBatchTokens: 8, AutoTruncate: true})
	code, b, _ := get(t, ts, "GET", "/info")
	require.Equal(t, 200, code, "%s", b)
	assert.Equal(t, 8, decode[struct {
		MaxInputLength int `json:"max_input_length"`
	}](t, b).MaxInputLength)
	code, b = post(t, ts, "/embed", `{"inputs": "a b c d e f g h i j k l m n o p", "truncate": true}`)
	require.Equal(t, 200, code, "%s", b)
	code, b = post(t, ts, "/embed", `{"inputs": "a b c d e f g h i j k l m n o p", "truncate": false}`)
	assert.Equal(t, 422, code, "%s", b)
	assert.Contains(t, string(b), "at most 8 tokens")
}

// TestInfoHasTEIFields: /info carries every field of TEI's Info (lib.rs,
// read from the vendored source), with TEI's nulls: max_batch_requests
// when the batch has no bound of requests, model_sha for a folder.
func TestInfoHasTEIFields(t *testing.T) {
	src, err := os.ReadFile("testdata/tei-v1.9.3/lib.rs")
	require.NoError(t, err)
	body := string(src)
	start := strings.Index(body, "pub struct Info {")
	require.GreaterOrEqual(t, start, 0)
	body = body[start : start+strings.Index(body[start:], "\n}")]
	var fields []string
	for _, m := range regexp.MustCompile(`(?m)^\s*pub (\w+):`).FindAllStringSubmatch(body, -1) {
		fields = append(fields, m[1])
	}
	require.Contains(t, fields, "served_model_name")
	for _, c := range []struct {
		maxReq int
		want   any
	}{{-1, nil}, {7, float64(7)}} {
		_, ts := newServer(t, Config{Models: []ModelSpec{{Name: "hub/name", Source: shipped}}, MaxBatchRequests: c.maxReq})
		code, b, _ := get(t, ts, "GET", "/info")
		require.Equal(t, 200, code, "%s", b)
		var got map[string]any
		require.NoError(t, json.Unmarshal(b, &got))
		for _, f := range fields {
			assert.Contains(t, got, f, "TEI's Info field %s", f)
		}
		assert.Equal(t, c.want, got["max_batch_requests"])
		assert.Equal(t, "hub/name", got["served_model_name"])
		assert.Nil(t, got["model_sha"], "a folder has no hub commit")
	}
	assert.Equal(t, "0123456789abcdef0123456789abcdef01234567",
		snapshotCommit("/c/models--a--b/snapshots/0123456789abcdef0123456789abcdef01234567"))
	assert.Empty(t, snapshotCommit("/c/models--a--b/snapshots/main"))
	assert.Empty(t, snapshotCommit(shipped))
}
