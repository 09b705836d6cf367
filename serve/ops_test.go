package serve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/int8bert/int8bert/models"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// teSource is one file of the vendored TEI v1.9.3 sources.
func teSource(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "tei-v1.9.3", rel))
	require.NoError(t, err)
	return string(b)
}

// block is the text of src from the first line holding start to the next
// line ending in end.
func block(t *testing.T, src, start, end string) string {
	t.Helper()
	i := strings.Index(src, start)
	require.GreaterOrEqual(t, i, 0, "TEI's server.rs has no %q", start)
	rest := src[i:]
	j := strings.Index(rest, end)
	require.GreaterOrEqual(t, j, 0)
	return rest[:j]
}

var routeRe = regexp.MustCompile(`\.route\(\s*"([^"]+)",\s*(get|post)\(`)

// teRoutes reads TEI's route table: the routes its API key guards and the
// public ones, as "METHOD PATH".
func teRoutes(t *testing.T) (guard, public []string) {
	src := teSource(t, "server.rs")
	read := func(b string) (out []string) {
		for _, m := range routeRe.FindAllStringSubmatch(b, -1) {
			out = append(out, strings.ToUpper(m[2])+" "+m[1])
		}
		return out
	}
	guard = read(block(t, src, "let mut routes = Router::new()", ";\n"))
	guard = append(guard, read(block(t, src, "routes = match &info.model_type", "};\n"))...)
	public = read(block(t, src, "let mut public_routes = Router::new()", ";\n"))
	require.NotEmpty(t, guard)
	require.NotEmpty(t, public)
	// The API key layer is applied to `routes` only, before the merge.
	require.Contains(t, src, "routes = routes.layer(axum::middleware::from_fn(auth));")
	return guard, public
}

// sendReq makes a request with the given headers and returns the response
// with its body read.
func sendReq(t *testing.T, ts *httptest.Server, method, path, body string, hdr ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, ts.URL+path, strings.NewReader(body))
	require.NoError(t, err)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	return resp, string(b)
}

// TestAPIKeyGuardsTEIRoutes: with an API key, every route TEI guards (read
// from its server.rs) answers a bare 401 without the exact
// "Bearer KEY", and TEI's public routes answer without it.
func TestAPIKeyGuardsTEIRoutes(t *testing.T) {
	guard, public := teRoutes(t)
	for _, r := range guard {
		method, path, _ := strings.Cut(r, " ")
		assert.True(t, guarded(httptest.NewRequest(method, path, nil)), "TEI guards %s", r)
	}
	for _, r := range public {
		method, path, _ := strings.Cut(r, " ")
		assert.False(t, guarded(httptest.NewRequest(method, path, nil)), "TEI's %s is public", r)
	}
	assert.False(t, guarded(httptest.NewRequest("GET", "/docs", nil)), "TEI merges /docs outside the guard")
	assert.False(t, guarded(httptest.NewRequest("POST", "/no-such-route", nil)), "a path no route serves is not guarded")

	_, ts := newServer(t, Config{Models: []ModelSpec{{Name: "sst2", Source: shipped}}, APIKey: "s3cret"})
	body := `{"inputs": "a fine film"}`
	for _, r := range guard {
		method, path, _ := strings.Cut(r, " ")
		for _, auth := range []string{"", "Bearer wrong", "bearer s3cret", "Bearer  s3cret", "s3cret", "Bearer s3cre"} {
			var hdr []string
			if auth != "" {
				hdr = []string{"Authorization", auth}
			}
			resp, b := sendReq(t, ts, method, path, body, hdr...)
			assert.Equal(t, 401, resp.StatusCode, "%s with %q", r, auth)
			assert.Empty(t, b, "TEI's 401 has no body")
			assert.Empty(t, resp.Header.Get("WWW-Authenticate"))
		}
		resp, b := sendReq(t, ts, method, path, body, "Authorization", "Bearer s3cret")
		assert.NotEqual(t, 401, resp.StatusCode, "%s with the key: %s", r, b)
	}
	// Any method of a guarded path is guarded (TEI's layer wraps the 405).
	resp, _ := sendReq(t, ts, "GET", "/embed", "")
	assert.Equal(t, 401, resp.StatusCode)
	resp, b := sendReq(t, ts, "POST", "/embed", body, "Authorization", "Bearer s3cret")
	assert.Equal(t, 200, resp.StatusCode, "%s", b)
	for _, r := range public {
		method, path, _ := strings.Cut(r, " ")
		resp, _ := sendReq(t, ts, method, path, "")
		assert.NotEqual(t, 401, resp.StatusCode, "%s is public", r)
	}
	resp, _ = sendReq(t, ts, "GET", "/health", "")
	assert.Equal(t, 200, resp.StatusCode)
	resp, _ = sendReq(t, ts, "GET", "/metrics", "")
	assert.Equal(t, 200, resp.StatusCode)

	// A key with an inner space is carried as it is.
	_, spaced := newServer(t, Config{Models: []ModelSpec{{Name: "sst2", Source: shipped}}, APIKey: "two words"})
	resp, b = sendReq(t, spaced, "POST", "/embed", body, "Authorization", "Bearer two words")
	assert.Equal(t, 200, resp.StatusCode, "%s", b)
	resp, _ = sendReq(t, spaced, "POST", "/embed", body, "Authorization", "Bearer two")
	assert.Equal(t, 401, resp.StatusCode)

	// No key: nothing is guarded.
	_, open := newServer(t, Config{Models: []ModelSpec{{Name: "sst2", Source: shipped}}})
	resp, b = sendReq(t, open, "POST", "/embed", body)
	assert.Equal(t, 200, resp.StatusCode, "%s", b)
}

