package selector

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/int8bert/int8bert/cpu"
	"github.com/int8bert/int8bert/dnnl"
	"github.com/int8bert/int8bert/kernels"
)

// EnvKernel names the environment variable that forces a kernel ISA or
// one kernel by name (see Options.Force).
const EnvKernel = "INT8BERT_KERNEL"

// Backends of a candidate.
const (
	BackendNative = "native"
	BackendOneDNN = "onednn"
)

// OneDNN names the oneDNN candidate: its name, its ISA in a Choice (oneDNN
// picks its own instruction set) and the INT8BERT_KERNEL value that forces
// it.
const OneDNN = "onednn"

// Sentinel errors.
var (
	// ErrForced: the forced ISA or kernel is unknown, or this CPU or
	// build lacks it, or it cannot serve a key.
	ErrForced = errors.New("selector: forced kernel unavailable")
	// ErrNoCandidate: no candidate passed the reference check for a key.
	ErrNoCandidate = errors.New("selector: no usable candidate")
	// ErrClosed: use of a closed Selector or Linear.
	ErrClosed = errors.New("selector: use after Close")
)

// Options configure a Selector. The zero value tunes with the defaults,
// reads INT8BERT_KERNEL and INT8BERT_TUNING_CACHE, and caches under
// os.UserCacheDir().
type Options struct {
	// CachePath is the tuning cache file, or a folder (an existing one, or
	// a path ending in a separator) meaning CacheFileName in it. "" means
	// $INT8BERT_TUNING_CACHE, else DefaultCachePath(); "off" (here or in
	// the variable) disables the cache.
	CachePath string
	// Force forces an ISA ("onednn", "avx512-vnni", "amx", "avx2",
	// "avx512", "generic", ...: a cpu.ISA, or oneDNN) or one kernel by name.
	// "" means $INT8BERT_KERNEL. Forcing applies to each operation (u8s8,
	// f32, f32-kernel, bf16, bf16-kernel, u8s8-kernel) that has a kernel of that ISA or name compiled in
	// (oneDNN: a oneDNN candidate); the others choose as usual. New fails
	// (ErrForced) when no operation has it, when an operation has it
	// compiled in but this CPU cannot run it, or for "onednn" in a build or
	// run without oneDNN. Choices made while forced are not saved; those of
	// the operations the force leaves alone are.
	Force string
	// Features is the CPU the native candidates must run on; nil means
	// cpu.X86. Tests use it to turn features off.
	Features *cpu.Features
	// NoOneDNN leaves oneDNN out of the candidates.
	NoOneDNN bool
	// Reps is the number of timed repetitions per candidate (median); 5 by
	// default.
	Reps int
	// RepTime is the time of one repetition (a fast call is repeated
	// within it; KeyBudget may shorten it); 20ms by default.
	RepTime time.Duration
	// KeyBudget bounds the timed repetitions of one key, every candidate
	// together: a repetition lasts RepTime or KeyBudget / (Reps x the
	// candidates timed), whichever is less (at least one call). 0 means
	// DefaultKeyBudget; a negative budget means no bound (the bench, whose
	// figures want RepTime's full repetitions). The checked runs before
	// the timing (one cold, one or two warm per candidate) are not counted.
	KeyBudget time.Duration
	// DeriveAbove is the largest row class a linear's key (OpU8S8, OpF32,
	// OpBF16) is timed at: a larger class's choice is derived from that
	// class's (the same candidates in the same order, their times scaled
	// by the rows; Choice.DerivedFrom), since a linear's time per row no
	// longer depends on M there. 0 means DefaultDeriveAbove; a negative
	// value times every class (the GEMM bench).
	DeriveAbove int
	// PruneFactor drops a candidate after one run when it is this many
	// times slower than the best so far; 8 by default.
	PruneFactor float64
	// VerifyMACs bounds the reference check: when M*K*N exceeds it, only
	// some rows (first, last and random ones) are compared, and the generic
	// kernels are not tried once a faster candidate passed. 1<<24 by
	// default.
	VerifyMACs int
	// Reference, when set, runs between the timed repetitions (before the
	// first of each round and after each) for about a quarter of a
	// repetition and returns the rate of some fixed work over that run
	// (the bench passes peak.Rate of the VNNI or FMA loop: ops per second), d being
	// the length to aim for; Measurement.RefWork then pairs each
	// repetition with the faster of the reference runs right before and
	// after it, so that a machine whose speed drifts during tuning slows
	// both alike. It adds to the tuning time only; choices do not depend
	// on it.
	Reference func(key Key, d time.Duration) float64
	// Warn receives notes: a corrupt or stale cache, a failed save, an
	// unusable oneDNN. nil discards them: a library writes nothing to
	// stderr unless its caller asks (the CLI passes a Warn that prints).
	Warn func(msg string)
	// OnTune, when set, is called as each tuning starts (Done false) and
	// ends (Done true, with its time and error), from the goroutine that
	// tunes (a caller's, or the background tuner's), outside the
	// selector's locks: a progress display's hook. It must return soon.
	OnTune func(TuneEvent)
	// Tuning says when a key is tuned: TuneDefault ($INT8BERT_TUNING,
	// else synchronously), TuneSync (on its first call, which waits: the
	// behaviour tests and the bench need, every call of a key running one
	// kernel) or TuneBackground (the first call runs a default kernel at
	// once, and a background goroutine tunes, one key at a time; see
	// docs/DESIGN.md section 4.8).
	Tuning TuneMode
	// TunerPriority is what the background tuner's and its packings'
	// threads run at: TunerIdle (the OS's lowest priority, Linux
	// SCHED_IDLE or else nice 19, on a GOMAXPROCS slot of their own: a
	// request always takes the core from them; docs/DESIGN.md section
	// 4.12) or TunerNormal. "" means $INT8BERT_TUNER_PRIORITY, else
	// TunerIdle.
	TunerPriority string
}

// TuneEvent is a tuning's start or end, for Options.OnTune.
type TuneEvent struct {
	Key  Key
	Done bool
	// Took and Err are the tuning's time and error, when Done.
	Took time.Duration
	Err  error
	// Background is, for a tuning of the background tuner, what its
	// thread runs at (Stats.TunerPriority); "" for a caller's own.
	Background string
}

// TuneMode says when a selector tunes a key (Options.Tuning).
type TuneMode int

