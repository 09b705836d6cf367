package selector

import (
	"fmt"
	"sync"
	"time"

	"github.com/int8bert/int8bert/cpu"
	"github.com/int8bert/int8bert/kernels"
)

// This file is the selector's generic half: what every operation shares.
// An operation (a Key.Op) is an *opSet[G], G being the kernels GEMM
// descriptor its calls are made of (kernels.GEMMU8S8, kernels.GEMMF32,
// kernels.GEMMBF16); what differs between operations is an opSpec[G], one
// page per operation (u8s8.go; f32.go and bf16.go, both a floatSpec[G] of
// float.go over a descriptor of their own). Adding an operation
// (s8 x s8) costs
//
//  1. a Key.Op constant and its case in Key.Validate (key.go);
//  2. an opSpec[G] (its kernels, its oneDNN candidate if any, the check of
//     a call, the random problem and the reference check of a trial);
//  3. its opSet in New (selector.go) and a constructor of its Linear[G].

// candidate is one implementation of an operation.
type candidate interface {
	name() string
	backend() string
	isa() cpu.ISA
	// decline says why the candidate does not take key, or nil.
	decline(key Key) error
}

// cand is a candidate of an operation whose calls are G.
type cand[G any] interface {
	candidate
	// accepts reports whether the candidate takes this exact m.
	accepts(m, n, k int) bool
	// run runs the call g (of epilogue kind kind) with l's weights.
	run(l *Linear[G], g *G, kind EpilogueKind) error
	// implName names what run ran, when the backend says ("" otherwise).
	implName(l *Linear[G], g *G, kind EpilogueKind) string
}

// trial is one key's problem: random data of the key's shape, a reference
// result, and each candidate's output.
type trial interface {
	// exec runs c once on the problem.
	exec(c candidate) error
	// verify compares c's latest output with the reference.
	verify(c candidate) error
	// impl names what c ran, when it knows ("" otherwise).
	impl(c candidate) string
	close()
}

// operation is one Key.Op as the tuning sees it: its candidates and how to
// build a trial. Every operation is an *opSet[G].
type operation interface {
	// candidates lists the candidates usable here, in trial order, after
	// the forced filter.
	candidates() []candidate
	// lookup returns the candidate of that name among candidates(), or nil.
	lookup(name string) candidate
	// builtIn lists every kernel of the operation's kernel set (New: every
	// kernel compiled in), whether this CPU runs it or not; the forced
	// checks use it.
	builtIn() []builtInKernel
	// keep restricts the candidates to kept (the forced ones).
	keep(kept []candidate)
	newTrial(s *Selector, key Key) (trial, error)
}

// builtInKernel is a kernel's name and ISA.
type builtInKernel struct {
	name string
	isa  cpu.ISA
}

// opSpec is what one operation supplies over calls G.
type opSpec[G any] interface {
	// natives lists the operation's kernels of ks, whether this CPU runs
	// them or not.
	natives(ks kernelSet) []*native[G]
	// oneDNN returns the operation's oneDNN candidate over the selector's
	// primitives, or nil when oneDNN does not serve it.
	oneDNN(p *dnnlPrims) cand[G]
	// pack packs the weights w ([n][k], compact) for panel width nr.
	pack(w any, n, k, nr int) (any, error)
	// withB sets the call's B to weights pack made.
	withB(g *G, packed any)
	// prepare checks a call on l (N, K and B left to the Linear) and
	// returns the call to run (N, K set; a copy where an operand must be),
	// its rows and, when it has any (m > 0), its key.
	prepare(l *Linear[G], g *G) (run *G, m int, key Key, err error)
	// problem makes the random problem of key's shape on a Linear of its
	// own, with the reference result on some rows.
	problem(s *Selector, key Key) (*Linear[G], trialData[G], error)
}

