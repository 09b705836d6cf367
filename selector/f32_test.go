package selector

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/int8bert/int8bert/cpu"
	"github.com/int8bert/int8bert/dnnl"
	"github.com/int8bert/int8bert/kernels"
	"github.com/stretchr/testify/require"
)

// f32Kinds are the FP32 epilogue kinds the tests run: the encoder's (none,
// bias, bias+gelu, bias+residual) and other combinations.
var f32Kinds = []string{
	"none/f32",
	"bias/f32",
	"bias+gelu/f32",
	"bias+residual/f32",
	"gelu/f32",
	"residual/f32",
	"bias+gelu+residual/f32",
	"bias+gelu_tanh/f32",
	"bias+relu+residual/f32",
}

// f32Problem is a random FP32 GEMM with padded strides.
type f32Problem struct {
	m, k, n, lda int
	w            []float32 // [n][k+3]
	ldw          int
	a            []float32
	ep           *kernels.Epilogue
	kind         EpilogueKind
}

func newF32Problem(t *testing.T, seed uint64, m, k, n int, kind string, pad int) *f32Problem {
	t.Helper()
	ek, err := ParseEpilogueKind(kind)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(seed, 2))
	p := &f32Problem{m: m, k: k, n: n, lda: k + pad, ldw: k + 3, kind: ek}
	p.w = make([]float32, n*p.ldw)
	for i := range p.w {
		p.w[i] = float32(2*r.Float64() - 1)
	}
	p.a = make([]float32, m*p.lda)
	for i := range p.a {
		p.a[i] = float32(2*r.Float64()-1) * 0.5
	}
	if ek.Bias || ek.Act != kernels.ActNone || ek.Residual {
		p.ep = &kernels.Epilogue{Act: ek.Act}
		// INT8 fields are ignored by the f32 operation.
		p.ep.ZeroPoint, p.ep.ActScale, p.ep.OutScale = 128, 3, 0.5
	}
	if ek.Bias {
		p.ep.Bias = make([]float32, n)
		for j := range p.ep.Bias {
			p.ep.Bias[j] = float32(2*r.Float64() - 1)
		}
	}
	if ek.Residual {
		p.ep.LdResidual = n + pad
		p.ep.Residual = make([]float32, m*(n+pad))
		for i := range p.ep.Residual {
			p.ep.Residual[i] = float32(4*r.Float64() - 2)
		}
	}
	return p
}

// want is kernels.GemmF32Ref's result with ldc, and each value's tolerance
// (the selector's own).
func (p *f32Problem) want(t *testing.T, ldc int) ([]float32, []float64) {
	t.Helper()
	c := make([]float32, p.m*ldc)
	if err := kernels.GemmF32Ref(p.m, p.n, p.k, p.a, p.lda, p.w, p.ldw, c, ldc, p.ep); err != nil {
		t.Fatal(err)
	}
	w := make([]float32, p.n*p.k)
	for j := 0; j < p.n; j++ {
		copy(w[j*p.k:(j+1)*p.k], p.w[j*p.ldw:j*p.ldw+p.k])
	}
	tol := f32Tolerance(p.m, p.n, absSums(p.m, p.n, p.k, p.a, p.lda, w), p.ep, f32RelTol, f32AbsTol)
	return c, tol
}

func compareF32(t *testing.T, what string, p *f32Problem, got []float32, ldc int) {
	t.Helper()
	want, tol := p.want(t, ldc)
	bad := 0
	for i := 0; i < p.m; i++ {
		for j := 0; j < p.n; j++ {
			g, w := float64(got[i*ldc+j]), float64(want[i*ldc+j])
			if !(math.Abs(g-w) <= tol[i*p.n+j]) {
				if bad < 3 {
					t.Errorf("%s: [%d][%d] = %v, want %v (tolerance %.3g)", what, i, j, g, w, tol[i*p.n+j])
				}
				bad++
			}
		}
		// The padding of c is left alone.
		for j := p.n; j < ldc && i < p.m-1; j++ {
			if g := got[i*ldc+j]; g != -7 {
				t.Errorf("%s: padding [%d][%d] written: %v", what, i, j, g)
				return
			}
		}
	}
	if bad > 0 {
		t.Errorf("%s: %d of %d values differ", what, bad, p.m*p.n)
	}
}

