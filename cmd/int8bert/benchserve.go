package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/int8bert/int8bert/bench"
	"github.com/int8bert/int8bert/cpu"
	"github.com/int8bert/int8bert/serve"
)

// benchServeReport is bench serve's JSON.
type benchServeReport struct {
	CPU       string              `json:"cpu"`
	Date      string              `json:"date"`
	Server    string              `json:"server"`
	Route     string              `json:"route"`
	Texts     int                 `json:"texts"`
	Data      string              `json:"data"`
	Instances int                 `json:"instances,omitempty"`
	Threads   int                 `json:"threads_per_instance,omitempty"`
	Levels    []*serve.LoadResult `json:"levels"`
}

// runBenchServe is "int8bert bench serve": a load test of the HTTP server
// (docs/DESIGN.md section 9.4). It starts the server in this process on a
// loopback port with serve's flags (or targets --url), then for each
// --clients level runs that many concurrent clients replaying the texts
// of --data, one per request, bounded by --requests and --duration, and
// prints throughput, latency, the server's batch sizes and padding.
func runBenchServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f := newServeFlags(stderr)
	fs := f.fs
	clients := fs.String("clients", "1,8,64", "concurrent clients of each level, comma-separated")
	requests := fs.Int("requests", 2000, "most requests per level (0: only --duration bounds it)")
	duration := fs.Duration("duration", 20*time.Second, "most time per level")
	data := fs.String("data", "assets/sst2/dev.tsv", "texts to replay: one per line, or the first column of a TSV (SST-2 dev)")
	route := fs.String("route", "/predict", "route: /predict, /embed or /v1/embeddings")
	url := fs.String("url", "", "load an already running server at this URL instead of starting one (loopback)")
	asJSON := fs.Bool("json", false, "print JSON")
	arch := fs.String("arch", "", "instead of --model: a classifier of this architecture ("+strings.Join(bench.Archs(), ", ")+") with random weights, written to a temporary folder, with the tokenizer of --tokenizer")
	tokDir := fs.String("tokenizer", "tokenizer/testdata/bert-base-uncased", "with --arch: the folder of the tokenizer (tokenizer.json or vocab.txt)")
	fs.Set("addr", "127.0.0.1:0")
	fs.Set("drain-delay", "-1s")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	var levels []int
	for _, s := range strings.Split(*clients, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 || n > 4096 {
			return fmt.Errorf("bench serve: --clients %q: want a comma-separated list of 1 to 4096", *clients)
		}
		levels = append(levels, n)
	}
	switch *route {
	case "/predict", "/embed", "/v1/embeddings":
	default:
		return fmt.Errorf("bench serve: --route %q: want /predict, /embed or /v1/embeddings", *route)
	}
	if *requests < 0 || *duration <= 0 {
		return errors.New("bench serve: --requests must be 0 or more and --duration positive")
	}
	texts, err := bench.ReadTexts(*data, 0)
	if err != nil {
		return fmt.Errorf("bench serve: --data: %w", err)
	}
	if len(texts) == 0 {
		return fmt.Errorf("bench serve: %s holds no text", *data)
	}
	rep := &benchServeReport{CPU: fmt.Sprintf("%s (family %d model %d)", cpu.X86.Brand, cpu.X86.Family, cpu.X86.Model),
		Date: time.Now().UTC().Format("2006-01-02"), Route: *route, Texts: len(texts), Data: *data}
	target := *url
	if *arch != "" {
		if len(f.models) > 0 || target != "" {
			return errors.New("bench serve: --arch replaces --model and --url: give one of them")
		}
		dir, err := os.MkdirTemp("", "int8bert-bench-serve-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		fmt.Fprintf(stderr, "bench serve: writing a random-weights %s classifier to %s\n", *arch, dir)
		if err := bench.WriteRandomClassifier(dir, *arch, *tokDir); err != nil {
			return fmt.Errorf("bench serve: --arch: %w", err)
		}
		f.models = append(f.models, serve.ModelSpec{Name: *arch, Source: dir})
	}
	if target == "" {
		c, err := f.config(stderr)
		if err != nil {
			return fmt.Errorf("bench %w", err)
		}
		sel, err := newServeSelector(c.Logger)
		if err != nil {
			return err
		}
		defer sel.Close()
		c.Load.Selector = sel
		host, _, err := net.SplitHostPort(*f.addr)
		if err != nil || (host != "127.0.0.1" && host != "localhost" && host != "::1") {
			return fmt.Errorf("bench serve: --addr %q: the load test listens on loopback only (127.0.0.1:PORT)", *f.addr)
		}
		l, err := net.Listen("tcp", *f.addr)
		if err != nil {
			return fmt.Errorf("bench serve: %w", err)
		}
		srv, err := serve.New(ctx, c)
		if err != nil {
			l.Close()
			return err
		}
		go srv.Serve(l)
		defer srv.Close()
		target = "http://" + l.Addr().String()
		rep.Instances, rep.Threads = srv.Instances(), max(c.ThreadsPerInstance, 1)
		name := c.Models[0].Source
		if *arch != "" {
			name = *arch + " (random weights)"
		}
		reqs := "no bound of"
		if c.MaxBatchRequests >= 0 {
			reqs = fmt.Sprint(c.MaxBatchRequests)
		}
		rep.Server = fmt.Sprintf("%s, precision %s, %d instances x %d threads, max batch %d tokens / %s requests, window %v",
			name, precisionName(*f.precision), rep.Instances, rep.Threads, c.MaxBatchTokens, reqs, c.BatchWindow)
		// One untimed round trip per text length class warms the kernels.
		if _, err := serve.LoadTest(ctx, serve.LoadOptions{URL: target, Route: *route, Texts: texts, Clients: 4,
			Requests: min(len(texts), 200), Duration: time.Minute}); err != nil {
			return err
		}
	} else {
		rep.Server = target
	}
	if !*asJSON {
		bound := fmt.Sprintf("at most %d requests or %v per level", *requests, *duration)
		if *requests == 0 {
			bound = fmt.Sprintf("%v per level", *duration)
		}
		fmt.Fprintf(stdout, "bench serve: %s\nroute %s, %d texts from %s, %s; cpu %s; %s\n",
			rep.Server, *route, len(texts), *data, bound, rep.CPU, rep.Date)
		fmt.Fprintf(stdout, "%-8s %8s %7s %7s %6s %10s %8s %8s %8s %8s %8s %8s %8s\n",
			"clients", "requests", "ok", "429/503", "failed", "sent/s", "vs first", "p50 ms", "p95 ms", "p99 ms", "p99/p50₁", "batch", "padding")
	}
	for _, n := range levels {
		r, err := serve.LoadTest(ctx, serve.LoadOptions{URL: target, Route: *route, Texts: texts, Clients: n,
			Requests: *requests, Duration: *duration})
		if err != nil {
			return err
		}
		rep.Levels = append(rep.Levels, r)
		if *asJSON {
			continue
		}
		first := rep.Levels[0]
		fmt.Fprintf(stdout, "%-8d %8d %7d %7d %6d %10.1f %7.2fx %8.2f %8.2f %8.2f %7.2fx %8.1f %7.2f%%\n",
			n, r.Requests, r.OK, r.ByStatus["429"]+r.ByStatus["503"], r.Failed, r.PerSecond, r.PerSecond/first.PerSecond,
			r.P50Ms, r.P95Ms, r.P99Ms, r.P99Ms/first.P50Ms, r.MeanBatch, 100*r.PaddingShare)
		if r.Failed > 0 {
			fmt.Fprintf(stdout, "  %d requests failed in transport; the first: %s\n", r.Failed, r.FirstError)
		}
		if r.RSSFirstMiB > 0 {
			fmt.Fprintf(stdout, "  server resident memory: %.1f MiB in the first part of the level, %.1f MiB in the last (%d samples)\n",
				r.RSSFirstMiB, r.RSSLastMiB, len(r.RSSSamples))
		}
	}
	if *asJSON {
		return writeJSON(stdout, rep)
	}
	fmt.Fprintln(stdout, "sent/s counts 200s; vs first: over the first level (1 client: a sequential loop); p99/p50₁: this level's p99 over the first level's p50 (the single-request latency); batch: mean sequences per batch the server ran; padding: padded tokens over computed tokens")
	var failed int
	for _, r := range rep.Levels {
		failed += r.Failed
	}
	if failed > 0 {
		return fmt.Errorf("bench serve: %d requests failed in transport", failed)
	}
	return nil
}

// precisionName is --precision's value as printed.
func precisionName(s string) string {
	if s == "" {
		return "as stored"
	}
	return s
}
