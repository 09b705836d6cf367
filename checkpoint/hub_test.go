package checkpoint

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

const testCommit = "0123456789abcdef0123456789abcdef01234567"

// fakeHub serves /<repo>/resolve/<rev>/<file> like huggingface.co: HEAD gives
// X-Repo-Commit and ETag, GET honours Range. cutAfter > 0 makes the next GET
// drop the connection after that many bytes.
type fakeHub struct {
	t        *testing.T
	files    map[string][]byte // "<repo>/<file>"
	token    string            // required bearer token, if any
	mu       sync.Mutex
	cutAfter int
	redirect bool     // answer with 302 to /cdn/, as the hub does for LFS files
	gets     []string // Range header of every GET ("" for none)
}

func (f *fakeHub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if key, ok := strings.CutPrefix(r.URL.Path, "/cdn/"); ok {
		// Like the hub's CDN: no X-Repo-Commit, no auth needed.
		f.serveData(w, r, f.files[key])
		return
	}
	if f.token != "" && r.Header.Get("Authorization") != "Bearer "+f.token {
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	i := strings.Index(r.URL.Path, "/resolve/")
	if i < 0 {
		http.NotFound(w, r)
		return
	}
	repo := strings.TrimPrefix(r.URL.Path[:i], "/")
	rest := r.URL.Path[i+len("/resolve/"):]
	rev, file, _ := strings.Cut(rest, "/")
	if rev != "main" && rev != testCommit {
		http.NotFound(w, r)
		return
	}
	data, ok := f.files[repo+"/"+file]
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("X-Repo-Commit", testCommit)
	etag := fmt.Sprintf("%q", fmt.Sprintf("etag%x", len(data))+strings.ReplaceAll(file, ".", ""))
	if f.redirect {
		// LFS files: metadata on a redirect to the CDN.
		w.Header().Set("X-Linked-Etag", etag)
		w.Header().Set("X-Linked-Size", strconv.Itoa(len(data)))
		w.Header().Set("ETag", `"not-the-blob"`)
		http.Redirect(w, r, "/cdn/"+repo+"/"+file, http.StatusFound)
		return
	}
	w.Header().Set("ETag", etag)
	if r.Method == http.MethodHead {
		w.Header().Set("Content-Length", strconv.Itoa(len(data)))
		return
	}
	f.serveData(w, r, data)
}

func (f *fakeHub) serveData(w http.ResponseWriter, r *http.Request, data []byte) {
	if r.Method == http.MethodHead {
		w.Header().Set("Content-Length", strconv.Itoa(len(data)))
		return
	}
	f.mu.Lock()
	f.gets = append(f.gets, r.Header.Get("Range"))
	cut := f.cutAfter
	f.cutAfter = 0
	f.mu.Unlock()
	start := 0
	if rg := r.Header.Get("Range"); rg != "" {
		n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(rg, "bytes="), "-"))
		if err != nil || n > len(data) {
			http.Error(w, "bad range", http.StatusRequestedRangeNotSatisfiable)
			return
		}
		start = n
		w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", n, len(data)-1, len(data)))
		w.Header().Set("Content-Length", strconv.Itoa(len(data)-n))
		w.WriteHeader(http.StatusPartialContent)
	} else {
		w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	}
	body := data[start:]
	if cut > 0 && cut < len(body) {
		w.Write(body[:cut])
		w.(http.Flusher).Flush()
		// Drop the connection mid-body.
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
		return
	}
	w.Write(body)
}

func newTestHub(t *testing.T, srv *httptest.Server) *Hub {
	return &Hub{CacheDir: t.TempDir(), Endpoint: srv.URL, Client: srv.Client()}
}

func testPayload(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i/251)
	}
	return b
}

