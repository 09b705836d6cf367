package tokenizer

import (
	"bytes"
	"regexp"
	"unicode"
	"unicode/utf8"
)

// nstr is a normalized string that remembers, for every one of its bytes, the
// original byte range [start, end) of the input it was produced from.
type nstr struct {
	s     []byte
	start []int32
	end   []int32
}

func (n *nstr) appendRune(r rune, a, b int32) {
	if r < utf8.RuneSelf {
		n.s = append(n.s, byte(r))
		n.start = append(n.start, a)
		n.end = append(n.end, b)
		return
	}
	k := len(n.s)
	n.s = utf8.AppendRune(n.s, r)
	for ; k < len(n.s); k++ {
		n.start = append(n.start, a)
		n.end = append(n.end, b)
	}
}

func (n *nstr) appendString(s string, a, b int32) {
	n.s = append(n.s, s...)
	for range len(s) {
		n.start = append(n.start, a)
		n.end = append(n.end, b)
	}
}

func (n *nstr) appendBytes(s []byte, a, b int32) {
	n.s = append(n.s, s...)
	for range len(s) {
		n.start = append(n.start, a)
		n.end = append(n.end, b)
	}
}

// slice returns the bytes [i, j) of n, sharing memory.
func (n nstr) slice(i, j int) nstr {
	return nstr{s: n.s[i:j:j], start: n.start[i:j:j], end: n.end[i:j:j]}
}

func newNstr(capacity int) nstr {
	al := make([]int32, 2*capacity)
	return nstr{s: make([]byte, 0, capacity), start: al[0:0:capacity], end: al[capacity:capacity]}
}

// fromOriginal makes the identity nstr of text.
func fromOriginal(text string) nstr {
	n := newNstr(len(text))
	n.setOriginal(text)
	return n
}

// setOriginal makes n, which must be empty, the identity nstr of text:
// every byte maps to the byte range of its character.
func (n *nstr) setOriginal(text string) {
	n.s = append(n.s, text...)
	for i := 0; i < len(text); {
		if text[i] < utf8.RuneSelf {
			n.start = append(n.start, int32(i))
			n.end = append(n.end, int32(i+1))
			i++
			continue
		}
		_, size := utf8.DecodeRuneInString(text[i:])
		for k := 0; k < size; k++ {
			n.start = append(n.start, int32(i))
			n.end = append(n.end, int32(i+size))
		}
		i += size
	}
}

// normalizer rewrites a normalized string; it may return its input
// unchanged. What it returns anew lives in sc (see scratch.str).
type normalizer interface {
	normalize(in nstr, sc *scratch) nstr
}

// bertNormalizer is Hugging Face's BertNormalizer.
type bertNormalizer struct {
	cleanText    bool
	chineseChars bool
	stripAccents bool
	lowercase    bool
}

func isBertWhitespace(r rune) bool {
	switch r {
	case '\t', '\n', '\r', ' ':
		return true
	}
	return r > 0x7f && unicode.IsSpace(r)
}

// isBertControl reports the "other" categories Cc, Cf, Co and Cs, minus
// tab, newline and carriage return. Unassigned code points (Cn) are kept,
// as the Rust reference does for noncharacters such as U+FDD0.
func isBertControl(r rune) bool {
	switch r {
	case '\t', '\n', '\r':
		return false
	}
	if r < 0x20 || r == 0x7f {
		return true
	}
	if r < 0x80 {
		return false
	}
	return unicode.In(r, unicode.Cc, unicode.Cf, unicode.Co, unicode.Cs)
}

func isChineseChar(r rune) bool {
	return (r >= 0x4E00 && r <= 0x9FFF) ||
		(r >= 0x3400 && r <= 0x4DBF) ||
		(r >= 0x20000 && r <= 0x2A6DF) ||
		(r >= 0x2A700 && r <= 0x2B73F) ||
		(r >= 0x2B740 && r <= 0x2B81F) ||
		(r >= 0x2B920 && r <= 0x2CEAF) ||
		(r >= 0xF900 && r <= 0xFAFF) ||
		(r >= 0x2F800 && r <= 0x2FA1F)
}

func (b *bertNormalizer) normalize(in nstr, sc *scratch) nstr {
	out := sc.str(len(in.s) + len(in.s)/4)
	dec := &sc.dec
	for i := 0; i < len(in.s); {
		r, size := rune(in.s[i]), 1
		if r >= utf8.RuneSelf {
			r, size = utf8.DecodeRune(in.s[i:])
		}
		a, e := in.start[i], in.end[i+size-1]
		i += size
		if r < utf8.RuneSelf && r > 0x20 && r != 0x7f {
			// Fast path: printable ASCII.
			if b.lowercase && r >= 'A' && r <= 'Z' {
				r += 'a' - 'A'
			}
			out.s = append(out.s, byte(r))
			out.start = append(out.start, a)
			out.end = append(out.end, e)
			continue
		}
		if b.cleanText {
			if r == 0 || r == utf8.RuneError || isBertControl(r) {
				continue
			}
			if isBertWhitespace(r) {
				r = ' '
			}
		}
		if b.chineseChars && isChineseChar(r) {
			out.appendRune(' ', a, e)
			b.emit(out, r, a, e, dec)
			out.appendRune(' ', a, e)
			continue
		}
		b.emit(out, r, a, e, dec)
	}
	return *out
}

