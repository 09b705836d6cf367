package selector

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/int8bert/int8bert/cpu"
	"github.com/int8bert/int8bert/dnnl"
	"github.com/int8bert/int8bert/kernels"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// warnings collects Options.Warn messages.
type warnings struct {
	mu  sync.Mutex
	msg []string
}

func (w *warnings) add(s string) { w.mu.Lock(); w.msg = append(w.msg, s); w.mu.Unlock() }
func (w *warnings) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(w.msg, "\n")
}

// testOptions times briefly and caches in a temporary file.
func testOptions(t *testing.T, w *warnings) Options {
	t.Helper()
	return Options{
		CachePath: filepath.Join(t.TempDir(), "tuning.json"),
		Reps:      2,
		RepTime:   50 * time.Microsecond,
		Warn:      w.add,
	}
}

func newSelector(t *testing.T, o Options) *Selector {
	t.Helper()
	return newSelectorWith(t, o, compiledKernels())
}

// newSelectorWith is newSelector over the kernels ks (withKernels).
func newSelectorWith(t *testing.T, o Options, ks kernelSet) *Selector {
	t.Helper()
	s, err := newWith(o, ks)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// withKernels is every kernel compiled in, then ks, each for the
// operations of its type: a *kernels.Kernel for u8s8, a
// *kernels.KernelF32 for f32 and f32-kernel, a *kernels.KernelBF16 for
// bf16.
func withKernels(t *testing.T, ks ...any) kernelSet {
	t.Helper()
	set := compiledKernels()
	for _, k := range ks {
		switch k := k.(type) {
		case *kernels.Kernel:
			set.u8s8 = append(set.u8s8, k)
		case *kernels.KernelF32:
			set.f32 = append(set.f32, k)
		case *kernels.KernelBF16:
			set.bf16 = append(set.bf16, k)
		default:
			t.Fatalf("withKernels: %T is no kernel", k)
		}
	}
	return set
}

func mustKey(t *testing.T, m, k, n int, kind string, threads int) Key {
	t.Helper()
	ek, err := ParseEpilogueKind(kind)
	if err != nil {
		t.Fatal(err)
	}
	key, err := NewKey(OpU8S8, m, k, n, ek, threads)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func TestBucketM(t *testing.T) {
	for _, c := range [][2]int{{0, 1}, {1, 1}, {3, 4}, {7, 8}, {9, 16}, {16, 16}, {17, 32}, {128, 128}, {129, 256}, {384, 512}} {
		if got := BucketM(c[0]); got != c[1] {
			t.Errorf("BucketM(%d) = %d, want %d", c[0], got, c[1])
		}
	}
}

func TestEpilogueKindRoundTrip(t *testing.T) {
	for _, s := range []string{"none/s32", "none/f32", "scale/f32", "zp+scale+colscale+bias+gelu/u8",
		"zp+rowscale+colscale+bias+residual/f32", "rowscale+bias+relu+residual/s8", "colscale+gelu_tanh/f32"} {
		k, err := ParseEpilogueKind(s)
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		if k.String() != s {
			t.Errorf("ParseEpilogueKind(%q).String() = %q", s, k.String())
		}
	}
	for _, s := range []string{"bias/s32", "scale+rowscale/f32", "bogus/f32", "bias/f16"} {
		if _, err := ParseEpilogueKind(s); !errors.Is(err, ErrKey) {
			t.Errorf("ParseEpilogueKind(%q): err = %v, want ErrKey", s, err)
		}
	}
	if k, _ := ParseEpilogueKind("none"); k.Out != S32 {
		t.Errorf("none: out %v, want s32", k.Out)
	}
}

// problem is a random GEMM with an epilogue of a kind, padded strides and
// its expected result from the generic kernel.
type problem struct {
	m, k, n int
	w       []int8
	a       []uint8
	lda     int
	ep      *kernels.Epilogue
	kind    EpilogueKind
}

func newProblem(t *testing.T, seed uint64, m, k, n int, kind string, pad int) *problem {
	t.Helper()
	ek, err := ParseEpilogueKind(kind)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(seed, 1))
	p := &problem{m: m, k: k, n: n, lda: k + pad, kind: ek}
	p.w = make([]int8, n*k)
	for i := range p.w {
		p.w[i] = int8(r.IntN(255) - 127)
	}
	p.a = make([]uint8, m*p.lda)
	for i := range p.a {
		p.a[i] = uint8(r.IntN(256))
	}
	key := Key{Op: OpU8S8, M: m, K: k, N: n, Epilogue: ek, Threads: 1}
	p.ep = randomEpilogue(r, key)
	if p.ep != nil && p.ep.Residual != nil && pad > 0 {
		// a padded residual stride
		res := make([]float32, m*(n+pad))
		for i := 0; i < m; i++ {
			copy(res[i*(n+pad):i*(n+pad)+n], p.ep.Residual[i*n:(i+1)*n])
		}
		p.ep.Residual, p.ep.LdResidual = res, n+pad
	}
	if p.ep != nil && p.ep.ZeroPoint != 0 {
		p.ep.ColSum = kernels.ColSums(n, k, p.w, k)
	}
	return p
}

// want runs the generic kernel.
func (p *problem) want(t *testing.T, ldc int) kernels.Out {
	t.Helper()
	b, err := kernels.PackS8(p.n, p.k, p.w, p.k, kernels.GenericU8S8.NR)
	if err != nil {
		t.Fatal(err)
	}
	o := newOut(p.kind.Out, p.m, ldc)
	o.Ldc = ldc
	g := kernels.GEMMU8S8{M: p.m, N: p.n, K: p.k, A: p.a, Lda: p.lda, B: b, Ep: p.ep, Out: o, Threads: 1}
	if err := kernels.GenericU8S8.RunU8S8(&g); err != nil {
		t.Fatal(err)
	}
	return o
}

// compare checks got against want on the m x n block (the same tolerances
// as the selector's check).
func compare(t *testing.T, what string, kind DType, m, n, ldc int, got, want kernels.Out) {
	t.Helper()
	bad := 0
	var rms float64
	if kind == F32 {
		for i := 0; i < m; i++ {
			for _, v := range want.F32[i*ldc : i*ldc+n] {
				rms += float64(v) * float64(v)
			}
		}
		rms = math.Sqrt(rms / float64(max(m*n, 1)))
	}
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			x := i*ldc + j
			var ok bool
			var g, w any
			switch kind {
			case S32:
				g, w = got.S32[x], want.S32[x]
				ok = g == w
			case F32:
				gv, wv := float64(got.F32[x]), float64(want.F32[x])
				g, w = gv, wv
				ok = math.Abs(gv-wv) <= 1e-4*max(math.Abs(wv), rms)
			case U8:
				gv, wv := int(got.U8[x]), int(want.U8[x])
				g, w = gv, wv
				ok = gv-wv <= 1 && wv-gv <= 1
			case S8:
				gv, wv := int(got.S8[x]), int(want.S8[x])
				g, w = gv, wv
				ok = gv-wv <= 1 && wv-gv <= 1
			}
			if !ok {
				if bad < 3 {
					t.Errorf("%s: [%d][%d] = %v, want %v", what, i, j, g, w)
				}
				bad++
			}
		}
	}
	if bad > 0 {
		t.Errorf("%s: %d of %d values differ", what, bad, m*n)
	}
}

