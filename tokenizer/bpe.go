package tokenizer

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Byte-level BPE (GPT-2, RoBERTa): see docs/DESIGN.md, 2.5 "The tokenizer's
// byte-level BPE".

// byteRune is GPT-2's bytes_to_unicode: every byte as a printable
// character. The printable bytes '!'..'~', '¡'..'¬' and '®'..'ÿ' stand
// for themselves; the others, in byte order, for U+0100 onwards (the
// space is 'Ġ', the newline 'Ċ').
var byteRune [256]rune

// byteRuneUTF8 holds the UTF-8 of byteRune (one or two bytes).
var byteRuneUTF8 [256][2]byte
var byteRuneLen [256]uint8

// runeByte is the inverse of byteRune, indexed by rune; -1 where none.
var runeByte [324]int16

func init() {
	n := 0
	for b := range 256 {
		if (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			byteRune[b] = rune(b)
		} else {
			byteRune[b] = rune(256 + n)
			n++
		}
	}
	for i := range runeByte {
		runeByte[i] = -1
	}
	for b, r := range byteRune {
		runeByte[r] = int16(b)
		var buf [4]byte
		k := utf8.EncodeRune(buf[:], r)
		copy(byteRuneUTF8[b][:], buf[:k])
		byteRuneLen[b] = uint8(k)
	}
}

// bpeMergeKey is the pair of ids a merge joins.
func bpeMergeKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

// bpeRule is what a merge makes: its rank (lower merges first) and the id
// of the joined token.
type bpeRule struct{ rank, id int32 }

// bpe is Hugging Face's BPE model: a word's characters (with the
// continuing-subword prefix on all but the first and the end-of-word
// suffix on the last) become tokens, then the pair of neighbours with the
// lowest merge rank (the leftmost among equals) is joined until no pair
// has a merge.
type bpe struct {
	vocab        map[string]int32
	merges       map[uint64]bpeRule
	prefix       string // continuing_subword_prefix
	suffix       string // end_of_word_suffix
	unk          int32  // -1: unknown characters are dropped, as in Hugging Face
	fuseUnk      bool
	byteFallback bool
	byteIDs      [256]int32 // ids of <0xXX> when byteFallback, else -1
	ignoreMerges bool
	// single holds the id of every one-character token below U+0200 with
	// neither prefix nor suffix (-2 where it must be looked up), the
	// byte-level alphabet among them.
	single [512]int32
}

// bpeSymbol is a token of a word being merged: its id, its byte range in
// the word, and its neighbours (-1 at the ends).
type bpeSymbol struct {
	id         int32
	i, j       int32
	prev, next int32
}

// bpeCand is a possible merge of the symbol at pos with its next one.
type bpeCand struct {
	rank, pos, id int32
}

func (a bpeCand) less(b bpeCand) bool {
	return a.rank < b.rank || (a.rank == b.rank && a.pos < b.pos)
}

func newBPE(vocab map[string]int32, merges [][2]string, prefix, suffix string) (*bpe, error) {
	m := &bpe{vocab: vocab, merges: make(map[uint64]bpeRule, len(merges)), prefix: prefix, suffix: suffix, unk: -1}
	for k, mg := range merges {
		a, ok := vocab[mg[0]]
		if !ok {
			return nil, fmt.Errorf("merges[%d]: %q is not in the vocabulary", k, mg[0])
		}
		b, ok := vocab[mg[1]]
		if !ok {
			return nil, fmt.Errorf("merges[%d]: %q is not in the vocabulary", k, mg[1])
		}
		right, ok := strings.CutPrefix(mg[1], prefix)
		if !ok {
			right = mg[1]
		}
		joined := mg[0] + right
		id, ok := vocab[joined]
		if !ok {
			return nil, fmt.Errorf("merges[%d]: %q (the merge of %q and %q) is not in the vocabulary", k, joined, mg[0], mg[1])
		}
		// As in Hugging Face, a merge given twice keeps its later rank.
		m.merges[bpeMergeKey(a, b)] = bpeRule{rank: int32(k), id: id}
	}
	for i := range m.byteIDs {
		m.byteIDs[i] = -1
	}
	for r := range m.single {
		m.single[r] = -2
		if prefix == "" && suffix == "" {
			m.single[r] = -1
			if id, ok := vocab[string(rune(r))]; ok {
				m.single[r] = id
			}
		}
	}
	return m, nil
}

