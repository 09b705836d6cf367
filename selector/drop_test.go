package selector

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestDropAfterFirst checks that only the candidates within firstNear of
// the best first time go on being timed, that the others are handed to
// drop, and that a candidate without a first time is kept.
func TestDropAfterFirst(t *testing.T) {
	type c struct {
		name string
		d    time.Duration
		ok   bool
	}
	ms := time.Millisecond
	in := []c{{"a", 10 * ms, true}, {"b", 11 * ms, true}, {"slow", 12 * ms, true}, {"failed", 0, false}, {"best", 9 * ms, true}}
	var dropped []string
	kept := dropAfterFirst(in, func(x c) (time.Duration, bool) { return x.d, x.ok },
		func(x c) { dropped = append(dropped, x.name) })
	var names []string
	for _, k := range kept {
		names = append(names, k.name)
	}
	// 9 ms x 1.15 = 10.35 ms: a stays, b (11) and slow (12) go.
	assert.Equal(t, []string{"a", "failed", "best"}, names)
	assert.Equal(t, []string{"b", "slow"}, dropped)
	assert.Equal(t, "a", in[0].name, "the input is left as it was")
	assert.Len(t, dropAfterFirst([]c{{"x", 0, false}}, func(x c) (time.Duration, bool) { return x.d, x.ok }, func(c) { t.Fatal("dropped") }), 1)
}
