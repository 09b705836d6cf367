package selector

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/int8bert/int8bert/internal/threadcpu"
	"github.com/int8bert/int8bert/kernels"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tiledKernel is fakeKernel with an mr x 32 register tile, recording the
// M of each call.
func tiledKernel(name string, mr int, seen *sync.Map) *kernels.Kernel {
	k := fakeKernel(name, "test-isa", false)
	k.MR = mr
	inner := k.RunU8S8
	k.RunU8S8 = func(g *kernels.GEMMU8S8) error {
		if seen != nil {
			seen.Store(g.M, name)
		}
		return inner(g)
	}
	return k
}

// spinCPU keeps the calling thread busy for d of its CPU time (of wall
// time where the OS does not count a thread's).
func spinCPU(d time.Duration) {
	if d <= 0 {
		return
	}
	start, ok := threadcpu.Now()
	wall := time.Now()
	for {
		if now, _ := threadcpu.Now(); ok && now-start >= d || !ok && time.Since(wall) >= d {
			return
		}
	}
}

// TestTileRows: the row model's work in full tiles (docs/DESIGN.md
// section 4.4): a partial tile costs half a tile plus its share of the
// other half; a candidate without a tile is linear in M.
func TestTileRows(t *testing.T) {
	for _, c := range []struct {
		m, mr int
		want  float64
	}{{16, 8, 2}, {12, 6, 2}, {12, 8, 1.75}, {15, 8, 1.9375}, {16, 6, 2 + 0.5 + 0.5*4.0/6}, {1, 6, 0.5 + 0.5/6}, {7, 0, 7}} {
		assert.InDelta(t, c.want, tileRows(c.m, c.mr), 1e-12, "m=%d mr=%d", c.m, c.mr)
	}
}

// TestRowClassPicks: a key is tuned at its class's M (16 here), and a call
// of fewer rows runs the measured candidate the tile model predicts
// fastest at its exact M: at 12 rows the 6-row tile (two full tiles, no
// waste) beats the 8-row tile that was 10% faster at 16; at 15 rows the
// 8-row tile wins again. Classes of at most two rows, and a choice with
// one measured candidate, pick nothing.
func TestRowClassPicks(t *testing.T) {
	var w warnings
	o := testOptions(t, &w)
	o.CachePath = "off"
	k8, k6 := tiledKernel("gemmEight_8x32", 8, nil), tiledKernel("gemmSix_6x32", 6, nil)
	s := newSelectorWith(t, o, withKernels(t, k8, k6))
	key := mustKey(t, 16, 16, 32, "none/s32", 1)
	ch := &Choice{Key: key.String(), Kernel: k8.Name, Measured: []Measurement{
		{Kernel: k8.Name, Median: 100 * time.Microsecond}, {Kernel: k6.Name, Median: 110 * time.Microsecond}}}
	s.setPicks(ch, key)
	require.Len(t, ch.picks, 7, "the class's rows 9..15")
	assert.Equal(t, k6.Name, ch.pickAt(12, 16))
	assert.Equal(t, k8.Name, ch.pickAt(15, 16))
	assert.Equal(t, "", ch.pickAt(16, 16), "the class's own M runs its Kernel")
	assert.Equal(t, "", ch.pickAt(8, 16), "below the class: not its call")

	small := &Choice{Key: key.String(), Kernel: k8.Name, Measured: ch.Measured}
	key2 := mustKey(t, 2, 16, 32, "none/s32", 1)
	s.setPicks(small, key2)
	assert.Nil(t, small.picks)
	one := &Choice{Key: key.String(), Kernel: k8.Name, Measured: ch.Measured[:1]}
	s.setPicks(one, key)
	assert.Nil(t, one.picks)
}

// TestRowClassRun: a linear's call of M rows runs the pick of its class's
// choice for M (the weights packed for it), and its result is exact.
func TestRowClassRun(t *testing.T) {
	var w warnings
	o := testOptions(t, &w)
	o.CachePath, o.Force = "off", "test-isa" // the two test kernels only
	var seen sync.Map
	k8, k6 := tiledKernel("gemmEight_8x32", 8, &seen), tiledKernel("gemmSix_6x32", 6, &seen)
	s := newSelectorWith(t, o, withKernels(t, k8, k6))
	for _, m := range []int{9, 12, 15} {
		p := newProblem(t, uint64(m), m, 16, 32, "none/s32", 0)
		runLinear(t, s, p, 0)
		key := mustKey(t, m, 16, 32, "none/s32", 1)
		require.Equal(t, 16, key.M, "m=%d is in class 16", m)
		ch, err := s.Choose(key)
		require.NoError(t, err)
		want := ch.pickAt(m, 16)
		if want == "" {
			want = ch.Kernel
		}
		got, ok := seen.Load(m)
		if assert.True(t, ok, "m=%d ran no test kernel (%v)", m, ch) {
			assert.Equal(t, want, got, "m=%d: %v", m, ch)
		}
	}
}