// TestCORSAsTEI: CORS as TEI's tower-http layer: any origin when none is
// configured, only the listed ones otherwise; every OPTIONS request is a
// preflight answered 200 before the API key; Vary on every response.
func TestCORSAsTEI(t *testing.T) {
	src := teSource(t, "server.rs")
	require.Contains(t, src, ".allow_methods([Method::GET, Method::POST])")
	require.Contains(t, src, ".allow_headers([http::header::CONTENT_TYPE])")
	require.Contains(t, src, "let allow_origin = allow_origin.unwrap_or(AllowOrigin::any());")

	preflight := func(ts *httptest.Server, path, origin string) *http.Response {
		resp, b := sendReq(t, ts, "OPTIONS", path, "", "Origin", origin, "Access-Control-Request-Method", "POST",
			"Access-Control-Request-Headers", "content-type")
		assert.Equal(t, 200, resp.StatusCode)
		assert.Empty(t, b)
		assert.Equal(t, "GET,POST", resp.Header.Get("Access-Control-Allow-Methods"))
		assert.Equal(t, "content-type", resp.Header.Get("Access-Control-Allow-Headers"))
		assert.Equal(t, []string{corsVary}, resp.Header.Values("Vary"))
		return resp
	}
	body := `{"inputs": "a fine film"}`

	// None configured: any origin, even without an Origin header.
	_, ts := newServer(t, Config{Models: []ModelSpec{{Name: "sst2", Source: shipped}}})
	assert.Equal(t, "*", preflight(ts, "/embed", "https://a.example").Header.Get("Access-Control-Allow-Origin"))
	resp, b := sendReq(t, ts, "POST", "/embed", body, "Origin", "https://a.example")
	assert.Equal(t, 200, resp.StatusCode, "%s", b)
	assert.Equal(t, "*", resp.Header.Get("Access-Control-Allow-Origin"))
	assert.Equal(t, corsVary, resp.Header.Get("Vary"))
	resp, _ = sendReq(t, ts, "GET", "/health", "")
	assert.Equal(t, "*", resp.Header.Get("Access-Control-Allow-Origin"))
	assert.Empty(t, resp.Header.Get("Access-Control-Allow-Methods"), "methods only on a preflight")

	// A list: the request's origin when listed, nothing otherwise; with
	// an API key the preflight needs none and a 401 carries CORS.
	_, ts = newServer(t, Config{Models: []ModelSpec{{Name: "sst2", Source: shipped}},
		CORSAllowOrigin: []string{"https://a.example", "http://b.example:8080"}, APIKey: "k"})
	assert.Equal(t, "https://a.example", preflight(ts, "/embed", "https://a.example").Header.Get("Access-Control-Allow-Origin"))
	assert.Empty(t, preflight(ts, "/embed", "https://evil.example").Header.Values("Access-Control-Allow-Origin"))
	assert.Empty(t, preflight(ts, "/embed", "HTTPS://A.EXAMPLE").Header.Values("Access-Control-Allow-Origin"), "origins match byte for byte")
	preflight(ts, "/no-such-route", "https://a.example")
	resp, _ = sendReq(t, ts, "POST", "/embed", body, "Origin", "http://b.example:8080", "Authorization", "Bearer k")
	assert.Equal(t, 200, resp.StatusCode)
	assert.Equal(t, "http://b.example:8080", resp.Header.Get("Access-Control-Allow-Origin"))
	resp, _ = sendReq(t, ts, "POST", "/embed", body, "Origin", "https://evil.example", "Authorization", "Bearer k")
	assert.Equal(t, 200, resp.StatusCode, "CORS is the browser's to enforce: the server answers")
	assert.Empty(t, resp.Header.Values("Access-Control-Allow-Origin"))
	assert.Equal(t, corsVary, resp.Header.Get("Vary"))
	resp, _ = sendReq(t, ts, "POST", "/embed", body, "Origin", "https://a.example")
	assert.Equal(t, 401, resp.StatusCode)
	assert.Equal(t, "https://a.example", resp.Header.Get("Access-Control-Allow-Origin"))

	// "*" among the origins: any.
	_, ts = newServer(t, Config{Models: []ModelSpec{{Name: "sst2", Source: shipped}}, CORSAllowOrigin: []string{"https://a.example", "*"}})
	assert.Equal(t, "*", preflight(ts, "/embed", "https://z.example").Header.Get("Access-Control-Allow-Origin"))
}

