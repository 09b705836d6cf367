package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/int8bert/int8bert/internal/cgroup"
	"github.com/int8bert/int8bert/models"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
)

// Server serves the models of a Config over HTTP.
type Server struct {
	cfg      Config
	models   []*model
	byName   map[string]*model
	inst     *models.Instances
	sched    *scheduler
	met      *metrics
	permits  permits       // MaxConcurrentRequests, one per input as TEI
	tokens   chan struct{} // TokenizationWorkers tokens
	draining atomic.Bool
	hs       *http.Server
	// cutShort cancels the HTTP requests' base context when Shutdown's
	// deadline passes with requests still running (errShutdownDeadline),
	// so that their rows leave their passes (docs/DESIGN.md section 9.1).
	cutShort   context.CancelCauseFunc
	gs         *grpc.Server   // TEI's gRPC API (ServeGRPC)
	grpcHealth *health.Server // gRPC's health service
	started    time.Time

	// passTokens is the token budget of one forward pass (passTokens of
	// --max-batch-tokens, lowered by a memory limit: fitMemory), and
	// passFrom says where it came from (/info).
	passTokens int
	passFrom   string

	instDone chan error
	// idleStop stops releaseWhenIdle.
	idleStop chan struct{}
	stopOnce sync.Once
	stopErr  error
}

// New loads the models (one copy of each model's weights, shared by the
// instances), warms them up when asked, and starts the instances. Close
// or Shutdown releases them.
func New(ctx context.Context, c Config) (*Server, error) {
	c, err := c.withDefaults()
	if err != nil {
		return nil, err
	}
	if c.Instances == 0 {
		// The container's CPUs, not the host's (docs/DESIGN.md section
		// 9.10).
		c.Instances = models.InstancesFor(c.Resources.CPUs, max(c.ThreadsPerInstance, 1))
	}
	inst, err := models.NewInstances(models.InstanceOptions{Instances: c.Instances, Threads: c.ThreadsPerInstance, Pin: c.Pin})
	if err != nil {
		return nil, fmt.Errorf("serve: %w", err)
	}
	s := &Server{cfg: c, byName: map[string]*model{}, inst: inst, met: newMetrics(),
		permits: permits{max: int64(c.MaxConcurrentRequests)}, tokens: make(chan struct{}, c.TokenizationWorkers),
		started: time.Now(), instDone: make(chan error, 1), passFrom: "--max-batch-tokens, at most models.DefaultMaxBatchTokens"}
	lo := c.Load
	// A batch of up to --max-batch-tokens runs in passes of at most
	// passTokens tokens: the passes' scratch is what an instance holds,
	// and past 2,048 rows a GEMM gets no faster per row (docs/DESIGN.md
	// section 2.3), so a larger pass buys memory, not speed.
	lo.Threads, lo.MaxBatchTokens = inst.Threads(), passTokens(c.MaxBatchTokens)
	if lo.Logger == nil {
		lo.Logger = c.Logger
	}
	for _, spec := range c.Models {
		m, err := loadModel(ctx, spec, lo, c.Pooling)
		if err == nil && m.p.MaxLength() > c.MaxBatchTokens {
			m, err = s.fitBatchTokens(ctx, m, spec, lo)
		}
		if err == nil {
			if err = m.setPrompt(&c); err != nil {
				m.p.Close()
			}
		}
		if err != nil {
			s.closeModels()
			return nil, err
		}
		s.models = append(s.models, m)
		s.byName[m.name] = m
	}
	s.passTokens = lo.MaxBatchTokens
	if err := s.fitMemory(); err != nil {
		s.closeModels()
		return nil, err
	}
	for _, m := range s.models {
		if c.Warmup {
			c.Logger.Info("serve: warming up", "model", m.name)
			if err := m.p.Warmup(ctx, models.WarmupOptions{MaxBatch: 64, MaxLength: m.p.MaxLength(), MaxTokens: s.passTokens}); err != nil {
				s.closeModels()
				return nil, fmt.Errorf("serve: model %s: warm-up: %w", m.name, err)
			}
		}
	}
	maxInput := 0
	for _, m := range s.models {
		maxInput = max(maxInput, m.p.MaxLength())
	}
	s.met.te.registerInputLength(s.met.reg, maxInput)
	s.sched = newScheduler(&s.cfg, s.met)
	s.sched.instances = inst.Len()
	if c.MaxQueuedPasses > 0 {
		s.sched.admit = c.MaxQueuedPasses * inst.Len() * s.passTokens
	}
	s.permits.retry = s.sched.retryAfter
	go func() { s.instDone <- inst.Run(context.Background(), s.sched.loop) }()
	s.idleStop = make(chan struct{})
	go s.releaseWhenIdle(s.idleStop, idleRelease)
	base, cutShort := context.WithCancelCause(context.Background())
	s.cutShort = cutShort
	s.hs = &http.Server{Handler: s.Handler(), ReadHeaderTimeout: c.ReadHeaderTimeout, ReadTimeout: c.ReadTimeout,
		WriteTimeout: c.WriteTimeout, IdleTimeout: c.IdleTimeout, ErrorLog: nil,
		BaseContext: func(net.Listener) context.Context { return base }}
	s.gs, s.grpcHealth = s.newGRPC()
	return s, nil
}

