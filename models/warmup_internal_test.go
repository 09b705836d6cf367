package models

import (
	"testing"

	"github.com/int8bert/int8bert/models/encoder"
	"github.com/stretchr/testify/assert"
)

// TestWarmupBounds: a pipeline's warm-up takes its MaxLength as the
// default length and is bounded by its token budget, as its passes are
// (the engine then keeps buffers of that many rows: encoder's
// TestWarmupKeepsBuffers).
func TestWarmupBounds(t *testing.T) {
	p := &Pipeline{maxLength: 6, maxBatchTokens: 64}
	assert.Equal(t, encoder.WarmupOptions{MaxBatch: 4, MaxLength: 6, MaxTokens: 24}, p.warmupBounds(WarmupOptions{MaxBatch: 4, MaxLength: 6}),
		"MaxBatch x MaxLength, under the budget")
	assert.Equal(t, 64, p.warmupBounds(WarmupOptions{MaxBatch: 100, MaxLength: 6}).MaxTokens, "the pipeline's token budget")
	assert.Equal(t, 6, p.warmupBounds(WarmupOptions{}).MaxLength, "the pipeline's MaxLength")
	assert.Equal(t, 6, p.warmupBounds(WarmupOptions{}).MaxTokens, "one sequence of MaxLength")
	assert.Equal(t, -2, p.warmupBounds(WarmupOptions{MaxTokens: -2}).MaxTokens, "a bad bound reaches the engine's check")
}