// TestOpsConfigErrors: an origin or a key no header can carry is a
// start-up error.
func TestOpsConfigErrors(t *testing.T) {
	base := Config{Models: []ModelSpec{{"a", shipped}}}
	for _, c := range []struct {
		mod func(*Config)
		has string
	}{
		{func(c *Config) { c.CORSAllowOrigin = []string{"https://a\nb"} }, "CORS allowed origin"},
		{func(c *Config) { c.APIKey = "key " }, "white space"},
		{func(c *Config) { c.APIKey = "\tkey" }, "white space"},
		{func(c *Config) { c.APIKey = "k\x00ey" }, "control character"},
	} {
		cfg := base
		c.mod(&cfg)
		_, err := cfg.withDefaults()
		if assert.Error(t, err) {
			assert.Contains(t, err.Error(), c.has)
		}
	}
	cfg := base
	cfg.APIKey, cfg.CORSAllowOrigin = "k-1.x_Y two", []string{"*", "https://a.example"}
	_, err := cfg.withDefaults()
	assert.NoError(t, err)
}

// teMetric is one series TEI registers: its kind, name and label.
type teMetric struct{ kind, name, label, value string }

var teMetricRe = regexp.MustCompile(`(counter|histogram|gauge)!\(\s*"(te_[a-z_]+)"\s*(?:,\s*"([a-z_]+)"\s*=>\s*"([a-z_]+)"\s*)?\)`)

// teMetricsFromSources reads every te_* series TEI's router and core
// register, with their labels.
func teMetricsFromSources(t *testing.T) []teMetric {
	seen := map[teMetric]bool{}
	for _, f := range []string{"server.rs", "lib.rs", "core/src/infer.rs", "core/src/queue.rs", "core/src/tokenization.rs"} {
		for _, m := range teMetricRe.FindAllStringSubmatch(teSource(t, f), -1) {
			seen[teMetric{m[1], m[2], m[3], m[4]}] = true
		}
	}
	var out []teMetric
	for m := range seen {
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return fmt.Sprint(out[i]) < fmt.Sprint(out[j]) })
	require.Greater(t, len(out), 25, "the sources' metrics")
	return out
}