// passTokens is the token budget of one forward pass of a batch of up to
// batchTokens tokens: the batch's, at most models.DefaultMaxBatchTokens.
func passTokens(batchTokens int) int {
	return min(batchTokens, models.DefaultMaxBatchTokens)
}

// memoryShare is the share of what a soft memory limit leaves after the
// weights that the instances' pass scratch may take (memoryPassTokens).
const memoryShare = 0.5

// memoryPassTokens is the pass budget a soft memory limit allows
// (docs/DESIGN.md section 9.10): budget when instances passes of budget
// tokens at perToken bytes each fit in memoryShare of what soft leaves
// after weights; else the most tokens that fit, at least floor (a pass
// must hold the longest input; ok false then when even that does not
// fit). soft <= 0 is no limit.
func memoryPassTokens(soft, weights int64, instances int, perToken int64, budget, floor int) (n int, ok bool) {
	if soft <= 0 || perToken <= 0 || instances < 1 {
		return budget, true
	}
	room := int64(float64(soft-weights) * memoryShare)
	if int64(instances)*int64(budget)*perToken <= room {
		return budget, true
	}
	n = int(max(room, 0) / (int64(instances) * perToken))
	if n < floor {
		return min(floor, budget), false
	}
	return min(n, budget), true
}

// fitMemory lowers the pass budget of every model when a soft memory limit
// (the container's, or GOMEMLIMIT) would not hold the instances' scratch
// at the budget the models were loaded with (memoryPassTokens).
func (s *Server) fitMemory() error {
	res := s.cfg.Resources
	var weights, perToken int64
	floor := 1
	for _, m := range s.models {
		weights += m.p.ResidentBytes().Total
		perToken = max(perToken, m.p.ScratchBytes(1))
		floor = max(floor, m.p.MaxLength())
	}
	n, ok := memoryPassTokens(res.SoftLimit, weights, s.inst.Len(), perToken, s.passTokens, floor)
	if n == s.passTokens && ok {
		return nil
	}
	if !ok {
		s.cfg.Logger.Warn("serve: the memory limit leaves too little for every instance's pass of the longest input: lower --instances or raise the limit",
			"soft_limit", res.SoftLimit, "weights", weights, "instances", s.inst.Len(), "pass_tokens", n, "scratch_per_token", perToken)
	}
	if n == s.passTokens {
		return nil
	}
	for _, m := range s.models {
		if err := m.p.SetMaxBatchTokens(n); err != nil {
			return fmt.Errorf("serve: model %s: %w", m.name, err)
		}
	}
	s.cfg.Logger.Info("serve: the pass budget is lowered to fit the memory limit",
		"pass_tokens", n, "from", s.passTokens, "soft_limit", res.SoftLimit, "weights", weights, "instances", s.inst.Len())
	s.passFrom = fmt.Sprintf("lowered from %d: %d instances' scratch at %d bytes a token within %.0f%% of what GOMEMLIMIT %s leaves after %s of weights",
		s.passTokens, s.inst.Len(), perToken, 100*memoryShare, cgroup.GiB(res.SoftLimit), cgroup.GiB(weights))
	s.passTokens = n
	return nil
}

