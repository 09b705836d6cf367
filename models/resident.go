package models

// ResidentBytes is the memory a loaded model holds, by kind, in bytes
// (docs/DESIGN.md section 9.9): what Pipeline.ResidentBytes reports and
// `int8bert info --model` and serve's /info print.
type ResidentBytes struct {
	// PackedWeights are the linears' weights as the kernels run them:
	// each packed form made so far (one per kernel panel width in use),
	// a compact copy still held (an int8 linear's until its first pass),
	// oneDNN's reordered copies, the column sums; and the heads' linears.
	PackedWeights int64 `json:"packed_weights"`
	// OtherWeights are every other weight: the embeddings (mapped from
	// the model's file; the system keeps the pages that are read), the
	// LayerNorms, biases, weight and activation scales, smoothing.
	OtherWeights int64 `json:"other_weights"`
	// Scratch are the pass buffers the model holds between calls: a
	// warm-up's kept set and the idle sets no collection has freed yet
	// (a set a pass holds is not counted). Each is bounded by the token
	// budget (Options.MaxBatchTokens).
	Scratch int64 `json:"scratch"`
	// Tokenizer is an estimate of the tokenizer's vocabulary and tables.
	Tokenizer int64 `json:"tokenizer"`
	// Tuning is an estimate of the selector's choices for the model's
	// keys (the tuning record in use).
	Tuning int64 `json:"tuning"`
	// Total is the sum of the kinds.
	Total int64 `json:"total"`
}

// ResidentBytes reports the memory the model holds, by kind. It is safe
// to call while calls run; Scratch then leaves out their buffers.
func (p *Pipeline) ResidentBytes() ResidentBytes {
	r := p.m.Resident()
	out := ResidentBytes{PackedWeights: int64(r.Packed), OtherWeights: int64(r.Other), Scratch: int64(r.Scratch),
		Tuning: int64(p.m.TuningBytes())}
	if p.Tok != nil {
		out.Tokenizer = int64(p.Tok.Bytes())
	}
	out.Total = out.PackedWeights + out.OtherWeights + out.Scratch + out.Tokenizer + out.Tuning
	return out
}

// Trim gives back memory the model holds that no call has used since the
// previous Trim: the linears' packed forms no call ran on (a tuning's
// defaults, replaced choices; a warm-up's are kept) and the idle pass
// buffers (not a warm-up's kept set). A server calls it when idle; a
// later call that needs what was released makes it again. It returns the
// bytes released, which the Go runtime returns to the system at its next
// collection (runtime/debug.FreeOSMemory at once).
func (p *Pipeline) Trim() int64 { return int64(p.m.Trim()) }

// Compact is Trim for a model at rest (a server idle for a while): each
// linear also keeps just one packed form, the one most calls ran on since
// the previous Trim (and a warm-up's), as a workload's row counts pick
// kernels of a few panel widths, each a whole copy of the weights. A
// later call that needs a released form packs it again from the kept one
// (with background tuning, off the request path). It returns the bytes
// released.
func (p *Pipeline) Compact() int64 { return int64(p.m.Compact()) }
