package kernels

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestParallelConcurrentCalls runs Parallel from several goroutines at
// once, with calls nested in tasks, and wants every task run once.
func TestParallelConcurrentCalls(t *testing.T) {
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for it := range 50 {
				threads, tasks := 2+(g+it)%3, 1+(g*7+it)%13
				seen := make([]atomic.Int32, tasks*3)
				Parallel(threads, tasks, func(i int) {
					Parallel(2, 3, func(j int) { seen[i*3+j].Add(1) })
				})
				for i := range seen {
					if n := seen[i].Load(); n != 1 {
						t.Errorf("goroutine %d, call %d (threads %d, tasks %d): task %d ran %d times", g, it, threads, tasks, i, n)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
}

// TestParallelReusesWorkers wants one caller's calls one after another to
// run on the workers of the first: a worker is idle again before the call
// it served returns.
func TestParallelReusesWorkers(t *testing.T) {
	var sum atomic.Int64
	Parallel(3, 3, func(i int) { sum.Add(int64(i)) })
	workers.mu.Lock()
	before := workers.started
	workers.mu.Unlock()
	for range 1000 {
		Parallel(3, 6, func(i int) { sum.Add(int64(i)) })
	}
	workers.mu.Lock()
	after := workers.started
	workers.mu.Unlock()
	if after != before {
		t.Fatalf("1000 calls of 3 threads started %d more workers, want 0", after-before)
	}
	if want := int64(3 + 1000*15); sum.Load() != want {
		t.Fatalf("sum of task indices %d, want %d", sum.Load(), want)
	}
}

// TestSpinStopsForForeign wants an idle worker or waiting caller to stop
// polling at once while a foreign runtime's threads run (ForeignEnter),
// or for spinCalm after the OS took most of the spinners' time, and to
// poll otherwise.
func TestSpinStopsForForeign(t *testing.T) {
	polls := 0
	ForeignEnter()
	ok := spin(func() bool { polls++; return false })
	ForeignExit()
	if ok || polls != 1 {
		t.Fatalf("with a foreign runtime running: spin gave %v after %d polls, want false after 1", ok, polls)
	}
	polls = 0
	calm := calmUntil.Load()
	calmUntil.Store(int64(sinceEpoch() + time.Hour))
	ok = spin(func() bool { polls++; return false })
	calmUntil.Store(calm)
	if ok || polls != 1 {
		t.Fatalf("after a spinner lost its core: spin gave %v after %d polls, want false after 1", ok, polls)
	}
	// Without either it polls on; the OS may take the core away from
	// a try (a loaded machine), not from all of fifty.
	for try := 0; ; try++ {
		calmUntil.Store(0)
		polls = 0
		if spin(func() bool { polls++; return polls == 100 }) {
			break
		}
		if try == 50 {
			t.Fatalf("without a foreign runtime: spin gave up after %d polls in 50 tries, before the condition held", polls)
		}
	}
}

// TestStealLedger wants the spinners to stop (note says true) only when
// a window of at least spinWindow of spinning closes with more than half
// of it taken by the OS, and each window weighed on its own.
func TestStealLedger(t *testing.T) {
	var l stealLedger
	spin := spinWindow / 20
	n := 20
	// A quiet machine: one gap of a whole spin in a window.
	for i := range 3 * n {
		stolen := time.Duration(0)
		if i%n == 0 {
			stolen = spin
		}
		if l.note(spin, stolen) {
			t.Fatalf("spin %d: stopped with one gap in each window of %d spins", i, n)
		}
	}
	// Oversubscribed: the OS takes three quarters of every spin; the
	// window closes at its n-th spin.
	for i := 1; i <= n; i++ {
		calm := l.note(spin, 3*spin/4)
		if calm != (i == n) {
			t.Fatalf("spin %d of a window of %d, three quarters stolen: note says %v, want %v", i, n, calm, i == n)
		}
	}
	// The next window starts empty: a quiet one does not stop.
	for i := range n {
		if l.note(spin, spin/10) {
			t.Fatalf("spin %d of the window after an oversubscribed one, a tenth stolen: stopped", i)
		}
	}
	// Exactly half is not more than half.
	for i := range n {
		if l.note(spin, spin/2) {
			t.Fatalf("spin %d of a window half stolen: stopped", i)
		}
	}
}

// BenchmarkParallelHandoff is the cost of one Parallel call whose tasks
// do nothing: the hand-off to the workers and back, on 2, 4 and 16
// threads where GOMAXPROCS has them (scripts/machine-check.sh runs it).
func BenchmarkParallelHandoff(b *testing.B) {
	var n atomic.Int64
	for _, threads := range []int{2, 4, 16} {
		if threads > runtime.GOMAXPROCS(0) {
			continue
		}
		b.Run(fmt.Sprintf("threads=%d", threads), func(b *testing.B) {
			for b.Loop() {
				Parallel(threads, threads, func(int) { n.Add(1) })
			}
		})
	}
}

// TestParallelAllocatesNothing wants a Parallel call on warm workers to
// allocate nothing of its own (its f is the caller's).
func TestParallelAllocatesNothing(t *testing.T) {
	if raceOn {
		t.Skip("the race detector's sync.Pool drops a quarter of what is put back")
	}
	var n atomic.Int64
	f := func(int) { n.Add(1) }
	Parallel(2, 4, f)
	if a := testing.AllocsPerRun(200, func() { Parallel(2, 4, f) }); a > 0 {
		t.Fatalf("Parallel(2, 4, f) allocates %.1f times a call, want 0", a)
	}
}
