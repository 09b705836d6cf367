package serve

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/int8bert/int8bert/models/encoder/encodertest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// lockedBuffer collects a logger's output from many goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// embeddingFolder is the tiny golden BERT as a model folder whose word
// "wN" is id N (an embedding model: no head).
func embeddingFolder(t *testing.T) string {
	return encodertest.WordFolder(t, sharedModel(t, "golden/models/bert-base"), false)
}

// openAIBody is the OpenAI response, with the embeddings as JSON.
type openAIBody struct {
	Object string `json:"object"`
	Model  string `json:"model"`
	Data   []struct {
		Object    string          `json:"object"`
		Embedding json.RawMessage `json:"embedding"`
		Index     int             `json:"index"`
	} `json:"data"`
	Usage openAIUsage `json:"usage"`
}

// vectors are the response's embeddings, floats or base64.
func (o openAIBody) vectors(t *testing.T) [][]float32 {
	t.Helper()
	out := make([][]float32, len(o.Data))
	for i, d := range o.Data {
		require.Equal(t, i, d.Index)
		require.Equal(t, "embedding", d.Object)
		var s string
		if json.Unmarshal(d.Embedding, &s) == nil {
			raw, err := base64.StdEncoding.DecodeString(s)
			require.NoError(t, err)
			require.Zero(t, len(raw)%4)
			v := make([]float32, len(raw)/4)
			for k := range v {
				v[k] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*k:]))
			}
			out[i] = v
			continue
		}
		require.NoError(t, json.Unmarshal(d.Embedding, &out[i]), "%s", d.Embedding)
	}
	return out
}

func norm(v []float32) float64 {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	return math.Sqrt(s)
}

