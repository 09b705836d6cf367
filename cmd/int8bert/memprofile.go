package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"sync"
	"time"
)

// peakHeapProfiler is --memprofile: it samples the Go heap every 20 ms
// and, each time the heap grew by step past the highest it has seen, runs
// a collection and keeps a heap profile of what is then live, so that the
// file written at the end holds the live heap at its highest (a profile
// without the collection shows the heap as of the last one, which at a
// peak is often from before the allocations that made it). The
// collections it runs make the process's peak lower than without the
// flag: measure the peak without it.
type peakHeapProfiler struct {
	path string
	step uint64
	log  io.Writer

	stop chan struct{}
	done sync.WaitGroup

	mu   sync.Mutex
	peak uint64
	prof bytes.Buffer
}

// startPeakHeapProfile starts the profiler for path ("" gives nil, whose
// methods do nothing); each new high is logged to log.
func startPeakHeapProfile(path string, log io.Writer) *peakHeapProfiler {
	if path == "" {
		return nil
	}
	p := &peakHeapProfiler{path: path, step: 32 << 20, log: log, stop: make(chan struct{})}
	p.done.Add(1)
	go p.run()
	return p
}

func (p *peakHeapProfiler) run() {
	defer p.done.Done()
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	var high uint64
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
		}
		metrics.Read(s)
		if s[0].Value.Kind() != metrics.KindUint64 {
			continue
		}
		if v := s[0].Value.Uint64(); v > high+p.step {
			high = v
			p.snapshot()
		}
	}
}

// snapshot collects, and keeps the profile if the live heap is the
// highest yet.
func (p *peakHeapProfiler) snapshot() {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	p.mu.Lock()
	defer p.mu.Unlock()
	if ms.HeapAlloc <= p.peak {
		return
	}
	p.peak = ms.HeapAlloc
	p.prof.Reset()
	if err := pprof.Lookup("heap").WriteTo(&p.prof, 0); err != nil {
		p.prof.Reset()
	}
	fmt.Fprintf(p.log, "memprofile: live heap %.0f MB, resident %s\n", float64(ms.HeapAlloc)/1e6, vmRSS())
}

// Stop ends the sampling and writes the profile of the highest live heap
// (or of the heap now, if it is higher).
func (p *peakHeapProfiler) Stop() error {
	if p == nil {
		return nil
	}
	close(p.stop)
	p.done.Wait()
	p.snapshot()
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.log, "memprofile: the highest live heap, %.0f MB, written to %s\n", float64(p.peak)/1e6, p.path)
	return os.WriteFile(p.path, p.prof.Bytes(), 0o644)
}

// vmRSS is the process's resident set as /proc/self/status says it ("?"
// where there is no such file).
func vmRSS() string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "?"
	}
	for _, l := range bytes.Split(b, []byte("\n")) {
		if bytes.HasPrefix(l, []byte("VmRSS:")) {
			return string(bytes.Join(bytes.Fields(l[len("VmRSS:"):]), []byte(" ")))
		}
	}
	return "?"
}
