package models

import (
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// allowedCPUs lists the CPUs of the process's affinity mask, in order.
func allowedCPUs() ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, fmt.Errorf("sched_getaffinity: %w", err)
	}
	var out []int
	for c := 0; c < 8192 && len(out) < set.Count(); c++ {
		if set.IsSet(c) {
			out = append(out, c)
		}
	}
	return out, nil
}

// pinThread binds the calling OS thread to cpus.
func pinThread(cpus []int) error {
	var set unix.CPUSet
	for _, c := range cpus {
		set.Set(c)
	}
	return unix.SchedSetaffinity(0, &set)
}

// physicalCores counts the distinct cores (thread sibling sets in sysfs)
// among the allowed CPUs; 0 when sysfs does not say.
func physicalCores() int {
	cpus, err := allowedCPUs()
	if err != nil {
		return 0
	}
	cores := map[string]bool{}
	for _, c := range cpus {
		b, err := os.ReadFile(fmt.Sprintf("/sys/devices/system/cpu/cpu%d/topology/thread_siblings_list", c))
		if err != nil {
			return 0
		}
		cores[strings.TrimSpace(string(b))] = true
	}
	return len(cores)
}