// TestOpenAIEmbeddings: /v1/embeddings (and TEI's /embeddings) answer
// /embed's vectors in OpenAI's shape. "model" picks a served name or
// source; any other string is answered by the default model with a
// logged warning. dimensions cuts and then normalises, encoding_format
// base64 is the little-endian float32 bytes, user is accepted, and usage
// counts the tokens.
func TestOpenAIEmbeddings(t *testing.T) {
	dir := embeddingFolder(t)
	logs := &lockedBuffer{}
	_, ts := newServer(t, Config{Models: []ModelSpec{{Name: "bge", Source: dir}, {Name: "sst2", Source: shipped}},
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	texts := []string{"w5 w6 w7", "w8", "w9 w10"}
	js, _ := json.Marshal(map[string]any{"inputs": texts})
	code, b := post(t, ts, "/embed", string(js))
	require.Equal(t, 200, code, "%s", b)
	want := decode[[][]float32](t, b)
	js, _ = json.Marshal(map[string]any{"inputs": texts, "normalize": false})
	code, b = post(t, ts, "/embed", string(js))
	require.Equal(t, 200, code, "%s", b)
	raw := decode[[][]float32](t, b)
	code, b = post(t, ts, "/tokenize", string(js))
	require.Equal(t, 200, code, "%s", b)
	tokens := 0
	for _, toks := range decode[[][]simpleToken](t, b) {
		tokens += len(toks)
	}

	openai := func(route string, req map[string]any) openAIBody {
		t.Helper()
		js, _ := json.Marshal(req)
		code, b := post(t, ts, route, string(js))
		require.Equal(t, 200, code, "%s %s: %s", route, js, b)
		return decode[openAIBody](t, b)
	}
	for _, route := range []string{"/v1/embeddings", "/embeddings"} {
		for _, format := range []any{nil, "float", "base64"} {
			req := map[string]any{"input": texts, "model": "bge", "user": "user-1"}
			if format != nil {
				req["encoding_format"] = format
			}
			got := openai(route, req)
			assert.Equal(t, "list", got.Object)
			assert.Equal(t, "bge", got.Model)
			assert.Equal(t, openAIUsage{PromptTokens: tokens, TotalTokens: tokens}, got.Usage)
			if format == "base64" {
				var s string
				assert.NoError(t, json.Unmarshal(got.Data[0].Embedding, &s), "base64 is a string")
			}
			vecs := got.vectors(t)
			require.Len(t, vecs, len(texts))
			for i := range vecs {
				assert.InDeltaSlice(t, want[i], vecs[i], 1e-6, "%s %v: text %d", route, format, i)
			}
		}
	}

	// One string is one embedding.
	got := openai("/v1/embeddings", map[string]any{"input": texts[1], "model": "bge"})
	require.Len(t, got.vectors(t), 1)
	assert.InDeltaSlice(t, want[1], got.vectors(t)[0], 1e-6)

	// Matryoshka: the first n values of the raw embedding, normalised.
	for _, n := range []int{1, 8, 63, 64} {
		got := openai("/v1/embeddings", map[string]any{"input": texts, "dimensions": n})
		for i, v := range got.vectors(t) {
			require.Len(t, v, n)
			assert.InDelta(t, 1, norm(v), 1e-5)
			cut := raw[i][:n]
			for k := range v {
				assert.InDelta(t, float64(cut[k])/norm(cut), v[k], 1e-5, "dimensions %d: text %d value %d", n, i, k)
			}
		}
	}

	// model: a served name or source picks that model; anything else is
	// the default, with a warning naming it.
	got = openai("/v1/embeddings", map[string]any{"input": "w5", "model": "sst2"})
	assert.Equal(t, "sst2", got.Model)
	got = openai("/v1/embeddings", map[string]any{"input": "w5", "model": shipped})
	assert.Equal(t, "sst2", got.Model)
	assert.NotContains(t, logs.String(), "not served", "served names and sources log nothing")
	for _, name := range []string{"any/hub-id", "text-embedding-3-small", ""} {
		got = openai("/v1/embeddings", map[string]any{"input": texts[:1], "model": name})
		assert.Equal(t, "bge", got.Model, "model %q", name)
		assert.InDeltaSlice(t, want[0], got.vectors(t)[0], 1e-6)
	}
	got = openai("/v1/embeddings", map[string]any{"input": texts[:1]})
	assert.Equal(t, "bge", got.Model, "no model")
	assert.Contains(t, logs.String(), "any/hub-id")
	assert.Contains(t, logs.String(), "text-embedding-3-small")
	assert.Equal(t, 2, strings.Count(logs.String(), "the requested model is not served"), "%s", logs.String())
}

// TestOpenAITokenIDs: /v1/embeddings takes token ids as TEI's Input (a
// list of ints, or a list of lists and strings), as /embed does; the
// server's default prompt applies to texts and ids, as TEI applies it
// there; ids outside the vocabulary are 422 in OpenAI's shape.
func TestOpenAITokenIDs(t *testing.T) {
	dir := wordModel(t, "golden/models/bert-base", false, promptsJSON)
	cfg := Config{Models: []ModelSpec{{Name: "e", Source: dir}}, Load: wordOptions(t)}
	_, plain := newServer(t, cfg)
	cfg.DefaultPromptName = "query"
	_, named := newServer(t, cfg)
	openai := func(ts *httptest.Server, input string) openAIBody {
		t.Helper()
		code, b := post(t, ts, "/v1/embeddings", `{"model": "e", "input": `+input+`}`)
		require.Equal(t, 200, code, "%s: %s", input, b)
		return decode[openAIBody](t, b)
	}

	texts := embedOK(t, plain, `{"inputs": ["w5 w6 w7", "w9"]}`)
	one := openai(plain, `[101, 5, 6, 7, 102]`)
	sameVectors(t, texts[:1], one.vectors(t), "a list of ints is one input")
	assert.Equal(t, openAIUsage{PromptTokens: 5, TotalTokens: 5}, one.Usage)
	sameVectors(t, embedOK(t, plain, `{"inputs": [5, 6, 7]}`), openai(plain, `[5, 6, 7]`).vectors(t), "ids as given, as /embed")
	lists := openai(plain, `[[101, 5, 6, 7, 102], [101, 9, 102]]`)
	sameVectors(t, texts, lists.vectors(t), "a list of lists")
	assert.Equal(t, openAIUsage{PromptTokens: 8, TotalTokens: 8}, lists.Usage)
	sameVectors(t, texts, openai(plain, `[[101, 5, 6, 7, 102], "w9"]`).vectors(t), "ids and texts")

	query := embedOK(t, plain, `{"inputs": ["w5 w6 w7", "w9"], "prompt_name": "query"}`)
	sameVectors(t, query, openai(named, `["w5 w6 w7", "w9"]`).vectors(t), "the default prompt applies to texts")
	sameVectors(t, query, openai(named, `[[101, 5, 6, 7, 102], [9]]`).vectors(t), "and to ids, decoded and tokenized again")

	code, b := post(t, plain, "/v1/embeddings", `{"input": [5, 1000]}`)
	assert.Equal(t, 422, code, "%s", b)
	var e openAIErrorBody
	require.NoError(t, json.Unmarshal(b, &e), "%s", b)
	assert.Contains(t, e.Error.Message, "outside the vocabulary")
	assert.Equal(t, "invalid_request_error", e.Error.Type)
	for _, bad := range []string{`[-1]`, `[1.5]`, `[1, "a"]`, `[[1], null]`} {
		code, b := post(t, plain, "/v1/embeddings", `{"input": `+bad+`}`)
		assert.Equal(t, 422, code, "%s: %s", bad, b)
	}
}

// TestOpenAIErrors: the /v1 routes answer OpenAI's error shape, with
// the message, OpenAI's type, the field at fault and TEI's error type as
// the code; unknown /v1 paths and methods too.
func TestOpenAIErrors(t *testing.T) {
	_, ts := newServer(t, Config{Models: []ModelSpec{{Name: "sst2", Source: shipped}}, MaxClientBatchSize: 2})
	type detail struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	}
	for _, c := range []struct {
		route, body string
		status      int
		has, param  string
	}{
		{"/v1/embeddings", `{"input": "a", "encoding_format": "int8"}`, 422, `encoding_format "int8"`, "encoding_format"},
		{"/v1/embeddings", `{"input": "a", "encoding_format": ""}`, 422, `encoding_format ""`, "encoding_format"},
		{"/v1/embeddings", `{"input": "a", "dimensions": 0}`, 422, "`dimensions` should be positive", "dimensions"},
		{"/v1/embeddings", `{"input": "a", "dimensions": -3}`, 422, "`dimensions` should be positive", "dimensions"},
		{"/v1/embeddings", `{"input": "a", "dimensions": 1000}`, 422, "smaller than the maximum embedding dimension", "dimensions"},
		{"/v1/embeddings", `{"input": ["a", "b", "c"]}`, 422, "maximum allowed batch size 2", "input"},
		{"/embeddings", `{"model": "m"}`, 422, "`input` is required", "input"},
		{"/v1/embeddings", `{"input": []}`, 400, "`inputs` cannot be empty", ""}, // one input of no ids, as TEI reads []
		{"/v1/embeddings", `{"input": "a", "user": 5}`, 422, "invalid JSON", ""},
		{"/v1/embeddings", `{bad`, 400, "invalid JSON", ""}, // not JSON: 400, as TEI
		{"/v1/models", `{}`, 404, "no route POST /v1/models", ""},
	} {
		code, b := post(t, ts, c.route, c.body)
		assert.Equal(t, c.status, code, "%s %s: %s", c.route, c.body, b)
		var e struct {
			Error *detail `json:"error"`
		}
		require.NoError(t, json.Unmarshal(b, &e), "%s", b)
		require.NotNil(t, e.Error, "%s", b)
		assert.Contains(t, e.Error.Message, c.has, "%s %s", c.route, c.body)
		assert.Equal(t, "invalid_request_error", e.Error.Type)
		require.NotNil(t, e.Error.Code)
		if strings.Contains(c.has, "cannot be empty") {
			assert.Equal(t, "empty", *e.Error.Code, "TEI's Empty")
		} else {
			assert.Equal(t, "validation", *e.Error.Code)
		}
		if c.param == "" {
			assert.Nil(t, e.Error.Param, "%s", b)
		} else if assert.NotNil(t, e.Error.Param, "%s", b) {
			assert.Equal(t, c.param, *e.Error.Param)
		}
	}
	resp, err := http.Get(ts.URL + "/v1/embeddings")
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, 405, resp.StatusCode)
	assert.Equal(t, "POST", resp.Header.Get("Allow"))
	assert.Contains(t, string(b), `"error":{"message":"GET /v1/embeddings: use POST`)
}