var testKinds = []string{
	"none/s32",
	"scale/f32",
	"zp+scale+colscale+bias/f32",
	"zp+scale+colscale+bias+gelu/f32",
	"zp+scale+colscale+bias+residual/f32",
	"zp+rowscale+colscale+bias+residual/f32",
	"zp+scale+colscale+bias+gelu/u8",
	"zp+rowscale+colscale+bias/s8",
	"colscale+bias+gelu_tanh/f32",
	"scale+relu+residual/u8",
}

// runLinear runs p through a Linear of s with padded strides and checks the
// result against the generic kernel.
func runLinear(t *testing.T, s *Selector, p *problem, pad int) Choice {
	t.Helper()
	l, err := s.NewLinear(p.n, p.k, p.w, p.k)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ldc := p.n + pad
	out := newOut(p.kind.Out, p.m, ldc)
	out.Ldc = ldc
	g := &kernels.GEMMU8S8{M: p.m, A: p.a, Lda: p.lda, Ep: p.ep, Out: out, Threads: 1}
	require.NoError(t, l.Run(g), "%v", p.kind)
	key, err := l.Key(g)
	require.NoError(t, err)
	ch, err := s.Choose(key)
	if err != nil {
		t.Fatal(err)
	}
	compare(t, fmt.Sprintf("%v with %s", p.kind, ch.Kernel), p.kind.Out, p.m, p.n, ldc, out, p.want(t, ldc))
	return ch
}

func TestLinearRunsEveryKind(t *testing.T) {
	var w warnings
	s := newSelector(t, testOptions(t, &w))
	for i, kind := range testKinds {
		p := newProblem(t, uint64(i), 7, 37, 35, kind, 3)
		ch := runLinear(t, s, p, 5)
		if len(ch.Measured) == 0 || ch.Measured[0].Kernel != ch.Kernel {
			t.Errorf("%s: choice %s is not the fastest measured: %+v", kind, ch.Kernel, ch.Measured)
		}
		t.Logf("%s", ch)
		if dnnl.Available && !mentions(ch, OneDNN) {
			t.Errorf("%s: oneDNN was neither measured nor excluded:\n%v", kind, ch)
		}
	}
}

