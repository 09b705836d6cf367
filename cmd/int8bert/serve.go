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
	"strings"
	"syscall"
	"time"

	"github.com/int8bert/int8bert/models"
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
	precision *string
	maxLength *int
	quant     *quantFlags
	cfg       serve.Config
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
	f.addr = fs.String("addr", ":8080", "listen address, HOST:PORT (\":8080\": every interface; 127.0.0.1:PORT: loopback only)")
	f.precision = fs.String("precision", "", "fp32, bf16, int8-static or int8-dynamic (default: as each folder is stored); an FP32 model is rounded to bf16 or quantized at load (bf16 needs AVX512-BF16)")
	f.maxLength = fs.Int("max-length", 0, "longest input in tokens (default: the model's longest, at most 512)")
	f.quant = addQuantFlags(fs)
	fs.IntVar(&c.Instances, "instances", 0, "workers sharing one copy of the weights (default: physical cores / threads-per-instance)")
	fs.IntVar(&c.ThreadsPerInstance, "threads-per-instance", 1, "threads per GEMM of each instance")
	fs.BoolVar(&c.Pin, "pin", false, "pin each instance to its own cores (Linux)")
	fs.IntVar(&c.MaxBatchTokens, "max-batch-tokens", 4096, "most tokens of one batch and one forward pass")
	fs.IntVar(&c.MaxBatchRequests, "max-batch-requests", 256, "most requests gathered into one batch")
	fs.IntVar(&c.MaxClientBatchSize, "max-client-batch-size", 32, "most inputs of one request (more: 422)")
	fs.IntVar(&c.MaxConcurrentRequests, "max-concurrent-requests", 512, "most requests admitted at once (more: 429)")
	fs.IntVar(&c.TokenizationWorkers, "tokenization-workers", 0, "requests tokenized at once (default: the CPUs)")
	fs.DurationVar(&c.BatchWindow, "batch-window", 2*time.Millisecond, "how long an idle instance waits for requests being tokenized to join its batch (negative: never)")
	fs.BoolVar(&c.AutoTruncate, "auto-truncate", false, "cut inputs longer than the model's limit when a request does not say \"truncate\" (else 422)")
	fs.StringVar(&c.Pooling, "pooling", "mean", "pooling of /embed for models without a sentence-transformers pooling config: mean or cls")
	fs.Int64Var(&c.MaxBodyBytes, "max-body-bytes", 2_000_000, "largest request body (more: 413)")
	fs.DurationVar(&c.ReadHeaderTimeout, "read-header-timeout", 10*time.Second, "time to read a request's headers")
	fs.DurationVar(&c.ReadTimeout, "read-timeout", 30*time.Second, "time to read a whole request")
	fs.DurationVar(&c.WriteTimeout, "write-timeout", 120*time.Second, "time from a request's headers to the end of its response")
	fs.DurationVar(&c.IdleTimeout, "idle-timeout", 120*time.Second, "how long an idle keep-alive connection stays open")
	fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", 30*time.Second, "on SIGTERM, how long to wait for the requests in flight")
	fs.DurationVar(&c.DrainDelay, "drain-delay", time.Second, "on SIGTERM, how long to answer 503 (health too) before closing the listener (negative: none)")
	fs.BoolVar(&c.Warmup, "warmup", false, "tune every GEMM shape of the batches before serving (else: on first use, or from a tuning record)")
	return f
}

// config checks the flags and returns the server's configuration.
func (f *serveFlags) config(stderr io.Writer) (serve.Config, error) {
	c := f.cfg
	if len(f.models) == 0 {
		return c, errors.New("serve: give at least one --model [NAME=]DIR-or-hub-id")
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
	prec, err := parsePrecisionFlag(*f.precision)
	if *f.precision == "" {
		prec, err = models.PrecisionAsStored, nil
	}
	if err != nil {
		return c, err
	}
	if c.Load, err = f.quant.modelOptions(prec, c.ThreadsPerInstance, *f.maxLength, stderr); err != nil {
		return c, err
	}
	c.Models = f.models
	c.Logger = newLogger(stderr)
	return c, nil
}

// runServe is "int8bert serve": it loads the models, listens, and on
// SIGTERM or SIGINT drains (docs/DESIGN.md section 9.3) and returns nil
// once every admitted request has been answered.
func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f := newServeFlags(stderr)
	if err := parseFlags(f.fs, args); err != nil {
		return err
	}
	c, err := f.config(stderr)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, os.Interrupt)
	defer stop()
	sel, err := newServeSelector(c.Logger)
	if err != nil {
		return err
	}
	defer sel.Close()
	c.Load.Selector = sel
	l, err := net.Listen("tcp", *f.addr)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	defer l.Close()
	start := time.Now()
	srv, err := serve.New(ctx, c)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "int8bert serve: listening on http://%s (%d models, %d instances x %d threads, ready in %v)\n",
		l.Addr(), len(c.Models), srv.Instances(), max(c.ThreadsPerInstance, 1), time.Since(start).Round(time.Millisecond))
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	select {
	case err := <-errc:
		srv.Close()
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	fmt.Fprintln(stdout, "int8bert serve: draining")
	if err := srv.Shutdown(context.Background()); err != nil {
		return fmt.Errorf("serve: shutdown: %w", err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	fmt.Fprintln(stdout, "int8bert serve: stopped; every admitted request was answered")
	return nil
}