// fitBatchTokens is TEI's rule (router/src/lib.rs) for a model whose
// maximum input length exceeds the batch-token budget: refused without
// auto-truncation; with it, loaded again with the budget as its maximum
// input length, so that longer inputs are cut to it. m is closed.
func (s *Server) fitBatchTokens(ctx context.Context, m *model, spec ModelSpec, lo models.Options) (*model, error) {
	n, budget := m.p.MaxLength(), s.cfg.MaxBatchTokens
	m.p.Close()
	if !s.cfg.AutoTruncate {
		return nil, fmt.Errorf("serve: model %s: the maximum input length is %d, which exceeds the max batch tokens (%d): "+
			"raise --max-batch-tokens to at least %d, or set --auto-truncate so that inputs are cut to %d tokens: %w",
			spec.Name, n, budget, n, budget, models.ErrConfig)
	}
	s.cfg.Logger.Warn("serve: the model's maximum input length exceeds the max batch tokens: inputs are cut to the budget (auto-truncate), as TEI",
		"model", spec.Name, "max_input_length", n, "max_batch_tokens", budget)
	lo.MaxLength = budget
	return loadModel(ctx, spec, lo, s.cfg.Pooling)
}

func (s *Server) closeModels() {
	for _, m := range s.models {
		m.p.Close()
	}
}

// Serve accepts connections on l until Shutdown; it returns
// http.ErrServerClosed after a Shutdown.
func (s *Server) Serve(l net.Listener) error { return s.hs.Serve(l) }

// Shutdown drains the server: /health and new requests answer 503 with
// "Connection: close" for DrainDelay (gRPC: its health service answers
// NOT_SERVING, new calls Unavailable), then the listeners close and every
// request already admitted, HTTP or gRPC, runs to its end (until ctx is
// done or ShutdownTimeout passes), then the instances stop and the models
// close.
// It returns nil when nothing was cut short.
func (s *Server) Shutdown(ctx context.Context) error {
	s.stopOnce.Do(func() {
		s.grpcHealth.Shutdown() // NOT_SERVING, before the draining is seen
		s.draining.Store(true)
		ctx, cancel := context.WithTimeout(ctx, s.cfg.ShutdownTimeout)
		defer cancel()
		select {
		case <-time.After(s.cfg.DrainDelay):
		case <-ctx.Done():
		}
		grpcDone := make(chan struct{})
		go func() {
			s.stopGRPC(ctx)
			close(grpcDone)
		}()
		err := s.hs.Shutdown(ctx)
		if ctx.Err() != nil {
			// The deadline passed with requests running: their work
			// stops at the next layer, and they are answered 503.
			s.cutShort(errShutdownDeadline)
		}
		<-grpcDone
		s.sched.close()
		select {
		case ierr := <-s.instDone:
			err = errors.Join(err, ierr)
		case <-ctx.Done():
			err = errors.Join(err, fmt.Errorf("serve: instances still busy: %w", ctx.Err()))
		}
		close(s.idleStop)
		s.closeModels()
		s.stopErr = err
	})
	return s.stopErr
}

// idleRelease is how long the server must have run no batch before it
// gives memory back (releaseWhenIdle).
const idleRelease = time.Second

// idleCompact is how many idleRelease periods with no batch pass before
// the server, at rest, keeps one packed form of each linear
// (Pipeline.Compact): long enough that a steady trickle of requests does
// not pack the others again after every pause.
const idleCompact = 10

