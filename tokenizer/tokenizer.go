package tokenizer

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"unicode/utf8"
)

// Strategy says how an input longer than Options.MaxLength is handled.
type Strategy int

const (
	// NoTruncation makes an input longer than MaxLength an error (*TooLongError).
	NoTruncation Strategy = iota
	// LongestFirst removes tokens from the longer sequence of a pair first.
	LongestFirst
	// OnlyFirst truncates only the first sequence.
	OnlyFirst
	// OnlySecond truncates only the second sequence of a pair.
	OnlySecond
)

// String returns the Hugging Face name of the strategy.
func (s Strategy) String() string {
	switch s {
	case NoTruncation:
		return "none"
	case LongestFirst:
		return "longest_first"
	case OnlyFirst:
		return "only_first"
	case OnlySecond:
		return "only_second"
	}
	return fmt.Sprintf("Strategy(%d)", int(s))
}

// Padding says how encodings are padded.
type Padding int

const (
	// NoPadding leaves every encoding its own length.
	NoPadding Padding = iota
	// PadLongest pads every encoding of a batch to the longest one.
	PadLongest
	// PadFixed pads to Options.PadLength, or to MaxLength when that is 0.
	PadFixed
)

// Options control one Encode call. The zero value adds special tokens and
// neither truncates nor pads.
type Options struct {
	// SkipSpecialTokens leaves out the post-processor's tokens ([CLS], </s>...).
	SkipSpecialTokens bool
	// MaxLength bounds the length of an encoding, special tokens included; 0: no bound.
	MaxLength int
	// Truncation applies when an input is longer than MaxLength.
	Truncation Strategy
	// Stride is the number of tokens that consecutive overflowing windows share.
	Stride int
	// Overflow keeps the truncated-off tokens as Encoding.Overflowing windows.
	Overflow bool
	// Padding, PadLength, PadToMultipleOf and PadLeft control padding.
	Padding         Padding
	PadLength       int
	PadToMultipleOf int
	PadLeft         bool
	// TruncateLeft removes tokens from the start instead of the end.
	TruncateLeft bool
	// Lenient replaces invalid UTF-8 by U+FFFD instead of failing.
	Lenient bool
	// InputsOnly fills only what a model reads: IDs, TypeIDs and
	// AttentionMask, the same as without it. Tokens, Offsets,
	// SpecialTokensMask and SequenceIDs are left nil, in overflowing
	// windows and padding too: an Encoding then holds 12 bytes a token
	// instead of about 50, and encoding skips the offsets' work.
	InputsOnly bool
}

// Encoding is the result of encoding one input (a text or a pair of texts).
type Encoding struct {
	IDs           []int32
	TypeIDs       []int32
	AttentionMask []int32
	// SpecialTokensMask is 1 where the post-processor or padding put a token.
	SpecialTokensMask []int32
	// Tokens are the vocabulary strings of IDs (a fused run of unknown
	// characters shows as the unknown token, "[UNK]" or "<unk>", but for
	// a Unigram model as its normalized text, as Hugging Face's does).
	Tokens []string
	// Offsets are [start, end) in runes of the original text (see the package doc).
	Offsets [][2]int
	// SequenceIDs says which text a token comes from: 0, 1, or -1 for special tokens.
	SequenceIDs []int8
	// Overflowing holds the further windows when Options.Overflow is set.
	Overflowing []Encoding
}

// Len returns the number of tokens.
func (e *Encoding) Len() int { return len(e.IDs) }

// InvalidUTF8Error reports input that is not valid UTF-8.
type InvalidUTF8Error struct {
	Offset int // byte offset of the first invalid byte
}

// Error says where the input stops being UTF-8.
func (e *InvalidUTF8Error) Error() string {
	return fmt.Sprintf("tokenizer: input is not valid UTF-8 at byte %d", e.Offset)
}

// TooLongError reports an input longer than MaxLength when truncation is off.
type TooLongError struct {
	Length, MaxLength int
}

