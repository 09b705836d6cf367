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
