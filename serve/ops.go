package serve

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/int8bert/int8bert/models"
	"github.com/prometheus/client_golang/prometheus"
)

// Operations as TEI v1.9.3's router does them (docs/USAGE.md, "Serving: the API
// key, CORS, metrics and headers"; docs/DESIGN.md section 9.6):
// the API key, CORS, TEI's te_* metrics and its timing headers.

// guardedRoutes are the paths the API key guards, whatever the method:
// TEI's `routes` router (its auth layer wraps each route's methods,
// 405 included), plus our /qa. "/" is guarded for POST only (GET / is
// TEI's public health route); /health, /ping, /metrics, /docs and paths
// no route serves are public.
var guardedRoutes = map[string]bool{
	"/info": true, "/embed": true, "/embed_all": true, "/embed_sparse": true, "/predict": true,
	"/rerank": true, "/similarity": true, "/tokenize": true, "/decode": true, "/embeddings": true,
	"/v1/embeddings": true, "/vertex": true, "/invocations": true, "/qa": true, "/fill-mask": true,
}

func guarded(r *http.Request) bool {
	return guardedRoutes[r.URL.Path] || (r.URL.Path == "/" && r.Method == http.MethodPost)
}

// CORS as TEI's tower-http (0.5.2) CorsLayer: methods GET and POST, the
// Content-Type header, the origins of CORSAllowOrigin ("*" among them, or
// none given: any origin).
const (
	corsVary    = "origin, access-control-request-method, access-control-request-headers"
	corsMethods = "GET,POST"
	corsHeaders = "content-type"
)

