package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMixedLoadEveryRoute: against a server of one model per task, the
// mixed load's plan has every route of MixRoutes but /embed_sparse (no
// SPLADE model here) for each model whose /info "routes" list it, with
// the weights asked for; two whole cycles send each target twice its
// weight, and every answer is a 2xx.
func TestMixedLoadEveryRoute(t *testing.T) {
	e := wordModel(t, "golden/models/bert-base", false, "")
	c := wordModel(t, "golden/models/bert-seqcls", false, "")
	r := wordModel(t, "golden/heads/xlm-roberta-crossencoder", true, "")
	qa := wordModel(t, "golden/models/bert-qa", false, "")
	_, ts := newServer(t, Config{Models: []ModelSpec{{Name: "c", Source: c}, {Name: "e", Source: e}, {Name: "r", Source: r}, {Name: "qa", Source: qa},
		{Name: "mlm", Source: filepath.Join("..", "models", "testdata", "mlm", "bert-mlm")},
		{Name: "ner", Source: tasksModel("bert-ner")}, {Name: "nli", Source: tasksModel("xlmr-nli")}},
		Load: wordOptions(t)})
	texts := []string{"w5 w6 w7", "a fine film", "w8 w9", "Paris is big", "w10 w11 w12 w13"}
	ctx := context.Background()

	plan, err := MixPlan(ctx, ts.URL, texts, nil, map[string]int{"/predict": 3})
	require.NoError(t, err)
	routes := map[string][]string{}
	for _, tg := range plan {
		routes[tg.Route] = append(routes[tg.Route], tg.Model)
		want := defaultWeight(tg.Route)
		if tg.Route == "/predict" {
			want = 3
		}
		assert.Equal(t, want, tg.Weight, tg.Key())
	}
	for _, r := range MixRoutes {
		if r != "/embed_sparse" {
			assert.Contains(t, routes, r, "no target for %s", r)
		}
	}
	assert.ElementsMatch(t, []string{"c", "r", "nli"}, routes["/predict"])
	assert.ElementsMatch(t, []string{"e", "mlm"}, routes["/embed"])
	assert.Equal(t, []string{"r"}, routes["/rerank"])
	assert.Equal(t, []string{"nli"}, routes["/zero-shot"])
	assert.Equal(t, []string{"mlm"}, routes["/fill-mask"])
	assert.Equal(t, []string{"c"}, routes["POST /"], "the first model's task route")
	assert.Len(t, routes["/tokenize"], 7)
	assert.Equal(t, []string{""}, routes["/health"])

	cycle := mixCycle(plan)
	res, err := MixTest(ctx, plan, MixOptions{URL: ts.URL, Clients: 4, Requests: 2 * len(cycle), Duration: 5 * time.Minute})
	require.NoError(t, err)
	assert.Equal(t, 2*len(cycle), res.Requests)
	assert.Equal(t, res.Requests, res.OK, "errors %d, refused %d, failed %d", res.Errors, res.Refused, res.Failed)
	for i, tr := range res.Targets {
		assert.Equal(t, 2*plan[i].Weight, tr.Requests, plan[i].Key())
		assert.Equal(t, tr.Requests, tr.OK, "%s: %v %s", plan[i].Key(), tr.ByStatus, tr.FirstError)
		assert.Positive(t, tr.P99Ms, plan[i].Key())
	}
	require.NotEmpty(t, res.Samples, "the closing sample")
	last := res.Samples[len(res.Samples)-1]
	assert.Positive(t, last.RSSBytes)
	assert.Positive(t, last.Goroutines)

	// A restricted plan, and refusals.
	plan, err = MixPlan(ctx, ts.URL, texts, []string{"/qa", "/metrics"}, nil)
	require.NoError(t, err)
	require.Len(t, plan, 2)
	assert.Equal(t, "/qa qa", plan[0].Key())
	for _, bad := range []struct {
		routes  []string
		weights map[string]int
	}{
		{[]string{"/nope"}, nil}, {[]string{"/embed_sparse"}, nil}, {nil, map[string]int{"/embed": 0}},
		{nil, map[string]int{"/embed": 101}}, {nil, map[string]int{"/x": 1}},
	} {
		_, err := MixPlan(ctx, ts.URL, texts, bad.routes, bad.weights)
		assert.Error(t, err, "%v %v", bad.routes, bad.weights)
	}
	_, err = MixPlan(ctx, ts.URL, nil, nil, nil)
	assert.Error(t, err)
	_, err = MixTest(ctx, plan, MixOptions{URL: ts.URL, Clients: 0, Duration: time.Second})
	assert.Error(t, err)
}