// trialData is a trial's data: its call and the reference check.
type trialData[G any] interface {
	// call returns the problem's call, writing to a destination of the
	// candidate's own.
	call(name string) *G
	// verify compares the candidate's latest output with the reference.
	verify(name string) error
}

// opSet is one operation: its spec and its candidates.
type opSet[G any] struct {
	op       string
	spec     opSpec[G]
	compiled []*native[G] // every kernel of the selector's set
	cands    []cand[G]    // those usable here, in trial order
	byName   map[string]cand[G]
}

// newOpSet lists the candidates of op: the native kernels this CPU runs,
// then oneDNN (when p is set and the operation has it), the generic kernels
// last: the fast ones set the bar that prunes the slow ones after a single
// run, and oneDNN falls back to slow reference code for some epilogues.
func newOpSet[G any](s *Selector, op string, spec opSpec[G], ks kernelSet, p *dnnlPrims) *opSet[G] {
	o := &opSet[G]{op: op, spec: spec, byName: map[string]cand[G]{}}
	o.compiled = spec.natives(ks)
	var generic []cand[G]
	for _, k := range o.compiled {
		if k.available == nil || !k.available(s.features) {
			continue
		}
		if _, dup := o.byName[k.kname]; dup {
			continue
		}
		o.byName[k.kname] = k
		if k.kisa == cpu.ISAGeneric {
			generic = append(generic, k)
		} else {
			o.cands = append(o.cands, k)
		}
	}
	if p != nil {
		if d := spec.oneDNN(p); d != nil {
			o.cands = append(o.cands, d)
			o.byName[d.name()] = d
		}
	}
	o.cands = append(o.cands, generic...)
	return o
}

func (o *opSet[G]) candidates() []candidate {
	out := make([]candidate, len(o.cands))
	for i, c := range o.cands {
		out[i] = c
	}
	return out
}

func (o *opSet[G]) lookup(name string) candidate {
	if c, ok := o.byName[name]; ok {
		return c
	}
	return nil
}

func (o *opSet[G]) builtIn() []builtInKernel {
	out := make([]builtInKernel, len(o.compiled))
	for i, k := range o.compiled {
		out[i] = builtInKernel{name: k.kname, isa: k.kisa}
	}
	return out
}

func (o *opSet[G]) keep(kept []candidate) {
	o.cands = o.cands[:0]
	o.byName = map[string]cand[G]{}
	for _, c := range kept {
		gc := c.(cand[G])
		o.cands = append(o.cands, gc)
		o.byName[gc.name()] = gc
	}
}

func (o *opSet[G]) newTrial(s *Selector, key Key) (trial, error) {
	l, p, err := o.spec.problem(s, key)
	if err != nil {
		return nil, err
	}
	return &trialOf[G]{key: key, l: l, p: p}, nil
}

// trialOf is the trial of an operation over calls G.
type trialOf[G any] struct {
	key Key
	l   *Linear[G]
	p   trialData[G]
}

func (t *trialOf[G]) exec(c candidate) error {
	return c.(cand[G]).run(t.l, t.p.call(c.name()), t.key.Epilogue)
}

func (t *trialOf[G]) verify(c candidate) error { return t.p.verify(c.name()) }

func (t *trialOf[G]) impl(c candidate) string {
	return c.(cand[G]).implName(t.l, t.p.call(c.name()), t.key.Epilogue)
}

func (t *trialOf[G]) close() { t.l.Close() }

// native is a kernel of package kernels as a candidate: its description,
// copied from the kernel, and its run function.
type native[G any] struct {
	kname     string
	kisa      cpu.ISA
	nr        int
	available func(cpu.Features) bool
	accepter  func(m, n, k int) bool // nil: every shape
	exec      func(g *G) error
	src       any // the *kernels.Kernel, *kernels.KernelF32 or *kernels.KernelBF16
}