// Error gives both lengths.
func (e *TooLongError) Error() string {
	return fmt.Sprintf("tokenizer: input has %d tokens, more than the maximum length %d (truncation is off)", e.Length, e.MaxLength)
}

// ErrNoSecondSequence is returned for OnlySecond truncation of a single text.
var ErrNoSecondSequence = errors.New("tokenizer: only_second truncation needs a pair")

// Tokenizer turns text into model inputs. It is safe for concurrent use.
type Tokenizer struct {
	vocab   []string
	ids     map[string]int32
	norm    normalizer // may be nil
	pre     preTokenizer
	model   model
	post    postProcessor // may be nil
	added   []AddedToken
	raw     *addedMatcher // tokens matched in the original text
	normed  *addedMatcher // tokens matched in the normalized text
	special map[string]int32
	dec     decoder // tokenizer.json's decoder, for Decode; nil: join by spaces

	// Truncation and padding found in tokenizer.json, for FileOptions.
	fileOpts    Options
	hasFileOpts bool
	padID       int32
	padTypeID   int32
	padToken    string
	kind        string
	// unkText: an unknown piece's token is the text it covers, not the
	// unknown token's string (Hugging Face's Unigram); unkID is its id.
	unkText bool
	unkID   int32
}

// VocabSize returns the number of ids, added tokens included.
func (t *Tokenizer) VocabSize() int { return len(t.vocab) }

// ID returns the id of a token and whether it exists.
func (t *Tokenizer) ID(token string) (int32, bool) {
	id, ok := t.ids[token]
	return id, ok
}

// Token returns the token of an id, or "" when out of range.
func (t *Tokenizer) Token(id int32) string {
	if id < 0 || int(id) >= len(t.vocab) {
		return ""
	}
	return t.vocab[id]
}

// Model returns "WordPiece", "Unigram" or "BPE".
func (t *Tokenizer) Model() string { return t.kind }

// AddedTokens returns the added and special tokens.
func (t *Tokenizer) AddedTokens() []AddedToken { return append([]AddedToken(nil), t.added...) }

// SpecialTokens holds the ids of the usual special tokens; -1 where absent.
type SpecialTokens struct {
	CLS, SEP, PAD, UNK, MASK, BOS, EOS int32
}

// Special returns the ids of the usual special tokens.
func (t *Tokenizer) Special() SpecialTokens {
	get := func(names ...string) int32 {
		for _, n := range names {
			if id, ok := t.ids[n]; ok {
				return id
			}
		}
		return -1
	}
	return SpecialTokens{
		CLS:  get("[CLS]", "<s>"),
		SEP:  get("[SEP]", "</s>"),
		PAD:  get("[PAD]", "<pad>"),
		UNK:  get("[UNK]", "<unk>"),
		MASK: get("[MASK]", "<mask>"),
		BOS:  get("<s>", "[CLS]"),
		EOS:  get("</s>", "[SEP]"),
	}
}

// FileOptions returns the truncation and padding that tokenizer.json asks
// for, and whether it asks for any. Encode does not apply them by itself.
func (t *Tokenizer) FileOptions() (Options, bool) { return t.fileOpts, t.hasFileOpts }

// seq is one encoded text before post-processing; offsets are byte offsets.
type seq struct {
	ids    []int32
	tokens []string
	offs   [][2]int
}

func validate(text string, lenient bool) (string, error) {
	if utf8.ValidString(text) {
		return text, nil
	}
	if lenient {
		return strings.ToValidUTF8(text, "\uFFFD"), nil
	}
	for i := 0; i < len(text); {
		r, size := utf8.DecodeRuneInString(text[i:])
		if r == utf8.RuneError && size == 1 {
			return "", &InvalidUTF8Error{Offset: i}
		}
		i += size
	}
	return "", &InvalidUTF8Error{}
}

