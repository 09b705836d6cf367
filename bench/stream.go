package bench

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"time"
)

// TriadOptions control Triad.
type TriadOptions struct {
	// Bytes is the total size of the three arrays, rounded down to whole
	// elements per array (24 bytes for the three float64s of one index);
	// by default 3 x 64 MiB, well above the last-level cache of the
	// development machines, so the triad runs from memory. At least
	// MinTriadBytes.
	Bytes int64
	// Threads split the arrays into contiguous chunks, one goroutine on
	// its own OS thread each; 1 by default.
	Threads int
	// Reps is the number of timed repetitions after one untimed warm-up;
	// 10 by default.
	Reps int
}

// TriadResult is what Triad measured.
type TriadResult struct {
	Threads int
	// Bytes is the size of the three arrays, after rounding.
	Bytes int64
	// Moved is the traffic of one repetition as STREAM counts it: three
	// arrays, 24 bytes per element (read b, read c, write a). The
	// write-allocate read of a's cache lines, which ordinary stores cost
	// on x86, is not counted, as in STREAM; the memory moves about 32
	// bytes per element.
	Moved int64
	Reps  int
	// BestGBps is Moved over the fastest repetition, MedianGBps the median
	// of the repetitions' rates, in GB/s of 1e9 bytes.
	BestGBps, MedianGBps float64
}

// The triad's defaults and limits.
const (
	// DefaultTriadBytes is three arrays of 64 MiB.
	DefaultTriadBytes = 3 * 64 << 20
	// MinTriadBytes is three arrays of 4 KiB: less times only the loop's
	// start.
	MinTriadBytes = 3 * 4 << 10
	// triadScalar is STREAM's scalar.
	triadScalar = 3.0
	// triadAlign keeps chunk boundaries on 64-byte cache lines.
	triadAlign = 8
)

// Triad measures memory bandwidth with STREAM's triad a[i] = b[i] + s*c[i]
// over float64 arrays: the arrays are split into o.Threads contiguous
// chunks, each initialised (first touch, so its pages sit on the memory
// node of the thread that uses them) and computed by the same goroutine
// locked to its OS thread; one untimed repetition warms up, then o.Reps
// are timed. ctx is checked between repetitions and its error returned
// as is. After the last one a sample of a is checked against the formula,
// which also keeps the loop from being optimised away.
func Triad(ctx context.Context, o TriadOptions) (TriadResult, error) {
	t, err := newTriad(o)
	if err != nil {
		return TriadResult{}, err
	}
	defer t.close()
	if err := ctx.Err(); err != nil {
		return TriadResult{}, err
	}
	t.rep() // warm-up
	if err := ctx.Err(); err != nil {
		return TriadResult{}, err
	}
	rates := make([]float64, 0, t.reps)
	for range t.reps {
		if err := ctx.Err(); err != nil {
			return TriadResult{}, err
		}
		d := t.rep()
		rates = append(rates, float64(t.moved())/max(d.Seconds(), 1e-9)/1e9)
	}
	if err := t.check(); err != nil {
		return TriadResult{}, err
	}
	slices.Sort(rates)
	med := rates[len(rates)/2]
	if len(rates)%2 == 0 {
		med = (rates[len(rates)/2-1] + med) / 2
	}
	return TriadResult{
		Threads:    t.threads,
		Bytes:      t.moved(),
		Moved:      t.moved(),
		Reps:       t.reps,
		BestGBps:   rates[len(rates)-1],
		MedianGBps: med,
	}, nil
}

// triad is a set of arrays and the worker goroutines that own their
// chunks.
type triad struct {
	a, b, c []float64
	threads int
	reps    int
	// start has one channel per worker; a send runs one repetition of its
	// chunk, done hears back. Closing start ends the workers.
	start []chan struct{}
	done  chan struct{}
}

