package selector

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/int8bert/int8bert/internal/crashtest"
)

// crashKeys are the keys the crash child tunes, one save after each.
var crashKeys = [][3]int{{4, 16, 16}, {8, 32, 16}, {4, 32, 32}, {16, 16, 32}}

// crashFakes is how many made-up entries each prepared section holds, so
// that every save rewrites a file of about a megabyte (a tenth under
// -short, to stay brief).
var crashFakes = 2500

func crashKeyOf(t *testing.T, k [3]int) Key { return mustKey(t, k[0], k[1], k[2], "none/s32", 1) }

// TestCrashChild is the child process of TestCrashTuningCache: a
// selector with the cache INT8BERT_CRASH_CACHE tunes crashKeys, saving
// after each. It runs only as that child.
func TestCrashChild(t *testing.T) {
	if crashtest.Child() != "tuning-cache" {
		t.Skip("the child process of TestCrashTuningCache; runs only under it")
	}
	o := Options{CachePath: os.Getenv("INT8BERT_CRASH_CACHE"), Reps: 2, RepTime: 50 * time.Microsecond,
		Warn: func(m string) { fmt.Fprintln(os.Stderr, "warn:", m) }}
	s, err := newWith(o, compiledKernels())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	keys := make([]Key, len(crashKeys))
	for i, k := range crashKeys {
		keys[i] = crashKeyOf(t, k)
	}
	crashtest.Ready()
	for i, key := range keys {
		crashtest.Phase("tune+save " + strconv.Itoa(i))
		if _, err := s.Choose(key); err != nil {
			t.Fatal(err)
		}
	}
	crashtest.Done()
}

// fakeSection is a section of header h with crashFakes made-up entries.
func fakeSection(h Header, tag string) Cache {
	c := Cache{Header: h, Saved: time.Now().UTC(), Entries: map[string]Choice{}}
	for i := range crashFakes {
		k := fmt.Sprintf("%s fake %d", tag, i)
		c.Entries[k] = Choice{Key: k, Kernel: "k" + tag, Backend: "native",
			Measured: []Measurement{{Kernel: "k" + tag, Backend: "native", Median: time.Duration(i), Runs: 2}}}
	}
	return c
}