// Tuning modes.
const (
	// TuneDefault is $INT8BERT_TUNING ("sync" or "background"), else
	// TuneSync.
	TuneDefault TuneMode = iota
	// TuneSync tunes a key on its first call, which waits for it.
	TuneSync
	// TuneBackground runs a default kernel (the highest-ranked candidate
	// for this CPU that passes a quick check against the reference) until
	// a background goroutine has tuned the key; the tuned choice then
	// replaces it.
	TuneBackground
)

// DefaultKeyBudget is Options.KeyBudget's default: the timed repetitions
// of one key take at most this long, so that a warm-up of a model's keys
// takes seconds (docs/DESIGN.md section 4.8). A candidate's call that is
// longer than its share runs once per repetition.
const DefaultKeyBudget = 60 * time.Millisecond

// DefaultDeriveAbove is Options.DeriveAbove's default: linears' row
// classes above 256 rows take the 256-row class's choice
// (docs/DESIGN.md section 4.4).
const DefaultDeriveAbove = 256

// EnvTuning names the environment variable of Options.Tuning's default:
// "sync" or "background".
const EnvTuning = "INT8BERT_TUNING"

// String names the mode as EnvTuning spells it.
func (m TuneMode) String() string {
	switch m {
	case TuneDefault:
		return "default"
	case TuneSync:
		return "sync"
	case TuneBackground:
		return "background"
	}
	return fmt.Sprintf("TuneMode(%d)", int(m))
}

func (o *Options) defaults() error {
	switch o.Tuning {
	case TuneDefault:
		switch v := strings.TrimSpace(os.Getenv(EnvTuning)); v {
		case "", "sync":
			o.Tuning = TuneSync
		case "background":
			o.Tuning = TuneBackground
		default:
			return fmt.Errorf("selector: %s=%q: want sync or background", EnvTuning, v)
		}
	case TuneSync, TuneBackground:
	default:
		return fmt.Errorf("selector: Options.Tuning %v: want TuneDefault, TuneSync or TuneBackground", o.Tuning)
	}
	switch o.TunerPriority = strings.TrimSpace(tunerPriority(o.TunerPriority)); o.TunerPriority {
	case TunerIdle, TunerNormal:
	default:
		return fmt.Errorf("selector: tuner priority %q (Options.TunerPriority or $INT8BERT_TUNER_PRIORITY): want idle or normal", o.TunerPriority)
	}
	if o.Reps <= 0 {
		o.Reps = 5
	}
	if o.RepTime <= 0 {
		o.RepTime = 20 * time.Millisecond
	}
	if o.DeriveAbove == 0 {
		o.DeriveAbove = DefaultDeriveAbove
	}
	if o.KeyBudget == 0 {
		o.KeyBudget = DefaultKeyBudget
	}
	if o.PruneFactor <= 1 {
		o.PruneFactor = 8
	}
	if o.VerifyMACs <= 0 {
		o.VerifyMACs = 1 << 24
	}
	if o.Warn == nil {
		o.Warn = func(string) {}
	}
	return nil
}

// Selector chooses and runs the fastest correct candidate per Key. It is
// safe for concurrent use.
type Selector struct {
	opts      Options
	features  cpu.Features
	force     string
	cachePath string // "" when off
	header    Header
	ops       []string             // the operations, in a fixed order
	byOp      map[string]operation // by Key.Op
	forcedOps map[string]bool      // the operations the force applies to
	u8s8      *opSet[kernels.GEMMU8S8]
	f32       *opSet[kernels.GEMMF32]
	f32Kernel *opSet[kernels.GEMMF32]
	// bf16Kernel is OpBF16Kernel: the bf16 precision's attention.
	bf16Kernel *opSet[kernels.GEMMBF16]
	bf16       *opSet[kernels.GEMMBF16]
	u8s8Kern   *opSet[kernels.GEMMU8S8]
	eng        *dnnl.Engine // nil without oneDNN
	prims      *dnnlPrims   // nil without oneDNN

	mu      sync.Mutex
	closed  bool
	choices map[string]*Choice // tuned or loaded, valid for this binary
	// byKey holds choices' entries by Key (insert-only, as choices): a
	// pass's calls find their choice without formatting the key.
	byKey    map[Key]*Choice
	cached   map[string]Choice // loaded from the file, not yet used
	inflight map[string]*flight
	saveMu   sync.Mutex
	tuneMu   sync.Mutex // one tuning at a time, so timings do not disturb each other

	bg background // the background tuner (Options.Tuning)

	tuned, hits atomic.Int64
	// packs counts the linears' packed forms made, packsLater those made
	// in the background (Linear.packLater).
	packs, packsLater atomic.Int64
}

type flight struct {
	done chan struct{}
	ch   *Choice
	err  error
}

// New returns a Selector over every kernel compiled into this binary. It
// fails when the forced ISA or kernel is unknown or unavailable here. A
// cache that cannot be read is reported through Options.Warn and the
// selector starts empty (it re-tunes).
func New(opts Options) (*Selector, error) { return newWith(opts, compiledKernels()) }

// kernelSet is the native kernels a selector's operations consider, by
// kernel type: u8s8 for the u8s8 operations, attention (the kernels of one
// form of call, Kernel.Takes) for u8s8-kernel only, f32 for f32 and
// f32-kernel, bf16 for bf16 and bf16-kernel.
type kernelSet struct {
	u8s8      []*kernels.Kernel
	attention []*kernels.Kernel
	f32       []*kernels.KernelF32
	bf16      []*kernels.KernelBF16
}

// compiledKernels is every kernel compiled into this binary, whether this
// CPU runs it or not.
func compiledKernels() kernelSet {
	return kernelSet{u8s8: kernels.U8S8Kernels(), attention: kernels.AttentionU8S8Kernels(),
		f32: kernels.F32Kernels(), bf16: kernels.BF16Kernels()}
}

