package serve

import (
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/int8bert/int8bert/internal/cgroup"
	"github.com/int8bert/int8bert/models"
)

// ModelSpec names one model of the server.
type ModelSpec struct {
	// Name is what requests' "model" field says; "" means the source's
	// last path element.
	Name string
	// Source is a folder or a Hugging Face model id (models.Load).
	Source string
}

// ParseModelSpec reads the command line's [NAME=]DIR-or-id.
func ParseModelSpec(s string) (ModelSpec, error) {
	name, src, ok := strings.Cut(s, "=")
	if !ok {
		src, name = s, ""
	}
	name, src = strings.TrimSpace(name), strings.TrimSpace(src)
	switch {
	case src == "":
		return ModelSpec{}, fmt.Errorf("model %q: want DIR-or-hub-id or NAME=DIR-or-hub-id", s)
	case ok && name == "":
		return ModelSpec{}, fmt.Errorf("model %q: the name before '=' is empty", s)
	case strings.ContainsAny(name, " \t\"/"):
		return ModelSpec{}, fmt.Errorf("model %q: a name has no spaces, quotes or slashes", s)
	}
	if name == "" {
		name = src[strings.LastIndex(strings.TrimRight(src, "/"), "/")+1:]
		name = strings.TrimRight(name, "/")
	}
	return ModelSpec{Name: name, Source: src}, nil
}

// Config is a server's settings; the zero value of a field is its
// documented default. The defaults follow TEI's where TEI has the
// setting.
type Config struct {
	// Models served; the first is the default of a request without a
	// "model" field.
	Models []ModelSpec
	// Load are the options every model is loaded with (precision,
	// calibration, max length, selector, logger). Threads is replaced by
	// ThreadsPerInstance and MaxBatchTokens by the batcher's.
	Load models.Options
	// AutoTruncate cuts inputs longer than a model's maximum input length
	// when a request does not say "truncate" (and on /v1/embeddings,
	// which has no such field); without it they get 422.
	AutoTruncate bool
	// Pooling overrides the embedding models' own pooling, as TEI's
	// --pooling does: "cls", "mean", "last-token" or "splade" (a
	// masked-LM model's SPLADE vectors on /embed_sparse; any other model
	// fails start-up, as TEI does); "" (the default) keeps each model's own
	// (models.Pipeline.Pooling).
	Pooling string
	// DefaultPromptName names the prompt (of each model's
	// config_sentence_transformers.json "prompts") prefixed to the texts
	// of every request that names none in "prompt_name", as TEI's
	// --default-prompt-name: on /embed, /tokenize and /v1/embeddings, and
	// on /predict and /rerank, which have no such field (a prompt with a
	// pair of texts or with token ids is refused, 422). A served model
	// without that prompt fails New. DefaultPrompt is the same with the
	// prompt's text (TEI's --default-prompt); the two are exclusive.
	DefaultPromptName, DefaultPrompt string

	// Instances is the number of workers sharing the models' weights;
	// 0 means one per ThreadsPerInstance of Resources.CPUs (at most the
	// physical cores: models.InstancesFor).
	Instances int
	// ThreadsPerInstance is each instance's threads per GEMM (0: 1).
	ThreadsPerInstance int
	// Pin binds each instance to its own cores (Linux).
	Pin bool

	// MaxBatchTokens bounds the tokens of one batch (and of one forward
	// pass): 0 means 4096.
	MaxBatchTokens int
	// MaxBatchRequests bounds the requests of one batch: 0 means 256, a
	// negative value no bound but MaxBatchTokens (TEI's default, shown as
	// null in /info).
	MaxBatchRequests int
	// MaxClientBatchSize bounds the inputs of one request: 0 means 32.
	MaxClientBatchSize int
	// MaxConcurrentRequests bounds the requests admitted at once; the
	// next gets 429. 0 means 512.
	MaxConcurrentRequests int
	// MaxQueuedPasses bounds the work admitted: the tokens of the jobs
	// queued or running stay under MaxQueuedPasses passes (the pass
	// budget, 2,048 tokens at most) per instance, and a request past it
	// gets 429 with Retry-After, so that an admitted request's latency is
	// bounded (docs/DESIGN.md section 9.11). A request is always admitted
	// when nothing is in flight. 0 means 4, negative no bound.
	MaxQueuedPasses int
	// BatchWindow is how long an idle instance waits for requests still
	// being tokenized to join its batch (never when none is): 0 means
	// 2ms, negative means never wait.
	BatchWindow time.Duration
	// TokenizationWorkers bounds the requests tokenized at once: 0 means
	// Resources.CPUs.
	TokenizationWorkers int
	// MaxBodyBytes bounds a request body: 0 means 2,000,000 (TEI's
	// payload limit); a larger body gets 413.
	MaxBodyBytes int64

	// Timeouts against slow clients (0: ReadHeader 10s, Read 30s,
	// Write 120s, Idle 120s) and the most Shutdown waits for the requests
	// in flight (0: 30s); DrainDelay is how long Shutdown keeps answering
	// 503 with "Connection: close" before it closes the listeners, so
	// that load balancers and keep-alive clients see the drain (0: 1s,
	// negative: none).
	ReadHeaderTimeout, ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	ShutdownTimeout, DrainDelay                               time.Duration
	// RequestTimeout, when > 0, bounds an inference request end to end,
	// from its admission to its answer: past it the request is answered
	// 504 (TEI's error JSON, type Backend; gRPC's DeadlineExceeded) and
	// its rows leave their pass at the next layer (docs/DESIGN.md section
	// 9.1). 0 (the default) sets no bound; negative is an error.
	RequestTimeout time.Duration

	// GRPCStreamParallel bounds the messages of one gRPC stream in flight
	// at once (TEI's GRPC_MAX_PARALLEL_STREAM_REQUESTS; 0: TEI's 1024);
	// each still takes its permits as a unary call does.
	GRPCStreamParallel int

	// APIKey, when set, is the Bearer token every guarded route wants
	// ("Authorization: Bearer KEY", compared in constant time); a request
	// without it gets a bare 401, as TEI's --api-key. /health, /ping,
	// GET /, /metrics and /docs stay public.
	APIKey string
	// CORSAllowOrigin are the origins CORS allows, as TEI's
	// --cors-allow-origin: none (the default) or "*" among them allows
	// any origin.
	CORSAllowOrigin []string

	// Resources are the container's limits and what derives from them
	// (internal/cgroup; docs/DESIGN.md section 9.10): the default
	// Instances and TokenizationWorkers fill Resources.CPUs, and its soft
	// memory limit bounds the pass budget. The zero value (CPUs 0) means
	// this process's (cgroup.Current()). New does not set the runtime's
	// memory limit: the command does (Resources.Apply).
	Resources cgroup.Resources

	// Warmup tunes every GEMM shape of the batches before serving.
	Warmup bool
	// Logger receives the server's and the library's notes (nil: none).
	Logger *slog.Logger
}

