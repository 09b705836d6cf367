package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/int8bert/int8bert/internal/cgroup"
	"github.com/int8bert/int8bert/selector"
	"github.com/int8bert/int8bert/serve"
)

// modelList is the repeatable --model flag.
type modelList []serve.ModelSpec

func (l *modelList) String() string {
	var s []string
	for _, m := range *l {
		s = append(s, m.Name+"="+m.Source)
	}
	return strings.Join(s, ",")
}

func (l *modelList) Set(v string) error {
	m, err := serve.ParseModelSpec(v)
	if err != nil {
		return err
	}
	*l = append(*l, m)
	return nil
}

// serveFlags are serve's flags, bound to a serve.Config.
type serveFlags struct {
	fs        *flag.FlagSet
	models    modelList
	addr      *string
	grpcAddr  *string
	precision *string
	maxLength *int
	quant     *quantFlags
	tei       teiFlags
	cfg       serve.Config
	// teiForm: invoked as TEI's router is, without the word "serve"
	// (TEI's defaults of the address and the metrics port apply).
	teiForm bool
	// given are the flags of the command line (before the variables).
	given map[string]bool

	// Set by config: where to listen, and where to serve /metrics too
	// ("": nowhere else); hubEnv are the hub client's variables to set.
	listen, promListen string
	// pprofAddr: --debug-pprof, where net/http/pprof listens ("": off).
	pprofAddr *string
	hubEnv    map[string]string
	notes     []string
}

// serveFlagSet is serve's flag set (also read by the tests that check
// docker/kubernetes.yaml against it).
func serveFlagSet() *flag.FlagSet { return newServeFlags(io.Discard).fs }

func newServeFlags(stderr io.Writer) *serveFlags {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	f := &serveFlags{fs: fs}
	c := &f.cfg
	fs.Var(&f.models, "model", "[NAME=]DIR-or-hub-id, repeatable: the models to serve (the first is the default of a request without \"model\")")
	f.grpcAddr = fs.String("grpc-addr", "", "also serve TEI's gRPC API (tei.v1, health, reflection) on HOST:PORT, from the same models and batcher (or GRPC_ADDR; default: off)")
	f.addr = fs.String("addr", ":8080", "listen address, HOST:PORT (\":8080\": every interface; 127.0.0.1:PORT: loopback only); not with --hostname or --port")
	f.precision = fs.String("precision", "", "fp32, bf16, int8-static or int8-dynamic (default: as each folder is stored); an FP32 model is rounded to bf16 or quantized at load (bf16 needs AVX512-BF16)")
	f.maxLength = fs.Int("max-length", 0, "longest input in tokens (default: the model's longest, at most 512)")
	f.quant = addQuantFlags(fs)
	fs.IntVar(&c.Instances, "instances", 0, "workers sharing one copy of the weights (default: physical cores / threads-per-instance)")
	fs.IntVar(&c.ThreadsPerInstance, "threads-per-instance", 1, "threads per GEMM of each instance")
	fs.BoolVar(&c.Pin, "pin", false, "pin each instance to its own cores (Linux)")
	fs.IntVar(&c.MaxBatchTokens, "max-batch-tokens", 16384, "most tokens of one batch and one forward pass (or MAX_BATCH_TOKENS)")
	fs.IntVar(&c.MaxBatchRequests, "max-batch-requests", 0, "most requests gathered into one batch (or MAX_BATCH_REQUESTS; default: no bound but --max-batch-tokens)")
	fs.IntVar(&c.MaxClientBatchSize, "max-client-batch-size", 32, "most inputs of one request, more: 422 (or MAX_CLIENT_BATCH_SIZE)")
	fs.IntVar(&c.MaxConcurrentRequests, "max-concurrent-requests", 512, "most requests admitted at once, more: 429 (or MAX_CONCURRENT_REQUESTS)")
	fs.IntVar(&c.MaxQueuedPasses, "max-queued-passes", 4, "most work admitted, in passes (of the pass budget, at most 2,048 tokens) per instance; more: 429 with Retry-After, so that an admitted request's latency stays bounded (negative: no bound)")
	fs.IntVar(&c.TokenizationWorkers, "tokenization-workers", 0, "requests tokenized at once (or TOKENIZATION_WORKERS; default: the CPUs less one, 1 to 64)")
	fs.DurationVar(&c.BatchWindow, "batch-window", 2*time.Millisecond, "how long an idle instance waits for requests being tokenized to join its batch (negative: never)")
	fs.BoolVar(&c.AutoTruncate, "auto-truncate", true, "cut inputs longer than the model's limit when a request does not say \"truncate\", else 422 (or AUTO_TRUNCATE)")
	fs.StringVar(&c.Pooling, "pooling", "", "pooling of the embedding models, overriding their own as TEI's --pooling does: cls, mean, last-token or splade (or POOLING; default: each model's own: its sentence-transformers pooling config, else cls)")
	fs.Int64Var(&c.MaxBodyBytes, "max-body-bytes", 2_000_000, "largest request body (more: 413); TEI's --payload-limit")
	fs.DurationVar(&c.ReadHeaderTimeout, "read-header-timeout", 10*time.Second, "time to read a request's headers")
	fs.DurationVar(&c.ReadTimeout, "read-timeout", 30*time.Second, "time to read a whole request")
	fs.DurationVar(&c.WriteTimeout, "write-timeout", 120*time.Second, "time from a request's headers to the end of its response")
	fs.DurationVar(&c.IdleTimeout, "idle-timeout", 120*time.Second, "how long an idle keep-alive connection stays open")
	fs.DurationVar(&c.RequestTimeout, "request-timeout", 0, "most time an inference request takes from admission to answer, past it: 504, and its rows leave their forward pass (default 0: no bound)")
	fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", 30*time.Second, "on SIGTERM, how long to wait for the requests in flight")
	fs.DurationVar(&c.DrainDelay, "drain-delay", time.Second, "on SIGTERM, how long to answer 503 (health too) before closing the listener (negative: none)")
	f.pprofAddr = fs.String("debug-pprof", "", "serve Go's profiles (net/http/pprof) on this loopback HOST:PORT, apart from the API (default: off)")
	fs.BoolVar(&c.Warmup, "warmup", false, "tune every GEMM shape of the batches before serving (else: on first use, or from a tuning record)")
	f.addTEIFlags()
	return f
}

