package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Errors the hub resolver wraps, for errors.Is.
var (
	// ErrNotCached: the file is not in the cache and the network may not be
	// used (HF_HUB_OFFLINE) or cannot be reached.
	ErrNotCached = errors.New("not in the local cache")
	// ErrUnauthorized: the server answered 401 or 403.
	ErrUnauthorized = errors.New("unauthorized")
	// ErrNotFound: the server answered 404 (no such repository, revision or
	// file).
	ErrNotFound = errors.New("not found")
)

// DefaultEndpoint is the hub used when HF_ENDPOINT is unset.
const DefaultEndpoint = "https://huggingface.co"

// Hub resolves files of Hugging Face model repositories through the local
// cache, laid out as huggingface_hub does, and downloads missing ones.
//
// Cache layout under CacheDir:
//
//	models--<org>--<name>/refs/<revision>          the commit a branch or tag points to
//	models--<org>--<name>/blobs/<etag>             file contents
//	models--<org>--<name>/snapshots/<commit>/<file> symlink to ../../blobs/<etag>
//
// A Hub's fields may be changed before first use; it is then safe for
// concurrent use on different files.
type Hub struct {
	// CacheDir is the hub cache folder.
	CacheDir string
	// Endpoint is the hub's base URL, without a trailing slash.
	Endpoint string
	// Token is sent as "Authorization: Bearer <Token>" when not empty.
	Token string
	// Offline forbids network access: only cached files resolve.
	Offline bool
	// Client performs requests; nil means http.DefaultClient.
	Client *http.Client
	// Progress, when not nil, receives a text progress bar for downloads.
	// NewHub sets it to os.Stderr when stderr is a terminal.
	Progress io.Writer
	// OnProgress, when not nil, is called as bytes of a file arrive
	// (total is -1 when unknown).
	OnProgress func(file string, done, total int64)
}

// NewHub returns a Hub configured from the environment like huggingface_hub:
// HF_HUB_CACHE (or its older name HUGGINGFACE_HUB_CACHE), else
// $HF_HOME/hub, else ~/.cache/huggingface/hub (with XDG_CACHE_HOME
// honoured); HF_ENDPOINT (default https://huggingface.co); HF_TOKEN, else
// the token file huggingface-cli login writes (HF_TOKEN_PATH, default
// $HF_HOME/token); HF_HUB_OFFLINE=1 (or true/yes/on).
func NewHub() *Hub {
	h := &Hub{
		CacheDir: DefaultCacheDir(),
		Endpoint: strings.TrimRight(os.Getenv("HF_ENDPOINT"), "/"),
		Token:    os.Getenv("HF_TOKEN"),
		Offline:  envTrue(os.Getenv("HF_HUB_OFFLINE")),
	}
	if h.Token == "" {
		h.Token = tokenFile()
	}
	if h.Endpoint == "" {
		h.Endpoint = DefaultEndpoint
	}
	if fi, err := os.Stderr.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
		h.Progress = os.Stderr
	}
	return h
}

func envTrue(v string) bool {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "1", "true", "yes", "on":
		return true
	}
	return false
}

// DefaultCacheDir returns the hub cache folder from the environment:
// HF_HUB_CACHE, else HUGGINGFACE_HUB_CACHE (its older name, which TEI's
// image sets), else $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub,
// else ~/.cache/huggingface/hub.
func DefaultCacheDir() string {
	for _, v := range []string{"HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"} {
		if d := os.Getenv(v); d != "" {
			return d
		}
	}
	return filepath.Join(hfHome(), "hub")
}

// hfHome is $HF_HOME, else $XDG_CACHE_HOME/huggingface, else
// ~/.cache/huggingface.
func hfHome() string {
	if d := os.Getenv("HF_HOME"); d != "" {
		return d
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "huggingface")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		home = "."
	}
	return filepath.Join(home, ".cache", "huggingface")
}

