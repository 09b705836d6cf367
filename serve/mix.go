package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// GetRoutes are the GET routes a mixed load sends (no model: they
// answer the server).
var GetRoutes = []string{"/health", "/ping", "/", "/info", "/metrics", "/api-doc/openapi.json", "/docs"}

// MixRoutes are every route a mixed load knows how to send: the POST
// routes of /info's "routes", POST / and /invocations (the first
// model's task route) and GetRoutes.
var MixRoutes = append([]string{"/predict", "/rerank", "/zero-shot", "/qa", "/ner", "/embed", "/embed_all",
	"/embed_sparse", "/similarity", "/v1/embeddings", "/embeddings", "/fill-mask", "/vertex", "/tokenize",
	"/decode", "POST /", "/invocations"}, GetRoutes...)

// defaultWeight is a route's share of a mixed load's cycle unless
// MixOptions.Weights says otherwise: the routes that run the model
// twice as often as the cheap ones (tokenizer, GET routes).
func defaultWeight(route string) int {
	switch route {
	case "/tokenize", "/decode", "/invocations", "POST /":
		return 1
	}
	if slices.Contains(GetRoutes, route) {
		return 1
	}
	return 2
}

// MixTarget is one entry of a mixed load's plan: a route, the model its
// bodies name ("" for a GET route), its weight in the cycle and its
// bodies, sent in turn.
type MixTarget struct {
	Route  string `json:"route"`
	Model  string `json:"model,omitempty"`
	Weight int    `json:"weight"`
	method string
	path   string
	bodies [][]byte
}

// Key is the target's name in reports: the route, and the model after
// it.
func (t *MixTarget) Key() string {
	if t.Model == "" {
		return t.Route
	}
	return t.Route + " " + t.Model
}

// MixOptions configure MixTest: Clients closed-loop clients for
// Duration, each sending the next request of the plan's weighted
// round-robin cycle (MixPlan).
type MixOptions struct {
	URL     string
	Clients int
	// Requests bounds the requests sent (0: Duration alone).
	Requests int
	// Duration bounds the run; SampleEvery is how often the server's
	// resident memory and goroutines are read from /metrics (0: a tenth
	// of Duration).
	Duration    time.Duration
	SampleEvery time.Duration
	// Sampled, when set, is called with each sample as it is taken (a
	// progress line for a long soak).
	Sampled func(MixSample)
}

// MixRouteResult is one target's figures.
type MixRouteResult struct {
	Route    string `json:"route"`
	Model    string `json:"model,omitempty"`
	Requests int    `json:"requests"`
	OK       int    `json:"ok"`     // 2xx
	Errors   int    `json:"errors"` // 4xx and 5xx, a 429 with Retry-After aside
	// Errors4xx and Errors5xx split Errors (a status below 400 is
	// counted with the 4xx).
	Errors4xx int            `json:"errors_4xx"`
	Errors5xx int            `json:"errors_5xx"`
	Refused   int            `json:"refused"`
	Failed    int            `json:"failed"` // transport errors
	ByStatus  map[string]int `json:"by_status"`
	P50Ms     float64        `json:"p50_ms"`
	P99Ms     float64        `json:"p99_ms"`
	// FirstError is the first error's status and body, or transport
	// error.
	FirstError string `json:"first_error,omitempty"`
	lat        []float64
}

// MixSample is one reading of the server during a mixed load: at At
// since the start, its resident memory and goroutines (/metrics'
// process_resident_memory_bytes and go_goroutines), the requests
// answered in the interval and how many of the plan's targets they
// covered.
type MixSample struct {
	At         time.Duration `json:"at_ns"`
	RSSBytes   float64       `json:"rss_bytes"`
	Goroutines float64       `json:"goroutines"`
	Requests   int           `json:"requests"`
	Errors     int           `json:"errors"`
	TargetsHit int           `json:"targets_hit"`
}

// MixResult is a mixed load's figures: per target, in plan order, and
// the samples.
type MixResult struct {
	Clients  int               `json:"clients"`
	Seconds  float64           `json:"seconds"`
	Requests int               `json:"requests"`
	OK       int               `json:"ok"`
	Errors   int               `json:"errors"`
	Refused  int               `json:"refused"`
	Failed   int               `json:"failed"`
	Plan     []*MixTarget      `json:"plan"`
	Targets  []*MixRouteResult `json:"targets"`
	Samples  []MixSample       `json:"samples"`
}

