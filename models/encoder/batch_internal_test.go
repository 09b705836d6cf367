package encoder

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/int8bert/int8bert/selector"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPlanBatches: every sequence is in exactly one packed pass, each
// pass holds at most the budget in real tokens (a longer sequence alone)
// and stops only where the next sequence would go over, records its
// longest length and its token count, and passes run longest first.
func TestPlanBatches(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for trial := 0; trial < 200; trial++ {
		n := 1 + r.IntN(300)
		lens := make([]int, n)
		for i := range lens {
			lens[i] = 1 + r.IntN(80)
		}
		budget := 1 + r.IntN(600)
		plan := planBatches(lens, budget)
		seen := make([]bool, n)
		prev := -1
		for bi, b := range plan {
			require.NotEmpty(t, b.idx, "batch %d", bi)
			longest, sum := 0, 0
			for k, i := range b.idx {
				require.False(t, seen[i], "index %d in two batches", i)
				seen[i] = true
				longest = max(longest, lens[i])
				sum += lens[i]
				if k > 0 {
					require.LessOrEqual(t, lens[i], lens[b.idx[k-1]], "batch %d is not sorted longest first", bi)
				}
			}
			require.Equal(t, longest, b.seq, "batch %d: longest %d, recorded %d", bi, longest, b.seq)
			require.Equal(t, sum, b.tokens(), "batch %d: its tokens are the sum of its lengths", bi)
			if len(b.idx) > 1 {
				require.LessOrEqual(t, b.tokens(), budget, "batch %d: %d tokens over the budget %d", bi, b.tokens(), budget)
			}
			// Greedy: the next sequence would have been over.
			if bi+1 < len(plan) {
				require.Greater(t, b.tokens()+lens[plan[bi+1].idx[0]], budget, "batch %d stopped short of the budget", bi)
			}
			if prev >= 0 {
				require.LessOrEqual(t, b.seq, prev, "batches are not longest first")
			}
			prev = b.seq
		}
		for i, ok := range seen {
			require.True(t, ok, "index %d in no batch", i)
		}
	}
	assert.Empty(t, planBatches(nil, 10))
	// A sequence longer than the budget runs alone; packing fills a pass
	// with whatever fits (7 + 3 = 10).
	plan := planBatches([]int{50, 3, 3, 7, 2}, 10)
	require.Len(t, plan, 3)
	assert.Equal(t, []int{0}, plan[0].idx)
	assert.Equal(t, []int{3, 1}, plan[1].idx)
	assert.Equal(t, []int{2, 4}, plan[2].idx)
}

// tinyModel is a random 3-layer tinyConfig model on sel (nil: a test
// selector).
func tinyModel(t *testing.T, sel *selector.Selector) *Model {
	t.Helper()
	c := tinyConfig()
	c.Layers = 3
	if sel == nil {
		sel = testSelector(t)
	}
	m, err := newModel(c, NewLoader(randomSource(c, false)), BERTNames(""), sel, Options{})
	require.NoError(t, err)
	t.Cleanup(func() { m.Close() })
	return m
}

// TestForwardStopsBetweenLayers: a context cancelled while layer 1 runs
// ends the pass before layer 2 starts, with context.Canceled (checked
// without any timing: the calibration observer sees every linear's input,
// so it knows which layers ran).
func TestForwardStopsBetweenLayers(t *testing.T) {
	m := tinyModel(t, nil)
	in := &Inputs{Batch: 2, Seq: 3, IDs: []int32{1, 2, 3, 4, 5, 0}, Mask: []int32{1, 1, 1, 1, 1, 0}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var ran []int
	obs := func(li, which int, x []float32, k int, mask []int32) error {
		if which == linQKV {
			ran = append(ran, li)
		}
		if li == 1 && which == linFFN2 {
			cancel()
		}
		return nil
	}
	_, err := m.forward(ctx, in, false, obs, nil)
	require.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, []int{0, 1}, ran, "layers that ran")
	// A context that is done already runs nothing.
	ran = nil
	_, err = m.forward(ctx, in, false, obs, nil)
	require.ErrorIs(t, err, context.Canceled)
	assert.Empty(t, ran)
	dctx, dcancel := context.WithDeadline(context.Background(), time.Unix(0, 0))
	defer dcancel()
	_, err = m.ForwardContext(dctx, in, false)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	// The model still runs afterwards.
	_, err = m.ForwardContext(context.Background(), in, false)
	require.NoError(t, err)
}

// tinyStreamer is a base-task model over a tiny random model with a
// token budget, for Stream on token sequences (as a pipeline of package
// models streams its calls).
type tinyStreamer struct {
	Model  *TaskModel
	budget int
}

