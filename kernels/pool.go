package kernels

import (
	"sync"
)

// Parallel runs f(0) ... f(tasks-1) on at most threads goroutines of a
// fixed, process-wide pool and returns when all are done. With threads <= 1
// or one task it runs them in order on the calling goroutine, so a
// single-threaded GEMM costs exactly the single-threaded kernel.
//
// The pool never holds more workers than requested by the largest call, so
// the kernels and oneDNN's OpenMP threads (set per call in package dnnl) can
// be sized together to the cores without oversubscribing them.
func Parallel(threads, tasks int, f func(task int)) {
	if tasks <= 0 {
		return
	}
	if threads <= 1 || tasks == 1 {
		for i := 0; i < tasks; i++ {
			f(i)
		}
		return
	}
	threads = min(threads, tasks)
	var next sync.Mutex
	i := 0
	take := func() int {
		next.Lock()
		defer next.Unlock()
		if i >= tasks {
			return -1
		}
		i++
		return i - 1
	}
	var wg sync.WaitGroup
	wg.Add(threads - 1)
	for w := 0; w < threads-1; w++ {
		workers.submit(func() {
			defer wg.Done()
			for t := take(); t >= 0; t = take() {
				f(t)
			}
		})
	}
	for t := take(); t >= 0; t = take() {
		f(t)
	}
	wg.Wait()
}

// pool is a set of long-lived worker goroutines fed through a channel.
type pool struct {
	mu      sync.Mutex
	work    chan func()
	started int
}

var workers = &pool{work: make(chan func())}

func (p *pool) submit(job func()) {
	select {
	case p.work <- job:
		return
	default:
	}
	p.mu.Lock()
	p.started++
	p.mu.Unlock()
	go p.loop(job)
}

func (p *pool) loop(job func()) {
	for {
		job()
		job = <-p.work
	}
}

// ParallelRows runs f over the rows [0, rows) cut into chunks of at least
// minRows rows (up to four a thread, so that a thread the machine delays
// leaves its share to the others), on at most threads goroutines of the
// pool (Parallel), and returns the error of the lowest chunk that failed,
// as one thread would. With one thread, or fewer than 2*minRows rows, it
// is f(0, rows) on the calling goroutine. f must treat its rows alone
// (the row-wise LayerNorm, quantization, elementwise steps of a pass):
// the result is then the same bits for every thread count.
func ParallelRows(threads, rows, minRows int, f func(r0, r1 int) error) error {
	minRows = max(minRows, 1)
	if threads <= 1 || rows < 2*minRows {
		return f(0, rows)
	}
	chunks := min(rows/minRows, 4*threads)
	errs := make([]error, chunks)
	Parallel(threads, chunks, func(t int) {
		errs[t] = f(rows*t/chunks, rows*(t+1)/chunks)
	})
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
