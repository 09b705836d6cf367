package serve

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// LoadOptions configure LoadTest: Clients concurrent clients, each
// sending one text per request (the texts in turn), until Requests
// requests have been sent or Duration has passed, whichever is first.
// With Rate, arrivals are open-loop instead: one request every 1/Rate
// seconds, each on its own, whether or not the earlier ones have been
// answered (an overload test: the server's answers do not slow the
// arrivals down); every request sent is waited for to its end.
type LoadOptions struct {
	// URL of the server, e.g. http://127.0.0.1:8080.
	URL string
	// Route is /predict (default), /embed or /v1/embeddings.
	Route string
	// Model is the request's "model" field ("" leaves it out).
	Model   string
	Texts   []string
	Clients int
	// Requests bounds the requests sent (0: no bound but Duration);
	// Duration bounds the time (0: 30s).
	Requests int
	Duration time.Duration
	// Rate is the open-loop arrivals per second (0: Clients closed-loop
	// clients).
	Rate float64
	// SampleEvery is how often the server's resident memory is read from
	// /metrics (0: a tenth of Duration, at most 10s).
	SampleEvery time.Duration
}

// LoadResult is one load level's figures: the clients' view (throughput
// and latency of the 200s) and the server's (batches, tokens and padding
// over the level, from /metrics).
type LoadResult struct {
	Clients   int            `json:"clients"`
	Rate      float64        `json:"rate,omitempty"`
	Requests  int            `json:"requests"`
	OK        int            `json:"ok"`
	ByStatus  map[string]int `json:"by_status"`
	Failed    int            `json:"failed"` // transport errors: resets, truncated bodies
	Seconds   float64        `json:"seconds"`
	PerSecond float64        `json:"sentences_per_s"`
	P50Ms     float64        `json:"p50_ms"`
	P95Ms     float64        `json:"p95_ms"`
	P99Ms     float64        `json:"p99_ms"`
	MeanMs    float64        `json:"mean_ms"`
	// Batches and MeanBatch are the batches the server ran and their mean
	// sequence count; PaddingShare is padding over computed tokens.
	Batches      int     `json:"batches"`
	MeanBatch    float64 `json:"mean_batch"`
	Tokens       float64 `json:"tokens"`
	Computed     float64 `json:"computed_tokens"`
	PaddingShare float64 `json:"padding_share"`
	// RSS samples of the server (process_resident_memory_bytes), and the
	// mean of the first and the last fifth of the run (at most a minute
	// each).
	RSSSamples  []float64 `json:"rss_samples_bytes,omitempty"`
	RSSFirstMiB float64   `json:"rss_first_mib"`
	RSSLastMiB  float64   `json:"rss_last_mib"`
	FirstError  string    `json:"first_error,omitempty"`
	// Refused counts the 429s and RefusedP99Ms is their p99 latency;
	// NoRetryAfter counts the 429s without a Retry-After of whole
	// seconds (there should be none). Lost is the requests sent less
	// those answered with a whole response of any status: transport
	// failures and requests never answered (there should be none).
	Refused      int     `json:"refused"`
	RefusedP99Ms float64 `json:"refused_p99_ms"`
	NoRetryAfter int     `json:"no_retry_after"`
	Lost         int     `json:"lost"`
}

// serverStats are the /metrics series the load tests read.
type serverStats struct {
	batches, sequences, tokens, computed, rss, goroutines float64
}

// every calls f every d until ctx is done, on a goroutine of its own;
// the function it returns waits for that goroutine to end.
func every(ctx context.Context, d time.Duration, f func()) (wait func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				f()
			}
		}
	}()
	return func() { <-done }
}

// scrape reads the unlabelled series the load tests need from url/metrics.
func scrape(ctx context.Context, c *http.Client, url string) (serverStats, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", url+"/metrics", nil)
	if err != nil {
		return serverStats{}, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return serverStats{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return serverStats{}, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	var st serverStats
	want := map[string]*float64{"int8bert_batch_size_count": &st.batches, "int8bert_batch_size_sum": &st.sequences,
		"int8bert_tokens_total": &st.tokens, "int8bert_computed_tokens_total": &st.computed, "process_resident_memory_bytes": &st.rss,
		"go_goroutines": &st.goroutines}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), " ")
		if p, hit := want[name]; ok && hit {
			if v, err := strconv.ParseFloat(strings.TrimSpace(val), 64); err == nil {
				*p = v
			}
		}
	}
	return st, sc.Err()
}