// scrapeMetrics reads /metrics.
func scrapeMetrics(t *testing.T, ts *httptest.Server) string {
	t.Helper()
	resp, b := sendReq(t, ts, "GET", "/metrics", "")
	require.Equal(t, 200, resp.StatusCode)
	return b
}

// TestTEIMetricsFromSources: every te_* series TEI v1.9.3 registers (read
// from its vendored sources), with each of its label values, is on our
// /metrics with TEI's type once the condition TEI counts has happened.
func TestTEIMetricsFromSources(t *testing.T) {
	want := teMetricsFromSources(t)
	s, ts := newServer(t, Config{Models: []ModelSpec{{Name: "sst2", Source: shipped}}, MaxClientBatchSize: 2})
	ok := func(body string) {
		t.Helper()
		code, b := post(t, ts, "/embed", body)
		require.Equal(t, 200, code, "%s", b)
	}
	ok(`{"inputs": "a fine film"}`)                                                 // single
	ok(`{"inputs": ["a fine film", "dull"]}`)                                       // batch
	post(t, ts, "/embed", `{"inputs": "a", "dimensions": 0}`)                       // validation
	post(t, ts, "/embed", `{"inputs": []}`)                                         // tokenization (no ids)
	post(t, ts, "/embed", `{"inputs": ["a", "b", "c"]}`)                            // batch_size
	post(t, ts, "/rerank", `{"query": "q", "texts": ["a"]}`)                        // model_type
	post(t, ts, "/embed", `{"inputs": "`+strings.Repeat("word ", 600)+`"}`)         // tokenization
	code, b := post(t, ts, "/predict", `{"inputs": [["a fine film"], ["a", "b"]]}`) // te_predict_*
	require.Equal(t, 200, code, "%s", b)
	require.NoError(t, s.permits.take(s.cfg.MaxConcurrentRequests)) // overloaded
	code, _ = post(t, ts, "/embed", `{"inputs": "a"}`)
	require.Equal(t, 429, code)
	s.permits.give(s.cfg.MaxConcurrentRequests)
	// inference: the backend fails a row.
	_, err := s.batchedWith(context.Background(), s.models[0], singles([]string{"x"}), encoding{},
		func(int, *models.Batch, int) error { return errors.New("the backend failed") })
	var ae *apiError
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, 424, ae.status)
	assert.Equal(t, errBackend, ae.typ)
	// dropped: a request that leaves while queued behind a busy instance.
	release, held := make(chan struct{}), make(chan struct{})
	go s.sched.submit(&job{ctx: context.Background(), m: s.models[0], run: func() error { close(held); <-release; return nil }}, false)
	<-held
	ctx, cancel := context.WithCancel(context.Background())
	gone := make(chan error, 1)
	go func() {
		_, err := s.batchedWith(ctx, s.models[0], singles([]string{"a", "b"}), encoding{}, func(int, *models.Batch, int) error { return nil })
		gone <- err
	}()
	require.Eventually(t, func() bool {
		s.sched.mu.Lock()
		defer s.sched.mu.Unlock()
		return len(s.sched.queue) == 1
	}, 10*time.Second, time.Millisecond)
	assert.Contains(t, scrapeMetrics(t, ts), "te_queue_size 2", "TEI's queue counts inputs")
	cancel()
	require.ErrorIs(t, <-gone, context.Canceled)
	close(release)
	require.Eventually(t, func() bool {
		return strings.Contains(scrapeMetrics(t, ts), `te_request_failure{err="dropped"} 2`)
	}, 10*time.Second, 5*time.Millisecond)

	out := scrapeMetrics(t, ts)
	kinds := map[string]string{"counter": "counter", "gauge": "gauge", "histogram": "histogram"}
	for _, m := range want {
		assert.Contains(t, out, "# TYPE "+m.name+" "+kinds[m.kind], "TEI registers %s %s", m.kind, m.name)
		if m.label != "" {
			assert.Regexp(t, regexp.MustCompile(`(?m)^`+m.name+`\{`+m.label+`="`+m.value+`"\} [1-9]`), out,
				"TEI counts %s{%s=%q}", m.name, m.label, m.value)
		}
	}
	names := map[string]string{}
	for _, m := range want {
		names[m.name] = kinds[m.kind]
	}
	for _, m := range regexp.MustCompile(`(?m)^# TYPE (te_[a-z_]+) ([a-z]+)$`).FindAllStringSubmatch(out, -1) {
		assert.Equal(t, names[m[1]], m[2], "our %s %s: TEI has no such series", m[2], m[1])
	}
	assert.Contains(t, out, "int8bert_requests_total", "ours stay")
}