// encodeSeq runs added tokens, normalizer, pre-tokenizer and model over
// text, into sq (emptied first: its slices are sc's, reused), and returns
// what it filled: with full unset, the ids only. Everything else it works
// with lives in sc too.
func (t *Tokenizer) encodeSeq(text string, sq *seq, full bool, sc *scratch) seq {
	sq.ids, sq.tokens, sq.offs = sq.ids[:0], sq.tokens[:0], sq.offs[:0]
	whole := sc.str(len(text))
	whole.setOriginal(text)
	spanMark := sc.mark()
	spans := t.raw.find(whole.s, sc.spans[:0])
	sc.spans = spans
	pieces := sc.pieces[:0]
	for _, sp := range spans {
		if sp.tok >= 0 {
			at := &t.raw.tokens[sp.tok]
			sq.ids = append(sq.ids, at.ID)
			if full {
				// The matched text, with what lstrip and rstrip took, as Hugging Face gives it.
				sq.tokens = append(sq.tokens, addedText(at.Content, whole.s[sp.i:sp.j]))
				sq.offs = append(sq.offs, [2]int{sp.i, sp.j})
			}
			continue
		}
		// What a span is normalized to is released when its words are done.
		n := whole.slice(sp.i, sp.j)
		if t.norm != nil {
			n = t.norm.normalize(n, sc)
		}
		var nspans []span
		if t.normed != nil {
			nspans = t.normed.find(n.s, sc.nspans[:0])
		} else if len(n.s) > 0 {
			nspans = append(sc.nspans[:0], span{0, len(n.s), -1})
		}
		sc.nspans = nspans
		for _, ns := range nspans {
			part := n.slice(ns.i, ns.j)
			if ns.tok >= 0 {
				at := &t.normed.tokens[ns.tok]
				sq.ids = append(sq.ids, at.ID)
				if full {
					sq.tokens = append(sq.tokens, addedText(at.Content, part.s))
					sq.offs = append(sq.offs, [2]int{int(part.start[0]), int(part.end[len(part.s)-1])})
				}
				continue
			}
			partMark := sc.mark()
			wl := sc.list(1)
			*wl = append(*wl, part)
			words := *wl
			if t.pre != nil {
				words = t.pre.split(words, sc)
			}
			for _, w := range words {
				if len(w.s) == 0 {
					continue
				}
				pieces = t.model.tokenize(w.s, pieces[:0], sc)
				for _, p := range pieces {
					sq.ids = append(sq.ids, p.id)
					if full {
						tok := t.vocab[p.id]
						if t.unkText && p.id == t.unkID {
							tok = string(w.s[p.i:p.j])
						}
						sq.tokens = append(sq.tokens, tok)
						sq.offs = append(sq.offs, [2]int{int(w.start[p.i]), int(w.end[p.j-1])})
					}
				}
			}
			sc.release(partMark)
		}
		sc.release(spanMark)
	}
	sc.pieces = pieces
	if !full {
		return seq{ids: sq.ids}
	}
	return *sq
}

// addedText is the text an added token matched: its content (no new
// string) unless lstrip, rstrip or normalization made it differ.
func addedText(content string, matched []byte) string {
	if string(matched) == content {
		return content
	}
	return string(matched)
}

// Encode encodes one text. With no options it adds special tokens and
// neither truncates nor pads; at most one Options value is used.
func (t *Tokenizer) Encode(text string, opts ...Options) (Encoding, error) {
	var o Options
	if len(opts) > 0 {
		o = opts[0]
	}
	return t.encode(text, nil, o)
}

// EncodePair encodes a pair of texts (question and context, premise and
// hypothesis...).
func (t *Tokenizer) EncodePair(a, b string, opts ...Options) (Encoding, error) {
	var o Options
	if len(opts) > 0 {
		o = opts[0]
	}
	return t.encode(a, &b, o)
}

