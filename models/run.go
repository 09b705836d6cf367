package models

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/int8bert/int8bert/models/encoder"
	"github.com/int8bert/int8bert/tokenizer"
)

// Sequence is one tokenized input, as the model reads it: what
// Pipeline.Encode returns and Pipeline.Run takes. It lets a caller (the
// HTTP server's batcher, docs/DESIGN.md section 9.1) tokenize on its own
// goroutines, gather the sequences of many requests, and run them in
// passes of its own choosing.
type Sequence struct {
	t encoder.Tokens
	// prompt is the leading tokens the pooling leaves out: a prompt's
	// (Pipeline.promptLength) when the Pooling module's include_prompt
	// is false, else 0.
	prompt int
}

// Len is the sequence's length in tokens, special tokens included.
func (s Sequence) Len() int { return len(s.t.IDs) }

// IDs are the token ids (shared: do not modify).
func (s Sequence) IDs() []int32 { return s.t.IDs }

// ErrTooLong is wrapped (with ErrInput) by Encode when a text is longer
// than the pipeline's MaxLength and truncation was not asked for.
var ErrTooLong = errors.New("input longer than the model's maximum length")

// TooLongError is Encode's error for an input longer than MaxLength
// without truncation; errors.Is finds ErrTooLong and ErrInput in it.
type TooLongError struct {
	// Tokens is the input's length, Max the pipeline's MaxLength.
	Tokens, Max int
}

func (e *TooLongError) Error() string {
	return fmt.Sprintf("models: encode: %d tokens, the model takes at most %d: %v", e.Tokens, e.Max, ErrTooLong)
}

// Is makes errors.Is(err, ErrTooLong) and errors.Is(err, ErrInput) hold.
func (e *TooLongError) Is(target error) bool { return target == ErrTooLong || target == ErrInput }

// TruncationDirection is the side an input longer than MaxLength loses
// its tokens from, as TEI's truncation_direction and Hugging Face's
// truncation_side say it.
type TruncationDirection int

// The truncation directions.
const (
	// TruncateRight cuts the end of a text and keeps its start (the
	// default of TEI and Hugging Face).
	TruncateRight TruncationDirection = iota
	// TruncateLeft cuts the start of a text and keeps its end.
	TruncateLeft
)

// String is "right" or "left" ("TruncationDirection(N)" for another value).
func (d TruncationDirection) String() string {
	switch d {
	case TruncateRight:
		return "right"
	case TruncateLeft:
		return "left"
	}
	return fmt.Sprintf("TruncationDirection(%d)", int(d))
}

// valid reports an error wrapping ErrInput for a value that is neither
// direction.
func (d TruncationDirection) valid() error {
	if d != TruncateRight && d != TruncateLeft {
		return fmt.Errorf("models: truncation direction %d: want TruncateRight (0, the default) or TruncateLeft (1): %w", int(d), ErrInput)
	}
	return nil
}

// ParseTruncationDirection reads a direction as TEI's
// truncation_direction spells it: "right" or "Right", "left" or "Left";
// "" is TruncateRight, the default. Any other text is an error wrapping
// ErrInput.
func ParseTruncationDirection(s string) (TruncationDirection, error) {
	switch s {
	case "", "right", "Right":
		return TruncateRight, nil
	case "left", "Left":
		return TruncateLeft, nil
	}
	return 0, fmt.Errorf("models: truncation direction %q: want \"right\" or \"left\" (or Right, Left): %w", s, ErrInput)
}

// MarshalText writes the direction's name.
func (d TruncationDirection) MarshalText() ([]byte, error) {
	if err := d.valid(); err != nil {
		return nil, err
	}
	return []byte(d.String()), nil
}

// UnmarshalText reads a name as ParseTruncationDirection does.
func (d *TruncationDirection) UnmarshalText(b []byte) error {
	v, err := ParseTruncationDirection(string(b))
	if err != nil {
		return err
	}
	*d = v
	return nil
}