// openAISDK finds npm openai for node: through NODE_PATH as it is, or
// installed (openai@7.55.0, the version of testdata/openai-7.55.0) into a
// temporary folder; it skips the test, saying why, without node or the
// package.
func openAISDK(t *testing.T) (node string, env []string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("TestOpenAISDK: node is not installed: the OpenAI JavaScript SDK cannot run")
	}
	resolve := func(env []string) (string, bool) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, node, "-e", `process.stdout.write(require("openai/version").VERSION)`)
		cmd.Env = env
		out, err := cmd.Output()
		return string(out), err == nil
	}
	env = os.Environ()
	if v, ok := resolve(env); ok {
		t.Logf("npm openai %s through NODE_PATH=%s", v, os.Getenv("NODE_PATH"))
		return node, env
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Skip("TestOpenAISDK: npm openai is not on NODE_PATH and npm is not installed")
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "install", "--no-audit", "--no-fund", "--prefer-offline",
		"--fetch-retries=0", "--fetch-timeout=30000", "--prefix", dir, "openai@7.55.0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Skipf("TestOpenAISDK: npm openai is not on NODE_PATH and npm install openai@7.55.0 failed (no registry?): %v: %.500s", err, out)
	}
	env = append(env, "NODE_PATH="+filepath.Join(dir, "node_modules"))
	v, ok := resolve(env)
	require.True(t, ok, "npm install openai@7.55.0 succeeded but node cannot load it")
	t.Logf("npm openai %s installed into %s", v, dir)
	return node, env
}