// newWith is New over the kernels ks (the tests add kernels of their own
// to compiledKernels).
func newWith(opts Options, ks kernelSet) (*Selector, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	s := &Selector{
		opts:      opts,
		features:  cpu.X86,
		choices:   map[string]*Choice{},
		byKey:     map[Key]*Choice{},
		cached:    map[string]Choice{},
		inflight:  map[string]*flight{},
		byOp:      map[string]operation{},
		forcedOps: map[string]bool{},
	}
	s.bg.init()
	if opts.Features != nil {
		s.features = *opts.Features
	}
	s.force = strings.TrimSpace(opts.Force)
	if s.force == "" {
		s.force = strings.TrimSpace(os.Getenv(EnvKernel))
	}
	oneDNNVersion := "none"
	var dnnlErr error
	switch {
	case !dnnl.Available:
		dnnlErr = dnnl.ErrUnavailable
	case opts.NoOneDNN:
		dnnlErr = errors.New("selector: oneDNN left out by Options.NoOneDNN")
	default:
		info, err := dnnl.GetInfo()
		if err == nil {
			oneDNNVersion = info.Version
			s.eng, err = dnnl.DefaultEngine()
		}
		if err != nil {
			dnnlErr = err
			s.eng = nil
			opts.Warn(fmt.Sprintf("oneDNN left out: %v", err))
		}
	}
	if s.eng != nil {
		s.prims = &dnnlPrims{s: s, prims: map[string]*dnnlPrim{}}
	}
	s.u8s8 = newOpSet(s, OpU8S8, opSpec[kernels.GEMMU8S8](u8s8Spec{}), ks, s.prims)
	s.f32 = newOpSet(s, OpF32, opSpec[kernels.GEMMF32](f32Spec(false)), ks, s.prims)
	s.f32Kernel = newOpSet(s, OpF32Kernel, opSpec[kernels.GEMMF32](f32Spec(true)), ks, s.prims)
	s.bf16 = newOpSet(s, OpBF16, opSpec[kernels.GEMMBF16](bf16Spec(false)), ks, s.prims)
	s.bf16Kernel = newOpSet(s, OpBF16Kernel, opSpec[kernels.GEMMBF16](bf16Spec(true)), ks, s.prims)
	s.u8s8Kern = newOpSet(s, OpU8S8Kernel, opSpec[kernels.GEMMU8S8](u8s8Spec{kernelOnly: true}), ks, s.prims)
	s.ops = []string{OpU8S8, OpF32, OpF32Kernel, OpBF16, OpBF16Kernel, OpU8S8Kernel}
	s.byOp[OpU8S8] = s.u8s8
	s.byOp[OpF32] = s.f32
	s.byOp[OpBF16] = s.bf16
	s.byOp[OpF32Kernel] = s.f32Kernel
	s.byOp[OpBF16Kernel] = s.bf16Kernel
	s.byOp[OpU8S8Kernel] = s.u8s8Kern
	// The header names every usable candidate of every operation ("op:name"),
	// forced or not: a forced run reads the same cache and uses the entries
	// of its ISA.
	var names []string
	for _, op := range s.ops {
		for _, c := range s.byOp[op].candidates() {
			names = append(names, op+":"+c.name())
		}
	}
	sort.Strings(names)
	s.header = Header{Format: CacheFormat, CPU: s.features.Signature(), OneDNN: oneDNNVersion, Go: runtime.Version(), Candidates: names}
	if s.force != "" {
		if err := s.applyForce(dnnlErr); err != nil {
			return nil, err
		}
	}
	if err := s.openCache(); err != nil {
		return nil, err
	}
	return s, nil
}

var process struct {
	once [TuneBackground + 1]sync.Once
	sel  [TuneBackground + 1]*Selector
	err  [TuneBackground + 1]error
	warn atomic.Pointer[func(msg string)]
}

// Default returns the process-wide selector of the library, made on first
// use and never closed: what every caller that was given no selector runs
// on (the model loaders, smoothquant), so that a process tunes each key
// once. It is New with the zero Options (INT8BERT_KERNEL,
// INT8BERT_CPU_DISABLE through cpu.X86, INT8BERT_TUNING_CACHE) but for its
// tuning mode, LibraryTuning: in the background, so that no call of a
// library user waits for a tuning (docs/DESIGN.md section 4.8). Its notes
// go to the function SetDefaultWarn gave last, and are discarded before.
func Default() (*Selector, error) {
	return processSelector(LibraryTuning(os.Getenv(EnvTuning), testing.Testing()))
}

// DefaultSync is Default's synchronous twin, whatever INT8BERT_TUNING
// says: every call of a key runs one kernel, the tuned one, which is what
// the bench's figures need.
func DefaultSync() (*Selector, error) { return processSelector(TuneSync) }

// LibraryTuning is Default's tuning mode: the one env (INT8BERT_TUNING's
// value) names, else TuneSync in a test binary (whose results must not
// depend on when a tuning ends), else TuneBackground. Any other value of
// env is TuneDefault, which New refuses with the variable's name.
func LibraryTuning(env string, inTest bool) TuneMode {
	switch strings.TrimSpace(env) {
	case "sync":
		return TuneSync
	case "background":
		return TuneBackground
	case "":
	default:
		return TuneDefault
	}
	if inTest {
		return TuneSync
	}
	return TuneBackground
}

func processSelector(mode TuneMode) (*Selector, error) {
	process.once[mode].Do(func() {
		process.sel[mode], process.err[mode] = New(Options{Tuning: mode, Warn: func(msg string) {
			if w := process.warn.Load(); w != nil {
				(*w)(msg)
			}
		}})
	})
	return process.sel[mode], process.err[mode]
}

// SetDefaultWarn sends the notes of Default's selector to warn from now on
// (nil discards them). A loader given a logger calls it, so a process's
// notes reach the logger of its latest load that had one.
func SetDefaultWarn(warn func(msg string)) {
	if warn == nil {
		process.warn.Store(nil)
		return
	}
	process.warn.Store(&warn)
}