func mentions(ch Choice, name string) bool {
	return mentionsMeasured(ch, name) || excludedWhy(ch, name) != ""
}

// excludedWhy is the reason ch excluded the candidate name, or "".
func excludedWhy(ch Choice, name string) string {
	for _, e := range ch.Excluded {
		if e.Kernel == name {
			return e.Reason
		}
	}
	return ""
}

// TestOneDNNCandidate forces oneDNN: with cgo it must run and match the
// reference on every kind; without, forcing it is an error and the
// candidates are native only.
func TestOneDNNCandidate(t *testing.T) {
	var w warnings
	o := testOptions(t, &w)
	o.Force = OneDNN
	if !dnnl.Available {
		_, err := New(o)
		if !errors.Is(err, ErrForced) || !errors.Is(err, dnnl.ErrUnavailable) {
			t.Fatalf("forcing onednn without it: err = %v, want ErrForced and dnnl.ErrUnavailable", err)
		}
		o.Force = ""
		s := newSelector(t, o)
		for _, c := range s.Candidates() {
			if c == OneDNN {
				t.Errorf("onednn among the candidates of a build without it: %v", s.Candidates())
			}
		}
		p := newProblem(t, 1, 5, 20, 17, "zp+scale+colscale+bias+gelu/u8", 1)
		runLinear(t, s, p, 2)
		t.Log("oneDNN is not in this build (CGO_ENABLED=0 or nodnnl): native candidates only")
		return
	}
	s := newSelector(t, o)
	info, err := dnnl.GetInfo()
	require.NoError(t, err)
	if !info.ISA.ExactInt8() {
		// Below VNNI the binding refuses full-range u8 x s8 (docs/DESIGN.md
		// section 5.1): forcing oneDNN is an error that says why, for every
		// kind, never a fallback and never a wrong result.
		t.Run("refused", func(t *testing.T) {
			for i, kind := range testKinds {
				p := newProblem(t, uint64(100+i), 6, 40, 33, kind, 2)
				l, err := s.NewLinear(p.n, p.k, p.w, p.k)
				require.NoError(t, err)
				out := newOut(p.kind.Out, p.m, p.n)
				err = l.Run(&kernels.GEMMU8S8{M: p.m, A: p.a, Lda: p.lda, Ep: p.ep, Out: out, Threads: 1})
				l.Close()
				require.ErrorIs(t, err, ErrForced, kind)
				require.ErrorIs(t, err, ErrNoCandidate, kind)
				assert.Contains(t, err.Error(), "onednn: declines the key: dnnl: u8 x s8 matmul refused", kind)
				assert.Contains(t, err.Error(), info.ISA.String(), kind)
			}
		})
		t.Run("results", func(t *testing.T) {
			t.Skipf("oneDNN's u8 x s8 results not checked on this CPU: its effective ISA %s has no VNNI, so dnnl refuses "+
				"full-range u8 x s8 (dnnl.ErrSaturation) and the selector keeps it out (cpu: %s)", info.ISA, cpu.X86)
		})
		return
	}
	for i, kind := range testKinds {
		for _, m := range []int{1, 6, 19} {
			p := newProblem(t, uint64(100+i), m, 40, 33, kind, 2)
			ch := runLinear(t, s, p, 3)
			if ch.Kernel != OneDNN || ch.Backend != BackendOneDNN {
				t.Fatalf("%s: forced onednn, chose %s (%s)", kind, ch.Kernel, ch.Backend)
			}
			if m == 6 {
				t.Logf("%s", ch)
			}
		}
	}
}