func TestHubDownloadFresh(t *testing.T) {
	fh := &fakeHub{t: t, files: map[string][]byte{"org/tiny/config.json": []byte(`{"a":1}`)}}
	srv := httptest.NewServer(fh)
	defer srv.Close()
	h := newTestHub(t, srv)
	var calls int
	h.OnProgress = func(file string, done, total int64) { calls++ }
	var bar bytes.Buffer
	h.Progress = &bar
	p, err := h.Resolve(context.Background(), "org/tiny", "", "config.json")
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(h.CacheDir, "models--org--tiny", "snapshots", testCommit, "config.json")
	if p != want {
		t.Fatalf("path %s, want %s", p, want)
	}
	if b, err := os.ReadFile(p); err != nil || string(b) != `{"a":1}` {
		t.Fatalf("content %q, %v", b, err)
	}
	if fi, err := os.Lstat(p); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("snapshot entry is not a symlink: %v", err)
	}
	ref, err := os.ReadFile(filepath.Join(h.CacheDir, "models--org--tiny", "refs", "main"))
	if err != nil || string(ref) != testCommit {
		t.Errorf("refs/main = %q, %v", ref, err)
	}
	blobs, _ := os.ReadDir(filepath.Join(h.CacheDir, "models--org--tiny", "blobs"))
	if len(blobs) != 1 || strings.HasSuffix(blobs[0].Name(), ".incomplete") {
		t.Errorf("blobs: %v", blobs)
	}
	if calls == 0 || !strings.Contains(bar.String(), "config.json") {
		t.Errorf("progress not reported (%d calls, bar %q)", calls, bar.String())
	}
	// A commit-hash revision that is cached resolves without the server.
	srv.Close()
	if p2, err := h.Resolve(context.Background(), "org/tiny", testCommit, "config.json"); err != nil || p2 != p {
		t.Fatalf("cached by commit: %s, %v", p2, err)
	}
	// Unreachable hub: main falls back to the cache through refs/main.
	if p3, err := h.Resolve(context.Background(), "org/tiny", "main", "config.json"); err != nil || p3 != p {
		t.Fatalf("fallback to cache: %s, %v", p3, err)
	}
}

func TestHubResume(t *testing.T) {
	data := testPayload(100000)
	fh := &fakeHub{t: t, files: map[string][]byte{"bert-base-uncased/model.safetensors": data}, cutAfter: 30000}
	srv := httptest.NewServer(fh)
	defer srv.Close()
	h := newTestHub(t, srv)
	_, err := h.Resolve(context.Background(), "bert-base-uncased", "main", "model.safetensors")
	if err == nil {
		t.Fatal("cut connection: no error")
	}
	t.Logf("first try: %v", err)
	inc, _ := filepath.Glob(filepath.Join(h.CacheDir, "models--bert-base-uncased", "blobs", "*.incomplete"))
	if len(inc) != 1 {
		t.Fatalf("incomplete files: %v", inc)
	}
	if fi, _ := os.Stat(inc[0]); fi == nil || fi.Size() == 0 {
		t.Fatalf("nothing kept in %s", inc[0])
	}
	p, err := h.Resolve(context.Background(), "bert-base-uncased", "main", "model.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(p)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("resumed content differs (%d bytes, %v)", len(got), err)
	}
	if len(fh.gets) != 2 || fh.gets[0] != "" || !strings.HasPrefix(fh.gets[1], "bytes=") || fh.gets[1] == "bytes=0-" {
		t.Errorf("GET ranges %q, want a fresh GET then a Range resume", fh.gets)
	}
}

func TestHubAuth(t *testing.T) {
	fh := &fakeHub{t: t, files: map[string][]byte{"org/private/config.json": []byte("{}")}, token: "s3cret"}
	srv := httptest.NewServer(fh)
	defer srv.Close()
	h := newTestHub(t, srv)
	_, err := h.Resolve(context.Background(), "org/private", "", "config.json")
	if !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("without token: %v, want ErrUnauthorized", err)
	}
	if !strings.Contains(err.Error(), "HF_TOKEN") {
		t.Errorf("error does not mention HF_TOKEN: %v", err)
	}
	h.Token = "s3cret"
	if _, err := h.Resolve(context.Background(), "org/private", "", "config.json"); err != nil {
		t.Fatalf("with token: %v", err)
	}
}

func TestHubNotFound(t *testing.T) {
	fh := &fakeHub{t: t, files: map[string][]byte{"org/tiny/config.json": []byte("{}")}}
	srv := httptest.NewServer(fh)
	defer srv.Close()
	h := newTestHub(t, srv)
	_, err := h.Resolve(context.Background(), "org/tiny", "", "missing.bin")
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "missing.bin") {
		t.Fatalf("got %v, want ErrNotFound naming the file", err)
	}
	_, err = h.Resolve(context.Background(), "org/tiny", "v9", "config.json")
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown revision: %v", err)
	}
}

func TestHubOffline(t *testing.T) {
	var hits int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits++ }))
	defer srv.Close()
	h := newTestHub(t, srv)
	h.Offline = true
	_, err := h.Resolve(context.Background(), "org/tiny", "", "config.json")
	if !errors.Is(err, ErrNotCached) || !strings.Contains(err.Error(), "offline") {
		t.Fatalf("got %v, want ErrNotCached mentioning offline mode", err)
	}
	// Populate the cache by hand, huggingface_hub style, and resolve refs/main.
	repo := h.RepoDir("org/tiny")
	os.MkdirAll(filepath.Join(repo, "refs"), 0o755)
	os.MkdirAll(filepath.Join(repo, "snapshots", testCommit), 0o755)
	os.WriteFile(filepath.Join(repo, "refs", "main"), []byte(testCommit+"\n"), 0o644)
	os.WriteFile(filepath.Join(repo, "snapshots", testCommit, "config.json"), []byte("{}"), 0o644)
	p, err := h.Resolve(context.Background(), "org/tiny", "", "config.json")
	if err != nil || p != filepath.Join(repo, "snapshots", testCommit, "config.json") {
		t.Fatalf("offline cached: %s, %v", p, err)
	}
	if hits != 0 {
		t.Fatalf("offline mode made %d requests", hits)
	}
}