// applyForce restricts each operation that has a kernel of the forced ISA
// (or the forced kernel) to those kernels, or says why it cannot:
//
//   - "onednn" without a usable oneDNN is an error;
//   - an operation that has the ISA compiled in, but none of it this CPU
//     (after INT8BERT_CPU_DISABLE or Options.Features) runs, is an error;
//   - an operation without the ISA is left alone (forcing "amx" or
//     "avx512-vnni" leaves the FP32 linears to their usual choice, "onednn"
//     leaves attention's products, which have no oneDNN candidate);
//   - an ISA or kernel no operation has is an error.
func (s *Selector) applyForce(dnnlErr error) error {
	f := s.force
	isDNNL := strings.EqualFold(f, OneDNN)
	if isDNNL && s.eng == nil {
		return fmt.Errorf("selector: %s=%s: %w: %w", EnvKernel, f, ErrForced, dnnlErr)
	}
	match := func(name string, isa cpu.ISA) bool { return strings.EqualFold(string(isa), f) || name == f }
	var have []string
	for _, op := range s.ops {
		o := s.byOp[op]
		var kept []candidate
		for _, c := range o.candidates() {
			if match(c.name(), c.isa()) {
				kept = append(kept, c)
			}
		}
		if len(kept) > 0 {
			o.keep(kept)
			s.forcedOps[op] = true
			continue
		}
		for _, k := range o.builtIn() {
			if match(k.name, k.isa) {
				return fmt.Errorf("selector: %s=%s: %s kernel %s needs a CPU feature this machine (or %s) lacks: %s: %w",
					EnvKernel, f, op, k.name, cpu.EnvDisable, s.features.String(), ErrForced)
			}
			have = append(have, string(k.isa), k.name)
		}
	}
	if len(s.forcedOps) > 0 {
		return nil
	}
	// Unknown: say what there is.
	if dnnl.Available {
		have = append(have, OneDNN)
	}
	slices.Sort(have)
	have = slices.Compact(have)
	return fmt.Errorf("selector: %s=%s: no such kernel ISA or kernel in this build (have: %s): %w",
		EnvKernel, f, strings.Join(have, ", "), ErrForced)
}

// forcedOn returns the force when it applies to op, else "".
func (s *Selector) forcedOn(op string) string {
	if s.forcedOps[op] {
		return s.force
	}
	return ""
}

func (s *Selector) openCache() error {
	path := s.opts.CachePath
	if path == "" {
		var err error
		if path, err = DefaultCachePath(); err != nil {
			s.opts.Warn(fmt.Sprintf("tuning cache off: %v", err))
			return nil
		}
	}
	path = ResolveCachePath(path)
	if path == "off" {
		return nil
	}
	s.cachePath = path
	f, err := LoadCacheFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		s.opts.Warn(fmt.Sprintf("%v; ignoring it and re-tuning (the file is rewritten after tuning)", err))
		return nil
	}
	c, why := f.Section(s.header)
	if c == nil {
		// Another build's or CPU's sections are kept on save (this
		// binary adds its own); a file of another format is rewritten.
		if f.Format == CacheFormat && len(f.Sections) == 0 {
			return nil
		}
		s.opts.Warn(fmt.Sprintf("tuning cache %s ignored for this binary: %s", path, why))
		return nil
	}
	s.cached = c.Entries
	return nil
}

// CachePath returns the cache file in use, or "" when the cache is off.
func (s *Selector) CachePath() string { return s.cachePath }

// Header returns what this selector's cache entries are valid for.
func (s *Selector) Header() Header { return s.header }

// Forced returns the forced ISA or kernel, or "".
func (s *Selector) Forced() string { return s.force }

// ForcedOps returns the operations (OpU8S8, OpF32, OpF32Kernel, OpBF16,
// OpBF16Kernel, OpU8S8Kernel) the forced
// ISA or kernel applies to, or nil when nothing is forced.
func (s *Selector) ForcedOps() []string {
	var ops []string
	for _, op := range s.ops {
		if s.forcedOps[op] {
			ops = append(ops, op)
		}
	}
	return ops
}

// Candidates lists the names of the candidates this selector considers for
// any operation (after the forced filter), sorted, without duplicates.
func (s *Selector) Candidates() []string {
	var names []string
	for _, op := range s.ops {
		names = append(names, s.CandidatesOf(op)...)
	}
	sort.Strings(names)
	return slices.Compact(names)
}

// CandidatesOf lists the names of the candidates this selector considers
// for the operation op (after the forced filter), sorted; nil for an
// unknown operation.
func (s *Selector) CandidatesOf(op string) []string {
	o := s.byOp[op]
	if o == nil {
		return nil
	}
	var names []string
	for _, c := range o.candidates() {
		names = append(names, c.name())
	}
	sort.Strings(names)
	return names
}

// Stats counts how choices were made.
type Stats struct {
	// Tuned is the number of tuning runs, FromCache the keys read from the
	// cache file or a tuning record.
	Tuned, FromCache int
	// Defaults is the number of keys that ran a default kernel while
	// they waited for their background tuning (Options.Tuning), Pending
	// those still waiting.
	Defaults, Pending int
	// Yields counts the background tuner's waits for requests in flight
	// (Selector.BeginRequest), Starved those that ended with requests
	// still in flight, the tuner's work then running beside them.
	Yields, Starved int
	// Requests is the requests (passes) in flight now
	// (Selector.BeginRequest).
	Requests int
	// Checks is the number of quick checks of a default's candidates
	// (one per operation, K, N, epilogue and threads), each on the call
	// that met its problem first.
	Checks int
	// Prechecks is the number of quick checks the background tuner ran
	// ahead of any call (Selector.Precheck).
	Prechecks int
	// Retimed counts the background tuner's wall-timed units that a
	// request interrupted, timed again.
	Retimed int
	// TunerPriority says what the background work last ran at ("idle
	// (SCHED_IDLE)", "nice 19 (...)", "normal (why)"); "" before any ran.
	TunerPriority string
	// Packs is the number of weight forms the selector's linears packed
	// (each linear's form for a panel width, on a call, a Prepare or in
	// the background; a tuning's own problems left out), PacksLater those packed in the background while
	// the calls ran on a form they had (docs/DESIGN.md section 4.8).
	Packs, PacksLater int
}

// Stats returns the counts so far.
func (s *Selector) Stats() Stats {
	st := Stats{Tuned: int(s.tuned.Load()), FromCache: int(s.hits.Load()), Defaults: int(s.bg.defaults.Load()),
		Checks: int(s.bg.checks.Load()), Yields: int(s.bg.yields.Load()), Starved: int(s.bg.starved.Load()),
		Prechecks: int(s.bg.prechecked.Load()), Packs: int(s.packs.Load()), PacksLater: int(s.packsLater.Load()),
		Retimed: int(s.bg.retimed.Load())}
	s.bg.prioMu.Lock()
	st.TunerPriority = s.bg.priority
	s.bg.prioMu.Unlock()
	s.mu.Lock()
	st.Pending = len(s.bg.queue)
	if s.bg.busy {
		st.Pending++
	}
	s.mu.Unlock()
	s.bg.reqMu.Lock()
	st.Requests = s.bg.requests
	s.bg.reqMu.Unlock()
	return st
}

