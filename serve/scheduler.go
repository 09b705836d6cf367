package serve

import (
	"context"
	"fmt"
	"github.com/int8bert/int8bert/models"
	"math"
	"net/http"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
)

// job is one request's work for an instance: its sequences, batched with
// other jobs of the same model, or (run set) a call that runs alone on an
// instance (question answering, which windows its own context).
type job struct {
	ctx    context.Context
	m      *model
	seqs   []models.Sequence
	tokens int
	// fill receives row i of the job's sequences from pass b (row r);
	// it runs on the instance, so it only copies and post-processes.
	fill func(i int, b *models.Batch, r int) error
	// run is the whole job when it is not batched.
	run  func() error
	enq  time.Time
	done chan error // buffered: the instance never blocks on it
	// queued and inferred are the job's wait and its batch's run, set by
	// the instance before done (read only after a result from done).
	queued, inferred time.Duration
}

// scheduler queues jobs and hands them to the instances in batches
// (docs/DESIGN.md section 9.1).
type scheduler struct {
	mu       sync.Mutex
	cond     *sync.Cond
	queue    []*job
	closed   bool
	arriving int    // requests admitted and not yet queued (being tokenized)
	running  int    // batches on the instances
	ran      uint64 // batches taken so far
	seqs     int    // sequences queued (TEI's te_queue_size)
	maxTok   int
	maxReq   int
	window   time.Duration
	met      *metrics
	log      func(msg string, args ...any)
	// Admission by work (docs/DESIGN.md section 9.11): inflight is the
	// tokens of the jobs queued or running; a job that would take it past
	// admit (when anything is in flight) is refused 429. rate is the
	// instances' measured tokens per second of a busy instance (a moving
	// average over batches), instances their number: together they give
	// Retry-After.
	inflight  int
	admit     int
	rate      float64
	instances int
}

func newScheduler(c *Config, met *metrics) *scheduler {
	s := &scheduler{maxTok: c.MaxBatchTokens, maxReq: c.MaxBatchRequests, window: c.BatchWindow, met: met,
		log: c.Logger.Error}
	if s.maxReq < 0 {
		s.maxReq = math.MaxInt // no bound but the tokens, as TEI's default
	}
	s.cond = sync.NewCond(&s.mu)
	return s
}

// expect counts a request that will queue a job soon (or call drop).
func (s *scheduler) expect() {
	s.mu.Lock()
	s.arriving++
	s.mu.Unlock()
}

// drop undoes expect for a request that queues nothing.
func (s *scheduler) drop() {
	s.mu.Lock()
	s.arriving--
	s.mu.Unlock()
	s.cond.Broadcast()
}

// submit queues j (for a request counted by expect when counted) and waits for its
// end. A request whose context ends first returns the context's error;
// its job is dropped unrun, or its result discarded.
func (s *scheduler) submit(j *job, counted bool) error {
	j.enq, j.done = time.Now(), make(chan error, 1)
	for _, q := range j.seqs {
		j.tokens += q.Len()
	}
	s.mu.Lock()
	if counted {
		s.arriving--
	}
	if s.closed {
		s.mu.Unlock()
		return &apiError{503, errUnhealthy, "the server is shutting down"}
	}
	if s.admit > 0 && s.inflight > 0 && s.inflight+j.tokens > s.admit {
		err := overload(fmt.Sprintf("model is overloaded: %d tokens queued or running, %d more asked, at most %d admitted (--max-queued-passes); retry later",
			s.inflight, j.tokens, s.admit), s.retryAfterLocked())
		s.mu.Unlock()
		return err
	}
	s.inflight += j.tokens
	s.queue = append(s.queue, j)
	s.seqs += len(j.seqs)
	s.queued()
	s.mu.Unlock()
	s.cond.Broadcast()
	select {
	case err := <-j.done:
		return err
	case <-j.ctx.Done():
		return j.ctx.Err()
	}
}

// idle returns the batches taken so far and whether none runs, none is
// queued and no request is being tokenized.
func (s *scheduler) idle() (ran uint64, idle bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ran, s.running == 0 && len(s.queue) == 0 && s.arriving == 0
}