// tokenFile is the token in $HF_TOKEN_PATH, else $HF_HOME/token, or ""
// when there is none.
func tokenFile() string {
	p := os.Getenv("HF_TOKEN_PATH")
	if p == "" {
		p = filepath.Join(hfHome(), "token")
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

var (
	repoIDRe   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?$`)
	commitRe   = regexp.MustCompile(`^[0-9a-f]{40}$`)
	etagRe     = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)
	revisionRe = regexp.MustCompile(`^[A-Za-z0-9._/-]+$`)
)

func checkNames(repoID, revision, file string) error {
	if !repoIDRe.MatchString(repoID) || strings.Contains(repoID, "..") {
		return fmt.Errorf("invalid model id %q", repoID)
	}
	if !revisionRe.MatchString(revision) || strings.Contains(revision, "..") {
		return fmt.Errorf("invalid revision %q", revision)
	}
	if !localName(file) {
		return fmt.Errorf("invalid file name %q (a relative name inside the repository, without . or .. elements): %w", file, ErrUnsafePath)
	}
	return nil
}

// RepoDir returns the cache folder of a model repository.
func (h *Hub) RepoDir(repoID string) string {
	return filepath.Join(h.CacheDir, "models--"+strings.ReplaceAll(repoID, "/", "--"))
}

// cachedCommit maps a revision to a commit hash through refs/, or returns
// the revision itself when it is a commit hash.
func (h *Hub) cachedCommit(repoID, revision string) (string, bool) {
	if commitRe.MatchString(revision) {
		return revision, true
	}
	b, err := os.ReadFile(filepath.Join(h.RepoDir(repoID), "refs", filepath.FromSlash(revision)))
	if err != nil {
		return "", false
	}
	c := strings.TrimSpace(string(b))
	return c, commitRe.MatchString(c)
}

// Cached returns the path of a cached file, or an error wrapping ErrNotCached.
// It never touches the network.
func (h *Hub) Cached(repoID, revision, file string) (string, error) {
	if revision == "" {
		revision = "main"
	}
	if err := checkNames(repoID, revision, file); err != nil {
		return "", fmt.Errorf("checkpoint: hub: %w", err)
	}
	commit, ok := h.cachedCommit(repoID, revision)
	if ok {
		p := filepath.Join(h.RepoDir(repoID), "snapshots", commit, filepath.FromSlash(file))
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("checkpoint: hub: %s@%s: %s: %w (cache %s)", repoID, revision, file, ErrNotCached, h.CacheDir)
}

// Resolve returns the local path of file in repository repoID at revision
// ("" means "main"), downloading it into the cache when missing. In offline
// mode, or when the hub cannot be reached, it falls back to the cache.
func (h *Hub) Resolve(ctx context.Context, repoID, revision, file string) (string, error) {
	p, err := h.resolve(ctx, repoID, revision, file)
	return p, h.redact(err)
}

// redactedError is an error whose text has the token replaced; Unwrap
// keeps the chain for errors.Is.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// redact returns err with every occurrence of the token in its text
// replaced: the token is sent in a header only, but a server may echo it
// into a status line or a header that an error quotes (docs/DESIGN.md
// section 6.2), and errors end up in logs.
func (h *Hub) redact(err error) error {
	if err == nil || h.Token == "" || !strings.Contains(err.Error(), h.Token) {
		return err
	}
	return &redactedError{strings.ReplaceAll(err.Error(), h.Token, "[HF_TOKEN]"), err}
}

func (h *Hub) resolve(ctx context.Context, repoID, revision, file string) (string, error) {
	if revision == "" {
		revision = "main"
	}
	if err := checkNames(repoID, revision, file); err != nil {
		return "", fmt.Errorf("checkpoint: hub: %w", err)
	}
	// A commit hash names immutable contents: a cached copy is final.
	if commitRe.MatchString(revision) || h.Offline {
		p, err := h.Cached(repoID, revision, file)
		if err == nil || h.Offline {
			if err != nil {
				err = fmt.Errorf("%w; offline mode (HF_HUB_OFFLINE) forbids downloading it", err)
			}
			return p, err
		}
	}
	p, err := h.download(ctx, repoID, revision, file)
	if err != nil {
		var netErr *networkError
		if errors.As(err, &netErr) && ctx.Err() == nil {
			if cp, cerr := h.Cached(repoID, revision, file); cerr == nil {
				return cp, nil
			}
		}
		return "", fmt.Errorf("checkpoint: hub: %s@%s: %s: %w", repoID, revision, file, err)
	}
	return p, nil
}

// networkError marks failures to reach the hub (as opposed to HTTP errors).
type networkError struct{ err error }

func (e *networkError) Error() string { return e.err.Error() }
func (e *networkError) Unwrap() error { return e.err }

func (h *Hub) client() *http.Client {
	if h.Client != nil {
		return h.Client
	}
	return http.DefaultClient
}

func (h *Hub) fileURL(repoID, revision, file string) string {
	return h.Endpoint + "/" + repoID + "/resolve/" + url.PathEscape(revision) + "/" + file
}

func (h *Hub) newRequest(ctx context.Context, method, u string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		return nil, err
	}
	if h.Token != "" {
		req.Header.Set("Authorization", "Bearer "+h.Token)
	}
	req.Header.Set("User-Agent", "int8bert-checkpoint")
	return req, nil
}

func statusError(resp *http.Response, u string) error {
	switch resp.StatusCode {
	case http.StatusUnauthorized, http.StatusForbidden:
		return fmt.Errorf("%s: %s: %w (gated or private repository? set HF_TOKEN)", u, resp.Status, ErrUnauthorized)
	case http.StatusNotFound:
		return fmt.Errorf("%s: %s: %w (check the model id, revision and file name)", u, resp.Status, ErrNotFound)
	}
	return fmt.Errorf("%s: unexpected status %s", u, resp.Status)
}

// fileMeta is what a HEAD request tells about a file.
type fileMeta struct {
	commit string
	etag   string
	size   int64
}

// head asks for the file's commit, etag and size without following
// redirects (the hub puts them on the redirect to its CDN).
func (h *Hub) head(ctx context.Context, u, revision string) (fileMeta, error) {
	req, err := h.newRequest(ctx, http.MethodHead, u)
	if err != nil {
		return fileMeta{}, err
	}
	c := *h.client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := c.Do(req)
	if err != nil {
		return fileMeta{}, &networkError{err}
	}
	resp.Body.Close()
	if resp.StatusCode >= 400 {
		return fileMeta{}, statusError(resp, u)
	}
	m := fileMeta{commit: resp.Header.Get("X-Repo-Commit"), size: -1}
	m.etag = resp.Header.Get("X-Linked-Etag")
	if m.etag == "" {
		m.etag = resp.Header.Get("ETag")
	}
	m.etag = strings.Trim(strings.TrimPrefix(m.etag, "W/"), `"`)
	if s := resp.Header.Get("X-Linked-Size"); s != "" {
		m.size, _ = strconv.ParseInt(s, 10, 64)
	} else if resp.StatusCode < 300 && resp.ContentLength >= 0 {
		m.size = resp.ContentLength
	}
	if m.commit == "" && commitRe.MatchString(revision) {
		m.commit = revision
	}
	if !commitRe.MatchString(m.commit) {
		return fileMeta{}, fmt.Errorf("%s: server sent no valid X-Repo-Commit header (got %q)", u, m.commit)
	}
	if m.etag == "." || m.etag == ".." {
		return fileMeta{}, fmt.Errorf("%s: server sent the ETag %q, which would name a folder of the cache, not a blob in it: %w", u, m.etag, ErrUnsafePath)
	}
	if !etagRe.MatchString(m.etag) {
		return fileMeta{}, fmt.Errorf("%s: server sent no usable ETag (got %q)", u, m.etag)
	}
	return m, nil
}

func (h *Hub) download(ctx context.Context, repoID, revision, file string) (string, error) {
	u := h.fileURL(repoID, revision, file)
	meta, err := h.head(ctx, u, revision)
	if err != nil {
		return "", err
	}
	repo := h.RepoDir(repoID)
	blob := filepath.Join(repo, "blobs", meta.etag)
	snap := filepath.Join(repo, "snapshots", meta.commit, filepath.FromSlash(file))
	if err := os.MkdirAll(filepath.Dir(blob), 0o755); err != nil {
		return "", err
	}
	if revision != meta.commit {
		ref := filepath.Join(repo, "refs", filepath.FromSlash(revision))
		if err := os.MkdirAll(filepath.Dir(ref), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(ref, []byte(meta.commit), 0o644); err != nil {
			return "", err
		}
	}
	if _, err := os.Stat(blob); err != nil {
		if err := h.fetchBlob(ctx, u, file, blob, meta.size); err != nil {
			return "", err
		}
	}
	if err := linkSnapshot(blob, snap); err != nil {
		return "", err
	}
	return snap, nil
}

// fetchBlob downloads u into blob through blob+".incomplete", resuming an
// earlier partial download with a Range request.
func (h *Hub) fetchBlob(ctx context.Context, u, file, blob string, size int64) error {
	tmp := blob + ".incomplete"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	have, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return err
	}
	req, err := h.newRequest(ctx, http.MethodGet, u)
	if err != nil {
		return err
	}
	if have > 0 {
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-", have))
	}
	resp, err := h.client().Do(req)
	if err != nil {
		return &networkError{err}
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusPartialContent && have > 0:
		// Resume: append after what we have.
	case resp.StatusCode == http.StatusRequestedRangeNotSatisfiable && have > 0 && have == size:
		// Already complete.
	case resp.StatusCode == http.StatusOK:
		if err := f.Truncate(0); err != nil {
			return err
		}
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return err
		}
		have = 0
	default:
		return statusError(resp, u)
	}
	total := size
	if total < 0 && resp.ContentLength >= 0 && resp.StatusCode == http.StatusOK {
		total = resp.ContentLength
	}
	if resp.StatusCode != http.StatusRequestedRangeNotSatisfiable {
		pw := &progressWriter{h: h, file: file, done: have, total: total}
		_, err = io.Copy(io.MultiWriter(f, pw), resp.Body)
		pw.finish()
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("download interrupted (%d bytes kept in %s): %w", pw.done, tmp, ctx.Err())
			}
			return &networkError{fmt.Errorf("download interrupted (%d bytes kept in %s for resuming): %w", pw.done, tmp, err)}
		}
		have = pw.done
	}
	if size >= 0 && have != size {
		return &networkError{fmt.Errorf("downloaded %d bytes, expected %d (kept in %s for resuming)", have, size, tmp)}
	}
	// Synced before the rename, so that a power loss cannot leave a blob
	// name over data the disk never got (the other writers do the same).
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, blob)
}

