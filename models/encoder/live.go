package encoder

import (
	"errors"
	"fmt"
)

// StreamOptions are the optional parts of a pipeline call's passes
// (TaskModel.StreamWith).
type StreamOptions struct {
	// Wanted, when set, is asked before every layer of a pass (layer 0
	// to Layers-1) and once more before the heads (layer = Layers)
	// whether sequence seq (an index into the call's sequences) is still
	// wanted: a request whose client has gone, say. A sequence it refuses
	// leaves the pass there: the rows left are packed together and run
	// on the kernels the pass chose for its starting rows, so each gets
	// the bits it gets in the whole pass, and the pass ends once no row
	// is left (docs/DESIGN.md section 9.1). A refused sequence's outputs
	// are never made: no callback sees its row. It is also asked (layer
	// 0) before a pass starts, so a sequence refused then costs nothing.
	// It may be asked more than once a layer and must answer quickly:
	// it runs on the pass's goroutine between layers.
	Wanted func(layer, seq int) bool
	// Stats, when set, is added the call's token counts.
	Stats *StreamStats
}

// StreamStats count the work of a pipeline call's passes.
type StreamStats struct {
	// Tokens are the tokens of the call's sequences (the work planned);
	// Layers the model's layers.
	Tokens, Layers int
	// TokenLayers are the rows the layers computed, summed over the
	// layers: Tokens x Layers when no sequence left a pass.
	TokenLayers int
}

// Saved is the tokens not computed because their sequences left their
// passes, in whole passes' worth: (Tokens x Layers - TokenLayers) /
// Layers, rounded down.
func (s StreamStats) Saved() int {
	if s.Layers <= 0 {
		return 0
	}
	return (s.Tokens*s.Layers - s.TokenLayers) / s.Layers
}

// Computed is Tokens - Saved: the tokens computed, in whole passes'
// worth.
func (s StreamStats) Computed() int { return s.Tokens - s.Saved() }

// errNoneLive ends a pass whose every sequence has left it.
var errNoneLive = errors.New("encoder: no sequence of the pass is wanted")

// passLive is one pass's rows under StreamOptions.Wanted.
type passLive struct {
	wanted func(layer, seq int) bool
	// idx are the pass's rows' sequences (the call's indices), compacted
	// as rows leave.
	idx []int
	// batch0 and rows0 are the sequences and rows the pass started with:
	// its linears and heads keep the kernels chosen for those.
	batch0, rows0 int
	// dropped says a row has left.
	dropped bool
	// tokenLayers counts the rows each layer computed.
	tokenLayers int
}

// drop removes, before layer layer, the rows whose sequences are no
// longer wanted: the rows left move down in x (and in s.xq when xqReady
// says it holds x quantized), in's arrays, the spans and out's offsets,
// all in place, and the pass's scratch becomes a view of the rows left,
// with asRows set to the starting rows. When every row is wanted it
// changes nothing and allocates nothing. It returns errNoneLive once no
// row is left.
func (l *passLive) drop(m *Model, layer int, in *Inputs, out *Output, b *buffers, x []float32, s *qscratch, xqReady bool) ([]float32, *qscratch, error) {
	first := -1
	for r, i := range l.idx {
		if !l.wanted(layer, i) {
			first = r
			break
		}
	}
	if first < 0 {
		return x, s, nil
	}
	spans := s.spans
	if len(spans) != len(l.idx) || len(in.Lens) != len(l.idx) {
		return nil, nil, fmt.Errorf("encoder: internal error: %d spans and %d lengths for %d live rows", len(spans), len(in.Lens), len(l.idx))
	}
	l.dropped = true
	h := m.cfg.Hidden
	keep, off := first, spans[first].off
	move := func(dst []int32, sp span) {
		if dst != nil {
			copy(dst[off:], dst[sp.off:sp.off+sp.n])
		}
	}
	for r := first + 1; r < len(l.idx); r++ {
		if !l.wanted(layer, l.idx[r]) {
			continue
		}
		sp := spans[r]
		if sp.off != off {
			copy(x[off*h:], x[sp.off*h:(sp.off+sp.n)*h])
			if xqReady {
				copy(s.xq.u8[off*h:], s.xq.u8[sp.off*h:(sp.off+sp.n)*h])
				if s.xq.scales != nil { // a dynamic pass's per-row scales
					copy(s.xq.scales[off:], s.xq.scales[sp.off:sp.off+sp.n])
				}
			}
			move(in.IDs, sp)
			move(in.TypeIDs, sp)
			move(in.Mask, sp)
		}
		spans[keep] = span{off: off, n: sp.n, kr: sp.kr}
		in.Lens[keep] = sp.n
		l.idx[keep] = l.idx[r]
		keep++
		off += sp.n
	}
	rows := off
	spans, l.idx = spans[:keep], l.idx[:keep]
	b.spans = spans
	in.Batch, in.Lens, in.IDs = keep, in.Lens[:keep], in.IDs[:rows]
	if in.TypeIDs != nil {
		in.TypeIDs = in.TypeIDs[:rows]
	}
	if in.Mask != nil {
		in.Mask = in.Mask[:rows]
	}
	if keep == 0 {
		return nil, nil, errNoneLive
	}
	longest := 0
	offs := out.Offsets[:0]
	for _, sp := range spans {
		offs = append(offs, sp.off)
		longest = max(longest, sp.n)
	}
	out.Offsets = append(offs, rows)
	b.offs = out.Offsets
	out.Batch, out.Seq = keep, longest
	if in.Seq != 0 {
		in.Seq = longest
	}
	ns := b.view(m.cfg, rows)
	ns.spans, ns.asRows = spans, l.rows0
	return x[:rows*h], ns, nil
}