// Tuning returns the tuning mode in use (TuneSync or TuneBackground).
func (s *Selector) Tuning() TuneMode { return s.opts.Tuning }

// Choose returns the choice for key, tuning it on first use: what a call
// of the key runs now. Concurrent first calls for one key run the tuning
// once and share its outcome. With TuneBackground, an untuned key's
// choice is a default (Choice.Default) and the key is queued for the
// background tuner; Tune waits for the tuned choice instead.
func (s *Selector) Choose(key Key) (Choice, error) {
	ch, err := s.choose(key)
	if err != nil {
		return Choice{}, err
	}
	return *ch, nil
}

// Tune returns the tuned choice for key, tuning it now if it is neither
// tuned nor cached (or waiting for the tuning in flight), in either tuning
// mode: what a warm-up calls. ctx stops a tuning between runs (nothing is
// stored) and the wait for one; its error is then ctx.Err(), wrapped.
func (s *Selector) Tune(ctx context.Context, key Key) (Choice, error) {
	ch, err := s.get(ctx, key, true)
	if err != nil {
		return Choice{}, err
	}
	return *ch, nil
}

func (s *Selector) choose(key Key) (*Choice, error) {
	return s.get(context.Background(), key, s.opts.Tuning != TuneBackground)
}

// get returns the choice for key. wait says tune it now (or wait for the
// tuning in flight) when it is neither tuned nor cached; otherwise a
// default runs and the key is queued for the background tuner.
func (s *Selector) get(ctx context.Context, key Key, wait bool) (*Choice, error) {
	if err := key.Validate(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	if ch, ok := s.byKey[key]; ok && !s.closed {
		s.mu.Unlock()
		return ch, nil
	}
	s.mu.Unlock()
	ks := key.String()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, fmt.Errorf("selector: choose %v: %w", key, ErrClosed)
	}
	if ch, ok := s.choices[ks]; ok {
		s.byKey[key] = ch
		s.mu.Unlock()
		return ch, nil
	}
	if f, ok := s.inflight[ks]; ok && wait {
		s.mu.Unlock()
		select {
		case <-f.done:
			if f.err != nil && ctx.Err() == nil && (errors.Is(f.err, context.Canceled) || errors.Is(f.err, context.DeadlineExceeded)) {
				// Another caller's context stopped that tuning: not ours.
				return s.get(ctx, key, wait)
			}
			return f.ch, f.err
		case <-ctx.Done():
			return nil, fmt.Errorf("selector: tune %v: %w", key, ctx.Err())
		}
	}
	if c, ok := s.cached[ks]; ok {
		// An entry this selector cannot use (its kernel is not among the
		// forced ones) stays in s.cached, so that a save keeps it.
		if s.byOp[key.Op].lookup(c.Kernel) != nil {
			delete(s.cached, ks)
			c.FromCache = true
			s.setPicks(&c, key)
			s.choices[ks] = &c
			s.byKey[key] = &c
			s.mu.Unlock()
			s.hits.Add(1)
			return &c, nil
		}
	}
	if !wait {
		// Background: a default now, the tuning later.
		s.mu.Unlock()
		ch, err := s.defaultFor(key)
		if err == nil {
			s.enqueue(key)
			return ch, nil
		}
		// No candidate passed the quick check: tune now, which says why.
		return s.get(ctx, key, true)
	}
	f := &flight{done: make(chan struct{})}
	s.inflight[ks] = f
	s.mu.Unlock()

	var bg string
	if _, ok := ctx.Value(tunerCtx{}).(*backgroundThread); ok {
		s.bg.prioMu.Lock()
		bg = s.bg.priority
		s.bg.prioMu.Unlock()
	}
	if s.opts.OnTune != nil {
		s.opts.OnTune(TuneEvent{Key: key, Background: bg})
	}
	t0 := time.Now()
	f.ch, f.err = s.tune(ctx, key)
	if f.err == nil {
		s.setPicks(f.ch, key)
	}
	if s.opts.OnTune != nil {
		s.opts.OnTune(TuneEvent{Key: key, Done: true, Took: time.Since(t0), Err: f.err, Background: bg})
	}
	s.mu.Lock()
	delete(s.inflight, ks)
	if f.err == nil {
		s.choices[ks] = f.ch
		s.byKey[key] = f.ch
		delete(s.bg.byKey, ks)
	}
	s.mu.Unlock()
	close(f.done)
	if f.err == nil && f.ch.Forced == "" {
		s.save()
	}
	return f.ch, f.err
}

// save writes every choice not made while forced to the cache file; a
// failure is a warning.
func (s *Selector) save() {
	if s.cachePath == "" {
		return
	}
	s.saveMu.Lock()
	defer s.saveMu.Unlock()
	c := Cache{Header: s.header, Saved: time.Now().UTC(), Entries: map[string]Choice{}}
	s.mu.Lock()
	for k, v := range s.cached {
		c.Entries[k] = v
	}
	for k, v := range s.choices {
		if v.Forced == "" && !v.Default {
			c.Entries[k] = *v
		}
	}
	s.mu.Unlock()
	if err := putSection(s.cachePath, c); err != nil {
		s.opts.Warn(err.Error())
	}
}

// putSection rewrites the file at path with c as its section for c's
// header, keeping the others (another build's, another CPU's). A file
// that is missing, corrupt or of another format is replaced.
func putSection(path string, c Cache) error {
	f, err := LoadCacheFile(path)
	if err != nil || f.Format != CacheFormat {
		f = &CacheFile{Format: CacheFormat}
	}
	f.Put(c)
	return f.Save(path)
}

