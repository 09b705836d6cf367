package serve

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOverLimitBodyGets413NotReset: a 50 MB body to a server with the
// default 2 MB limit (it once got 100 Continue and then a connection
// reset), over a real TCP connection. With Expect: 100-continue the
// client gets TEI's 413 JSON at once, no 100 Continue, and sends nothing;
// without it the client writes its whole body, reads the 413 and then a
// clean end of the connection, never a reset.
func TestOverLimitBodyGets413NotReset(t *testing.T) {
	_, ts := newServer(t, Config{Models: []ModelSpec{{Name: "sst2", Source: shipped}}})
	const size = 50_000_000
	addr := strings.TrimPrefix(ts.URL, "http://")
	head := func(expect bool) string {
		h := fmt.Sprintf("POST /embed HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n", addr, size)
		if expect {
			h += "Expect: 100-continue\r\n"
		}
		return h + "\r\n"
	}
	check413 := func(t *testing.T, br *bufio.Reader) {
		t.Helper()
		resp, err := http.ReadResponse(br, nil)
		require.NoError(t, err)
		require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, "no 100 Continue, no other status")
		assert.True(t, resp.Close, "Connection: close")
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		var e errorBody
		require.NoError(t, json.Unmarshal(body, &e), "%s", body)
		assert.Equal(t, errValidation, e.ErrorType)
		assert.Contains(t, e.Error, "50000000 bytes")
		assert.Contains(t, e.Error, "raise --max-body-bytes")
		// Then the end of the connection, not a reset.
		n, err := io.Copy(io.Discard, br)
		assert.NoError(t, err, "after the 413")
		assert.Zero(t, n)
	}

	t.Run("Expect 100-continue", func(t *testing.T) {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer c.Close()
		require.NoError(t, c.SetDeadline(time.Now().Add(30*time.Second)))
		_, err = io.WriteString(c, head(true))
		require.NoError(t, err)
		check413(t, bufio.NewReader(c))
	})

	t.Run("body at once", func(t *testing.T) {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer c.Close()
		require.NoError(t, c.SetDeadline(time.Now().Add(60*time.Second)))
		sent := make(chan error, 1)
		go func() {
			if _, err := io.WriteString(c, head(false)); err != nil {
				sent <- err
				return
			}
			chunk := []byte(strings.Repeat(" ", 1<<20))
			left := size
			for left > 0 {
				n, err := c.Write(chunk[:min(left, len(chunk))])
				if err != nil {
					sent <- fmt.Errorf("after %d bytes of the body: %w", size-left+n, err)
					return
				}
				left -= n
			}
			sent <- nil
		}()
		check413(t, bufio.NewReader(c))
		assert.NoError(t, <-sent, "the client's body is read to its end, not reset")
	})
}

// TestChunkedOverLimitBodyGets413: a 50 MB body sent chunked (no
// Content-Length), generated as it is sent, is refused with TEI's 413
// JSON once the limit is passed, read through a limited reader (never
// whole), with a clean end of the connection rather than a reset; the
// server goes on serving. Every route that reads a body does the same.
func TestChunkedOverLimitBodyGets413(t *testing.T) {
	_, ts := newServer(t, Config{Models: []ModelSpec{{Name: "sst2", Source: shipped}}})
	addr := strings.TrimPrefix(ts.URL, "http://")
	for i, route := range []string{"/embed", "/predict", "/v1/embeddings", "/tokenize", "/qa", "/similarity", "/vertex", "/invocations"} {
		// 50 MB once; 5 MB (still over the limit) on the other routes,
		// so that the race detector's run stays short.
		size := 5_000_000
		if i == 0 {
			size = 50_000_000
		}
		t.Run(route, func(t *testing.T) {
			c, err := net.Dial("tcp", addr)
			require.NoError(t, err)
			defer c.Close()
			require.NoError(t, c.SetDeadline(time.Now().Add(60*time.Second)))
			sent := make(chan error, 1)
			go func() {
				bw := bufio.NewWriter(c)
				fmt.Fprintf(bw, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n", route, addr)
				chunk := strings.Repeat(" ", 1<<20)
				for left := size; left > 0; left -= len(chunk) {
					n := min(left, len(chunk))
					fmt.Fprintf(bw, "%x\r\n%s\r\n", n, chunk[:n])
					if err := bw.Flush(); err != nil {
						sent <- fmt.Errorf("after %d bytes of the body: %w", size-left, err)
						return
					}
				}
				_, err := io.WriteString(bw, "0\r\n\r\n")
				if err == nil {
					err = bw.Flush()
				}
				sent <- err
			}()
			br := bufio.NewReader(c)
			resp, err := http.ReadResponse(br, nil)
			require.NoError(t, err)
			require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
			assert.True(t, resp.Close, "Connection: close")
			body, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			var e errorBody
			if route == "/v1/embeddings" {
				var o struct {
					Error struct {
						Message string `json:"message"`
					} `json:"error"`
				}
				require.NoError(t, json.Unmarshal(body, &o), "%s", body)
				e.Error, e.ErrorType = o.Error.Message, errValidation
			} else {
				require.NoError(t, json.Unmarshal(body, &e), "%s", body)
			}
			assert.Equal(t, errValidation, e.ErrorType)
			assert.Contains(t, e.Error, "larger than 2000000 bytes")
			assert.Contains(t, e.Error, "raise --max-body-bytes")
			n, err := io.Copy(io.Discard, br)
			assert.NoError(t, err, "after the 413: the end of the connection, not a reset")
			assert.Zero(t, n)
			assert.NoError(t, <-sent, "the client's body is read to its end, not reset")
		})
	}
	code, b := post(t, ts, "/embed", `{"inputs": "still serving"}`)
	assert.Equal(t, 200, code, "%s", b)
}
