package selector

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"

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

	queue  []Key              // keys waiting, first come first tuned
	queued map[string]bool    // keys ever queued (a failed tuning is not retried)
	byKey  map[string]*Choice // the default choice of each key not yet tuned
	busy   bool               // the goroutine is running
	idle   chan struct{}      // closed when the running goroutine ends

	// checked holds, per key with M set to checkRows, the candidates of
	// the best ISA rank that passed the quick check (or the error of
	// none).
	checked  map[string]checkedDefault
	checkMu  sync.Mutex // one quick check at a time
	defaults atomic.Int64
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
	if !s.bg.busy {
		s.bg.busy = true
		s.bg.idle = make(chan struct{})
		s.bg.wg.Add(1)
		go s.tuneQueued(s.bg.idle)
	}
}

// tuneQueued tunes the queued keys one by one until the queue is empty or
// the selector closes.
func (s *Selector) tuneQueued(idle chan struct{}) {
	defer s.bg.wg.Done()
	for {
		s.mu.Lock()
		if s.closed || len(s.bg.queue) == 0 {
			s.bg.busy = false
			s.bg.queue = nil
			close(idle)
			s.mu.Unlock()
			return
		}
		key := s.bg.queue[0]
		s.bg.queue = s.bg.queue[1:]
		s.mu.Unlock()
		// A failure leaves the default in place: it passed its check, and
		// the key is not queued again. The error is a note, but not for a
		// tuning stopped by Close.
		if _, err := s.get(s.bg.ctx, key, true); err != nil && s.bg.ctx.Err() == nil {
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
		d.passed, d.err = s.quickCheck(o, ck)
		s.bg.checked[ck.String()] = d
	}
	s.bg.checkMu.Unlock()
	if d.err != nil {
		return nil, fmt.Errorf("selector: default for %v: %w", key, d.err)
	}
	// The passed candidate of least waste at this key's M (rankCandidates).
	var c candidate
	for _, p := range rankCandidates(d.passed, key) {
		if p.decline(key) == nil {
			c = p
			break
		}
	}
	if c == nil {
		// The check's M takes them and this M does not: tune.
		return nil, fmt.Errorf("selector: no default for %v: the checked candidates decline it", key)
	}
	ch := &Choice{Key: ks, Kernel: c.name(), Backend: c.backend(), ISA: c.isa(), Forced: s.forcedOn(key.Op), Default: true}
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
// zmm one, without the VPADDD), then, within an ISA,
// the kernel whose row tile wastes the least of the key's M, then the
// larger tile; ties keep the candidates' order.
func rankCandidates(cs []candidate, key Key) []candidate {
	out := append([]candidate(nil), cs...)
	rank := func(c candidate) int { return rankISA(c.isa(), key.Op) }
	waste := func(c candidate) float64 {
		mr, _ := tileOf(c)
		if mr <= 0 {
			return 0
		}
		tiles := (key.M + mr - 1) / mr
		return float64(tiles*mr-key.M) / float64(tiles*mr)
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
		if wa, wb := waste(a), waste(b); wa != wb {
			return wa < wb
		}
		return area(a) > area(b)
	})
	return out
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
