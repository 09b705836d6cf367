package tokenizer

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unicode"
	"unicode/utf8"
)

// precompiledNormalizer interprets SentencePiece's normalizer spec as carried
// in tokenizer.json's "precompiled_charsmap": a little-endian uint32 giving
// the size in bytes of a Darts double-array trie, the trie's uint32 units, and
// then the replacement strings, each terminated by a NUL byte. A trie value is
// the byte offset of a replacement string.
//
// Like the Rust reference, the input is cut into grapheme clusters; a cluster
// shorter than 6 bytes is looked up whole, and replaced by the entry of the
// shortest key that is a prefix of it; otherwise, and when that finds nothing,
// each character is looked up on its own.
type precompiledNormalizer struct {
	units      []uint32
	normalized []byte
	ascii      [128]string // replacement of each ASCII byte; "\x00" when none
}

func newPrecompiled(blob []byte) (*precompiledNormalizer, error) {
	if len(blob) < 4 {
		return nil, errors.New("blob shorter than its header")
	}
	size := binary.LittleEndian.Uint32(blob)
	if size%4 != 0 || uint64(size) > uint64(len(blob)-4) || size == 0 {
		return nil, fmt.Errorf("trie size %d does not fit a blob of %d bytes", size, len(blob))
	}
	p := &precompiledNormalizer{units: make([]uint32, size/4)}
	for i := range p.units {
		p.units[i] = binary.LittleEndian.Uint32(blob[4+4*i:])
	}
	p.normalized = blob[4+size:]
	if !utf8.Valid(p.normalized) {
		return nil, errors.New("replacement strings are not valid UTF-8")
	}
	for c := 0; c < 128; c++ {
		if s, ok := p.transform([]byte{byte(c)}); ok {
			p.ascii[c] = string(s)
		} else {
			p.ascii[c] = "\x00"
		}
	}
	return p, nil
}

// transform returns the replacement of the shortest trie key that is a prefix
// of key (inside p's strings: not to be written to). It never panics on a
// corrupt trie: bad indices mean "no match".
func (p *precompiledNormalizer) transform(key []byte) ([]byte, bool) {
	units := p.units
	if len(units) == 0 {
		return nil, false
	}
	offset := func(u uint32) uint32 { return (u >> 10) << ((u & (1 << 9)) >> 6) }
	pos := offset(units[0])
	for _, c := range key {
		if c == 0 {
			break
		}
		pos ^= uint32(c)
		if int(pos) >= len(units) {
			return nil, false
		}
		u := units[pos]
		if u&((1<<31)|0xff) != uint32(c) {
			return nil, false
		}
		pos ^= offset(u)
		if (u>>8)&1 == 1 {
			if int(pos) >= len(units) {
				return nil, false
			}
			v := int(units[pos] & ((1 << 31) - 1))
			if v > len(p.normalized) {
				return nil, false
			}
			end := v
			for end < len(p.normalized) && p.normalized[end] != 0 {
				end++
			}
			return p.normalized[v:end:end], true
		}
	}
	return nil, false
}

func (p *precompiledNormalizer) normalize(in nstr, sc *scratch) nstr {
	// Fast check: ASCII text that no entry rewrites stays as it is.
	changed := false
	for _, c := range in.s {
		if c >= utf8.RuneSelf || p.ascii[c] != "\x00" {
			changed = true
			break
		}
	}
	if !changed {
		return in
	}
	out := sc.str(len(in.s) + 8)
	for i := 0; i < len(in.s); {
		j := graphemeEnd(in.s, i)
		a, e := in.start[i], in.end[j-1]
		if j-i == 1 {
			c := in.s[i]
			if r := p.ascii[c]; r != "\x00" {
				out.appendString(r, a, e)
			} else {
				out.s = append(out.s, c)
				out.start = append(out.start, a)
				out.end = append(out.end, e)
			}
			i = j
			continue
		}
		if j-i < 6 {
			if r, ok := p.transform(in.s[i:j]); ok {
				appendAligned(out, r, in, i, j)
				i = j
				continue
			}
		}
		for i < j {
			_, size := utf8.DecodeRune(in.s[i:j])
			ca, ce := in.start[i], in.end[i+size-1]
			if r, ok := p.transform(in.s[i : i+size]); ok {
				out.appendBytes(r, ca, ce)
			} else {
				out.s = append(out.s, in.s[i:i+size]...)
				out.start = append(out.start, in.start[i:i+size]...)
				out.end = append(out.end, in.end[i:i+size]...)
			}
			i += size
		}
	}
	return *out
}