// LoadTest runs one load level against a server and returns its figures.
// Every response is read to its end: a 200 whose body is not one JSON
// value, or a transport error, counts as Failed.
func LoadTest(ctx context.Context, o LoadOptions) (*LoadResult, error) {
	switch {
	case o.URL == "":
		return nil, errors.New("serve: load test: no server URL")
	case len(o.Texts) == 0:
		return nil, errors.New("serve: load test: no texts")
	case o.Rate < 0 || math.IsNaN(o.Rate) || math.IsInf(o.Rate, 0):
		return nil, fmt.Errorf("serve: load test: rate %v: want a finite rate of 0 (closed loop) or more", o.Rate)
	case o.Rate == 0 && o.Clients < 1:
		return nil, fmt.Errorf("serve: load test: %d clients: want 1 or more", o.Clients)
	case o.Requests < 0 || o.Duration < 0:
		return nil, errors.New("serve: load test: requests and duration cannot be negative")
	}
	if o.Route == "" {
		o.Route = "/predict"
	}
	if o.Duration == 0 {
		o.Duration = 30 * time.Second
	}
	if o.SampleEvery == 0 {
		o.SampleEvery = min(10*time.Second, o.Duration/10)
	}
	field := "inputs"
	if o.Route == "/v1/embeddings" {
		field = "input"
	}
	bodies := make([][]byte, len(o.Texts))
	for i, t := range o.Texts {
		m := map[string]any{field: t}
		if o.Model != "" {
			m["model"] = o.Model
		}
		bodies[i], _ = json.Marshal(m)
	}
	idle := o.Clients
	if o.Rate > 0 {
		idle = 1024
	}
	tr := &http.Transport{MaxIdleConnsPerHost: idle, MaxConnsPerHost: 0,
		DialContext: (&net.Dialer{Timeout: 5 * time.Second}).DialContext}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 2 * time.Minute}
	before, err := scrape(ctx, client, o.URL)
	if err != nil {
		return nil, fmt.Errorf("serve: load test: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, o.Duration)
	defer cancel()
	res := &LoadResult{Clients: o.Clients, ByStatus: map[string]int{}}
	var mu sync.Mutex
	var lat []float64
	var next atomic.Int64
	start := time.Now()
	samplesDone := every(ctx, o.SampleEvery, func() {
		if st, err := scrape(ctx, client, o.URL); err == nil && st.rss > 0 {
			mu.Lock()
			res.RSSSamples = append(res.RSSSamples, st.rss)
			mu.Unlock()
		}
	})
	var wg sync.WaitGroup
	var refusedLat []float64
	record := func(ms float64, status int, retry string, err error) {
		mu.Lock()
		defer mu.Unlock()
		res.Requests++
		switch {
		case err != nil:
			res.Failed++
			if res.FirstError == "" {
				res.FirstError = err.Error()
			}
		default:
			res.ByStatus[strconv.Itoa(status)]++
			switch status {
			case 200:
				res.OK++
				lat = append(lat, ms)
			case http.StatusTooManyRequests:
				res.Refused++
				refusedLat = append(refusedLat, ms)
				if n, err := strconv.Atoi(retry); err != nil || n < 1 {
					res.NoRetryAfter++
				}
			}
		}
	}
	if o.Rate > 0 {
		// Open loop: each request on its own goroutine, sent at its
		// arrival time and waited for to its end (bounded by the
		// client's timeout), not cancelled by the level's end.
		interval := time.Duration(float64(time.Second) / o.Rate)
		for i := 0; ctx.Err() == nil && (o.Requests == 0 || i < o.Requests); i++ {
			if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
				select {
				case <-ctx.Done():
				case <-time.After(d):
				}
				if ctx.Err() != nil {
					break
				}
			}
			wg.Add(1)
			go func(body []byte) {
				defer wg.Done()
				t0 := time.Now()
				status, retry, err := send(context.Background(), client, o.URL+o.Route, body)
				record(float64(time.Since(t0).Microseconds())/1000, status, retry, err)
			}(bodies[i%len(bodies)])
		}
	}
	for c := 0; o.Rate == 0 && c < o.Clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if o.Requests > 0 && i >= o.Requests {
					return
				}
				t0 := time.Now()
				status, retry, err := send(ctx, client, o.URL+o.Route, bodies[i%len(bodies)])
				ms := float64(time.Since(t0).Microseconds()) / 1000
				if ctx.Err() != nil && err != nil {
					return // the level's time ran out mid-request: not counted
				}
				record(ms, status, retry, err)
			}
		}()
	}
	wg.Wait()
	res.Seconds = time.Since(start).Seconds()
	res.Rate = o.Rate
	answered := 0
	for _, n := range res.ByStatus {
		answered += n
	}
	res.Lost = res.Requests - answered
	sort.Float64s(refusedLat)
	if n := len(refusedLat); n > 0 {
		res.RefusedP99Ms = refusedLat[min(n-1, int(0.99*float64(n)))]
	}
	cancel()
	samplesDone()
	after, err := scrape(context.Background(), client, o.URL)
	if err != nil {
		return nil, fmt.Errorf("serve: load test: %w", err)
	}
	res.PerSecond = float64(res.OK) / res.Seconds
	sort.Float64s(lat)
	q := func(p float64) float64 {
		if len(lat) == 0 {
			return 0
		}
		return lat[min(len(lat)-1, int(p*float64(len(lat))))]
	}
	res.P50Ms, res.P95Ms, res.P99Ms = q(0.50), q(0.95), q(0.99)
	for _, v := range lat {
		res.MeanMs += v / float64(len(lat))
	}
	res.Batches = int(after.batches - before.batches)
	if res.Batches > 0 {
		res.MeanBatch = (after.sequences - before.sequences) / float64(res.Batches)
	}
	res.Tokens, res.Computed = after.tokens-before.tokens, after.computed-before.computed
	if res.Computed > 0 {
		res.PaddingShare = 1 - res.Tokens/res.Computed
	}
	if n := len(res.RSSSamples); n > 0 {
		k := max(1, min(n/5, int(time.Minute/o.SampleEvery)))
		mean := func(s []float64) float64 {
			var m float64
			for _, v := range s {
				m += v / float64(len(s))
			}
			return m / (1 << 20)
		}
		res.RSSFirstMiB, res.RSSLastMiB = mean(res.RSSSamples[:k]), mean(res.RSSSamples[n-k:])
	}
	return res, nil
}

// send posts body and reads the whole response: its status and
// Retry-After, or an error for a transport failure or a body that is not
// one JSON value.
func send(ctx context.Context, c *http.Client, url string, body []byte) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, "POST", url, bytes.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, "", fmt.Errorf("%s: reading the body: %w", resp.Status, err)
	}
	if !json.Valid(b) {
		return resp.StatusCode, "", fmt.Errorf("%s: the body is not one JSON value (%d bytes)", resp.Status, len(b))
	}
	return resp.StatusCode, resp.Header.Get("Retry-After"), nil
}
