package selector

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/int8bert/int8bert/internal/atomicfile"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/int8bert/int8bert/cpu"
)

// CacheFormat is the version of the tuning cache's JSON layout. Bump it when
// the layout or the meaning of a key changes. 2: a choice names its
// kernel's "isa" (it was "family"), and the f32-kernel operation. 3: a file
// holds one section per build (header), so that the cgo and the pure-Go
// binaries, or two CPUs sharing a folder, keep their own entries.
const CacheFormat = 4

// EnvCache names the environment variable that overrides the cache path
// ("off" disables the cache). A path that ends in a separator or names a
// folder means the file CacheFileName in it.
const EnvCache = "INT8BERT_TUNING_CACHE"

// CacheFileName is the name of a tuning cache file in a folder: the file
// a cache path that names a folder means, and the tuning record next to a
// model (see Selector.ImportRecord).
const CacheFileName = "tuning.json"

// maxSections bounds the sections of one file: the oldest saved goes
// first (a binary rebuilt with another Go or oneDNN starts a new one).
const maxSections = 8

// ErrCorruptCache is wrapped by LoadCacheFile when the file is not a cache.
var ErrCorruptCache = errors.New("selector: corrupt tuning cache")

// ErrNoSection is wrapped by ImportRecord when a record holds no section
// for this binary (another CPU, build or version tuned it).
var ErrNoSection = errors.New("selector: no tuning record for this binary")

// Header identifies what a section of a tuning cache is valid for. A
// section whose header differs from the running binary's is not used (and
// is kept when the file is rewritten).
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

// Cache is one section of a tuning cache file: a header and one Choice
// per Key.String().
type Cache struct {
	Header
	// Saved is when the section was last written.
	Saved   time.Time         `json:"saved"`
	Entries map[string]Choice `json:"entries"`
}

// CacheFile is a tuning cache file (the user's cache, or the record next
// to a model): one section per build and CPU that tuned.
type CacheFile struct {
	// Format is CacheFormat.
	Format   int     `json:"format"`
	Sections []Cache `json:"sections"`
}

// LoadCacheFile reads the cache file at path. A missing file returns an
// empty file and an error wrapping fs.ErrNotExist; a file that is not a
// valid cache returns an error wrapping ErrCorruptCache. A file of another
// CacheFormat returns its format only (no sections, a nil error), so that
// Section names the formats. It never returns partial data with a nil
// error.
func LoadCacheFile(path string) (*CacheFile, error) {
	empty := &CacheFile{Format: CacheFormat}
	b, err := os.ReadFile(path)
	if err != nil {
		return empty, fmt.Errorf("selector: load cache: %w", err)
	}
	// A cache of another format is not corrupt: the caller re-tunes for
	// the format mismatch.
	var h struct {
		Format int `json:"format"`
	}
	if json.Unmarshal(b, &h) == nil && h.Format > 0 && h.Format != CacheFormat {
		return &CacheFile{Format: h.Format}, nil
	}
	var f CacheFile
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return empty, fmt.Errorf("selector: load cache %s: %v: %w", path, err, ErrCorruptCache)
	}
	if dec.More() {
		return empty, fmt.Errorf("selector: load cache %s: trailing data: %w", path, ErrCorruptCache)
	}
	if f.Format <= 0 || f.Sections == nil {
		return empty, fmt.Errorf("selector: load cache %s: no format or sections: %w", path, ErrCorruptCache)
	}
	for i, c := range f.Sections {
		if c.Entries == nil {
			return empty, fmt.Errorf("selector: load cache %s: section %d has no entries: %w", path, i, ErrCorruptCache)
		}
		for k, e := range c.Entries {
			if e.Kernel == "" || e.Key != k {
				return empty, fmt.Errorf("selector: load cache %s: entry %q: kernel %q for key %q: %w", path, k, e.Kernel, e.Key, ErrCorruptCache)
			}
		}
	}
	return &f, nil
}

// Section returns the section of the file for a binary whose header is
// want, or nil and why there is none.
func (f *CacheFile) Section(want Header) (*Cache, string) {
	if f.Format != want.Format {
		return nil, fmt.Sprintf("cache format %d, this binary writes %d", f.Format, want.Format)
	}
	if len(f.Sections) == 0 {
		return nil, "no section"
	}
	var why []string
	for i := range f.Sections {
		w := f.Sections[i].Header.Mismatch(want)
		if w == "" {
			return &f.Sections[i], ""
		}
		why = append(why, w)
	}
	return nil, fmt.Sprintf("none of its %d sections is for this binary (%s)", len(f.Sections), strings.Join(why, "; "))
}