// runFloatLinear runs p through l (err: the constructor's), made by the
// test for p's weights, as the call of call on a C of stride n+pad filled
// with -7, checks that the call's key is want (its op, p's kind), and
// returns C, its stride and the choice of the key. l is closed.
func runFloatLinear[G any](t *testing.T, s *Selector, l *Linear[G], err error, p *f32Problem, pad int, want Key, call func(c []float32, ldc int) *G) ([]float32, int, Choice) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ldc := p.n + pad
	c := make([]float32, p.m*ldc)
	for i := range c {
		c[i] = -7
	}
	g := call(c, ldc)
	require.NoError(t, l.Run(g), "%v m=%d", p.kind, p.m)
	key, err := l.Key(g)
	require.NoError(t, err)
	if key.Op != want.Op || key.Epilogue != p.kind || key != want {
		t.Fatalf("key %v, want op %s and kind %v (%v)", key, want.Op, p.kind, want)
	}
	ch, err := s.Choose(key)
	if err != nil {
		t.Fatal(err)
	}
	return c, ldc, ch
}

// runLinearF32 runs p through a LinearF32 of s with padded strides and
// checks the result against kernels.GemmF32Ref.
func runLinearF32(t *testing.T, s *Selector, p *f32Problem, pad, threads int) Choice {
	t.Helper()
	l, err := s.NewLinearF32(p.n, p.k, p.w, p.ldw)
	c, ldc, ch := runFloatLinear(t, s, l, err, p, pad, F32Key(p.m, p.k, p.n, p.ep, threads), func(c []float32, ldc int) *kernels.GEMMF32 {
		return &kernels.GEMMF32{M: p.m, A: p.a, Lda: p.lda, Ep: p.ep, C: c, Ldc: ldc, Threads: threads}
	})
	compareF32(t, fmt.Sprintf("%v m=%d threads=%d with %s", p.kind, p.m, threads, ch.Kernel), p, c, ldc)
	return ch
}

func TestF32Key(t *testing.T) {
	ep := &kernels.Epilogue{ZeroPoint: 128, ActScale: 2, ColScale: []float32{1}, Bias: []float32{1}, Act: kernels.ActGELU, OutScale: 1}
	key := F32Key(19, 768, 3072, ep, 0)
	if got, want := key.String(), "f32 m=32 k=768 n=3072 ep=bias+gelu/f32 threads=1"; got != want {
		t.Errorf("F32Key: %q, want %q", got, want)
	}
	if err := key.Validate(); err != nil {
		t.Error(err)
	}
	if got := F32Key(3, 8, 8, nil, 2).String(); got != "f32 m=4 k=8 n=8 ep=none/f32 threads=2" {
		t.Errorf("F32Key(nil): %q", got)
	}
	for _, kind := range f32Kinds {
		ek, err := ParseEpilogueKind(kind)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := NewKey(OpF32, 4, 8, 8, ek, 1); err != nil {
			t.Errorf("%s: %v", kind, err)
		}
	}
	for _, kind := range []string{"none/s32", "scale+bias/f32", "zp+scale+colscale+bias/f32", "bias/u8"} {
		ek, err := ParseEpilogueKind(kind)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := NewKey(OpF32, 4, 8, 8, ek, 1); !errors.Is(err, ErrKey) {
			t.Errorf("f32 key with %s: err = %v, want ErrKey", kind, err)
		}
	}
	if err := F32Key(1, 0, 8, nil, 1).Validate(); !errors.Is(err, ErrKey) {
		t.Errorf("k=0: err = %v, want ErrKey", err)
	}
	if err := F32Key(1, 8, 8, &kernels.Epilogue{Act: 42}, 1).Validate(); !errors.Is(err, ErrKey) {
		t.Errorf("unknown activation: err = %v, want ErrKey", err)
	}
}

