//go:build !linux

package threadcpu

import "time"

// Now reports that a thread's CPU time cannot be read here (it is read
// on Linux only).
func Now() (time.Duration, bool) { return 0, false }
