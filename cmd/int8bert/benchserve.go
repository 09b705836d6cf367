package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
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
	// Overload is the open-loop level of --rate, and Bound its latency
	// bound (docs/DESIGN.md section 9.11).
	Overload *serve.LoadResult `json:"overload,omitempty"`
	Bound    *overloadBound    `json:"bound,omitempty"`
	// Mix is the mixed load of --mix or --soak.
	Mix *mixReport `json:"mix,omitempty"`
}

// overloadBound is DESIGN 9.11's bound on an admitted request's latency
// under overload, (k+1) x instances x pass tokens / R, with R the
// tokens per second the server ran over the overload level.
type overloadBound struct {
	QueuedPasses int     `json:"max_queued_passes"`
	Instances    int     `json:"instances"`
	PassTokens   int     `json:"pass_tokens"`
	TokensPerS   float64 `json:"tokens_per_s"`
	Ms           float64 `json:"ms"`
}

// parseRate reads --rate: requests per second, or "Nx", N times the
// best throughput (200s per second) of the closed-loop levels.
func parseRate(s string) (rate, times float64, err error) {
	if s == "" {
		return 0, 0, nil
	}
	num, x := strings.CutSuffix(s, "x")
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v <= 0 || v > 1e6 {
		return 0, 0, fmt.Errorf("bench serve: --rate %q: want requests per second (e.g. 200) or a multiple of the measured capacity (e.g. 2x), positive and finite", s)
	}
	if x {
		return 0, v, nil
	}
	return v, 0, nil
}

