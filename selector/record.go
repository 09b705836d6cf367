package selector

import (
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
	"time"
	"unsafe"
)

// A tuning record is a cache file (CacheFile) that travels with a model:
// the INT8 artifact's folder holds one (CacheFileName) with the choices of
// the model's own keys, so that a container shipping the folder starts
// warm on the CPU and build that tuned it (docs/DESIGN.md section 4.7).

// ImportRecord makes the choices of the tuning record at path (a cache
// file) that were tuned for this binary (its section whose header matches
// Header()) available as the cache's are: a call of one of their keys
// runs the recorded choice without tuning (Stats.FromCache). A key this
// selector already chose or has from its own cache keeps that. It returns
// the number of keys added. A missing file is an error wrapping
// fs.ErrNotExist; a corrupt one wraps ErrCorruptCache; one with no section
// for this binary wraps ErrNoSection and says why. Every error but the
// missing file is also a note (Options.Warn), since a record is only
// ever a hint.
func (s *Selector) ImportRecord(path string) (int, error) {
	f, err := LoadCacheFile(path)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			s.opts.Warn(fmt.Sprintf("tuning record ignored: %v", err))
		}
		return 0, fmt.Errorf("selector: import record: %w", err)
	}
	c, why := f.Section(s.header)
	if c == nil {
		err := fmt.Errorf("selector: tuning record %s: %s: %w", path, why, ErrNoSection)
		s.opts.Warn(fmt.Sprintf("%v; its keys are tuned here", err))
		return 0, err
	}
	n := 0
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, e := range c.Entries {
		if _, ok := s.choices[k]; ok {
			continue
		}
		if _, ok := s.cached[k]; ok {
			continue
		}
		s.cached[k] = e
		n++
	}
	return n, nil
}

// ExportRecord writes the choices tuned so far (not forced, not defaults,
// and those read from the cache or a record that were used or are still
// unused) whose keys keep accepts (nil: all) into the tuning record at
// path, as the section of this binary: the file's sections of other
// builds and CPUs are kept. It returns the number of keys written; with
// none, the file is left as it is.
func (s *Selector) ExportRecord(path string, keep func(Key) bool) (int, error) {
	c := Cache{Header: s.header, Saved: time.Now().UTC(), Entries: map[string]Choice{}}
	add := func(k string, ch Choice) {
		if keep != nil {
			key, err := ParseKey(k)
			if err != nil || !keep(key) {
				return
			}
		}
		c.Entries[k] = ch
	}
	s.mu.Lock()
	for k, v := range s.cached {
		add(k, v)
	}
	for k, v := range s.choices {
		if v.Forced == "" && !v.Default {
			add(k, *v)
		}
	}
	s.mu.Unlock()
	if len(c.Entries) == 0 {
		return 0, nil
	}
	s.saveMu.Lock()
	defer s.saveMu.Unlock()
	if err := putSection(path, c); err != nil {
		return 0, fmt.Errorf("selector: export record: %w", err)
	}
	return len(c.Entries), nil
}

// ParseKey parses the form Key.String prints:
// "u8s8 m=128 k=768 n=3072 ep=zp+scale+colscale+bias+gelu/u8 threads=1".
// The key is validated.
func ParseKey(s string) (Key, error) {
	f := strings.Fields(s)
	bad := func(why string) (Key, error) {
		return Key{}, fmt.Errorf("selector: key %q: %s: %w", s, why, ErrKey)
	}
	if len(f) != 6 {
		return bad("want an operation and m=, k=, n=, ep=, threads=")
	}
	k := Key{Op: f[0]}
	vals := map[string]string{}
	for _, p := range f[1:] {
		name, v, ok := strings.Cut(p, "=")
		if !ok {
			return bad(fmt.Sprintf("%q is not name=value", p))
		}
		vals[name] = v
	}
	ints := map[string]*int{"m": &k.M, "k": &k.K, "n": &k.N, "threads": &k.Threads}
	names := make([]string, 0, len(ints))
	for name := range ints {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		v, ok := vals[name]
		if !ok {
			return bad("no " + name + "=")
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			return bad(fmt.Sprintf("%s=%q is not an integer", name, v))
		}
		*ints[name] = n
	}
	ep, ok := vals["ep"]
	if !ok {
		return bad("no ep=")
	}
	kind, err := ParseEpilogueKind(ep)
	if err != nil {
		return Key{}, err
	}
	k.Epilogue = kind
	if err := k.Validate(); err != nil {
		return Key{}, err
	}
	return k, nil
}

// ChoiceBytes estimates the memory of the choices the selector holds
// (tuned, read from a cache or record, and the background tuner's
// defaults) whose keys keep accepts (nil: all): each choice's fields,
// its key, its measurements and exclusions with their strings. It is an
// estimate from the sizes of the values, not a measurement.
func (s *Selector) ChoiceBytes(keep func(Key) bool) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	add := func(ks string, ch *Choice) {
		if keep != nil {
			key, err := ParseKey(ks)
			if err != nil || !keep(key) {
				return
			}
		}
		n += choiceBytes(ks, ch)
	}
	for ks, ch := range s.choices {
		add(ks, ch)
	}
	for ks, ch := range s.cached {
		add(ks, &ch)
	}
	for ks, ch := range s.bg.byKey {
		add(ks, ch)
	}
	return n
}

// choiceBytes estimates the memory of one choice and its map entry.
func choiceBytes(ks string, ch *Choice) int {
	n := int(unsafe.Sizeof(*ch)) + 2*len(ks) + 32 + len(ch.Kernel) + len(ch.Backend)
	for _, m := range ch.Measured {
		n += int(unsafe.Sizeof(m)) + len(m.Kernel) + len(m.Backend) + len(m.Impl)
	}
	for _, e := range ch.Excluded {
		n += int(unsafe.Sizeof(e)) + len(e.Kernel) + len(e.Backend) + len(e.Reason)
	}
	for _, f := range ch.fallback {
		n += 16 + len(f)
	}
	for _, a := range ch.alts {
		n += 16 + len(a)
	}
	return n + len(ch.picks)
}
