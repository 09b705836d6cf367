package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/int8bert/int8bert/serve"
)

// mixFlags are bench serve's mixed-load and soak flags (docs/DESIGN.md
// section 9.4).
type mixFlags struct {
	mix                  string
	soak, sample         time.Duration
	rssTol, goroutineTol float64
	goroutineSlack       int
	// Parsed: nil routes are all of them.
	routes  []string
	weights map[string]int
}

// parseMix reads and checks --mix (all, or ROUTE[=WEIGHT],...) and the
// soak flags; it reports whether the mixed mode is on.
func (m *mixFlags) parse() (bool, error) {
	if m.soak < 0 {
		return false, fmt.Errorf("bench serve: --soak %v: want a positive duration (or 0: no soak)", m.soak)
	}
	if m.sample < 0 {
		return false, fmt.Errorf("bench serve: --sample %v: want a positive interval (or 0: a tenth of the run, at most a minute)", m.sample)
	}
	for _, c := range []struct {
		name string
		v    float64
	}{{"rss-tolerance", m.rssTol}, {"goroutine-tolerance", m.goroutineTol}} {
		if math.IsNaN(c.v) || c.v < 0 || c.v > 1000 {
			return false, fmt.Errorf("bench serve: --%s %v: want a percentage of 0 to 1000", c.name, c.v)
		}
	}
	if m.goroutineSlack < 0 || m.goroutineSlack > 1_000_000 {
		return false, fmt.Errorf("bench serve: --goroutine-slack %d: want 0 to 1000000 goroutines", m.goroutineSlack)
	}
	if m.mix == "" && m.soak > 0 {
		m.mix = "all"
	}
	if m.mix == "" {
		if m.sample > 0 {
			return false, errors.New("bench serve: --sample is for the mixed load: give --mix or --soak")
		}
		return false, nil
	}
	if m.mix == "all" {
		return true, nil
	}
	m.weights = map[string]int{}
	for _, item := range strings.Split(m.mix, ",") {
		route, w, hasW := strings.Cut(strings.TrimSpace(item), "=")
		if !slices.Contains(serve.MixRoutes, route) {
			return false, fmt.Errorf("bench serve: --mix %q: route %q: want all, or a comma-separated list of ROUTE or ROUTE=WEIGHT of %s",
				m.mix, route, strings.Join(serve.MixRoutes, ", "))
		}
		if slices.Contains(m.routes, route) {
			return false, fmt.Errorf("bench serve: --mix %q: route %s twice", m.mix, route)
		}
		m.routes = append(m.routes, route)
		if hasW {
			n, err := strconv.Atoi(w)
			if err != nil || n < 1 || n > 100 {
				return false, fmt.Errorf("bench serve: --mix %q: weight %q of %s: want 1 to 100", m.mix, w, route)
			}
			m.weights[route] = n
		}
	}
	return true, nil
}

// mixReport is bench serve's JSON in the mixed mode.
type mixReport struct {
	Clients   int              `json:"clients"`
	Duration  string           `json:"duration"`
	Sample    string           `json:"sample"`
	Result    *serve.MixResult `json:"result"`
	Tolerance serve.Flatness   `json:"tolerance"`
	Flat      bool             `json:"flat"`
	Verdict   string           `json:"verdict"`
}