func TestCacheRoundTrip(t *testing.T) {
	var w warnings
	o := testOptions(t, &w)
	s := newSelector(t, o)
	key := mustKey(t, 8, 32, 48, "zp+scale+colscale+bias/f32", 1)
	first, err := s.Choose(key)
	if err != nil {
		t.Fatal(err)
	}
	if first.FromCache || s.Stats().Tuned != 1 {
		t.Fatalf("first choice: from cache %v, stats %+v", first.FromCache, s.Stats())
	}
	c, err := loadCache(o.CachePath)
	if err != nil {
		t.Fatal(err)
	}
	if c.Header.Mismatch(s.Header()) != "" {
		t.Errorf("saved header %+v differs from %+v", c.Header, s.Header())
	}
	if e, ok := c.Entries[key.String()]; !ok || e.Kernel != first.Kernel {
		t.Fatalf("cache lacks %v or holds another kernel: %+v", key, c.Entries)
	}

	s2 := newSelector(t, o)
	again, err := s2.Choose(key)
	if err != nil {
		t.Fatal(err)
	}
	if !again.FromCache || again.Kernel != first.Kernel || s2.Stats() != (Stats{Tuned: 0, FromCache: 1}) {
		t.Errorf("second selector: %+v, stats %+v; want %s from the cache", again, s2.Stats(), first.Kernel)
	}
	if !strings.Contains(s2.Explain(key), "from the cache") {
		t.Errorf("Explain does not say the choice came from the cache:\n%s", s2.Explain(key))
	}
	if w.String() != "" {
		t.Errorf("unexpected warnings: %s", w.String())
	}

	// A forced selector reads the same file and uses the entries of its
	// ISA; it saves nothing.
	before, err := os.ReadFile(o.CachePath)
	if err != nil {
		t.Fatal(err)
	}
	of := o
	of.Force = string(first.ISA)
	s3 := newSelector(t, of)
	forced, err := s3.Choose(key)
	if err != nil {
		t.Fatal(err)
	}
	if !forced.FromCache || forced.Kernel != first.Kernel {
		t.Errorf("forced %s: %v, want %s from the cache", of.Force, forced, first.Kernel)
	}
	if _, err := s3.Choose(mustKey(t, 2, 8, 16, "none/s32", 1)); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.ReadFile(o.CachePath); !bytes.Equal(before, after) {
		t.Errorf("a forced selector rewrote the cache")
	}
	if w.String() != "" {
		t.Errorf("unexpected warnings: %s", w.String())
	}
}

func TestCorruptCache(t *testing.T) {
	for name, content := range map[string]string{
		"garbage":   "{not json",
		"truncated": `{"format": FORMAT, "cpu": "x", "entries": {`,
		"no format": `{"entries": {}}`,
		"bad entry": `{"format": FORMAT, "entries": {"u8s8 m=1": {"key": "other", "kernel": "k"}}}`,
		"unknown":   `{"format": FORMAT, "entries": {}, "surprise": true}`,
	} {
		t.Run(name, func(t *testing.T) {
			var w warnings
			o := testOptions(t, &w)
			content = strings.ReplaceAll(content, "FORMAT", strconv.Itoa(CacheFormat))
			if err := os.WriteFile(o.CachePath, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := loadCache(o.CachePath); !errors.Is(err, ErrCorruptCache) {
				t.Fatalf("LoadCache: err = %v, want ErrCorruptCache", err)
			}
			s := newSelector(t, o)
			if !strings.Contains(w.String(), "corrupt tuning cache") || !strings.Contains(w.String(), o.CachePath) {
				t.Errorf("no clear warning about the corrupt cache: %q", w.String())
			}
			key := mustKey(t, 4, 16, 16, "none/s32", 1)
			if _, err := s.Choose(key); err != nil {
				t.Fatal(err)
			}
			if s.Stats().Tuned != 1 {
				t.Errorf("stats %+v: want one tuning run", s.Stats())
			}
			c, err := loadCache(o.CachePath)
			if err != nil {
				t.Fatalf("the cache was not rewritten: %v", err)
			}
			if _, ok := c.Entries[key.String()]; !ok {
				t.Errorf("rewritten cache lacks %v", key)
			}
		})
	}
}

// TestCacheOfAnOlderFormat checks that a cache an older binary wrote, whose
// entries have fields this one does not know, is re-tuned with a warning
// that names the formats, not called corrupt.
func TestCacheOfAnOlderFormat(t *testing.T) {
	var w warnings
	o := testOptions(t, &w)
	old := `{"format": 1, "cpu": "x", "entries": {"u8s8 m=4": {"key": "u8s8 m=4", "kernel": "k", "family": "avx2"}}}`
	require.NoError(t, os.WriteFile(o.CachePath, []byte(old), 0o644))
	c, err := loadCache(o.CachePath)
	require.NoError(t, err)
	assert.Equal(t, 1, c.Format)
	assert.Empty(t, c.Entries)
	s := newSelector(t, o)
	assert.NotContains(t, w.String(), "corrupt")
	assert.Contains(t, w.String(), fmt.Sprintf("cache format 1, this binary writes %d", CacheFormat))
	key := mustKey(t, 4, 16, 16, "none/s32", 1)
	_, err = s.Choose(key)
	require.NoError(t, err)
	assert.Equal(t, 1, s.Stats().Tuned)
	c, err = loadCache(o.CachePath)
	require.NoError(t, err, "the cache was not rewritten")
	assert.Equal(t, CacheFormat, c.Format)
	assert.Contains(t, c.Entries, key.String())
}

func TestCacheOfAnotherCPUIgnored(t *testing.T) {
	var w warnings
	o := testOptions(t, &w)
	s := newSelector(t, o)
	key := mustKey(t, 4, 16, 16, "scale/f32", 1)
	if _, err := s.Choose(key); err != nil {
		t.Fatal(err)
	}
	for field, edit := range map[string]func(*Cache){
		"cpu":    func(c *Cache) { c.CPU = "GenuineIntel|Some Other CPU|6/143/8|int8=amx" },
		"format": func(c *Cache) { c.Format = CacheFormat + 1 },
		"onednn": func(c *Cache) { c.OneDNN = "0.1.0" },
		"go":     func(c *Cache) { c.Go = "go1.0" },
	} {
		c, err := loadCache(o.CachePath)
		if err != nil {
			t.Fatal(err)
		}
		edit(c)
		path := filepath.Join(t.TempDir(), field+".json")
		if err := saveCache(c, path); err != nil {
			t.Fatal(err)
		}
		var w2 warnings
		o2 := o
		o2.CachePath, o2.Warn = path, w2.add
		s2 := newSelector(t, o2)
		ch, err := s2.Choose(key)
		if err != nil {
			t.Fatal(err)
		}
		if ch.FromCache || s2.Stats().Tuned != 1 {
			t.Errorf("%s: a cache of another %s was used: %+v", field, field, s2.Stats())
		}
		if !strings.Contains(w2.String(), "ignored") {
			t.Errorf("%s: no note that the cache was ignored: %q", field, w2.String())
		}
	}
}

func TestCacheOff(t *testing.T) {
	var w warnings
	o := testOptions(t, &w)
	o.CachePath = "off"
	s := newSelector(t, o)
	if s.CachePath() != "" {
		t.Errorf("cache path %q, want off", s.CachePath())
	}
	if _, err := s.Choose(mustKey(t, 2, 8, 8, "none/s32", 1)); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvCache, filepath.Join(t.TempDir(), "env.json"))
	o.CachePath = ""
	s2 := newSelector(t, o)
	if s2.CachePath() != os.Getenv(EnvCache) {
		t.Errorf("cache path %q, want $%s = %q", s2.CachePath(), EnvCache, os.Getenv(EnvCache))
	}
}