// tune checks every candidate for key against the reference, times those
// that pass and returns the fastest. The candidates that survive pruning are
// timed in turns (repetition r of each, then r+1), so that a machine whose
// speed drifts during the tuning of a key slows them alike.
func (s *Selector) tune(ctx context.Context, key Key) (*Choice, error) {
	if base, ok := s.deriveBase(key); ok {
		return s.derive(ctx, key, base)
	}
	s.tuneMu.Lock()
	defer s.tuneMu.Unlock()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("selector: tune %v: %w", key, err)
	}
	s.tuned.Add(1)
	o := s.byOp[key.Op]
	forced := s.forcedOn(key.Op)
	ch := &Choice{Key: key.String(), Forced: forced, Tuned: time.Now().UTC()}
	tr, err := o.newTrial(s, key)
	if err != nil {
		return nil, fmt.Errorf("selector: tune %v: %w", key, err)
	}
	defer tr.close()
	// The background tuner's runs wait for the requests in flight
	// (yieldToRequests); a caller's own tuning does not.
	y := s.newYielder(ctx)
	// The background tuner's units are timed so that a request taking
	// the core from its lowered thread does not inflate them (unitClock).
	clk := s.newUnitClock(y, key)
	// best is the fastest warm run so far, against which later candidates
	// are pruned; timed are the candidates left to time.
	best := time.Duration(math.MaxInt64)
	type timedCand struct {
		c     candidate
		m     Measurement
		iters int
		warm  time.Duration // one warm call, to size the reference's runs
		per   []time.Duration
		ref   []float64 // the reference's rate times per, repetition by repetition
		rate  []float64 // the reference's rates
		err   error
	}
	var timed []*timedCand
	for _, c := range o.candidates() {
		if err := y.wait(ctx, s); err != nil {
			return nil, fmt.Errorf("selector: tune %v: %w", key, err)
		}
		exclude := func(format string, args ...any) {
			ch.Excluded = append(ch.Excluded, Exclusion{Kernel: c.name(), Backend: c.backend(), Reason: fmt.Sprintf(format, args...)})
		}
		if err := c.decline(key); err != nil {
			exclude("declines the key: %v", err)
			continue
		}
		// The first run packs weights and makes primitives: it is checked,
		// not timed. The second, warm run estimates the time.
		if c.isa() == cpu.ISAGeneric && len(timed) > 0 && key.M*key.K*key.N > s.opts.VerifyMACs {
			exclude("skipped: the generic Go twin, slow by construction, on a large shape where a faster candidate passed")
			continue
		}
		t0 := time.Now()
		if err := tr.exec(c); err != nil {
			exclude("failed: %v", err)
			continue
		}
		cold := time.Since(t0)
		if err := tr.verify(c); err != nil {
			exclude("differs from the generic reference: %v", err)
			continue
		}
		m := Measurement{Kernel: c.name(), Backend: c.backend(), Impl: tr.impl(c)}
		if best < math.MaxInt64 && cold > coldMin && float64(cold) > coldFactor*s.opts.PruneFactor*float64(best) {
			// Even allowing for set-up, far too slow: skip the warm run.
			m.Median, m.Runs, m.Pruned, m.Cold = cold, 1, true, true
			ch.Measured = append(ch.Measured, m)
			continue
		}
		if err := y.wait(ctx, s); err != nil {
			return nil, fmt.Errorf("selector: tune %v: %w", key, err)
		}
		warm, err := clk.time(func() error { return tr.exec(c) })
		if err != nil {
			exclude("failed on its second run: %v", err)
			continue
		}
		if best < math.MaxInt64 && float64(warm) > s.opts.PruneFactor*float64(best) {
			// One more run, so that a single preempted run prunes nothing.
			d, err := clk.time(func() error { return tr.exec(c) })
			if err != nil {
				exclude("failed on its third run: %v", err)
				continue
			}
			warm = min(warm, d)
		}
		if best < math.MaxInt64 && float64(warm) > s.opts.PruneFactor*float64(best) {
			m.Median, m.Runs, m.Pruned = warm, 2, true
			ch.Measured = append(ch.Measured, m)
			continue
		}
		timed = append(timed, &timedCand{c: c, m: m, warm: warm})
		best = min(best, warm)
	}
	// Within the key's budget: when even one call a repetition would
	// overrun it, only the candidates near the best warm run are timed
	// (the others are kept as pruned, with their warm time), and then
	// fewer repetitions (at least budgetMinReps); then a repetition lasts
	// RepTime or the budget's share, whichever is less.
	reps := s.opts.Reps
	if b := s.opts.KeyBudget; b > 0 && len(timed) > 0 {
		sum := func(ts []*timedCand) (d time.Duration) {
			for _, t := range ts {
				d += t.warm
			}
			return d
		}
		if time.Duration(reps)*sum(timed) > b {
			sort.SliceStable(timed, func(i, j int) bool { return timed[i].warm < timed[j].warm })
			cut := len(timed)
			for cut > 1 && time.Duration(reps)*sum(timed[:cut]) > b && float64(timed[cut-1].warm) > budgetNear*float64(timed[0].warm) {
				cut--
			}
			for _, t := range timed[cut:] {
				m := t.m
				m.Median, m.Runs, m.Pruned = t.warm, 2, true
				ch.Measured = append(ch.Measured, m)
			}
			timed = timed[:cut]
			if w := sum(timed); w > 0 {
				reps = min(reps, max(budgetMinReps, int(b/w)))
			}
		}
	}
	rep := s.opts.RepTime
	if b := s.opts.KeyBudget; b > 0 && len(timed) > 0 {
		rep = min(rep, b/time.Duration(reps*len(timed)))
	}
	for _, t := range timed {
		t.iters = 1
		if t.warm > 0 && t.warm < rep {
			t.iters = int(rep / t.warm)
		}
	}
	// Each repetition runs its candidate long enough to last RepTime; the
	// median repetition is its time. With a reference, a reference run
	// opens each round and follows each repetition (a quarter of its
	// length), and each repetition is paired with the faster of the runs
	// right before and right after it: a passing disturbance in one of
	// them (another process, the transient after a foreign library's
	// call, measured at 20-40% for 2-3 ms after oneDNN's) does not make
	// the candidate look faster than it is.
	refLen := func(t *timedCand) time.Duration { return max(time.Millisecond, t.warm*time.Duration(t.iters)/4) }
	for r := range reps {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("selector: tune %v: %w", key, err)
		}
		if r == 1 && s.opts.KeyBudget > 0 {
			timed = dropAfterFirst(timed, func(t *timedCand) (time.Duration, bool) {
				return min(t.warm, t.per[0]), t.err == nil && len(t.per) > 0
			}, func(t *timedCand) {
				m := t.m
				m.Median, m.Runs, m.Pruned = min(t.warm, t.per[0]), 1, true
				ch.Measured = append(ch.Measured, m)
			})
		}
		var before float64
		if s.opts.Reference != nil && len(timed) > 0 {
			before = s.opts.Reference(key, refLen(timed[0]))
		}
		for _, t := range timed {
			if t.err != nil {
				continue
			}
			if err := y.wait(ctx, s); err != nil {
				return nil, fmt.Errorf("selector: tune %v: %w", key, err)
			}
			d, _ := clk.time(func() error {
				for range t.iters {
					if t.err = tr.exec(t.c); t.err != nil {
						return t.err
					}
				}
				return nil
			})
			per := d / time.Duration(t.iters)
			t.per = append(t.per, per)
			if s.opts.Reference == nil {
				continue
			}
			after := s.opts.Reference(key, refLen(t))
			if rate := max(before, after); rate > 0 {
				t.ref = append(t.ref, rate*per.Seconds())
				t.rate = append(t.rate, rate)
			}
			before = after
		}
	}
	for _, t := range timed {
		if t.err != nil {
			ch.Excluded = append(ch.Excluded, Exclusion{Kernel: t.c.name(), Backend: t.c.backend(), Reason: fmt.Sprintf("failed while timed: %v", t.err)})
			continue
		}
		slices.Sort(t.per)
		t.m.Median, t.m.Runs = t.per[len(t.per)/2], len(t.per)
		t.m.Min, t.m.Max = t.per[0], t.per[len(t.per)-1]
		if len(t.ref) > 0 {
			slices.Sort(t.ref)
			slices.Sort(t.rate)
			t.m.RefWork, t.m.RefRate = t.ref[len(t.ref)/2], t.rate[len(t.rate)/2]
			t.m.RefMin, t.m.RefMax = t.rate[0], t.rate[len(t.rate)-1]
		}
		ch.Measured = append(ch.Measured, t.m)
	}
	sort.SliceStable(ch.Measured, func(i, j int) bool { return ch.Measured[i].Median < ch.Measured[j].Median })
	if len(ch.Measured) == 0 {
		var why []string
		for _, e := range ch.Excluded {
			why = append(why, e.Kernel+": "+e.Reason)
		}
		err := ErrNoCandidate
		if forced != "" {
			err = fmt.Errorf("%w (forced %s): %w", ErrForced, forced, ErrNoCandidate)
		}
		return nil, fmt.Errorf("selector: tune %v: %s: %w", key, strings.Join(why, "; "), err)
	}
	win := o.lookup(ch.Measured[0].Kernel)
	ch.Kernel, ch.Backend, ch.ISA = win.name(), win.backend(), win.isa()
	return ch, nil
}