// TestLinearF32EveryKind runs every FP32 epilogue kind at M = 1, 6, 19
// with padded strides, and checks each choice mentions every candidate.
func TestLinearF32EveryKind(t *testing.T) {
	var w warnings
	s := newSelector(t, testOptions(t, &w))
	want := s.CandidatesOf(OpF32)
	if !slices.Contains(want, kernels.GenericF32.Name) || dnnl.Available != slices.Contains(want, OneDNN) {
		t.Fatalf("f32 candidates %v: want the generic kernel, and onednn iff dnnl.Available (%v)", want, dnnl.Available)
	}
	for _, k := range kernels.F32Kernels() {
		if k.Available(cpu.X86) != slices.Contains(want, k.Name) {
			t.Errorf("f32 candidates %v: %s available %v", want, k.Name, k.Available(cpu.X86))
		}
	}
	for i, kind := range f32Kinds {
		for _, m := range []int{1, 6, 19} {
			p := newF32Problem(t, uint64(10*i+m), m, 45, 50, kind, 3)
			ch := runLinearF32(t, s, p, 5, 1)
			if len(ch.Measured) == 0 || ch.Measured[0].Kernel != ch.Kernel || ch.Forced != "" {
				t.Errorf("%s: choice %s is not the fastest measured: %+v", kind, ch.Kernel, ch.Measured)
			}
			for _, name := range want {
				if !mentions(ch, name) {
					t.Errorf("%s m=%d: %s was neither measured nor excluded:\n%v", kind, m, name, ch)
				}
			}
			if m == 19 && (kind == "bias+gelu/f32" || kind == "bias+residual/f32") {
				t.Logf("%s", ch)
			}
		}
	}
	// Threads, and the residual given as c itself.
	p := newF32Problem(t, 99, 19, 64, 70, "bias+gelu/f32", 0)
	runLinearF32(t, s, p, 0, 2)
	p = newF32Problem(t, 98, 6, 40, 33, "bias+residual/f32", 2)
	l, err := s.NewLinearF32(p.n, p.k, p.w, p.ldw)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ldc := p.ep.LdResidual
	want2, _ := p.want(t, ldc)
	c := p.ep.Residual // in place: c is the residual
	if err := l.Run(&kernels.GEMMF32{M: p.m, A: p.a, Lda: p.lda, Ep: p.ep, C: c, Ldc: ldc, Threads: 1}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < p.m; i++ {
		for j := 0; j < p.n; j++ {
			if d := math.Abs(float64(c[i*ldc+j] - want2[i*ldc+j])); d > 1e-4 {
				t.Fatalf("in-place residual: [%d][%d] = %v, want %v", i, j, c[i*ldc+j], want2[i*ldc+j])
			}
		}
	}
}

// TestOneDNNF32Candidate forces oneDNN: with cgo, the f32 candidate must
// run and match the reference on every kind; without, forcing it is an
// error and the FP32 linears run on native kernels only.
func TestOneDNNF32Candidate(t *testing.T) {
	var w warnings
	o := testOptions(t, &w)
	o.Force = OneDNN
	if !dnnl.Available {
		if _, err := New(o); !errors.Is(err, ErrForced) || !errors.Is(err, dnnl.ErrUnavailable) {
			t.Fatalf("forcing onednn without it: err = %v, want ErrForced and dnnl.ErrUnavailable", err)
		}
		o.Force = ""
		s := newSelector(t, o)
		if slices.Contains(s.CandidatesOf(OpF32), OneDNN) || slices.Contains(s.Header().Candidates, "f32:onednn") {
			t.Errorf("onednn among the f32 candidates of a build without it: %v", s.CandidatesOf(OpF32))
		}
		for _, kind := range []string{"bias+gelu/f32", "bias+residual/f32"} {
			ch := runLinearF32(t, s, newF32Problem(t, 3, 6, 30, 40, kind, 1), 2, 1)
			if ch.Backend != BackendNative {
				t.Errorf("%s: %v", kind, ch)
			}
		}
		t.Log("oneDNN is not in this build (CGO_ENABLED=0 or nodnnl): native f32 candidates only")
		return
	}
	s := newSelector(t, o)
	if ops := s.ForcedOps(); !slices.Equal(ops, []string{OpU8S8, OpF32, OpBF16}) {
		t.Errorf("forcing onednn applies to %v, want the operations with a oneDNN candidate (u8s8, f32, bf16)", ops)
	}
	for i, kind := range f32Kinds {
		for _, m := range []int{1, 6, 19} {
			p := newF32Problem(t, uint64(200+10*i+m), m, 40, 33, kind, 2)
			ch := runLinearF32(t, s, p, 3, 1)
			if ch.Kernel != OneDNN || ch.Backend != BackendOneDNN || ch.Forced != OneDNN || len(ch.Measured) != 1 {
				t.Fatalf("%s: forced onednn, chose %v", kind, ch)
			}
			if m == 6 && i < 4 {
				t.Logf("%s", ch)
			}
		}
	}
	// Unforced, oneDNN is measured or excluded with a reason, never
	// silently left out.
	s2 := newSelector(t, testOptions(t, &w))
	ch := runLinearF32(t, s2, newF32Problem(t, 5, 19, 64, 48, "bias+gelu/f32", 1), 1, 1)
	if !mentions(ch, OneDNN) {
		t.Errorf("oneDNN neither measured nor excluded:\n%v", ch)
	}
}

// TestCacheRoundTripF32 saves f32 and u8s8 choices, reads them back, and
// checks that a cache whose candidates lack the f32 kernels is ignored.
func TestCacheRoundTripF32(t *testing.T) {
	var w warnings
	o := testOptions(t, &w)
	s := newSelector(t, o)
	fkey := F32Key(6, 40, 48, &kernels.Epilogue{Bias: make([]float32, 48), Act: kernels.ActGELU}, 1)
	ukey := mustKey(t, 6, 40, 48, "zp+scale+colscale+bias/f32", 1)
	first, err := s.Choose(fkey)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Choose(ukey); err != nil {
		t.Fatal(err)
	}
	c, err := loadCache(o.CachePath)
	if err != nil {
		t.Fatal(err)
	}
	if e, ok := c.Entries[fkey.String()]; !ok || e.Kernel != first.Kernel {
		t.Fatalf("cache lacks %v or holds another kernel: %+v", fkey, c.Entries)
	}
	if _, ok := c.Entries[ukey.String()]; !ok {
		t.Fatalf("cache lacks %v", ukey)
	}
	for _, name := range s.CandidatesOf(OpF32) {
		if !slices.Contains(c.Header.Candidates, OpF32+":"+name) {
			t.Errorf("cache header candidates %v lack f32 kernel %s", c.Header.Candidates, name)
		}
	}

	s2 := newSelector(t, o)
	again, err := s2.Choose(fkey)
	if err != nil {
		t.Fatal(err)
	}
	if !again.FromCache || again.Kernel != first.Kernel || s2.Stats() != (Stats{FromCache: 1}) {
		t.Errorf("second selector: %+v, stats %+v; want %s from the cache", again, s2.Stats(), first.Kernel)
	}
	p := newF32Problem(t, 1, 6, 40, 48, "bias+gelu/f32", 0)
	if ch := runLinearF32(t, s2, p, 0, 1); !ch.FromCache {
		t.Errorf("linear f32 did not use the cached choice: %v", ch)
	}
	if w.String() != "" {
		t.Errorf("unexpected warnings: %s", w.String())
	}

	// A cache written before the f32 operation (its candidates lack the f32
	// kernels) is ignored.
	old := *c
	old.Candidates = slices.DeleteFunc(slices.Clone(c.Candidates), func(n string) bool { return strings.HasPrefix(n, OpF32+":") })
	path := filepath.Join(t.TempDir(), "old.json")
	if err := saveCache(&old, path); err != nil {
		t.Fatal(err)
	}
	var w3 warnings
	o3 := o
	o3.CachePath, o3.Warn = path, w3.add
	s3 := newSelector(t, o3)
	ch, err := s3.Choose(ukey)
	if err != nil {
		t.Fatal(err)
	}
	if ch.FromCache || !strings.Contains(w3.String(), "ignored") || !strings.Contains(w3.String(), "candidates") {
		t.Errorf("a cache without the f32 candidates was used (from cache %v), warnings %q", ch.FromCache, w3.String())
	}
}

// fakeF32 is a correct FP32 kernel (the generic one) under another name
// and ISA; wrong makes it add err to one value.
func fakeF32(name string, isa cpu.ISA, available bool, err float32) *kernels.KernelF32 {
	return &kernels.KernelF32{Name: name, ISA: isa, MR: 1, NR: 32,
		Available: func(cpu.Features) bool { return available },
		Accepts:   func(m, n, k int) bool { return true },
		Run: func(g *kernels.GEMMF32) error {
			if err0 := kernels.GenericF32.Run(g); err0 != nil {
				return err0
			}
			if err != 0 && g.M > 0 && g.N > 0 {
				g.C[(g.M-1)*g.Ldc+g.N/2] += err
			}
			return nil
		}}
}

// TestForcedF32 checks the forced-ISA rules across the operations.
func TestForcedF32(t *testing.T) {
	var w warnings
	fkind := "bias+gelu/f32"
	fkey := F32Key(5, 24, 40, &kernels.Epilogue{Bias: make([]float32, 40), Act: kernels.ActGELU}, 1)
	ukey := mustKey(t, 5, 24, 40, "zp+scale+colscale+bias+gelu/u8", 1)
	type want struct {
		ops       []string
		f32, u8s8 string // the kernel chosen when forced ("" when not forced)
	}
	cases := []struct {
		force string
		want  want
	}{
		// An ISA every operation has.
		{"generic", want{[]string{OpU8S8, OpF32, OpF32Kernel, OpBF16, OpBF16Kernel, OpU8S8Kernel}, kernels.GenericF32.Name, kernels.GenericU8S8.Name}},
		// One kernel by name: the operations of its type only (an FP32
		// kernel serves f32 and f32-kernel, a u8s8 one u8s8 and
		// u8s8-kernel).
		{kernels.GenericF32.Name, want{[]string{OpF32, OpF32Kernel}, kernels.GenericF32.Name, ""}},
		{kernels.GenericU8S8.Name, want{[]string{OpU8S8, OpU8S8Kernel}, "", kernels.GenericU8S8.Name}},
		// An ISA only some operations have.
		{"test-f32", want{[]string{OpF32, OpF32Kernel}, "gemmF32Fake_1x32", ""}},
		{"test-isa", want{[]string{OpU8S8, OpU8S8Kernel}, "", "gemmFake_1x32"}},
	}
	// Real ISAs this CPU runs, forcing the operations that have a kernel
	// of theirs (avx512-vnni: u8s8 and u8s8-kernel only; avx512: all;
	// avx2: all).
	has := func(ks []cpu.ISA, isa cpu.ISA) bool { return slices.Contains(ks, isa) }
	var u8s8ISAs, f32ISAs []cpu.ISA
	for _, k := range kernels.U8S8Kernels() {
		if k.ISA != "generic" && k.Available(cpu.X86) {
			u8s8ISAs = append(u8s8ISAs, k.ISA)
		}
	}
	for _, k := range kernels.F32Kernels() {
		if k.ISA != "generic" && k.Available(cpu.X86) {
			f32ISAs = append(f32ISAs, k.ISA)
		}
	}
	for _, isa := range append(slices.Clone(u8s8ISAs), f32ISAs...) {
		var w want
		if has(u8s8ISAs, isa) {
			w.ops, w.u8s8 = append(w.ops, OpU8S8), "*"
		}
		if has(f32ISAs, isa) {
			w.ops, w.f32 = append(w.ops, OpF32, OpF32Kernel), "*"
		}
		if has(u8s8ISAs, isa) {
			w.ops = append(w.ops, OpU8S8Kernel)
		}
		cases = append(cases, struct {
			force string
			want  want
		}{string(isa), w})
	}
	seen := map[string]bool{}
	for _, c := range cases {
		if seen[c.force] {
			continue
		}
		seen[c.force] = true
		t.Run(c.force, func(t *testing.T) {
			o := testOptions(t, &w)
			o.Force = c.force
			s := newSelectorWith(t, o, withKernels(t, fakeKernel("gemmFake_1x32", "test-isa", false), fakeF32("gemmF32Fake_1x32", "test-f32", true, 0)))
			if got := s.ForcedOps(); !slices.Equal(got, c.want.ops) {
				t.Fatalf("forced ops %v, want %v", got, c.want.ops)
			}
			for _, x := range []struct {
				key    Key
				kernel string
			}{{fkey, c.want.f32}, {ukey, c.want.u8s8}} {
				ch, err := s.Choose(x.key)
				if err != nil {
					t.Fatal(err)
				}
				switch {
				case x.kernel == "" && ch.Forced != "":
					t.Errorf("%v: not forced, but the choice says forced: %v", x.key, ch)
				case x.kernel != "" && (ch.Forced != c.force || !strings.EqualFold(string(ch.ISA), c.force) && ch.Kernel != c.force):
					t.Errorf("%v: forced %s, chose %v", x.key, c.force, ch)
				case x.kernel != "" && x.kernel != "*" && ch.Kernel != x.kernel:
					t.Errorf("%v: forced %s, chose %s, want %s", x.key, c.force, ch.Kernel, x.kernel)
				}
			}
			// Only the unforced operation's choices are saved (the two
			// chosen here: one u8s8, one f32).
			cache, err := loadCache(o.CachePath)
			if slices.Contains(c.want.ops, OpU8S8) && slices.Contains(c.want.ops, OpF32) {
				if err == nil {
					t.Errorf("a selector forced on both operations saved %v", cache.Entries)
				}
			} else {
				if err != nil {
					t.Fatalf("the unforced operation's choice was not saved: %v", err)
				}
				for k, e := range cache.Entries {
					if e.Forced != "" || slices.ContainsFunc(c.want.ops, func(op string) bool { return strings.HasPrefix(k, op+" ") }) {
						t.Errorf("forced choice saved: %s: %v", k, e)
					}
				}
				if len(cache.Entries) != 1 {
					t.Errorf("cache entries %v, want the unforced operation's one", cache.Entries)
				}
			}
			runLinearF32(t, s, newF32Problem(t, 4, 5, 24, 40, fkind, 1), 2, 1)
		})
	}

	// Errors: unknown; compiled in but not runnable here, whichever
	// operation has it; the environment variable alike.
	noAVX512, err := cpu.X86.Apply("avx512")
	if err != nil {
		t.Fatal(err)
	}
	bad := []string{"no-such-isa", "future-f32", "gemmF32Future_4x16"}
	for _, k := range kernels.F32Kernels() {
		if k.ISA == "avx512" {
			bad = append(bad, "avx512", k.Name)
			break
		}
	}
	for _, force := range bad {
		o := testOptions(t, &w)
		o.Force, o.Features = force, &noAVX512
		_, err := newWith(o, withKernels(t, fakeF32("gemmF32Future_4x16", "future-f32", false, 0)))
		if !errors.Is(err, ErrForced) {
			t.Errorf("force %q: err = %v, want ErrForced", force, err)
			continue
		}
		t.Logf("force %q: %v", force, err)
	}
	t.Setenv(EnvKernel, "future-f32")
	o := testOptions(t, &w)
	if _, err := newWith(o, withKernels(t, fakeF32("gemmF32Future_4x16", "future-f32", false, 0))); !errors.Is(err, ErrForced) {
		t.Errorf("%s=future-f32: err = %v, want ErrForced", EnvKernel, err)
	}
	// Forcing a u8s8-only ISA leaves the f32 linears working, read from
	// the environment too.
	t.Setenv(EnvKernel, "test-isa")
	o = testOptions(t, &w)
	s := newSelectorWith(t, o, withKernels(t, fakeKernel("gemmFake_1x32", "test-isa", false)))
	if ch := runLinearF32(t, s, newF32Problem(t, 4, 6, 24, 40, "bias+residual/f32", 1), 2, 1); ch.Forced != "" {
		t.Errorf("%s=test-isa forced an f32 choice: %v", EnvKernel, ch)
	}
}

func TestLinearF32Errors(t *testing.T) {
	var w warnings
	s := newSelector(t, testOptions(t, &w))
	p := newF32Problem(t, 4, 4, 16, 16, "bias+residual/f32", 0)
	l, err := s.NewLinearF32(p.n, p.k, p.w, p.ldw)
	if err != nil {
		t.Fatal(err)
	}
	c := make([]float32, p.m*p.n)
	for name, run := range map[string]func() error{
		"short a": func() error {
			return l.Run(&kernels.GEMMF32{M: p.m, A: p.a[:10], Lda: p.lda, Ep: p.ep, C: c, Ldc: p.n, Threads: 1})
		},
		"short c": func() error {
			return l.Run(&kernels.GEMMF32{M: p.m, A: p.a, Lda: p.lda, Ep: p.ep, C: c[:5], Ldc: p.n, Threads: 1})
		},
		"small ldc": func() error {
			return l.Run(&kernels.GEMMF32{M: p.m, A: p.a, Lda: p.lda, Ep: p.ep, C: c, Ldc: p.n - 1, Threads: 1})
		},
		"small lda": func() error {
			return l.Run(&kernels.GEMMF32{M: p.m, A: p.a, Lda: p.k - 1, Ep: p.ep, C: c, Ldc: p.n, Threads: 1})
		},
		"short bias": func() error {
			return l.Run(&kernels.GEMMF32{M: p.m, A: p.a, Lda: p.lda, Ep: &kernels.Epilogue{Bias: []float32{1}}, C: c, Ldc: p.n, Threads: 1})
		},
		"short residual": func() error {
			return l.Run(&kernels.GEMMF32{M: p.m, A: p.a, Lda: p.lda, Ep: &kernels.Epilogue{Residual: c[:p.n]}, C: c, Ldc: p.n, Threads: 1})
		},
		"bad activation": func() error {
			return l.Run(&kernels.GEMMF32{M: p.m, A: p.a, Lda: p.lda, Ep: &kernels.Epilogue{Act: 9}, C: c, Ldc: p.n, Threads: 1})
		},
	} {
		if err := run(); !errors.Is(err, kernels.ErrShape) {
			t.Errorf("%s: err = %v, want ErrShape", name, err)
		}
	}
	if err := l.Run(&kernels.GEMMF32{Lda: p.lda, Ldc: p.n, Threads: 1}); err != nil {
		t.Errorf("m=0: %v", err)
	}
	for _, bad := range [][3]int{{4, 4, 3}, {0, 4, 4}, {4, 0, 4}} {
		if _, err := s.NewLinearF32(bad[0], bad[1], make([]float32, 3), bad[2]); !errors.Is(err, kernels.ErrShape) {
			t.Errorf("NewLinearF32%v: err = %v", bad, err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); !errors.Is(err, ErrClosed) {
		t.Errorf("second close: %v", err)
	}
	if err := l.Run(&kernels.GEMMF32{M: p.m, A: p.a, Lda: p.lda, Ep: p.ep, C: c, Ldc: p.n, Threads: 1}); !errors.Is(err, ErrClosed) {
		t.Errorf("run after close: %v", err)
	}
}

func TestLinearF32Overlap(t *testing.T) {
	var w warnings
	s := newSelector(t, testOptions(t, &w))
	l, err := s.NewLinearF32(8, 8, make([]float32, 64), 8)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	buf := make([]float32, 100)
	if err := l.Run(&kernels.GEMMF32{M: 4, A: buf, Lda: 8, C: buf[20:], Ldc: 8, Threads: 1}); !errors.Is(err, kernels.ErrShape) {
		t.Errorf("a overlapping c: err = %v, want ErrShape", err)
	}
	if err := l.Run(&kernels.GEMMF32{M: 4, A: buf[:32], Lda: 8, C: buf[32:], Ldc: 8, Threads: 1}); err != nil {
		t.Errorf("a next to c: %v", err)
	}
}

// TestForcedKeepsOtherEntries: a selector forced on u8s8 saves its f32
// choices without dropping the u8s8 entries it could not use.
func TestForcedKeepsOtherEntries(t *testing.T) {
	var w warnings
	o := testOptions(t, &w)
	ukey := mustKey(t, 4, 32, 48, "zp+scale+colscale+bias/f32", 1)
	s := newSelector(t, o)
	first, err := s.Choose(ukey)
	if err != nil {
		t.Fatal(err)
	}
	force := kernels.GenericU8S8.Name
	if first.Kernel == force {
		t.Skipf("the generic kernel won %v here; nothing to check", ukey)
	}
	of := o
	of.Force = force
	s2 := newSelector(t, of)
	if ch, err := s2.Choose(ukey); err != nil || ch.Kernel != force || ch.FromCache {
		t.Fatalf("forced %s: %v, %v", force, ch, err)
	}
	fkey := F32Key(4, 32, 48, nil, 1)
	if ch, err := s2.Choose(fkey); err != nil || ch.Forced != "" {
		t.Fatalf("f32 under a u8s8 force: %v, %v", ch, err)
	}
	c, err := loadCache(o.CachePath)
	if err != nil {
		t.Fatal(err)
	}
	if e, ok := c.Entries[ukey.String()]; !ok || e.Kernel != first.Kernel || e.Forced != "" {
		t.Errorf("u8s8 entry lost or replaced by the forced choice: %+v", e)
	}
	if _, ok := c.Entries[fkey.String()]; !ok {
		t.Errorf("f32 entry not saved: %v", c.Entries)
	}
}