// benchMix runs bench serve's mixed load against target for d with
// clients clients, prints the samples as they come, the per-target
// table and the verdict, and returns an error for any error response,
// transport failure or a verdict that is not flat.
func benchMix(ctx context.Context, rep *benchServeReport, m *mixFlags, target string, texts []string,
	clients int, d time.Duration, asJSON bool, stdout, stderr io.Writer) error {
	plan, err := serve.MixPlan(ctx, target, texts, m.routes, m.weights)
	if err != nil {
		return fmt.Errorf("bench serve: --mix: %w", err)
	}
	sample := m.sample
	if sample == 0 {
		sample = min(time.Minute, d/10)
	}
	if sample > d/2 {
		return fmt.Errorf("bench serve: --sample %v: want at most half the run (%v): the verdict compares two samples", sample, d)
	}
	// Untimed: two cycles warm every route's kernels and buffers, so
	// that the first sample is of the steady state.
	cycle := 0
	for _, t := range plan {
		cycle += t.Weight
	}
	if _, err := serve.MixTest(ctx, plan, serve.MixOptions{URL: target, Clients: min(clients, 8), Requests: 2 * cycle,
		Duration: 5 * time.Minute}); err != nil {
		return fmt.Errorf("bench serve: warming up: %w", err)
	}
	tol := serve.Flatness{RSSShare: m.rssTol / 100, GoroutineShare: m.goroutineTol / 100, GoroutineSlack: float64(m.goroutineSlack)}
	routes := map[string]bool{}
	for _, t := range plan {
		routes[t.Route] = true
	}
	if !asJSON {
		fmt.Fprintf(stdout, "bench serve: %s\nmixed load: %d targets over %d routes (a cycle of %d requests), %d clients for %v, %d texts from %s; cpu %s; %s\n",
			rep.Server, len(plan), len(routes), cycle, clients, d, len(texts), rep.Data, rep.CPU, rep.Date)
		fmt.Fprintf(stdout, "%-10s %9s %7s %8s %10s %10s\n", "at", "requests", "errors", "targets", "rss MiB", "goroutines")
	}
	res, err := serve.MixTest(ctx, plan, serve.MixOptions{URL: target, Clients: clients, Duration: d, SampleEvery: sample,
		Sampled: func(s serve.MixSample) {
			if !asJSON {
				fmt.Fprintf(stdout, "%-10v %9d %7d %4d/%-3d %10.1f %10.0f\n", s.At.Round(time.Second), s.Requests, s.Errors,
					s.TargetsHit, len(plan), s.RSSBytes/(1<<20), s.Goroutines)
			}
		}})
	if err != nil {
		return fmt.Errorf("bench serve: %w", err)
	}
	v := tol.Judge(res.Samples)
	verdict := fmt.Sprintf("flat: resident memory %.1f -> %.1f MiB (tolerance +%.0f%%), goroutines %.0f -> %.0f (tolerance +%.0f%% + %d), first sample against last",
		v.FirstRSS/(1<<20), v.LastRSS/(1<<20), m.rssTol, v.FirstGoroutines, v.LastGoroutines, m.goroutineTol, m.goroutineSlack)
	if !v.Flat() {
		verdict = "not flat: " + v.Why
	}
	rep.Mix = &mixReport{Clients: clients, Duration: d.String(), Sample: sample.String(), Result: res, Tolerance: tol, Flat: v.Flat(), Verdict: verdict}
	if asJSON {
		if err := writeJSON(stdout, rep); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(stdout, "%-22s %-12s %6s %9s %9s %6s %6s %6s %6s %9s %9s\n",
			"route", "model", "weight", "requests", "2xx", "4xx", "5xx", "429", "failed", "p50 ms", "p99 ms")
		for i, r := range res.Targets {
			fmt.Fprintf(stdout, "%-22s %-12s %6d %9d %9d %6d %6d %6d %6d %9.2f %9.2f\n", r.Route, r.Model, plan[i].Weight,
				r.Requests, r.OK, r.Errors4xx, r.Errors5xx, r.Refused, r.Failed, r.P50Ms, r.P99Ms)
			if r.FirstError != "" {
				fmt.Fprintf(stdout, "  first error: %s\n", r.FirstError)
			}
		}
		fmt.Fprintf(stdout, "total: %d requests in %.1fs (%.1f/s), %d 2xx, %d errors, %d refused (429 with Retry-After), %d failed in transport\n",
			res.Requests, res.Seconds, float64(res.Requests)/res.Seconds, res.OK, res.Errors, res.Refused, res.Failed)
		fmt.Fprintln(stdout, verdict)
		fmt.Fprintln(stdout, "targets: the plan's targets answered in the interval; rss and goroutines: the server's /metrics at the interval's end (bench serve's own clients included when it runs the server in its process)")
	}
	missed := 0
	for _, s := range res.Samples[:max(0, len(res.Samples)-1)] { // the last interval may be short
		if s.TargetsHit < len(plan) {
			missed++
		}
	}
	if missed > 0 {
		fmt.Fprintf(stderr, "bench serve: %d intervals did not answer every target: fewer clients, a longer --sample or lighter weights\n", missed)
	}
	if res.Errors > 0 || res.Failed > 0 || !v.Flat() {
		return fmt.Errorf("bench serve: mixed load: %d error responses, %d requests failed in transport (want none); %s", res.Errors, res.Failed, verdict)
	}
	return nil
}