// parse reads the command line, then TEI's variables (getenv) for the
// settings it leaves out.
func (f *serveFlags) parse(args []string, getenv func(string) string) error {
	if err := parseFlags(f.fs, boolArgs(f.fs, args)); err != nil {
		return err
	}
	f.given = map[string]bool{}
	f.fs.Visit(func(fl *flag.Flag) { f.given[fl.Name] = true })
	if v := getenv("MODEL_ID"); v != "" && f.given["model"] && !f.given["model-id"] {
		return fmt.Errorf("serve: --model %s and MODEL_ID=%s (environment) both name the model to serve: give one (TEI's arguments, e.g. --model-id, replace the image's default command)",
			f.models.String(), v)
	}
	if err := applyTEIEnv(f.fs, f.given, getenv); err != nil {
		return err
	}
	// GRPC_ADDR is ours (TEI's gRPC binary listens on --port).
	if v := getenv("GRPC_ADDR"); v != "" && !f.given["grpc-addr"] {
		f.fs.Set("grpc-addr", v)
	}
	// TEI's gRPC server reads GRPC_MAX_PARALLEL_STREAM_REQUESTS from the
	// environment only (router/src/grpc/server.rs), 1024 by default.
	if v := strings.TrimSpace(getenv("GRPC_MAX_PARALLEL_STREAM_REQUESTS")); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return fmt.Errorf("serve: GRPC_MAX_PARALLEL_STREAM_REQUESTS=%q: want a positive count of a stream's messages in flight", v)
		}
		f.cfg.GRPCStreamParallel = n
	}
	return nil
}

