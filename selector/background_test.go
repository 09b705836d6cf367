package selector

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/int8bert/int8bert/cpu"
	"github.com/int8bert/int8bert/kernels"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// gate is an Options.Reference that holds every tuning at its first timed
// repetition until released: what a background tuning that takes long
// looks like, without a timed assertion.
type gate struct {
	once    sync.Once
	release chan struct{}
	reached chan struct{}
	reach   sync.Once
}

func newGate() *gate { return &gate{release: make(chan struct{}), reached: make(chan struct{})} }

func (g *gate) ref(Key, time.Duration) float64 {
	g.reach.Do(func() { close(g.reached) })
	<-g.release
	return 0
}

func (g *gate) open() { g.once.Do(func() { close(g.release) }) }

// runOn runs p through l and checks the result against the generic
// kernel.
func runOn(t *testing.T, l *Linear[kernels.GEMMU8S8], p *problem) {
	t.Helper()
	out := newOut(p.kind.Out, p.m, p.n)
	g := &kernels.GEMMU8S8{M: p.m, A: p.a, Lda: p.lda, Ep: p.ep, Out: out, Threads: 1}
	require.NoError(t, l.Run(g))
	compare(t, p.kind.String(), p.kind.Out, p.m, p.n, p.n, out, p.want(t, p.n))
}

// TestBackgroundDefaultRunsAtOnce checks that, with TuneBackground, a
// call of an untuned key returns, correct, on the default kernel while the
// key's tuning has not ended, and that the tuned choice replaces the
// default when it has.
func TestBackgroundDefaultRunsAtOnce(t *testing.T) {
	var w warnings
	o := testOptions(t, &w)
	o.Tuning = TuneBackground
	g := newGate()
	o.Reference = g.ref
	s := newSelector(t, o)
	t.Cleanup(g.open)
	p := newProblem(t, 7, 13, 64, 48, "zp+rowscale+colscale+bias+residual/f32", 0)
	l, err := s.NewLinear(p.n, p.k, p.w, p.k)
	require.NoError(t, err)
	defer l.Close()

	runOn(t, l, p) // returns: the tuning waits at the gate
	<-g.reached    // the background tuning has begun and is held
	runOn(t, l, p)
	st := s.Stats()
	assert.Equal(t, 1, st.Defaults)
	assert.Equal(t, 1, st.Pending)
	assert.Equal(t, 1, st.Tuned, "one tuning, in the background")
	chs := s.Choices()
	require.Len(t, chs, 1)
	assert.True(t, chs[0].Default, "the choice in use is the default: %v", chs[0])
	assert.Empty(t, chs[0].Measured)
	for _, name := range s.CandidatesOf(OpU8S8) {
		if c := s.u8s8.lookup(name); c.isa() != cpu.ISAGeneric && c.isa() != OneDNN {
			assert.NotEqual(t, cpu.ISAGeneric, chs[0].ISA, "the default is the highest-ranked candidate (%s is there), not the generic kernel", name)
			break
		}
	}

	g.open()
	require.NoError(t, s.WaitTuned(context.Background()))
	chs = s.Choices()
	require.Len(t, chs, 1)
	assert.False(t, chs[0].Default, "the tuned choice replaced the default")
	assert.NotEmpty(t, chs[0].Measured)
	runOn(t, l, p)
	st = s.Stats()
	assert.Positive(t, st.Packs, "the linear's forms are counted")
	st.Packs, st.PacksLater = 0, 0 // whether the tuned form was packed in the background by now is timing
	assert.NotEmpty(t, st.TunerPriority, "the tuner says what it ran at")
	st.TunerPriority, st.Retimed = "", 0 // TestTunerThreadPriority checks it; a retiming is timing
	assert.Equal(t, Stats{Tuned: 1, Defaults: 1, Checks: 1}, st)
	// The tuned choice is saved, the default never was.
	c, err := loadCache(o.CachePath)
	require.NoError(t, err)
	assert.Len(t, c.Entries, 1)
	assert.Empty(t, w.String())
}

