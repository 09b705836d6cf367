package serve

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSlowClients: a client that stalls in its headers is disconnected
// after ReadHeaderTimeout, one that stalls in its body gets 408 after
// ReadTimeout, an idle keep-alive connection is closed after
// IdleTimeout, and the server answers the next client.
func TestSlowClients(t *testing.T) {
	s, err := New(context.Background(), Config{Models: []ModelSpec{{Name: "sst2", Source: shipped}}, Instances: 1,
		Load: loadOptions(t), ReadHeaderTimeout: 200 * time.Millisecond, ReadTimeout: 400 * time.Millisecond,
		IdleTimeout: 300 * time.Millisecond, DrainDelay: -1})
	require.NoError(t, err)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go s.Serve(l)
	defer s.Close()
	addr := l.Addr().String()

	// Headers never finished: the connection is closed.
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	_, err = io.WriteString(c, "POST /embed HTTP/1.1\r\nHost: x\r\n")
	require.NoError(t, err)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	start := time.Now()
	b, _ := io.ReadAll(c)
	c.Close()
	assert.Less(t, time.Since(start), 4*time.Second, "closed by the server, not by the deadline")
	assert.NotContains(t, string(b), "200 OK")

	// A body that stops: 408.
	c, err = net.Dial("tcp", addr)
	require.NoError(t, err)
	_, err = io.WriteString(c, "POST /embed HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"inputs\": ")
	require.NoError(t, err)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	c.Close()
	assert.Equal(t, http.StatusRequestTimeout, resp.StatusCode, "%s", body)
	assert.Contains(t, string(body), "not received in time")

	// An idle keep-alive connection is closed.
	c, err = net.Dial("tcp", addr)
	require.NoError(t, err)
	_, err = io.WriteString(c, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
	require.NoError(t, err)
	br := bufio.NewReader(c)
	resp, err = http.ReadResponse(br, nil)
	require.NoError(t, err)
	io.ReadAll(resp.Body)
	assert.Equal(t, 200, resp.StatusCode)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	start = time.Now()
	_, err = br.ReadByte()
	assert.ErrorIs(t, err, io.EOF, "the server closes the idle connection")
	assert.Less(t, time.Since(start), 4*time.Second)
	c.Close()

	r, err := http.Post("http://"+addr+"/predict", "application/json", strings.NewReader(`{"inputs": "fine"}`))
	require.NoError(t, err)
	r.Body.Close()
	assert.Equal(t, 200, r.StatusCode)
}

// heldServer serves the shipped model on loopback with one instance,
// held by a job until release is closed; served receives Serve's result.
func heldServer(t *testing.T, drainDelay time.Duration) (*Server, net.Listener, chan error, chan struct{}) {
	t.Helper()
	s, err := New(context.Background(), Config{Models: []ModelSpec{{Name: "sst2", Source: shipped}}, Instances: 1,
		Load: loadOptions(t), DrainDelay: drainDelay})
	require.NoError(t, err)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- s.Serve(l) }()
	release, held := make(chan struct{}), make(chan struct{})
	go s.sched.submit(&job{ctx: context.Background(), m: s.models[0], run: func() error { close(held); <-release; return nil }}, false)
	<-held
	return s, l, served, release
}

// TestShutdownAnswersAdmitted: requests admitted before Shutdown (here
// queued behind a held instance) are all answered 200 after the
// listener has closed, new connections are refused meanwhile, and
// Shutdown returns nil once they are done.
func TestShutdownAnswersAdmitted(t *testing.T) {
	s, l, served, release := heldServer(t, -1)
	url := "http://" + l.Addr().String()
	const n = 6
	codes := make(chan int, n)
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	for i := 0; i < n; i++ {
		go func() {
			r, err := client.Post(url+"/predict", "application/json", strings.NewReader(`{"inputs": "held up"}`))
			if err != nil {
				codes <- -1
				return
			}
			b, err := io.ReadAll(r.Body)
			r.Body.Close()
			if err != nil || !strings.Contains(string(b), "label") {
				codes <- -2
				return
			}
			codes <- r.StatusCode
		}()
	}
	require.Eventually(t, func() bool {
		s.sched.mu.Lock()
		defer s.sched.mu.Unlock()
		return len(s.sched.queue) == n
	}, 10*time.Second, time.Millisecond)
	done := make(chan error, 1)
	go func() { done <- s.Shutdown(context.Background()) }()
	require.Eventually(t, func() bool {
		c, err := net.Dial("tcp", l.Addr().String())
		if err == nil {
			c.Close()
		}
		return err != nil
	}, 10*time.Second, time.Millisecond, "the listener closes")
	select {
	case err := <-done:
		t.Fatalf("Shutdown returned (%v) with requests in flight", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	for i := 0; i < n; i++ {
		assert.Equal(t, 200, <-codes, "admitted request %d", i)
	}
	assert.NoError(t, <-done)
	assert.ErrorIs(t, <-served, http.ErrServerClosed)
}

// TestDrainClosesAdmittedConnections: a request admitted before the drain
// and answered during it says "Connection: close", so that its keep-alive
// client does not write its next request on a connection the listener's
// close is about to shut (docs/DESIGN.md section 9.3); without it, a
// request outliving the drain delay left its connection idle and open,
// and the next request on it was lost (an EOF at the client).
func TestDrainClosesAdmittedConnections(t *testing.T) {
	s, l, served, release := heldServer(t, time.Minute)
	url := "http://" + l.Addr().String()
	type answer struct {
		close  bool
		status int
		err    error
	}
	got := make(chan answer, 1)
	client := &http.Client{Transport: &http.Transport{}} // keep-alive
	go func() {
		r, err := client.Post(url+"/predict", "application/json", strings.NewReader(`{"inputs": "held up"}`))
		if err != nil {
			got <- answer{err: err}
			return
		}
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
		got <- answer{close: r.Close, status: r.StatusCode}
	}()
	require.Eventually(t, func() bool {
		s.sched.mu.Lock()
		defer s.sched.mu.Unlock()
		return len(s.sched.queue) == 1
	}, 10*time.Second, time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Shutdown(ctx) }()
	require.Eventually(t, s.draining.Load, 10*time.Second, time.Millisecond)
	close(release)
	a := <-got
	require.NoError(t, a.err)
	assert.Equal(t, 200, a.status, "the admitted request is answered")
	assert.True(t, a.close, "its answer, written during the drain, says Connection: close")
	cancel() // end the drain delay
	<-done
	assert.ErrorIs(t, <-served, http.ErrServerClosed)
}