// config checks the flags and returns the server's configuration.
func (f *serveFlags) config(stderr io.Writer) (serve.Config, error) {
	c := f.cfg
	if f.given == nil {
		f.given = map[string]bool{}
		f.fs.Visit(func(fl *flag.Flag) { f.given[fl.Name] = true })
	}
	t := &f.tei
	switch {
	case *t.modelID != "" && len(f.models) > 0:
		return c, fmt.Errorf("serve: --model-id %s and --model %s: give one (--model-id is TEI's, for one model)", *t.modelID, f.models.String())
	case *t.modelID != "":
		name := *t.modelID // TEI's served name defaults to the id as given
		if *t.servedName != "" {
			name = *t.servedName
		}
		f.models = modelList{{Name: name, Source: *t.modelID}}
	case *t.servedName != "":
		if len(f.models) != 1 {
			return c, fmt.Errorf("serve: --served-model-name (SERVED_MODEL_NAME) %q names one model; %d are given", *t.servedName, len(f.models))
		}
		m := f.models[0]
		if def, _ := serve.ParseModelSpec(m.Source); def.Name != m.Name && m.Name != *t.servedName {
			return c, fmt.Errorf("serve: --model %s=%s and --served-model-name %s name the model apart: give one name", m.Name, m.Source, *t.servedName)
		}
		f.models[0].Name = *t.servedName
	}
	if len(f.models) == 0 {
		return c, errors.New("serve: give at least one --model [NAME=]DIR-or-hub-id (or TEI's --model-id / MODEL_ID)")
	}
	if f.fs.NArg() > 0 {
		return c, fmt.Errorf("serve: unexpected argument %q (models are given with --model)", f.fs.Arg(0))
	}
	if err := checkMaxLength(f.fs, *f.maxLength); err != nil {
		return c, err
	}
	if c.ThreadsPerInstance < 1 {
		return c, fmt.Errorf("serve: --threads-per-instance %d: want 1 or more", c.ThreadsPerInstance)
	}
	if err := checkThreads("serve", c.ThreadsPerInstance); err != nil {
		return c, err
	}
	precFlag := *f.precision
	if isSet(f.fs, "dtype") {
		p, err := dtypePrecision(*t.dtype)
		if err != nil {
			return c, err
		}
		switch {
		case f.given["precision"] && f.given["dtype"] && precFlag != p:
			return c, fmt.Errorf("serve: --precision %s and --dtype %s disagree: give one", precFlag, *t.dtype)
		case !f.given["precision"]:
			precFlag = p
		}
	}
	prec, err := parsePrecisionFlag(precFlag)
	if err != nil {
		return c, err
	}
	if err := f.teiSettings(&c); err != nil {
		return c, err
	}
	if c.Load, err = f.quant.modelOptions(prec, c.ThreadsPerInstance, *f.maxLength, stderr); err != nil {
		return c, err
	}
	c.Load.Revision = *t.revision
	c.Models = f.models
	c.Logger = newLogger(stderr)
	if *t.jsonOutput {
		c.Logger = newJSONLogger(stderr)
	}
	c.Load.Logger = c.Logger
	return c, nil
}

// dtypePrecision maps TEI's --dtype to our --precision.
func dtypePrecision(d string) (string, error) {
	switch d {
	case "float32":
		return "fp32", nil
	case "bfloat16":
		return "bf16", nil
	case "float16":
		return "", errors.New("serve: --dtype (DTYPE) float16: not supported on CPUs here; int8bert runs float32 (--precision fp32), bfloat16 (bf16, on CPUs with AVX512-BF16) and INT8 (--precision int8-static or int8-dynamic)")
	}
	return "", fmt.Errorf("serve: --dtype (DTYPE) %q: want float32 or bfloat16 (TEI's float16 is not supported here)", d)
}