func TestForcedMissing(t *testing.T) {
	var w warnings
	noAMX, err := cpu.X86.Apply("amx")
	if err != nil {
		t.Fatal(err)
	}
	unavailable := &kernels.Kernel{Name: "gemmFuture_8x16", ISA: "future-isa", MR: 8, NR: 16, KB: 4,
		Available: func(cpu.Features) bool { return false },
		Accepts:   func(m, n, k int) bool { return true },
		RunU8S8:   kernels.GenericU8S8.RunU8S8}
	for _, force := range []string{"amx", "no-such-isa", "future-isa", "gemmFuture_8x16"} {
		o := testOptions(t, &w)
		o.Force, o.Features = force, &noAMX
		_, err := newWith(o, withKernels(t, unavailable))
		if !errors.Is(err, ErrForced) {
			t.Errorf("force %q: err = %v, want ErrForced", force, err)
			continue
		}
		t.Logf("force %q: %v", force, err)
	}
	// The environment variable is read the same way.
	t.Setenv(EnvKernel, "no-such-isa")
	if _, err := New(testOptions(t, &w)); !errors.Is(err, ErrForced) {
		t.Errorf("%s=no-such-isa: err = %v, want ErrForced", EnvKernel, err)
	}
}

// fakeKernel is a correct kernel under another name and ISA.
func fakeKernel(name string, isa cpu.ISA, wrong bool) *kernels.Kernel {
	return &kernels.Kernel{Name: name, ISA: isa, MR: 1, NR: 32, KB: 4,
		Available: func(cpu.Features) bool { return true },
		Accepts:   func(m, n, k int) bool { return true },
		RunU8S8: func(g *kernels.GEMMU8S8) error {
			if err := kernels.GenericU8S8.RunU8S8(g); err != nil {
				return err
			}
			if wrong && g.M > 0 && g.N > 0 {
				i, j := g.M-1, g.N/2
				switch x := i*g.Out.Ldc + j; {
				case g.Out.S32 != nil:
					g.Out.S32[x]++
				case g.Out.F32 != nil:
					g.Out.F32[x] += 1
				case g.Out.U8 != nil:
					g.Out.U8[x] += 7
				case g.Out.S8 != nil:
					g.Out.S8[x] += 7
				}
			}
			return nil
		}}
}

