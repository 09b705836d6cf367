package tokenizer

//go:generate sh -c "cd _gen && python3 gen_nfd.py"

import (
	"sort"
	"unicode/utf8"
)

// Hangul syllable decomposition constants (Unicode chapter 3.12).
const (
	hangulSBase  = 0xAC00
	hangulLBase  = 0x1100
	hangulVBase  = 0x1161
	hangulTBase  = 0x11A7
	hangulLCount = 19
	hangulVCount = 21
	hangulTCount = 28
	hangulNCount = hangulVCount * hangulTCount
	hangulSCount = hangulLCount * hangulNCount
)

// lookupRunes finds r in keys and returns its value from the ends/runes pair.
func lookupRunes(keys []rune, ends []uint16, runes []rune, r rune) ([]rune, bool) {
	i := sort.Search(len(keys), func(i int) bool { return keys[i] >= r })
	if i == len(keys) || keys[i] != r {
		return nil, false
	}
	start := 0
	if i > 0 {
		start = int(ends[i-1])
	}
	return runes[start:ends[i]], true
}

// appendNFD appends the canonical decomposition of r to dst, without
// canonical reordering (see normalizeForm for the full algorithm).
func appendNFD(dst []rune, r rune) []rune {
	if r < 0xC0 {
		return append(dst, r)
	}
	if r >= hangulSBase && r < hangulSBase+hangulSCount {
		s := r - hangulSBase
		dst = append(dst, hangulLBase+s/hangulNCount, hangulVBase+(s%hangulNCount)/hangulTCount)
		if t := s % hangulTCount; t != 0 {
			dst = append(dst, hangulTBase+t)
		}
		return dst
	}
	if d, ok := lookupRunes(nfdKeys[:], nfdEnds[:], nfdRunes[:], r); ok {
		return append(dst, d...)
	}
	return append(dst, r)
}

// appendNFKD appends the compatibility decomposition of r to dst.
func appendNFKD(dst []rune, r rune) []rune {
	if r < 0xA0 {
		return append(dst, r)
	}
	if d, ok := lookupRunes(nfkdKeys[:], nfkdEnds[:], nfkdRunes[:], r); ok {
		return append(dst, d...)
	}
	return appendNFD(dst, r)
}

// combiningClass returns the canonical combining class of r.
func combiningClass(r rune) uint8 {
	if r < 0x300 {
		return 0
	}
	i := sort.Search(len(cccKeys), func(i int) bool { return cccKeys[i] >= r })
	if i < len(cccKeys) && cccKeys[i] == r {
		return cccVals[i]
	}
	return 0
}

// compose returns the primary composite of a and b, if any.
func compose(a, b rune) (rune, bool) {
	if a >= hangulLBase && a < hangulLBase+hangulLCount && b >= hangulVBase && b < hangulVBase+hangulVCount {
		return hangulSBase + ((a-hangulLBase)*hangulVCount+(b-hangulVBase))*hangulTCount, true
	}
	if a >= hangulSBase && a < hangulSBase+hangulSCount && (a-hangulSBase)%hangulTCount == 0 &&
		b > hangulTBase && b < hangulTBase+hangulTCount {
		return a + (b - hangulTBase), true
	}
	key := uint64(a)<<21 | uint64(b)
	i := sort.Search(len(compKeys), func(i int) bool { return compKeys[i] >= key })
	if i < len(compKeys) && compKeys[i] == key {
		return compVals[i], true
	}
	return 0, false
}

// formNormalizer is Hugging Face's NFD, NFKD, NFC or NFKC: decomposition,
// canonical reordering and, for the composed forms, canonical composition.
// A composed character maps back to the original span of all its parts.
type formNormalizer struct {
	compat, composed bool
}

// formRune is a character of formNormalizer's work: the character, its
// original span and its canonical combining class.
type formRune struct {
	r    rune
	a, e int32
	ccc  uint8
}

func (f formNormalizer) normalize(in nstr, sc *scratch) nstr {
	ascii := true
	for _, c := range in.s {
		if c >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	if ascii {
		return in
	}
	buf := sc.forms[:0]
	dec := sc.dec
	for i := 0; i < len(in.s); {
		r, size := utf8.DecodeRune(in.s[i:])
		a, e := in.start[i], in.end[i+size-1]
		i += size
		if f.compat {
			dec = appendNFKD(dec[:0], r)
		} else {
			dec = appendNFD(dec[:0], r)
		}
		for _, c := range dec {
			buf = append(buf, formRune{c, a, e, combiningClass(c)})
		}
	}
	sc.forms, sc.dec = buf, dec
	// Canonical ordering: stable sort of every run of non-starters.
	for i := 1; i < len(buf); i++ {
		for j := i; j > 0 && buf[j].ccc != 0 && buf[j-1].ccc > buf[j].ccc; j-- {
			buf[j], buf[j-1] = buf[j-1], buf[j]
		}
	}
	if f.composed && len(buf) > 0 {
		out := buf[:1]
		starter := -1
		last := buf[0].ccc
		if last == 0 {
			starter = 0
		} else {
			last = 255
		}
		for _, c := range buf[1:] {
			if starter >= 0 && (last < c.ccc || last == 0) {
				if r, ok := compose(out[starter].r, c.r); ok {
					s := &out[starter]
					s.r = r
					s.a, s.e = min(s.a, c.a), max(s.e, c.e)
					continue
				}
			}
			if c.ccc == 0 {
				starter = len(out)
			}
			last = c.ccc
			out = append(out, c)
		}
		buf = out
	}
	res := sc.str(len(in.s) + 8)
	for _, c := range buf {
		res.appendRune(c.r, c.a, c.e)
	}
	return *res
}
