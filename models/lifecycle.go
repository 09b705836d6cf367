package models

import (
	"fmt"

	"github.com/int8bert/int8bert/models/encoder"
)

// ErrClosed is returned by every call on a Pipeline that starts after,
// or races with, its Close: Close waits for the calls in flight and then
// unmaps the weights, so no call ever reads them afterwards. The engine
// returns the same error; errors.Is finds it.
var ErrClosed = encoder.ErrClosed

// ErrConfig is wrapped by every configuration error: an unsupported
// model, an option outside its domain, a missing file. The engine's
// errors wrap the same value.
var ErrConfig = encoder.ErrConfig

// ErrInput is wrapped by every error about the inputs of a call (a text
// the tokenizer refuses, bad task options, malformed token ids). The
// engine's errors wrap the same value.
var ErrInput = encoder.ErrInput

// Error is the engine's error whose message is the useful part alone
// (what failed, on which input, what to do) while errors.Is finds its
// sentinel (ErrConfig, ErrInput, ErrClosed) and causes: docs/DESIGN.md
// section 2.1.
type Error = encoder.Error

// refuseClosed returns ErrClosed, naming the call what, once p's Close
// has begun, and nil before: every method of a Pipeline that returns an
// error calls it first, so that a closed pipeline answers ErrClosed
// whatever the call's options (those that run the model enter its gate
// again, which also refuses a Close that races with them).
func (p *Pipeline) refuseClosed(what string) error {
	if err := p.m.Enter(); err != nil {
		return &Error{
			Msg:  fmt.Sprintf("models: %s: the pipeline is closed; load the model again", what),
			Errs: []error{ErrClosed, err},
		}
	}
	p.m.Leave()
	return nil
}