// readBound reads the admission bound from the server's /info.
func readBound(ctx context.Context, url string) (*overloadBound, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", url+"/info", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var info struct {
		Instances       int `json:"instances"`
		PassTokens      int `json:"pass_tokens"`
		MaxQueuedPasses int `json:"max_queued_passes"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&info); err != nil {
		return nil, fmt.Errorf("GET /info: %w", err)
	}
	return &overloadBound{QueuedPasses: info.MaxQueuedPasses, Instances: info.Instances, PassTokens: info.PassTokens}, nil
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
	rateFlag := fs.String("rate", "", "after the --clients levels, an open-loop overload level: requests per second, or Nx, N times the best 200s per second of the --clients levels (e.g. 2x); reports admitted (200) and refused (429) requests, the admitted ones' latency against the server's bound, resident memory, and lost requests")
	rateDuration := fs.Duration("rate-duration", 0, "the --rate level's time (default: --duration)")
	tokDir := fs.String("tokenizer", "tokenizer/testdata/bert-base-uncased", "with --arch: the folder of the tokenizer (tokenizer.json or vocab.txt)")
	var mf mixFlags
	fs.StringVar(&mf.mix, "mix", "", "instead of --route's levels, a mixed load: all (every route of every served model, as /info lists them, and the GET routes) or a comma-separated list of ROUTE or ROUTE=WEIGHT (1 to 100; default 2 for a route that runs a model, 1 for the others), at the one --clients level (default 64) for --duration (--requests does not bound it)")
	fs.DurationVar(&mf.soak, "soak", 0, "a soak: the mixed load (--mix, default all) for this long, judged flat or not on the server's resident memory and goroutines, first sample against last (default 0: no soak)")
	fs.DurationVar(&mf.sample, "sample", 0, "with --mix or --soak: how often to read the server's resident memory and goroutines (default 0: a tenth of the run, at most 1m)")
	fs.Float64Var(&mf.rssTol, "rss-tolerance", 10, "the mixed load's verdict: the most the last sample's resident memory may exceed the first's, in percent")
	fs.Float64Var(&mf.goroutineTol, "goroutine-tolerance", 10, "the mixed load's verdict: the most the last sample's goroutines may exceed the first's, in percent (plus --goroutine-slack)")
	fs.IntVar(&mf.goroutineSlack, "goroutine-slack", 16, "the mixed load's verdict: goroutines the last sample may have over the first's beyond --goroutine-tolerance (connections and timers come and go)")
	fs.Set("addr", "127.0.0.1:0")
	fs.Set("drain-delay", "-1s")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	rate, times, err := parseRate(*rateFlag)
	if err != nil {
		return err
	}
	mixed, err := mf.parse()
	if err != nil {
		return err
	}
	if mixed {
		given := map[string]bool{}
		fs.Visit(func(fl *flag.Flag) { given[fl.Name] = true })
		switch {
		case rate > 0 || times > 0:
			return errors.New("bench serve: --rate and --mix (or --soak): give one")
		case given["route"]:
			return errors.New("bench serve: --route and --mix (or --soak): give one (--mix takes a list of routes)")
		case !given["clients"]:
			*clients = "64"
		}
		if mf.soak > 0 {
			*duration = mf.soak
		}
	}
	if *rateDuration < 0 {
		return fmt.Errorf("bench serve: --rate-duration %v: want a positive duration (or 0: --duration)", *rateDuration)
	}
	if *rateDuration == 0 {
		*rateDuration = *duration
	}
	var levels []int
	for _, s := range strings.Split(*clients, ",") {
		if *clients == "" && (rate > 0 || times > 0) {
			break // only the --rate level
		}
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 || n > 4096 {
			return fmt.Errorf("bench serve: --clients %q: want a comma-separated list of 1 to 4096", *clients)
		}
		levels = append(levels, n)
	}
	if mixed && len(levels) != 1 {
		return fmt.Errorf("bench serve: --clients %q: the mixed load (--mix, --soak) runs one level: give one number", *clients)
	}
	switch *route {
	case "/predict", "/embed", "/v1/embeddings":
	default:
		return fmt.Errorf("bench serve: --route %q: want /predict, /embed or /v1/embeddings", *route)
	}
	if *requests < 0 || *duration <= 0 {
		return errors.New("bench serve: --requests must be 0 or more and --duration positive")
	}
	if times > 0 && len(levels) == 0 {
		return fmt.Errorf("bench serve: --rate %s: a multiple of the capacity wants --clients levels to measure it", *rateFlag)
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
		if len(c.Models) > 1 {
			var names []string
			for _, m := range c.Models {
				names = append(names, m.Name+"="+m.Source)
			}
			name = strings.Join(names, ", ")
		}
		reqs := "no bound of"
		if c.MaxBatchRequests >= 0 {
			reqs = fmt.Sprint(c.MaxBatchRequests)
		}
		rep.Server = fmt.Sprintf("%s, precision %s, %d instances x %d threads, max batch %d tokens / %s requests, window %v",
			name, precisionName(*f.precision), rep.Instances, rep.Threads, c.MaxBatchTokens, reqs, c.BatchWindow)
		// One untimed round trip per text length class warms the kernels
		// (the mixed load warms its own routes).
		if !mixed {
			if _, err := serve.LoadTest(ctx, serve.LoadOptions{URL: target, Route: *route, Texts: texts, Clients: 4,
				Requests: min(len(texts), 200), Duration: time.Minute}); err != nil {
				return err
			}
		}
	} else {
		rep.Server = target
	}
	if mixed {
		return benchMix(ctx, rep, &mf, target, texts, levels[0], *duration, *asJSON, stdout, stderr)
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
	if rate > 0 || times > 0 {
		if err := benchOverload(ctx, rep, target, *route, texts, rate, times, *rateDuration, *asJSON, stdout); err != nil {
			return err
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
	if o := rep.Overload; o != nil {
		other := o.Requests - o.OK - o.Refused - o.Lost
		if o.Lost > 0 || o.NoRetryAfter > 0 || other > 0 {
			return fmt.Errorf("bench serve: overload: %d requests lost, %d answered with another status than 200 or 429, %d 429s without Retry-After: want none", o.Lost, other, o.NoRetryAfter)
		}
	}
	return nil
}

// benchOverload runs bench serve's --rate level: open-loop arrivals at
// rate per second (or times the best closed-loop level's 200s per
// second) for d, and prints what DESIGN 9.11 bounds.
func benchOverload(ctx context.Context, rep *benchServeReport, target, route string, texts []string,
	rate, times float64, d time.Duration, asJSON bool, stdout io.Writer) error {
	capacity := 0.0
	for _, l := range rep.Levels {
		capacity = max(capacity, l.PerSecond)
	}
	if times > 0 {
		if capacity <= 0 {
			return errors.New("bench serve: --rate: the --clients levels answered no request, so there is no capacity to multiply")
		}
		rate = times * capacity
	}
	r, err := serve.LoadTest(ctx, serve.LoadOptions{URL: target, Route: route, Texts: texts, Rate: rate, Duration: d})
	if err != nil {
		return err
	}
	rep.Overload = r
	b, err := readBound(ctx, target)
	if err != nil {
		return fmt.Errorf("bench serve: %w", err)
	}
	if r.Tokens > 0 && r.Seconds > 0 {
		b.TokensPerS = r.Tokens / r.Seconds
		if b.QueuedPasses > 0 {
			b.Ms = 1000 * float64((b.QueuedPasses+1)*b.Instances*b.PassTokens) / b.TokensPerS
		}
	}
	rep.Bound = b
	if asJSON {
		return nil
	}
	of := ""
	if capacity > 0 {
		of = fmt.Sprintf(" (%.2fx the best level's %.1f 200s/s)", rate/capacity, capacity)
	}
	fmt.Fprintf(stdout, "overload: open-loop arrivals at %.1f/s%s for %v\n", rate, of, d)
	fmt.Fprintf(stdout, "  sent %d: admitted (200) %d, refused (429) %d (%d without Retry-After), other statuses %d, lost %d\n",
		r.Requests, r.OK, r.Refused, r.NoRetryAfter, r.Requests-r.OK-r.Refused-r.Lost, r.Lost)
	fmt.Fprintf(stdout, "  admitted latency: p50 %.2f ms, p99 %.2f ms; 429 p99 %.2f ms\n", r.P50Ms, r.P99Ms, r.RefusedP99Ms)
	if b.Ms > 0 {
		fmt.Fprintf(stdout, "  bound (DESIGN 9.11): (%d+1) passes x %d instances x %d tokens at %.0f tokens/s = %.0f ms, plus tokenization and the batch window\n",
			b.QueuedPasses, b.Instances, b.PassTokens, b.TokensPerS, b.Ms)
	} else {
		fmt.Fprintln(stdout, "  bound: none (--max-queued-passes negative, or no tokens ran)")
	}
	if r.RSSFirstMiB > 0 {
		fmt.Fprintf(stdout, "  server resident memory: %.1f MiB in the first part, %.1f MiB in the last (%d samples)\n",
			r.RSSFirstMiB, r.RSSLastMiB, len(r.RSSSamples))
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
