//go:build linux

// The instances tests read thread ids and affinity masks, which are
// Linux system calls (Pin is implemented on Linux only).

package models_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"

	"github.com/int8bert/int8bert/internal/cgroup"
	"github.com/int8bert/int8bert/models"
	"golang.org/x/sys/unix"
)

func TestInstancesRun(t *testing.T) {
	in, err := models.NewInstances(models.InstanceOptions{Instances: 3})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	tids := map[int]int{}
	var wg sync.WaitGroup
	wg.Add(3)
	err = in.Run(context.Background(), func(ctx context.Context, i int) error {
		mu.Lock()
		tids[unix.Gettid()] = i
		mu.Unlock()
		wg.Done()
		wg.Wait() // all at once: none can reuse another's thread
		return nil
	})
	if err != nil || len(tids) != 3 {
		t.Fatalf("err %v, %d distinct threads %v; want 3", err, len(tids), tids)
	}
	e1, e2 := errors.New("one"), errors.New("two")
	err = in.Run(context.Background(), func(ctx context.Context, i int) error {
		switch i {
		case 0:
			return e1
		case 1:
			return e2
		}
		panic("boom")
	})
	if !errors.Is(err, e1) || !errors.Is(err, e2) || !errors.Is(err, models.ErrPanic) {
		t.Errorf("Run: %v; want both errors and ErrPanic joined", err)
	}
}

func TestInstancesPin(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("pinning is Linux only")
	}
	n := min(runtime.NumCPU(), 2)
	in, err := models.NewInstances(models.InstanceOptions{Instances: n, Threads: 1, Pin: true})
	if err != nil {
		t.Fatal(err)
	}
	got := make([][]int, n)
	err = in.Run(context.Background(), func(ctx context.Context, i int) error {
		var set unix.CPUSet
		if err := unix.SchedGetaffinity(0, &set); err != nil {
			return err
		}
		for c := 0; c < 1024; c++ {
			if set.IsSet(c) {
				got[i] = append(got[i], c)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		want := in.Pinned(i)
		if len(want) != 1 || len(got[i]) != 1 || got[i][0] != want[0] {
			t.Errorf("instance %d runs on CPUs %v, want %v", i, got[i], want)
		}
	}
	if n == 2 && got[0][0] == got[1][0] {
		t.Errorf("both instances on CPU %d", got[0][0])
	}
}

func TestInstancesOptions(t *testing.T) {
	for _, o := range []models.InstanceOptions{{Instances: -1}, {Threads: -1}, {Threads: runtime.NumCPU() + 1},
		{Instances: runtime.NumCPU() + 1, Threads: 1, Pin: true}} {
		if _, err := models.NewInstances(o); !errors.Is(err, models.ErrConfig) {
			t.Errorf("%+v: %v, want ErrConfig", o, err)
		}
	}
	if p := models.PhysicalCores(); p < 1 || p > runtime.NumCPU() {
		t.Errorf("PhysicalCores %d, want 1 to %d", p, runtime.NumCPU())
	}
	if d := models.DefaultInstances(1); d != models.PhysicalCores() {
		t.Errorf("DefaultInstances(1) %d, want %d", d, models.PhysicalCores())
	}
}

// TestInstancesFor: the default count fills the CPUs a container allows,
// never more than the physical cores, at least one.
func TestInstancesFor(t *testing.T) {
	cores := models.PhysicalCores()
	for _, c := range []struct{ cpus, threads, want int }{
		{1, 1, 1},
		{cores, 1, cores},
		{1000, 1, cores},
		{cores, cores, 1},
		{0, 1, 1},
		{1, 4, 1},
	} {
		if got := models.InstancesFor(c.cpus, c.threads); got != c.want {
			t.Errorf("InstancesFor(%d, %d) = %d, want %d (physical cores %d)", c.cpus, c.threads, got, c.want, cores)
		}
	}
	if cores >= 2 {
		if got := models.InstancesFor(2, 1); got != 2 {
			t.Errorf("a quota of 2 CPUs: %d instances, want 2", got)
		}
	}
	if got, want := models.DefaultInstances(1), models.InstancesFor(cgroup.Current().CPUs, 1); got != want {
		t.Errorf("DefaultInstances(1) = %d, want InstancesFor(cgroup's %d CPUs) = %d", got, cgroup.Current().CPUs, want)
	}
}

// TestPipelineBudget: SetMaxBatchTokens refuses a budget under one token,
// and ScratchBytes grows linearly with the tokens.
func TestPipelineBudget(t *testing.T) {
	p, err := models.Load(context.Background(), "../assets/sst2-xlmr-mini", models.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.SetMaxBatchTokens(0); !errors.Is(err, models.ErrConfig) {
		t.Errorf("SetMaxBatchTokens(0): %v, want ErrConfig", err)
	}
	if err := p.SetMaxBatchTokens(300); err != nil || p.MaxBatchTokens() != 300 {
		t.Errorf("SetMaxBatchTokens(300): %v, budget %d", err, p.MaxBatchTokens())
	}
	one := p.ScratchBytes(1)
	if one <= 0 || p.ScratchBytes(2048) != 2048*one {
		t.Errorf("ScratchBytes: %d a token, %d for 2048", one, p.ScratchBytes(2048))
	}
}