// charID is the id of the character c (word[i:j]) of a word; first and
// last say where it stands.
func (m *bpe) charID(word []byte, i, j int, first, last bool) (int32, bool) {
	if c := word[i]; j-i <= 2 {
		r := rune(c)
		if c >= utf8.RuneSelf {
			r, _ = utf8.DecodeRune(word[i:j])
		}
		if r < rune(len(m.single)) && m.single[r] != -2 {
			id := m.single[r]
			return id, id >= 0
		}
	}
	if (first || m.prefix == "") && (!last || m.suffix == "") {
		id, ok := m.vocab[string(word[i:j])]
		return id, ok
	}
	var b strings.Builder
	if !first {
		b.WriteString(m.prefix)
	}
	b.Write(word[i:j])
	if last {
		b.WriteString(m.suffix)
	}
	id, ok := m.vocab[b.String()]
	return id, ok
}

// bpeCacheWords and bpeCacheLen bound the merged words a scratch keeps:
// the Rust model caches words too, and a text repeats its short words.
const (
	bpeCacheWords = 4096
	bpeCacheLen   = 48
)

func (m *bpe) tokenize(word []byte, out []piece, sc *scratch) []piece {
	if len(word) == 0 {
		return out
	}
	if len(word) > bpeCacheLen {
		return m.merge(word, out, sc)
	}
	if sc.bpeCacheOf != m || sc.bpeCache == nil {
		sc.bpeCache, sc.bpeCacheOf = make(map[string][]piece, 256), m
	}
	if ps, ok := sc.bpeCache[string(word)]; ok {
		return append(out, ps...)
	}
	base := len(out)
	out = m.merge(word, out, sc)
	if len(sc.bpeCache) >= bpeCacheWords {
		clear(sc.bpeCache)
	}
	sc.bpeCache[string(word)] = slices.Clone(out[base:])
	return out
}

// merge turns word into its pieces, appended to out.
func (m *bpe) merge(word []byte, out []piece, sc *scratch) []piece {
	if m.ignoreMerges {
		if id, ok := m.vocab[string(word)]; ok {
			return append(out, piece{id: id, i: 0, j: int32(len(word))})
		}
	}
	syms := sc.bpeSyms[:0]
	unkAt := -1 // the symbol holding the pending unknown run, -1 if none
	for i := 0; i < len(word); {
		size := 1
		if word[i] >= utf8.RuneSelf {
			_, size = utf8.DecodeRune(word[i:])
		}
		j := i + size
		id, ok := m.charID(word, i, j, i == 0, j == len(word))
		switch {
		case ok:
			unkAt = -1
			syms = append(syms, bpeSymbol{id: id, i: int32(i), j: int32(j)})
		case m.byteFallback && m.allBytes(word[i:j]):
			unkAt = -1
			for k := i; k < j; k++ {
				syms = append(syms, bpeSymbol{id: m.byteIDs[word[k]], i: int32(k), j: int32(k + 1)})
			}
		case m.unk >= 0:
			if unkAt >= 0 && m.fuseUnk {
				syms[unkAt].j = int32(j)
			} else {
				unkAt = len(syms)
				syms = append(syms, bpeSymbol{id: m.unk, i: int32(i), j: int32(j)})
			}
		}
		// Without an unknown token the character is left out, as in Hugging Face.
		i = j
	}
	for k := range syms {
		syms[k].prev, syms[k].next = int32(k-1), int32(k+1)
	}
	if len(syms) > 0 {
		syms[len(syms)-1].next = -1
	}
	sc.bpeSyms = syms
	if len(syms) > 1 && len(m.merges) > 0 {
		m.mergeAll(syms, sc)
	}
	for k := 0; k >= 0 && k < len(syms); k = int(syms[k].next) {
		s := syms[k]
		out = append(out, piece{id: s.id, i: s.i, j: s.j})
	}
	return out
}