func (b *bertNormalizer) emit(out *nstr, r rune, a, e int32, dec *[]rune) {
	if !b.stripAccents && !b.lowercase {
		out.appendRune(r, a, e)
		return
	}
	rs := (*dec)[:0]
	if b.stripAccents {
		rs = appendNFD(rs, r)
	} else {
		rs = append(rs, r)
	}
	*dec = rs
	for _, c := range rs {
		if b.stripAccents && unicode.Is(unicode.Mn, c) {
			continue
		}
		if b.lowercase {
			if c == 0x130 { // İ lower-cases to two code points.
				out.appendRune('i', a, e)
				out.appendRune(0x307, a, e)
				continue
			}
			c = unicode.ToLower(c)
		}
		out.appendRune(c, a, e)
	}
}

// lowercaseNormalizer is Hugging Face's Lowercase.
type lowercaseNormalizer struct{}

func (lowercaseNormalizer) normalize(in nstr, sc *scratch) nstr {
	b := bertNormalizer{lowercase: true}
	out := sc.str(len(in.s))
	for i := 0; i < len(in.s); {
		r, size := utf8.DecodeRune(in.s[i:])
		b.emit(out, r, in.start[i], in.end[i+size-1], &sc.dec)
		i += size
	}
	return *out
}

// sequenceNormalizer applies its members in order.
type sequenceNormalizer []normalizer

func (s sequenceNormalizer) normalize(in nstr, sc *scratch) nstr {
	for _, n := range s {
		in = n.normalize(in, sc)
	}
	return in
}

// replaceNormalizer is Hugging Face's Replace: every match of a literal string
// or a regular expression becomes content. As NormalizedString::replace
// (transform_range with the match's characters removed first), the new
// characters are insertions after the match's last character and take its
// original span.
type replaceNormalizer struct {
	literal string
	re      *regexp.Regexp
	content string
}

func (p *replaceNormalizer) normalize(in nstr, sc *scratch) nstr {
	locs := sc.locs[:0]
	if p.re != nil {
		for _, l := range p.re.FindAllIndex(in.s, -1) {
			locs = append(locs, [2]int{l[0], l[1]})
		}
	} else {
		s := in.s
		for off := 0; ; {
			k := bytes.Index(s[off:], []byte(p.literal))
			if k < 0 || p.literal == "" {
				break
			}
			locs = append(locs, [2]int{off + k, off + k + len(p.literal)})
			off += k + len(p.literal)
		}
	}
	sc.locs = locs
	if len(locs) == 0 {
		return in
	}
	out := sc.str(len(in.s))
	prev := 0
	for _, l := range locs {
		out.s = append(out.s, in.s[prev:l[0]]...)
		out.start = append(out.start, in.start[prev:l[0]]...)
		out.end = append(out.end, in.end[prev:l[0]]...)
		if l[1] > l[0] {
			out.appendString(p.content, in.start[l[1]-1], in.end[l[1]-1])
		} else if len(p.content) > 0 {
			var a int32
			if l[0] < len(in.s) {
				a = in.start[l[0]]
			} else if l[0] > 0 {
				a = in.end[l[0]-1]
			}
			out.appendString(p.content, a, a)
		}
		prev = l[1]
	}
	out.s = append(out.s, in.s[prev:]...)
	out.start = append(out.start, in.start[prev:]...)
	out.end = append(out.end, in.end[prev:]...)
	return *out
}

// stripNormalizer is Hugging Face's Strip: it removes leading and/or trailing
// whitespace.
type stripNormalizer struct{ left, right bool }

func (p stripNormalizer) normalize(in nstr, _ *scratch) nstr {
	i, j := 0, len(in.s)
	if p.left {
		for i < j {
			r, size := utf8.DecodeRune(in.s[i:])
			if !unicode.IsSpace(r) {
				break
			}
			i += size
		}
	}
	if p.right {
		for j > i {
			r, size := utf8.DecodeLastRune(in.s[i:j])
			if !unicode.IsSpace(r) {
				break
			}
			j -= size
		}
	}
	return in.slice(i, j)
}

// stripAccentsNormalizer is Hugging Face's StripAccents (which expects NFD
// input): it drops nonspacing marks.
type stripAccentsNormalizer struct{}

func (stripAccentsNormalizer) normalize(in nstr, sc *scratch) nstr {
	out := sc.str(len(in.s))
	for i := 0; i < len(in.s); {
		r, size := utf8.DecodeRune(in.s[i:])
		if !unicode.Is(unicode.Mn, r) {
			out.s = append(out.s, in.s[i:i+size]...)
			out.start = append(out.start, in.start[i:i+size]...)
			out.end = append(out.end, in.end[i:i+size]...)
		}
		i += size
	}
	return *out
}
