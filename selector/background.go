package selector

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/int8bert/int8bert/cpu"
)

// This file is the background tuner of Options.Tuning = TuneBackground
// (docs/DESIGN.md section 4.8): until a key is tuned, its calls run a
// default candidate, the highest-ranked one for this CPU that passes a
// quick check against the reference; one goroutine tunes the queued keys
// one at a time (under tuneMu, like every tuning), and each result
// replaces its default when done.

// background is the tuner's state; its fields but wg, ctx and stop are
// guarded by Selector.mu.
type background struct {
	ctx  context.Context
	stop context.CancelFunc
	wg   sync.WaitGroup

	queue []Key // keys waiting, first come first tuned
	// prechecks are keys whose defaults' quick checks are to run ahead
	// of their first call (Precheck), before the queue's tunings.
	prechecks []Key
	queued    map[string]bool    // keys ever queued (a failed tuning is not retried)
	byKey     map[string]*Choice // the default choice of each key not yet tuned
	busy      bool               // the goroutine is running
	idle      chan struct{}      // closed when the running goroutine ends

	// checked holds, per key with M set to checkRows, the candidates of
	// the best ISA rank that passed the quick check (or the error of
	// none).
	checked    map[string]checkedDefault
	checkMu    sync.Mutex // one quick check at a time
	defaults   atomic.Int64
	checks     atomic.Int64 // quick checks run on a call (Stats.Checks)
	prechecked atomic.Int64 // quick checks run ahead (Stats.Prechecks)

	// Requests in flight (BeginRequest, EndRequest): the tuner's timed
	// work waits for none (yieldToRequests).
	reqMu    sync.Mutex
	requests int           // passes in flight
	quiet    chan struct{} // closed while requests == 0
	lastEnd  time.Time     // when requests last fell to 0
	yields   atomic.Int64  // waits of the tuner for requests (Stats.Yields)
	starved  atomic.Int64  // units run beside requests after yieldMaxShare
	begun    atomic.Int64  // BeginRequest calls, to tell a unit a request interrupted
	retimed  atomic.Int64  // units timed again after a request interrupted them (Stats.Retimed)

	tunerSlot atomic.Bool // the tuner holds a GOMAXPROCS slot (enterBackground)

	prioMu   sync.Mutex
	priority string // what the background work last ran at (Stats.TunerPriority)
}

type checkedDefault struct {
	passed []candidate
	err    error
}

func (b *background) init() {
	b.ctx, b.stop = context.WithCancel(context.Background())
	b.queued = map[string]bool{}
	b.byKey = map[string]*Choice{}
	b.checked = map[string]checkedDefault{}
	b.quiet = make(chan struct{})
	close(b.quiet)
}

// BeginRequest marks a request (a forward pass) in flight until its
// EndRequest; every BeginRequest must be paired with one EndRequest. The
// background tuner (TuneBackground) runs its timed work and its packing
// only while no request is in flight (docs/DESIGN.md section 4.8), so
// that a tuning does not take a request's core, its caches or its memory
// bandwidth; under a load that never pauses it still runs, a small share
// of the time. Passes nest: a request is in flight until every
// BeginRequest has ended.
func (s *Selector) BeginRequest() {
	b := &s.bg
	b.begun.Add(1)
	b.reqMu.Lock()
	if b.requests == 0 {
		b.quiet = make(chan struct{})
	}
	b.requests++
	b.reqMu.Unlock()
}

// EndRequest ends a request that BeginRequest began.
func (s *Selector) EndRequest() {
	b := &s.bg
	b.reqMu.Lock()
	if b.requests > 0 {
		b.requests--
		if b.requests == 0 {
			b.lastEnd = time.Now()
			close(b.quiet)
		}
	}
	b.reqMu.Unlock()
}

// inFlight returns the requests in flight now.
func (s *Selector) inFlight() int {
	s.bg.reqMu.Lock()
	defer s.bg.reqMu.Unlock()
	return s.bg.requests
}