func (m *bpe) allBytes(s []byte) bool {
	for _, c := range s {
		if m.byteIDs[c] < 0 {
			return false
		}
	}
	return true
}

// mergeAll joins the symbols of a word by merge rank, with a min-heap of
// candidate merges ordered by (rank, position), as Hugging Face's
// Word::merge_all; a candidate whose symbols have changed since it was
// pushed is skipped. Joined-away symbols are unlinked from the list.
func (m *bpe) mergeAll(syms []bpeSymbol, sc *scratch) {
	h := sc.bpeHeap[:0]
	for k := 0; k+1 < len(syms); k++ {
		if r, ok := m.merges[bpeMergeKey(syms[k].id, syms[k+1].id)]; ok {
			h = heapPush(h, bpeCand{rank: r.rank, pos: int32(k), id: r.id})
		}
	}
	for len(h) > 0 {
		var top bpeCand
		top, h = heapPop(h)
		s := &syms[top.pos]
		if s.i == s.j || s.next < 0 {
			continue // joined away, or last
		}
		right := syms[s.next]
		if r, ok := m.merges[bpeMergeKey(s.id, right.id)]; !ok || r.id != top.id {
			continue // stale
		}
		s.id, s.j = top.id, right.j
		syms[s.next].i = syms[s.next].j // mark as joined away
		s.next = right.next
		if right.next >= 0 {
			syms[right.next].prev = top.pos
		}
		if s.prev >= 0 {
			if r, ok := m.merges[bpeMergeKey(syms[s.prev].id, s.id)]; ok {
				h = heapPush(h, bpeCand{rank: r.rank, pos: s.prev, id: r.id})
			}
		}
		if s.next >= 0 {
			if r, ok := m.merges[bpeMergeKey(s.id, syms[s.next].id)]; ok {
				h = heapPush(h, bpeCand{rank: r.rank, pos: top.pos, id: r.id})
			}
		}
	}
	sc.bpeHeap = h
}

func heapPush(h []bpeCand, c bpeCand) []bpeCand {
	h = append(h, c)
	for k := len(h) - 1; k > 0; {
		p := (k - 1) / 2
		if !h[k].less(h[p]) {
			break
		}
		h[k], h[p] = h[p], h[k]
		k = p
	}
	return h
}

func heapPop(h []bpeCand) (bpeCand, []bpeCand) {
	top := h[0]
	n := len(h) - 1
	h[0] = h[n]
	h = h[:n]
	for k := 0; ; {
		l, r, s := 2*k+1, 2*k+2, k
		if l < n && h[l].less(h[s]) {
			s = l
		}
		if r < n && h[r].less(h[s]) {
			s = r
		}
		if s == k {
			break
		}
		h[k], h[s] = h[s], h[k]
		k = s
	}
	return top, h
}

// byteLevel is Hugging Face's ByteLevel pre-tokenizer: a space is put
// before each piece of text that does not start with one (addPrefix),
// the piece is cut by GPT-2's pattern (useRegex), and every byte of every
// word becomes its byteRune character, aligned to the original character
// it comes from (the prefixed space to the piece's first character).
type byteLevel struct {
	addPrefix, useRegex bool
}

