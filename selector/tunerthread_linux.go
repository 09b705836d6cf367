//go:build linux

package selector

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// lowerThreadPriority lowers the calling thread to SCHED_IDLE, or where
// that is refused to nice 19, and says which.
func lowerThreadPriority() (string, error) {
	attr := unix.SchedAttr{Size: uint32(unsafe.Sizeof(unix.SchedAttr{})), Policy: unix.SCHED_IDLE}
	errIdle := unix.SchedSetAttr(0, &attr, 0)
	if errIdle == nil {
		return "idle (SCHED_IDLE)", nil
	}
	if err := unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), 19); err != nil {
		return "", fmt.Errorf("sched_setattr SCHED_IDLE: %v; setpriority 19: %v", errIdle, err)
	}
	return "nice 19 (sched_setattr SCHED_IDLE: " + errIdle.Error() + ")", nil
}

// threadPolicy returns the scheduling policy and nice value of thread
// tid (tests).
func threadPolicy(tid int) (policy uint32, nice int, err error) {
	a, err := unix.SchedGetAttr(tid, 0)
	if err != nil {
		return 0, 0, err
	}
	return a.Policy, int(a.Nice), nil
}