// TestTEIMetricsCountAsTEI: te_* count per request and per input where
// TEI does, with its buckets (from its prometheus.rs).
func TestTEIMetricsCountAsTEI(t *testing.T) {
	prom := teSource(t, "prometheus.rs")
	for _, s := range []string{"let n_duration_buckets = 35;", "let mut value = 0.00001;", "value *= 1.5;",
		"(0..20)", "(0..13)", "(0..21)", `Matcher::Suffix(String::from("duration"))`} {
		require.Contains(t, prom, s, "TEI's buckets changed")
	}
	_, ts := newServer(t, Config{Models: []ModelSpec{{Name: "sst2", Source: shipped}}})
	code, b := post(t, ts, "/embed", `{"inputs": ["a fine film", "dull", "w"]}`)
	require.Equal(t, 200, code, "%s", b)
	code, b = post(t, ts, "/predict", `{"inputs": "a fine film"}`)
	require.Equal(t, 200, code, "%s", b)
	out := scrapeMetrics(t, ts)
	for _, line := range []string{
		`te_request_count{method="batch"} 1`, `te_request_success{method="batch"} 1`,
		`te_request_count{method="single"} 1`, `te_request_success{method="single"} 1`,
		"te_embed_count 3", "te_embed_success 3", "te_embed_duration_count 3", "te_embed_queue_duration_count 3",
		"te_embed_tokenization_duration_count 3", "te_embed_inference_duration_count 3",
		"te_predict_count 1", "te_predict_success 1", "te_predict_duration_count 1",
		"te_request_duration_count 2", "te_request_tokenization_duration_count 2", "te_request_queue_duration_count 2",
		"te_request_inference_duration_count 2", "te_request_input_length_count 4",
		"te_batch_next_size_count 2", "te_batch_next_size_sum 4", "te_queue_size 0",
		`te_request_duration_bucket{le="1.5000000000000002e-05"}`, `te_request_duration_bucket{le="+Inf"} 2`,
		`te_batch_next_size_bucket{le="4096"}`, `te_batch_next_tokens_bucket{le="1.048576e+06"}`,
		`te_request_input_length_bucket{le="512"}`,
	} {
		if !strings.HasSuffix(line, "}") {
			line += "\n" // the whole value
		}
		assert.Contains(t, out, line)
	}
	assert.NotContains(t, out, `te_request_input_length_bucket{le="1024"}`, "buckets stop at the model's 512")
	assert.Equal(t, 35, strings.Count(out, "te_request_duration_bucket{")-1, "35 bounds and +Inf")
	assert.NotContains(t, out, "te_request_count_total", "TEI's counters have no _total")
}

