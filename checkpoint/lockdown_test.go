package checkpoint

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// countingServer answers every request with 404 and counts them.
func countingServer(t *testing.T) (*httptest.Server, *atomic.Int64) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		http.NotFound(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

// onlyCache checks that parent holds nothing but the cache folder.
func onlyCache(t *testing.T, parent string) {
	t.Helper()
	es, err := os.ReadDir(parent)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		if e.Name() != "cache" {
			t.Errorf("%s written beside the cache", e.Name())
		}
	}
}

// TestHubRefusesEscapingNames: a file name that leaves the repository is
// refused before any request, by Resolve and Cached, wrapping
// ErrUnsafePath, and nothing is written outside the cache.
func TestHubRefusesEscapingNames(t *testing.T) {
	srv, hits := countingServer(t)
	parent := t.TempDir()
	h := &Hub{CacheDir: filepath.Join(parent, "cache"), Endpoint: srv.URL, Client: srv.Client(), Token: "t"}
	for _, name := range []string{"../x", "../../../../etc/passwd", "/etc/passwd", "a/../../x", "a/./b", "a//b", ".", "..", "a/..", `a\..\b`, `..\x`, "", "dir/"} {
		_, err := h.Resolve(context.Background(), "org/m", "main", name)
		if !errors.Is(err, ErrUnsafePath) {
			t.Errorf("Resolve(%q) = %v, want ErrUnsafePath", name, err)
		}
		if _, err := h.Cached("org/m", "main", name); !errors.Is(err, ErrUnsafePath) {
			t.Errorf("Cached(%q) = %v, want ErrUnsafePath", name, err)
		}
	}
	for _, id := range []string{"../m", "org/..", "/abs", "a/b/c"} {
		if _, err := h.Resolve(context.Background(), id, "main", "config.json"); err == nil || !strings.Contains(err.Error(), "invalid model id") {
			t.Errorf("Resolve(id %q) = %v, want an invalid model id", id, err)
		}
	}
	if _, err := h.Resolve(context.Background(), "org/m", "../../x", "config.json"); err == nil || !strings.Contains(err.Error(), "invalid revision") {
		t.Errorf("revision ../../x: %v", err)
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("%d requests sent for refused names", n)
	}
	onlyCache(t, parent)
	// A legitimate nested name goes through (and gets the server's 404).
	if _, err := h.Resolve(context.Background(), "org/m", "main", "1_Pooling/config.json"); !errors.Is(err, ErrNotFound) {
		t.Errorf("1_Pooling/config.json: %v, want ErrNotFound from the server", err)
	}
}

// TestHubRefusesEscapingIndex: a shard index whose weight_map names a file
// outside the snapshot stops ResolveModel before it asks for that file.
func TestHubRefusesEscapingIndex(t *testing.T) {
	for _, shard := range []string{"../evil.safetensors", "..", "sub/x.safetensors", "/tmp/x.safetensors", `..\x`} {
		idx := fmt.Sprintf(`{"weight_map":{"a":"model-1.safetensors","b":%q}}`, shard)
		fh := &fakeHub{t: t, files: map[string][]byte{
			"org/sharded/config.json":                  []byte(`{}`),
			"org/sharded/model.safetensors.index.json": []byte(idx),
		}}
		srv := httptest.NewServer(fh)
		parent := t.TempDir()
		h := &Hub{CacheDir: filepath.Join(parent, "cache"), Endpoint: srv.URL, Client: srv.Client()}
		_, err := h.ResolveModel(context.Background(), "org/sharded", "")
		srv.Close()
		if !errors.Is(err, ErrUnsafePath) || !strings.Contains(err.Error(), "weight_map") && !strings.Contains(err.Error(), "shard") {
			t.Errorf("shard %q: %v, want ErrUnsafePath naming the shard", shard, err)
		}
		onlyCache(t, parent)
	}
}

// TestHubRefusesEscapingETag: a server's ETag names the blob file; "." or
// ".." would make it the blobs folder or the repository folder.
func TestHubRefusesEscapingETag(t *testing.T) {
	for _, etag := range []string{`".."`, `"."`, `W/".."`, `"../x"`, `"a/b"`} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Repo-Commit", testCommit)
			w.Header().Set("ETag", etag)
			w.Write([]byte("{}"))
		}))
		parent := t.TempDir()
		h := &Hub{CacheDir: filepath.Join(parent, "cache"), Endpoint: srv.URL, Client: srv.Client()}
		_, err := h.Resolve(context.Background(), "org/m", "main", "config.json")
		srv.Close()
		if err == nil || !strings.Contains(err.Error(), "ETag") {
			t.Errorf("ETag %s: %v, want a refused ETag", etag, err)
		}
		if (etag == `".."` || etag == `"."`) && !errors.Is(err, ErrUnsafePath) {
			t.Errorf("ETag %s: %v, want ErrUnsafePath", etag, err)
		}
		onlyCache(t, parent)
		filepath.WalkDir(parent, func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				t.Errorf("ETag %s: file %s written", etag, p)
			}
			return nil
		})
	}
}

