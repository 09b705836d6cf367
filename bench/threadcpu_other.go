//go:build !linux

package bench

import "time"

// threadCPU reports that a thread's CPU time cannot be read here (it is
// read on Linux only).
func threadCPU() (time.Duration, bool) { return 0, false }
