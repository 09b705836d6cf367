package models

import "github.com/int8bert/int8bert/models/encoder"

// ErrClosed is returned by every call on a Pipeline (and its TaskModel
// and Model) that starts after, or races with, its Close: Close waits for
// the calls in flight and then unmaps the weights, so no call ever reads
// them afterwards. It is encoder.ErrClosed; errors.Is finds it.
var ErrClosed = encoder.ErrClosed

// DefaultMaxBatchTokens is the token budget of one forward pass of a
// pipeline call when Options.MaxBatchTokens is 0 (encoder's).
const DefaultMaxBatchTokens = encoder.DefaultMaxBatchTokens