// mixModel is what the plan reads of a model from /info.
type mixModel struct {
	Name      string   `json:"name"`
	Task      string   `json:"task"`
	Routes    []string `json:"routes"`
	MaskToken string   `json:"mask_token"`
}

// getJSON reads url into v.
func getJSON(ctx context.Context, c *http.Client, url string, v any) error {
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != 200 {
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, bytes.TrimSpace(b))
	}
	return json.Unmarshal(b, v)
}

// MixPlan reads the served models from url's /info and builds the
// targets of a mixed load: each route of routes (nil: all of
// MixRoutes) for each model that answers it, with bodies made of texts
// (the texts in turn; /decode's ids are the texts' own, from /tokenize;
// /fill-mask's texts have a word replaced by the model's mask token).
func MixPlan(ctx context.Context, url string, texts []string, routes []string, weights map[string]int) ([]*MixTarget, error) {
	if len(texts) == 0 {
		return nil, errors.New("serve: mixed load: no texts")
	}
	for _, r := range routes {
		if !slices.Contains(MixRoutes, r) {
			return nil, fmt.Errorf("serve: mixed load: route %q: want one of %s", r, strings.Join(MixRoutes, ", "))
		}
	}
	for r, w := range weights {
		if !slices.Contains(MixRoutes, r) {
			return nil, fmt.Errorf("serve: mixed load: weight of route %q: want one of %s", r, strings.Join(MixRoutes, ", "))
		}
		if w < 1 || w > 100 {
			return nil, fmt.Errorf("serve: mixed load: weight %d of route %s: want 1 to 100", w, r)
		}
	}
	c := &http.Client{Timeout: time.Minute}
	var info struct {
		Models []mixModel `json:"models"`
	}
	if err := getJSON(ctx, c, url+"/info", &info); err != nil {
		return nil, fmt.Errorf("serve: mixed load: %w", err)
	}
	if len(info.Models) == 0 {
		return nil, errors.New("serve: mixed load: /info lists no model")
	}
	if len(texts) > 64 {
		texts = texts[:64] // the bodies cycle; 64 texts vary them enough
	}
	want := func(r string) bool { return routes == nil || slices.Contains(routes, r) }
	var plan []*MixTarget
	add := func(route, model, method, path string, bodies [][]byte) {
		w := defaultWeight(route)
		if v, ok := weights[route]; ok {
			w = v
		}
		plan = append(plan, &MixTarget{Route: route, Model: model, Weight: w, method: method, path: path, bodies: bodies})
	}
	for i, m := range info.Models {
		for _, route := range m.Routes {
			if !want(route) {
				continue
			}
			bodies, err := mixBodies(ctx, c, url, route, m, texts)
			if err != nil {
				return nil, fmt.Errorf("serve: mixed load: %s for model %s: %w", route, m.Name, err)
			}
			add(route, m.Name, "POST", route, bodies)
		}
		if i > 0 {
			continue
		}
		// POST / and /invocations run the first model's task route.
		var task string
		switch m.Task {
		case "classifier", "reranker":
			task = "/predict"
			if m.Task == "reranker" {
				task = "/rerank"
			}
		case "question-answering":
			task = "/qa"
		case "embedding":
			task = "/embed"
			if slices.Contains(m.Routes, "/embed_sparse") {
				task = "/embed_sparse"
			}
		}
		if task == "" || !slices.Contains(m.Routes, task) {
			continue
		}
		bodies, err := mixBodies(ctx, c, url, task, m, texts)
		if err != nil {
			return nil, fmt.Errorf("serve: mixed load: %s for model %s: %w", task, m.Name, err)
		}
		for _, r := range []string{"POST /", "/invocations"} {
			if want(r) {
				add(r, m.Name, "POST", strings.TrimPrefix(r, "POST "), bodies)
			}
		}
	}
	for _, r := range GetRoutes {
		if want(r) {
			add(r, "", "GET", r, nil)
		}
	}
	for _, r := range routes {
		if !slices.ContainsFunc(plan, func(t *MixTarget) bool { return t.Route == r }) {
			return nil, fmt.Errorf("serve: mixed load: route %s: no served model answers it (/info's routes)", r)
		}
	}
	return plan, nil
}