// releaseWhenIdle gives memory back once no batch has run, none runs and
// none waits for every of two checks every seconds apart, and again after
// each later busy spell: each model's Trim (packed forms no call ran on,
// idle pass buffers), then a collection that returns the freed heap to
// the system (debug.FreeOSMemory), so that a server at rest holds its
// weights and little else (docs/DESIGN.md section 9.9). Still idle
// idleCompact checks on, each model keeps one packed form a linear
// (Compact), once a rest.
func (s *Server) releaseWhenIdle(stop <-chan struct{}, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	last, released, compacted := uint64(0), uint64(0), uint64(0)
	first, firstCompact := true, true
	quiet := 0 // checks in a row with no new batch, idle
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		ran, idle := s.sched.idle()
		if idle && ran == last {
			quiet++
		} else {
			quiet = 0
		}
		switch {
		case quiet >= idleCompact && (firstCompact || ran != compacted):
			for _, m := range s.models {
				m.p.Compact()
			}
			debug.FreeOSMemory()
			compacted, released, firstCompact, first = ran, ran, false, false
		case quiet >= 1 && (first || ran != released):
			for _, m := range s.models {
				m.p.Trim()
			}
			debug.FreeOSMemory()
			released, first = ran, false
		}
		last = ran
	}
}

// Close stops at once: Shutdown without the drain delay and with a
// context already done for whatever is still running.
func (s *Server) Close() error {
	s.cfg.DrainDelay = 0
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	return s.Shutdown(ctx)
}

// Handler is the server's routes, for tests and for embedding the server
// in another mux.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	route := func(pattern, name string, admitted bool, h func(w http.ResponseWriter, r *http.Request) error) {
		mux.Handle(pattern, s.wrap(name, admitted, h))
	}
	route("POST /embed", "/embed", true, s.embed)
	route("POST /embed_all", "/embed_all", true, s.embedAll)
	route("POST /embed_sparse", "/embed_sparse", true, s.embedSparse)
	route("POST /predict", "/predict", true, s.predict)
	route("POST /rerank", "/rerank", true, s.rerank)
	route("POST /similarity", "/similarity", true, s.similarity)
	route("POST /tokenize", "/tokenize", true, s.tokenize)
	route("POST /decode", "/decode", true, s.decodeIDs)
	route("POST /v1/embeddings", "/v1/embeddings", true, s.openAIEmbeddings)
	route("POST /embeddings", "/embeddings", true, s.openAIEmbeddings)
	route("POST /vertex", "/vertex", true, s.vertex)
	route("POST /qa", "/qa", true, s.qa)
	route("POST /fill-mask", "/fill-mask", true, s.fillMask)
	route("POST /ner", "/ner", true, s.ner)
	route("POST /zero-shot", "/zero-shot", true, s.zeroShot)
	task := s.taskRoute(os.Getenv("TASK")) // TEI reads TASK the same way
	route("POST /{$}", "/", true, task)
	route("POST /invocations", "/invocations", true, task)
	route("GET /health", "/health", false, s.health)
	route("GET /{$}", "/", false, s.health)
	route("GET /ping", "/ping", false, s.health)
	route("GET /info", "/info", false, s.info)
	route("GET /docs", "/docs", false, s.swaggerUI)
	route("GET /docs/{$}", "/docs", false, s.swaggerUI)
	route("GET /api-doc/openapi.json", "/api-doc/openapi.json", false, s.openAPI)
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.met.reg, promhttp.HandlerOpts{}))
	mux.Handle("/v1/", s.wrap("/v1", false, s.noRoute))
	mux.Handle("/", s.wrap("other", false, s.noRoute))
	return s.ops(mux)
}

// routeMethods is the methods of each route, for 405's Allow.
var routeMethods = map[string]string{"/embed": "POST", "/embed_all": "POST", "/embed_sparse": "POST",
	"/predict": "POST", "/rerank": "POST", "/similarity": "POST", "/tokenize": "POST", "/decode": "POST",
	"/v1/embeddings": "POST", "/embeddings": "POST", "/vertex": "POST", "/qa": "POST", "/fill-mask": "POST", "/ner": "POST", "/zero-shot": "POST", "/": "GET, POST",
	"/invocations": "POST", "/health": "GET", "/ping": "GET", "/info": "GET", "/metrics": "GET",
	"/docs": "GET", "/api-doc/openapi.json": "GET"}

