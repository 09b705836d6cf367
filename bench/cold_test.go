package bench

import (
	"context"
	"testing"
	"time"

	"github.com/int8bert/int8bert/internal/threadcpu"
	"github.com/int8bert/int8bert/models"
	"github.com/int8bert/int8bert/selector"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCold: bench cold times the warm-up until no key is pending, then
// every call cold and warm on a selector of its own, with lengths within
// bounds; bad bounds are refused.
func TestCold(t *testing.T) {
	r, err := Cold(context.Background(), ColdOptions{Arch: "../assets/sst2-xlmr-mini", WarmBatch: 2, WarmLength: 8,
		Calls: 6, MaxLength: 20, WarmRounds: 1, Seed: 3,
		Selector: selector.Options{Reps: 1, RepTime: 100 * time.Microsecond, KeyBudget: 5 * time.Millisecond}})
	require.NoError(t, err)
	assert.Greater(t, r.Warmup, r.Load*0, "warm-up timed")
	assert.Positive(t, r.WarmupKeys)
	assert.Positive(t, r.WarmupTuned, "an empty cache tunes")
	require.Len(t, r.Calls, 6)
	for i, c := range r.Calls {
		assert.True(t, c.Length >= 1 && c.Length <= 20, "call %d: %d tokens", i, c.Length)
		assert.Positive(t, c.Cold, "call %d", i)
		assert.Positive(t, c.Warm, "call %d", i)
		if i > 0 {
			assert.GreaterOrEqual(t, c.Start, r.Calls[i-1].Start+r.Calls[i-1].Cold, "call %d starts after the one before", i)
		}
	}
	_, cpuOK := threadcpu.Now()
	checks, defaults := 0, 0
	for i, c := range r.Calls {
		checks += c.Checks
		defaults += c.Defaults
		if cpuOK {
			assert.Positive(t, c.ColdCPU, "call %d: thread CPU time read", i)
			assert.Positive(t, c.WarmCPU, "call %d", i)
		}
	}
	assert.Equal(t, r.Defaults, defaults, "the calls' records add up to the selector's counts")
	assert.Positive(t, checks+r.Prechecks, "defaults are checked, by a call or ahead of it")
	if cpuOK {
		assert.Positive(t, r.CPURatio())
	}
	assert.Positive(t, r.Ratio())
	assert.Positive(t, r.Defaults, "without a warm-up, keys run defaults while queued")
	assert.LessOrEqual(t, r.Percentile(0.5), r.Percentile(1))

	_, err = Cold(context.Background(), ColdOptions{Arch: "../assets/sst2-xlmr-mini", Calls: -1})
	assert.ErrorIs(t, err, models.ErrConfig)
	_, err = Cold(context.Background(), ColdOptions{Arch: "no-such-arch"})
	assert.ErrorContains(t, err, "neither a model folder nor a known architecture")
}