// teiSettings checks and applies the TEI settings that are not ours
// under the same name: the listen addresses, the batch defaults TEI has,
// the prompts, the hub, and the settings we refuse.
func (f *serveFlags) teiSettings(c *serve.Config) error {
	t := &f.tei
	set := func(name string) bool { return isSet(f.fs, name) }
	switch {
	case *t.densePath != "":
		return fmt.Errorf("serve: --dense-path (DENSE_PATH) %q: not supported; a Dense module is read from the model's modules.json", *t.densePath)
	case *t.otlpEndpoint != "":
		return fmt.Errorf("serve: --otlp-endpoint (OTLP_ENDPOINT) %q: int8bert exports no OpenTelemetry traces; leave it out (metrics: GET /metrics)", *t.otlpEndpoint)
	case *t.udsPath != teiUDSPath:
		return fmt.Errorf("serve: --uds-path (UDS_PATH) %q: int8bert runs no backend process to talk to over a Unix socket; only TEI's default %s is accepted", *t.udsPath, teiUDSPath)
	case *t.promptName != "" && *t.prompt != "":
		return errors.New("serve: --default-prompt-name (DEFAULT_PROMPT_NAME) and --default-prompt (DEFAULT_PROMPT) cannot be used together: give one")
	case *t.hfToken != "" && *t.hfAPIToken != "":
		return errors.New("serve: --hf-token (HF_TOKEN) and --hf-api-token (HF_API_TOKEN) cannot be used together: give --hf-token")
	case set("payload-limit") && *t.payloadLimit < 1:
		return fmt.Errorf("serve: --payload-limit (PAYLOAD_LIMIT) %d: want a positive number of bytes", *t.payloadLimit)
	case f.given["payload-limit"] && f.given["max-body-bytes"] && *t.payloadLimit != c.MaxBodyBytes:
		return fmt.Errorf("serve: --payload-limit %d and --max-body-bytes %d disagree: give one", *t.payloadLimit, c.MaxBodyBytes)
	}
	if set("payload-limit") && !f.given["max-body-bytes"] {
		c.MaxBodyBytes = *t.payloadLimit
	}
	c.DefaultPromptName, c.DefaultPrompt = *t.promptName, *t.prompt
	c.APIKey = *t.apiKey
	c.CORSAllowOrigin = append([]string(nil), t.cors...)
	if !set("tokenization-workers") {
		// TEI's default, on the CPUs the container allows.
		c.TokenizationWorkers = min(max(cgroup.Current().CPUs-1, 1), 64)
	}
	if !set("max-batch-requests") {
		c.MaxBatchRequests = -1 // TEI: no bound but --max-batch-tokens
	}
	f.hubEnv = map[string]string{}
	if tok := *t.hfToken; tok != "" {
		f.hubEnv["HF_TOKEN"] = tok
	} else if tok := *t.hfAPIToken; tok != "" {
		f.hubEnv["HF_TOKEN"] = tok
		f.notes = append(f.notes, "the `--hf-api-token` argument (and the `HF_API_TOKEN` env var) is deprecated: use `--hf-token` (or `HF_TOKEN`)")
	}
	if *t.hubCache != "" {
		f.hubEnv["HF_HUB_CACHE"] = *t.hubCache
	}
	return f.listenAddrs()
}

// listenAddrs sets f.listen and f.promListen from --addr or TEI's
// --hostname and --port (either, not both), and --prometheus-port.
func (f *serveFlags) listenAddrs() error {
	t := &f.tei
	portGiven := f.given["port"] || f.given["p"]
	if f.given["addr"] && (f.given["hostname"] || portGiven) {
		return fmt.Errorf("serve: --addr %s and TEI's --hostname/--port name the listen address twice: give --addr HOST:PORT, or --hostname and --port", *f.addr)
	}
	host, port := "", "8080" // serve's --addr :8080
	if f.teiForm {
		host, port = "0.0.0.0", "3000" // TEI's router
	}
	if f.given["addr"] {
		var err error
		if host, port, err = net.SplitHostPort(*f.addr); err != nil {
			return fmt.Errorf("serve: --addr %q: want HOST:PORT or :PORT: %w", *f.addr, err)
		}
	} else {
		if isSet(f.fs, "hostname") {
			h, err := listenHost(*t.hostname, func(n string) { f.notes = append(f.notes, n) })
			if err != nil {
				return err
			}
			host = h
		}
		if portGiven || isSet(f.fs, "port") {
			if *t.port < 0 || *t.port > 65535 {
				return fmt.Errorf("serve: --port (PORT) %d: want 0 to 65535", *t.port)
			}
			port = strconv.Itoa(*t.port)
		}
	}
	f.listen = net.JoinHostPort(host, port)
	f.promListen = ""
	if f.teiForm || isSet(f.fs, "prometheus-port") {
		if *t.prometheusPort < 0 || *t.prometheusPort > 65535 {
			return fmt.Errorf("serve: --prometheus-port (PROMETHEUS_PORT) %d: want 0 to 65535", *t.prometheusPort)
		}
		if p := strconv.Itoa(*t.prometheusPort); p == port && p != "0" {
			return fmt.Errorf("serve: --prometheus-port (PROMETHEUS_PORT) %s is the listen port too: give another", p)
		}
		f.promListen = net.JoinHostPort(host, strconv.Itoa(*t.prometheusPort))
	}
	return nil
}