// statusWriter records the status a handler wrote, and writes TEI's
// timing headers on a success that ran an inference.
type statusWriter struct {
	http.ResponseWriter
	status int
	stats  reqStats
	// draining is the server's drain flag: a response written while it is
	// set says "Connection: close", whenever its request arrived, so that
	// no keep-alive client writes its next request on a connection the
	// listener's close is about to shut (docs/DESIGN.md section 9.3).
	draining *atomic.Bool
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
		if w.draining != nil && w.draining.Load() {
			w.Header().Set("Connection", "close")
		}
		if code == http.StatusOK && w.stats.timed {
			w.stats.setHeaders(w.Header())
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

// wrap adds what every route has: admission while draining for the
// inference routes (the concurrency bound counts their inputs, in
// batchedWith), panic recovery, the JSON error response, and the request
// metrics.
func (s *Server) wrap(name string, admitted bool, h func(w http.ResponseWriter, r *http.Request) error) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		start := time.Now()
		w := &statusWriter{ResponseWriter: rw, stats: reqStats{start: start, route: name}, draining: &s.draining}
		r = r.WithContext(context.WithValue(r.Context(), statsKey{}, &w.stats))
		var herr error
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				s.met.panics.Inc()
				s.cfg.Logger.Error("serve: panic in a handler", "route", name, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
				if w.status == 0 {
					s.writeError(w, name, &apiError{500, errBackend, fmt.Sprintf("internal error: %v", p)})
				}
			}
			s.met.te.done(&w.stats, max(w.status, 200), herr)
			s.met.requests.WithLabelValues(name, strconv.Itoa(max(w.status, 200))).Inc()
			s.met.duration.WithLabelValues(name).Observe(time.Since(start).Seconds())
		}()
		if s.draining.Load() {
			w.Header().Set("Connection", "close")
		}
		if r.ContentLength > s.cfg.MaxBodyBytes {
			s.refuseBody(rw, w, r, name)
			return
		}
		if admitted {
			if s.draining.Load() {
				s.writeError(w, name, &apiError{503, errUnhealthy, "the server is shutting down"})
				return
			}
			s.met.inFlight.Inc()
			defer s.met.inFlight.Dec()
			if d := s.cfg.RequestTimeout; d > 0 {
				ctx, cancel := context.WithTimeoutCause(r.Context(), d, errRequestTimeout)
				defer cancel()
				r = r.WithContext(ctx)
			}
		}
		if herr = h(w, r); herr != nil {
			var big *tooLarge
			if errors.As(herr, &big) && w.status == 0 {
				s.drainAfter(rw, w, r, name, herr)
				return
			}
			herr = s.timedOut(r.Context(), herr)
			s.writeError(w, name, herr)
		}
	})
}

// drainBodyBytes is the most of a refused body (refuseBody) read and
// discarded so that the client, still sending, reads the 413 and a clean
// end of the connection; a larger one is left unread and may end in a
// reset. The server's ReadTimeout bounds the time the reading takes.
const drainBodyBytes = 64 << 20

// refuseBody answers a request whose declared body (Content-Length) is
// over MaxBodyBytes with TEI's 413 before reading any of it, and closes
// the connection. Reading a body is what sends "100 Continue": a client
// that asked for it gets none and sends nothing. One that sends its body
// at once has it read and discarded after the answer is flushed (up to
// drainBodyBytes): closing a connection with unread data in it makes the
// kernel reset it, and a client still writing loses the 413 to the reset
// (reading the body up to the limit, as decodeBody does for a body of no
// declared length, gave "100 Continue" and then that reset). rw is the
// server's writer, w the route's around it.
func (s *Server) refuseBody(rw, w http.ResponseWriter, r *http.Request, route string) {
	w.Header().Set("Connection", "close")
	expect := strings.EqualFold(r.Header.Get("Expect"), "100-continue")
	rc := http.NewResponseController(rw)
	drain := !expect && r.ContentLength <= drainBodyBytes
	if drain {
		// Without full duplex the server would not let the handler
		// read the body once the answer is written. HTTP/2 is full
		// duplex already, and says so by an error.
		_ = rc.EnableFullDuplex()
	}
	s.writeError(w, route, &apiError{http.StatusRequestEntityTooLarge, errValidation,
		fmt.Sprintf("request body of %d bytes is larger than %d bytes; send at most that, or raise --max-body-bytes", r.ContentLength, s.cfg.MaxBodyBytes)})
	if drain && rc.Flush() == nil {
		io.Copy(io.Discard, r.Body)
	}
}

