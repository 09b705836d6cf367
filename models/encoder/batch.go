package encoder

import (
	"context"
	"fmt"
	"slices"
	"sort"

	"github.com/int8bert/int8bert/tokenizer"
)

// DefaultMaxBatchTokens is the token budget of one forward pass of a
// Pipeline call (rows x padded length) when Options.MaxBatchTokens is 0.
// Its buffers take about 20 MB on a 4-layer, 256-wide model and 60 MB
// (FP32) to 95 MB (INT8) on BERT-base; 2048 rows is past the size where
// the GEMMs stop getting faster per row.
const DefaultMaxBatchTokens = 2048

// encodeChunk is how many inputs a call tokenizes at a time: the
// tokenizer's Encodings of one chunk (Options.InputsOnly: ids, types and
// mask, 12 bytes a token) are garbage once its tokens are kept.
const encodeChunk = 1024

// tokens is one sequence of a call as the model reads it: ids, token
// types (nil: all 0) and attention mask (nil: all 1). A call keeps these
// rather than the Encodings, so what it holds for its inputs is about 4
// bytes a token.
type tokens struct{ ids, types, mask []int32 }

// compact keeps what the model reads of e.
func compact(e *tokenizer.Encoding) tokens {
	t := tokens{ids: slices.Clone(e.IDs)}
	if slices.ContainsFunc(e.TypeIDs, func(v int32) bool { return v != 0 }) {
		t.types = slices.Clone(e.TypeIDs)
	}
	if slices.ContainsFunc(e.AttentionMask, func(v int32) bool { return v != 1 }) {
		t.mask = slices.Clone(e.AttentionMask)
	}
	return t
}

// encodeAll tokenizes n inputs encodeChunk at a time (chunk encodes the
// inputs [lo, hi), one encodes input i alone) and keeps their tokens. ctx
// is checked between chunks, and by the tokenizer's workers within one.
func encodeAll(ctx context.Context, n int, chunk func(lo, hi int) ([]tokenizer.Encoding, error), one func(i int) error) ([]tokens, error) {
	out := make([]tokens, 0, n)
	for lo := 0; lo < n; lo += encodeChunk {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		hi := min(lo+encodeChunk, n)
		encs, err := chunk(lo, hi)
		if err != nil {
			if cerr := ctx.Err(); cerr != nil {
				return nil, cerr
			}
			// The tokenizer numbers the items of its batch, the chunk:
			// name the input of the call instead.
			for i := lo; i < hi && lo > 0; i++ {
				if ierr := one(i); ierr != nil {
					return nil, fmt.Errorf("batch item %d: %w", i, ierr)
				}
			}
			return nil, err
		}
		for i := range encs {
			out = append(out, compact(&encs[i]))
		}
	}
	return out, nil
}

// microBatch is one forward pass of a call: indices into the call's
// sequences, longest first, and the length they are padded to.
type microBatch struct {
	idx []int
	seq int
}

// tokens is the pass's size in tokens, padding included.
func (b microBatch) tokens() int { return len(b.idx) * b.seq }

// planBatches groups sequences of lengths lens into micro-batches of at
// most budget tokens each (rows x padded length): sorted longest first
// (stable), neighbours batched, so that each batch's rows have about the
// same length and little padding is computed. A sequence longer than
// budget is a batch alone. Every index appears in exactly one batch.
func planBatches(lens []int, budget int) []microBatch {
	order := make([]int, len(lens))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return lens[order[a]] > lens[order[b]] })
	var out []microBatch
	for i := 0; i < len(order); {
		seq := lens[order[i]]
		j := min(i+max(budget/max(seq, 1), 1), len(order))
		out = append(out, microBatch{idx: order[i:j:j], seq: seq})
		i = j
	}
	return out
}