// Put stores c as the section of its header, replacing the one there or
// adding it; the file keeps at most maxSections, the least recently saved
// going first.
func (f *CacheFile) Put(c Cache) {
	f.Format = CacheFormat
	for i := range f.Sections {
		if f.Sections[i].Header.Mismatch(c.Header) == "" {
			f.Sections[i] = c
			return
		}
	}
	f.Sections = append(f.Sections, c)
	if len(f.Sections) > maxSections {
		sort.SliceStable(f.Sections, func(i, j int) bool { return f.Sections[i].Saved.After(f.Sections[j].Saved) })
		f.Sections = f.Sections[:maxSections]
	}
}

// Save writes the file to path atomically (a temporary file in the same
// folder, then a rename), creating the folder when missing; the file is
// readable by all (0644), as a record shipped with a model must be.
func (f *CacheFile) Save(path string) error {
	if f.Sections == nil {
		f.Sections = []Cache{}
	}
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return fmt.Errorf("selector: save cache: %w", err)
	}
	b = append(b, '\n')
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("selector: save cache: %w", err)
	}
	// A killed writer's temporary files go first (DESIGN 6.1).
	atomicfile.Sweep(dir, filepath.Base(path)+".tmp", atomicfile.Stale)
	tf, err := os.CreateTemp(dir, filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("selector: save cache: %w", err)
	}
	tmp := tf.Name()
	_, err = tf.Write(b)
	if err == nil {
		err = tf.Chmod(0o644)
	}
	if err == nil {
		err = tf.Sync()
	}
	if cerr := tf.Close(); err == nil {
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

// DefaultCachePath is $INT8BERT_TUNING_CACHE when set (a folder meaning
// CacheFileName in it), else os.UserCacheDir()/int8bert/tuning.json.
func DefaultCachePath() (string, error) {
	if p := os.Getenv(EnvCache); p != "" {
		return ResolveCachePath(p), nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("selector: cache path: %w", err)
	}
	return filepath.Join(d, "int8bert", CacheFileName), nil
}

// ResolveCachePath returns the cache file a path names: p itself, or
// CacheFileName in p when p ends in a separator or is a folder. "off" and
// "" are returned as they are.
func ResolveCachePath(p string) string {
	if p == "" || p == "off" {
		return p
	}
	if strings.HasSuffix(p, string(filepath.Separator)) || strings.HasSuffix(p, "/") {
		return filepath.Join(p, CacheFileName)
	}
	if st, err := os.Stat(p); err == nil && st.IsDir() {
		return filepath.Join(p, CacheFileName)
	}
	return p
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
	// Min and Max are the fastest and slowest timed repetitions (a
	// measurement's spread, with Median), RefMin and RefMax the slowest
	// and fastest of the reference's rates around them; 0 where not
	// timed repeatedly or without a reference.
	Min    time.Duration `json:"min_ns,omitempty"`
	Max    time.Duration `json:"max_ns,omitempty"`
	RefMin float64       `json:"ref_min,omitempty"`
	RefMax float64       `json:"ref_max,omitempty"`
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
	// DerivedFrom is, for a choice made from a smaller row class's
	// (Options.DeriveAbove), that class's key; Measured then holds its
	// times scaled by the rows.
	DerivedFrom string `json:"derived_from,omitempty"`
	// Tuned is when the tuning ran.
	Tuned time.Time `json:"tuned"`
	// FromCache reports whether this choice was read from the cache file
	// or a tuning record.
	FromCache bool `json:"-"`
	// Default reports a provisional choice of a background-tuning
	// selector (Options.Tuning): the highest-ranked candidate that passed
	// a quick check, run until the key's tuning is done. It is never
	// saved; Measured is empty.
	Default bool `json:"-"`
	// fallback is what runs when none of Kernel and Measured takes a
	// call's exact m: the generic kernel, for a default choice.
	fallback []string
	// alts are, for a default, the other candidates that passed its
	// check, in rank order: a call whose linear has the default's form
	// not yet packed runs the first of them whose form is, while the
	// default's is packed in the background (Linear.runDefault).
	alts []string
	// picks are the row model's choices for the M of the key's class
	// below its own (Selector.setPicks): indexes into Measured.
	picks []uint8
}
