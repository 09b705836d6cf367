package models_test

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// fakeHub points the Hugging Face endpoint at a server that serves the
// folder dir as the main revision of the hub repository repo (HEAD and
// GET, with the commit, ETag and length headers the hub client reads), with
// an empty cache and online mode. It returns the files asked for with HEAD
// so far, in order.
func fakeHub(t *testing.T, repo, dir string) (asked func() []string) {
	t.Helper()
	var (
		mu    sync.Mutex
		heads []string
	)
	prefix := "/" + repo + "/resolve/main/"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		file, ok := strings.CutPrefix(r.URL.Path, prefix)
		if r.Method == http.MethodHead {
			mu.Lock()
			heads = append(heads, file)
			mu.Unlock()
		}
		b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(file)))
		if !ok || err != nil {
			http.NotFound(w, r)
			return
		}
		sum := sha256.Sum256(b)
		w.Header().Set("X-Repo-Commit", strings.Repeat("ab", 20))
		w.Header().Set("ETag", `"`+hex.EncodeToString(sum[:])+`"`)
		w.Header().Set("Content-Length", strconv.Itoa(len(b)))
		if r.Method != http.MethodHead {
			w.Write(b)
		}
	}))
	t.Cleanup(srv.Close)
	t.Setenv("HF_ENDPOINT", srv.URL)
	t.Setenv("HF_HUB_CACHE", t.TempDir())
	t.Setenv("HF_HUB_OFFLINE", "")
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(heads)
	}
}
