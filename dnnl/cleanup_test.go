//go:build cgo && !nodnnl

package dnnl_test

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/int8bert/int8bert/dnnl"
	dc "github.com/int8bert/int8bert/dnnl/cgo"
)

// collect runs a garbage collection and waits until the cleanup of an
// object that became unreachable before it has run, so that the cleanups
// the collection queued have had their turn. Cleanups may run concurrently
// and in any order, so callers repeat it until the counts they wait for
// settle (a bounded number of rounds, not a time).
func collect() {
	done := make(chan struct{})
	// 64 bytes: not a tiny allocation, which the runtime may batch with
	// live ones and never clean up.
	p := new([64]byte)
	runtime.AddCleanup(p, func(c chan struct{}) { close(c) }, done)
	p = nil
	runtime.GC()
	<-done
}

// settle collects until the live counts stop changing or equal want, at
// most rounds times, and returns the last counts.
func settle(want *dc.LiveCounts, rounds int) dc.LiveCounts {
	last := dnnl.Live()
	for i := 0; i < rounds; i++ {
		collect()
		now := dnnl.Live()
		if (want != nil && now == *want) || (want == nil && now == last && i > 0) {
			return now
		}
		last = now
	}
	return last
}

// TestDroppedObjectsAreReleased drops an engine, two primitives (an INT8
// one and an FP32 one, which takes a scratchpad on the oneDNN versions we
// run: 2.6.3 pools one for K=768) and their packed weights without closing
// any of them, and checks through the shim's counters that the runtime's
// cleanups release every C handle and allocation. A primitive's cleanup
// holds its engine, so the engine goes in a later collection than its
// primitives, never before them.
func TestDroppedObjectsAreReleased(t *testing.T) {
	base := settle(nil, 20) // what earlier tests dropped is gone first
	cfgs := []dnnl.MatMulConfig{
		{M: 4, K: 48, N: 32, Src: dnnl.U8, Weights: dnnl.S8, Dst: dnnl.F32,
			SrcScale: true, WeightScales: true, Bias: true, PostOps: []dnnl.PostOp{{Kind: dnnl.GELUErf}}},
		{M: 16, K: 768, N: 64, Src: dnnl.F32, Weights: dnnl.F32, Dst: dnnl.F32},
	}
	var pooled int
	func() {
		eng, err := dnnl.NewEngine()
		require.NoError(t, err)
		for i, cfg := range cfgs {
			fit(t, &cfg, uint64(7+i))
			p := makeProblem(t, cfg, cfg.M, uint64(7+i))
			mm, err := eng.NewMatMul(cfg)
			require.NoError(t, err)
			w, err := mm.PackWeights(p.w, p.scales, 1)
			require.NoError(t, err)
			a := p.args
			a.M, a.Src, a.Dst, a.Threads = cfg.M, p.src, make([]float32, cfg.M*cfg.N), 1
			require.NoError(t, mm.Execute(w, &a))
		}
		now := dnnl.Live()
		assert.Equal(t, base.Engines+1, now.Engines, "engines while in use")
		assert.Equal(t, base.MatMuls+2, now.MatMuls, "matmuls while in use")
		assert.Equal(t, base.Layouts+2, now.Layouts, "layouts while in use")
		// The two packed weights, and each scratchpad a primitive needs (it
		// stays in the primitive's pool after Execute).
		require.GreaterOrEqual(t, now.Allocs, base.Allocs+2, "allocations while in use")
		pooled = now.Allocs - base.Allocs - 2
	}()
	t.Logf("dropped an engine, two matmuls (%d pooled scratchpads) and their weights unclosed", pooled)
	got := settle(&base, 20)
	assert.Equal(t, base, got, "live C handles after the dropped objects' cleanups")
}

// TestCloseStopsCleanup closes everything explicitly, then collects: the
// counts must come back to the baseline exactly once (a cleanup that Close
// did not stop would release a second time and drive them below it).
func TestCloseStopsCleanup(t *testing.T) {
	base := settle(nil, 20)
	cfg := dnnl.MatMulConfig{M: 3, K: 20, N: 16, Src: dnnl.F32, Weights: dnnl.F32, Dst: dnnl.F32}
	p := makeProblem(t, cfg, 3, 8)
	func() {
		eng, err := dnnl.NewEngine()
		require.NoError(t, err)
		mm, err := eng.NewMatMul(cfg)
		require.NoError(t, err)
		w, err := mm.PackWeights(p.w, nil, 1)
		require.NoError(t, err)
		a := p.args
		a.M, a.Src, a.Dst, a.Threads = 3, p.src, make([]float32, 3*16), 1
		require.NoError(t, mm.Execute(w, &a))
		require.NoError(t, w.Close())
		require.NoError(t, mm.Close())
		require.NoError(t, eng.Close())
		assert.Equal(t, base, dnnl.Live(), "live C handles right after Close")
	}()
	for i := 0; i < 3; i++ {
		collect()
	}
	assert.Equal(t, base, dnnl.Live(), "live C handles after collecting closed objects")
}
