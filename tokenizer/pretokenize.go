package tokenizer

import (
	"unicode"
	"unicode/utf8"
)

// preTokenizer cuts normalized pieces into words; each word is given to the
// model on its own. Words share memory with their input where they can; the
// word list, and any new string, live in sc (see scratch.list).
type preTokenizer interface {
	split(in []nstr, sc *scratch) []nstr
}

func isBertPunct(r rune) bool {
	if r < utf8.RuneSelf {
		return (r >= 33 && r <= 47) || (r >= 58 && r <= 64) || (r >= 91 && r <= 96) || (r >= 123 && r <= 126)
	}
	return unicode.In(r, unicode.P)
}

func isSpace(r rune) bool {
	if r < utf8.RuneSelf {
		return r == ' ' || (r >= '\t' && r <= '\r')
	}
	return unicode.IsSpace(r)
}

// bertPreTokenizer splits on whitespace (dropped) and isolates every
// punctuation character.
type bertPreTokenizer struct{}

func (bertPreTokenizer) split(in []nstr, sc *scratch) []nstr {
	total := 0
	for _, n := range in {
		total += len(n.s)
	}
	list := sc.list(total/4 + 2)
	out := *list
	for _, n := range in {
		s := n.s
		wordStart := -1
		for i := 0; i < len(s); {
			c := s[i]
			var r rune
			size := 1
			if c < utf8.RuneSelf {
				r = rune(c)
			} else {
				r, size = utf8.DecodeRune(s[i:])
			}
			switch {
			case isSpace(r):
				if wordStart >= 0 {
					out = append(out, n.slice(wordStart, i))
					wordStart = -1
				}
			case isBertPunct(r):
				if wordStart >= 0 {
					out = append(out, n.slice(wordStart, i))
					wordStart = -1
				}
				out = append(out, n.slice(i, i+size))
			default:
				if wordStart < 0 {
					wordStart = i
				}
			}
			i += size
		}
		if wordStart >= 0 {
			out = append(out, n.slice(wordStart, len(s)))
		}
	}
	*list = out
	return out
}

// punctuationPreTokenizer is Hugging Face's Punctuation pre-tokenizer with
// behavior Isolated (DeBERTa-v2's split_by_punct): every punctuation
// character (ASCII punctuation or Unicode category P, as isBertPunct) is
// a piece of its own; everything else, spaces included, stays in runs.
type punctuationPreTokenizer struct{}

func (punctuationPreTokenizer) split(in []nstr, sc *scratch) []nstr {
	list := sc.list(len(in) * 4)
	out := *list
	for _, n := range in {
		start := 0
		for i := 0; i < len(n.s); {
			r, size := rune(n.s[i]), 1
			if r >= utf8.RuneSelf {
				r, size = utf8.DecodeRune(n.s[i:])
			}
			if isBertPunct(r) {
				if start < i {
					out = append(out, n.slice(start, i))
				}
				out = append(out, n.slice(i, i+size))
				start = i + size
			}
			i += size
		}
		if start < len(n.s) {
			out = append(out, n.slice(start, len(n.s)))
		}
	}
	*list = out
	return out
}

// whitespaceSplit splits on whitespace, dropping it.
type whitespaceSplit struct{}

func (whitespaceSplit) split(in []nstr, sc *scratch) []nstr {
	list := sc.list(len(in) * 4)
	out := *list
	for _, n := range in {
		wordStart := -1
		for i := 0; i < len(n.s); {
			r, size := utf8.DecodeRune(n.s[i:])
			if isSpace(r) {
				if wordStart >= 0 {
					out = append(out, n.slice(wordStart, i))
					wordStart = -1
				}
			} else if wordStart < 0 {
				wordStart = i
			}
			i += size
		}
		if wordStart >= 0 {
			out = append(out, n.slice(wordStart, len(n.s)))
		}
	}
	*list = out
	return out
}

// whitespacePreTokenizer is Hugging Face's Whitespace: runs of word
// characters (\w) and runs of other non-space characters.
type whitespacePreTokenizer struct{}

func isWordChar(r rune) bool {
	return r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.In(r, unicode.N, unicode.Mn, unicode.Mc, unicode.Pc)
}

func (whitespacePreTokenizer) split(in []nstr, sc *scratch) []nstr {
	list := sc.list(len(in) * 4)
	out := *list
	for _, n := range in {
		start, kind := -1, 0
		for i := 0; i < len(n.s); {
			r, size := utf8.DecodeRune(n.s[i:])
			k := 2
			if isSpace(r) {
				k = 0
			} else if isWordChar(r) {
				k = 1
			}
			if k != kind || k == 0 {
				if start >= 0 {
					out = append(out, n.slice(start, i))
					start = -1
				}
				if k != 0 {
					start = i
				}
				kind = k
			}
			i += size
		}
		if start >= 0 {
			out = append(out, n.slice(start, len(n.s)))
		}
	}
	*list = out
	return out
}

// Metaspace prepend schemes.
const (
	prependAlways = iota
	prependFirst
	prependNever
)

// metaspace replaces spaces with the replacement character (▁), prepends
// one as the scheme says (aligned with the piece's first character), and, when split is set, starts a new word at every
// replacement character.
type metaspace struct {
	replacement rune
	rep         string
	prepend     int
	split_      bool
}

func (m *metaspace) split(in []nstr, sc *scratch) []nstr {
	list := sc.list(len(in) * 4)
	out := *list
	// The rewritten text of every input goes into one string, each input's
	// part of it sliced off (capacity capped) when it is complete.
	total := 0
	for _, n := range in {
		total += len(n.s) + 3*8
	}
	buf := sc.str(total)
	for _, n := range in {
		if len(n.s) == 0 {
			continue
		}
		base := len(buf.s)
		first, _ := utf8.DecodeRune(n.s)
		add := false
		switch m.prepend {
		case prependAlways:
			add = first != m.replacement && first != ' '
		case prependFirst:
			add = first != m.replacement && first != ' ' && n.start[0] == 0
		}
		if add {
			// Hugging Face's NormalizedString.prepend gives the new
			// character the alignment of the first one: a "▁" that
			// ends up a token alone spans that character.
			buf.appendString(m.rep, n.start[0], n.end[0])
		}
		for i := 0; i < len(n.s); i++ {
			if n.s[i] == ' ' {
				buf.appendString(m.rep, n.start[i], n.end[i])
				continue
			}
			buf.s = append(buf.s, n.s[i])
			buf.start = append(buf.start, n.start[i])
			buf.end = append(buf.end, n.end[i])
		}
		w := buf.slice(base, len(buf.s))
		if !m.split_ {
			out = append(out, w)
			continue
		}
		start := 0
		for i := 0; i < len(w.s); {
			r, size := utf8.DecodeRune(w.s[i:])
			if r == m.replacement && i > start {
				out = append(out, w.slice(start, i))
				start = i
			}
			i += size
		}
		if start < len(w.s) {
			out = append(out, w.slice(start, len(w.s)))
		}
	}
	*list = out
	return out
}

// sequencePreTokenizer applies its members in order.
type sequencePreTokenizer []preTokenizer

func (s sequencePreTokenizer) split(in []nstr, sc *scratch) []nstr {
	for _, p := range s {
		in = p.split(in, sc)
	}
	return in
}
