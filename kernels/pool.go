package kernels

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Parallel runs f(0) ... f(tasks-1) on at most threads goroutines of a
// fixed, process-wide pool and returns when all are done. With threads <= 1
// or one task it runs them in order on the calling goroutine, so a
// single-threaded GEMM costs exactly the single-threaded kernel.
//
// The calling goroutine is one of the threads: it hands the call to
// threads-1 workers and then takes tasks itself. Tasks are taken one at a
// time from an atomic counter, so a thread the machine delays leaves its
// share to the others. A worker that finished a call waits for the next
// one spinning for up to poolSpin before it parks (docs/DESIGN.md section
// 2.4): the steps of a pass follow each other within microseconds, and
// waking a parked goroutine on another core costs tens of them, so a pass
// of a hundred pool calls would otherwise lose milliseconds to hand-offs.
// No worker spins while a foreign runtime's threads (oneDNN's OpenMP,
// ForeignEnter) run, nor while the pool's callers and unparked workers
// outnumber GOMAXPROCS (a spinning worker would hold a P that another
// one needs), nor longer than poolSpin after its last call.
//
// The pool never holds more workers than requested by the largest call, so
// the kernels and oneDNN's OpenMP threads (set per call in package dnnl) can
// be sized together to the cores without oversubscribing them. Parallel
// allocates nothing itself.
func Parallel(threads, tasks int, f func(task int)) {
	if tasks <= 0 {
		return
	}
	if threads <= 1 || tasks == 1 {
		for i := 0; i < tasks; i++ {
			f(i)
		}
		return
	}
	threads = min(threads, tasks)
	busy.Add(1)
	defer busy.Add(-1)
	c := calls.Get().(*call)
	c.f, c.tasks = f, int64(tasks)
	c.next.Store(0)
	c.pending.Store(int32(threads - 1))
	c.state.Store(callRunning)
	for w := 0; w < threads-1; w++ {
		workers.submit(c)
	}
	c.run()
	c.wait()
	c.f = nil
	calls.Put(c)
}

// poolSpin is how long an idle worker, or a caller waiting for its
// workers, polls before it parks: longer than a task of a pass's pool
// calls (a linear's block, ~50-150 us at BERT-base seq 128) plus the
// serial work between two calls, so that a worker that finished its
// share of one call is still polling when the caller's next call comes.
const poolSpin = 200 * time.Microsecond

// foreign counts the calls into a runtime with threads of its own
// (oneDNN's OpenMP) in flight: while it is positive no worker spins.
var foreign atomic.Int32

// busy counts the goroutines of the pool that want a P: the callers in
// Parallel and the workers not parked. Nothing spins while it is above
// GOMAXPROCS.
var busy atomic.Int32

// ForeignEnter says a call into a runtime with threads of its own (a
// oneDNN primitive on OpenMP) starts: until the matching ForeignExit, the
// pool's idle workers park at once instead of spinning against it.
func ForeignEnter() { foreign.Add(1) }

// ForeignExit ends what ForeignEnter began.
func ForeignExit() { foreign.Add(-1) }

// The states of a call, as its caller sees them.
const (
	callRunning int32 = iota // the caller runs tasks or spins for the workers
	callWaiting              // the caller is parked on done
	callDone                 // the last worker finished
)

// call is one Parallel call shared by its caller and workers.
type call struct {
	f       func(task int)
	tasks   int64
	next    atomic.Int64 // the next task to take
	pending atomic.Int32 // workers not yet finished
	state   atomic.Int32
	done    chan struct{} // the last worker's word to a parked caller
}

var calls = sync.Pool{New: func() any { return &call{done: make(chan struct{}, 1)} }}

// run takes and runs tasks until none is left.
func (c *call) run() {
	for t := c.next.Add(1) - 1; t < c.tasks; t = c.next.Add(1) - 1 {
		c.f(int(t))
	}
}

// finish says a worker is done with c; it does not touch c afterwards
// unless it is the last, whose word the caller waits for.
func (c *call) finish() {
	if c.pending.Add(-1) != 0 {
		return
	}
	if c.state.Swap(callDone) == callWaiting {
		c.done <- struct{}{}
	}
}

// wait returns once every worker of c has finished: spinning first, then
// parked.
func (c *call) wait() {
	if spin(func() bool { return c.state.Load() == callDone }) {
		return
	}
	if c.state.CompareAndSwap(callRunning, callWaiting) {
		<-c.done
	}
}

// spin polls ready for up to poolSpin and says whether it became true.
// It gives up at once while a foreign runtime runs or the pool's busy
// goroutines outnumber the Ps, and while the machine is oversubscribed:
// when more than half of the spinners' time over a window of spinWindow
// was lost (taken by the OS: a gap between two checks longer than
// spinStolen, where 64 polls take well under a microsecond; or spent in
// a spin that ended without its condition, as when the thread waited
// for has no core), a spinner only burns the share of the CPU that the
// work needs, and nothing spins for spinCalm. One descheduling does not stop the spinning: on a quiet
// machine the OS takes a spinner's core now and then (a timer, another
// process's slice), and parking every worker for spinCalm after each
// such gap (as before) cost a two-thread BERT-base pass of 111 pool calls
// 5-40 ms of wake-ups, most of its second thread's gain.
func spin(ready func() bool) bool {
	now := sinceEpoch()
	if now < time.Duration(calmUntil.Load()) || foreign.Load() > 0 {
		return ready()
	}
	start, last := now, now
	var stolen time.Duration
	procs := int32(runtime.GOMAXPROCS(0))
	done := func(ok bool) bool {
		spun := sinceEpoch() - start
		if !ok { // polled for nothing: the time is lost as well
			stolen = spun
		}
		if spins.note(spun, stolen) {
			calmUntil.Store(int64(sinceEpoch() + spinCalm))
		}
		return ok
	}
	for i := 0; ; i++ {
		if ready() {
			return done(true)
		}
		if i&63 == 63 {
			if foreign.Load() > 0 || busy.Load() > procs {
				return done(false)
			}
			now = sinceEpoch()
			if gap := now - last; gap > spinStolen {
				stolen += gap
			}
			if now-start > poolSpin {
				return done(false)
			}
			last = now
		}
	}
}