// TestTEIHeaders: a success that ran an inference carries TEI's x-*
// headers, in milliseconds; /tokenize, errors and /health do not.
func TestTEIHeaders(t *testing.T) {
	_, ts := newServer(t, Config{Models: []ModelSpec{{Name: "sst2", Source: shipped}}})
	check := func(route, body string, chars int) {
		t.Helper()
		resp, b := sendReq(t, ts, "POST", route, body)
		require.Equal(t, 200, resp.StatusCode, "%s", b)
		h := resp.Header
		assert.Equal(t, "cpu+optimized", h.Get("x-compute-type"), route)
		assert.Equal(t, strconv.Itoa(chars), h.Get("x-compute-characters"), route)
		num := func(k string) int {
			v, err := strconv.Atoi(h.Get(k))
			require.NoError(t, err, "%s %s: %q", route, k, h.Get(k))
			require.GreaterOrEqual(t, v, 0)
			return v
		}
		total := num("x-total-time")
		assert.Equal(t, total, num("x-compute-time"))
		assert.GreaterOrEqual(t, total, num("x-tokenization-time")+num("x-queue-time")+num("x-inference-time"), route)
		assert.Greater(t, num("x-compute-tokens"), 0)
	}
	check("/embed", `{"inputs": ["héllo", "b"]}`, 6)
	check("/predict", `{"inputs": ["ab", "cd"]}`, 4)
	check("/v1/embeddings", `{"input": "héllo"}`, 5)

	resp, b := sendReq(t, ts, "POST", "/embed", `{"inputs": "a b c"}`)
	require.Equal(t, 200, resp.StatusCode, "%s", b)
	_, tb := sendReq(t, ts, "POST", "/tokenize", `{"inputs": "a b c"}`)
	toks := decode[[][]simpleToken](t, []byte(tb))
	assert.Equal(t, strconv.Itoa(len(toks[0])), resp.Header.Get("x-compute-tokens"), "the tokens run, special ones included")

	for _, c := range [][2]string{{"/tokenize", `{"inputs": "a"}`}, {"/embed", `{"inputs": []}`}} {
		resp, _ := sendReq(t, ts, "POST", c[0], c[1])
		assert.Empty(t, resp.Header.Get("x-compute-type"), "%s %s", c[0], c[1])
	}
	resp, _ = sendReq(t, ts, "GET", "/health", "")
	assert.Empty(t, resp.Header.Get("x-total-time"))
}

// TestTEIStatusCodes: each condition answers TEI's status and error_type.
func TestTEIStatusCodes(t *testing.T) {
	s, ts := newServer(t, Config{Models: []ModelSpec{{Name: "sst2", Source: shipped}}, MaxClientBatchSize: 2})
	for _, c := range []struct {
		route, body string
		status      int
		typ         string
	}{
		{"/embed", `{"inputs": []}`, 400, errEmpty},
		{"/embed", `{"inputs": ""}`, 400, errEmpty},
		{"/embed", `{"inputs": ["a", ""]}`, 400, errEmpty},
		{"/predict", `{"inputs": []}`, 400, errEmpty},
		{"/predict", `{"inputs": ["", ""]}`, 400, errEmpty},
		{"/tokenize", `{"inputs": ""}`, 400, errEmpty},
		{"/tokenize", `{"inputs": []}`, 400, errEmpty},
		{"/embed", `{"inputs": ["a", "b", "c"]}`, 422, errValidation},
		{"/embed", `{"inputs": "` + strings.Repeat("word ", 600) + `"}`, 422, errValidation},
		{"/rerank", `{"query": "q", "texts": ["a"]}`, 424, errBackend},
		{"/rerank", `{"query": "q", "texts": []}`, 400, errEmpty}, // before the model's type, as TEI
	} {
		code, b := post(t, ts, c.route, c.body)
		assert.Equal(t, c.status, code, "%s %.40s: %s", c.route, c.body, b)
		assert.Equal(t, c.typ, decode[errorBody](t, b).ErrorType, "%s %.40s", c.route, c.body)
	}
	code, b := post(t, ts, "/v1/embeddings", `{"input": []}`)
	assert.Equal(t, 400, code)
	// On /v1, OpenAI's error shape (OpenAI wins there), TEI's type as code.
	e := decode[openAIErrorBody](t, b).Error
	assert.Equal(t, "invalid_request_error", e.Type)
	if assert.NotNil(t, e.Code) {
		assert.Equal(t, strings.ToLower(errEmpty), *e.Code)
	}
	code, b = post(t, ts, "/predict", `{"inputs": ["", "b"]}`)
	assert.Equal(t, 200, code, "a pair with one text is not empty (TEI): %s", b)

	// A backend failure is 424 Backend; so is any error no route names.
	rec := httptest.NewRecorder()
	s.writeError(rec, "/embed", errors.New("oneDNN failed"))
	assert.Equal(t, 424, rec.Code)
	assert.Equal(t, errBackend, decode[errorBody](t, rec.Body.Bytes()).ErrorType)
}

