package encoder

import (
	"context"
	"fmt"
	"slices"
	"sort"

	"github.com/int8bert/int8bert/tokenizer"
)

// DefaultMaxBatchTokens is the token budget of one forward pass of a
// Pipeline call (the real tokens of a packed pass, docs/DESIGN.md section
// 2.3) when Options.MaxBatchTokens is 0.
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

// stream runs seqs through the model in packed passes (planBatches under
// p.maxBatchTokens: no padding computed), all on one set of buffers sized
// to the largest, so that a call's memory is bounded by the budget, not
// by len(seqs). ctx is checked between passes and, by the model, between
// layers. each sees a pass's indices into seqs, its inputs and its
// outputs, which are valid only until it returns; an error from it ends
// the call. The caller has entered p.Model.
func (p *Pipeline) stream(ctx context.Context, seqs []tokens, each func(idx []int, in *Inputs, out *TaskOutput) error) error {
	if len(seqs) == 0 {
		return fmt.Errorf("encoder: empty batch: %w", ErrInput)
	}
	lens := make([]int, len(seqs))
	for i, s := range seqs {
		lens[i] = len(s.ids)
	}
	plan := planBatches(lens, p.maxBatchTokens)
	most, mostSeqs := 0, 0
	for _, b := range plan {
		most, mostSeqs = max(most, b.tokens()), max(mostSeqs, len(b.idx))
	}
	enc := p.Model.Encoder
	buf := enc.getBuffers(most)
	defer enc.putBuffers(buf)
	// One set of input arrays serves every pass, as buf does.
	ar := packArrays{ids: make([]int32, most), lens: make([]int, mostSeqs)}
	if enc.Config().TypeVocab > 0 {
		ar.types = make([]int32, most)
	}
	for _, b := range plan {
		if err := ctx.Err(); err != nil {
			return err
		}
		in := packInputs(seqs, b, &ar)
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
func packInputs(seqs []tokens, b microBatch, ar *packArrays) *Inputs {
	n := b.tokens()
	in := &Inputs{Batch: len(b.idx), Seq: b.seq, IDs: ar.ids[:n:n], Lens: ar.lens[:len(b.idx):len(b.idx)]}
	masked := slices.ContainsFunc(b.idx, func(i int) bool { return seqs[i].mask != nil })
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
		k := len(s.ids)
		in.Lens[r] = k
		copy(in.IDs[off:off+k], s.ids)
		if in.TypeIDs != nil {
			if s.types != nil {
				copy(in.TypeIDs[off:off+k], s.types)
			} else {
				clear(in.TypeIDs[off : off+k])
			}
		}
		if masked {
			if s.mask != nil {
				copy(in.Mask[off:off+k], s.mask)
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

// padInputs pads the sequences idx of seqs to the longest of them, seq
// tokens, into padded model inputs (calibration's batches): the
// tokenizer's padding id, mask 0 and token type 0 after each sequence's
// end. The inputs are views of ids, mask and types (nil: the model has no
// token types), each at least len(idx) x seq long, which it overwrites.
func (p *Pipeline) padInputs(seqs []tokens, idx []int, seq int, ids, mask, types []int32) *Inputs {
	n := len(idx) * seq
	pad := int32(0)
	if p.Tok != nil {
		if sp := p.Tok.Special(); sp.PAD >= 0 {
			pad = sp.PAD
		}
	}
	in := &Inputs{Batch: len(idx), Seq: seq, IDs: ids[:n:n], Mask: mask[:n:n]}
	clear(in.Mask)
	if types != nil {
		in.TypeIDs = types[:n:n]
		clear(in.TypeIDs)
	}
	for r, i := range idx {
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
