package bench

import (
	"context"
	"fmt"
	"runtime"
	"testing"
)

// TestTriad: a small run reports positive rates and the sizes it used.
func TestTriad(t *testing.T) {
	for _, threads := range []int{1, 3} {
		r, err := Triad(context.Background(), TriadOptions{Bytes: 3 << 20, Threads: threads, Reps: 3})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%+v", r)
		n := int64(3<<20) / 24
		if r.Threads != threads || r.Reps != 3 || r.Bytes != 24*n || r.Moved != 24*n {
			t.Errorf("threads %d: result %+v", threads, r)
		}
		if !(r.BestGBps > 0) || !(r.MedianGBps > 0) || r.MedianGBps > r.BestGBps {
			t.Errorf("threads %d: rates %v best, %v median", threads, r.BestGBps, r.MedianGBps)
		}
	}
}

// TestTriadDefaults: zero options mean one thread and ten repetitions.
func TestTriadDefaults(t *testing.T) {
	tr, err := newTriad(TriadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.close()
	if tr.threads != 1 || tr.reps != 10 || tr.moved() != DefaultTriadBytes {
		t.Errorf("defaults: %d threads, %d reps, %d bytes", tr.threads, tr.reps, tr.moved())
	}
}

// TestTriadComputes: every element of a is b + 3c after a repetition, with
// chunks that do not divide the arrays evenly.
func TestTriadComputes(t *testing.T) {
	for _, threads := range []int{1, 2, 5} {
		tr, err := newTriad(TriadOptions{Bytes: 24*4099 + 7, Threads: threads})
		if err != nil {
			t.Fatal(err)
		}
		if len(tr.a) != 4099 {
			t.Fatalf("%d elements, want 4099", len(tr.a))
		}
		for i, v := range tr.a {
			if v != 0 {
				t.Fatalf("a[%d] = %v before the first repetition", i, v)
			}
		}
		if err := tr.check(); err == nil {
			t.Error("check passes before any repetition")
		}
		tr.rep()
		for _, i := range []int{0, 1, 2, 3, 4, 999, 1000, 4095, 4096, 4098} {
			if want := float64(i%1000) + 3*float64(i%7)*0.5; tr.a[i] != want {
				t.Errorf("threads %d: a[%d] = %v, want %v", threads, i, tr.a[i], want)
			}
		}
		for i := range tr.a {
			if err := tr.checkAt(i); err != nil {
				t.Fatalf("threads %d: %v", threads, err)
			}
		}
		tr.close()
	}
}

func TestTriadKernelTail(t *testing.T) {
	for n := range 11 {
		a, b, c := make([]float64, n), make([]float64, n), make([]float64, n)
		for i := range n {
			b[i], c[i] = float64(i), float64(2*i)
		}
		triadKernel(a, b, c, 0.5)
		for i := range n {
			if a[i] != 2*float64(i) {
				t.Errorf("n %d: a[%d] = %v, want %v", n, i, a[i], 2*float64(i))
			}
		}
	}
}

func TestTriadBadOptions(t *testing.T) {
	for _, o := range []TriadOptions{
		{Bytes: -1},
		{Bytes: MinTriadBytes - 1},
		{Bytes: 1},
		{Threads: -1},
		{Reps: -1},
		{Bytes: MinTriadBytes, Threads: 1000},
	} {
		if _, err := Triad(context.Background(), o); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}
}

func TestTriadCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Triad(ctx, TriadOptions{Bytes: MinTriadBytes}); err != context.Canceled {
		t.Errorf("err = %v, want context.Canceled", err)
	}
}

// BenchmarkTriad reports the triad's GB/s (STREAM's count, 24 bytes per
// element) on the default arrays, on one thread and, where GOMAXPROCS
// allows, on all of them.
func BenchmarkTriad(b *testing.B) {
	threads := []int{1}
	if p := runtime.GOMAXPROCS(0); p > 1 {
		threads = append(threads, p)
	}
	for _, n := range threads {
		b.Run(fmt.Sprintf("threads=%d", n), func(b *testing.B) {
			tr, err := newTriad(TriadOptions{Threads: n})
			if err != nil {
				b.Fatal(err)
			}
			defer tr.close()
			tr.rep() // warm-up
			b.SetBytes(tr.moved())
			reps := 0
			for b.Loop() {
				tr.rep()
				reps++
			}
			b.ReportMetric(float64(tr.moved())*float64(reps)/b.Elapsed().Seconds()/1e9, "GB/s")
			if err := tr.check(); err != nil {
				b.Fatal(err)
			}
		})
	}
}