const sdkScript = `
const { OpenAI } = require("openai");
const client = new OpenAI({ baseURL: process.argv[2] + "/v1", apiKey: "sk-any", maxRetries: 0 });
(async () => {
  const out = {};
  const def = await client.embeddings.create({ model: "any/hub-id", input: ["w5 w6", "w7"] });
  out.model = def.model;
  out.usage = def.usage;
  out.default = def.data.map((d) => Array.from(d.embedding));
  const one = await client.embeddings.create({ model: "bge", input: [101, 5, 6, 102] });
  const many = await client.embeddings.create({ model: "bge", input: [[101, 5, 6, 102], [101, 7, 102]] });
  out.ids = one.data.concat(many.data).map((d) => Array.from(d.embedding));
  const f = await client.embeddings.create({ model: "text-embedding-3-small", input: "w5 w6", encoding_format: "float", dimensions: 8, user: "u" });
  out.float = f.data.map((d) => d.embedding);
  try {
    await client.embeddings.create({ model: "m", input: "w5", dimensions: 0 });
    out.error = "none";
  } catch (e) {
    out.error = { status: e.status, message: e.message, param: e.param, type: e.type, code: e.code };
  }
  process.stdout.write(JSON.stringify(out));
})().catch((e) => { console.error(e); process.exit(1); });
`

// TestOpenAISDK: the OpenAI JavaScript SDK's embeddings.create works
// unchanged against the server: a hub id as the model, its default
// base64 encoding decoded into the vectors /embed gives, token-id inputs,
// dimensions, and an error whose message the SDK shows.
func TestOpenAISDK(t *testing.T) {
	node, env := openAISDK(t)
	dir := embeddingFolder(t)
	_, ts := newServer(t, Config{Models: []ModelSpec{{Name: "bge", Source: dir}}})
	code, b := post(t, ts, "/embed", `{"inputs": ["w5 w6", "w7"]}`)
	require.Equal(t, 200, code, "%s", b)
	want := decode[[][]float32](t, b)

	script := filepath.Join(t.TempDir(), "sdk.js")
	require.NoError(t, os.WriteFile(script, []byte(sdkScript), 0o644))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script, ts.URL)
	cmd.Env = env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "%s", stderr.String())
	var got struct {
		Model   string      `json:"model"`
		Usage   openAIUsage `json:"usage"`
		Default [][]float32 `json:"default"`
		Float   [][]float32 `json:"float"`
		IDs     [][]float32 `json:"ids"`
		Error   struct {
			Status  int    `json:"status"`
			Message string `json:"message"`
			Param   string `json:"param"`
			Type    string `json:"type"`
			Code    string `json:"code"`
		} `json:"error"`
	}
	require.NoError(t, json.Unmarshal(out, &got), "%s", out)
	assert.Equal(t, "bge", got.Model)
	assert.Equal(t, openAIUsage{PromptTokens: 7, TotalTokens: 7}, got.Usage, "[CLS] w5 w6 [SEP] and [CLS] w7 [SEP]")
	require.Len(t, got.Default, 2)
	for i := range want {
		assert.InDeltaSlice(t, want[i], got.Default[i], 1e-6, "text %d", i)
	}
	require.Len(t, got.IDs, 3, "token ids: a list of ints, and a list of two lists")
	for i, w := range [][]float32{want[0], want[0], want[1]} {
		assert.InDeltaSlice(t, w, got.IDs[i], 1e-6, "token ids %d", i)
	}
	require.Len(t, got.Float, 1)
	require.Len(t, got.Float[0], 8)
	assert.InDelta(t, 1, norm(got.Float[0]), 1e-5)
	assert.Equal(t, 422, got.Error.Status)
	assert.Contains(t, got.Error.Message, "`dimensions` should be positive", "the SDK shows the server's message")
	assert.Equal(t, "dimensions", got.Error.Param)
	assert.Equal(t, "invalid_request_error", got.Error.Type)
}