// nativesOf lists the kernels ks as candidates made by mk; nil kernels
// and kernels without a run function are left out.
func nativesOf[K comparable, G any](ks []K, mk func(K) *native[G]) []*native[G] {
	var zero K
	var out []*native[G]
	for _, k := range ks {
		if k == zero {
			continue
		}
		if c := mk(k); c.exec != nil {
			out = append(out, c)
		}
	}
	return out
}

func (c *native[G]) name() string { return c.kname }

// tile is the kernel's register tile, MR x NR.
func (c *native[G]) tile() (mr, nr int) {
	switch k := c.src.(type) {
	case *kernels.Kernel:
		return k.MR, k.NR
	case *kernels.KernelF32:
		return k.MR, k.NR
	case *kernels.KernelBF16:
		return k.MR, k.NR
	}
	return 0, c.nr
}
func (c *native[G]) backend() string { return BackendNative }
func (c *native[G]) isa() cpu.ISA    { return c.kisa }

func (c *native[G]) decline(key Key) error {
	if !c.accepts(key.M, key.N, key.K) {
		return fmt.Errorf("kernel %s does not accept m=%d n=%d k=%d", c.kname, key.M, key.N, key.K)
	}
	if k, ok := c.src.(*kernels.Kernel); ok && k.Takes != nil && !k.Takes(u8s8Form(key, k.NR)) {
		return fmt.Errorf("kernel %s takes one form of call only, not ep=%v threads=%d", c.kname, key.Epilogue, key.Threads)
	}
	return nil
}

func (c *native[G]) accepts(m, n, k int) bool { return c.accepter == nil || c.accepter(m, n, k) }

func (c *native[G]) implName(*Linear[G], *G, EpilogueKind) string { return "" }

func (c *native[G]) run(l *Linear[G], g *G, _ EpilogueKind) error {
	p, err := l.packed(c.nr)
	if err != nil {
		return err
	}
	b := *g
	l.op.spec.withB(&b, p)
	return c.exec(&b)
}

// Linear is one weight matrix W ([N][K], a PyTorch Linear weight) of an
// operation whose calls are G (kernels.GEMMU8S8 for the int8 linears,
// kernels.GEMMF32 for the FP32 ones), prepared once: each candidate's
// packed layout is made on its first use and kept until Trim finds it
// unused. Run computes the call with the candidate the selector chose for
// its key. A Linear is safe for concurrent use.
//
// An int8 or FP32 Linear keeps W once: its compact copy until the first
// packed form is made, then only the packed forms, from which a further
// form (another kernel's NR, oneDNN's layout) is unpacked exactly. (A
// BF16 Linear keeps its FP32 copy: its packed forms are rounded.)
type Linear[G any] struct {
	s      *Selector
	op     *opSet[G]
	n, k   int
	w      any     // []int8 or []float32, [n][k]; nil ([]int8) once packed
	colSum []int32 // u8s8: the column sums of W

	mu      sync.Mutex
	closed  bool
	packs   map[int]*pack // by NR
	packing map[int]bool  // forms being packed in the background (packLater)
	dw      []*dnnlWeights
	// single: a new packed form replaces the forms no call ran on since
	// the last Trim (SetSingleForm).
	single bool
	// trial: a tuning's or check's problem (the operations' problem
	// functions set it), whose packs Stats leaves out.
	trial bool
}

// pack is one packed form of a Linear's W. used says a call ran on it
// since the last Trim; pinned (Prepare's, a warm-up's) that Trim keeps it.
type pack struct {
	p            any
	used, pinned bool
	// calls counts the calls that ran on the form since the last Trim
	// or Compact (which keeps the busiest).
	calls int64
}

// newLinear copies the weights w ([n][ldw], ldw >= k) into a Linear of op.
func newLinear[G any, E int8 | float32](s *Selector, op *opSet[G], n, k int, w []E, ldw int) (*Linear[G], []E, error) {
	if n < 1 || k < 1 || ldw < k || len(w) < (n-1)*ldw+k {
		return nil, nil, fmt.Errorf("selector: %s linear n=%d k=%d ldw=%d len(w)=%d: %w", op.op, n, k, ldw, len(w), kernels.ErrShape)
	}
	c := make([]E, n*k)
	for j := 0; j < n; j++ {
		copy(c[j*k:(j+1)*k], w[j*ldw:j*ldw+k])
	}
	return &Linear[G]{s: s, op: op, n: n, k: k, w: c, packs: map[int]*pack{}}, c, nil
}