// EncodeOptions control Pipeline.Encode and Pipeline.EncodeIDs.
type EncodeOptions struct {
	// Truncate cuts an input longer than MaxLength (the second text of a
	// pair first, then the longer, as Hugging Face's longest_first);
	// without it such an input is an error wrapping ErrTooLong and ErrInput.
	Truncate bool
	// Direction is the side Truncate cuts from (TruncateRight, the
	// default, keeps the start).
	Direction TruncationDirection
	// Prompt is prefixed to the text before it is tokenized, as
	// sentence-transformers (2.4 and later) and TEI apply a prompt: the
	// prompted text is tokenized and truncated as one text, so that left
	// truncation cuts the prompt first. A prompt with a pair is an error
	// wrapping ErrInput, as TEI refuses it; with token ids (EncodeIDs)
	// the ids are decoded and the prompted text tokenized again, as TEI
	// does. Pipeline.Prompt gives the text of a named prompt.
	Prompt string
}

// tokenizerOptions are the tokenizer's options for o.
func (p *Pipeline) tokenizerOptions(o EncodeOptions) (tokenizer.Options, error) {
	if err := o.Direction.valid(); err != nil {
		return tokenizer.Options{}, err
	}
	to := tokenizer.Options{InputsOnly: true, TruncateLeft: o.Direction == TruncateLeft}
	if o.Truncate {
		to.MaxLength, to.Truncation = p.maxLength, tokenizer.LongestFirst
	}
	return to, nil
}

// Encode tokenizes a text, or the pair (text, *pair) when pair is set, for
// Run. A text the tokenizer refuses (invalid UTF-8), one too long
// without o.Truncate, or bad options are errors wrapping ErrInput.
func (p *Pipeline) Encode(text string, pair *string, o EncodeOptions) (Sequence, error) {
	if err := p.refuseClosed("Encode"); err != nil {
		return Sequence{}, err
	}
	tok, err := p.tokenizer("encode")
	if err != nil {
		return Sequence{}, err
	}
	to, err := p.tokenizerOptions(o)
	if err != nil {
		return Sequence{}, err
	}
	var e tokenizer.Encoding
	switch {
	case pair != nil && o.Prompt != "":
		return Sequence{}, fmt.Errorf("models: encode: a prompt cannot be set with a pair of texts: %w", ErrInput)
	case pair != nil:
		e, err = tok.EncodePair(p.st.lower(text), p.st.lower(*pair), to)
	default:
		e, err = tok.Encode(p.st.lower(o.Prompt+text), to)
	}
	if err != nil {
		return Sequence{}, fmt.Errorf("models: encode: %w: %w", err, ErrInput)
	}
	if e.Len() > p.maxLength {
		return Sequence{}, &TooLongError{Tokens: e.Len(), Max: p.maxLength}
	}
	skip, err := p.promptLength("encode", o.Prompt)
	if err != nil {
		return Sequence{}, err
	}
	return Sequence{t: compact(&e), prompt: skip}, nil
}

// EncodeIDs makes a sequence of token ids that are already tokenized, as
// TEI takes token-id inputs: the ids as they are, special tokens included
// when the caller put them there (none are added), of type 0. With
// o.Truncate an input longer than MaxLength keeps its first (TruncateRight)
// or last (TruncateLeft) MaxLength ids; without it such an input is an
// error wrapping ErrTooLong. No ids, an id outside the vocabulary (the
// tokenizer's, or without one the model's embedding table) or a bad
// direction are errors wrapping ErrInput. It needs no tokenizer, but for
// a prompt: with o.Prompt set it is EncodeIDsAsText.
func (p *Pipeline) EncodeIDs(ids []int32, o EncodeOptions) (Sequence, error) {
	if err := p.refuseClosed("EncodeIDs"); err != nil {
		return Sequence{}, err
	}
	if o.Prompt != "" {
		return p.EncodeIDsAsText(ids, o)
	}
	if err := p.checkIDs(ids, o); err != nil {
		return Sequence{}, err
	}
	if n := len(ids); n > p.maxLength {
		if !o.Truncate {
			return Sequence{}, &TooLongError{Tokens: n, Max: p.maxLength}
		}
		if o.Direction == TruncateLeft {
			ids = ids[n-p.maxLength:]
		} else {
			ids = ids[:p.maxLength]
		}
	}
	return Sequence{t: encoder.Tokens{IDs: slices.Clone(ids)}}, nil
}