func tinyPipeline(t *testing.T, sel *selector.Selector, budget int) *tinyStreamer {
	t.Helper()
	m := tinyModel(t, sel)
	return &tinyStreamer{Model: &TaskModel{Family: &Family{Name: "test"}, Task: TaskBase, Encoder: m}, budget: budget}
}

func (p *tinyStreamer) stream(ctx context.Context, seqs []Tokens, each func(idx []int, in *Inputs, out *TaskOutput) error) error {
	return p.Model.Stream(ctx, seqs, p.budget, each)
}

func randomSeqs(r *rand.Rand, n, vocab, most int) []Tokens {
	seqs := make([]Tokens, n)
	for i := range seqs {
		l := 1 + r.IntN(most)
		for j := 0; j < l; j++ {
			seqs[i].IDs = append(seqs[i].IDs, int32(1+r.IntN(vocab-1)))
			seqs[i].Types = append(seqs[i].Types, int32(r.IntN(2)))
		}
	}
	return seqs
}

// TestStreamStopsBetweenBatches: cancelling during a micro-batch's
// outputs ends the call before the next micro-batch runs.
func TestStreamStopsBetweenBatches(t *testing.T) {
	p := tinyPipeline(t, nil, 6)
	seqs := randomSeqs(rand.New(rand.NewPCG(1, 1)), 20, 11, 6)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	calls := 0
	err := p.stream(ctx, seqs, func(idx []int, in *Inputs, out *TaskOutput) error {
		calls++
		cancel()
		return nil
	})
	require.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, 1, calls)
	require.ErrorIs(t, p.stream(context.Background(), nil, nil), ErrInput, "no sequences")
}

// TestStreamMatchesOneByOne: the hidden states stream gives each
// sequence, in packed passes of several budgets, are those of the
// sequence run alone (padded layout, batch 1) bit for bit: a packed pass
// computes no padding, attention runs on each sequence's own rows, and
// the kernels are forced to the generic ones, so that the number of rows
// of a pass does not change which kernel runs (the linears' rows are
// independent). Every pass is packed: real tokens = computed tokens.
func TestStreamMatchesOneByOne(t *testing.T) {
	sel, err := selector.New(selector.Options{CachePath: "off", Force: "generic", Reps: 1, RepTime: 100 * time.Microsecond})
	require.NoError(t, err)
	t.Cleanup(func() { sel.Close() })
	r := rand.New(rand.NewPCG(3, 4))
	seqs := randomSeqs(r, 40, 11, 6)
	h := tinyConfig().Hidden
	for _, budget := range []int{1, 6, 13, 64, 1000} {
		p := tinyPipeline(t, sel, budget)
		alone := make([][]float32, len(seqs))
		for i, s := range seqs {
			out, err := p.Model.Encoder.Forward(&Inputs{Batch: 1, Seq: len(s.IDs), IDs: s.IDs, TypeIDs: s.Types, Mask: slices.Repeat([]int32{1}, len(s.IDs))}, false)
			require.NoError(t, err)
			alone[i] = out.Last
		}
		got := make([][]float32, len(seqs))
		batches := 0
		err := p.stream(context.Background(), seqs, func(idx []int, in *Inputs, out *TaskOutput) error {
			batches++
			require.NotNil(t, in.Lens, "a pipeline pass is packed")
			require.Len(t, in.IDs, in.Tokens())
			require.LessOrEqual(t, in.Tokens(), max(budget, in.Seq), "pass over the budget")
			require.Len(t, out.Last, in.Tokens()*h, "no padding computed")
			for r, i := range idx {
				start, end := out.Rows(r)
				require.Equal(t, len(seqs[i].IDs), end-start)
				got[i] = slices.Clone(out.Last[start*h : end*h])
			}
			return nil
		})
		require.NoError(t, err)
		assert.Equal(t, len(planBatches(lensOf(seqs), budget)), batches)
		for i := range seqs {
			require.Equal(t, alone[i], got[i], "budget %d sequence %d", budget, i)
		}
	}
}

func lensOf(seqs []Tokens) []int {
	out := make([]int, len(seqs))
	for i, s := range seqs {
		out[i] = len(s.IDs)
	}
	return out
}

