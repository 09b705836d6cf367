package main

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// pinToOneCPU binds the calling (locked) OS thread to the first CPU of its
// current affinity mask and returns that CPU and a function that restores
// the mask.
func pinToOneCPU() (int, func(), error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return -1, nil, fmt.Errorf("sched_getaffinity: %w", err)
	}
	for c := 0; c < 1024; c++ {
		if set.IsSet(c) {
			var one unix.CPUSet
			one.Set(c)
			if err := unix.SchedSetaffinity(0, &one); err != nil {
				return -1, nil, fmt.Errorf("sched_setaffinity: %w", err)
			}
			return c, func() { unix.SchedSetaffinity(0, &set) }, nil
		}
	}
	return -1, nil, fmt.Errorf("empty affinity mask")
}