// deriveBase is the key whose choice key's is derived from (Options.
// DeriveAbove), if any: a linear's key of a row class above DeriveAbove.
func (s *Selector) deriveBase(key Key) (Key, bool) {
	switch key.Op {
	case OpU8S8, OpF32, OpBF16:
	default:
		return key, false // attention's products: N grows with M
	}
	if s.opts.DeriveAbove < 0 || key.M <= s.opts.DeriveAbove {
		return key, false
	}
	base := key
	base.M = BucketM(s.opts.DeriveAbove)
	return base, true
}

// derive makes key's choice from base's (tuned now if need be): the same
// kernel, the same candidates in the same order, each time scaled by the
// ratio of the rows.
func (s *Selector) derive(ctx context.Context, key, base Key) (*Choice, error) {
	b, err := s.get(ctx, base, true)
	if err != nil {
		return nil, fmt.Errorf("selector: tune %v: from %v: %w", key, base, err)
	}
	f := float64(key.M) / float64(base.M)
	scale := func(d time.Duration) time.Duration { return time.Duration(float64(d) * f) }
	ch := &Choice{Key: key.String(), Kernel: b.Kernel, Backend: b.Backend, ISA: b.ISA, Forced: b.Forced,
		Tuned: b.Tuned, DerivedFrom: b.Key, Excluded: b.Excluded}
	for _, m := range b.Measured {
		m.Median, m.Min, m.Max, m.RefWork = scale(m.Median), scale(m.Min), scale(m.Max), m.RefWork*f
		ch.Measured = append(ch.Measured, m)
	}
	return ch, nil
}

// dropAfterFirst, within a key's budget (Options.KeyBudget > 0), keeps
// for the repetitions after the first the candidates whose first
// repetition (or warm run, the faster) is within firstNear of the best
// one's, and hands the others to drop (kept as pruned): a candidate
// slower than that by its first measurement is not the key's choice, and
// its further repetitions only lengthened the warm-up (docs/DESIGN.md
// section 4.6). ok says whether a candidate has a first time.
func dropAfterFirst[T any](timed []T, first func(T) (time.Duration, bool), drop func(T)) []T {
	best := time.Duration(math.MaxInt64)
	for _, t := range timed {
		if d, ok := first(t); ok {
			best = min(best, d)
		}
	}
	if best == math.MaxInt64 {
		return timed
	}
	kept := timed[:0:0]
	for _, t := range timed {
		if d, ok := first(t); ok && float64(d) > firstNear*float64(best) {
			drop(t)
			continue
		}
		kept = append(kept, t)
	}
	return kept
}

// firstNear is dropAfterFirst's bound: a candidate more than this many
// times the best after its first repetition is not timed further.
const firstNear = 1.15

// Over a key's budget (Options.KeyBudget), candidates whose warm run was
// more than budgetNear times the best are not timed, and a candidate runs
// at least budgetMinReps repetitions.
const (
	budgetNear    = 1.3
	budgetMinReps = 3
)

// A candidate's first run includes its set-up (packing, primitive
// creation); it is pruned on that run alone only when it took over coldMin
// and coldFactor times the usual prune factor.
const (
	coldFactor = 4
	coldMin    = time.Second
)

// Explain returns the choice for key and why, tuning it if needed.
func (s *Selector) Explain(key Key) string {
	ch, err := s.Choose(key)
	if err != nil {
		return fmt.Sprintf("%v: no choice: %v", key, err)
	}
	return ch.String()
}

