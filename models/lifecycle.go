package models

import "github.com/int8bert/int8bert/models/encoder"

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
