package serve

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRetryAfterFromTheWorkInFlight: a job past the admitted tokens is
// refused 429 with Retry-After = the tokens in flight over the measured
// rate of the instances, rounded up; with nothing in flight a job is
// admitted whatever its size; before any batch has run it is 1 second.
func TestRetryAfterFromTheWorkInFlight(t *testing.T) {
	s := newScheduler(&Config{MaxBatchTokens: 4096, MaxBatchRequests: 8, Logger: slog.New(slog.DiscardHandler)}, newMetrics())
	s.admit, s.instances = 100, 2
	assert.Equal(t, 1, s.retryAfter(), "no rate measured yet")

	job := func(tokens int) *job {
		return &job{ctx: context.Background(), tokens: tokens}
	}
	s.inflight, s.rate = 90, 10 // 2 instances at 10 tokens/s each: 90 tokens take 4.5 s
	err := s.submit(job(11), false)
	var ov *overloaded
	require.ErrorAs(t, err, &ov)
	assert.Equal(t, http.StatusTooManyRequests, ov.status)
	assert.Equal(t, errOverloaded, ov.typ)
	assert.Equal(t, 5, ov.retryAfter, "ceil(90 / (2 x 10))")
	assert.Contains(t, ov.msg, "--max-queued-passes")
	assert.Equal(t, 90, s.inflight, "a refused job adds nothing")
	assert.Empty(t, s.queue)

	s.inflight, s.rate = 0, 1e-9
	done := make(chan error, 1)
	go func() { done <- s.submit(job(500), false) }()
	require.Eventually(t, func() bool { s.mu.Lock(); defer s.mu.Unlock(); return len(s.queue) == 1 }, 10*time.Second, time.Millisecond)
	s.mu.Lock()
	assert.Equal(t, 500, s.inflight, "alone, a job larger than the bound is admitted")
	assert.Equal(t, 3600, s.retryAfterLocked(), "at most an hour")
	s.mu.Unlock()
	b := s.take()
	require.Len(t, b, 1)
	b[0].done <- nil
	require.NoError(t, <-done)
}

// TestOverloadRefusesWithRetryAfter drives a server past its capacity
// (one instance, two permits) with concurrent requests until some are
// refused: every request is answered (none lost), every 429 has TEI's
// JSON and a Retry-After of whole seconds, and every 200 is the answer
// the same text gets alone. Then the token bound: with the admitted
// tokens taken, a request gets 429 with Retry-After too.
func TestOverloadRefusesWithRetryAfter(t *testing.T) {
	s, ts := newServer(t, Config{Models: []ModelSpec{{Name: "sst2", Source: shipped}}, MaxConcurrentRequests: 2})
	texts := []string{"a charming and often affecting journey", "unflinchingly bleak and desperate",
		"the movie is a disaster", "it 's a cool event for the whole family"}
	want := map[string]string{}
	for _, text := range texts {
		code, b := post(t, ts, "/predict", fmt.Sprintf(`{"inputs": %q}`, text))
		require.Equal(t, 200, code, "%s", b)
		want[text] = string(b)
	}

	type answer struct {
		text   string
		code   int
		retry  string
		body   []byte
		errStr string
	}
	refused := 0
	for round := 0; round < 20 && refused == 0; round++ {
		const n = 32
		answers := make([]answer, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				a := &answers[i]
				a.text = texts[i%len(texts)]
				resp, err := http.Post(ts.URL+"/predict", "application/json", strings.NewReader(fmt.Sprintf(`{"inputs": %q}`, a.text)))
				if err != nil {
					a.errStr = err.Error()
					return
				}
				defer resp.Body.Close()
				a.code, a.retry = resp.StatusCode, resp.Header.Get("Retry-After")
				if a.body, err = io.ReadAll(resp.Body); err != nil {
					a.errStr = err.Error()
				}
			}()
		}
		close(start)
		wg.Wait()
		for _, a := range answers {
			require.Empty(t, a.errStr, "no request lost")
			switch a.code {
			case 200:
				assert.Equal(t, want[a.text], string(a.body), "admitted: the same answer as alone")
			case 429:
				refused++
				sec, err := strconv.Atoi(a.retry)
				assert.NoError(t, err, "Retry-After %q: whole seconds", a.retry)
				assert.GreaterOrEqual(t, sec, 1)
				e := decode[errorBody](t, a.body)
				assert.Equal(t, errOverloaded, e.ErrorType)
				assert.Contains(t, e.Error, "retry later")
			default:
				t.Fatalf("status %d: %s", a.code, a.body)
			}
		}
	}
	require.Positive(t, refused, "32 concurrent requests on 2 permits never refused in 20 rounds")
	assert.Equal(t, 0, s.permits.inUse())

	// The token bound: the admitted tokens all in flight.
	s.sched.mu.Lock()
	admit := s.sched.admit
	require.Positive(t, admit, "the default bound")
	s.sched.inflight = admit
	s.sched.mu.Unlock()
	resp, err := http.Post(ts.URL+"/embed", "application/json", bytes.NewReader([]byte(`{"inputs": "a"}`)))
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, 429, resp.StatusCode, "%s", b)
	assert.NotEmpty(t, resp.Header.Get("Retry-After"))
	assert.Contains(t, decode[errorBody](t, b).Error, "--max-queued-passes")
	// OpenAI's route: its own error JSON, the same header.
	resp, err = http.Post(ts.URL+"/v1/embeddings", "application/json", bytes.NewReader([]byte(`{"input": "a"}`)))
	require.NoError(t, err)
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, 429, resp.StatusCode, "%s", b)
	assert.NotEmpty(t, resp.Header.Get("Retry-After"))
	s.sched.mu.Lock()
	s.sched.inflight = 0
	s.sched.mu.Unlock()
	code, b := post(t, ts, "/embed", `{"inputs": "a"}`)
	assert.Equal(t, 200, code, "%s", b)
}