func (t *Tokenizer) encode(a string, b *string, o Options) (Encoding, error) {
	sc := getScratch()
	enc, err := t.encodeUnpadded(a, b, o, sc)
	putScratch(sc)
	if err != nil {
		return Encoding{}, err
	}
	if o.Padding == PadFixed {
		n := o.PadLength
		if n == 0 {
			n = o.MaxLength
		}
		t.pad(&enc, n, o)
	}
	return enc, nil
}

// encodeUnpadded encodes a (and b) with sc's memory, which it leaves
// released; the Encoding shares none of it.
func (t *Tokenizer) encodeUnpadded(a string, b *string, o Options, sc *scratch) (Encoding, error) {
	if o.MaxLength < 0 || o.Stride < 0 {
		return Encoding{}, fmt.Errorf("tokenizer: negative max length %d or stride %d", o.MaxLength, o.Stride)
	}
	a, err := validate(a, o.Lenient)
	if err != nil {
		return Encoding{}, err
	}
	m := sc.mark()
	defer sc.release(m)
	full := !o.InputsOnly
	sa := t.encodeSeq(a, &sc.seqs[0], full, sc)
	var sb *seq
	var bt string
	if b != nil {
		bt, err = validate(*b, o.Lenient)
		if err != nil {
			return Encoding{}, fmt.Errorf("second text: %w", err)
		}
		s := t.encodeSeq(bt, &sc.seqs[1], full, sc)
		sb = &s
	}
	// Byte offsets to rune offsets.
	if full {
		toRunes(&sa, a, sc)
		if sb != nil {
			toRunes(sb, bt, sc)
		}
	}
	added := 0
	if !o.SkipSpecialTokens && t.post != nil {
		added = t.post.added(sb != nil)
	}
	total := len(sa.ids) + added
	if sb != nil {
		total += len(sb.ids)
	}
	if o.MaxLength == 0 || total <= o.MaxLength {
		return t.assemble(sa, sb, o, sc), nil
	}
	if o.Truncation == NoTruncation {
		return Encoding{}, &TooLongError{Length: total, MaxLength: o.MaxLength}
	}
	if o.MaxLength < added {
		return Encoding{}, fmt.Errorf("tokenizer: max length %d is shorter than the %d special tokens", o.MaxLength, added)
	}
	winA, winB, err := truncate(sa, sb, o.MaxLength-added, o)
	if err != nil {
		return Encoding{}, err
	}
	if !o.Overflow {
		// Only the kept window: the first of each text.
		if sb == nil {
			return t.assemble(winA[0], nil, o, sc), nil
		}
		return t.assemble(winA[0], &winB[0], o, sc), nil
	}
	var encs []Encoding
	for _, wa := range winA {
		if sb == nil {
			encs = append(encs, t.assemble(wa, nil, o, sc))
			continue
		}
		for _, wb := range winB {
			encs = append(encs, t.assemble(wa, &wb, o, sc))
		}
	}
	enc := encs[0]
	if len(encs) > 1 {
		enc.Overflowing = encs[1:]
	}
	return enc, nil
}

