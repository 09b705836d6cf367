package selector

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/int8bert/int8bert/cpu"
)

// CacheFormat is the version of the tuning cache's JSON layout. Bump it when
// the layout or the meaning of a key changes. 2: a choice names its
// kernel's "isa" (it was "family"), and the f32-kernel operation.
const CacheFormat = 2

// EnvCache names the environment variable that overrides the cache path
// ("off" disables the cache).
const EnvCache = "INT8BERT_TUNING_CACHE"

// ErrCorruptCache is wrapped by LoadCache when the file is not a cache.
var ErrCorruptCache = errors.New("selector: corrupt tuning cache")

// Header identifies what a tuning cache is valid for. A cache whose header
// differs from the running binary's is ignored.
type Header struct {
	// Format is CacheFormat.
	Format int `json:"format"`
	// CPU is cpu.Features.Signature() of the machine that tuned.
	CPU string `json:"cpu"`
	// OneDNN is the oneDNN version, or "none" in a build without it.
	OneDNN string `json:"onednn"`
	// Go is runtime.Version() of the binary that tuned.
	Go string `json:"go"`
	// Candidates are the names of every candidate that could run there,
	// sorted: a new kernel in the binary invalidates the choices.
	Candidates []string `json:"candidates"`
}

// Mismatch returns why a cache with header h does not serve a binary whose
// header is want, or "" when it does.
func (h Header) Mismatch(want Header) string {
	switch {
	case h.Format != want.Format:
		return fmt.Sprintf("cache format %d, this binary writes %d", h.Format, want.Format)
	case h.CPU != want.CPU:
		return fmt.Sprintf("tuned on another CPU or feature set (%q, this is %q)", h.CPU, want.CPU)
	case h.OneDNN != want.OneDNN:
		return fmt.Sprintf("tuned with oneDNN %q, this binary has %q", h.OneDNN, want.OneDNN)
	case h.Go != want.Go:
		return fmt.Sprintf("tuned by a binary built with %s, this is %s", h.Go, want.Go)
	case !slices.Equal(h.Candidates, want.Candidates):
		return fmt.Sprintf("tuned with candidates %v, this binary has %v", h.Candidates, want.Candidates)
	}
	return ""
}

// Cache is the persistent tuning cache: a header and one Choice per
// Key.String().
type Cache struct {
	Header
	Entries map[string]Choice `json:"entries"`
}

// LoadCache reads the cache at path. A missing file returns an empty cache
// and an error wrapping fs.ErrNotExist; a file that is not a valid cache
// returns an error wrapping ErrCorruptCache. A cache of another
// CacheFormat returns only its header (no entries, a nil error), so that
// Header.Mismatch names the formats. It never returns partial data with a
// nil error.
func LoadCache(path string) (*Cache, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return &Cache{Entries: map[string]Choice{}}, fmt.Errorf("selector: load cache: %w", err)
	}
	// A cache of another format is not corrupt: its header says so, and
	// the caller re-tunes for the format mismatch (Header.Mismatch).
	var h struct {
		Format int `json:"format"`
	}
	if json.Unmarshal(b, &h) == nil && h.Format > 0 && h.Format != CacheFormat {
		return &Cache{Header: Header{Format: h.Format}, Entries: map[string]Choice{}}, nil
	}
	var c Cache
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return &Cache{Entries: map[string]Choice{}}, fmt.Errorf("selector: load cache %s: %v: %w", path, err, ErrCorruptCache)
	}
	if dec.More() {
		return &Cache{Entries: map[string]Choice{}}, fmt.Errorf("selector: load cache %s: trailing data: %w", path, ErrCorruptCache)
	}
	if c.Format <= 0 || c.Entries == nil {
		return &Cache{Entries: map[string]Choice{}}, fmt.Errorf("selector: load cache %s: no format or entries: %w", path, ErrCorruptCache)
	}
	for k, e := range c.Entries {
		if e.Kernel == "" || e.Key != k {
			return &Cache{Entries: map[string]Choice{}}, fmt.Errorf("selector: load cache %s: entry %q: kernel %q for key %q: %w", path, k, e.Kernel, e.Key, ErrCorruptCache)
		}
	}
	return &c, nil
}

// Save writes the cache to path atomically (a temporary file in the same
// folder, then a rename), creating the folder when missing.
func (c *Cache) Save(path string) error {
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return fmt.Errorf("selector: save cache: %w", err)
	}
	b = append(b, '\n')
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("selector: save cache: %w", err)
	}
	f, err := os.CreateTemp(dir, filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("selector: save cache: %w", err)
	}
	tmp := f.Name()
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("selector: save cache %s: %w", path, err)
	}
	return nil
}

// DefaultCachePath is $INT8BERT_TUNING_CACHE when set, else
// os.UserCacheDir()/int8bert/tuning.json.
func DefaultCachePath() (string, error) {
	if p := os.Getenv(EnvCache); p != "" {
		return p, nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("selector: cache path: %w", err)
	}
	return filepath.Join(d, "int8bert", "tuning.json"), nil
}

// Measurement is one candidate's timing for a key.
type Measurement struct {
	Kernel  string `json:"kernel"`
	Backend string `json:"backend"`
	// Impl is what the backend ran, when it says (oneDNN's implementation).
	Impl string `json:"impl,omitempty"`
	// Median is the median time of one call; Runs the timed repetitions.
	Median time.Duration `json:"median_ns"`
	Runs   int           `json:"runs"`
	// Pruned: not timed further, being far slower than the best so far
	// (Median is then the faster of two warm runs, or the cold run).
	Pruned bool `json:"pruned,omitempty"`
	// Cold: pruned on its first run, set-up included.
	Cold bool `json:"cold,omitempty"`
	// RefWork is, with Options.Reference, the median over the repetitions
	// of the reference's rate around each (the faster of the runs right
	// before and after) times that repetition's time per call: one call's cost in the reference's work
	// (ops at peak, for the bench's peak loops; ops over RefWork is then
	// the share of the peak, paired repetition by repetition). RefRate is
	// the median of the reference's rates. Both 0 without a reference, or
	// when it returned 0.
	RefWork float64 `json:"ref_work,omitempty"`
	RefRate float64 `json:"ref_rate,omitempty"`
}

// Exclusion is a candidate left out of a choice, and why.
type Exclusion struct {
	Kernel  string `json:"kernel"`
	Backend string `json:"backend"`
	Reason  string `json:"reason"`
}

// Choice is the outcome of tuning one key.
type Choice struct {
	// Key is Key.String().
	Key string `json:"key"`
	// Kernel is the chosen candidate's name, Backend "native" or "onednn",
	// ISA the kernel's ISA or "onednn" (OneDNN).
	Kernel  string  `json:"kernel"`
	Backend string  `json:"backend"`
	ISA     cpu.ISA `json:"isa"`
	// Measured holds every candidate that passed the reference check,
	// fastest first.
	Measured []Measurement `json:"measured"`
	// Excluded holds the candidates that declined the key, failed or
	// differed from the reference.
	Excluded []Exclusion `json:"excluded,omitempty"`
	// Forced is the forced ISA or kernel, if any.
	Forced string `json:"forced,omitempty"`
	// Tuned is when the tuning ran.
	Tuned time.Time `json:"tuned"`
	// FromCache reports whether this choice was read from the cache file.
	FromCache bool `json:"-"`
}