// close lets the instances return once the queue is empty.
func (s *scheduler) close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cond.Broadcast()
}

// take waits for work and returns the next batch: the oldest job, and
// when it is batched, the later jobs of its model that fit the limits.
// While requests are being tokenized and the batch has room, it waits up
// to the window for them. It returns nil once closed and empty.
func (s *scheduler) take() []*job {
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		s.dropCancelled()
		if len(s.queue) == 0 {
			if s.closed {
				return nil
			}
			s.cond.Wait()
			continue
		}
		if head := s.queue[0]; head.run != nil {
			s.queue = s.queue[1:]
			s.seqs -= len(head.seqs)
			s.queued()
			s.running++
			s.ran++
			return []*job{head}
		}
		if s.window > 0 && s.arriving > 0 && !s.full() && !s.closed {
			deadline := time.Now().Add(s.window)
			t := time.AfterFunc(s.window, s.cond.Broadcast)
			for s.arriving > 0 && len(s.queue) > 0 && !s.full() && time.Now().Before(deadline) && !s.closed {
				s.cond.Wait()
			}
			t.Stop()
			s.dropCancelled()
			if len(s.queue) == 0 {
				continue
			}
		}
		return s.gather()
	}
}

// gather removes the head job and the later jobs of its model that fit
// the batch limits, in arrival order.
func (s *scheduler) gather() []*job {
	head := s.queue[0]
	batch := []*job{head}
	tokens := head.tokens
	rest := s.queue[:0]
	for _, j := range s.queue[1:] {
		if j.m == head.m && j.run == nil && len(batch) < s.maxReq && tokens+j.tokens <= s.maxTok {
			batch = append(batch, j)
			tokens += j.tokens
			continue
		}
		rest = append(rest, j)
	}
	for _, j := range batch {
		s.seqs -= len(j.seqs)
	}
	clear(s.queue[len(rest):])
	s.queue = rest
	s.queued()
	s.running++
	s.ran++
	return batch
}

// full reports whether the head's model has a batch's worth queued.
func (s *scheduler) full() bool {
	head := s.queue[0]
	n, tokens := 0, 0
	for _, j := range s.queue {
		if j.m == head.m && j.run == nil {
			n++
			tokens += j.tokens
		}
	}
	return n >= s.maxReq || tokens >= s.maxTok
}

// dropCancelled removes the jobs whose requests have gone.
func (s *scheduler) dropCancelled() {
	kept := s.queue[:0]
	for _, j := range s.queue {
		if err := j.ctx.Err(); err != nil {
			// TEI counts each input of a request gone while queued.
			if n := len(j.seqs); n > 0 {
				s.met.te.requestFailure.WithLabelValues("dropped").Add(float64(n))
			}
			s.met.savedTokens.Add(float64(j.tokens))
			s.seqs -= len(j.seqs)
			s.inflight -= j.tokens
			j.done <- err
			continue
		}
		kept = append(kept, j)
	}
	clear(s.queue[len(kept):])
	s.queue = kept
	s.queued()
}

// retryAfter is the seconds a refused client should wait: the time the
// instances take to run the tokens in flight at the measured rate,
// rounded up, at least 1 (1 before any batch has run).
func (s *scheduler) retryAfter() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.retryAfterLocked()
}

func (s *scheduler) retryAfterLocked() int {
	if s.rate <= 0 || s.inflight <= 0 {
		return 1
	}
	sec := float64(s.inflight) / (s.rate * float64(max(s.instances, 1)))
	return max(1, int(math.Ceil(min(sec, 3600))))
}

// queued publishes the queue's length in jobs and in sequences (under mu).
func (s *scheduler) queued() {
	s.met.queueLength.Set(float64(len(s.queue)))
	s.met.te.queueSize.Set(float64(s.seqs))
}

// loop is one instance: it runs batches until the scheduler closes.
func (s *scheduler) loop(ctx context.Context, _ int) error {
	for {
		batch := s.take()
		if batch == nil {
			return nil
		}
		s.runBatch(batch)
		s.mu.Lock()
		s.running--
		s.mu.Unlock()
	}
}

