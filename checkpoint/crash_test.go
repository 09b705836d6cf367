package checkpoint

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/int8bert/int8bert/internal/crashtest"
)

// slowWriter sends a body in chunks with a pause after each, flushed, so
// that a download lasts long enough for kills to land inside its body.
type slowWriter struct {
	http.ResponseWriter
	chunk int
	pause time.Duration
}

func (s slowWriter) Write(b []byte) (int, error) {
	n := 0
	for len(b) > 0 {
		c := min(s.chunk, len(b))
		m, err := s.ResponseWriter.Write(b[:c])
		n += m
		if err != nil {
			return n, err
		}
		s.ResponseWriter.(http.Flusher).Flush()
		b = b[c:]
		time.Sleep(s.pause)
	}
	return n, nil
}

func (s slowWriter) Flush() { s.ResponseWriter.(http.Flusher).Flush() }

// TestCrashChild is the child process of TestCrashHubDownload: it
// resolves the model org/tiny through the hub at INT8BERT_CRASH_ENDPOINT
// into the cache INT8BERT_CRASH_CACHE. It runs only as that child.
func TestCrashChild(t *testing.T) {
	if crashtest.Child() != "hub-download" {
		t.Skip("the child process of TestCrashHubDownload; runs only under it")
	}
	h := &Hub{CacheDir: os.Getenv("INT8BERT_CRASH_CACHE"), Endpoint: os.Getenv("INT8BERT_CRASH_ENDPOINT"),
		OnProgress: func(file string, done, total int64) {}}
	crashtest.Ready()
	crashtest.Phase("download")
	if _, err := h.ResolveModel(context.Background(), "org/tiny", ""); err != nil {
		t.Fatal(err)
	}
	crashtest.Done()
}

// TestCrashHubDownload kills a process downloading a model folder from a
// local server that sends it slowly (docs/DESIGN.md section 6.1). After
// each kill, the cache offline either lacks the model or holds it whole,
// every blob in it is a served file's exact bytes (a partial one stays
// under its .incomplete name), and resolving online again completes it:
// the partial blob resumed or re-downloaded, the folder opening to the
// served bytes.
func TestCrashHubDownload(t *testing.T) {
	kills := 50
	if testing.Short() {
		kills = 4
	}
	dir := testdataDir(t)
	files := map[string][]byte{}
	for _, f := range []string{ConfigFile, PytorchFile} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		files["org/tiny/"+f] = b
	}
	fh := &fakeHub{t: t, files: files}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fh.ServeHTTP(slowWriter{w, 16 << 10, 2 * time.Millisecond}, r)
	}))
	defer srv.Close()
	base := t.TempDir()
	cacheOf := func(i int) string { return filepath.Join(base, strconv.Itoa(i+2)) }
	outcomes := map[string]int{}
	res := crashtest.Kill(t, crashtest.Options{
		Op: "hub-download", Test: "TestCrashChild", Kills: kills, Seed: 3,
		Env: func(i int) []string {
			return []string{"INT8BERT_CRASH_CACHE=" + cacheOf(i), "INT8BERT_CRASH_ENDPOINT=" + srv.URL}
		},
		Before: func(int) {},
		After: func(i int, killed bool, phase string) {
			cache := cacheOf(i)
			blobs, _ := filepath.Glob(filepath.Join(cache, "models--org--tiny", "blobs", "*"))
			partial := 0
			for _, b := range blobs {
				if strings.HasSuffix(b, ".incomplete") {
					partial++
					continue
				}
				got, err := os.ReadFile(b)
				if err != nil {
					t.Fatal(err)
				}
				ok := false
				for _, want := range files {
					ok = ok || bytes.Equal(got, want)
				}
				if !ok {
					t.Fatalf("run %d (killed %v): blob %s (%d bytes) is none of the served files: a partial blob taken as whole", i, killed, b, len(got))
				}
			}
			off := &Hub{CacheDir: cache, Endpoint: srv.URL, Offline: true}
			check := func(snap string) {
				for _, f := range []string{ConfigFile, PytorchFile} {
					got, err := os.ReadFile(filepath.Join(snap, f))
					if err != nil || !bytes.Equal(got, files["org/tiny/"+f]) {
						t.Fatalf("run %d: %s of the resolved model differs from the served file (%v)", i, f, err)
					}
				}
				c, err := Open(snap)
				if err != nil {
					t.Fatalf("run %d: the resolved model does not open: %v", i, err)
				}
				c.Close()
			}
			if snap, err := off.ResolveModel(context.Background(), "org/tiny", ""); err == nil {
				check(snap)
				outcomes["whole"]++
			} else {
				if !killed {
					t.Fatalf("run %d finished, yet the model is not cached: %v", i, err)
				}
				outcomes[fmt.Sprintf("not cached, %d partial blobs", partial)]++
			}
			on := &Hub{CacheDir: cache, Endpoint: srv.URL}
			snap, err := on.ResolveModel(context.Background(), "org/tiny", "")
			if err != nil {
				t.Fatalf("run %d: resolving again after the kill: %v", i, err)
			}
			check(snap)
			if left, _ := filepath.Glob(filepath.Join(cache, "models--org--tiny", "blobs", "*.incomplete")); len(left) > 0 {
				t.Fatalf("run %d: partial blobs left after a complete download: %v", i, left)
			}
			if err := os.RemoveAll(cache); err != nil {
				t.Fatal(err)
			}
		},
	})
	t.Logf("%v; outcomes %v", res, outcomes)
}