// TestWrongCandidateExcluded: in every operation, a kernel that differs
// from the reference is excluded with the reason (one within float32
// rounding of an FP32 result passes), and forcing it is an error, not a
// fallback.
func TestWrongCandidateExcluded(t *testing.T) {
	f32Kind := func(kind string) Key {
		ek, err := ParseEpilogueKind(kind)
		require.NoError(t, err)
		key, err := NewKey(OpF32, 9, 20, 50, ek, 1)
		require.NoError(t, err)
		return key
	}
	for _, c := range []struct {
		op           string
		broken, good any // the kernels
		keys         []Key
	}{
		{OpU8S8, fakeKernel("gemmBroken_1x32", "test-isa", true), fakeKernel("gemmFake_1x32", "test-isa", false),
			[]Key{mustKey(t, 9, 20, 50, "none/s32", 1), mustKey(t, 9, 20, 50, "scale+bias/f32", 1), mustKey(t, 9, 20, 50, "zp+scale+colscale+bias+gelu/u8", 1)}},
		{OpF32, fakeF32("gemmF32Broken_1x32", "test-f32", true, 1e-2), fakeF32("gemmF32Close_1x32", "test-f32", true, 1e-7),
			[]Key{f32Kind("none/f32"), f32Kind("bias+gelu/f32"), f32Kind("bias+residual/f32")}},
	} {
		t.Run(c.op, func(t *testing.T) {
			name := func(k any) string {
				if u, ok := k.(*kernels.Kernel); ok {
					return u.Name
				}
				return k.(*kernels.KernelF32).Name
			}
			broken, good := name(c.broken), name(c.good)
			var w warnings
			o := testOptions(t, &w)
			s := newSelectorWith(t, o, withKernels(t, c.broken, c.good))
			for _, key := range c.keys {
				ch, err := s.Choose(key)
				require.NoError(t, err)
				why := excludedWhy(ch, broken)
				assert.Contains(t, why, "differs from the generic reference", "%v: %v", key, ch)
				assert.Contains(t, why, "row 15", "%v: %v", key, ch) // the last row of class 16, where m=9 is tuned
				assert.NotEqual(t, broken, ch.Kernel, "%v", key)
				assert.False(t, mentionsMeasured(ch, broken), "%v: %v", key, ch)
				assert.True(t, mentionsMeasured(ch, good), "%v: %v", key, ch)
				assert.Contains(t, s.Explain(key), broken, "Explain omits the excluded kernel")
			}
			o = testOptions(t, &w)
			o.Force = broken
			_, err := newSelectorWith(t, o, withKernels(t, c.broken)).Choose(c.keys[0])
			require.ErrorIs(t, err, ErrNoCandidate)
			require.ErrorIs(t, err, ErrForced)
			assert.Contains(t, err.Error(), "differs")
		})
	}
}

func mentionsMeasured(ch Choice, name string) bool {
	return slices.ContainsFunc(ch.Measured, func(m Measurement) bool { return m.Kernel == name })
}

// firstUseOnce runs 32 goroutines at once on a selector that has not
// chosen for key: half Choose it, half call run (a Linear's Run of that
// key, checking its result). The key must be tuned once, and every Choose
// see the same choice.
func firstUseOnce(t *testing.T, s *Selector, key Key, run func() error) {
	t.Helper()
	var wg sync.WaitGroup
	kernelsChosen := make([]string, 32)
	for g := 0; g < 32; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if g%2 == 1 {
				assert.NoError(t, run())
				return
			}
			ch, err := s.Choose(key)
			if assert.NoError(t, err) {
				kernelsChosen[g] = ch.Kernel
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, 1, s.Stats().Tuned, "tuning runs for one key under 32 concurrent first calls")
	for g := 0; g < 32; g += 2 {
		assert.Equal(t, kernelsChosen[0], kernelsChosen[g], "goroutine %d", g)
	}
}

