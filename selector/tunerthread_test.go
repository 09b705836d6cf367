package selector

import (
	"context"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// threadSeen is the scheduling of the thread a tuning ran on, as OnTune
// (called on the tuning's goroutine) saw it.
type threadSeen struct {
	mu       sync.Mutex
	policy   uint32
	nice     int
	err      error
	procs    int
	seen     bool
	priority string
	event    string // TuneEvent.Background
	slotted  bool   // GOMAXPROCS was one more than before the slots were held
}

func (ts *threadSeen) onTune(s **Selector) func(TuneEvent) {
	return func(ev TuneEvent) {
		if ev.Done {
			return
		}
		p, n, err := threadPolicy(0) // 0: the calling thread
		ts.mu.Lock()
		defer ts.mu.Unlock()
		ts.policy, ts.nice, ts.err, ts.procs, ts.seen = p, n, err, runtime.GOMAXPROCS(0), true
		ts.priority = (*s).Stats().TunerPriority
		ts.event = ev.Background
		slots.mu.Lock()
		ts.slotted = slots.n > 0 && ts.procs == slots.base+1
		slots.mu.Unlock()
	}
}

// tunedInBackground makes a selector that tunes in the background with
// its tuner at priority, runs a linear on a default (its key queued) and
// waits for the tuner; seen holds the scheduling of the tuner's thread.
func tunedInBackground(t *testing.T, priority string) (s *Selector, seen *threadSeen, w *warnings, o Options) {
	t.Helper()
	w, seen = new(warnings), new(threadSeen)
	o = testOptions(t, w)
	o.Tuning = TuneBackground
	o.TunerPriority = priority
	o.OnTune = seen.onTune(&s)
	s = newSelector(t, o)
	p := newProblem(t, 5, 9, 64, 32, "none/s32", 0)
	l, err := s.NewLinear(p.n, p.k, p.w, p.k)
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	runOn(t, l, p) // a default; the key is queued
	require.NoError(t, s.WaitTuned(context.Background()))
	return s, seen, w, o
}

// TestTunerThreadPriority checks that the background tuner runs on a
// thread of the lowest priority the OS gives (SCHED_IDLE, else nice 19),
// on a GOMAXPROCS slot of its own that it gives back when the queue is
// done, and that the thread the test runs on, and a tuning a caller runs
// itself, keep their priority. Where the OS refuses both, it says so
// by name.
func TestTunerThreadPriority(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skipf("thread priorities are set on Linux only, not %s: the tuner runs at normal priority there", runtime.GOOS)
	}
	// This thread's scheduling, which a caller's own tuning keeps (the
	// test may run under nice).
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	pol, nice, err := threadPolicy(0)
	require.NoError(t, err)
	s, seen, w, _ := tunedInBackground(t, TunerIdle)

	seen.mu.Lock()
	defer seen.mu.Unlock()
	require.True(t, seen.seen, "the background tuner ran a tuning")
	require.NoError(t, seen.err, "sched_getattr on the tuner's thread")
	if strings.HasPrefix(seen.priority, "normal") {
		t.Skipf("the OS refused to lower the tuner's thread (%s): nothing to check here", seen.priority)
	}
	const schedIdle = 5
	if strings.HasPrefix(seen.priority, "idle") {
		assert.Equal(t, uint32(schedIdle), seen.policy, "the tuner's thread is SCHED_IDLE (%s)", seen.priority)
	} else {
		assert.Equal(t, 19, seen.nice, "the tuner's thread is at nice 19 (%s)", seen.priority)
	}
	assert.True(t, seen.slotted, "the tuner has a GOMAXPROCS slot of its own while it runs (%d)", seen.procs)
	assert.False(t, s.bg.tunerSlot.Load(), "the tuner gave its slot back once the queue was done")
	assert.Equal(t, seen.priority, s.Stats().TunerPriority)
	assert.Equal(t, seen.priority, seen.event, "OnTune hears what the tuner runs at")

	// This thread, and a caller's own tuning on it, keep theirs.
	pol2, nice2, err := threadPolicy(0)
	require.NoError(t, err)
	assert.Equal(t, pol, pol2)
	assert.Equal(t, nice, nice2)
	seen.seen = false
	seen.mu.Unlock()
	_, err = s.Tune(context.Background(), mustKey(t, 3, 32, 32, "none/s32", 1))
	seen.mu.Lock()
	require.NoError(t, err)
	require.True(t, seen.seen)
	assert.Equal(t, pol, seen.policy, "a caller's own tuning runs at the caller's priority")
	assert.Empty(t, seen.event, "a caller's own tuning is not the background's")
	assert.Equal(t, nice, seen.nice)
	assert.Empty(t, w.String())
}

// TestTunerPriorityNormal checks that TunerNormal leaves the tuner's
// thread and GOMAXPROCS alone, and that an unknown priority is an error.
func TestTunerPriorityNormal(t *testing.T) {
	s, seen, _, o := tunedInBackground(t, TunerNormal)
	seen.mu.Lock()
	defer seen.mu.Unlock()
	require.True(t, seen.seen)
	assert.False(t, s.bg.tunerSlot.Load(), "no slot held")
	assert.True(t, strings.HasPrefix(seen.priority, "normal"), seen.priority)
	if runtime.GOOS == "linux" {
		require.NoError(t, seen.err)
		assert.NotEqual(t, uint32(5), seen.policy)
	}

	o.TunerPriority = "lowest"
	_, err := New(o)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "want idle or normal")
}