// EncodeIDsRetokenized is how TEI's tokenize_input takes token ids
// without a prompt: the ids, checked as EncodeIDs checks them, are
// decoded with their special tokens (Tokenizer.Decode) and the text is
// tokenized again without adding any, under o's truncation, so that ids
// that are not the tokenizer's own split of their text come out as it.
// With o.Prompt set it is EncodeIDsAsText; without a tokenizer, EncodeIDs.
func (p *Pipeline) EncodeIDsRetokenized(ids []int32, o EncodeOptions) (Sequence, error) {
	if err := p.refuseClosed("EncodeIDsRetokenized"); err != nil {
		return Sequence{}, err
	}
	if o.Prompt != "" {
		return p.EncodeIDsAsText(ids, o)
	}
	if p.Tok == nil {
		return p.EncodeIDs(ids, o)
	}
	if err := p.checkIDs(ids, o); err != nil {
		return Sequence{}, err
	}
	text, err := p.Tok.Decode(ids, false)
	if err != nil {
		return Sequence{}, fmt.Errorf("models: encode ids: %w: %w", err, ErrInput)
	}
	to, err := p.tokenizerOptions(o)
	if err != nil {
		return Sequence{}, err
	}
	to.SkipSpecialTokens = true
	e, err := p.Tok.Encode(text, to)
	if err != nil {
		return Sequence{}, fmt.Errorf("models: encode ids: %w: %w", err, ErrInput)
	}
	if e.Len() == 0 {
		return Sequence{}, fmt.Errorf("models: encode ids: the ids decode to no tokens: %w", ErrInput)
	}
	if e.Len() > p.maxLength {
		return Sequence{}, &TooLongError{Tokens: e.Len(), Max: p.maxLength}
	}
	return Sequence{t: compact(&e)}, nil
}

// EncodeIDsAsText is how TEI's tokenize_input takes token ids with a
// prompt (an empty one included): the ids, checked as EncodeIDs checks
// them, are decoded without their special tokens (Tokenizer.Decode),
// o.Prompt is prefixed, and the text is encoded again as Encode does,
// with special tokens and o's truncation: Encode(decoded, nil, o). It
// needs the tokenizer.
func (p *Pipeline) EncodeIDsAsText(ids []int32, o EncodeOptions) (Sequence, error) {
	if err := p.refuseClosed("EncodeIDsAsText"); err != nil {
		return Sequence{}, err
	}
	if err := p.checkIDs(ids, o); err != nil {
		return Sequence{}, err
	}
	tok, err := p.tokenizer("encode ids as text")
	if err != nil {
		return Sequence{}, err
	}
	text, err := tok.Decode(ids, true)
	if err != nil {
		return Sequence{}, fmt.Errorf("models: encode ids as text: %w: %w", err, ErrInput)
	}
	return p.Encode(text, nil, o)
}

// checkIDs refuses no ids, ids outside the vocabulary and a bad direction.
func (p *Pipeline) checkIDs(ids []int32, o EncodeOptions) error {
	if err := o.Direction.valid(); err != nil {
		return err
	}
	if len(ids) == 0 {
		return fmt.Errorf("models: encode ids: no token ids: %w", ErrInput)
	}
	vocab := p.m.Encoder.Config().Vocab
	if p.Tok != nil {
		vocab = p.Tok.VocabSize()
	}
	for i, id := range ids {
		if id < 0 || int(id) >= vocab {
			return fmt.Errorf("models: encode ids: token id %d (at %d) is outside the vocabulary (0 to %d): %w", id, i, vocab-1, ErrInput)
		}
	}
	return nil
}

// Batch is one forward pass of a Run: the rows it computed and their
// outputs, valid only while Run's callback runs.
type Batch struct {
	idx  []int
	in   *encoder.Inputs
	out  *encoder.TaskOutput
	p    *Pipeline
	seqs []Sequence
}

// Rows are the indices, into Run's sequences, of the pass's rows: row r
// of the accessors is sequence Rows()[r].
func (b *Batch) Rows() []int { return b.idx }

// Tokens are the real tokens of the pass and the tokens it computed: the
// pipeline's passes are packed (docs/DESIGN.md section 2.2), so the two
// are equal and no padding is computed.
func (b *Batch) Tokens() (real, computed int) {
	return b.in.RealTokens(), len(b.in.IDs)
}