// N is the number of output features.
func (l *Linear[G]) N() int { return l.n }

// K is the number of input features.
func (l *Linear[G]) K() int { return l.k }

// Op is the operation (OpU8S8, OpF32, OpBF16) the Linear's calls are.
func (l *Linear[G]) Op() string { return l.op.op }

// Key returns the key Run uses for the call g (its M, epilogue and
// destination, and threads).
func (l *Linear[G]) Key(g *G) (Key, error) {
	if g == nil {
		return Key{}, fmt.Errorf("selector: %s linear: nil call: %w", l.op.op, ErrKey)
	}
	_, m, key, err := l.op.spec.prepare(l, g)
	if err == nil && m == 0 {
		err = fmt.Errorf("selector: %s linear: a call of no rows has no key: %w", l.op.op, ErrKey)
	}
	return key, err
}

// Run runs the call g on W: g.N and g.K are the Linear's (0 means so; any
// other value is an error), g.B must be nil (the Linear supplies its packed
// weights), the rest is the caller's (see the kernels descriptor, and
// NewLinear and NewLinearF32 for what each operation asks). Threads <= 1
// runs on the calling goroutine. g is not modified.
func (l *Linear[G]) Run(g *G) error { return l.RunAs(g, 0) }

// RunAs is Run choosing the candidate as for a call of asRows rows (its
// key's M bucket and the row model's pick for that count), with g's own
// rows; asRows <= 0 is g's M, as Run. A pass that drops rows between
// its linears (a cancelled request's, docs/DESIGN.md section 9.1) keeps
// the choices of the rows it started with, so that the rows left get
// the bits they get in the whole pass: a native kernel computes each
// output from its own row whatever the call's M. Should the candidate
// chosen not take g's M, the next one in the choice's order that does
// runs, as in Run.
func (l *Linear[G]) RunAs(g *G, asRows int) error {
	if g == nil {
		return fmt.Errorf("selector: %s linear run: nil call: %w", l.op.op, kernels.ErrShape)
	}
	run, m, key, err := l.op.spec.prepare(l, g)
	if err != nil || m == 0 {
		return err
	}
	pickM := m
	if asRows > 0 && asRows != m {
		key.M, pickM = BucketM(asRows), asRows
	}
	ch, err := l.s.choose(key)
	if err != nil {
		return err
	}
	// The row model's pick for this exact m in the key's class, else the
	// chosen candidate or, should it not take this exact m (the key's is
	// a row class), the next fastest measured one. With background
	// tuning, a candidate whose weights are not packed yet (a choice that
	// changed under the calls, its tuning done) is packed in the
	// background while the calls run on a form already packed
	// (docs/DESIGN.md section 4.8): adopting a tuning costs no call a
	// packing of every layer.
	later := l.s.opts.Tuning == TuneBackground && !ch.Default
	if ch.Default && l.s.opts.Tuning == TuneBackground {
		if ran, err := l.runDefault(ch, m, run, key.Epilogue); ran {
			return err
		}
	}
	var first cand[G]
	if name := ch.pickAt(pickM, key.M); name != "" {
		if ran, err := l.tryRun(name, m, run, key.Epilogue, later, &first); ran {
			return err
		}
	}
	// ch.runOrder(), without its slice on every call.
	if ran, err := l.tryRun(ch.Kernel, m, run, key.Epilogue, later, &first); ran {
		return err
	}
	for i := range ch.Measured {
		if ran, err := l.tryRun(ch.Measured[i].Kernel, m, run, key.Epilogue, later, &first); ran {
			return err
		}
	}
	for _, name := range ch.fallback {
		if ran, err := l.tryRun(name, m, run, key.Epilogue, later, &first); ran {
			return err
		}
	}
	if first != nil { // none is packed: pack the first now
		if err := first.run(l, run, key.Epilogue); err != nil {
			return fmt.Errorf("selector: %s linear m=%d k=%d n=%d with %s: %w", l.op.op, m, l.k, l.n, first.name(), err)
		}
		return nil
	}
	return fmt.Errorf("selector: %s linear m=%d k=%d n=%d: no candidate of %v takes this m: %w", l.op.op, m, l.k, l.n, key, ErrNoCandidate)
}

