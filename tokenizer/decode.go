package tokenizer

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// ErrDecoder is wrapped by Decode when tokenizer.json's decoder is one
// this package does not implement.
var ErrDecoder = errors.New("tokenizer: decoder not supported")

// decoder turns tokens back into text pieces, as Hugging Face's
// Decoder::decode_chain: each decoder maps the list of pieces to a new
// list, and Decode joins the last list.
type decoder interface {
	chain(tokens []string) ([]string, error)
}

// Decode turns ids back into text as Hugging Face's tokenizers'
// Tokenizer.decode does: each id's token (ids outside the vocabulary are
// left out), without the special added tokens when skipSpecial is set,
// through tokenizer.json's decoder (WordPiece, Metaspace, ByteLevel, ByteFallback,
// Fuse, Strip, Replace with a string pattern, and Sequences of them), or
// joined by spaces when the file has none. A decoder of another kind is
// an error wrapping ErrDecoder.
func (t *Tokenizer) Decode(ids []int32, skipSpecial bool) (string, error) {
	tokens := make([]string, 0, len(ids))
	for _, id := range ids {
		tok := t.Token(id)
		if tok == "" {
			continue
		}
		if skipSpecial && t.isSpecial(tok) {
			continue
		}
		tokens = append(tokens, tok)
	}
	if t.dec == nil {
		return strings.Join(tokens, " "), nil
	}
	out, err := t.dec.chain(tokens)
	if err != nil {
		return "", err
	}
	return strings.Join(out, ""), nil
}

// isSpecial reports whether tok is the content of a special added token
// (Hugging Face's AddedVocabulary::is_special_token).
func (t *Tokenizer) isSpecial(tok string) bool {
	for _, a := range t.added {
		if a.Special && a.Content == tok {
			return true
		}
	}
	return false
}

// parseDecoder reads tokenizer.json's "decoder". A decoder it does not
// know, or one whose fields it cannot read, does not fail the load (the
// tokenizer still encodes): Decode reports it.
func parseDecoder(m json.RawMessage) decoder {
	if isNull(m) {
		return nil
	}
	d, err := readDecoder(m)
	if err != nil {
		return failedDecoder{err}
	}
	return d
}

func readDecoder(m json.RawMessage) (decoder, error) {
	var ty typed
	if err := json.Unmarshal(m, &ty); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrDecoder, err)
	}
	switch ty.Type {
	case "WordPiece":
		d := struct {
			Prefix  *string `json:"prefix"`
			Cleanup *bool   `json:"cleanup"`
		}{}
		if err := json.Unmarshal(m, &d); err != nil {
			return nil, fmt.Errorf("%w: WordPiece: %v", ErrDecoder, err)
		}
		w := wordPieceDecoder{prefix: "##", cleanup: true}
		if d.Prefix != nil {
			w.prefix = *d.Prefix
		}
		if d.Cleanup != nil {
			w.cleanup = *d.Cleanup
		}
		return w, nil
	case "Metaspace":
		d := struct {
			Replacement    string  `json:"replacement"`
			AddPrefixSpace *bool   `json:"add_prefix_space"`
			PrependScheme  *string `json:"prepend_scheme"`
		}{}
		if err := json.Unmarshal(m, &d); err != nil {
			return nil, fmt.Errorf("%w: Metaspace: %v", ErrDecoder, err)
		}
		r, size := utf8.DecodeRuneInString(d.Replacement)
		if size == 0 || size != len(d.Replacement) {
			return nil, fmt.Errorf("%w: Metaspace: replacement %q is not one character", ErrDecoder, d.Replacement)
		}
		strip := true
		switch {
		case d.PrependScheme != nil:
			strip = *d.PrependScheme != "never"
		case d.AddPrefixSpace != nil:
			strip = *d.AddPrefixSpace
		}
		return metaspaceDecoder{replacement: r, stripFirst: strip}, nil
	case "ByteFallback":
		return byteFallbackDecoder{}, nil
	case "ByteLevel":
		return byteLevelDecoder{}, nil
	case "Fuse":
		return fuseDecoder{}, nil
	case "Strip":
		d := struct {
			Content string `json:"content"`
			Start   int    `json:"start"`
			Stop    int    `json:"stop"`
		}{}
		if err := json.Unmarshal(m, &d); err != nil || utf8.RuneCountInString(d.Content) != 1 {
			return nil, fmt.Errorf("%w: Strip: want one content character", ErrDecoder)
		}
		r, _ := utf8.DecodeRuneInString(d.Content)
		return stripDecoder{content: r, start: d.Start, stop: d.Stop}, nil
	case "Replace":
		d := struct {
			Pattern struct {
				String *string `json:"String"`
			} `json:"pattern"`
			Content string `json:"content"`
		}{}
		if err := json.Unmarshal(m, &d); err != nil || d.Pattern.String == nil {
			return nil, fmt.Errorf("%w: Replace: only a String pattern is supported", ErrDecoder)
		}
		return replaceDecoder{pattern: *d.Pattern.String, content: d.Content}, nil
	case "Sequence":
		d := struct {
			Decoders []json.RawMessage `json:"decoders"`
		}{}
		if err := json.Unmarshal(m, &d); err != nil {
			return nil, fmt.Errorf("%w: Sequence: %v", ErrDecoder, err)
		}
		var seq sequenceDecoder
		for _, sub := range d.Decoders {
			s, err := readDecoder(sub)
			if err != nil {
				return nil, err
			}
			seq = append(seq, s)
		}
		return seq, nil
	}
	return nil, fmt.Errorf("%w: %q", ErrDecoder, ty.Type)
}

