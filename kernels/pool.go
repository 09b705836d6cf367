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