// TestCrashTuningCache kills a process that tunes and saves keys at
// random moments (docs/DESIGN.md section 6.1), three runs in four over an
// existing cache (a section of this binary and one of another CPU, a
// megabyte each), the fourth with none. After each kill the cache is absent
// (the runs without one) or a valid cache: the prepared sections whole,
// this binary's holding a subset of the tuned keys; a selector opening it
// says nothing. A torn copy of it (cut at a random length, as a writer
// that does not rename would leave it) is then noted through Warn,
// naming the file, and re-made by the next tuning.
func TestCrashTuningCache(t *testing.T) {
	kills := 50
	if testing.Short() {
		kills = 3
		crashFakes = 250
	}
	var w0 warnings
	ref := newSelector(t, testOptions(t, &w0))
	own := ref.Header()
	other := own
	other.CPU = "another CPU"
	tuned := map[string]bool{}
	for _, k := range crashKeys {
		tuned[crashKeyOf(t, k).String()] = true
	}
	base := t.TempDir()
	cacheOf := func(i int) string { return filepath.Join(base, strconv.Itoa(i), CacheFileName) }
	outcomes := map[string]int{}
	leftovers := 0
	rng := rand.New(rand.NewPCG(2, 0))
	res := crashtest.Kill(t, crashtest.Options{
		Op: "tuning-cache", Test: "TestCrashChild", Kills: kills, Seed: 1,
		Env: func(i int) []string { return []string{"INT8BERT_CRASH_CACHE=" + cacheOf(i)} },
		Before: func(i int) {
			if err := os.MkdirAll(filepath.Dir(cacheOf(i)), 0o755); err != nil {
				t.Fatal(err)
			}
			if i%4 != 3 {
				f := &CacheFile{Format: CacheFormat}
				f.Put(fakeSection(other, "other"))
				f.Put(fakeSection(own, "own"))
				if err := f.Save(cacheOf(i)); err != nil {
					t.Fatal(err)
				}
			}
		},
		After: func(i int, killed bool, phase string) {
			path := cacheOf(i)
			f, err := LoadCacheFile(path)
			switch {
			case errors.Is(err, fs.ErrNotExist) && i%4 == 3 && killed:
				outcomes["no cache yet"]++
			case err != nil:
				t.Fatalf("run %d (killed %v in %q): the cache left is not valid: %v", i, killed, phase, err)
			default:
				c, why := f.Section(own)
				if c == nil {
					t.Fatalf("run %d: no section of this binary: %s", i, why)
				}
				var fakes, keys int
				for k := range c.Entries {
					switch {
					case strings.HasPrefix(k, "own fake "):
						fakes++
					case tuned[k]:
						keys++
					default:
						t.Fatalf("run %d: unexpected entry %q", i, k)
					}
				}
				if i%4 != 3 && (fakes != crashFakes || len(f.Sections) != 2 || len(f.Sections[0].Entries)+len(f.Sections[1].Entries) != 2*crashFakes+keys) {
					t.Fatalf("run %d: the prepared sections were not kept whole: %d own entries, %d sections", i, fakes, len(f.Sections))
				}
				if !killed && keys != len(crashKeys) {
					t.Fatalf("run %d finished with %d of %d keys saved", i, keys, len(crashKeys))
				}
				outcomes[fmt.Sprintf("valid, %d of %d keys", keys, len(crashKeys))]++
			}
			tmps, _ := filepath.Glob(path + ".tmp*")
			leftovers += len(tmps)
			var w warnings
			o := testOptions(t, &w)
			o.CachePath = path
			s := newSelector(t, o)
			if w.String() != "" {
				t.Fatalf("run %d: a selector opening the cache left by the kill warns: %s", i, w.String())
			}
			s.Close()
			// A torn file: noted, never trusted, re-made.
			b, err := os.ReadFile(path)
			if err != nil {
				return
			}
			if err := os.WriteFile(path, b[:rng.IntN(len(b))], 0o644); err != nil {
				t.Fatal(err)
			}
			var w2 warnings
			o.Warn = w2.add
			s = newSelector(t, o)
			if !strings.Contains(w2.String(), "corrupt tuning cache") || !strings.Contains(w2.String(), path) {
				t.Fatalf("run %d: a torn cache is not noted with its name: %q", i, w2.String())
			}
			if _, err := s.Choose(crashKeyOf(t, crashKeys[0])); err != nil {
				t.Fatal(err)
			}
			s.Close()
			if _, err := LoadCacheFile(path); err != nil {
				t.Fatalf("run %d: the torn cache was not re-made: %v", i, err)
			}
			if err := os.RemoveAll(filepath.Dir(path)); err != nil {
				t.Fatal(err)
			}
		},
	})
	t.Logf("%v; outcomes %v; temporary files left by kills: %d", res, outcomes, leftovers)
}

// TestCacheSaveSweepsDeadTemporaries: saving the cache removes the
// temporary files of a writer killed before its rename (older than
// atomicfile.Stale) and keeps a recent one.
func TestCacheSaveSweepsDeadTemporaries(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, CacheFileName)
	dead, live := path+".tmp111", path+".tmp222"
	for _, p := range []string{dead, live} {
		if err := os.WriteFile(p, []byte("{\"format\""), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-2 * time.Hour)
	if err := os.Chtimes(dead, old, old); err != nil {
		t.Fatal(err)
	}
	if err := (&CacheFile{Format: CacheFormat}).Save(path); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dead); !os.IsNotExist(err) {
		t.Errorf("a dead writer's temporary file is still there (%v)", err)
	}
	if _, err := os.Stat(live); err != nil {
		t.Errorf("a recent temporary file was removed: %v", err)
	}
}
