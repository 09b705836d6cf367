package serve

import (
	"fmt"
	"sync"
)

// permits is --max-concurrent-requests as TEI counts it
// (core/src/infer.rs, try_acquire_permit): one permit per input of an
// inference request, taken without waiting before the inputs are
// tokenized and held until they are answered. A request that cannot take
// all of its permits at once is refused whole with 429 Overloaded; the
// routes that run no inference (/tokenize, /decode, /info, /health) take
// none, as in TEI.
//
// The 429 carries Retry-After from retry (the scheduler's estimate of
// the time to run the work in flight), 1 second without it.
type permits struct {
	mu        sync.Mutex
	max, used int64
	retry     func() int
}

// take takes n permits, or none and a 429 when fewer than n are free.
func (p *permits) take(n int) error {
	p.mu.Lock()
	if p.used+int64(n) > p.max {
		msg := fmt.Sprintf("model is overloaded: %d of %d inputs in flight, %d more asked (--max-concurrent-requests counts inputs, as TEI); retry later", p.used, p.max, n)
		p.mu.Unlock()
		after := 1
		if p.retry != nil {
			after = p.retry()
		}
		return overload(msg, after)
	}
	p.used += int64(n)
	p.mu.Unlock()
	return nil
}

// give returns n permits taken by take.
func (p *permits) give(n int) {
	p.mu.Lock()
	p.used -= int64(n)
	p.mu.Unlock()
}

// inUse is the permits taken and not yet given back.
func (p *permits) inUse() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return int(p.used)
}
