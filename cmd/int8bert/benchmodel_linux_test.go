package main

import (
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// TestBenchModelPinLeavesNoPinnedThread: bench model (--pin, the default)
// pins the thread it measures on to one CPU; the caller's thread must keep
// its CPUs afterwards (a thread left pinned goes back to the runtime's pool
// and runs other goroutines on one CPU).
func TestBenchModelPinLeavesNoPinnedThread(t *testing.T) {
	fastKernels(t)
	arch := sharedPath(t, "golden/models/bert-base")
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var before, after unix.CPUSet
	if err := unix.SchedGetaffinity(0, &before); err != nil {
		t.Skipf("sched_getaffinity: %v", err)
	}
	if before.Count() < 2 {
		t.Skip("this thread may run on one CPU only: pinning cannot be seen")
	}
	_, errb, err := cli(t, "bench", "model", "--arch", arch, "--seq", "4", "--precision", "fp32", "--min-time", "1ms", "--reps", "1")
	if err != nil {
		t.Fatal(err, errb)
	}
	if err := unix.SchedGetaffinity(0, &after); err != nil {
		t.Fatal(err)
	}
	if after.Count() != before.Count() {
		t.Errorf("after bench model the calling thread may run on %d CPUs, before on %d", after.Count(), before.Count())
	}
}