// toRunes rewrites byte offsets as rune offsets, with an index in sc.
func toRunes(s *seq, text string, sc *scratch) {
	ascii := true
	for i := 0; i < len(text); i++ {
		if text[i] >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	if ascii {
		return
	}
	if cap(sc.runeIdx) < len(text)+1 {
		sc.runeIdx = make([]int32, len(text)+1)
	}
	idx := sc.runeIdx[:len(text)+1]
	n := int32(0)
	for i := range text {
		idx[i] = n
		n++
	}
	idx[len(text)] = n
	// Fill the bytes inside characters with the next character's index.
	for i := len(text) - 1; i >= 0; i-- {
		if !utf8.RuneStart(text[i]) {
			idx[i] = idx[i+1]
		}
	}
	for k, o := range s.offs {
		s.offs[k] = [2]int{int(idx[o[0]]), int(idx[o[1]])}
	}
}

// truncate cuts a (and b) to fit limit tokens, returning the windows of each:
// the first window is the kept part, the others overflow.
func truncate(a seq, b *seq, limit int, o Options) ([]seq, []seq, error) {
	la := len(a.ids)
	if b == nil {
		switch o.Truncation {
		case OnlySecond:
			return nil, nil, ErrNoSecondSequence
		}
		w, err := windows(a, limit, o)
		return w, nil, err
	}
	lb := len(b.ids)
	na, nb := la, lb
	switch o.Truncation {
	case LongestFirst:
		n1, n2 := la, lb
		swap := n1 > n2
		if swap {
			n1, n2 = n2, n1
		}
		if n1 > limit {
			n2 = n1
		} else {
			n2 = max(n1, limit-n1)
		}
		if n1+n2 > limit {
			n1 = limit / 2
			n2 = n1 + limit%2
		}
		if swap {
			n1, n2 = n2, n1
		}
		na, nb = n1, n2
	case OnlyFirst:
		remove := la + lb - limit
		if la <= remove {
			return nil, nil, fmt.Errorf("tokenizer: only_first truncation: first sequence (%d tokens) is too short to remove %d", la, remove)
		}
		na = la - remove
	case OnlySecond:
		remove := la + lb - limit
		if lb <= remove {
			return nil, nil, fmt.Errorf("tokenizer: only_second truncation: second sequence (%d tokens) is too short to remove %d", lb, remove)
		}
		nb = lb - remove
	}
	wa, err := windows(a, na, o)
	if err != nil {
		return nil, nil, err
	}
	wb, err := windows(*b, nb, o)
	if err != nil {
		return nil, nil, err
	}
	return wa, wb, nil
}

// windows cuts s into windows of n tokens that share o.Stride tokens.
func windows(s seq, n int, o Options) ([]seq, error) {
	l := len(s.ids)
	if n >= l {
		return []seq{s}, nil
	}
	cut := func(i, j int) seq {
		if o.InputsOnly {
			return seq{ids: s.ids[i:j:j]}
		}
		return seq{ids: s.ids[i:j:j], tokens: s.tokens[i:j:j], offs: s.offs[i:j:j]}
	}
	if n == 0 {
		return []seq{{}, s}, nil
	}
	if o.Stride >= n {
		return nil, fmt.Errorf("tokenizer: stride %d must be less than the %d tokens left for the sequence", o.Stride, n)
	}
	step := n - o.Stride
	var out []seq
	if !o.TruncateLeft {
		for i := 0; ; i += step {
			j := min(i+n, l)
			out = append(out, cut(i, j))
			if j == l {
				break
			}
		}
	} else {
		for j := l; ; j -= step {
			i := max(j-n, 0)
			out = append(out, cut(i, j))
			if i == 0 {
				break
			}
		}
	}
	return out, nil
}

// assemble applies the post-processor and builds an Encoding, all of it
// new memory: with o.InputsOnly, its IDs, TypeIDs and AttentionMask only.
func (t *Tokenizer) assemble(a seq, b *seq, o Options, sc *scratch) Encoding {
	n := len(a.ids)
	if b != nil {
		n += len(b.ids)
	}
	if t.post != nil && !o.SkipSpecialTokens {
		n += t.post.added(b != nil)
	}
	asm := &sc.asm
	*asm = assembler{full: !o.InputsOnly}
	if tr, ok := t.post.(trimmer); ok && asm.full {
		asm.trim = tr.offsetTrim()
	}
	e := &asm.e
	// One backing array for the int32 fields; each is capped so that
	// appending (padding, or a caller) moves it out rather than overwriting
	// its neighbour.
	fields := 3
	if asm.full {
		fields = 4
	}
	back := make([]int32, fields*n)
	e.IDs = back[0:0:n]
	e.TypeIDs = back[n : n : 2*n]
	mask := back[2*n : 3*n : 3*n]
	if asm.full {
		e.SpecialTokensMask = back[3*n : 3*n : 4*n]
		e.Tokens = make([]string, 0, n)
		e.Offsets = make([][2]int, 0, n)
		e.SequenceIDs = make([]int8, 0, n)
	}
	if o.SkipSpecialTokens || t.post == nil {
		asm.seq(a, 0, 0)
		if b != nil {
			tid := int32(1)
			if t.post != nil {
				tid = t.post.secondTypeID()
			}
			asm.seq(*b, tid, 1)
		}
	} else if b != nil {
		t.post.apply(asm, a, *b, true)
	} else {
		t.post.apply(asm, a, seq{}, false)
	}
	// A template may use a text twice: then IDs has outgrown n.
	if len(e.IDs) > len(mask) {
		mask = make([]int32, len(e.IDs))
	}
	e.AttentionMask = mask[:len(e.IDs):len(e.IDs)]
	for i := range e.AttentionMask {
		e.AttentionMask[i] = 1
	}
	enc := *e
	*asm = assembler{}
	return enc
}

// assembler appends the tokens of an Encoding in the making; with full
// unset only to IDs and TypeIDs (Options.InputsOnly).
type assembler struct {
	e    Encoding
	full bool
	trim offsetTrim // the post-processor's offset trimming, applied to each text
}

// seq appends the tokens of s, of type typeID, from text seqID.
func (b *assembler) seq(s seq, typeID int32, seqID int8) {
	e := &b.e
	e.IDs = append(e.IDs, s.ids...)
	for range s.ids {
		e.TypeIDs = append(e.TypeIDs, typeID)
	}
	if !b.full {
		return
	}
	e.Tokens = append(e.Tokens, s.tokens...)
	at := len(e.Offsets)
	e.Offsets = append(e.Offsets, s.offs...)
	if b.trim.trim {
		b.trim.trimOffsets(s.tokens, e.Offsets[at:])
	}
	for range s.ids {
		e.SpecialTokensMask = append(e.SpecialTokensMask, 0)
		e.SequenceIDs = append(e.SequenceIDs, seqID)
	}
}

// special appends a post-processor's token.
func (b *assembler) special(id int32, token string, typeID int32) {
	e := &b.e
	e.IDs = append(e.IDs, id)
	e.TypeIDs = append(e.TypeIDs, typeID)
	if !b.full {
		return
	}
	e.Tokens = append(e.Tokens, token)
	e.Offsets = append(e.Offsets, [2]int{})
	e.SpecialTokensMask = append(e.SpecialTokensMask, 1)
	e.SequenceIDs = append(e.SequenceIDs, -1)
}

// pad pads e (and its overflowing windows) to length n, rounded up to
// PadToMultipleOf, into new memory: one backing array for the int32 fields
// again, and, without o.InputsOnly, one array each for the others.
func (t *Tokenizer) pad(e *Encoding, n int, o Options) {
	if m := o.PadToMultipleOf; m > 0 && n%m != 0 {
		n += m - n%m
	}
	for i := range e.Overflowing {
		t.pad(&e.Overflowing[i], n, o)
	}
	l := len(e.IDs)
	k := n - l
	if k <= 0 {
		return
	}
	// The old tokens go to [at, at+l) of the new arrays, the padding to the rest.
	at := 0
	if o.PadLeft {
		at = k
	}
	full := !o.InputsOnly
	fields := 3
	if full {
		fields = 4
	}
	back := make([]int32, fields*n)
	next := 0
	grow := func(old []int32, v int32) []int32 {
		dst := back[next : next+n : next+n]
		next += n
		for i := range dst {
			dst[i] = v
		}
		copy(dst[at:at+l], old)
		return dst
	}
	e.IDs = grow(e.IDs, t.padID)
	e.TypeIDs = grow(e.TypeIDs, t.padTypeID)
	e.AttentionMask = grow(e.AttentionMask, 0)
	if !full {
		return
	}
	e.SpecialTokensMask = grow(e.SpecialTokensMask, 1)
	toks := make([]string, n)
	offs := make([][2]int, n)
	sids := make([]int8, n)
	for i := range toks {
		toks[i] = t.padToken
		sids[i] = -1
	}
	copy(toks[at:at+l], e.Tokens)
	copy(offs[at:at+l], e.Offsets)
	copy(sids[at:at+l], e.SequenceIDs)
	e.Tokens, e.Offsets, e.SequenceIDs = toks, offs, sids
}

// Pair is one input of EncodePairBatch.
type Pair struct{ A, B string }

// EncodeBatch encodes texts in parallel, one worker per CPU, keeping their
// order. With PadLongest every encoding is padded to the longest of the batch.
func (t *Tokenizer) EncodeBatch(ctx context.Context, texts []string, opts ...Options) ([]Encoding, error) {
	var o Options
	if len(opts) > 0 {
		o = opts[0]
	}
	return t.batch(ctx, len(texts), o, func(i int, sc *scratch) (Encoding, error) {
		return t.encodeUnpadded(texts[i], nil, o, sc)
	})
}

// EncodePairBatch is EncodeBatch for pairs of texts.
func (t *Tokenizer) EncodePairBatch(ctx context.Context, pairs []Pair, opts ...Options) ([]Encoding, error) {
	var o Options
	if len(opts) > 0 {
		o = opts[0]
	}
	return t.batch(ctx, len(pairs), o, func(i int, sc *scratch) (Encoding, error) {
		return t.encodeUnpadded(pairs[i].A, &pairs[i].B, o, sc)
	})
}

// batch runs enc over the items [0, n) on one worker per CPU, each with a
// scratch of its own for all the items it encodes, then pads as o says. The
// error is that of the first item that fails.
func (t *Tokenizer) batch(ctx context.Context, n int, o Options, enc func(i int, sc *scratch) (Encoding, error)) ([]Encoding, error) {
	out := make([]Encoding, n)
	workers := min(runtime.GOMAXPROCS(0), n)
	const chunk = 16
	var (
		mu      sync.Mutex
		next    int
		failed  = n // the first item that failed, n while none has
		failure error
		wg      sync.WaitGroup
	)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sc := getScratch()
			defer putScratch(sc)
			for {
				if ctx.Err() != nil {
					return
				}
				mu.Lock()
				i := next
				next += chunk
				stop := i >= failed // items are handed out in order: none after a failure matters
				mu.Unlock()
				if i >= n || stop {
					return
				}
				for k := i; k < min(i+chunk, n); k++ {
					e, err := enc(k, sc)
					if err != nil {
						mu.Lock()
						if k < failed {
							failed, failure = k, err
						}
						mu.Unlock()
						break
					}
					out[k] = e
				}
			}
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if failure != nil {
		return nil, fmt.Errorf("batch item %d: %w", failed, failure)
	}
	switch o.Padding {
	case PadLongest:
		longest := 0
		for i := range out {
			longest = max(longest, len(out[i].IDs))
			for _, ov := range out[i].Overflowing {
				longest = max(longest, len(ov.IDs))
			}
		}
		for i := range out {
			t.pad(&out[i], longest, o)
		}
	case PadFixed:
		l := o.PadLength
		if l == 0 {
			l = o.MaxLength
		}
		for i := range out {
			t.pad(&out[i], l, o)
		}
	}
	return out, nil
}

// Bytes estimates the memory the tokenizer holds: its vocabulary's
// strings, the id table, the token-to-id maps (its own and its model's,
// about 48 bytes an entry with the map's overhead) and the added tokens.
// It is an estimate from the vocabulary's size, not a measurement.
func (t *Tokenizer) Bytes() int {
	n := 0
	for _, s := range t.vocab {
		n += len(s) + 16
	}
	n += 2 * 48 * len(t.ids)
	for _, a := range t.added {
		n += 2*len(a.Content) + 64
	}
	return n
}
