package models_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/int8bert/int8bert/models"
	"github.com/int8bert/int8bert/selector"
)

// TestLoadWarmupOption checks that Options.Warmup warms the pipeline up
// before Load returns: calls within its bounds tune no further key, while
// a load without it leaves the tuning to the first call. Bad bounds are a
// load error, and the pipeline is not returned.
func TestLoadWarmupOption(t *testing.T) {
	ctx := context.Background()
	texts := []string{"a gorgeous , witty , seductive movie .", "the story is bleak ."}
	newSel := func() *selector.Selector {
		sel, err := selector.New(selector.Options{CachePath: "off", Tuning: selector.TuneSync, Reps: 1, RepTime: 100 * time.Microsecond})
		require.NoError(t, err)
		t.Cleanup(func() { sel.Close() })
		return sel
	}

	sel := newSel()
	p, err := models.Load(ctx, "../assets/sst2-xlmr-mini", models.Options{
		Selector: sel, Threads: 1, Precision: models.PrecisionInt8Dynamic,
		Warmup: &models.WarmupOptions{MaxBatch: 2, MaxLength: 32},
	})
	require.NoError(t, err)
	defer p.Close()
	warm := sel.Stats().Tuned
	require.Positive(t, warm, "Load with Warmup tuned nothing")
	_, err = p.Classify(ctx, texts, models.ClassifyOptions{})
	require.NoError(t, err)
	assert.Equal(t, warm, sel.Stats().Tuned, "a call within the warm-up's bounds tuned more keys")

	cold := newSel()
	q, err := models.Load(ctx, "../assets/sst2-xlmr-mini", models.Options{Selector: cold, Threads: 1, Precision: models.PrecisionInt8Dynamic})
	require.NoError(t, err)
	defer q.Close()
	before := cold.Stats().Tuned
	_, err = q.Classify(ctx, texts, models.ClassifyOptions{})
	require.NoError(t, err)
	assert.Greater(t, cold.Stats().Tuned, before, "without Warmup the first call tunes")

	_, err = models.Load(ctx, "../assets/sst2-xlmr-mini", models.Options{Selector: newSel(), Threads: 1,
		Warmup: &models.WarmupOptions{MaxBatch: -1}})
	require.Error(t, err)
	assert.True(t, errors.Is(err, models.ErrConfig), "%v", err)
	assert.Contains(t, err.Error(), "warm-up at load")
}