// linkSnapshot points snap at blob with a relative symlink, or copies blob
// where symlinks are not available.
func linkSnapshot(blob, snap string) error {
	if err := os.MkdirAll(filepath.Dir(snap), 0o755); err != nil {
		return err
	}
	if _, err := os.Lstat(snap); err == nil {
		os.Remove(snap)
	}
	rel, err := filepath.Rel(filepath.Dir(snap), blob)
	if err == nil && os.Symlink(rel, snap) == nil {
		return nil
	}
	src, err := os.Open(blob)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.Create(snap)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return err
	}
	return dst.Close()
}

// progressWriter counts bytes and reports them.
type progressWriter struct {
	h           *Hub
	file        string
	done, total int64
	last        time.Time
}

func (p *progressWriter) Write(b []byte) (int, error) {
	p.done += int64(len(b))
	if p.h.OnProgress != nil {
		p.h.OnProgress(p.file, p.done, p.total)
	}
	if p.h.Progress != nil && time.Since(p.last) > 100*time.Millisecond {
		p.last = time.Now()
		p.draw()
	}
	return len(b), nil
}

func (p *progressWriter) draw() {
	const width = 30
	if p.total > 0 {
		n := int(int64(width) * p.done / p.total)
		n = min(max(n, 0), width)
		fmt.Fprintf(p.h.Progress, "\r%s [%s%s] %3d%% %s/%s", p.file, strings.Repeat("=", n), strings.Repeat(" ", width-n),
			100*p.done/p.total, humanBytes(p.done), humanBytes(p.total))
		return
	}
	fmt.Fprintf(p.h.Progress, "\r%s %s", p.file, humanBytes(p.done))
}