func (p byteLevel) split(in []nstr, sc *scratch) []nstr {
	total := 0
	for _, n := range in {
		total += 2*len(n.s) + 2
	}
	list := sc.list(len(in) * 4)
	out := *list
	buf := sc.str(total)
	for _, n := range in {
		if len(n.s) == 0 {
			continue
		}
		src := n.s
		pre := 0
		if p.addPrefix && n.s[0] != ' ' {
			src = append(append(sc.bpeSrc[:0], ' '), n.s...)
			sc.bpeSrc = src
			pre = 1
		}
		for i := 0; i < len(src); {
			j := len(src)
			if p.useRegex {
				j = gpt2Next(src, i)
			}
			start := len(buf.s)
			for k := i; k < j; k++ {
				o := max(k-pre, 0) // the prefixed space maps to the first character
				c := src[k]
				buf.s = append(buf.s, byteRuneUTF8[c][:byteRuneLen[c]]...)
				for range byteRuneLen[c] {
					buf.start = append(buf.start, n.start[o])
					buf.end = append(buf.end, n.end[o])
				}
			}
			out = append(out, buf.slice(start, len(buf.s)))
			i = j
		}
	}
	*list = out
	return out
}

// Character classes of GPT-2's pattern.
const (
	gpt2Space = iota
	gpt2Letter
	gpt2Number
	gpt2Other
)

func gpt2Class(r rune) int {
	if r < utf8.RuneSelf {
		switch {
		case r == ' ' || (r >= '\t' && r <= '\r'):
			return gpt2Space
		case (r|0x20) >= 'a' && (r|0x20) <= 'z':
			return gpt2Letter
		case r >= '0' && r <= '9':
			return gpt2Number
		}
		return gpt2Other
	}
	switch {
	case unicode.IsSpace(r):
		return gpt2Space
	case unicode.IsLetter(r):
		return gpt2Letter
	case unicode.IsNumber(r):
		return gpt2Number
	}
	return gpt2Other
}

func decodeAt(s []byte, i int) (rune, int) {
	if s[i] < utf8.RuneSelf {
		return rune(s[i]), 1
	}
	return utf8.DecodeRune(s[i:])
}

// gpt2Next returns the end of the match of GPT-2's pattern
//
//	's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//
// that starts at i (< len(s)), written out by hand because Go's regexp has
// no lookahead. The alternatives are tried in order, as a backtracking
// engine does; every character is matched by one of them.
func gpt2Next(s []byte, i int) int {
	r, size := decodeAt(s, i)
	if r == '\'' && i+1 < len(s) {
		switch s[i+1] {
		case 's', 't', 'm', 'd':
			return i + 2
		case 'r', 'v', 'l':
			if i+2 < len(s) && ((s[i+1] == 'r' && s[i+2] == 'e') || (s[i+1] == 'v' && s[i+2] == 'e') || (s[i+1] == 'l' && s[i+2] == 'l')) {
				return i + 3
			}
		}
	}
	c := gpt2Class(r)
	if r == ' ' && i+1 < len(s) {
		r2, size2 := decodeAt(s, i+1)
		if c2 := gpt2Class(r2); c2 != gpt2Space {
			return gpt2Run(s, i+1+size2, c2)
		}
	}
	if c != gpt2Space {
		return gpt2Run(s, i+size, c)
	}
	// A run of white space: all of it at the end of the text, else all but
	// its last character (left to start the next match), or the one
	// character when it is alone.
	last, k, n := i, i+size, 1
	for k < len(s) {
		r, size := decodeAt(s, k)
		if gpt2Class(r) != gpt2Space {
			break
		}
		last, k, n = k, k+size, n+1
	}
	if k == len(s) || n == 1 {
		return k
	}
	return last
}

// gpt2Run returns the end of the run of class c characters from i.
func gpt2Run(s []byte, i, c int) int {
	for i < len(s) {
		r, size := decodeAt(s, i)
		if gpt2Class(r) != c {
			break
		}
		i += size
	}
	return i
}