type failedDecoder struct{ err error }

func (f failedDecoder) chain([]string) ([]string, error) { return nil, f.err }

// wordPieceDecoder glues "##" pieces to the previous token and puts a
// space before the others; cleanup removes the spaces before punctuation
// and English contractions.
type wordPieceDecoder struct {
	prefix  string
	cleanup bool
}

func (w wordPieceDecoder) chain(tokens []string) ([]string, error) {
	out := make([]string, len(tokens))
	for i, tok := range tokens {
		if i != 0 {
			if rest, ok := strings.CutPrefix(tok, w.prefix); ok {
				tok = rest
			} else {
				tok = " " + tok
			}
		}
		if w.cleanup {
			tok = cleanupSpaces(tok)
		}
		out[i] = tok
	}
	return out, nil
}

// cleanupPairs are Hugging Face's decoders::wordpiece::cleanup, in its
// order (each replacement runs on the whole result of the one before).
var cleanupPairs = [][2]string{{" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"},
	{" n't", "n't"}, {" 'm", "'m"}, {" do not", " don't"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}}

func cleanupSpaces(s string) string {
	for _, p := range cleanupPairs {
		s = strings.ReplaceAll(s, p[0], p[1])
	}
	return s
}

// metaspaceDecoder turns the replacement character back into spaces,
// dropping it from the first token when the pre-tokenizer prepended it.
type metaspaceDecoder struct {
	replacement rune
	stripFirst  bool
}

func (d metaspaceDecoder) chain(tokens []string) ([]string, error) {
	out := make([]string, len(tokens))
	for i, tok := range tokens {
		var b strings.Builder
		for _, r := range tok {
			if r == d.replacement {
				if i == 0 && d.stripFirst {
					continue
				}
				r = ' '
			}
			b.WriteRune(r)
		}
		out[i] = b.String()
	}
	return out, nil
}

// byteFallbackDecoder turns runs of <0xNN> tokens into the text of their
// bytes, or one U+FFFD a byte when the run is not UTF-8.
type byteFallbackDecoder struct{}

func (byteFallbackDecoder) chain(tokens []string) ([]string, error) {
	var out []string
	var run []byte
	flush := func() {
		if len(run) == 0 {
			return
		}
		if utf8.Valid(run) {
			out = append(out, string(run))
		} else {
			for range run {
				out = append(out, "\uFFFD")
			}
		}
		run = run[:0]
	}
	for _, tok := range tokens {
		if len(tok) == 6 && strings.HasPrefix(tok, "<0x") && tok[5] == '>' {
			if b, err := strconv.ParseUint(tok[3:5], 16, 8); err == nil {
				run = append(run, byte(b))
				continue
			}
		}
		flush()
		out = append(out, tok)
	}
	flush()
	return out, nil
}

// fuseDecoder joins every token into one.
type fuseDecoder struct{}

func (fuseDecoder) chain(tokens []string) ([]string, error) {
	return []string{strings.Join(tokens, "")}, nil
}

// stripDecoder removes up to start leading and stop trailing content
// characters from each token.
type stripDecoder struct {
	content     rune
	start, stop int
}

func (d stripDecoder) chain(tokens []string) ([]string, error) {
	out := make([]string, len(tokens))
	for i, tok := range tokens {
		rs := []rune(tok)
		lo, hi := 0, len(rs)
		for n := 0; n < d.start && lo < hi && rs[lo] == d.content; n++ {
			lo++
		}
		for n := 0; n < d.stop && hi > lo && rs[hi-1] == d.content; n++ {
			hi--
		}
		out[i] = string(rs[lo:hi])
	}
	return out, nil
}

// replaceDecoder replaces every occurrence of a string in each token.
type replaceDecoder struct{ pattern, content string }

func (d replaceDecoder) chain(tokens []string) ([]string, error) {
	out := make([]string, len(tokens))
	for i, tok := range tokens {
		out[i] = strings.ReplaceAll(tok, d.pattern, d.content)
	}
	return out, nil
}

// sequenceDecoder runs its decoders one after the other.
type sequenceDecoder []decoder

func (s sequenceDecoder) chain(tokens []string) ([]string, error) {
	var err error
	for _, d := range s {
		if tokens, err = d.chain(tokens); err != nil {
			return nil, err
		}
	}
	return tokens, nil
}
