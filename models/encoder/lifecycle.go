package encoder

import (
	"errors"
	"sync"
)

// ErrClosed is returned by every call on a TaskModel or Model (and on a
// models.Pipeline over them) that starts after (or races with) its Close.
// errors.Is finds it.
var ErrClosed = errors.New("encoder: the model is closed")

// gate admits the calls on one object until close begins, and lets close
// release the object's memory only once the admitted calls have left
// (docs/DESIGN.md section 2, "Lifecycle"). Its zero value is open.
//
// The weights of a loaded model are memory-mapped: a read after the
// unmapping is a SIGSEGV that recover cannot catch, so every method that
// reads them enters the gate first and leaves it when it has finished
// reading. Entering is reentrant (a counter, not a lock): a call may
// enter the gates of the objects it calls into while it holds its own.
type gate struct {
	mu       sync.Mutex
	closed   bool
	inflight sync.WaitGroup
	// released is closed once the release function has returned.
	released chan struct{}
}

// enter admits a call, or returns ErrClosed once close has begun. Every
// successful enter must be paired with a leave.
func (g *gate) enter() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return ErrClosed
	}
	g.inflight.Add(1)
	return nil
}

// leave ends a call that enter admitted.
func (g *gate) leave() { g.inflight.Done() }

// close refuses new calls, waits for the admitted ones to leave, then
// runs release and returns its error. A later (or concurrent) close waits
// until that release has finished and returns nil. close must not be
// called from a call the gate admitted: it would wait for itself.
func (g *gate) close(release func() error) error {
	g.mu.Lock()
	if g.closed {
		done := g.released
		g.mu.Unlock()
		<-done
		return nil
	}
	g.closed = true
	g.released = make(chan struct{})
	g.mu.Unlock()
	defer close(g.released)
	g.inflight.Wait()
	return release()
}