// String explains the choice: the winner, every measured candidate and
// every excluded one with its reason.
func (c Choice) String() string {
	var b strings.Builder
	src := "tuned " + c.Tuned.Format(time.RFC3339)
	if c.FromCache {
		src = "from the cache (tuned " + c.Tuned.Format(time.RFC3339) + ")"
	}
	if c.DerivedFrom != "" {
		src += ", derived from " + c.DerivedFrom
	}
	fmt.Fprintf(&b, "%s: %s (backend %s, isa %s), %s", c.Key, c.Kernel, c.Backend, c.ISA, src)
	if c.Forced != "" {
		fmt.Fprintf(&b, ", forced by %s=%s", EnvKernel, c.Forced)
	}
	b.WriteString("\n")
	for _, m := range c.Measured {
		note := ""
		if m.Impl != "" {
			note = " [" + m.Impl + "]"
		}
		switch {
		case m.Cold:
			note += " (timed once, with its set-up: far slower than the best)"
		case m.Pruned:
			note += " (pruned after two runs: far slower than the best)"
		}
		ratio := ""
		if len(c.Measured) > 0 && c.Measured[0].Median > 0 {
			ratio = fmt.Sprintf(" %.2fx", float64(m.Median)/float64(c.Measured[0].Median))
		}
		fmt.Fprintf(&b, "  %-24s %-7s %12v%s%s\n", m.Kernel, m.Backend, m.Median, ratio, note)
	}
	for _, e := range c.Excluded {
		fmt.Fprintf(&b, "  %-24s %-7s excluded: %s\n", e.Kernel, e.Backend, e.Reason)
	}
	return strings.TrimRight(b.String(), "\n")
}

// Close stops the background tuner (a tuning in progress stops at its next
// run and is dropped) and releases the oneDNN primitives the selector
// made. Linears made from it must be closed first.
func (s *Selector) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return fmt.Errorf("selector: close: %w", ErrClosed)
	}
	s.closed = true
	s.bg.cancel()
	s.mu.Unlock()
	s.bg.wg.Wait()
	if s.prims != nil {
		return s.prims.close()
	}
	return nil
}

// KnownKeys returns the keys (Key.String) this selector has a choice for
// without tuning: tuned in this process or read from the cache file (or
// a tuning record) and not yet used, sorted. bench paper's estimate
// counts the shapes it would have to tune.
func (s *Selector) KnownKeys() []string {
	s.mu.Lock()
	out := make([]string, 0, len(s.choices)+len(s.cached))
	for ks := range s.choices {
		out = append(out, ks)
	}
	for ks := range s.cached {
		if _, ok := s.choices[ks]; !ok {
			out = append(out, ks)
		}
	}
	s.mu.Unlock()
	sort.Strings(out)
	return out
}

// Choices returns every choice this selector has made or read from its
// cache and used so far, in key order: the record of which kernel runs
// each key (Choice.Kernel, Choice.ISA), the default ones of keys waiting
// for their background tuning included (Choice.Default).
func (s *Selector) Choices() []Choice {
	s.mu.Lock()
	out := make([]Choice, 0, len(s.choices)+len(s.bg.byKey))
	for _, ch := range s.choices {
		out = append(out, *ch)
	}
	for ks, ch := range s.bg.byKey {
		if _, tuned := s.choices[ks]; !tuned {
			out = append(out, *ch)
		}
	}
	s.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// KernelF32 returns the native FP32 kernel chosen for an m x k x n product
// on threads threads whose B the caller packs itself, with the kernel's
// NR, and whose epilogue is none (OpF32Kernel, key F32KernelKey):
// attention's Q K^T and P V, whose B is an activation. It honours
// INT8BERT_KERNEL, INT8BERT_CPU_DISABLE (Options.Features) and the tuning
// cache like every choice. The kernel takes the exact m, n and k (the next
// fastest measured one is returned where the chosen one does not).
func (s *Selector) KernelF32(m, k, n, threads int) (*kernels.KernelF32, error) {
	key := F32KernelKey(m, k, n, threads)
	ch, err := s.choose(key)
	if err != nil {
		return nil, err
	}
	for _, name := range ch.runOrder() {
		c, ok := s.f32Kernel.byName[name].(*native[kernels.GEMMF32])
		if ok && c.accepts(m, n, k) {
			return c.src.(*kernels.KernelF32), nil
		}
	}
	return nil, fmt.Errorf("selector: %v: no candidate takes m=%d k=%d n=%d: %w", key, m, k, n, ErrNoCandidate)
}

// KernelBF16 is KernelF32 in bfloat16 (OpBF16Kernel, key BF16KernelKey):
// the native BF16 kernel chosen for an m x k x n product whose B the
// caller rounds and packs itself with the kernel's NR, no epilogue (the
// bf16 precision's attention).
func (s *Selector) KernelBF16(m, k, n, threads int) (*kernels.KernelBF16, error) {
	key := BF16KernelKey(m, k, n, threads)
	ch, err := s.choose(key)
	if err != nil {
		return nil, err
	}
	for _, name := range ch.runOrder() {
		c, ok := s.bf16Kernel.byName[name].(*native[kernels.GEMMBF16])
		if ok && c.accepts(m, n, k) {
			return c.src.(*kernels.KernelBF16), nil
		}
	}
	return nil, fmt.Errorf("selector: %v: no candidate takes m=%d k=%d n=%d: %w", key, m, k, n, ErrNoCandidate)
}

// KernelU8S8 returns the native u8 x s8 kernel chosen for an m x k x n
// product with an epilogue of kind kind (KindOf), on threads threads, whose B the
// caller packs itself with the kernel's NR (OpU8S8Kernel, key
// U8S8KernelKey): INT8 attention's Q K^T and P V (docs/DESIGN.md section
// 3.10). Like KernelF32 it honours INT8BERT_KERNEL, INT8BERT_CPU_DISABLE
// and the tuning cache, and returns a kernel that takes the exact m, n
// and k.
func (s *Selector) KernelU8S8(m, k, n int, kind EpilogueKind, threads int) (*kernels.Kernel, error) {
	key, err := U8S8KernelKey(m, k, n, kind, threads)
	if err != nil {
		return nil, err
	}
	ch, err := s.choose(key)
	if err != nil {
		return nil, err
	}
	for _, name := range ch.runOrder() {
		c, ok := s.u8s8Kern.byName[name].(*native[kernels.GEMMU8S8])
		if ok && c.accepts(m, n, k) {
			return c.src.(*kernels.Kernel), nil
		}
	}
	return nil, fmt.Errorf("selector: %v: no candidate takes m=%d k=%d n=%d: %w", key, m, k, n, ErrNoCandidate)
}