// offsetTrim is the trim_offsets of Hugging Face's ByteLevel and
// RobertaProcessing post-processors: a token's offsets leave out its
// leading and trailing spaces (the byte-level 'Ġ' or white space), except
// the one space add_prefix_space put before the first token.
type offsetTrim struct {
	trim, addPrefix bool
}

// trimOffsets trims offs, the rune offsets of one text's tokens (as
// Hugging Face's process_offsets, which also runs on added tokens).
func (o offsetTrim) trimOffsets(tokens []string, offs [][2]int) {
	isSpace := func(r rune) bool { return r == 'Ġ' || unicode.IsSpace(r) }
	for i, tok := range tokens {
		lead, trail := 0, 0
		for _, r := range tok {
			if !isSpace(r) {
				break
			}
			lead++
		}
		for k := len(tok); k > 0; {
			r, size := utf8.DecodeLastRuneInString(tok[:k])
			if !isSpace(r) {
				break
			}
			trail++
			k -= size
		}
		if lead == 0 && trail == 0 {
			continue
		}
		off := &offs[i]
		if lead > 0 {
			if (i == 0 || off[0] == 0) && o.addPrefix && lead == 1 {
				lead = 0
			}
			off[0] = min(off[0]+lead, off[1])
		}
		if trail > 0 && off[1] >= trail {
			off[1] = max(off[1]-trail, off[0])
		}
	}
}

// byteLevelProcessor is the ByteLevel post-processor: no special tokens,
// type ids 0 and 1, offsets trimmed when asked.
type byteLevelProcessor struct{ trim offsetTrim }

func (p *byteLevelProcessor) added(bool) int         { return 0 }
func (p *byteLevelProcessor) secondTypeID() int32    { return 1 }
func (p *byteLevelProcessor) offsetTrim() offsetTrim { return p.trim }
func (p *byteLevelProcessor) apply(e *assembler, a, b seq, pair bool) {
	e.seq(a, 0, 0)
	if pair {
		e.seq(b, 1, 1)
	}
}

// byteLevelDecoder is the ByteLevel decoder: every token's characters
// back to their bytes (a token with a character outside the byte-level
// alphabet, such as an added token, as its own UTF-8), all joined, and
// the bytes read as UTF-8 with each maximal invalid part replaced by
// U+FFFD, as Rust's String::from_utf8_lossy.
type byteLevelDecoder struct{}

func (byteLevelDecoder) chain(tokens []string) ([]string, error) {
	var b []byte
	for _, tok := range tokens {
		mark := len(b)
		ok := true
		for _, r := range tok {
			if r >= rune(len(runeByte)) || runeByte[r] < 0 {
				ok = false
				break
			}
			b = append(b, byte(runeByte[r]))
		}
		if !ok {
			b = append(b[:mark], tok...)
		}
	}
	return []string{lossyUTF8(b)}, nil
}

// lossyUTF8 is Rust's String::from_utf8_lossy: one U+FFFD for each
// maximal part of an invalid sequence (a lead byte and the continuation
// bytes that could still follow it), not one for each byte.
func lossyUTF8(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	var out strings.Builder
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r != utf8.RuneError || size > 1 {
			out.Write(b[i : i+size])
			i += size
			continue
		}
		out.WriteRune(utf8.RuneError)
		i += invalidRun(b[i:])
	}
	return out.String()
}

// invalidRun is the length of the maximal subpart of the ill-formed
// sequence at the start of b: its lead byte and the continuation bytes
// that fit the lead's second-byte range, then 0x80..0xBF, while the
// sequence is incomplete.
func invalidRun(b []byte) int {
	c := b[0]
	var need int
	lo, hi := byte(0x80), byte(0xBF)
	switch {
	case c >= 0xC2 && c <= 0xDF:
		need = 1
	case c == 0xE0:
		need, lo = 2, 0xA0
	case c == 0xED:
		need, hi = 2, 0x9F
	case c >= 0xE1 && c <= 0xEF:
		need = 2
	case c == 0xF0:
		need, lo = 3, 0x90
	case c == 0xF4:
		need, hi = 3, 0x8F
	case c >= 0xF1 && c <= 0xF3:
		need = 3
	default:
		return 1
	}
	n := 1
	for k := 0; k < need && n < len(b); k++ {
		if b[n] < lo || b[n] > hi {
			break
		}
		n++
		lo, hi = 0x80, 0xBF
	}
	return n
}

