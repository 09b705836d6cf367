package encoder

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
)

// Tokens is one sequence as the model reads it: ids, token types (nil:
// all 0) and attention mask (nil: all 1). The pipelines above keep these
// rather than the tokenizer's encodings, so what a call holds for its
// inputs is about 4 bytes a token.
type Tokens struct{ IDs, Types, Mask []int32 }

// microBatch is one forward pass of a call: indices into the call's
// sequences, longest first, the longest length and the sum of the
// lengths (the pass's tokens, packed: docs/DESIGN.md section 2.2).
type microBatch struct {
	idx []int
	seq int
	n   int
}

// tokens is the pass's size in tokens: packed, the sequences' own tokens.
func (b microBatch) tokens() int { return b.n }

// planBatches groups sequences of lengths lens into packed passes of at
// most budget tokens each (the sum of their lengths: nothing is padded),
// sorted longest first (stable) and cut greedily. The sort is kept
// though packing does not need it: neighbours of equal length share
// attention's kernels (asked once per run of a length) and a pass's
// sequences about the same work. A sequence longer than budget is a pass
// alone. Every index appears in exactly one pass.
func planBatches(lens []int, budget int) []microBatch {
	order := make([]int, len(lens))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return lens[order[a]] > lens[order[b]] })
	var out []microBatch
	for i := 0; i < len(order); {
		b := microBatch{seq: lens[order[i]]}
		j := i
		for j < len(order) && (j == i || b.n+lens[order[j]] <= budget) {
			b.n += lens[order[j]]
			j++
		}
		b.idx = order[i:j:j]
		out = append(out, b)
		i = j
	}
	return out
}

// Stream runs seqs through the model in packed passes (planBatches under
// budget tokens: no padding computed, docs/DESIGN.md section 2.2), all on
// one set of buffers sized to the largest, so that a call's memory is
// bounded by the budget, not by len(seqs). ctx is checked between passes
// and, by the model, between layers. each sees a pass's indices into
// seqs, its inputs and its outputs, which are valid only until it
// returns; an error from it ends the call. The caller has entered m
// (Enter): the pipelines hold the model over their whole call.
func (m *TaskModel) Stream(ctx context.Context, seqs []Tokens, budget int, each func(idx []int, in *Inputs, out *TaskOutput) error) error {
	return m.StreamWith(ctx, seqs, budget, StreamOptions{}, each)
}

// StreamWith is Stream with options: sequences no longer wanted leave
// their passes between layers (StreamOptions.Wanted; each then sees only
// the rows left, and a pass none is left of is not shown), and the
// call's token counts (StreamOptions.Stats).
func (m *TaskModel) StreamWith(ctx context.Context, seqs []Tokens, budget int, o StreamOptions, each func(idx []int, in *Inputs, out *TaskOutput) error) error {
	if len(seqs) == 0 {
		return fmt.Errorf("encoder: empty batch: %w", ErrInput)
	}
	lens := make([]int, len(seqs))
	total := 0
	for i, s := range seqs {
		lens[i] = len(s.IDs)
		total += lens[i]
	}
	enc := m.Encoder
	layers := enc.pass.numLayers()
	if o.Stats != nil {
		o.Stats.Tokens += total
		o.Stats.Layers = layers
	}
	plan := planBatches(lens, budget)
	most, mostSeqs := 0, 0
	for _, b := range plan {
		most, mostSeqs = max(most, b.tokens()), max(mostSeqs, len(b.idx))
	}
	buf := enc.getBuffers(most)
	defer enc.putBuffers(buf)
	// One set of input arrays serves every pass, as buf does.
	ar := packArrays{ids: make([]int32, most), lens: make([]int, mostSeqs)}
	if enc.Config().TypeVocab > 0 {
		ar.types = make([]int32, most)
	}
	var live *passLive
	if o.Wanted != nil {
		live = &passLive{wanted: o.Wanted, idx: make([]int, 0, mostSeqs)}
	}
	for _, b := range plan {
		if err := ctx.Err(); err != nil {
			return err
		}
		if live != nil {
			// A sequence gone before its pass starts costs nothing.
			live.idx, live.dropped, live.tokenLayers = live.idx[:0], false, 0
			b.seq, b.n = 0, 0
			for _, i := range b.idx {
				if o.Wanted(0, i) {
					live.idx = append(live.idx, i)
					b.seq, b.n = max(b.seq, lens[i]), b.n+lens[i]
				}
			}
			if len(live.idx) == 0 {
				continue
			}
			b.idx = live.idx
		}
		in := packInputs(seqs, b, &ar)
		out, err := m.forwardLive(ctx, in, false, buf, live)
		if o.Stats != nil {
			if live != nil {
				o.Stats.TokenLayers += live.tokenLayers
			} else if err == nil {
				o.Stats.TokenLayers += b.tokens() * layers
			}
		}
		if errors.Is(err, errNoneLive) {
			continue
		}
		if err != nil {
			return err
		}
		idx := b.idx
		if live != nil {
			idx = live.idx
		}
		if err := each(idx, in, out); err != nil {
			return err
		}
	}
	return nil
}

// packArrays are the input arrays of a call's packed passes, each at
// least as long as its largest pass needs; mask is made on the first
// pass holding a sequence with a mask of its own.
type packArrays struct {
	ids, types, mask []int32
	lens             []int
}

// packInputs packs the sequences of b back to back into model inputs
// (docs/DESIGN.md section 2.2), views of ar's arrays, which it
// overwrites. TypeIDs are nil when the model has no token types; Mask is
// nil unless a sequence of b has a mask (the tokenizer's are all 1 and
// are not kept).
func packInputs(seqs []Tokens, b microBatch, ar *packArrays) *Inputs {
	n := b.tokens()
	in := &Inputs{Batch: len(b.idx), Seq: b.seq, IDs: ar.ids[:n:n], Lens: ar.lens[:len(b.idx):len(b.idx)]}
	masked := slices.ContainsFunc(b.idx, func(i int) bool { return seqs[i].Mask != nil })
	if masked {
		if len(ar.mask) < n {
			ar.mask = make([]int32, len(ar.ids))
		}
		in.Mask = ar.mask[:n:n]
	}
	if ar.types != nil {
		in.TypeIDs = ar.types[:n:n]
	}
	off := 0
	for r, i := range b.idx {
		s := seqs[i]
		k := len(s.IDs)
		in.Lens[r] = k
		copy(in.IDs[off:off+k], s.IDs)
		if in.TypeIDs != nil {
			if s.Types != nil {
				copy(in.TypeIDs[off:off+k], s.Types)
			} else {
				clear(in.TypeIDs[off : off+k])
			}
		}
		if masked {
			if s.Mask != nil {
				copy(in.Mask[off:off+k], s.Mask)
			} else {
				for j := off; j < off+k; j++ {
					in.Mask[j] = 1
				}
			}
		}
		off += k
	}
	return in
}