// runBatch runs one batch and answers its jobs; a panic fails the
// batch's jobs, never the instance.
func (s *scheduler) runBatch(batch []*job) {
	now := time.Now()
	for _, j := range batch {
		s.met.queue.Observe(now.Sub(j.enq).Seconds())
	}
	errs := make([]error, len(batch))
	func() {
		defer func() {
			if r := recover(); r != nil {
				s.met.panics.Inc()
				s.log("serve: panic in a batch", "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
				for i := range errs {
					errs[i] = &apiError{http.StatusFailedDependency, errBackend, fmt.Sprintf("internal error: %v", r)}
				}
			}
		}()
		if batch[0].run != nil {
			errs[0] = batch[0].run()
			return
		}
		s.runSeqs(batch, errs)
	}()
	ran := time.Since(now)
	s.met.inference.Observe(ran.Seconds())
	tokens := 0
	for _, j := range batch {
		tokens += j.tokens
	}
	s.mu.Lock()
	s.inflight -= tokens
	if tokens > 0 && ran > 0 {
		r := float64(tokens) / ran.Seconds()
		if s.rate == 0 {
			s.rate = r
		} else {
			s.rate += (r - s.rate) / 8
		}
	}
	s.mu.Unlock()
	for i, j := range batch {
		j.queued, j.inferred = now.Sub(j.enq), ran
		j.done <- errs[i]
	}
}

// testBetweenLayers, when set (tests), is called by a batched pass before
// every layer, for each row still in it (row: its index among the
// batch's sequences, the jobs' in arrival order), with the row's request
// context: a test cancels requests there, at a layer it chooses.
var testBetweenLayers atomic.Pointer[func(layer, row int, ctx context.Context)]

// runSeqs runs the sequences of batched jobs in one Pipeline.Run.
func (s *scheduler) runSeqs(batch []*job, errs []error) {
	var seqs []models.Sequence
	owner := []int{} // job of each sequence
	first := []int{} // first sequence of each job
	for k, j := range batch {
		first = append(first, len(seqs))
		seqs = append(seqs, j.seqs...)
		for range j.seqs {
			owner = append(owner, k)
		}
	}
	s.met.batchSize.Observe(float64(len(seqs)))
	queuedTokens := 0
	for _, j := range batch {
		queuedTokens += j.tokens
	}
	s.met.te.batchSize.Observe(float64(len(seqs)))
	s.met.te.batchTokens.Observe(float64(queuedTokens))
	p := batch[0].m.p
	// A row whose request has gone leaves the pass at the next layer
	// (models.RunOptions.Wanted): its job is answered by submit with the
	// context's error, and the other rows keep their bits.
	wanted := func(layer, g int) bool {
		j := batch[owner[g]]
		if h := testBetweenLayers.Load(); h != nil {
			(*h)(layer, g, j.ctx)
		}
		return j.ctx.Err() == nil
	}
	var st models.RunStats
	err := p.RunWith(context.Background(), seqs, models.RunOptions{Wanted: wanted, Stats: &st}, func(b *models.Batch) error {
		real, computed := b.Tokens()
		s.met.realTokens.Add(float64(real))
		s.met.batchTokens.Observe(float64(computed))
		for r, g := range b.Rows() {
			k := owner[g]
			if errs[k] != nil {
				continue
			}
			errs[k] = batch[k].fill(g-first[k], b, r)
		}
		return nil
	})
	s.met.computed.Add(float64(st.Computed()))
	s.met.savedTokens.Add(float64(st.Saved()))
	for k, j := range batch {
		// A job some of whose rows left has no whole answer: its request
		// has gone, and submit has returned (or returns) its context's
		// error; this only makes sure its fill's partial result is not
		// taken for one.
		if errs[k] == nil {
			if cerr := j.ctx.Err(); cerr != nil {
				errs[k] = cerr
			}
		}
	}
	if err != nil {
		for k := range errs {
			if errs[k] == nil {
				errs[k] = err
			}
		}
	}
}