// The tuner yields to requests: it starts a unit of work (a candidate's
// run or repetition, a packing) once no request has been in flight for
// yieldGrace (back-to-back requests leave gaps of microseconds between
// them), or, starved, after waiting yieldMaxShare times its previous
// unit (within yieldMinWait and yieldMaxWait), so that it takes at most
// about a tenth of the time of a load that never pauses and its tunings
// still end.
const (
	yieldGrace    = time.Millisecond
	yieldMaxShare = 9
	yieldMinWait  = 5 * time.Millisecond
	yieldMaxWait  = 250 * time.Millisecond
)

// tunerCtx marks the background tuner's context, its value the tuner's
// *backgroundThread: only its work yields.
type tunerCtx struct{}

// yielder is a tuning's state of yielding: when its previous unit began.
type yielder struct {
	on     bool
	locked bool // the tuner's goroutine is locked to its thread
	last   time.Time
}

// newYielder returns the yielder of a tuning under ctx: on for the
// background tuner's, off (yielding nothing) for a caller's own tuning
// (a warm-up's Tune, a synchronous first call).
func (s *Selector) newYielder(ctx context.Context) *yielder {
	t, on := ctx.Value(tunerCtx{}).(*backgroundThread)
	return &yielder{on: on, locked: on && t.locked}
}

// wait returns once the tuner may start its next unit (yieldToRequests),
// or ctx's error.
func (y *yielder) wait(ctx context.Context, s *Selector) error {
	if !y.on {
		return ctx.Err()
	}
	var unit time.Duration
	if !y.last.IsZero() {
		unit = time.Since(y.last)
	}
	err := s.yieldToRequests(ctx, unit)
	y.last = time.Now()
	return err
}