func (p *progressWriter) finish() {
	if p.h.Progress != nil {
		p.draw()
		fmt.Fprintln(p.h.Progress)
	}
}

func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%dB", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f%ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// ResolveModel makes a model's config.json and weights available locally and
// returns the snapshot folder to pass to Open and LoadConfig. It fetches
// model.safetensors, else model.safetensors.index.json and its shards, else
// pytorch_model.bin. repoID is "name" or "org/name"; revision "" means main.
func (h *Hub) ResolveModel(ctx context.Context, repoID, revision string) (string, error) {
	cfg, err := h.Resolve(ctx, repoID, revision, ConfigFile)
	if err != nil {
		return "", err
	}
	dir := filepath.Dir(cfg)
	if _, err := h.Resolve(ctx, repoID, revision, SafetensorsFile); err == nil {
		return dir, nil
	} else if !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrNotCached) {
		return "", err
	}
	if idx, err := h.Resolve(ctx, repoID, revision, SafetensorsIndexFile); err == nil {
		wm, err := ReadShardIndex(idx)
		if err != nil {
			return "", err
		}
		seen := map[string]bool{}
		for _, f := range wm {
			if seen[f] {
				continue
			}
			seen[f] = true
			if _, err := h.Resolve(ctx, repoID, revision, f); err != nil {
				return "", err
			}
		}
		return dir, nil
	} else if !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrNotCached) {
		return "", err
	}
	if _, err := h.Resolve(ctx, repoID, revision, PytorchFile); err != nil {
		return "", fmt.Errorf("%w (and no safetensors weights either)", err)
	}
	return dir, nil
}