// Prepare makes ready what a call of key (a key of this Linear: its
// operation, K and N; any M bucket, epilogue and threads) runs: W packed
// for the kernel the key's choice runs, so that the first such call packs
// nothing. It chooses as Run does (tuning, or a default with
// TuneBackground) when the key has no choice yet; a warm-up tunes first
// (Selector.Tune). oneDNN's primitives and packed weights are made per
// exact M by the first call, as ever.
func (l *Linear[G]) Prepare(key Key) error {
	if key.Op != l.op.op || key.K != l.k || key.N != l.n {
		return fmt.Errorf("selector: %s linear k=%d n=%d: prepare %v: not a key of this linear: %w", l.op.op, l.k, l.n, key, ErrKey)
	}
	ch, err := l.s.choose(key)
	if err != nil {
		return err
	}
	// The weights packed for every native candidate the row model picks
	// for some M of the class.
	for i := range ch.picks {
		if nc, ok := l.op.byName[ch.Measured[ch.picks[i]].Kernel].(*native[G]); ok {
			if _, err := l.pin(nc.nr); err != nil {
				return err
			}
		}
	}
	for _, name := range ch.runOrder() {
		c, found := l.op.byName[name]
		if !found || !c.accepts(key.M, l.n, l.k) {
			continue
		}
		if nc, ok := c.(*native[G]); ok {
			_, err := l.pin(nc.nr)
			return err
		}
		return nil
	}
	return nil
}

// shape checks the N, K and B a caller left to the Linear.
func (l *Linear[G]) shape(n, k int, hasB bool) error {
	if (n != 0 && n != l.n) || (k != 0 && k != l.k) || hasB {
		return fmt.Errorf("selector: %s linear n=%d k=%d: the call sets n=%d k=%d or its own B: %w", l.op.op, l.n, l.k, n, k, kernels.ErrShape)
	}
	return nil
}

// packed returns W packed for panel width nr, packing it on first use.
func (l *Linear[G]) packed(nr int) (any, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, err := l.packLocked(nr)
	if err != nil {
		return nil, err
	}
	e.used = true
	e.calls++
	return e.p, nil
}

// runDefault runs a default choice's kernel when its form is packed; else,
// where the kernel takes m, another candidate that passed the default's
// check (Choice.alts) whose form is packed, the default's form being
// packed in the background meanwhile (packLater): a call of a new row
// class whose default tile has another panel width than the classes met
// before packs nothing on the request path (docs/DESIGN.md section
// 4.12). It reports false when neither ran; Run then packs the default's
// form now, or runs its fallback.
func (l *Linear[G]) runDefault(ch *Choice, m int, g *G, ep EpilogueKind) (bool, error) {
	var first cand[G]
	if ran, err := l.tryRun(ch.Kernel, m, g, ep, true, &first); ran || first == nil {
		return ran, err
	}
	for _, name := range ch.alts {
		c, found := l.op.byName[name]
		if !found || !c.accepts(m, l.n, l.k) || !l.ready(c) {
			continue
		}
		if err := c.run(l, g, ep); err != nil {
			return true, fmt.Errorf("selector: %s linear m=%d k=%d n=%d with %s: %w", l.op.op, m, l.k, l.n, c.name(), err)
		}
		return true, nil
	}
	return false, nil
}