// bpeJSON is tokenizer.json's model of type BPE.
type bpeJSON struct {
	Vocab        map[string]int32  `json:"vocab"`
	Merges       []json.RawMessage `json:"merges"`
	Dropout      *float64          `json:"dropout"`
	Unk          *string           `json:"unk_token"`
	Prefix       *string           `json:"continuing_subword_prefix"`
	Suffix       *string           `json:"end_of_word_suffix"`
	FuseUnk      bool              `json:"fuse_unk"`
	ByteFallback bool              `json:"byte_fallback"`
	IgnoreMerges bool              `json:"ignore_merges"`
}

// loadBPE reads a BPE model into t.
func (t *Tokenizer) loadBPE(m json.RawMessage) error {
	var b bpeJSON
	if err := json.Unmarshal(m, &b); err != nil {
		return fmt.Errorf("type BPE: %w", err)
	}
	var raw struct {
		Merges json.RawMessage `json:"merges"`
	}
	if err := json.Unmarshal(m, &raw); err != nil || isNull(raw.Merges) {
		return errors.New("type BPE: merges: missing")
	}
	if len(b.Vocab) == 0 {
		return errors.New("type BPE: vocab: empty")
	}
	if b.Dropout != nil && *b.Dropout != 0 {
		return fmt.Errorf("type BPE: dropout: %v is not supported (it makes tokenization random; only null or 0)", *b.Dropout)
	}
	merges := make([][2]string, len(b.Merges))
	for k, e := range b.Merges {
		var s string
		if err := json.Unmarshal(e, &s); err == nil {
			l, r, ok := strings.Cut(s, " ")
			if !ok {
				return fmt.Errorf("type BPE: merges[%d]: %q is not two tokens separated by a space", k, s)
			}
			merges[k] = [2]string{l, r}
			continue
		}
		var pair []string
		if err := json.Unmarshal(e, &pair); err != nil || len(pair) != 2 {
			return fmt.Errorf("type BPE: merges[%d]: want \"a b\" or [\"a\", \"b\"], have %s", k, e)
		}
		merges[k] = [2]string{pair[0], pair[1]}
	}
	for s, id := range b.Vocab {
		if id < 0 || int(id) > 4*len(b.Vocab)+1024 {
			return fmt.Errorf("type BPE: vocab: id %d of %q out of range", id, s)
		}
		t.setToken(id, s)
	}
	var prefix, suffix string
	if b.Prefix != nil {
		prefix = *b.Prefix
	}
	if b.Suffix != nil {
		suffix = *b.Suffix
	}
	model, err := newBPE(b.Vocab, merges, prefix, suffix)
	if err != nil {
		return fmt.Errorf("type BPE: %w", err)
	}
	if b.Unk != nil {
		id, ok := b.Vocab[*b.Unk]
		if !ok {
			return fmt.Errorf("type BPE: unk_token: %q is not in the vocabulary", *b.Unk)
		}
		model.unk = id
	}
	model.fuseUnk, model.byteFallback, model.ignoreMerges = b.FuseUnk, b.ByteFallback, b.IgnoreMerges
	if b.ByteFallback {
		for i := range model.byteIDs {
			if id, ok := b.Vocab[fmt.Sprintf("<0x%02X>", i)]; ok {
				model.byteIDs[i] = id
			}
		}
	}
	t.model = model
	t.kind = "BPE"
	return nil
}
