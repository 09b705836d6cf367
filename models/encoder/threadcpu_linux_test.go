package encoder

import "syscall"

// threadCPUNanos returns the calling thread's user and system CPU time in
// ns (getrusage RUSAGE_THREAD), and false where the call fails.
func threadCPUNanos() (int64, bool) {
	const rusageThread = 1 // RUSAGE_THREAD, Linux only
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		return 0, false
	}
	return ru.Utime.Nano() + ru.Stime.Nano(), true
}