// appendAligned appends r, the rewriting of the grapheme in.s[i:j], as
// Hugging Face's Precompiled aligns it (its replace and
// NormalizedString.transform): the k-th character of r takes the
// alignment of the grapheme's k-th character; characters beyond the
// grapheme's count take its last one's, and the grapheme's characters
// beyond r's count are dropped ("e" + U+0301 -> "é" spans the "e" only).
func appendAligned(out *nstr, r []byte, in nstr, i, j int) {
	a, e := in.start[i], in.end[j-1]
	for k := 0; k < len(r); {
		_, size := utf8.DecodeRune(r[k:])
		if i < j {
			_, os := utf8.DecodeRune(in.s[i:j])
			a, e = in.start[i], in.end[i+os-1]
			i += os
		}
		out.appendBytes(r[k:k+size], a, e)
		k += size
	}
}

// graphemeEnd returns the end of the extended grapheme cluster that starts at
// s[i]. It is an approximation of UAX #29 that covers what matters here: CR LF,
// combining marks and other extenders, zero-width joiner sequences, regional
// indicator pairs and Hangul jamo sequences.
func graphemeEnd(s []byte, i int) int {
	r, size := utf8.DecodeRune(s[i:])
	j := i + size
	if r == '\r' {
		if j < len(s) && s[j] == '\n' {
			return j + 1
		}
		return j
	}
	if r < 0x20 || r == 0x7f {
		return j
	}
	prev := r
	riCount := 0
	if isRegionalIndicator(r) {
		riCount = 1
	}
	for j < len(s) {
		if s[j] < utf8.RuneSelf {
			return j
		}
		n, nsize := utf8.DecodeRune(s[j:])
		switch {
		case isGraphemeExtend(n):
		case prev == 0x200D && isPictographic(n):
		case riCount == 1 && isRegionalIndicator(n):
			riCount = 2
		case hangulJoins(prev, n):
		default:
			return j
		}
		prev = n
		j += nsize
	}
	return j
}

func isGraphemeExtend(r rune) bool {
	switch {
	case r == 0x200D || r == 0x200C:
		return true
	case r >= 0xFE00 && r <= 0xFE0F, r >= 0xE0100 && r <= 0xE01EF:
		return true
	case r >= 0x1F3FB && r <= 0x1F3FF:
		return true
	case r >= 0xE0020 && r <= 0xE007F:
		return true
	}
	return unicode.In(r, unicode.Mn, unicode.Me, unicode.Mc)
}

func isRegionalIndicator(r rune) bool { return r >= 0x1F1E6 && r <= 0x1F1FF }

func isPictographic(r rune) bool {
	return (r >= 0x1F000 && r <= 0x1FAFF) || (r >= 0x2600 && r <= 0x27BF) || r == 0x2764
}

func hangulKind(r rune) byte {
	switch {
	case r >= 0x1100 && r <= 0x115F, r >= 0xA960 && r <= 0xA97C:
		return 'L'
	case r >= 0x1160 && r <= 0x11A7, r >= 0xD7B0 && r <= 0xD7C6:
		return 'V'
	case r >= 0x11A8 && r <= 0x11FF, r >= 0xD7CB && r <= 0xD7FB:
		return 'T'
	case r >= hangulSBase && r < hangulSBase+hangulSCount:
		if (r-hangulSBase)%hangulTCount == 0 {
			return 'v' // LV syllable
		}
		return 't' // LVT syllable
	}
	return 0
}

func hangulJoins(a, b rune) bool {
	ka, kb := hangulKind(a), hangulKind(b)
	switch ka {
	case 'L':
		return kb == 'L' || kb == 'V' || kb == 'v' || kb == 't'
	case 'V', 'v':
		return kb == 'V' || kb == 'T'
	case 'T', 't':
		return kb == 'T'
	}
	return false
}