// TestBackgroundTuneWaits checks that Tune waits for a real tuning in the
// background mode, and that a later call runs the tuned choice at once.
func TestBackgroundTuneWaits(t *testing.T) {
	var w warnings
	o := testOptions(t, &w)
	o.Tuning = TuneBackground
	s := newSelector(t, o)
	key := mustKey(t, 4, 32, 32, "none/s32", 1)
	ch, err := s.Tune(context.Background(), key)
	require.NoError(t, err)
	assert.False(t, ch.Default)
	again, err := s.Choose(key)
	require.NoError(t, err)
	assert.Equal(t, ch.Kernel, again.Kernel)
	assert.Equal(t, Stats{Tuned: 1}, s.Stats(), "a tuning's own problems' packs are not counted")
}

// TestBackgroundConcurrent runs many goroutines over several keys in the
// background mode (under -race in scripts/test.sh): every result is right
// whichever choice ran it.
func TestBackgroundConcurrent(t *testing.T) {
	var w warnings
	o := testOptions(t, &w)
	o.Tuning = TuneBackground
	s := newSelector(t, o)
	var probs []*problem
	var lins []*Linear[kernels.GEMMU8S8]
	for i, m := range []int{1, 3, 9, 17} {
		p := newProblem(t, uint64(i), m, 40, 24, "zp+scale+colscale+bias+gelu/u8", 0)
		l, err := s.NewLinear(p.n, p.k, p.w, p.k)
		require.NoError(t, err)
		t.Cleanup(func() { l.Close() })
		probs, lins = append(probs, p), append(lins, l)
	}
	want := make([]kernels.Out, len(probs))
	for i, p := range probs {
		want[i] = p.want(t, p.n)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for gi := 0; gi < 8; gi++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := 0; r < 10; r++ {
				i := (gi + r) % len(probs)
				p := probs[i]
				out := newOut(p.kind.Out, p.m, p.n)
				if err := lins[i].Run(&kernels.GEMMU8S8{M: p.m, A: p.a, Lda: p.lda, Ep: p.ep, Out: out, Threads: 1}); err != nil {
					errs <- err
					return
				}
				for j := range out.U8 {
					if d := int(out.U8[j]) - int(want[i].U8[j]); d > 1 || d < -1 {
						errs <- fmt.Errorf("m=%d: [%d] = %d, want %d", p.m, j, out.U8[j], want[i].U8[j])
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	require.NoError(t, s.WaitTuned(context.Background()))
	for _, ch := range s.Choices() {
		assert.False(t, ch.Default, "%v still on its default after WaitTuned", ch.Key)
	}
}

// TestCloseStopsBackgroundTuner checks that Close returns while a
// background tuning is in progress, stops it, and that nothing half-tuned
// is saved.
func TestCloseStopsBackgroundTuner(t *testing.T) {
	var w warnings
	o := testOptions(t, &w)
	o.Tuning = TuneBackground
	o.Reps = 3
	g := newGate()
	o.Reference = g.ref
	s, err := New(o)
	require.NoError(t, err)
	p := newProblem(t, 3, 5, 32, 32, "none/s32", 0)
	l, err := s.NewLinear(p.n, p.k, p.w, p.k)
	require.NoError(t, err)
	runOn(t, l, p)
	<-g.reached
	require.NoError(t, l.Close())
	closed := make(chan error)
	go func() { closed <- s.Close() }()
	<-s.bg.ctx.Done() // Close has stopped the tuner ...
	g.open()          // ... and the tuning's next check of its context ends it
	require.NoError(t, <-closed)
	require.NoError(t, s.WaitTuned(context.Background()))
	_, err = os.Stat(o.CachePath)
	assert.True(t, errors.Is(err, os.ErrNotExist), "a stopped tuning saved a cache: %v", err)
	_, err = s.Choose(mustKey(t, 5, 32, 32, "none/s32", 1))
	assert.ErrorIs(t, err, ErrClosed)
	assert.Empty(t, w.String(), "a tuning stopped by Close is no warning")
}

// TestTuneCancelled checks that a cancelled context stops Tune and stores
// nothing.
func TestTuneCancelled(t *testing.T) {
	var w warnings
	s := newSelector(t, testOptions(t, &w))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	key := mustKey(t, 4, 32, 32, "none/s32", 1)
	_, err := s.Tune(ctx, key)
	require.ErrorIs(t, err, context.Canceled)
	assert.Empty(t, s.Choices())
	_, err = s.Tune(context.Background(), key)
	require.NoError(t, err)
}

// TestTuningModeOption checks the option and its environment variable.
func TestTuningModeOption(t *testing.T) {
	var w warnings
	o := testOptions(t, &w)
	assert.Equal(t, TuneSync, newSelector(t, o).Tuning())
	t.Setenv(EnvTuning, "background")
	assert.Equal(t, TuneBackground, newSelector(t, o).Tuning())
	o.Tuning = TuneSync
	assert.Equal(t, TuneSync, newSelector(t, o).Tuning(), "the option wins over the variable")
	t.Setenv(EnvTuning, "later")
	o.Tuning = TuneDefault
	_, err := New(o)
	assert.ErrorContains(t, err, EnvTuning)
	o.Tuning = TuneMode(9)
	_, err = New(o)
	assert.ErrorContains(t, err, "TuneMode(9)")
}

// TestRankCandidates checks the static order of defaults: the widest ISA
// first, the generic kernels last, and within an ISA the tile that wastes
// the least of M.
func TestRankCandidates(t *testing.T) {
	mk := func(name string, isa cpu.ISA, mr int) candidate {
		return &native[kernels.GEMMU8S8]{kname: name, kisa: isa, src: &kernels.Kernel{Name: name, ISA: isa, MR: mr, NR: 16}}
	}
	cs := []candidate{mk("gen", cpu.ISAGeneric, 1), mk("avx2-6", cpu.ISAAVX2, 6), mk("avx2-2", cpu.ISAAVX2, 2), mk("vnni", cpu.ISAAVX512VNNI, 8)}
	names := func(cs []candidate) []string {
		var out []string
		for _, c := range cs {
			out = append(out, c.name())
		}
		return out
	}
	assert.Equal(t, []string{"vnni", "avx2-2", "avx2-6", "gen"}, names(rankCandidates(cs, Key{M: 4})))
	assert.Equal(t, []string{"vnni", "avx2-6", "avx2-2", "gen"}, names(rankCandidates(cs, Key{M: 12})))
	// The int16 zmm kernel: below VNNI and AVX-VNNI even where it wastes
	// less of M, above AVX2.
	cs = append(cs, mk("avx512w", cpu.ISAAVX512, 12), mk("avxvnni", cpu.ISAAVXVNNI, 8))
	assert.Equal(t, []string{"vnni", "avxvnni", "avx512w", "avx2-6", "avx2-2", "gen"}, names(rankCandidates(cs, Key{Op: OpU8S8, M: 12})))

	// Within an ISA the cost model counts N's padding too: at M 512 and
	// N 64, a 6 x 64 tile (a partial tile of 2 rows) beats an 8 x 48 one
	// (N padded to 96); at N 48 the 8 x 48 wins; at M 12 and N 64 the 6 x 64.
	mkf := func(name string, mr, nr int) candidate {
		return &native[kernels.GEMMF32]{kname: name, kisa: cpu.ISAAVX512, src: &kernels.KernelF32{Name: name, ISA: cpu.ISAAVX512, MR: mr, NR: nr}}
	}
	fs := []candidate{mkf("8x48", 8, 48), mkf("6x64", 6, 64), mkf("14x32", 14, 32)}
	assert.Equal(t, []string{"6x64", "14x32", "8x48"}, names(rankCandidates(fs, Key{Op: OpF32Kernel, M: 512, N: 64})))
	assert.Equal(t, []string{"8x48", "6x64", "14x32"}, names(rankCandidates(fs, Key{Op: OpF32Kernel, M: 512, N: 48})))
	assert.Equal(t, "6x64", names(rankCandidates(fs, Key{Op: OpF32Kernel, M: 12, N: 64}))[0])
	assert.InDelta(t, 512*96, tileCost(512, 64, 8, 48), 1e-9)
	assert.InDelta(t, 7, tileCost(7, 0, 0, 0), 1e-9, "no tile, no N: the exact rows")
}

// TestBuildsKeepTheirSections checks that two builds (here: two feature
// sets, as the cgo and pure-Go binaries differ by their header) sharing
// one cache file keep each other's entries, and that each starts warm.
func TestBuildsKeepTheirSections(t *testing.T) {
	var w warnings
	o := testOptions(t, &w)
	noAVX512 := cpu.X86
	noAVX512.AVX512F, noAVX512.AVX512BW, noAVX512.AVX512VL, noAVX512.AVX512VNNI = false, false, false, false
	other := o
	other.Features = &noAVX512
	keyA := mustKey(t, 4, 32, 32, "none/s32", 1)
	keyB := mustKey(t, 8, 32, 32, "none/s32", 1)

	a := newSelector(t, o)
	b := newSelector(t, other)
	if a.Header().Mismatch(b.Header()) == "" {
		t.Skip("this CPU has no AVX-512: both feature sets give one header")
	}
	_, err := a.Choose(keyA)
	require.NoError(t, err)
	_, err = b.Choose(keyB)
	require.NoError(t, err)
	f, err := LoadCacheFile(o.CachePath)
	require.NoError(t, err)
	assert.Len(t, f.Sections, 2)

	a2, b2 := newSelector(t, o), newSelector(t, other)
	ch, err := a2.Choose(keyA)
	require.NoError(t, err)
	assert.True(t, ch.FromCache)
	ch, err = b2.Choose(keyB)
	require.NoError(t, err)
	assert.True(t, ch.FromCache)
	assert.Equal(t, 0, a2.Stats().Tuned+b2.Stats().Tuned)
}

// TestRecordImportExport checks that a record written by one selector
// makes another start warm on the keys kept, and that a record of another
// CPU is a note and no entry.
func TestRecordImportExport(t *testing.T) {
	var w warnings
	o := testOptions(t, &w)
	o.CachePath = "off"
	s := newSelector(t, o)
	keyA := mustKey(t, 4, 32, 32, "none/s32", 1)
	keyB := mustKey(t, 4, 32, 64, "none/s32", 1)
	for _, k := range []Key{keyA, keyB} {
		_, err := s.Choose(k)
		require.NoError(t, err)
	}
	rec := filepath.Join(t.TempDir(), "model", CacheFileName)
	n, err := s.ExportRecord(rec, func(k Key) bool { return k.N == 32 })
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	st, err := os.Stat(rec)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o644), st.Mode().Perm())

	s2 := newSelector(t, o)
	n, err = s2.ImportRecord(rec)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	ch, err := s2.Choose(keyA)
	require.NoError(t, err)
	assert.True(t, ch.FromCache)
	_, err = s2.Choose(keyB)
	require.NoError(t, err)
	assert.Equal(t, Stats{Tuned: 1, FromCache: 1}, s2.Stats())

	_, err = s2.ImportRecord(filepath.Join(t.TempDir(), "none.json"))
	assert.ErrorIs(t, err, os.ErrNotExist)
	assert.Empty(t, w.String(), "a missing record is no note")

	f, err := LoadCacheFile(rec)
	require.NoError(t, err)
	f.Sections[0].CPU = "GenuineIntel|Other|6/143/8|int8=amx"
	require.NoError(t, f.Save(rec))
	s3 := newSelector(t, o)
	n, err = s3.ImportRecord(rec)
	assert.ErrorIs(t, err, ErrNoSection)
	assert.Equal(t, 0, n)
	assert.Contains(t, w.String(), "another CPU")

	require.NoError(t, os.WriteFile(rec, []byte("{"), 0o644))
	_, err = s3.ImportRecord(rec)
	assert.ErrorIs(t, err, ErrCorruptCache)
}

// TestParseKey checks that ParseKey reads what Key.String prints and
// refuses what is not a key.
func TestParseKey(t *testing.T) {
	for _, k := range []Key{
		mustKey(t, 128, 768, 3072, "zp+scale+colscale+bias+gelu/u8", 2),
		F32Key(8, 64, 2, &kernels.Epilogue{Bias: []float32{}}, 1),
		F32KernelKey(100, 64, 100, 1),
	} {
		got, err := ParseKey(k.String())
		require.NoError(t, err, k.String())
		assert.Equal(t, k, got)
	}
	for _, s := range []string{"", "u8s8", "u8s8 m=3 k=4 n=4 ep=none/s32 threads=1 x=1", "u8s8 m=x k=4 n=4 ep=none/s32 threads=1",
		"u8s8 m=4 k=4 n=4 ep=bogus threads=1", "conv m=4 k=4 n=4 ep=none/s32 threads=1", "u8s8 m=4 k=4 n=4 ep=none/s32 t=1"} {
		_, err := ParseKey(s)
		assert.ErrorIs(t, err, ErrKey, "%q", s)
	}
}

// TestCachePathFolder checks that a cache path naming a folder means the
// file CacheFileName in it.
func TestCachePathFolder(t *testing.T) {
	var w warnings
	o := testOptions(t, &w)
	dir := t.TempDir()
	o.CachePath = dir
	assert.Equal(t, filepath.Join(dir, CacheFileName), newSelector(t, o).CachePath())
	o.CachePath = filepath.Join(dir, "new") + "/"
	assert.Equal(t, filepath.Join(dir, "new", CacheFileName), newSelector(t, o).CachePath())
	t.Setenv(EnvCache, dir)
	o.CachePath = ""
	assert.Equal(t, filepath.Join(dir, CacheFileName), newSelector(t, o).CachePath())
}

// TestLibraryTuning: the library's process-wide selector tunes in the
// background, unless INT8BERT_TUNING says otherwise or the process is a
// test binary; a bad value reaches New, which names the variable.
func TestLibraryTuning(t *testing.T) {
	for _, c := range []struct {
		env    string
		inTest bool
		want   TuneMode
	}{
		{"", false, TuneBackground}, {"", true, TuneSync}, {"sync", false, TuneSync},
		{" background ", true, TuneBackground}, {"sync", true, TuneSync}, {"later", false, TuneDefault},
	} {
		assert.Equal(t, c.want, LibraryTuning(c.env, c.inTest), "%q, test binary %v", c.env, c.inTest)
	}
	t.Setenv(EnvTuning, "later")
	_, err := New(Options{Tuning: LibraryTuning("later", false), CachePath: "off"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), EnvTuning)
	t.Setenv(EnvTuning, "")
	for _, f := range []func() (*Selector, error){Default, DefaultSync} {
		s, err := f()
		require.NoError(t, err)
		assert.Equal(t, TuneSync, s.Tuning(), "in a test binary")
	}
}

// TestDefaultsShareOneCheck: the row classes of one linear share one
// quick check (checkRows rows), and each class's default is the passed
// candidate that wastes the least of its own M.
func TestDefaultsShareOneCheck(t *testing.T) {
	var w warnings
	o := testOptions(t, &w)
	o.CachePath, o.Tuning = "off", TuneBackground
	s := newSelector(t, o)
	for _, m := range []int{1, 4, 8, 64} {
		key := mustKey(t, m, 64, 96, "zp+scale+colscale+bias/f32", 1)
		ch, err := s.defaultFor(key)
		require.NoError(t, err)
		s.bg.checkMu.Lock()
		require.Len(t, s.bg.checked, 1, "m=%d", m)
		var d checkedDefault
		for _, v := range s.bg.checked {
			d = v
		}
		s.bg.checkMu.Unlock()
		require.NoError(t, d.err)
		want := rankCandidates(d.passed, key)[0]
		assert.Equal(t, want.name(), ch.Kernel, "m=%d", m)
		assert.True(t, ch.Default)
	}
}

// TestOnTune: Options.OnTune hears each tuning start and end, in either
// mode, with the key and, at the end, its time.
func TestOnTune(t *testing.T) {
	var mu sync.Mutex
	var evs []TuneEvent
	var w warnings
	o := testOptions(t, &w)
	o.CachePath = "off"
	o.OnTune = func(ev TuneEvent) { mu.Lock(); evs = append(evs, ev); mu.Unlock() }
	s := newSelector(t, o)
	key := mustKey(t, 4, 32, 64, "none/s32", 1)
	_, err := s.Choose(key)
	require.NoError(t, err)
	_, err = s.Choose(key) // tuned: no event
	require.NoError(t, err)
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, evs, 2)
	assert.Equal(t, key, evs[0].Key)
	assert.False(t, evs[0].Done)
	assert.True(t, evs[1].Done)
	assert.Positive(t, evs[1].Took)
	assert.NoError(t, evs[1].Err)
}

// TestBackgroundYieldsToRequests checks that the background tuner waits
// for a request in flight (BeginRequest) before it runs a candidate, that
// it still ends its tuning under a request that never ends (starved, a
// small share of the time), and that a caller's own tuning does not wait.
// Nothing here depends on how long anything takes: the tuner meets the
// request at its first wait whatever the machine's speed.
func TestBackgroundYieldsToRequests(t *testing.T) {
	var w warnings
	o := testOptions(t, &w)
	o.Tuning = TuneBackground
	s := newSelector(t, o)
	s.BeginRequest()
	assert.Equal(t, 1, s.Stats().Requests)

	key := mustKey(t, 4, 32, 32, "none/s32", 1)
	ch, err := s.Choose(key)
	require.NoError(t, err)
	assert.True(t, ch.Default, "an untuned key runs its default")
	require.NoError(t, s.WaitTuned(context.Background()), "a request that never ends holds a tuning back, never forever")
	st := s.Stats()
	assert.Positive(t, st.Yields, "the tuner waited for the request in flight: %+v", st)
	assert.Positive(t, st.Starved, "and, the request never ending, ran beside it: %+v", st)
	assert.LessOrEqual(t, st.Starved, st.Yields)
	ch, err = s.Choose(key)
	require.NoError(t, err)
	assert.False(t, ch.Default, "tuned")

	// A caller's own tuning (a warm-up's Tune) does not yield.
	before := s.Stats().Yields
	_, err = s.Tune(context.Background(), mustKey(t, 6, 32, 32, "none/s32", 1))
	require.NoError(t, err)
	assert.Equal(t, before, s.Stats().Yields, "Tune waited for a request")

	s.EndRequest()
	s.EndRequest() // one too many is ignored
	assert.Equal(t, 0, s.Stats().Requests)
	assert.Empty(t, w.String())
}

// TestYieldToRequests checks yieldToRequests itself: at once with no
// request in flight (once the grace after the last one is over), a wait
// that ends when the last request ends, and ctx's error when ctx ends
// first.
func TestYieldToRequests(t *testing.T) {
	var w warnings
	o := testOptions(t, &w)
	o.Tuning = TuneBackground
	s := newSelector(t, o)
	ctx := context.Background()
	require.NoError(t, s.yieldToRequests(ctx, time.Hour))
	assert.Equal(t, 0, s.Stats().Yields, "nothing in flight: no wait")

	s.BeginRequest()
	s.BeginRequest() // nested: in flight until both end
	done := make(chan error, 1)
	go func() { done <- s.yieldToRequests(ctx, time.Hour) }() // starved only after yieldMaxWait
	s.EndRequest()
	s.EndRequest()
	require.NoError(t, <-done)
	assert.Equal(t, 1, s.Stats().Yields)

	s.BeginRequest()
	defer s.EndRequest()
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	assert.ErrorIs(t, s.yieldToRequests(cctx, time.Hour), context.Canceled)
}

// TestCloseStopsYieldingTuner checks that Close ends a background tuning
// that waits for a request that never ends.
func TestCloseStopsYieldingTuner(t *testing.T) {
	var w warnings
	o := testOptions(t, &w)
	o.Tuning = TuneBackground
	s, err := New(o)
	require.NoError(t, err)
	s.BeginRequest()
	_, err = s.Choose(mustKey(t, 4, 32, 32, "none/s32", 1))
	require.NoError(t, err)
	require.NoError(t, s.Close())
	require.NoError(t, s.WaitTuned(context.Background()))
	s.EndRequest()
}

// TestPrecheck checks that Precheck runs the quick checks of keys'
// defaults in the background, one per problem (the row classes of one K,
// N and epilogue share it), so that a later call of those keys checks
// nothing itself; that invalid keys are skipped; and that a synchronous
// selector does nothing.
func TestPrecheck(t *testing.T) {
	var w warnings
	o := testOptions(t, &w)
	o.Tuning = TuneBackground
	s := newSelector(t, o)
	keys := []Key{
		mustKey(t, 4, 32, 32, "none/s32", 1),
		mustKey(t, 64, 32, 32, "none/s32", 1), // the same problem
		mustKey(t, 8, 64, 32, "none/s32", 1),
		{Op: "no-such-op", M: 1, K: 1, N: 1},
	}
	s.Precheck(keys)
	require.NoError(t, s.WaitTuned(context.Background()))
	st := s.Stats()
	assert.Equal(t, 2, st.Prechecks, "%+v", st)
	assert.Equal(t, 0, st.Checks)
	for _, k := range keys[:3] {
		ch, err := s.Choose(k)
		require.NoError(t, err)
		assert.True(t, ch.Default)
	}
	assert.Equal(t, 0, s.Stats().Checks, "the calls found their defaults checked")
	require.NoError(t, s.WaitTuned(context.Background()))
	s.Precheck(keys[:1]) // tuned now: nothing to check
	require.NoError(t, s.WaitTuned(context.Background()))
	assert.Equal(t, 2, s.Stats().Prechecks)

	o = testOptions(t, &w)
	o.Tuning = TuneSync
	sync := newSelector(t, o)
	sync.Precheck(keys)
	require.NoError(t, sync.WaitTuned(context.Background()))
	assert.Equal(t, 0, sync.Stats().Prechecks, "a synchronous selector checks nothing ahead")
	assert.Empty(t, w.String())
}

// TestDefaultRunsAPackedForm checks that a call of a new row class whose
// default kernel has another panel width than the forms its linear holds
// runs another candidate that passed the default's check on a form it
// holds, the default's form being packed in the background, instead of
// packing on the call (docs/DESIGN.md section 4.12). Two correct kernels
// of the highest rank: an 8 x 32 tile, the default at 8 rows, and a 6 x 64
// one, the default at 4 rows (N 64: both pad nothing; 4 rows waste less
// of a 6-row tile than of an 8-row one).
func TestDefaultRunsAPackedForm(t *testing.T) {
	var w warnings
	o := testOptions(t, &w)
	o.Tuning = TuneBackground
	g := newGate()
	o.Reference = g.ref // the tunings wait: the defaults stay
	// ran records the kernel of each call by its A (the tuner's own
	// problems have theirs).
	var ran sync.Map
	tile := func(name string, mr, nr int) *kernels.Kernel {
		k := fakeKernel(name, cpu.ISAAMX, false)
		k.MR, k.NR = mr, nr
		inner := k.RunU8S8
		k.RunU8S8 = func(g *kernels.GEMMU8S8) error {
			if len(g.A) > 0 {
				ran.Store(&g.A[0], name)
			}
			return inner(g)
		}
		return k
	}
	k8, k6 := tile("gemmEightFake_8x32", 8, 32), tile("gemmSixFake_6x64", 6, 64)
	s := newSelectorWith(t, o, withKernels(t, k8, k6))
	t.Cleanup(g.open) // before the selector's Close, which waits for the tuner
	p8 := newProblem(t, 8, 8, 32, 64, "none/s32", 0)
	l, err := s.NewLinear(p8.n, p8.k, p8.w, p8.k)
	require.NoError(t, err)
	defer l.Close()

	runOn(t, l, p8)
	ch, err := s.Choose(mustKey(t, 8, 32, 64, "none/s32", 1))
	require.NoError(t, err)
	require.True(t, ch.Default)
	require.Equal(t, k8.Name, ch.Kernel, "the 8-row tile is the default at 8 rows")
	name, _ := ran.Load(&p8.a[0])
	assert.Equal(t, k8.Name, name)
	packs := s.Stats().Packs

	p4 := newProblem(t, 9, 4, 32, 64, "none/s32", 0)
	p4.w = p8.w // the same linear's weights
	runOn(t, l, p4)
	ch, err = s.Choose(mustKey(t, 4, 32, 64, "none/s32", 1))
	require.NoError(t, err)
	require.True(t, ch.Default)
	require.Equal(t, k6.Name, ch.Kernel, "the 6-row tile is the default at 4 rows")
	name, _ = ran.Load(&p4.a[0])
	assert.Equal(t, k8.Name, name, "the call ran the form its linear held")
	st := s.Stats()
	assert.Equal(t, packs, st.Packs-st.PacksLater, "the call packed nothing: %+v", st)
}