// mixBodies are route's request bodies for model m, one per text.
func mixBodies(ctx context.Context, c *http.Client, url, route string, m mixModel, texts []string) ([][]byte, error) {
	other := func(i, k int) string { return texts[(i+k)%len(texts)] }
	var ids [][]int32
	if route == "/decode" {
		// The texts' own ids, from the server's tokenizer, a text a
		// request (under any --max-client-batch-size).
		for k := 0; k < len(texts); k++ {
			b, _ := json.Marshal(map[string]any{"inputs": texts[k], "model": m.Name})
			status, body, err := mixPost(ctx, c, url+"/tokenize", b)
			if err != nil {
				return nil, err
			}
			if status != 200 {
				return nil, fmt.Errorf("POST /tokenize: %d: %s", status, body)
			}
			var toks [][]struct {
				ID int32 `json:"id"`
			}
			if err := json.Unmarshal(body, &toks); err != nil || len(toks) != 1 {
				return nil, fmt.Errorf("POST /tokenize: want one list of tokens: %v", err)
			}
			row := make([]int32, len(toks[0]))
			for j, t := range toks[0] {
				row[j] = t.ID
			}
			ids = append(ids, row)
		}
	}
	out := make([][]byte, len(texts))
	for i, t := range texts {
		var v map[string]any
		switch route {
		case "/predict", "/embed", "/embed_all", "/embed_sparse", "/tokenize", "/ner":
			v = map[string]any{"inputs": t}
			if route != "/tokenize" && route != "/ner" {
				v["truncate"] = true
			}
		case "/v1/embeddings", "/embeddings":
			v = map[string]any{"input": t}
		case "/rerank":
			v = map[string]any{"query": t, "texts": []string{other(i, 1), other(i, 2)}, "truncate": true}
		case "/similarity":
			v = map[string]any{"inputs": map[string]any{"source_sentence": t, "sentences": []string{other(i, 1), other(i, 2)}},
				"parameters": map[string]any{"truncate": true}}
		case "/zero-shot":
			v = map[string]any{"inputs": t, "candidate_labels": []string{"positive", "negative"}}
		case "/qa":
			v = map[string]any{"question": t, "context": other(i, 1)}
		case "/fill-mask":
			w := strings.Fields(t)
			if len(w) == 0 {
				w = []string{""}
			}
			w[min(1, len(w)-1)] = m.MaskToken // early: a short model keeps it
			v = map[string]any{"inputs": strings.Join(w, " ")}
		case "/decode":
			v = map[string]any{"ids": ids[i]}
		case "/vertex":
			inst := map[string]any{"inputs": t, "model": m.Name, "truncate": true}
			if m.Task == "reranker" {
				inst = map[string]any{"query": t, "texts": []string{other(i, 1)}, "model": m.Name, "truncate": true}
			}
			v = map[string]any{"instances": []any{inst}}
		default:
			return nil, fmt.Errorf("no body for route %s", route)
		}
		if route != "/vertex" {
			v["model"] = m.Name
		}
		b, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		out[i] = b
	}
	return out, nil
}

// mixPost sends body to url and reads the whole answer.
func mixPost(ctx context.Context, c *http.Client, url string, body []byte) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, "POST", url, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// mixCycle is the plan's smooth weighted round-robin order (nginx's):
// each target appears Weight times in a cycle of the weights' sum,
// spread out rather than in runs.
func mixCycle(plan []*MixTarget) []int {
	total := 0
	for _, t := range plan {
		total += t.Weight
	}
	cur := make([]int, len(plan))
	out := make([]int, 0, total)
	for range total {
		best := 0
		for i, t := range plan {
			cur[i] += t.Weight
			if cur[i] > cur[best] {
				best = i
			}
		}
		cur[best] -= total
		out = append(out, best)
	}
	return out
}