// yieldToRequests waits until no request has been in flight for
// yieldGrace, or for at most yieldMaxShare times unit (the tuner's
// previous unit of work) within yieldMinWait and yieldMaxWait, or until
// ctx is done.
func (s *Selector) yieldToRequests(ctx context.Context, unit time.Duration) error {
	b := &s.bg
	var deadline *time.Timer
	waited := false
	defer func() {
		if deadline != nil {
			deadline.Stop()
		}
	}()
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		b.reqMu.Lock()
		n, quiet, since := b.requests, b.quiet, time.Since(b.lastEnd)
		b.reqMu.Unlock()
		if n == 0 && since >= yieldGrace {
			return nil
		}
		if !waited {
			waited = true
			b.yields.Add(1)
			deadline = time.NewTimer(min(max(yieldMaxShare*unit, yieldMinWait), yieldMaxWait))
		}
		if n == 0 {
			// Quiet, but not for long: wait out the grace, unless the
			// deadline comes first.
			t := time.NewTimer(yieldGrace - since)
			select {
			case <-t.C:
			case <-deadline.C:
				t.Stop()
				b.starved.Add(1)
				return nil
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			}
			continue
		}
		select {
		case <-quiet:
		case <-deadline.C:
			b.starved.Add(1)
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// cancel stops the tuner; the caller holds Selector.mu and then waits on
// wg.
func (b *background) cancel() { b.stop() }

// enqueue queues key for the background tuner, once, and starts the
// tuner's goroutine when it is not running.
func (s *Selector) enqueue(key Key) {
	ks := key.String()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.bg.queued[ks] {
		return
	}
	s.bg.queued[ks] = true
	s.bg.queue = append(s.bg.queue, key)
	s.startTunerLocked()
}

// startTunerLocked starts the tuner's goroutine when it is not running;
// the caller holds s.mu.
func (s *Selector) startTunerLocked() {
	if !s.bg.busy {
		s.bg.busy = true
		s.bg.idle = make(chan struct{})
		s.bg.wg.Add(1)
		go s.tuneQueued(s.bg.idle)
	}
}

// Precheck queues, with TuneBackground, the quick checks of the defaults
// of keys (one per operation, K, N, epilogue and threads: quickCheck) for
// the background tuner, which runs them before its tunings and, as those,
// only while no request is in flight (yieldToRequests). A key whose check
// has run, or that is tuned, costs nothing. A model calls it at load with
// the keys of every length it may meet (docs/DESIGN.md section 4.12), so
// that a call of a new length class finds its defaults checked instead
// of checking them itself. Invalid keys are skipped; with TuneSync it
// does nothing.
func (s *Selector) Precheck(keys []Key) {
	if s.opts.Tuning != TuneBackground {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	n := len(s.bg.prechecks)
	for _, k := range keys {
		if k.Validate() == nil && s.byOp[k.Op] != nil {
			s.bg.prechecks = append(s.bg.prechecks, k)
		}
	}
	if len(s.bg.prechecks) > n {
		s.startTunerLocked()
	}
}

// precheck runs the quick check of key's default, unless it has run or
// key is tuned or cached.
func (s *Selector) precheck(key Key) {
	ks := key.String()
	s.mu.Lock()
	_, tuned := s.choices[ks]
	_, cached := s.cached[ks]
	s.mu.Unlock()
	if tuned || cached {
		return
	}
	ck := key
	ck.M = checkRows
	cks := ck.String()
	s.bg.checkMu.Lock()
	_, done := s.bg.checked[cks]
	s.bg.checkMu.Unlock()
	if done {
		return
	}
	// The check runs without checkMu, so that a call that needs another
	// default's check does not wait for it (a call that needs this one
	// checks it too, and the first result stays).
	var d checkedDefault
	d.passed, d.err = s.quickCheck(s.byOp[key.Op], ck)
	s.bg.checkMu.Lock()
	if _, ok := s.bg.checked[cks]; !ok {
		s.bg.checked[cks] = d
		s.bg.prechecked.Add(1)
	}
	s.bg.checkMu.Unlock()
}

// tuneQueued tunes the queued keys one by one until the queue is empty or
// the selector closes.
func (s *Selector) tuneQueued(idle chan struct{}) {
	defer s.bg.wg.Done()
	// The tuner's thread runs at the lowest priority (enterBackground)
	// and ends with this goroutine.
	bt := s.enterBackgroundAs(&s.bg.tunerSlot)
	defer bt.leave()
	ctx := context.WithValue(s.bg.ctx, tunerCtx{}, bt)
	y := s.newYielder(ctx)
	for {
		s.mu.Lock()
		if s.closed || len(s.bg.queue) == 0 && len(s.bg.prechecks) == 0 {
			s.bg.busy = false
			s.bg.queue, s.bg.prechecks = nil, nil
			bt.leave() // before idle: WaitTuned's return finds the slot given back
			close(idle)
			s.mu.Unlock()
			return
		}
		if len(s.bg.prechecks) > 0 {
			key := s.bg.prechecks[0]
			s.bg.prechecks = s.bg.prechecks[1:]
			s.mu.Unlock()
			if y.wait(ctx, s) == nil {
				s.precheck(key)
			}
			continue
		}
		key := s.bg.queue[0]
		s.bg.queue = s.bg.queue[1:]
		s.mu.Unlock()
		// A failure leaves the default in place: it passed its check, and
		// the key is not queued again. The error is a note, but not for a
		// tuning stopped by Close.
		if _, err := s.get(ctx, key, true); err != nil && s.bg.ctx.Err() == nil {
			s.opts.Warn(fmt.Sprintf("background tuning: %v; the default kernel stays", err))
		}
	}
}

// WaitTuned waits until the background tuner has tuned every key queued
// so far (at once with TuneSync), or ctx is done.
func (s *Selector) WaitTuned(ctx context.Context) error {
	for {
		s.mu.Lock()
		busy, idle := s.bg.busy, s.bg.idle
		s.mu.Unlock()
		if !busy {
			return nil
		}
		select {
		case <-idle:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// checkRows is the M a default's quick check runs: a full tile and a
// partial one of every kernel's row tile (15 = 12+3 = 2x6+3 = 8+7 = 14+1
// = 3x4+3), few enough that the reference of a BERT-large FFN costs
// milliseconds.
const checkRows = 15

// defaultFor returns the default choice of an untuned key: the first
// candidate, in rank order at the key's M (rankCandidates), that takes
// the key and passed the reference check on a problem of the key's K, N,
// epilogue and threads with checkRows rows (quickCheck). The check is made once per such problem, so the row
// classes of one linear share it: a request that meets a new class after
// the first pays a map lookup, not a check (the check's problem and
// reference cost about 0.1 s on a BERT-base FFN).
func (s *Selector) defaultFor(key Key) (*Choice, error) {
	ks := key.String()
	s.mu.Lock()
	if ch, ok := s.bg.byKey[ks]; ok {
		s.mu.Unlock()
		return ch, nil
	}
	s.mu.Unlock()
	ck := key
	ck.M = checkRows
	o := s.byOp[key.Op]
	s.bg.checkMu.Lock()
	d, ok := s.bg.checked[ck.String()]
	if !ok {
		s.bg.checks.Add(1)
		d.passed, d.err = s.quickCheck(o, ck)
		s.bg.checked[ck.String()] = d
	}
	s.bg.checkMu.Unlock()
	if d.err != nil {
		return nil, fmt.Errorf("selector: default for %v: %w", key, d.err)
	}
	// The passed candidate of least cost at this key's M and N (rankCandidates).
	var c candidate
	var alts []string
	for _, p := range rankCandidates(d.passed, key) {
		if p.decline(key) != nil {
			continue
		}
		if c == nil {
			c = p
		} else {
			alts = append(alts, p.name())
		}
	}
	if c == nil {
		// The check's M takes them and this M does not: tune.
		return nil, fmt.Errorf("selector: no default for %v: the checked candidates decline it", key)
	}
	ch := &Choice{Key: ks, Kernel: c.name(), Backend: c.backend(), ISA: c.isa(), Forced: s.forcedOn(key.Op), Default: true, alts: alts}
	for _, g := range o.candidates() {
		if g.isa() == cpu.ISAGeneric && g.name() != c.name() {
			ch.fallback = append(ch.fallback, g.name())
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if got, ok := s.choices[ks]; ok { // tuned meanwhile
		return got, nil
	}
	if got, ok := s.bg.byKey[ks]; ok {
		return got, nil
	}
	s.bg.byKey[ks] = ch
	s.bg.defaults.Add(1)
	return ch, nil
}

// quickCheck returns the candidates of o that take ck and compute its
// problem as the reference does, of the best ISA rank that has any: the
// candidates are checked in rank order and the check stops at the first
// lower rank once one passed, so that the row classes of the problem
// choose among them by their M.
func (s *Selector) quickCheck(o operation, ck Key) ([]candidate, error) {
	tr, err := o.newTrial(s, ck)
	if err != nil {
		return nil, err
	}
	defer tr.close()
	var why []string
	var passed []candidate
	rank := -1
	for _, c := range rankCandidates(o.candidates(), ck) {
		r := rankISA(c.isa(), ck.Op)
		if len(passed) > 0 && r < rank {
			break
		}
		if err := c.decline(ck); err != nil {
			why = append(why, fmt.Sprintf("%s: %v", c.name(), err))
			continue
		}
		if err := tr.exec(c); err != nil {
			why = append(why, fmt.Sprintf("%s: failed: %v", c.name(), err))
			continue
		}
		if err := tr.verify(c); err != nil {
			why = append(why, fmt.Sprintf("%s: differs from the reference: %v", c.name(), err))
			continue
		}
		passed, rank = append(passed, c), r
	}
	if len(passed) == 0 {
		return nil, fmt.Errorf("no candidate passed the quick check (%v): %w", why, ErrNoCandidate)
	}
	return passed, nil
}

// isaRank orders ISAs for a default: the widest native path first, then
// oneDNN (whose primitives take milliseconds to make for each new M),
// then the generic kernels. The project's kernels beat oneDNN's matmul on
// every shape measured (docs/PERFORMANCE.md).
var isaRank = map[cpu.ISA]int{
	cpu.ISAAMX:        7,
	cpu.ISAAMXBF16:    7,
	cpu.ISAAVX512VNNI: 6,
	cpu.ISAAVX512BF16: 6,
	cpu.ISAAVX512:     6,
	cpu.ISAAVXVNNI:    5,
	cpu.ISAAVX2:       4,
	OneDNN:            2,
	cpu.ISAGeneric:    0,
}

// rankISA is the rank of a candidate of ISA isa for operation op, higher
// first (isaRank, with the avx512 u8 x s8 kernel between AVX-VNNI and
// AVX2, and unknown ISAs between AVX2 and oneDNN): the order of defaults,
// and of the INT8 tiers' kernels (DescribeInt8).
func rankISA(isa cpu.ISA, op string) int {
	if isa == cpu.ISAAVX512 && op == OpU8S8 {
		return 2*isaRank[cpu.ISAAVX2] + 1
	}
	if r, ok := isaRank[isa]; ok {
		return 2 * r
	}
	return 7
}

// rankCandidates orders cs for a default of key: by ISA rank (unknown
// ISAs, such as the tests' own kernels, between AVX2 and oneDNN; an avx512 u8 x s8
// kernel, the int16 scheme without VNNI, between AVX-VNNI and AVX2, since
// VPDPBUSD does 32 multiply-adds per ymm instruction as VPMADDWD does per
// zmm one, without the VPADDD), then, within an ISA, by the cost model of
// tileCost (the work of the key's M and N in the kernel's register tiles,
// padding included), then the larger tile; ties keep the candidates'
// order.
func rankCandidates(cs []candidate, key Key) []candidate {
	out := append([]candidate(nil), cs...)
	rank := func(c candidate) int { return rankISA(c.isa(), key.Op) }
	cost := func(c candidate) float64 {
		mr, nr := tileOf(c)
		return tileCost(key.M, key.N, mr, nr)
	}
	area := func(c candidate) int {
		mr, nr := tileOf(c)
		return mr * nr
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if ra, rb := rank(a), rank(b); ra != rb {
			return ra > rb
		}
		if ca, cb := cost(a), cost(b); ca != cb {
			return ca < cb
		}
		return area(a) > area(b)
	})
	return out
}

// tileCost is the default's cost model of m x n outputs on a kernel of
// mr x nr register tiles (docs/DESIGN.md section 4.8): the rows as the
// row model counts them (tileRows: a partial tile of rows costs half a
// tile and its share of the other half) times the columns padded to whole
// panels of nr (a partial panel computes, and streams, a full one). The
// kernels of one ISA fill the same registers, so that the work computed,
// padding included, orders them; a candidate without a tile (oneDNN) or an
// unknown n counts the exact rows or columns.
func tileCost(m, n, mr, nr int) float64 {
	rows := float64(m)
	if mr > 0 {
		rows = tileRows(m, mr) * float64(mr)
	}
	cols := float64(max(n, 1))
	if nr > 0 && n > 0 {
		cols = float64((n + nr - 1) / nr * nr)
	}
	return rows * cols
}

// tileOf is a native candidate's register tile (0, 0 for oneDNN).
func tileOf(c candidate) (mr, nr int) {
	type tiled interface{ tile() (int, int) }
	if t, ok := c.(tiled); ok {
		return t.tile()
	}
	return 0, 0
}

// runOrder is the candidates a call of the choice may run, in order: the
// choice, the other measured ones fastest first, then the fallback.
func (c *Choice) runOrder() []string {
	names := make([]string, 0, 1+len(c.Measured)+len(c.fallback))
	names = append(names, c.Kernel)
	for _, m := range c.Measured {
		names = append(names, m.Kernel)
	}
	return append(names, c.fallback...)
}
