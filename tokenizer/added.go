package tokenizer

import (
	"unicode"
	"unicode/utf8"
)

// AddedToken is a token matched in the text before the model runs and never
// split: special tokens such as [CLS] or <mask>, and tokens added to a vocabulary.
type AddedToken struct {
	ID      int32
	Content string
	// SingleWord: match only where the token is not next to a word character.
	SingleWord bool
	// LStrip and RStrip: the match swallows whitespace on that side.
	LStrip, RStrip bool
	// Normalized: match in the normalized text instead of the original.
	Normalized bool
	// Special: a special token (skipped when decoding).
	Special bool
}

// addedMatcher finds added tokens, leftmost first and longest among those
// starting at the same place.
type addedMatcher struct {
	tokens   []AddedToken
	patterns []string     // what to look for (normalized content for normalized tokens)
	byFirst  [256][]int32 // candidate token indices by first byte, longest first
}

func newAddedMatcher(tokens []AddedToken, patterns []string) *addedMatcher {
	if len(tokens) == 0 {
		return nil
	}
	m := &addedMatcher{tokens: tokens, patterns: patterns}
	for i, p := range patterns {
		if p == "" {
			continue
		}
		m.byFirst[p[0]] = append(m.byFirst[p[0]], int32(i))
	}
	for c := range m.byFirst {
		l := m.byFirst[c]
		for i := 1; i < len(l); i++ { // insertion sort, longest first
			for j := i; j > 0 && len(patterns[l[j]]) > len(patterns[l[j-1]]); j-- {
				l[j], l[j-1] = l[j-1], l[j]
			}
		}
	}
	return m
}

// span is a piece of text: either an added token (tok >= 0) or plain text.
type span struct {
	i, j int
	tok  int32 // index into matcher tokens, or -1
}

func isWordRune(r rune) bool {
	return r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.In(r, unicode.N, unicode.M, unicode.Pc)
}

// find cuts s into plain spans and added-token spans.
func (m *addedMatcher) find(s []byte, out []span) []span {
	if len(s) == 0 {
		return out
	}
	if m == nil {
		return append(out, span{0, len(s), -1})
	}
	prevEnd := 0
	for i := 0; i < len(s); {
		cands := m.byFirst[s[i]]
		hit := int32(-1)
		for _, k := range cands {
			p := m.patterns[k]
			if len(p) <= len(s)-i && string(s[i:i+len(p)]) == p {
				hit = k
				break
			}
		}
		if hit < 0 {
			i++
			continue
		}
		t := &m.tokens[hit]
		start, stop := i, i+len(m.patterns[hit])
		if t.SingleWord {
			okL := start == 0
			if !okL {
				r, _ := utf8.DecodeLastRune(s[:start])
				okL = !isWordRune(r)
			}
			okR := stop == len(s)
			if !okR {
				r, _ := utf8.DecodeRune(s[stop:])
				okR = !isWordRune(r)
			}
			if !okL || !okR {
				i++
				continue
			}
		}
		if t.LStrip {
			ns := start
			for ns > prevEnd {
				r, size := utf8.DecodeLastRune(s[:ns])
				if !unicode.IsSpace(r) {
					break
				}
				ns -= size
			}
			start = ns
		}
		if t.RStrip {
			for stop < len(s) {
				r, size := utf8.DecodeRune(s[stop:])
				if !unicode.IsSpace(r) {
					break
				}
				stop += size
			}
		}
		if prevEnd < start {
			out = append(out, span{prevEnd, start, -1})
		}
		out = append(out, span{start, stop, hit})
		prevEnd = stop
		i = stop
	}
	if prevEnd < len(s) {
		out = append(out, span{prevEnd, len(s), -1})
	}
	return out
}