// TestConcurrentFirstUse runs firstUseOnce on a Linear of each operation.
func TestConcurrentFirstUse(t *testing.T) {
	up := newProblem(t, 3, 12, 64, 48, "zp+scale+colscale+bias+residual/f32", 0)
	uwant := up.want(t, up.n)
	fp := newF32Problem(t, 3, 12, 64, 48, "bias+residual/f32", 0)
	fwant, ftol := fp.want(t, fp.n)
	for _, c := range []struct {
		key Key
		run func(t *testing.T, s *Selector) func() error
	}{
		{mustKey(t, 12, 64, 48, "zp+scale+colscale+bias+residual/f32", 1), func(t *testing.T, s *Selector) func() error {
			l, err := s.NewLinear(up.n, up.k, up.w, up.k)
			require.NoError(t, err)
			t.Cleanup(func() { l.Close() })
			return func() error {
				out := newOut(F32, up.m, up.n)
				err := l.Run(&kernels.GEMMU8S8{M: up.m, A: up.a, Lda: up.lda, Ep: up.ep, Out: out, Threads: 1})
				if err == nil {
					compare(t, "concurrent run", F32, up.m, up.n, up.n, out, uwant)
				}
				return err
			}
		}},
		{F32Key(fp.m, fp.k, fp.n, fp.ep, 1), func(t *testing.T, s *Selector) func() error {
			l, err := s.NewLinearF32(fp.n, fp.k, fp.w, fp.ldw)
			require.NoError(t, err)
			t.Cleanup(func() { l.Close() })
			return func() error {
				c := make([]float32, fp.m*fp.n)
				if err := l.Run(&kernels.GEMMF32{M: fp.m, A: fp.a, Lda: fp.lda, Ep: fp.ep, C: c, Ldc: fp.n, Threads: 1}); err != nil {
					return err
				}
				for i := range c {
					if !(math.Abs(float64(c[i]-fwant[i])) <= ftol[i]) {
						return fmt.Errorf("concurrent run: value %d = %v, want %v", i, c[i], fwant[i])
					}
				}
				return nil
			}
		}},
	} {
		t.Run(c.key.Op, func(t *testing.T) {
			var w warnings
			s := newSelector(t, testOptions(t, &w))
			firstUseOnce(t, s, c.key, c.run(t, s))
		})
	}
}