// TestTEIEmptyAndTokenIDs: token ids meet TEI's rules for an empty input
// and its counts: `[]` is one input of no ids (TEI's Single(Ids([]))), 400
// Empty counted as a single request's tokenization failure, as is an
// empty list of ids in a batch; ids that are not empty embed, and each id
// counts as one character. dimensions 0 is TEI's counted Validation, a
// negative one its JSON's refusal, not counted.
func TestTEIEmptyAndTokenIDs(t *testing.T) {
	_, ts := newServer(t, Config{Models: []ModelSpec{{Name: "sst2", Source: shipped}}})
	empty := func(body string) {
		t.Helper()
		code, b := post(t, ts, "/embed", body)
		assert.Equal(t, 400, code, "%s: %s", body, b)
		assert.Equal(t, errEmpty, decode[errorBody](t, b).ErrorType, body)
	}
	empty(`{"inputs": []}`)
	out := scrapeMetrics(t, ts)
	assert.Contains(t, out, `te_request_count{method="single"} 1`+"\n")
	assert.Contains(t, out, `te_request_failure{err="tokenization"} 1`+"\n")
	assert.NotContains(t, out, `te_request_failure{err="validation"}`)
	empty(`{"inputs": [[0, 5, 2], []]}`)
	empty(`{"inputs": [[0, 5, 2], ""]}`)
	out = scrapeMetrics(t, ts)
	assert.Contains(t, out, `te_request_count{method="batch"} 2`+"\n")
	assert.Contains(t, out, `te_request_failure{err="tokenization"} 3`+"\n")

	resp, b := sendReq(t, ts, "POST", "/embed", `{"inputs": [0, 5, 6, 2]}`)
	require.Equal(t, 200, resp.StatusCode, "%s", b)
	assert.Len(t, decode[[][]float32](t, []byte(b)), 1)
	assert.Equal(t, "4", resp.Header.Get("x-compute-characters"), "an id counts as one character")
	assert.Equal(t, "4", resp.Header.Get("x-compute-tokens"))
	resp, b = sendReq(t, ts, "POST", "/embed", `{"inputs": [[0, 5, 2], "ab"]}`)
	require.Equal(t, 200, resp.StatusCode, "%s", b)
	assert.Equal(t, "5", resp.Header.Get("x-compute-characters"))

	code, body := post(t, ts, "/embed", `{"inputs": "a", "dimensions": -1}`)
	assert.Equal(t, 422, code, "%s", body)
	assert.NotContains(t, scrapeMetrics(t, ts), `te_request_failure{err="validation"}`, "a negative usize is TEI's JSON refusal")
	code, body = post(t, ts, "/embed", `{"inputs": "a", "dimensions": 0}`)
	assert.Equal(t, 422, code, "%s", body)
	assert.Contains(t, scrapeMetrics(t, ts), `te_request_failure{err="validation"} 1`+"\n")
}

// TestTEIPromptNameCounted: a prompt_name the model lacks is refused by
// TEI's tokenization (422 Validation), so it counts as
// te_request_failure{err="tokenization"}, on /embed and /tokenize; a
// truncation_direction TEI's JSON refuses is not counted.
func TestTEIPromptNameCounted(t *testing.T) {
	dir := wordModel(t, "golden/models/bert-base", false, promptsJSON)
	_, ts := newServer(t, Config{Models: []ModelSpec{{Name: "e", Source: dir}}, Load: wordOptions(t)})
	refused(t, ts, "/embed", `{"inputs": "w5", "truncation_direction": "up"}`, "truncation_direction")
	assert.NotContains(t, scrapeMetrics(t, ts), `te_request_failure{`)
	refused(t, ts, "/embed", `{"inputs": "w5", "prompt_name": "doc"}`, `"doc" is not one of`)
	refused(t, ts, "/tokenize", `{"inputs": "w5", "prompt_name": "doc"}`, `"doc" is not one of`)
	assert.Contains(t, scrapeMetrics(t, ts), `te_request_failure{err="tokenization"} 2`+"\n")
}