// TestDeriveAbove: a linear's key of a row class above Options.DeriveAbove
// takes the choice of the class at DeriveAbove, tuned once: the same
// kernel and candidates, times scaled by the rows; a negative DeriveAbove
// tunes it itself, and attention's products are never derived.
func TestDeriveAbove(t *testing.T) {
	var w warnings
	o := testOptions(t, &w)
	o.CachePath, o.DeriveAbove = "off", 16
	s := newSelectorWith(t, o, compiledKernels())
	big := mustKey(t, 60, 32, 64, "zp+scale+colscale+bias/f32", 1) // class 64
	ch, err := s.Choose(big)
	require.NoError(t, err)
	base := big
	base.M = 16
	assert.Equal(t, base.String(), ch.DerivedFrom)
	b, err := s.Choose(base)
	require.NoError(t, err)
	assert.Equal(t, b.Kernel, ch.Kernel)
	require.Len(t, ch.Measured, len(b.Measured))
	for i := range b.Measured {
		assert.Equal(t, b.Measured[i].Kernel, ch.Measured[i].Kernel)
		assert.Equal(t, 4*b.Measured[i].Median, ch.Measured[i].Median)
	}
	assert.Equal(t, int64(1), s.tuned.Load(), "one tuning, of the class at 16")
	assert.Contains(t, ch.String(), "derived from "+base.String())

	p := newProblem(t, 7, 60, 32, 64, "zp+scale+colscale+bias/f32", 0)
	runLinear(t, s, p, 0) // exact with the derived choice

	o = testOptions(t, &w)
	o.CachePath, o.DeriveAbove = "off", -1
	s = newSelectorWith(t, o, compiledKernels())
	ch, err = s.Choose(big)
	require.NoError(t, err)
	assert.Empty(t, ch.DerivedFrom, "DeriveAbove -1 tunes every class")

	o.DeriveAbove = 16
	s = newSelectorWith(t, o, compiledKernels())
	ch, err = s.Choose(F32KernelKey(60, 64, 60, 1))
	require.NoError(t, err)
	assert.Empty(t, ch.DerivedFrom, "attention's products are tuned per class")
}

// TestAdoptTuningPacksLater: with background tuning, a call whose tuned
// choice's weights are not packed yet runs on the form already packed (the
// default's) while the new form is packed in the background, and the
// calls after run the tuned kernel; every result is exact.
func TestAdoptTuningPacksLater(t *testing.T) {
	var w warnings
	o := testOptions(t, &w)
	o.CachePath, o.Force, o.Tuning = "off", "test-isa", TuneBackground
	// What ran on the calls' A (the tuner's trials run on their own).
	var ran sync.Map
	record := func(k *kernels.Kernel, busy time.Duration) *kernels.Kernel {
		inner := k.RunU8S8
		k.RunU8S8 = func(g *kernels.GEMMU8S8) error {
			ran.Store(&g.A[0], k.Name)
			spinCPU(busy)
			return inner(g)
		}
		return k
	}
	// The default (no waste at M 4, the larger tile) is busy for 3 ms of
	// CPU time a call: a background key of one thread is timed in the
	// tuner thread's CPU time, where a sleep would cost nothing.
	slow := record(tiledKernel("gemmSlowWide_4x32", 4, nil), 3*time.Millisecond)
	fast := record(tiledKernel("gemmFastNarrow_1x16", 1, nil), 0)
	fast.NR = 16
	s := newSelectorWith(t, o, withKernels(t, slow, fast))
	p := newProblem(t, 5, 4, 16, 32, "none/s32", 0)
	key := mustKey(t, 4, 16, 32, "none/s32", 1)

	l, err := s.NewLinear(p.n, p.k, p.w, p.k)
	require.NoError(t, err)
	defer l.Close()
	call := func() string {
		ran.Delete(&p.a[0])
		out := newOut(p.kind.Out, p.m, p.n)
		g := &kernels.GEMMU8S8{M: p.m, A: p.a, Lda: p.lda, Ep: p.ep, Out: out, Threads: 1}
		require.NoError(t, l.Run(g))
		compare(t, "call", p.kind.Out, p.m, p.n, p.n, out, p.want(t, p.n))
		name, _ := ran.Load(&p.a[0])
		s, _ := name.(string)
		return s
	}
	assert.Equal(t, slow.Name, call(), "the default runs first")
	require.NoError(t, s.WaitTuned(context.Background()))
	ch, err := s.Choose(key)
	require.NoError(t, err)
	require.Equal(t, fast.Name, ch.Kernel, "%v", ch)
	before := s.Stats()
	// The call is a request in flight, so the packing it starts waits for
	// it (yieldToRequests), up to its deadline: should the call outlast
	// that, the form is packed meanwhile and the call may run it, packed
	// in the background all the same.
	s.BeginRequest()
	got := call()
	s.EndRequest()
	if after := s.Stats(); got != slow.Name {
		assert.Equal(t, fast.Name, got)
		assert.Equal(t, before.PacksLater+1, after.PacksLater, "the tuned kernel ran on a form packed in the background: %+v", after)
	} else {
		assert.Equal(t, before.Packs-before.PacksLater, after.Packs-after.PacksLater, "the call packed nothing: %+v", after)
	}
	require.Eventually(t, func() bool { return l.ready(l.op.byName[fast.Name]) }, 10*time.Second, time.Millisecond)
	assert.Equal(t, fast.Name, call(), "once packed, the tuned kernel runs")
}