// ops wraps the routes in TEI's layers: CORS outermost (a preflight is
// answered before the key is checked, a 401 carries the CORS headers),
// then the API key on the guarded routes.
func (s *Server) ops(h http.Handler) http.Handler {
	var want []byte
	if s.cfg.APIKey != "" {
		want = []byte("Bearer " + s.cfg.APIKey)
	}
	anyOrigin := len(s.cfg.CORSAllowOrigin) == 0
	origins := map[string]bool{}
	for _, o := range s.cfg.CORSAllowOrigin {
		anyOrigin = anyOrigin || o == "*"
		origins[o] = true
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		if anyOrigin {
			hd["Access-Control-Allow-Origin"] = hdrAnyOrigin
		} else if o := r.Header.Get("Origin"); o != "" && origins[o] {
			hd.Set("Access-Control-Allow-Origin", o)
		}
		if len(hd["Vary"]) == 0 {
			hd["Vary"] = hdrVary
		} else {
			hd.Add("Vary", corsVary)
		}
		if r.Method == http.MethodOptions {
			// tower-http answers every OPTIONS request as a preflight:
			// 200, no body, whatever the path.
			hd.Set("Access-Control-Allow-Methods", corsMethods)
			hd.Set("Access-Control-Allow-Headers", corsHeaders)
			w.WriteHeader(http.StatusOK)
			return
		}
		if want != nil && guarded(r) &&
			subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			// TEI answers a bare 401: no body, no WWW-Authenticate.
			s.met.requests.WithLabelValues(r.URL.Path, "401").Inc()
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// checkOps checks the operations settings at start-up.
func (c Config) checkOps() error {
	for _, o := range c.CORSAllowOrigin {
		for i := 0; i < len(o); i++ {
			if b := o[i]; (b < 0x20 && b != '\t') || b == 0x7f {
				return fmt.Errorf("serve: CORS allowed origin %q: not a valid header value", o)
			}
		}
	}
	// HTTP trims a header value's ends: a key that starts or ends with
	// white space, or holds a control character, could never match.
	for i := 0; i < len(c.APIKey); i++ {
		if b := c.APIKey[i]; (b < 0x20 && b != '\t') || b == 0x7f {
			return errors.New("serve: the API key holds a control character: no Authorization header can carry it")
		}
	}
	if k := c.APIKey; k != "" && (strings.TrimSpace(k) != k) {
		return errors.New("serve: the API key starts or ends with white space, which HTTP trims from a header: no request could match it")
	}
	return nil
}

// failed is an answered error with the "err" label TEI's
// te_request_failure counts it under.
type failed struct {
	*apiError
	label string
}

func (f *failed) Unwrap() error { return f.apiError }

// labelled gives e TEI's failure label.
func labelled(label string, e *apiError) error { return &failed{e, label} }

// countedAs gives an answered error TEI's failure label when it has
// none; any other error (a context's, the backend's) is left as it is.
func countedAs(label string, err error) error {
	var f *failed
	var ae *apiError
	if errors.As(err, &f) || !errors.As(err, &ae) {
		return err
	}
	return &failed{ae, label}
}

// validation is a 422 Validation error that TEI counts as
// te_request_failure{err="validation"} (a field's value refused; a body
// that is not the request's JSON is not counted, as axum's rejections
// are not).
func validation(format string, args ...any) error {
	return labelled("validation", invalid(format, args...))
}

// emptyInput is TEI's 400 Empty.
func emptyInput(label, format string, args ...any) error {
	return labelled(label, &apiError{http.StatusBadRequest, errEmpty, fmt.Sprintf(format, args...)})
}

// failureLabel is the te_request_failure label of an answered error ("":
// not counted).
func failureLabel(err error) string {
	var f *failed
	if errors.As(err, &f) {
		return f.label
	}
	var ae *apiError
	if errors.As(err, &ae) {
		switch ae.typ {
		case errEmpty:
			return "validation"
		case errOverloaded:
			return "overloaded"
		case errTokenizer:
			return "tokenization"
		}
	}
	return ""
}

// reqStats is what one request's inference took, for TEI's headers and
// te_request_* histograms; it lives in the request's statusWriter.
type reqStats struct {
	mu                             sync.Mutex // a route may run its inferences concurrently
	start                          time.Time
	route                          string
	method                         string // te_request_count's label; "" for routes TEI does not count
	timed                          bool   // an inference ran: the x-* headers are due
	chars, tokens                  int
	tokenization, queue, inference time.Duration
}

type statsKey struct{}

func statsOf(ctx context.Context) *reqStats {
	st, _ := ctx.Value(statsKey{}).(*reqStats)
	return st
}

// teMethod records whether a request's inputs were one input or a list,
// TEI's te_request_count{method} label.
func teMethod(r *http.Request, single bool) { teMethodOf(r.Context(), single) }

// teMethodOf is teMethod for the request of ctx.
func teMethodOf(ctx context.Context, single bool) {
	if st := statsOf(ctx); st != nil {
		st.mu.Lock()
		st.method = "batch"
		if single {
			st.method = "single"
		}
		st.mu.Unlock()
	}
}

// add sums one inference of the request: its inputs' characters (both
// texts of a pair; token ids count one each, as TEI's count_chars), its
// tokens and its times.
func (st *reqStats) add(inputs []sequence, tokens int, tok, queue, inference time.Duration) {
	chars := 0
	for _, in := range inputs {
		if in.ids != nil {
			chars += len(in.ids)
			continue
		}
		chars += utf8.RuneCountInString(in.a)
		if in.b != nil {
			chars += utf8.RuneCountInString(*in.b)
		}
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	st.timed = true
	st.chars += chars
	st.tokens += tokens
	st.tokenization += tok
	st.queue += queue
	st.inference += inference
}

// computeType is TEI's x-compute-type, of our hardware (TEI writes
// "gpu+optimized" whatever it runs on).
const computeType = "cpu+optimized"

// The constant header values, shared by every response (net/http only
// reads them; an Add to one of these keys appends to a full slice, which
// copies it).
var (
	hdrComputeType = []string{computeType}
	hdrAnyOrigin   = []string{"*"}
	hdrVary        = []string{corsVary}
)

// setHeaders writes TEI's timing headers (milliseconds, truncated), in
// one allocation of values (strconv has no allocation below 100).
func (st *reqStats) setHeaders(h http.Header) {
	st.mu.Lock()
	defer st.mu.Unlock()
	ms := func(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }
	v := make([]string, 6)
	v[0] = ms(time.Since(st.start))
	v[1] = strconv.Itoa(st.chars)
	v[2] = strconv.Itoa(st.tokens)
	v[3] = ms(st.tokenization)
	v[4] = ms(st.queue)
	v[5] = ms(st.inference)
	h["X-Compute-Type"] = hdrComputeType
	h["X-Compute-Time"] = v[0:1:1]
	h["X-Total-Time"] = v[0:1:1]
	h["X-Compute-Characters"] = v[1:2:2]
	h["X-Compute-Tokens"] = v[2:3:3]
	h["X-Tokenization-Time"] = v[3:4:4]
	h["X-Queue-Time"] = v[4:5:5]
	h["X-Inference-Time"] = v[5:6:6]
}

// teMetrics are TEI's series, named and labelled as its router and core
// register them, with its buckets (router/src/prometheus.rs).
type teMetrics struct {
	requestCount, requestSuccess, requestFailure *prometheus.CounterVec

	requestDuration, requestTokenization, requestQueue, requestInference prometheus.Histogram
	inputLength                                                          prometheus.Histogram

	embed, predict teFamily

	batchSize, batchTokens prometheus.Histogram
	queueSize              prometheus.Gauge
}

// teFamily is te_embed_* or te_predict_*, counted per input as TEI's
// Infer counts them.
type teFamily struct {
	count, success                           prometheus.Counter
	duration, tokenization, queue, inference prometheus.Histogram
}

// teDurationBuckets: 35 buckets from 1.5e-5 s, each 1.5 times the last,
// computed as TEI computes them so that the bounds are the same floats.
func teDurationBuckets() []float64 {
	b := make([]float64, 35)
	v := 0.00001
	for i := range b {
		v *= 1.5
		b[i] = v
	}
	return b
}

func powersOfTwo(n int) []float64 {
	b := make([]float64, n)
	for i := range b {
		b[i] = float64(int(1) << i)
	}
	return b
}

func newTEMetrics(reg *prometheus.Registry) *teMetrics {
	d := teDurationBuckets()
	hist := func(name, help string, buckets []float64) prometheus.Histogram {
		h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets})
		reg.MustRegister(h)
		return h
	}
	counter := func(name, help string) prometheus.Counter {
		c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
		reg.MustRegister(c)
		return c
	}
	vec := func(name, help, label string) *prometheus.CounterVec {
		c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{label})
		reg.MustRegister(c)
		return c
	}
	family := func(f string) teFamily {
		return teFamily{
			count:        counter("te_"+f+"_count", "TEI: inputs started on the "+f+" path."),
			success:      counter("te_"+f+"_success", "TEI: inputs answered on the "+f+" path."),
			duration:     hist("te_"+f+"_duration", "TEI: seconds from an input's start to its result.", d),
			tokenization: hist("te_"+f+"_tokenization_duration", "TEI: seconds an input took to tokenize and queue.", d),
			queue:        hist("te_"+f+"_queue_duration", "TEI: seconds an input waited in the queue.", d),
			inference:    hist("te_"+f+"_inference_duration", "TEI: seconds of the batch an input ran in.", d),
		}
	}
	m := &teMetrics{
		requestCount:        vec("te_request_count", "TEI: requests by method (single input or batch).", "method"),
		requestSuccess:      vec("te_request_success", "TEI: requests answered by method.", "method"),
		requestFailure:      vec("te_request_failure", "TEI: failures by kind.", "err"),
		requestDuration:     hist("te_request_duration", "TEI: seconds from a request's start to its response.", d),
		requestTokenization: hist("te_request_tokenization_duration", "TEI: seconds a request took to tokenize.", d),
		requestQueue:        hist("te_request_queue_duration", "TEI: seconds a request waited in the queue.", d),
		requestInference:    hist("te_request_inference_duration", "TEI: seconds of inference of a request.", d),
		embed:               family("embed"),
		predict:             family("predict"),
		batchSize:           hist("te_batch_next_size", "TEI: inputs per batch.", powersOfTwo(13)),
		batchTokens:         hist("te_batch_next_tokens", "TEI: tokens per batch (no padding).", powersOfTwo(21)),
	}
	m.queueSize = prometheus.NewGauge(prometheus.GaugeOpts{Name: "te_queue_size", Help: "TEI: inputs waiting in the queue."})
	reg.MustRegister(m.queueSize)
	return m
}