func TestRunErrors(t *testing.T) {
	var w warnings
	s := newSelector(t, testOptions(t, &w))
	p := newProblem(t, 4, 4, 16, 16, "scale/f32", 0)
	l, err := s.NewLinear(p.n, p.k, p.w, p.k)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Run(&kernels.GEMMU8S8{M: p.m, A: p.a[:10], Lda: p.lda, Ep: p.ep, Out: newOut(F32, p.m, p.n), Threads: 1}); !errors.Is(err, kernels.ErrShape) {
		t.Errorf("short a: err = %v, want ErrShape", err)
	}
	if err := l.Run(&kernels.GEMMU8S8{M: p.m, A: p.a, Lda: p.lda, Ep: p.ep, Out: kernels.Out{Ldc: p.n}, Threads: 1}); !errors.Is(err, kernels.ErrShape) {
		t.Errorf("no destination: err = %v, want ErrShape", err)
	}
	if err := l.Run(&kernels.GEMMU8S8{Lda: p.lda, Out: kernels.Out{}, Threads: 1}); err != nil {
		t.Errorf("m=0: %v", err)
	}
	if _, err := s.NewLinear(4, 4, make([]int8, 3), 4); !errors.Is(err, kernels.ErrShape) {
		t.Errorf("short weights: err = %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); !errors.Is(err, ErrClosed) {
		t.Errorf("second close: %v", err)
	}
	if _, err := s.Choose(Key{Op: "f16", M: 1, K: 1, N: 1, Threads: 1}); !errors.Is(err, ErrKey) {
		t.Errorf("bad key: %v", err)
	}
}

// TestReferencePaired checks Options.Reference: called before each round
// of timed repetitions and after each repetition, with the key and a
// positive length, and RefWork = the median of rate x time per call
// (RefRate the median rate), the rate of a repetition being the faster of
// the reference runs around it: with every other run disturbed, every
// repetition still sees the undisturbed rate.
func TestReferencePaired(t *testing.T) {
	var w warnings
	o := testOptions(t, &w)
	o.Reps = 5
	var calls int
	var mu sync.Mutex
	key := mustKey(t, 16, 64, 96, "none/s32", 1)
	o.Reference = func(k Key, d time.Duration) float64 {
		mu.Lock()
		defer mu.Unlock()
		if k != key || d <= 0 {
			t.Errorf("Reference(%v, %v), want key %v and a positive length", k, d, key)
		}
		calls++
		if calls%2 == 0 {
			return 5e8 // every other run disturbed: the pair's other run wins
		}
		return 1e9
	}
	s := newSelector(t, o)
	ch, err := s.Choose(key)
	if err != nil {
		t.Fatal(err)
	}
	timed, first := 0, 0 // first: timed once, then dropped (dropAfterFirst)
	for _, m := range ch.Measured {
		if m.Pruned {
			if m.Runs == 1 && !m.Cold {
				first++
			}
			if m.RefWork != 0 {
				t.Errorf("%s: pruned, yet RefWork %v", m.Kernel, m.RefWork)
			}
			continue
		}
		timed++
		if m.RefRate != 1e9 {
			t.Errorf("%s: RefRate %v, want 1e9", m.Kernel, m.RefRate)
		}
		// The median of rate*time is the rate times the median time.
		if want := 1e9 * m.Median.Seconds(); math.Abs(m.RefWork-want) > 1e-9*want {
			t.Errorf("%s: RefWork %v, want %v (median %v)", m.Kernel, m.RefWork, want, m.Median)
		}
	}
	if timed == 0 || calls != (timed+first+1)+(timed+1)*(o.Reps-1) {
		t.Errorf("Reference called %d times for %d timed candidates x %d reps (%d more in the first), want one more per round", calls, timed, o.Reps, first)
	}
	// Without a reference (and not from the first one's cache): no RefWork.
	o.Reference, o.CachePath = nil, "off"
	ch, err = newSelector(t, o).Choose(key)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ch.Measured {
		if m.RefWork != 0 || m.RefRate != 0 {
			t.Errorf("%s: no reference, RefWork %v RefRate %v", m.Kernel, m.RefWork, m.RefRate)
		}
	}
}

// TestKeyBudget: Options.KeyBudget bounds the timed repetitions of a key,
// every candidate together, by the count of calls: a candidate of 1 ms
// calls, timed in 2 repetitions within a 10 ms budget, runs at most 5
// calls a repetition (after its cold and warm runs), where a repetition
// of RepTime (300 ms) without a budget runs many more.
func TestKeyBudget(t *testing.T) {
	var calls atomic.Int64
	slow := fakeKernel("gemmSlow_1x32", "test-isa", false)
	inner := slow.RunU8S8
	slow.RunU8S8 = func(g *kernels.GEMMU8S8) error {
		calls.Add(1)
		time.Sleep(time.Millisecond)
		return inner(g)
	}
	key := mustKey(t, 4, 16, 32, "none/s32", 1)
	for _, c := range []struct {
		budget        time.Duration
		most, atLeast int64
	}{
		{10 * time.Millisecond, 2 + 2*5, 2 + 2},
		{-1, 1 << 20, 2 + 2*6}, // 6 calls a repetition while the warm run is under 50 ms
	} {
		var w warnings
		o := testOptions(t, &w)
		o.CachePath, o.Force, o.Reps, o.RepTime, o.KeyBudget = "off", slow.Name, 2, 300*time.Millisecond, c.budget
		s := newSelectorWith(t, o, withKernels(t, slow))
		calls.Store(0)
		ch, err := s.Choose(key)
		require.NoError(t, err)
		require.Equal(t, slow.Name, ch.Kernel)
		n := calls.Load()
		assert.LessOrEqual(t, n, c.most, "budget %v: calls", c.budget)
		assert.GreaterOrEqual(t, n, c.atLeast, "budget %v: calls", c.budget)
	}
}

// TestKeyBudgetPrunes: when even one call a repetition would overrun a
// key's budget, only the candidates near the best warm run are timed (a
// 30 ms one beside a 1 ms one is kept as pruned, after its two runs), and
// the repetitions drop to the budget's count, at least 3.
func TestKeyBudgetPrunes(t *testing.T) {
	sleepy := func(name string, d time.Duration) *kernels.Kernel {
		k := fakeKernel(name, "test-isa", false)
		inner := k.RunU8S8
		k.RunU8S8 = func(g *kernels.GEMMU8S8) error {
			time.Sleep(d)
			return inner(g)
		}
		return k
	}
	// 30x apart, so that one preempted warm run (a loaded machine) does not
	// bring them within 1.3x; PruneFactor 100 leaves the pruning to the
	// budget.
	fast, slow := sleepy("gemmFast_1x32", time.Millisecond), sleepy("gemmSlow_1x32", 30*time.Millisecond)
	var w warnings
	o := testOptions(t, &w)
	o.CachePath, o.Force, o.Reps, o.RepTime, o.KeyBudget = "off", "test-isa", 5, 20*time.Millisecond, 2*time.Millisecond
	o.PruneFactor = 100
	s := newSelectorWith(t, o, withKernels(t, fast, slow))
	ch, err := s.Choose(mustKey(t, 4, 16, 32, "none/s32", 1))
	require.NoError(t, err)
	require.Equal(t, fast.Name, ch.Kernel, "%v", ch)
	for _, m := range ch.Measured {
		switch m.Kernel {
		case fast.Name:
			assert.Equal(t, 3, m.Runs, "%v", ch)
			assert.False(t, m.Pruned, "%v", ch)
		case slow.Name:
			assert.True(t, m.Pruned, "%v", ch)
			assert.Equal(t, 2, m.Runs, "%v", ch)
		}
	}
	assert.True(t, mentionsMeasured(ch, slow.Name), "%v", ch)
}
