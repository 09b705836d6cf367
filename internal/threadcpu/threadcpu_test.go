package threadcpu_test

import (
	"runtime"
	"testing"
	"time"

	"github.com/int8bert/int8bert/internal/threadcpu"
)

// TestNowCountsWork: a thread's CPU time grows while it works (a spin
// reaches 20 ms of it within 5 s of wall time), never faster than the
// wall clock, and not while it sleeps.
func TestNowCountsWork(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	start, ok := threadcpu.Now()
	if !ok {
		t.Skip("TestNowCountsWork: this OS gives no thread CPU time")
	}
	wall := time.Now()
	var spun time.Duration
	for spun-start < 20*time.Millisecond {
		if time.Since(wall) > 5*time.Second {
			t.Fatalf("5 s of spinning counted %v of thread CPU time", spun-start)
		}
		spun, _ = threadcpu.Now()
	}
	if took := time.Since(wall); spun-start > took {
		t.Errorf("%v of wall time counted %v of thread CPU time", took, spun-start)
	}
	time.Sleep(20 * time.Millisecond)
	slept, _ := threadcpu.Now()
	if d := slept - spun; d > 10*time.Millisecond {
		t.Errorf("a 20 ms sleep counted %v of thread CPU time", d)
	}
}