// stream runs seqs through the model in micro-batches (planBatches under
// p.maxBatchTokens), all on one set of buffers sized to the largest, so
// that a call's memory is bounded by the budget, not by len(seqs). ctx is
// checked between micro-batches and, by the model, between layers. each
// sees a batch's indices into seqs, its inputs and its outputs, which are
// valid only until it returns; an error from it ends the call. The caller
// has entered p.Model.
func (p *Pipeline) stream(ctx context.Context, seqs []tokens, each func(idx []int, in *Inputs, out *TaskOutput) error) error {
	if len(seqs) == 0 {
		return fmt.Errorf("encoder: empty batch: %w", ErrInput)
	}
	lens := make([]int, len(seqs))
	for i, s := range seqs {
		lens[i] = len(s.ids)
	}
	plan := planBatches(lens, p.maxBatchTokens)
	most := 0
	for _, b := range plan {
		most = max(most, b.tokens())
	}
	enc := p.Model.Encoder
	buf := enc.getBuffers(most)
	defer enc.putBuffers(buf)
	// One set of input arrays serves every micro-batch, as buf does.
	ids, mask := make([]int32, most), make([]int32, most)
	var types []int32
	if enc.Config().TypeVocab > 0 {
		types = make([]int32, most)
	}
	for _, b := range plan {
		if err := ctx.Err(); err != nil {
			return err
		}
		in := p.batchInputs(seqs, b, ids, mask, types)
		out, err := p.Model.forward(ctx, in, false, buf)
		if err != nil {
			return err
		}
		if err := each(b.idx, in, out); err != nil {
			return err
		}
	}
	return nil
}

// batchInputs pads the sequences of b into model inputs: the tokenizer's
// padding id, mask 0 and token type 0 after each sequence's end. The
// inputs are views of ids, mask and types (nil: the model has no token
// types), each at least b.tokens() long, which it overwrites.
func (p *Pipeline) batchInputs(seqs []tokens, b microBatch, ids, mask, types []int32) *Inputs {
	seq, n := b.seq, b.tokens()
	pad := int32(0)
	if p.Tok != nil {
		if sp := p.Tok.Special(); sp.PAD >= 0 {
			pad = sp.PAD
		}
	}
	in := &Inputs{Batch: len(b.idx), Seq: seq, IDs: ids[:n:n], Mask: mask[:n:n]}
	clear(in.Mask)
	if types != nil {
		in.TypeIDs = types[:n:n]
		clear(in.TypeIDs)
	}
	for r, i := range b.idx {
		s := seqs[i]
		ids, mask := in.IDs[r*seq:(r+1)*seq], in.Mask[r*seq:(r+1)*seq]
		k := copy(ids, s.ids)
		for j := k; j < seq; j++ {
			ids[j] = pad
		}
		if s.mask != nil {
			copy(mask, s.mask)
		} else {
			for j := 0; j < k; j++ {
				mask[j] = 1
			}
		}
		if in.TypeIDs != nil && s.types != nil {
			copy(in.TypeIDs[r*seq:(r+1)*seq], s.types)
		}
	}
	return in
}

// logits runs seqs through the model and gathers their logits in the
// order of seqs ([len(seqs)][labels]); only Logits (and Batch, Hidden) of
// the result are set.
func (p *Pipeline) logits(ctx context.Context, seqs []tokens) (*TaskOutput, error) {
	n := len(p.Model.Labels)
	out := &TaskOutput{Output: &Output{Batch: len(seqs), Hidden: p.Model.Encoder.Config().Hidden},
		Logits: make([]float32, len(seqs)*n)}
	err := p.stream(ctx, seqs, func(idx []int, _ *Inputs, o *TaskOutput) error {
		if len(o.Logits) != len(idx)*n {
			return fmt.Errorf("encoder: internal error: %d logits for %d sequences of %d labels", len(o.Logits), len(idx), n)
		}
		for r, i := range idx {
			copy(out.Logits[i*n:(i+1)*n], o.Logits[r*n:(r+1)*n])
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