// TestGateCloseWaits: close waits for the calls admitted, refuses new
// ones, runs the release once, and a second close returns nil after it.
func TestGateCloseWaits(t *testing.T) {
	var g gate
	require.NoError(t, g.enter())
	require.NoError(t, g.enter(), "entering is reentrant")
	released := make(chan struct{})
	closed := make(chan error, 1)
	go func() {
		closed <- g.close(func() error { close(released); return nil })
	}()
	// Once close has begun, enter refuses; the release waits for both leaves.
	for g.enter() == nil {
		g.leave()
	}
	select {
	case <-released:
		t.Fatal("released with calls in flight")
	default:
	}
	g.leave()
	select {
	case <-released:
		t.Fatal("released with a call in flight")
	default:
	}
	g.leave()
	<-released
	require.NoError(t, <-closed)
	require.ErrorIs(t, g.enter(), ErrClosed)
	require.NoError(t, g.close(func() error { t.Fatal("released twice"); return nil }))
}

// TestWarmupKeepsBuffers: after Warmup the model holds one set of pass
// buffers for the warm-up's largest pass, which survives garbage
// collections and serves every pass within the bounds (one at a time);
// a concurrent second pass gets a set of its own, and Close lets it go.
func TestWarmupKeepsBuffers(t *testing.T) {
	p := tinyPipeline(t, nil, 64)
	m := p.Model.Encoder
	require.NoError(t, p.Model.Warmup(context.Background(), WarmupOptions{MaxBatch: 4, MaxLength: 6}))
	kept := m.scratchPool.kept
	require.NotNil(t, kept)
	assert.Equal(t, 24, kept.rows, "MaxBatch x MaxLength, under the budget")
	runtime.GC()
	runtime.GC()
	b := m.getBuffers(24)
	assert.Same(t, kept, b, "the kept set, after two collections")
	other := m.getBuffers(5)
	assert.NotSame(t, kept, other, "a second pass while the first holds the kept set")
	m.putBuffers(other)
	m.putBuffers(b)
	assert.Same(t, kept, m.getBuffers(3), "a smaller pass takes the kept set too")
	m.putBuffers(kept)
	big := m.getBuffers(25)
	assert.NotSame(t, kept, big, "a pass past the bounds")
	m.putBuffers(big)
	// A warm-up bounded by a token budget (a pipeline's, which
	// models.Pipeline.Warmup passes as MaxTokens) keeps that many rows.
	require.NoError(t, p.Model.Warmup(context.Background(), WarmupOptions{MaxBatch: 100, MaxLength: 6, MaxTokens: 64}))
	assert.Equal(t, 64, m.scratchPool.kept.rows)
	require.NoError(t, p.Model.Close())
	assert.Nil(t, m.scratchPool.kept, "Close lets the kept set go")
}

// TestScratchBytes: the estimate is what the pass buffers take, for FP32
// and INT8 passes, with and without an embedding projection, and a
// model's own matches its buffers.
func TestScratchBytes(t *testing.T) {
	bert := Config{Hidden: 768, Intermediate: 3072}
	proj := Config{Hidden: 256, Intermediate: 1024, Embedding: 128}
	for _, c := range []Config{tinyConfig(), bert, proj} {
		for _, int8 := range []bool{false, true} {
			for _, rows := range []int{1, 7, 2048} {
				assert.Equal(t, newBuffersFor(c, int8, rows).bytes(), scratchBytes(c, int8, rows), "%+v int8 %v rows %d", c, int8, rows)
			}
		}
	}
	// BERT-base INT8: about 47 KB a token (docs/DESIGN.md section 9.9).
	assert.InDelta(t, 47.6e3, float64(scratchBytes(bert, true, 1)), 0.5e3)
	m := tinyModel(t, nil)
	assert.Equal(t, m.newBuffers(100).bytes(), m.ScratchBytes(100))
}

// TestPassIsARequest: a pass is a request in flight for the selector's
// background tuner (selector.BeginRequest, docs/DESIGN.md section 4.8)
// from its first linear to its last, and no longer once it has returned,
// failed or not.
func TestPassIsARequest(t *testing.T) {
	sel := testSelector(t)
	m := tinyModel(t, sel)
	in := &Inputs{Batch: 1, Seq: 3, IDs: []int32{1, 2, 3}, Mask: []int32{1, 1, 1}}
	seen := 0
	obs := func(li, which int, x []float32, k int, mask []int32) error {
		assert.Equal(t, 1, sel.Stats().Requests, "layer %d, linear %d", li, which)
		seen++
		return nil
	}
	_, err := m.forward(context.Background(), in, false, obs, nil)
	require.NoError(t, err)
	assert.Positive(t, seen)
	assert.Equal(t, 0, sel.Stats().Requests)
	fail := func(li, which int, x []float32, k int, mask []int32) error { return errors.New("stop") }
	_, err = m.forward(context.Background(), in, false, fail, nil)
	require.Error(t, err)
	assert.Equal(t, 0, sel.Stats().Requests, "a failed pass ends its request")
}