// runServe is "int8bert serve": it loads the models, listens, and on
// SIGTERM or SIGINT drains (docs/DESIGN.md section 9.3) and returns nil
// once every admitted request has been answered. teiForm is TEI's
// invocation, "int8bert --model-id X ..." without the word serve.
func runServe(ctx context.Context, args []string, stdout, stderr io.Writer, teiForm bool) error {
	f := newServeFlags(stderr)
	f.teiForm = teiForm
	if err := f.parse(args, os.Getenv); err != nil {
		return err
	}
	c, err := f.config(stderr)
	if err != nil {
		return err
	}
	say := func(msg string, args ...any) { fmt.Fprintf(stdout, "int8bert serve: "+msg+"\n", args...) }
	if *f.tei.jsonOutput {
		// TEI's JSON logs go to stdout, its notes among them.
		c.Logger = newJSONLogger(stdout)
		c.Load.Logger = c.Logger
		selector.SetDefaultWarn(func(msg string) { c.Logger.Warn(msg, "component", "selector") })
		say = func(msg string, args ...any) { c.Logger.Info("int8bert serve: " + fmt.Sprintf(msg, args...)) }
	}
	for _, n := range f.notes {
		c.Logger.Warn("serve: " + n)
	}
	// The container's limits (docs/DESIGN.md section 9.10): a soft memory
	// limit for the runtime from the cgroup's, unless GOMEMLIMIT is set.
	c.Resources = cgroup.Current()
	c.Resources.Apply()
	c.Logger.Info("serve: resources", "cpus", c.Resources.CPULine(), "memory", c.Resources.MemoryLine())
	if n := c.Resources.Note; n != "" {
		c.Logger.Warn("serve: " + n)
	}
	for k, v := range f.hubEnv {
		os.Setenv(k, v) // read by the hub client (checkpoint.NewHub)
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, os.Interrupt)
	defer stop()
	sel, err := newServeSelector(c.Logger)
	if err != nil {
		return err
	}
	defer sel.Close()
	c.Load.Selector = sel
	l, err := listenTCP(f.listen)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	defer l.Close()
	var pl net.Listener
	if f.promListen != "" {
		if pl, err = listenTCP(f.promListen); err != nil {
			return fmt.Errorf("serve: --prometheus-port: %w", err)
		}
		defer pl.Close()
	}
	var gl net.Listener
	if *f.grpcAddr != "" {
		if gl, err = listenTCP(*f.grpcAddr); err != nil {
			return fmt.Errorf("serve: --grpc-addr: %w", err)
		}
		defer gl.Close()
	}
	start := time.Now()
	srv, err := serve.New(ctx, c)
	if err != nil {
		return err
	}
	say("listening on http://%s (%d models, %d instances x %d threads, ready in %v)",
		l.Addr(), len(c.Models), srv.Instances(), max(c.ThreadsPerInstance, 1), time.Since(start).Round(time.Millisecond))
	var ps *http.Server
	if pl != nil {
		// TEI's Prometheus exporter answers its metrics on every path.
		ps = &http.Server{Handler: srv.Metrics(), ReadHeaderTimeout: c.ReadHeaderTimeout}
		go ps.Serve(pl)
		defer ps.Close()
		say("metrics also on http://%s/metrics (--prometheus-port)", pl.Addr())
	}
	if *f.pprofAddr != "" {
		dl, err := listenPprof(*f.pprofAddr)
		if err != nil {
			srv.Close()
			return fmt.Errorf("serve: --debug-pprof: %w", err)
		}
		ds := &http.Server{Handler: pprofMux(), ReadHeaderTimeout: c.ReadHeaderTimeout}
		go ds.Serve(dl)
		defer ds.Close()
		say("profiles on http://%s/debug/pprof/ (--debug-pprof)", dl.Addr())
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	grpcErr := make(chan error, 1)
	if gl != nil {
		go func() { grpcErr <- srv.ServeGRPC(gl) }()
		say("gRPC (tei.v1, health, reflection) on %s (--grpc-addr)", gl.Addr())
	}
	select {
	case err := <-grpcErr:
		srv.Close()
		return fmt.Errorf("serve: gRPC: %w", err)
	case err := <-errc:
		srv.Close()
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	say("draining")
	if err := srv.Shutdown(context.Background()); err != nil {
		return fmt.Errorf("serve: shutdown: %w", err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	say("stopped; every admitted request was answered")
	return nil
}