// TestHubTokenNeverLeaks sets HF_TOKEN to a distinctive value, provokes
// every kind of hub failure against local servers (401, 404, 500, a
// redirect to another host, a server that echoes the Authorization header
// into the headers and status line an error quotes, a bad endpoint URL, a
// refused connection, a cut download) and checks every error string and
// every progress line for the token. A redirect to another host must not
// carry the token there either.
func TestHubTokenNeverLeaks(t *testing.T) {
	const token = "hf_LOCKDOWNzq9XwT7kP3vB5nR8mJ2cY6"
	t.Setenv("HF_TOKEN", token)
	t.Setenv("HF_ENDPOINT", "")
	t.Setenv("HF_HUB_OFFLINE", "")
	t.Setenv("HF_HUB_CACHE", t.TempDir())

	var otherGotToken atomic.Bool
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.Header.Get("Authorization"), token) {
			otherGotToken.Store(true)
		}
		http.Error(w, "cdn says no", http.StatusInternalServerError)
	}))
	defer other.Close()
	// The same server as "localhost": another host to the client.
	otherURL := strings.Replace(other.URL, "127.0.0.1", "localhost", 1)

	sawToken := func(r *http.Request) bool { return r.Header.Get("Authorization") == "Bearer "+token }
	handlers := map[string]http.HandlerFunc{
		"401": func(w http.ResponseWriter, r *http.Request) { http.Error(w, "no", http.StatusUnauthorized) },
		"404": func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) },
		"500": func(w http.ResponseWriter, r *http.Request) { http.Error(w, "boom", http.StatusInternalServerError) },
		"redirect": func(w http.ResponseWriter, r *http.Request) {
			if !sawToken(r) {
				t.Errorf("the hub itself did not get the token")
			}
			w.Header().Set("X-Repo-Commit", testCommit)
			w.Header().Set("ETag", `"abc"`)
			http.Redirect(w, r, otherURL+"/cdn/blob", http.StatusFound)
		},
		"echo": func(w http.ResponseWriter, r *http.Request) {
			a := r.Header.Get("Authorization")
			w.Header().Set("X-Repo-Commit", a)
			w.Header().Set("ETag", a)
			w.WriteHeader(http.StatusOK)
		},
		"echo-etag": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Repo-Commit", testCommit)
			w.Header().Set("ETag", r.Header.Get("Authorization"))
		},
		"cut": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Repo-Commit", testCommit)
			w.Header().Set("ETag", `"cut"`)
			w.Header().Set("Content-Length", "1000")
			if r.Method == http.MethodGet {
				w.Write(make([]byte, 10))
				panic(http.ErrAbortHandler)
			}
		},
	}
	check := func(what, s string) {
		t.Helper()
		if strings.Contains(s, token) || strings.Contains(s, token[3:20]) {
			t.Errorf("%s shows the token: %s", what, s)
		}
	}
	for name, hf := range handlers {
		srv := httptest.NewServer(hf)
		t.Setenv("HF_ENDPOINT", srv.URL)
		h := NewHub()
		if h.Token != token {
			t.Fatalf("NewHub did not take HF_TOKEN")
		}
		var progress bytes.Buffer
		h.Progress = &progress
		h.OnProgress = func(file string, done, total int64) { check(name+": progress callback", file) }
		_, err := h.Resolve(context.Background(), "org/private", "main", "config.json")
		if err == nil {
			t.Errorf("%s: no error", name)
		} else {
			check(name+": error", err.Error())
			check(name+": error (%v)", fmt.Sprintf("%v %+v %#v", err, err, err))
		}
		_, err = h.ResolveModel(context.Background(), "org/private", "")
		if err != nil {
			check(name+": ResolveModel error", err.Error())
		}
		check(name+": progress output", progress.String())
		srv.Close()
		// The same hub with the server gone: a refused connection.
		if _, err := h.Resolve(context.Background(), "org/private", "main", "vocab.txt"); err == nil {
			t.Errorf("%s: closed server: no error", name)
		} else {
			check(name+": closed server error", err.Error())
		}
	}
	if otherGotToken.Load() {
		t.Error("the token was sent to the host a redirect named")
	}
	for _, ep := range []string{"http://[::1", "ht!tp://x", "http://user:" + token + "@127.0.0.1:1"} {
		t.Setenv("HF_ENDPOINT", ep)
		h := NewHub()
		_, err := h.Resolve(context.Background(), "org/private", "main", "config.json")
		if err == nil {
			t.Errorf("endpoint %q: no error", ep)
			continue
		}
		check("bad endpoint error", err.Error())
	}
}