// tryRun runs the candidate name on g when it takes m rows and, with
// later (background tuning), its form is packed; an unpacked one is
// queued for packLater and skipped. first keeps the first candidate that
// took m, for Run to pack now when none was packed.
func (l *Linear[G]) tryRun(name string, m int, g *G, ep EpilogueKind, later bool, first *cand[G]) (bool, error) {
	c, found := l.op.byName[name]
	if !found || !c.accepts(m, l.n, l.k) {
		return false, nil
	}
	if *first == nil {
		*first = c
	}
	if later && !l.ready(c) {
		l.packLater(c)
		return false, nil
	}
	if err := c.run(l, g, ep); err != nil {
		return true, fmt.Errorf("selector: %s linear m=%d k=%d n=%d with %s: %w", l.op.op, m, l.k, l.n, c.name(), err)
	}
	return true, nil
}

// ready reports whether c runs on l without packing first: oneDNN's
// candidate (its weights are its own), or a native one whose form is
// packed.
func (l *Linear[G]) ready(c cand[G]) bool {
	nc, ok := c.(*native[G])
	if !ok {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.packs[nc.nr] != nil
}

// packLater packs c's form in a goroutine of its own, once: the calls
// that come meanwhile run on a form already packed (Run). A linear of
// SetSingleForm packs on its call, as before.
func (l *Linear[G]) packLater(c cand[G]) {
	nc, ok := c.(*native[G])
	if !ok {
		return
	}
	l.mu.Lock()
	if l.single || l.closed || l.packing[nc.nr] || l.packs[nc.nr] != nil {
		l.mu.Unlock()
		return
	}
	if l.packing == nil {
		l.packing = map[int]bool{}
	}
	l.packing[nc.nr] = true
	l.mu.Unlock()
	go func() {
		// As the tuner's runs, the packing waits for the requests in
		// flight (yieldToRequests); a packing is a unit of about
		// packUnit. A closed selector stops the wait, not the packing.
		// Its thread runs at the lowest priority, as the tuner's, and
		// ends with this goroutine.
		defer l.s.enterBackground().leave()
		_ = l.s.yieldToRequests(l.s.bg.ctx, packUnit)
		l.packLaterNow(nc.nr) // an error (a closed linear) leaves the calls on their form
		l.mu.Lock()
		delete(l.packing, nc.nr)
		l.mu.Unlock()
	}()
}

// packLaterNow packs W for panel width nr unless a call packed it
// meanwhile, counting it as packed in the background (Stats.PacksLater).
//
// It packs without l.mu, so that the calls on the linear's other forms
// do not wait for it (tens of milliseconds for a BERT-base FFN): W is
// read under the lock (the compact copy, whose contents never change, or
// one unpacked from a form), and the form is kept unless the linear
// closed or a call packed it meanwhile.
func (l *Linear[G]) packLaterNow(nr int) {
	l.mu.Lock()
	if l.closed || l.single || l.packs[nr] != nil {
		l.mu.Unlock()
		return
	}
	w := l.weightsLocked()
	l.mu.Unlock()
	p, err := l.op.spec.pack(w, l.n, l.k, nr)
	if err != nil {
		return // the calls stay on their form
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || l.packs[nr] != nil {
		return
	}
	l.installLocked(nr, p)
	l.s.packsLater.Add(1)
}

// packUnit is the unit a background packing counts as when it yields to
// the requests in flight (yieldToRequests): about a BERT-base FFN
// linear's packing.
const packUnit = 20 * time.Millisecond

// pin is packed for Prepare: Trim keeps the form.
func (l *Linear[G]) pin(nr int) (any, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, err := l.packLocked(nr)
	if err != nil {
		return nil, err
	}
	e.pinned = true
	return e.p, nil
}

func (l *Linear[G]) packLocked(nr int) (*pack, error) {
	if l.closed {
		return nil, fmt.Errorf("selector: %s linear: %w", l.op.op, ErrClosed)
	}
	if e := l.packs[nr]; e != nil {
		return e, nil
	}
	w := l.weightsLocked()
	if l.single {
		// W compact is the Linear's while the forms it may have come
		// from go (an exact new form drops it again, below).
		l.w = w
		for onr, e := range l.packs {
			if !e.used && !e.pinned {
				delete(l.packs, onr)
			}
		}
	}
	p, err := l.op.spec.pack(w, l.n, l.k, nr)
	if err != nil {
		return nil, fmt.Errorf("selector: %s linear: %w", l.op.op, err)
	}
	return l.installLocked(nr, p), nil
}

// installLocked keeps p as the form of panel width nr; the caller holds
// l.mu.
func (l *Linear[G]) installLocked(nr int, p any) *pack {
	e := &pack{p: p}
	l.packs[nr] = e
	if !l.trial {
		l.s.packs.Add(1)
	}
	// A packed form that holds W exactly (int8's, FP32's; not BF16's,
	// which rounds): drop the compact copy.
	switch p.(type) {
	case *kernels.PackedS8:
		l.w = []int8(nil)
	case *kernels.PackedF32:
		l.w = []float32(nil)
	}
	return e
}

// weightsLocked returns W compact ([n][k]): the Linear's copy, or one
// unpacked from an exact packed form (int8, FP32; the caller must not
// keep it).
func (l *Linear[G]) weightsLocked() any {
	switch w := l.w.(type) {
	case []int8:
		if w == nil {
			for _, e := range l.packs {
				if p, ok := e.p.(*kernels.PackedS8); ok {
					return unpackS8(p)
				}
			}
		}
	case []float32:
		if w == nil {
			for _, e := range l.packs {
				if p, ok := e.p.(*kernels.PackedF32); ok {
					return unpackF32(p)
				}
			}
		}
	}
	return l.w
}

// unpackF32 returns the [N][K] matrix p was packed from.
func unpackF32(p *kernels.PackedF32) []float32 {
	w := make([]float32, p.N*p.K)
	for j := 0; j < p.N; j++ {
		row := w[j*p.K : (j+1)*p.K]
		for q := range row {
			row[q] = p.At(j, q)
		}
	}
	return w
}

// unpackS8 returns the [N][K] matrix p was packed from.
func unpackS8(p *kernels.PackedS8) []int8 {
	w := make([]int8, p.N*p.K)
	for j := 0; j < p.N; j++ {
		row := w[j*p.K : (j+1)*p.K]
		for q := range row {
			row[q] = p.At(j, q)
		}
	}
	return w
}

// Trim releases the packed forms of W that no call has run on since the
// previous Trim (or since they were made), except those Prepare made (a
// warm-up's) and the last one: forms that a tuning's default or a since
// replaced choice needed, or that only an earlier workload's row counts
// picked. A later call that needs a released form packs it again, from a
// kept form. oneDNN's reordered weights are kept. Trim returns the bytes
// it released.
func (l *Linear[G]) Trim() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	freed := 0
	for nr, e := range l.packs {
		if !e.used && !e.pinned && len(l.packs) > 1 {
			freed += packBytes(e.p)
			delete(l.packs, nr)
		}
	}
	for _, e := range l.packs {
		e.used, e.calls = false, 0
	}
	return freed
}

// Compact releases every packed form of W but one, and those Prepare made
// (a warm-up's): the one most calls ran on since the previous Trim or
// Compact (of equal counts, the widest panel). It is Trim for a caller at
// rest (a server idle for a while): the row counts of a workload pick
// kernels of a few panel widths, each a form of the whole W, and one form
// runs every row count. A later call that needs a released form packs it
// again from the kept one (off the request path with background tuning).
// It returns the bytes it released.
func (l *Linear[G]) Compact() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	keep, best := -1, int64(-1)
	for nr, e := range l.packs {
		if e.calls > best || e.calls == best && nr > keep {
			keep, best = nr, e.calls
		}
	}
	freed := 0
	for nr, e := range l.packs {
		if nr != keep && !e.pinned {
			freed += packBytes(e.p)
			delete(l.packs, nr)
		}
	}
	for _, e := range l.packs {
		e.used, e.calls = false, 0
	}
	return freed
}

