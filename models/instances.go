package models

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"

	"github.com/int8bert/int8bert/internal/cgroup"
	"github.com/int8bert/int8bert/models/encoder"
)

// InstanceOptions size an Instances pool (docs/DESIGN.md section 9.2).
type InstanceOptions struct {
	// Instances is the number of workers; 0 means DefaultInstances(Threads):
	// the container's CPUs, not the host's.
	Instances int
	// Threads per instance: the Threads its models were loaded with
	// (Options.Threads); 0 means 1.
	Threads int
	// Pin binds instance i to CPUs [i*Threads, (i+1)*Threads) of the
	// process's affinity set (Linux; elsewhere an error). Only the
	// instance's own thread is bound: the helper threads of a
	// multi-threaded GEMM come from the process-wide kernel pool.
	Pin bool
}

// Instances is a pool of workers that share the models loaded once: each
// worker is a goroutine locked to its own OS thread (pinned to its own
// cores when asked), running its loop with its own scratch buffers (the
// model's buffer pool gives every concurrent pass its own), so N
// instances cost one copy of the packed weights plus N sets of scratch.
// The HTTP server's batcher and bench model --instances run on it.
type Instances struct {
	n, threads int
	cpus       [][]int // per instance, when pinned
}

// PhysicalCores is the number of cores (not SMT siblings) among the CPUs
// this process may run on: runtime.NumCPU() where the topology is not
// known.
func PhysicalCores() int {
	if n := physicalCores(); n > 0 {
		return min(n, runtime.NumCPU())
	}
	return runtime.NumCPU()
}

// DefaultInstances is the instance count for threads per instance that
// fills the CPUs this process may keep busy: InstancesFor the CPUs its
// container allows (internal/cgroup: the least of the affinity mask, the
// cpuset, the CPU quota rounded up and GOMAXPROCS; docs/DESIGN.md section
// 9.10).
func DefaultInstances(threads int) int {
	return InstancesFor(cgroup.Current().CPUs, threads)
}

// InstancesFor is the instance count for threads per instance on cpus
// usable CPUs: min(PhysicalCores(), cpus)/threads, at least 1 (a quota of
// 2 CPUs on a host of 64 cores gives 2 instances of one thread, not 64).
func InstancesFor(cpus, threads int) int {
	return max(1, min(PhysicalCores(), max(cpus, 1))/max(threads, 1))
}

// NewInstances checks o against this machine and returns the pool.
func NewInstances(o InstanceOptions) (*Instances, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("models: instances: %s: %w", fmt.Sprintf(format, args...), encoder.ErrConfig)
	}
	n := runtime.NumCPU()
	switch {
	case o.Threads < 0 || o.Threads > n:
		return nil, bad("threads per instance %d: want 0 (one) or 1 to %d (the CPUs this process may use)", o.Threads, n)
	case o.Instances < 0:
		return nil, bad("instances %d: want 0 (one per %d physical cores) or more", o.Instances, max(o.Threads, 1))
	}
	in := &Instances{n: o.Instances, threads: max(o.Threads, 1)}
	if in.n == 0 {
		in.n = DefaultInstances(in.threads)
	}
	if o.Pin {
		cpus, err := allowedCPUs()
		if err != nil {
			return nil, bad("pin: %v", err)
		}
		if need := in.n * in.threads; need > len(cpus) {
			return nil, bad("pin: %d instances x %d threads need %d CPUs, this process may use %d", in.n, in.threads, need, len(cpus))
		}
		for i := 0; i < in.n; i++ {
			in.cpus = append(in.cpus, cpus[i*in.threads:(i+1)*in.threads])
		}
	}
	return in, nil
}

// Len is the number of instances.
func (in *Instances) Len() int { return in.n }

// Threads is the thread count per instance.
func (in *Instances) Threads() int { return in.threads }

// Pinned reports the CPUs of instance i, nil when the pool is not pinned.
func (in *Instances) Pinned(i int) []int {
	if in.cpus == nil {
		return nil
	}
	return in.cpus[i]
}

// ErrPanic is wrapped by Run's error when a loop panicked.
var ErrPanic = errors.New("instance panicked")

// Run runs loop(ctx, i) on every instance i at once, each on its own
// locked (and, when asked, pinned) OS thread, and waits for all to return.
// The first error (or a panic, as an error wrapping ErrPanic) is returned
// after every loop has returned; loops should return once ctx is done.
func (in *Instances) Run(ctx context.Context, loop func(ctx context.Context, i int) error) error {
	errs := make([]error, in.n)
	var wg sync.WaitGroup
	for i := 0; i < in.n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			// The thread is not unlocked: a pinned thread exits with its
			// goroutine rather than returning to the scheduler's pool
			// with its affinity.
			defer func() {
				if r := recover(); r != nil {
					errs[i] = fmt.Errorf("models: instance %d: %w: %v", i, ErrPanic, r)
				}
			}()
			if in.cpus != nil {
				if err := pinThread(in.cpus[i]); err != nil {
					errs[i] = fmt.Errorf("models: instance %d: pin to CPUs %v: %w", i, in.cpus[i], err)
					return
				}
			}
			errs[i] = loop(ctx, i)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