// MixTest runs a mixed load: o.Clients closed-loop clients over the
// plan's cycle for o.Duration (or o.Requests requests), every request
// sent waited for and read to its end, with the
// server's resident memory and goroutines sampled every o.SampleEvery.
// A 2xx counts as OK, a 429 with a Retry-After of whole seconds as
// Refused, any other status as an error; a transport failure or a 2xx
// whose body is not one JSON value (GET /metrics, /docs aside) as
// Failed.
func MixTest(ctx context.Context, plan []*MixTarget, o MixOptions) (*MixResult, error) {
	switch {
	case o.URL == "":
		return nil, errors.New("serve: mixed load: no server URL")
	case len(plan) == 0:
		return nil, errors.New("serve: mixed load: no route to send")
	case o.Clients < 1:
		return nil, fmt.Errorf("serve: mixed load: %d clients: want 1 or more", o.Clients)
	case o.Duration <= 0 || o.SampleEvery < 0 || o.Requests < 0:
		return nil, errors.New("serve: mixed load: the duration must be positive, and the sample interval and the request bound 0 or more")
	}
	if o.SampleEvery == 0 {
		o.SampleEvery = o.Duration / 10
	}
	cycle := mixCycle(plan)
	tr := &http.Transport{MaxIdleConnsPerHost: o.Clients + 4,
		DialContext: (&net.Dialer{Timeout: 5 * time.Second}).DialContext}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 2 * time.Minute}
	res := &MixResult{Clients: o.Clients, Plan: plan}
	for _, t := range plan {
		res.Targets = append(res.Targets, &MixRouteResult{Route: t.Route, Model: t.Model, ByStatus: map[string]int{}})
	}
	var mu sync.Mutex
	// Per interval: requests, errors and the targets answered.
	var inReq, inErr int
	var lastSample time.Time
	hit := make([]bool, len(plan))
	sample := func(start time.Time) {
		st, err := scrape(ctx, client, o.URL)
		mu.Lock()
		lastSample = time.Now()
		s := MixSample{At: time.Since(start), Requests: inReq, Errors: inErr}
		for i, h := range hit {
			if h {
				s.TargetsHit++
			}
			hit[i] = false
		}
		inReq, inErr = 0, 0
		if err == nil {
			s.RSSBytes, s.Goroutines = st.rss, st.goroutines
		}
		res.Samples = append(res.Samples, s)
		mu.Unlock()
		if o.Sampled != nil {
			o.Sampled(s)
		}
	}
	record := func(i int, ms float64, status int, retry string, body []byte, err error) {
		mu.Lock()
		defer mu.Unlock()
		r := res.Targets[i]
		r.Requests++
		inReq++
		hit[i] = true
		switch {
		case err != nil:
			r.Failed++
			inErr++
			if r.FirstError == "" {
				r.FirstError = err.Error()
			}
			return
		case status >= 200 && status < 300:
			r.OK++
			r.lat = append(r.lat, ms)
		case status == http.StatusTooManyRequests && wholeSeconds(retry):
			r.Refused++
		default:
			r.Errors++
			inErr++
			if status >= 500 {
				r.Errors5xx++
			} else {
				r.Errors4xx++
			}
			if r.FirstError == "" {
				r.FirstError = fmt.Sprintf("%d: %s", status, bytes.TrimSpace(body[:min(len(body), 300)]))
			}
		}
		r.ByStatus[strconv.Itoa(status)]++
	}
	runCtx, cancel := context.WithTimeout(ctx, o.Duration)
	defer cancel()
	start := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range o.Clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for runCtx.Err() == nil {
				n := int(next.Add(1) - 1)
				if o.Requests > 0 && n >= o.Requests {
					return
				}
				i := cycle[n%len(cycle)]
				t := plan[i]
				var body []byte
				if len(t.bodies) > 0 {
					body = t.bodies[(n/len(cycle))%len(t.bodies)]
				}
				// Sent on ctx, not runCtx: a request sent is waited for
				// to its end, so that none is lost to the run's end.
				t0 := time.Now()
				status, retry, answer, err := sendMix(ctx, client, t.method, o.URL+t.path, body)
				record(i, float64(time.Since(t0).Microseconds())/1000, status, retry, answer, err)
			}
		}()
	}
	samplesDone := every(runCtx, o.SampleEvery, func() { sample(start) })
	wg.Wait()
	res.Seconds = time.Since(start).Seconds()
	cancel()
	samplesDone()
	if readings(res.Samples) < 2 || time.Since(lastSample) >= o.SampleEvery/2 {
		// The last interval's reading, after the last answer, unless a
		// tick has just read it under load and a verdict has its two
		// readings: a slow server whose one tick's scrape spanned the
		// whole run still gets its closing reading.
		sample(start)
	}
	for _, r := range res.Targets {
		sort.Float64s(r.lat)
		if n := len(r.lat); n > 0 {
			r.P50Ms, r.P99Ms = r.lat[min(n-1, n/2)], r.lat[min(n-1, int(0.99*float64(n)))]
		}
		res.Requests += r.Requests
		res.OK += r.OK
		res.Errors += r.Errors
		res.Refused += r.Refused
		res.Failed += r.Failed
	}
	return res, nil
}