// TestInfoRoutes: /info lists each model's routes, and the mask token
// of a masked-LM model.
func TestInfoRoutes(t *testing.T) {
	_, ts := newServer(t, Config{Models: []ModelSpec{{Name: "sst2", Source: shipped},
		{Name: "mlm", Source: filepath.Join("..", "models", "testdata", "mlm", "bert-mlm")}}})
	resp, err := http.Get(ts.URL + "/info")
	require.NoError(t, err)
	defer resp.Body.Close()
	var b infoBody
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&b))
	require.Len(t, b.Models, 2)
	assert.Equal(t, []string{"/predict", "/vertex", "/tokenize", "/decode"}, b.Models[0].Routes)
	assert.Empty(t, b.Models[0].MaskToken)
	assert.True(t, slices.Contains(b.Models[1].Routes, "/fill-mask"), "%v", b.Models[1].Routes)
	assert.True(t, slices.Contains(b.Models[1].Routes, "/embed"), "%v", b.Models[1].Routes)
	assert.False(t, slices.Contains(b.Models[1].Routes, "/predict"), "%v", b.Models[1].Routes)
	assert.Equal(t, "[MASK]", b.Models[1].MaskToken)
}

// TestFlatnessJudge: a soak's verdict compares the first sample with
// readings against the last; a fall is flat, a rise over the
// tolerances is not, and fewer than two readings judge nothing.
func TestFlatnessJudge(t *testing.T) {
	f := Flatness{RSSShare: 0.10, GoroutineShare: 0.10, GoroutineSlack: 8}
	s := func(rss, g float64) MixSample { return MixSample{RSSBytes: rss, Goroutines: g} }
	for _, c := range []struct {
		samples  []MixSample
		rss, gor bool
	}{
		{[]MixSample{s(100, 100), s(110, 118)}, true, true},
		{[]MixSample{s(100, 100), s(111, 100)}, false, true},
		{[]MixSample{s(100, 100), s(50, 119)}, true, false},
		{[]MixSample{s(0, 0), s(100, 100), s(200, 100), s(105, 100)}, true, true}, // the unread first is skipped
		{[]MixSample{s(100, 100), s(0, 0)}, false, false},
	} {
		v := f.Judge(c.samples)
		assert.Equal(t, c.rss, v.RSSFlat, "%v", c.samples)
		assert.Equal(t, c.gor, v.GoroutinesFlat, "%v", c.samples)
		assert.Equal(t, c.rss && c.gor, v.Flat(), "%v", c.samples)
		if !v.Flat() {
			assert.NotEmpty(t, v.Why, "%v", c.samples)
		}
	}
}

// TestMixedLoadSplade: a SPLADE model's plan has /embed_sparse, also as
// its POST / (TEI's task route of a SPLADE model), and both answer.
func TestMixedLoadSplade(t *testing.T) {
	_, ts := newServer(t, Config{Models: []ModelSpec{{Name: "splade", Source: filepath.Join("..", "models", "testdata", "mlm", "bert-mlm")}},
		Pooling: "splade"})
	ctx := context.Background()
	plan, err := MixPlan(ctx, ts.URL, []string{"the man went home", "a fine film"}, []string{"/embed_sparse", "POST /", "/fill-mask"}, nil)
	require.NoError(t, err)
	var keys []string
	for _, tg := range plan {
		keys = append(keys, tg.Key())
	}
	assert.Equal(t, []string{"/embed_sparse splade", "/fill-mask splade", "POST / splade"}, keys)
	res, err := MixTest(ctx, plan, MixOptions{URL: ts.URL, Clients: 2, Requests: 2 * len(mixCycle(plan)), Duration: 5 * time.Minute})
	require.NoError(t, err)
	for i, tr := range res.Targets {
		assert.Positive(t, tr.Requests, keys[i])
		assert.Equal(t, tr.Requests, tr.OK, "%s: %v %s", keys[i], tr.ByStatus, tr.FirstError)
	}
}

// TestMixedLoadSlowMetrics: a server whose /metrics answers more slowly
// than the whole run (a race build tuning its kernels did) still gives
// the run two readings, the tick's and the closing one, so that the
// soak's verdict has a first and a last to compare.
func TestMixedLoadSlowMetrics(t *testing.T) {
	var slow atomic.Bool
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/metrics" {
			if slow.Swap(false) {
				time.Sleep(400 * time.Millisecond)
			}
			fmt.Fprint(w, "process_resident_memory_bytes 1e8\ngo_goroutines 20\n")
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer ts.Close()
	slow.Store(true)
	plan := []*MixTarget{{Route: "/health", Weight: 1, method: "GET", path: "/health"}}
	res, err := MixTest(context.Background(), plan, MixOptions{URL: ts.URL, Clients: 1, Duration: 200 * time.Millisecond,
		SampleEvery: 50 * time.Millisecond})
	require.NoError(t, err)
	assert.Equal(t, 2, readings(res.Samples), "%+v", res.Samples)
	v := Flatness{RSSShare: 0.1, GoroutineShare: 0.1}.Judge(res.Samples)
	assert.True(t, v.Flat(), v.Why)
}