func TestHubRefsAndEnv(t *testing.T) {
	t.Setenv("HF_HUB_CACHE", "")
	t.Setenv("HF_HOME", "/x/hf")
	if got := DefaultCacheDir(); got != filepath.Join("/x/hf", "hub") {
		t.Errorf("HF_HOME: %s", got)
	}
	t.Setenv("HF_HUB_CACHE", "/y/cache")
	t.Setenv("HF_ENDPOINT", "http://example.invalid/")
	t.Setenv("HF_TOKEN", "tok")
	t.Setenv("HF_HUB_OFFLINE", "1")
	h := NewHub()
	if h.CacheDir != "/y/cache" || h.Endpoint != "http://example.invalid" || h.Token != "tok" || !h.Offline {
		t.Errorf("NewHub from env: %+v", h)
	}
	if got := h.RepoDir("bert-base-uncased"); got != filepath.Join("/y/cache", "models--bert-base-uncased") {
		t.Errorf("RepoDir: %s", got)
	}
	// HUGGINGFACE_HUB_CACHE is HF_HUB_CACHE's older name; the token file
	// of $HF_HOME (or HF_TOKEN_PATH) stands in for HF_TOKEN.
	t.Setenv("HF_HUB_CACHE", "")
	t.Setenv("HUGGINGFACE_HUB_CACHE", "/z/cache")
	home := t.TempDir()
	t.Setenv("HF_HOME", home)
	t.Setenv("HF_TOKEN", "")
	t.Setenv("HF_TOKEN_PATH", "")
	if err := os.WriteFile(filepath.Join(home, "token"), []byte("hf_file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if h := NewHub(); h.CacheDir != "/z/cache" || h.Token != "hf_file" {
		t.Errorf("NewHub from HUGGINGFACE_HUB_CACHE and $HF_HOME/token: %+v", h)
	}
	t.Setenv("HF_TOKEN_PATH", filepath.Join(home, "none"))
	if h := NewHub(); h.Token != "" {
		t.Errorf("HF_TOKEN_PATH to no file: token %q", h.Token)
	}
	t.Setenv("HF_TOKEN", "tok")
	for _, bad := range [][3]string{{"../x", "main", "f"}, {"a/b/c", "main", "f"}, {"a", "main", "../f"}, {"a", "..", "f"}, {"a", "main", "/etc/passwd"}} {
		if _, err := h.Cached(bad[0], bad[1], bad[2]); err == nil || errors.Is(err, ErrNotCached) {
			t.Errorf("Cached(%q) accepted bad names: %v", bad, err)
		}
	}
}

func TestHubCancel(t *testing.T) {
	fh := &fakeHub{t: t, files: map[string][]byte{"org/tiny/config.json": []byte("{}")}}
	srv := httptest.NewServer(fh)
	defer srv.Close()
	h := newTestHub(t, srv)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := h.Resolve(ctx, "org/tiny", "", "config.json"); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled context: %v", err)
	}
}

func TestHubResolveModel(t *testing.T) {
	dir := testdataDir(t)
	files := map[string][]byte{}
	for _, f := range []string{ConfigFile, PytorchFile} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		files["org/tiny/"+f] = b
	}
	srv := httptest.NewServer(&fakeHub{t: t, files: files})
	defer srv.Close()
	h := newTestHub(t, srv)
	snap, err := h.ResolveModel(context.Background(), "org/tiny", "")
	if err != nil {
		t.Fatal(err)
	}
	c, err := Open(snap)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Format != FormatPytorch || len(c.Names()) == 0 {
		t.Fatalf("format %s, %d tensors", c.Format, len(c.Names()))
	}
}

func TestHubRedirect(t *testing.T) {
	data := testPayload(5000)
	fh := &fakeHub{t: t, files: map[string][]byte{"org/big/model.safetensors": data}, redirect: true}
	srv := httptest.NewServer(fh)
	defer srv.Close()
	h := newTestHub(t, srv)
	p, err := h.Resolve(context.Background(), "org/big", "", "model.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(p); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("content differs: %v", err)
	}
	target, err := os.Readlink(p)
	if err != nil || filepath.Base(target) != "etag1388modelsafetensors" {
		t.Errorf("snapshot links to %q (%v), want the X-Linked-Etag blob", target, err)
	}
}