// withDefaults fills the zero fields and checks the others.
func (c Config) withDefaults() (Config, error) {
	bad := func(format string, args ...any) (Config, error) {
		return c, fmt.Errorf("serve: %s", fmt.Sprintf(format, args...))
	}
	if len(c.Models) == 0 {
		return bad("no model: give at least one (--model [NAME=]DIR-or-hub-id)")
	}
	seen := map[string]bool{}
	for _, m := range c.Models {
		if m.Name == "" || m.Source == "" {
			return bad("model %+v: name and source must be set", m)
		}
		if seen[m.Name] {
			return bad("two models are named %q: name them apart with NAME=DIR", m.Name)
		}
		seen[m.Name] = true
	}
	if c.DefaultPromptName != "" && c.DefaultPrompt != "" {
		return bad("a default prompt name (%q) and a default prompt (%q) are given: give one (--default-prompt-name or --default-prompt)", c.DefaultPromptName, c.DefaultPrompt)
	}
	if _, err := models.ParseTEIPooling(c.Pooling); err != nil {
		return bad("pooling %q: want cls, mean, last-token or splade (or none: each model's own)", c.Pooling)
	}
	if c.Resources.CPUs <= 0 {
		c.Resources = cgroup.Current()
	}
	def := func(v *int, d int, name string) error {
		if *v < 0 {
			return fmt.Errorf("serve: %s %d: want 0 (the default, %d) or more", name, *v, d)
		}
		if *v == 0 {
			*v = d
		}
		return nil
	}
	unboundedRequests := c.MaxBatchRequests < 0
	if unboundedRequests {
		c.MaxBatchRequests = 0
	}
	for _, f := range []struct {
		v    *int
		d    int
		name string
	}{
		{&c.MaxBatchTokens, 4096, "max batch tokens"},
		{&c.MaxBatchRequests, 256, "max batch requests"},
		{&c.MaxClientBatchSize, 32, "max client batch size"},
		{&c.MaxConcurrentRequests, 512, "max concurrent requests"},
		{&c.TokenizationWorkers, c.Resources.CPUs, "tokenization workers"},
	} {
		if err := def(f.v, f.d, f.name); err != nil {
			return c, err
		}
	}
	if unboundedRequests {
		c.MaxBatchRequests = -1
	}
	if c.MaxQueuedPasses == 0 {
		c.MaxQueuedPasses = 4
	}
	if c.MaxBodyBytes < 0 {
		return bad("max body bytes %d: want 0 (2,000,000) or more", c.MaxBodyBytes)
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = 2_000_000
	}
	for _, d := range []struct {
		v   *time.Duration
		def time.Duration
	}{
		{&c.BatchWindow, 2 * time.Millisecond}, {&c.ReadHeaderTimeout, 10 * time.Second},
		{&c.ReadTimeout, 30 * time.Second}, {&c.WriteTimeout, 120 * time.Second},
		{&c.IdleTimeout, 120 * time.Second}, {&c.ShutdownTimeout, 30 * time.Second},
		{&c.DrainDelay, time.Second},
	} {
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	if c.BatchWindow < 0 {
		c.BatchWindow = 0
	}
	if c.GRPCStreamParallel == 0 {
		c.GRPCStreamParallel = 1024
	}
	if c.GRPCStreamParallel < 0 {
		return bad("gRPC stream parallelism %d: want 0 (1024) or a positive bound", c.GRPCStreamParallel)
	}
	if c.DrainDelay < 0 {
		c.DrainDelay = 0
	}
	if c.RequestTimeout < 0 {
		return bad("request timeout %v: want 0 (no bound) or a positive duration", c.RequestTimeout)
	}
	for _, d := range []time.Duration{c.ReadHeaderTimeout, c.ReadTimeout, c.WriteTimeout, c.IdleTimeout, c.ShutdownTimeout} {
		if d < 0 {
			return bad("timeout %v: want 0 (the default) or a positive duration", d)
		}
	}
	if err := c.checkOps(); err != nil {
		return c, err
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c, nil
}