func TestReadFileLimited(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f.json")
	if err := os.WriteFile(p, []byte("12345"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := ReadFileLimited(p, 5, "test file"); err != nil || string(b) != "12345" {
		t.Errorf("at the limit: %q, %v", b, err)
	}
	_, err := ReadFileLimited(p, 4, "test file")
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "5 bytes, over the 4-byte limit of a test file") {
		t.Errorf("over the limit: %v", err)
	}
	if _, err := ReadFileLimited(filepath.Join(dir, "none"), 4, "x"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

// TestSizeLimits: config.json and the shard index over their limits are
// refused by size, before they are parsed; shard names that leave the
// folder are refused by name.
func TestSizeLimits(t *testing.T) {
	dir := t.TempDir()
	big := func(name string, n int64) string {
		p := filepath.Join(dir, name)
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		// A sparse file: the size is declared, not written.
		if err := f.Truncate(n); err != nil {
			t.Fatal(err)
		}
		f.Close()
		return p
	}
	if _, err := LoadConfig(big("config.json", MaxConfigSize+1)); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "config.json") {
		t.Errorf("config.json over the limit: %v", err)
	}
	if _, err := ReadShardIndex(big(SafetensorsIndexFile, MaxIndexSize+1)); !errors.Is(err, ErrTooLarge) {
		t.Errorf("index over the limit: %v", err)
	}
	os.Remove(filepath.Join(dir, SafetensorsIndexFile))
	for _, shard := range []string{"..", ".", "../m.safetensors", "a/b.safetensors", `a\b`, "/abs.safetensors", ""} {
		p := filepath.Join(dir, SafetensorsIndexFile)
		if err := os.WriteFile(p, fmt.Appendf(nil, `{"weight_map":{"w":%q}}`, shard), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Open(dir); !errors.Is(err, ErrUnsafePath) {
			t.Errorf("shard %q: %v, want ErrUnsafePath", shard, err)
		}
	}
}

// TestDeclaredLengthLimits: the length fields a weight file declares are
// bounded: a safetensors header length over maxHeaderSize, a torch
// storage that a compressed entry would expand far beyond its size, a
// pickle over maxPickleSize.
func TestDeclaredLengthLimits(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "model.safetensors")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	var hdr [8]byte
	binary.LittleEndian.PutUint64(hdr[:], maxHeaderSize+1)
	f.Write(hdr[:])
	f.Truncate(maxHeaderSize + 64) // sparse
	f.Close()
	if _, err := OpenSafetensors(p); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "header length") {
		t.Errorf("safetensors header over the limit: %v", err)
	}

	// A storage of 16 Mi zeros deflated: a few KB that expand 1000x.
	const numel = 16 << 20
	pkl := (&pk{}).proto().op('}').str("w").tensor("FloatStorage", "0", numel, 0, []int{numel}, []int{1}).op('s', '.').b
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, e := range []struct {
		name string
		n    int
	}{{"archive/data.pkl", 0}, {"archive/data/0", 4 * numel}} {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: e.name, Method: zip.Deflate})
		if err != nil {
			t.Fatal(err)
		}
		if e.n == 0 {
			w.Write(pkl)
			continue
		}
		zeros := make([]byte, 1<<20)
		for i := 0; i < e.n; i += len(zeros) {
			w.Write(zeros)
		}
	}
	zw.Close()
	tf, err := ParseTorch(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := tf.Raw("w"); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "expands") {
		t.Errorf("a zip-bomb storage (%d bytes compressed): %v", buf.Len(), err)
	}

	// A data.pkl entry declaring more than maxPickleSize.
	buf.Reset()
	zw = zip.NewWriter(&buf)
	w, err := zw.CreateHeader(&zip.FileHeader{Name: "archive/data.pkl", Method: zip.Deflate})
	if err != nil {
		t.Fatal(err)
	}
	zeros := make([]byte, 1<<20)
	for i := 0; i <= maxPickleSize; i += len(zeros) {
		w.Write(zeros)
	}
	zw.Close()
	if _, err := ParseTorch(bytes.NewReader(buf.Bytes()), int64(buf.Len())); !errors.Is(err, ErrTooLarge) {
		t.Errorf("a pickle over the limit: %v", err)
	}
}