// newTriad checks o, allocates the arrays and starts the workers, which
// initialise their chunks before newTriad returns.
func newTriad(o TriadOptions) (*triad, error) {
	if o.Bytes == 0 {
		o.Bytes = DefaultTriadBytes
	}
	if o.Threads == 0 {
		o.Threads = 1
	}
	if o.Reps == 0 {
		o.Reps = 10
	}
	switch {
	case o.Bytes < MinTriadBytes:
		return nil, fmt.Errorf("bench: triad: %d bytes (at least %d)", o.Bytes, MinTriadBytes)
	case o.Threads < 0:
		return nil, fmt.Errorf("bench: triad: %d threads", o.Threads)
	case o.Reps < 0:
		return nil, fmt.Errorf("bench: triad: %d repetitions", o.Reps)
	}
	n := int(o.Bytes / 24)
	if int64(n) != o.Bytes/24 {
		return nil, fmt.Errorf("bench: triad: %d bytes do not fit in memory here", o.Bytes)
	}
	if n/o.Threads < triadAlign {
		return nil, fmt.Errorf("bench: triad: %d bytes for %d threads (at least %d per thread)", o.Bytes, o.Threads, 24*triadAlign)
	}
	// make of a large slice maps fresh zero pages without touching them,
	// so the workers' initialisation is the first touch.
	t := &triad{
		a: make([]float64, n), b: make([]float64, n), c: make([]float64, n),
		threads: o.Threads, reps: o.Reps,
		start: make([]chan struct{}, o.Threads),
		done:  make(chan struct{}, o.Threads),
	}
	chunk := (n/o.Threads + triadAlign - 1) / triadAlign * triadAlign
	for w := range o.Threads {
		lo, hi := min(w*chunk, n), min((w+1)*chunk, n)
		if w == o.Threads-1 {
			hi = n
		}
		t.start[w] = make(chan struct{})
		go t.worker(lo, hi, t.start[w])
	}
	for range o.Threads {
		<-t.done
	}
	return t, nil
}

// worker owns a[lo:hi], b[lo:hi] and c[lo:hi]: it initialises them, then
// runs one repetition over them per message on start.
func (t *triad) worker(lo, hi int, start chan struct{}) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	a, b, c := t.a[lo:hi], t.b[lo:hi], t.c[lo:hi]
	for i := range a {
		a[i], b[i], c[i] = 0, triadB(lo+i), triadC(lo+i)
	}
	t.done <- struct{}{}
	for range start {
		triadKernel(a, b, c, triadScalar)
		t.done <- struct{}{}
	}
}

// rep runs one repetition on every worker and returns its wall time.
func (t *triad) rep() time.Duration {
	t0 := time.Now()
	for _, s := range t.start {
		s <- struct{}{}
	}
	for range t.start {
		<-t.done
	}
	return time.Since(t0)
}

// moved is the bytes of one repetition as STREAM counts them.
func (t *triad) moved() int64 { return 24 * int64(len(t.a)) }

// close ends the workers.
func (t *triad) close() {
	for _, s := range t.start {
		close(s)
	}
}

// check compares a sample of a, 64 indices spread over the arrays and the
// last one, with the formula; the values are small integers and their
// halves, exact in float64 whether or not the compiler fuses the
// multiply-add.
func (t *triad) check() error {
	n := len(t.a)
	step := max(n/64, 1)
	for i := 0; i < n; i += step {
		if err := t.checkAt(i); err != nil {
			return err
		}
	}
	return t.checkAt(n - 1)
}

func (t *triad) checkAt(i int) error {
	if want := triadB(i) + triadScalar*triadC(i); t.a[i] != want {
		return fmt.Errorf("bench: triad: a[%d] = %v, want %v", i, t.a[i], want)
	}
	return nil
}

// triadB and triadC are the initial b[i] and c[i]: small values that vary
// with i, so a misplaced chunk shows in the check.
func triadB(i int) float64 { return float64(i % 1000) }
func triadC(i int) float64 { return float64(i%7) * 0.5 }

// triadKernel computes a[i] = b[i] + s*c[i], unrolled by 4. Go does not
// vectorize it; one core still drives most of its memory bandwidth with
// scalar loads and stores.
func triadKernel(a, b, c []float64, s float64) {
	for len(a) >= 4 && len(b) >= 4 && len(c) >= 4 {
		a[0] = b[0] + s*c[0]
		a[1] = b[1] + s*c[1]
		a[2] = b[2] + s*c[2]
		a[3] = b[3] + s*c[3]
		a, b, c = a[4:], b[4:], c[4:]
	}
	b, c = b[:len(a)], c[:len(a)]
	for i := range a {
		a[i] = b[i] + s*c[i]
	}
}