// errRequestTimeout is the cause of a request context that
// Config.RequestTimeout ended.
var errRequestTimeout = errors.New("request timeout")

// errShutdownDeadline is the cause of a request context that Shutdown's
// deadline ended.
var errShutdownDeadline = errors.New("shutdown deadline")

// timedOut is err, or the 504 of --request-timeout when ctx ended by it,
// or the 503 of a shutdown whose deadline cut it short.
func (s *Server) timedOut(ctx context.Context, err error) error {
	if ctx.Err() == nil {
		return err
	}
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, errRequestTimeout):
		return &apiError{http.StatusGatewayTimeout, errBackend,
			fmt.Sprintf("the request did not finish within --request-timeout (%v); send fewer or shorter inputs, or retry later", s.cfg.RequestTimeout)}
	case errors.Is(cause, errShutdownDeadline):
		return &apiError{http.StatusServiceUnavailable, errUnhealthy,
			fmt.Sprintf("the server is shutting down and its --shutdown-timeout (%v) passed before this request finished; retry it on another replica", s.cfg.ShutdownTimeout)}
	}
	return err
}

// drainAfter answers err, a 413 for a body found over the limit while
// it was read (sent chunked), and closes the connection; it then reads
// and discards the rest of the body, up to drainBodyBytes, as refuseBody
// does, so that a client still sending reads the 413 and a clean end of
// the connection rather than a reset. Only the limit's bytes were ever
// held (decodeBody reads through http.MaxBytesReader). rw is the
// server's writer, w the route's around it.
func (s *Server) drainAfter(rw, w http.ResponseWriter, r *http.Request, route string, err error) {
	w.Header().Set("Connection", "close")
	rc := http.NewResponseController(rw)
	_ = rc.EnableFullDuplex()
	s.writeError(w, route, err)
	if rc.Flush() == nil {
		io.Copy(io.Discard, io.LimitReader(r.Body, drainBodyBytes))
	}
}

// writeError answers err as JSON: an apiError with its status, a
// client's gone context as 499 (no one reads it), anything else as TEI's
// 424 Backend.
func (s *Server) writeError(w http.ResponseWriter, route string, err error) {
	var ae *apiError
	switch {
	case errors.As(err, &ae):
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		ae = &apiError{499, errBackend, "the request was cancelled: " + err.Error()}
	case errors.Is(err, models.ErrClosed):
		ae = &apiError{503, errUnhealthy, "the model is closed: the server is shutting down"}
	default:
		ae = &apiError{http.StatusFailedDependency, errBackend, err.Error()}
	}
	if (ae.status >= 500 && ae.status != 503) || (ae.status == http.StatusFailedDependency && failureLabel(err) != "model_type") {
		s.cfg.Logger.Error("serve: request failed", "route", route, "status", ae.status, "error", ae.msg)
	}
	var ov *overloaded
	if errors.As(err, &ov) {
		w.Header().Set("Retry-After", strconv.Itoa(ov.retryAfter))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(ae.status)
	var body any = errorBody{Error: ae.msg, ErrorType: ae.typ}
	if isOpenAIRoute(route) {
		body = openAIError(err, ae)
	}
	json.NewEncoder(w).Encode(body)
}

// writeJSON answers v with 200.
func writeJSON(w http.ResponseWriter, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encoding the response: %w", err)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)+1))
	w.Write(append(b, '\n'))
	return nil
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) error {
	if s.draining.Load() {
		return &apiError{503, errUnhealthy, "the server is shutting down"}
	}
	return writeJSON(w, map[string]string{"status": "ok"})
}

// Instances is the number of instances.
func (s *Server) Instances() int { return s.inst.Len() }

// Addr-free helpers for tests and embedding: Metrics is the server's
// Prometheus registry handler.
func (s *Server) Metrics() http.Handler {
	return promhttp.HandlerFor(s.met.reg, promhttp.HandlerOpts{})
}
