package selector

import (
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/int8bert/int8bert/internal/threadcpu"
)

// The background tuner and its packings run on OS threads of the lowest
// CPU priority the OS offers (docs/DESIGN.md section 4.12): a goroutine
// of background work locks itself to its thread, lowers that thread
// (Linux: SCHED_IDLE, else nice 19) and runs on a GOMAXPROCS slot of its
// own, so that a request's thread, runnable, always takes the core from
// it at once, in the OS's scheduler and in Go's. The thread is never
// raised again: the goroutine ends locked, and Go ends the thread with
// it (a thread an unprivileged process lowered cannot be raised back,
// and threads it started, such as OpenMP's, would keep its priority).

// TunerPriority values (Options.TunerPriority, $INT8BERT_TUNER_PRIORITY).
const (
	// TunerIdle runs the background work at the lowest priority the OS
	// offers, on a GOMAXPROCS slot of its own (the default).
	TunerIdle = "idle"
	// TunerNormal runs it as any goroutine.
	TunerNormal = "normal"
)

// tunerPriority resolves Options.TunerPriority: "" means
// $INT8BERT_TUNER_PRIORITY, else TunerIdle.
func tunerPriority(p string) string {
	if p == "" {
		p = os.Getenv("INT8BERT_TUNER_PRIORITY")
	}
	if p == "" {
		return TunerIdle
	}
	return p
}

// backgroundThread is a background goroutine's hold on its thread.
type backgroundThread struct {
	lowered bool         // the thread runs at the lowered priority, on its own slot
	locked  bool         // the goroutine is locked to its thread
	left    bool         // leave ran
	held    *atomic.Bool // set while the slot is held, for the tuner's (tests)
}

// enterBackground locks the calling goroutine, which must end after
// leave, to its thread and, with TunerIdle, lowers the thread's priority
// and adds a GOMAXPROCS slot while it runs. It records in s what the
// background work runs at (Stats.TunerPriority).
func (s *Selector) enterBackground() *backgroundThread { return s.enterBackgroundAs(nil) }

// enterBackgroundAs is enterBackground, held (when not nil) set while the
// slot is held.
func (s *Selector) enterBackgroundAs(held *atomic.Bool) *backgroundThread {
	t := &backgroundThread{held: held}
	if s.opts.TunerPriority != TunerIdle {
		s.setTunerPriority("normal (TunerPriority " + s.opts.TunerPriority + ")")
		return t
	}
	runtime.LockOSThread()
	t.locked = true
	how, err := lowerThreadPriority()
	if err != nil {
		// The thread is as it was: nothing to end with the goroutine.
		runtime.UnlockOSThread()
		t.locked = false
		s.setTunerPriority("normal (" + err.Error() + ")")
		return t
	}
	t.lowered = true
	acquireSlot()
	if held != nil {
		held.Store(true)
	}
	s.setTunerPriority(how)
	return t
}

// leave gives the slot back. A lowered thread stays locked, so that it
// ends with its goroutine, which the caller then ends.
func (t *backgroundThread) leave() {
	if t.lowered && !t.left {
		if t.held != nil {
			t.held.Store(false)
		}
		releaseSlot()
	}
	t.left = true
}

// setTunerPriority records what the background work last ran at.
func (s *Selector) setTunerPriority(how string) {
	s.bg.prioMu.Lock()
	s.bg.priority = how
	s.bg.prioMu.Unlock()
}

// slots is the process's one extra GOMAXPROCS slot, shared by every
// background goroutine at lowered priority: with GOMAXPROCS at the cores
// (one for a process pinned to one core), a background goroutine holding
// a slot would keep a request's goroutine from running until Go's
// scheduler preempted it (about 10 ms), whatever its thread's priority.
// With a slot more than the cores, both run, and the OS gives the core to
// the request's thread.
var slots struct {
	mu   sync.Mutex
	n    int // holders
	base int // GOMAXPROCS before the first holder
}

func acquireSlot() {
	slots.mu.Lock()
	defer slots.mu.Unlock()
	if slots.n == 0 {
		slots.base = runtime.GOMAXPROCS(0)
		runtime.GOMAXPROCS(slots.base + 1)
	}
	slots.n++
}

// releaseSlot gives the slot back when its last holder leaves, unless
// someone else changed GOMAXPROCS meanwhile. Where GOMAXPROCS is not set
// in the environment, the runtime's own default (which follows the CPU
// limit) is restored, else the value before.
func releaseSlot() {
	slots.mu.Lock()
	defer slots.mu.Unlock()
	slots.n--
	if slots.n > 0 || runtime.GOMAXPROCS(0) != slots.base+1 {
		return
	}
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.SetDefaultGOMAXPROCS()
		if runtime.GOMAXPROCS(0) == slots.base {
			return
		}
	}
	runtime.GOMAXPROCS(slots.base)
}

// unitClock times a unit of background work: in the thread's CPU time
// where the work runs on the calling thread alone (a key of one thread,
// on a locked thread), so that a request or another process that takes
// the core from a lowered tuner does not inflate the time it records;
// else in wall time, and a unit during which a request began is timed
// again (unitRetries), its least time kept.
type unitClock struct {
	s   *Selector
	cpu bool
	on  bool // the background tuner's unit (yielding); else plain wall time
}

// unitRetries is how many times a wall-timed background unit that a
// request interrupted is timed again.
const unitRetries = 2

func (s *Selector) newUnitClock(y *yielder, key Key) *unitClock {
	c := &unitClock{s: s, on: y.on}
	if y.on && y.locked && key.Threads == 1 {
		if _, ok := threadcpu.Now(); ok {
			c.cpu = true
		}
	}
	return c
}

// time runs f and returns its time, as unitClock says.
func (c *unitClock) time(f func() error) (time.Duration, error) {
	if c.cpu {
		c0, _ := threadcpu.Now()
		err := f()
		c1, _ := threadcpu.Now()
		return max(c1-c0, 1), err
	}
	var best time.Duration
	for try := 0; ; try++ {
		e0 := c.s.bg.begun.Load()
		t0 := time.Now()
		err := f()
		d := time.Since(t0)
		if try == 0 || d < best {
			best = d
		}
		if err != nil || !c.on || try == unitRetries || c.s.bg.begun.Load() == e0 && c.s.inFlight() == 0 {
			return best, err
		}
		c.s.bg.retimed.Add(1)
	}
}