const (
	// spinStolen is a gap between two checks of a spin that only the OS
	// descheduling the spinner explains.
	spinStolen = 10 * time.Microsecond
	// spinWindow is the spinning time (the OS's gaps included) over
	// which the share lost is weighed: a quiet two-thread BERT-base pass
	// polls 1-3 ms in all, so a busy machine is found within a pass or
	// two.
	spinWindow = 2 * time.Millisecond
	// spinCalm is how long nothing spins after a window in which the OS
	// took most of the spinners' time.
	spinCalm = 20 * time.Millisecond
)

// spins weighs the spinners' time against what the OS took of it.
var spins stealLedger

// stealLedger sums the time spinners spun and the part of it that was
// lost, window by window: on a machine with a core for each thread the
// OS takes a spinner's core for a timer or another process's short slice
// and a worker's last spin of a pass ends without a call (a small
// share); on an oversubscribed one the OS takes it for the slices of
// every other runnable thread and the threads waited for are off their
// cores (most of it).
type stealLedger struct {
	spun, stolen atomic.Int64 // nanoseconds in the current window
}

// note adds one spin of spun, of which stolen was lost, and says
// whether that closed a window of at least spinWindow in which more than
// half was lost (then nothing should spin for spinCalm).
func (l *stealLedger) note(spun, stolen time.Duration) bool {
	s := l.stolen.Add(int64(stolen))
	t := l.spun.Add(int64(spun))
	if t < int64(spinWindow) || !l.spun.CompareAndSwap(t, 0) {
		return false
	}
	l.stolen.Add(-s)
	return 2*s > t
}

// calmUntil is the sinceEpoch time before which nothing spins.
var calmUntil atomic.Int64

var epoch = time.Now()

// sinceEpoch is monotonic time since the process's start.
func sinceEpoch() time.Duration { return time.Since(epoch) }

// The states of a worker.
const (
	workerSpinning int32 = iota // idle, polling for a call
	workerParked                // idle, blocked on wake
	workerClaimed               // a submitter gave it a call
)

// worker is one long-lived goroutine of the pool.
type worker struct {
	job   atomic.Pointer[call]
	state atomic.Int32
	wake  chan struct{}
}

// pool is the process-wide set of workers; idle holds those waiting for a
// call, the most recently idle last (the likeliest to be spinning).
type pool struct {
	mu      sync.Mutex
	idle    []*worker
	started int
}

var workers = &pool{}

// submit gives c to an idle worker, or to a new one when none is idle.
func (p *pool) submit(c *call) {
	p.mu.Lock()
	var w *worker
	if n := len(p.idle); n > 0 {
		w = p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
	} else {
		p.started++
	}
	p.mu.Unlock()
	if w == nil {
		busy.Add(1)
		w = &worker{wake: make(chan struct{}, 1)}
		w.job.Store(c)
		w.state.Store(workerClaimed)
		go p.loop(w)
		return
	}
	// The job is stored before the claim: a worker that sees its claim
	// (or fails to park because of it) finds the job.
	w.job.Store(c)
	if !w.state.CompareAndSwap(workerSpinning, workerClaimed) {
		busy.Add(1)
		w.wake <- struct{}{} // it parked
	}
}

// loop runs w's calls for ever.
func (p *pool) loop(w *worker) {
	for {
		c := w.job.Swap(nil)
		c.run()
		// Idle again before the call's caller may return: its next call
		// then finds this worker instead of starting one more.
		w.state.Store(workerSpinning)
		p.mu.Lock()
		p.idle = append(p.idle, w)
		p.mu.Unlock()
		c.finish()
		if !spin(func() bool { return w.state.Load() == workerClaimed }) &&
			w.state.CompareAndSwap(workerSpinning, workerParked) {
			busy.Add(-1)
			<-w.wake
		}
	}
}

// ParallelRows runs f over the rows [0, rows) cut into chunks of at least
// minRows rows (up to four a thread, so that a thread the machine delays
// leaves its share to the others), on at most threads goroutines of the
// pool (Parallel), and returns the error of the lowest chunk that failed,
// as one thread would. With one thread, or fewer than 2*minRows rows, it
// is f(0, rows) on the calling goroutine. f must treat its rows alone
// (the row-wise LayerNorm, quantization, elementwise steps of a pass):
// the result is then the same bits for every thread count.
func ParallelRows(threads, rows, minRows int, f func(r0, r1 int) error) error {
	minRows = max(minRows, 1)
	if threads <= 1 || rows < 2*minRows {
		return f(0, rows)
	}
	chunks := min(rows/minRows, 4*threads)
	errs := make([]error, chunks)
	Parallel(threads, chunks, func(t int) {
		errs[t] = f(rows*t/chunks, rows*(t+1)/chunks)
	})
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