// SetSingleForm sets whether a new packed form replaces the forms that no
// call has run on since the last Trim (and that Prepare did not make), W
// unpacked from one of them first: for a caller whose row counts only
// fall, such as a calibration run longest first and trimmed after each
// batch, a Linear then holds one form, not one for each panel width its
// row counts met. Off by default: a server's row counts come and go.
func (l *Linear[G]) SetSingleForm(on bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.single = on
}

// Close releases the packed weights (oneDNN's are C memory). A second
// Close returns ErrClosed.
func (l *Linear[G]) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return fmt.Errorf("selector: %s linear close: %w", l.op.op, ErrClosed)
	}
	l.closed = true
	l.packs, l.w = nil, nil
	var first error
	for _, d := range l.dw {
		if err := d.w.Close(); err != nil && first == nil {
			first = fmt.Errorf("selector: %s linear close: %w", l.op.op, err)
		}
	}
	l.dw = nil
	return first
}

// outputs is a trial's destination, one for every candidate: made on
// first use and filled again (with values a correct kernel overwrites)
// on each candidate's first get, its checked run, which verify reads
// before the next candidate's first run. One destination, not one per
// candidate: at a large M each is hundreds of MB (16,384 x 3,072 f32
// values are 200 MB), and a tuning tries a dozen candidates.
type outputs[O any] struct {
	make  func() O
	reset func(O)
	d     O
	made  bool
	seen  map[string]bool
}