// Embedding is row r's pooled last hidden state (a new slice), run
// through the model's Dense modules and L2-normalised when normalize is
// set: normalize alone decides, whether or not the model has a Normalize
// module (as TEI's request field does; Pipeline.Sentence says whether
// it has one). pool is as EmbedOptions.Pool. A sequence encoded with a
// prompt (EncodeOptions.Prompt) on a model whose Pooling module has
// include_prompt false is pooled without the prompt's tokens, as
// sentence-transformers pools it.
func (b *Batch) Embedding(r int, pool Pooling, normalize bool) ([]float32, error) {
	if r < 0 || r >= len(b.idx) {
		return nil, fmt.Errorf("models: batch row %d of %d: %w", r, len(b.idx), ErrInput)
	}
	pool, err := b.p.pooling(pool)
	if err != nil {
		return nil, err
	}
	return b.p.embedRow(b.out.Output, r, b.in.Mask, pool, b.seqs[b.idx[r]].prompt, true, normalize), nil
}

// Classification is row r's prediction, scored as o says (as
// Pipeline.Classify); the model must be a sequence classifier.
func (b *Batch) Classification(r int, o ClassifyOptions) (Classification, error) {
	if r < 0 || r >= len(b.idx) {
		return Classification{}, fmt.Errorf("models: batch row %d of %d: %w", r, len(b.idx), ErrInput)
	}
	if b.p.m.Task != encoder.TaskSequenceClassification {
		return Classification{}, fmt.Errorf("models: the model is %s, not a sequence classifier: %w", b.p.Describe(), ErrConfig)
	}
	if err := o.scoring(); err != nil {
		return Classification{}, err
	}
	n := len(b.p.m.Labels)
	if len(b.out.Logits) < (r+1)*n {
		return Classification{}, fmt.Errorf("models: internal error: %d logits for row %d of %d labels", len(b.out.Logits), r, n)
	}
	return b.p.postprocess(b.out.Logits[r*n:(r+1)*n], o), nil
}

// Run runs seqs through the model in packed passes of at most
// MaxBatchTokens real tokens, as the pipeline's own calls do (sorted by
// length, no padding computed: docs/DESIGN.md section 2.2), and calls
// each with every pass; an error from each ends the
// call. ctx is checked between passes and layers. Sequences for a
// classifier's head and plain embeddings may be mixed: every pass has
// both the head's outputs (when the model has a head) and the last hidden
// states.
func (p *Pipeline) Run(ctx context.Context, seqs []Sequence, each func(b *Batch) error) error {
	return p.RunWith(ctx, seqs, RunOptions{}, each)
}

// RunOptions are the optional parts of RunWith.
type RunOptions struct {
	// Wanted, when set, is asked between the layers of every pass whether
	// sequence seq (an index into RunWith's sequences) is still wanted
	// (before layer layer; layer = the model's layers before the heads).
	// A sequence it refuses leaves the pass: its row is in no Batch, the
	// rows left keep the bits of the whole pass, and a pass none is left
	// of ends (encoder.StreamOptions.Wanted, docs/DESIGN.md section 9.1).
	// It runs on the pass's goroutine and must answer quickly.
	Wanted func(layer, seq int) bool
	// Stats, when set, is added the call's token counts: the tokens
	// planned, and those computed and saved by sequences that left.
	Stats *RunStats
}

// RunStats count a Run's work (encoder.StreamStats: Saved and Computed
// are in whole passes' worth of tokens).
type RunStats = encoder.StreamStats

// RunWith is Run with options: sequences that are no longer wanted
// leave their passes between layers, and the call's token counts.
func (p *Pipeline) RunWith(ctx context.Context, seqs []Sequence, o RunOptions, each func(b *Batch) error) error {
	if err := p.refuseClosed("Run"); err != nil {
		return err
	}
	if err := p.m.Enter(); err != nil {
		return err
	}
	defer p.m.Leave()
	ts := make([]encoder.Tokens, len(seqs))
	for i, s := range seqs {
		if len(s.t.IDs) == 0 {
			return fmt.Errorf("models: run: sequence %d is empty (not made by Encode): %w", i, ErrInput)
		}
		ts[i] = s.t
	}
	so := encoder.StreamOptions{Wanted: o.Wanted, Stats: o.Stats}
	return p.m.StreamWith(ctx, ts, p.maxBatchTokens, so, func(idx []int, in *encoder.Inputs, out *encoder.TaskOutput) error {
		return each(&Batch{idx: idx, in: in, out: out, p: p, seqs: seqs})
	})
}