// registerInputLength adds te_request_input_length, whose buckets are
// the powers of two up to the longest input a served model takes.
func (m *teMetrics) registerInputLength(reg *prometheus.Registry, maxInput int) {
	var b []float64
	for _, v := range powersOfTwo(20) {
		if int(v) <= maxInput {
			b = append(b, v)
		}
	}
	m.inputLength = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "te_request_input_length",
		Help: "TEI: tokens per input.", Buckets: b})
	reg.MustRegister(m.inputLength)
}

// embedRoutes are the routes whose inputs TEI counts as te_embed_*
// whatever the model; elsewhere a classifier's inputs are te_predict_*.
var embedRoutes = map[string]bool{"/embed": true, "/embed_all": true, "/embed_sparse": true,
	"/v1/embeddings": true, "/embeddings": true, "/similarity": true}

func (m *teMetrics) family(st *reqStats, md *model) *teFamily {
	if (st == nil || !embedRoutes[st.route]) && md.p.Task() == models.TaskSequenceClassification {
		return &m.predict
	}
	return &m.embed
}

// done counts a finished request of a TEI route: te_request_count and
// te_request_success by method, te_request_failure by err, and on success
// the te_request_* histograms.
func (m *teMetrics) done(st *reqStats, status int, err error) {
	if st.method != "" {
		m.requestCount.WithLabelValues(st.method).Inc()
		if status == http.StatusOK && err == nil {
			m.requestSuccess.WithLabelValues(st.method).Inc()
		}
	}
	if err != nil {
		if l := failureLabel(err); l != "" {
			m.requestFailure.WithLabelValues(l).Inc()
		}
		return
	}
	if st.timed && status == http.StatusOK {
		m.requestDuration.Observe(time.Since(st.start).Seconds())
		m.requestTokenization.Observe(st.tokenization.Seconds())
		m.requestQueue.Observe(st.queue.Seconds())
		m.requestInference.Observe(st.inference.Seconds())
	}
}