func (o *outputs[O]) get(name string) O {
	if o.seen[name] {
		return o.d
	}
	if o.seen == nil {
		o.seen = map[string]bool{}
	}
	o.seen[name] = true
	if !o.made {
		o.d, o.made = o.make(), true
	} else {
		o.reset(o.d)
	}
	return o.d
}

// compareRows compares a candidate's output with the reference over the
// trial's rows, n values each: ok(g, w) says whether output value g (row
// rows[q], flat) matches reference value w (row q), show how they read.
// It reports how many differ, and where the first is.
func compareRows(rows []int, n int, ok func(g, w int) bool, show func(g, w int) string) error {
	bad := 0
	var first string
	for q, i := range rows {
		for j := 0; j < n; j++ {
			if g, w := i*n+j, q*n+j; !ok(g, w) {
				if bad == 0 {
					first = fmt.Sprintf("row %d column %d: %s", i, j, show(g, w))
				}
				bad++
			}
		}
	}
	if bad > 0 {
		return fmt.Errorf("%d of %d compared values differ; first at %s", bad, len(rows)*n, first)
	}
	return nil
}

// packBytes is the memory of a packed form.
func packBytes(p any) int {
	switch p := p.(type) {
	case *kernels.PackedS8:
		return len(p.Data) + 4*len(p.ColSum)
	case *kernels.PackedF32:
		return 4 * len(p.Data)
	case *kernels.PackedBF16:
		return 2 * len(p.Data)
	}
	return 0
}

// Bytes is the memory the Linear's weights take: the compact copy (an
// int8 Linear's until its first packed form), the
// column sums, every packed form made so far (native panels and oneDNN's
// reordered copies).
func (l *Linear[G]) Bytes() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 4 * len(l.colSum)
	switch w := l.w.(type) {
	case []int8:
		n += len(w)
	case []float32:
		n += 4 * len(w)
	}
	for _, e := range l.packs {
		n += packBytes(e.p)
	}
	for _, d := range l.dw {
		n += d.w.Size() + 4*len(d.scales)
	}
	return n
}
