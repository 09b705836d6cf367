package serve

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
)

// cancelTexts are inputs of different lengths, one a request.
var cancelTexts = []string{
	"fine",
	"a gripping, moving film",
	"it drags on and on without a point or a single memorable scene",
	"bad",
	"one of the best performances of the year, funny and sad at once",
	"the plot makes no sense",
	"warm",
	"a long, slow, dull affair that never finds its feet or its heart, and wastes a fine cast",
	"lovely",
	"the dialogue is clumsy and the jokes fall flat",
}

// savedTokens reads int8bert_cancelled_tokens_saved_total from the server's
// metrics.
func savedTokens(t *testing.T, s *Server) float64 {
	t.Helper()
	ts := httptest.NewServer(s.Metrics())
	defer ts.Close()
	r, err := http.Get(ts.URL)
	require.NoError(t, err)
	b, err := io.ReadAll(r.Body)
	r.Body.Close()
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^int8bert_cancelled_tokens_saved_total (\S+)$`).FindSubmatch(b)
	require.NotNil(t, m, "no saved-tokens metric in\n%s", b)
	v, err := strconv.ParseFloat(string(m[1]), 64)
	require.NoError(t, err)
	return v
}

// TestCancelledRowsLeaveThePass: 10 /embed requests queued behind a held
// instance run as one packed pass; the odd ones' clients cancel before
// layer 2 (from the between-layers hook, which waits until the server has
// seen each go: no sleeps). Their rows leave the pass, the tokens saved
// are counted, and every other request is answered 200 with the bytes an
// uncancelled pass of the same 10 requests gave it; every request is
// answered or its client gone, and the instance serves on.
func TestCancelledRowsLeaveThePass(t *testing.T) {
	s, l, served, release := heldServer(t, -1)
	url := "http://" + l.Addr().String()
	n := len(cancelTexts)

	type answer struct {
		status int
		body   string
		err    error
	}
	// round queues the n requests one by one (so that request k is row k
	// of the pass), then frees the instance; ctxs are the clients'.
	round := func(hold chan struct{}, ctxs []context.Context) []answer {
		got := make([]chan answer, n)
		for k, text := range cancelTexts {
			got[k] = make(chan answer, 1)
			req, err := http.NewRequestWithContext(ctxs[k], "POST", url+"/embed", strings.NewReader(fmt.Sprintf(`{"inputs": %q}`, text)))
			require.NoError(t, err)
			req.Header.Set("Content-Type", "application/json")
			go func() {
				r, err := http.DefaultClient.Do(req)
				if err != nil {
					got[k] <- answer{err: err}
					return
				}
				b, err := io.ReadAll(r.Body)
				r.Body.Close()
				got[k] <- answer{status: r.StatusCode, body: string(b), err: err}
			}()
			require.Eventually(t, func() bool {
				s.sched.mu.Lock()
				defer s.sched.mu.Unlock()
				return len(s.sched.queue) == k+1
			}, 10*time.Second, time.Millisecond, "request %d queued", k)
		}
		close(hold)
		out := make([]answer, n)
		for k := range got {
			out[k] = <-got[k]
		}
		return out
	}
	hold := func() chan struct{} {
		release, held := make(chan struct{}), make(chan struct{})
		go s.sched.submit(&job{ctx: context.Background(), m: s.models[0], run: func() error { close(held); <-release; return nil }}, false)
		<-held
		return release
	}
	background := make([]context.Context, n)
	for k := range background {
		background[k] = context.Background()
	}

	// The uncancelled pass.
	var mu sync.Mutex
	var rows []int
	h := func(layer, row int, _ context.Context) {
		if layer == 2 {
			mu.Lock()
			rows = append(rows, row)
			mu.Unlock()
		}
	}
	testBetweenLayers.Store(&h)
	defer testBetweenLayers.Store(nil)
	ran := func() uint64 {
		s.sched.mu.Lock()
		defer s.sched.mu.Unlock()
		return s.sched.ran
	}
	before := ran()
	want := round(release, background)
	require.Equal(t, before+1, ran(), "the %d requests ran as one batch", n)
	for k, a := range want {
		require.NoError(t, a.err)
		require.Equal(t, 200, a.status, "request %d: %s", k, a.body)
	}
	mu.Lock()
	require.Len(t, rows, n, "the %d requests ran as one pass", n)
	mu.Unlock()
	require.Zero(t, savedTokens(t, s))

	// The same requests, the odd ones' clients gone before layer 2.
	ctxs := make([]context.Context, n)
	cancels := make([]context.CancelFunc, n)
	for k := range ctxs {
		ctxs[k], cancels[k] = context.WithCancel(context.Background())
		defer cancels[k]()
	}
	h = func(layer, row int, ctx context.Context) {
		if layer != 2 || row%2 == 0 {
			return
		}
		cancels[row]()
		select { // the server sees the connection close
		case <-ctx.Done():
		case <-time.After(10 * time.Second):
			t.Errorf("row %d: the server did not see its client go", row)
		}
	}
	testBetweenLayers.Store(&h)
	freed := hold()
	before = ran()
	got := round(freed, ctxs)
	require.Equal(t, before+1, ran(), "one batch")
	for k, a := range got {
		if k%2 == 1 {
			assert.ErrorIs(t, a.err, context.Canceled, "request %d: its client is gone", k)
			continue
		}
		require.NoError(t, a.err, "request %d", k)
		assert.Equal(t, 200, a.status, "request %d", k)
		assert.Equal(t, want[k].body, a.body, "request %d: the uncancelled pass's answer, bit for bit", k)
	}
	assert.Greater(t, savedTokens(t, s), 0.0, "tokens saved by the rows that left")

	// The instance serves on.
	testBetweenLayers.Store(nil)
	r, err := http.Post(url+"/embed", "application/json", strings.NewReader(`{"inputs": "after"}`))
	require.NoError(t, err)
	r.Body.Close()
	assert.Equal(t, 200, r.StatusCode)
	require.NoError(t, s.Shutdown(context.Background()))
	assert.ErrorIs(t, <-served, http.ErrServerClosed)
}

// TestRequestTimeout: with RequestTimeout set, a request still in its
// pass when the bound passes (held before layer 2 by the hook until its
// context ends) is answered 504 in TEI's error JSON, its row leaves the
// pass (tokens saved) and the instance goes idle; a negative bound is
// refused.
func TestRequestTimeout(t *testing.T) {
	_, err := Config{Models: []ModelSpec{{Name: "sst2", Source: shipped}}, RequestTimeout: -time.Second}.withDefaults()
	require.ErrorContains(t, err, "request timeout")

	s, ts := newServer(t, Config{Models: []ModelSpec{{Name: "sst2", Source: shipped}}, RequestTimeout: time.Second})
	const text = `{"inputs": "a gripping, moving film"}`
	// Tunes the shapes (a cold selector may take longer than the bound:
	// then it is already the 504).
	for _, route := range []string{"/embed", "/predict"} {
		status, body := post(t, ts, route, text)
		require.Contains(t, []int{200, http.StatusGatewayTimeout}, status, "%s: %s", route, body)
	}
	h := func(layer, row int, ctx context.Context) {
		if layer != 2 {
			return
		}
		select { // past the bound
		case <-ctx.Done():
		case <-time.After(10 * time.Second):
			t.Errorf("row %d: the request timeout did not end its context", row)
		}
	}
	testBetweenLayers.Store(&h)
	defer testBetweenLayers.Store(nil)
	for _, route := range []string{"/embed", "/predict"} {
		status, body := post(t, ts, route, text)
		assert.Equal(t, http.StatusGatewayTimeout, status, "%s: %s", route, body)
		assert.JSONEq(t, `{"error": "the request did not finish within --request-timeout (1s); send fewer or shorter inputs, or retry later", "error_type": "Backend"}`, string(body), route)
	}
	// The answer comes at the deadline; the pass counts what it saved
	// when it ends (under a loaded race detector, a linear being tuned
	// may hold it for seconds), and then the instance is idle.
	require.Eventually(t, func() bool {
		_, idle := s.sched.idle()
		return idle
	}, time.Minute, time.Millisecond, "the instance goes idle")
	assert.Greater(t, savedTokens(t, s), 0.0)
}

// TestRequestTimeoutGRPCCode: the 504 of --request-timeout is gRPC's
// DeadlineExceeded, as a client's own deadline is.
func TestRequestTimeoutGRPCCode(t *testing.T) {
	s := &Server{cfg: Config{RequestTimeout: time.Millisecond}}
	ctx, cancel := context.WithTimeoutCause(context.Background(), time.Millisecond, errRequestTimeout)
	defer cancel()
	<-ctx.Done()
	err := s.timedOut(ctx, ctx.Err())
	c, _ := grpcCode(err)
	assert.Equal(t, codes.DeadlineExceeded, c)
	assert.Equal(t, http.StatusGatewayTimeout, httpStatus(err))
	// A client's own cancellation stays what it was.
	cctx, ccancel := context.WithCancel(context.Background())
	ccancel()
	assert.ErrorIs(t, s.timedOut(cctx, cctx.Err()), context.Canceled)
}

// TestShutdownDeadlineCutsThePass: a request still in its pass when
// Shutdown's deadline passes (held before layer 2 by the hook until its
// context ends) has its row leave the pass and is answered 503, and
// Shutdown returns.
func TestShutdownDeadlineCutsThePass(t *testing.T) {
	s, err := New(context.Background(), Config{Models: []ModelSpec{{Name: "sst2", Source: shipped}}, Instances: 1,
		Load: loadOptions(t), ShutdownTimeout: 200 * time.Millisecond, DrainDelay: -1})
	require.NoError(t, err)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- s.Serve(l) }()
	inPass := make(chan struct{})
	var once sync.Once
	h := func(layer, row int, ctx context.Context) {
		if layer != 2 {
			return
		}
		once.Do(func() { close(inPass) })
		select {
		case <-ctx.Done():
		case <-time.After(30 * time.Second):
			t.Errorf("row %d: the shutdown deadline did not end its context", row)
		}
	}
	testBetweenLayers.Store(&h)
	defer testBetweenLayers.Store(nil)
	type answer struct {
		status int
		body   string
		err    error
	}
	got := make(chan answer, 1)
	go func() {
		r, err := http.Post("http://"+l.Addr().String()+"/embed", "application/json", strings.NewReader(`{"inputs": "held in its pass"}`))
		if err != nil {
			got <- answer{err: err}
			return
		}
		b, err := io.ReadAll(r.Body)
		r.Body.Close()
		got <- answer{r.StatusCode, string(b), err}
	}()
	<-inPass
	done := make(chan error, 1)
	go func() { done <- s.Shutdown(context.Background()) }()
	a := <-got
	require.NoError(t, a.err)
	assert.Equal(t, http.StatusServiceUnavailable, a.status, "%s", a.body)
	assert.Contains(t, a.body, "--shutdown-timeout")
	<-done
	assert.ErrorIs(t, <-served, http.ErrServerClosed)
	// Shutdown may return (its deadline passed) before the pass has
	// ended and counted what it saved.
	deadline := time.Now().Add(time.Minute)
	for savedTokens(t, s) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	assert.Greater(t, savedTokens(t, s), 0.0, "the row left its pass")
}
