//go:build linux

package bench

import (
	"time"

	"golang.org/x/sys/unix"
)

// threadCPU returns the calling thread's CPU time
// (CLOCK_THREAD_CPUTIME_ID), and false where it cannot be read. On a
// shared machine it leaves out the time other processes held the core;
// the caller locks its goroutine to its thread around what it measures.
func threadCPU() (time.Duration, bool) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0, false
	}
	return time.Duration(ts.Nano()), true
}