// readings counts the samples that read the server's memory and
// goroutines (a failed scrape leaves them zero).
func readings(samples []MixSample) int {
	n := 0
	for _, s := range samples {
		if s.RSSBytes > 0 && s.Goroutines > 0 {
			n++
		}
	}
	return n
}

// wholeSeconds reports whether a Retry-After is a whole number of
// seconds, 1 or more.
func wholeSeconds(s string) bool {
	n, err := strconv.Atoi(s)
	return err == nil && n >= 1
}

// sendMix sends one request of a mixed load and reads its whole answer:
// the status, Retry-After and body, or an error for a transport failure
// or a 2xx JSON route whose body is not one JSON value.
func sendMix(ctx context.Context, c *http.Client, method, url string, body []byte) (int, string, []byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return 0, "", nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, "", nil, fmt.Errorf("%s %s: %s: reading the body: %w", method, url, resp.Status, err)
	}
	ct := resp.Header.Get("Content-Type")
	if resp.StatusCode/100 == 2 && strings.HasPrefix(ct, "application/json") && !json.Valid(b) {
		return resp.StatusCode, "", nil, fmt.Errorf("%s %s: %s: the body is not one JSON value (%d bytes)", method, url, resp.Status, len(b))
	}
	return resp.StatusCode, resp.Header.Get("Retry-After"), b, nil
}

// Flatness are the tolerances of a soak's verdict: the last interval's
// resident memory at most RSSShare over the first's (0.10: 10%), and its
// goroutines at most GoroutineShare over the first's plus
// GoroutineSlack (connections and timers come and go by a few).
type Flatness struct {
	RSSShare       float64 `json:"rss_share"`
	GoroutineShare float64 `json:"goroutine_share"`
	GoroutineSlack float64 `json:"goroutine_slack"`
}

// Verdict is a soak's first and last readings and whether they are flat.
type Verdict struct {
	FirstRSS, LastRSS               float64
	FirstGoroutines, LastGoroutines float64
	RSSFlat, GoroutinesFlat         bool
	// Why says what is not flat, or that there were too few samples.
	Why string
}

// Flat reports whether both are flat.
func (v Verdict) Flat() bool { return v.RSSFlat && v.GoroutinesFlat }

// Judge compares the first sample with a reading against the last: a
// fall is flat, a rise beyond f's tolerances is not. Fewer than two
// samples with readings judge nothing (not flat).
func (f Flatness) Judge(samples []MixSample) Verdict {
	read := make([]MixSample, 0, readings(samples))
	for _, s := range samples {
		if s.RSSBytes > 0 && s.Goroutines > 0 {
			read = append(read, s)
		}
	}
	if len(read) < 2 {
		return Verdict{Why: fmt.Sprintf("%d samples with readings: want 2 or more (a longer run or a shorter --sample)", len(read))}
	}
	a, b := read[0], read[len(read)-1]
	v := Verdict{FirstRSS: a.RSSBytes, LastRSS: b.RSSBytes, FirstGoroutines: a.Goroutines, LastGoroutines: b.Goroutines}
	v.RSSFlat = b.RSSBytes <= a.RSSBytes*(1+f.RSSShare)
	v.GoroutinesFlat = b.Goroutines <= math.Floor(a.Goroutines*(1+f.GoroutineShare)+f.GoroutineSlack)
	var why []string
	if !v.RSSFlat {
		why = append(why, fmt.Sprintf("resident memory rose %.1f%% (%.1f to %.1f MiB), over %.0f%%",
			100*(b.RSSBytes/a.RSSBytes-1), a.RSSBytes/(1<<20), b.RSSBytes/(1<<20), 100*f.RSSShare))
	}
	if !v.GoroutinesFlat {
		why = append(why, fmt.Sprintf("goroutines rose from %.0f to %.0f, over %.0f%% + %.0f",
			a.Goroutines, b.Goroutines, 100*f.GoroutineShare, f.GoroutineSlack))
	}
	v.Why = strings.Join(why, "; ")
	return v
}
