package tokenizer

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func mustEncode(t *testing.T, tk *Tokenizer, text string, o Options) Encoding {
	t.Helper()
	enc, err := tk.Encode(text, o)
	if err != nil {
		t.Fatalf("Encode(%q): %v", text, err)
	}
	return enc
}

func TestEmptyInput(t *testing.T) {
	bert := testTokenizer(t, "bert-base-uncased")
	xlmr := testTokenizer(t, "xlmr-spm-unigram")
	for _, c := range []struct {
		tk   *Tokenizer
		a    string
		b    *string
		want []int32
	}{
		{bert, "", nil, []int32{101, 102}},
		{xlmr, "", nil, []int32{0, 2}},
		{bert, "", new(string), []int32{101, 102, 102}},
		{xlmr, "", new(string), []int32{0, 2, 2, 2}},
	} {
		var enc Encoding
		var err error
		if c.b != nil {
			enc, err = c.tk.EncodePair(c.a, *c.b)
		} else {
			enc, err = c.tk.Encode(c.a)
		}
		if err != nil || !slices.Equal(enc.IDs, c.want) {
			t.Errorf("%s %q: have %v, %v; want %v", c.tk.Model(), c.a, enc.IDs, err, c.want)
		}
	}
	enc := mustEncode(t, bert, "", Options{SkipSpecialTokens: true})
	if len(enc.IDs) != 0 {
		t.Errorf("empty text without special tokens: %v", enc.IDs)
	}
}

func TestInvalidUTF8(t *testing.T) {
	tk := testTokenizer(t, "bert-base-uncased")
	_, err := tk.Encode("ab\xffcd")
	var ue *InvalidUTF8Error
	if !errors.As(err, &ue) || ue.Offset != 2 {
		t.Fatalf("have %v, want an InvalidUTF8Error at byte 2", err)
	}
	if _, err := tk.EncodePair("ok", "x\xc3"); !errors.As(err, &ue) || ue.Offset != 1 {
		t.Fatalf("pair: have %v, want an InvalidUTF8Error at byte 1", err)
	}
	enc, err := tk.Encode("ab\xffcd", Options{Lenient: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(enc.IDs) < 3 {
		t.Errorf("lenient: %v", enc.Tokens)
	}
}

func TestPairTypeIDs(t *testing.T) {
	tk := testTokenizer(t, "bert-base-uncased")
	enc, err := tk.EncodePair("how old are you?", "i am six.")
	if err != nil {
		t.Fatal(err)
	}
	wantTok := []string{"[CLS]", "how", "old", "are", "you", "?", "[SEP]", "i", "am", "six", ".", "[SEP]"}
	wantType := []int32{0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1}
	if !slices.Equal(enc.Tokens, wantTok) || !slices.Equal(enc.TypeIDs, wantType) {
		t.Errorf("have %q %v", enc.Tokens, enc.TypeIDs)
	}
	wantSeq := []int8{-1, 0, 0, 0, 0, 0, -1, 1, 1, 1, 1, -1}
	if !slices.Equal(enc.SequenceIDs, wantSeq) {
		t.Errorf("sequence ids %v", enc.SequenceIDs)
	}
	enc, err = tk.EncodePair("a b", "c d", Options{SkipSpecialTokens: true})
	if err != nil || !slices.Equal(enc.TypeIDs, []int32{0, 0, 1, 1}) {
		t.Errorf("without special tokens: %v %v", enc.TypeIDs, err)
	}
}

// words returns a text of n distinct one-token words.
func words(n int) string {
	ws := []string{"alpha", "beta", "gamma", "delta", "house", "river", "stone", "cloud", "green", "light"}
	var b strings.Builder
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(ws[i%len(ws)])
	}
	return b.String()
}

func TestTruncationSingle(t *testing.T) {
	tk := testTokenizer(t, "bert-base-uncased")
	text := words(20)
	full := mustEncode(t, tk, text, Options{})
	if len(full.IDs) != 22 {
		t.Fatalf("setup: %d tokens", len(full.IDs))
	}
	_, err := tk.Encode(text, Options{MaxLength: 8})
	var tl *TooLongError
	if !errors.As(err, &tl) || tl.Length != 22 || tl.MaxLength != 8 {
		t.Errorf("no truncation: have %v", err)
	}
	enc := mustEncode(t, tk, text, Options{MaxLength: 8, Truncation: LongestFirst})
	if !slices.Equal(enc.IDs, append(append([]int32{}, full.IDs[:7]...), 102)) {
		t.Errorf("longest_first: %v", enc.IDs)
	}
	enc = mustEncode(t, tk, text, Options{MaxLength: 8, Truncation: OnlyFirst, TruncateLeft: true})
	if !slices.Equal(enc.IDs[1:7], full.IDs[15:21]) {
		t.Errorf("left truncation: %v", enc.IDs)
	}
	if _, err := tk.Encode(text, Options{MaxLength: 8, Truncation: OnlySecond}); !errors.Is(err, ErrNoSecondSequence) {
		t.Errorf("only_second on one text: %v", err)
	}
	// Exactly MaxLength is no truncation.
	enc = mustEncode(t, tk, text, Options{MaxLength: 22})
	if !slices.Equal(enc.IDs, full.IDs) {
		t.Errorf("exact fit changed the encoding")
	}
}

func TestOverflowStride(t *testing.T) {
	tk := testTokenizer(t, "bert-base-uncased")
	text := words(20)
	content := mustEncode(t, tk, text, Options{SkipSpecialTokens: true}).IDs
	enc := mustEncode(t, tk, text, Options{MaxLength: 8, Truncation: LongestFirst, Stride: 2, Overflow: true})
	wins := append([]Encoding{enc}, enc.Overflowing...)
	// 6 content tokens per window, step 4: starts 0, 4, 8, 12 (12+6 = 18 < 20), 16.
	if len(wins) != 5 {
		t.Fatalf("%d windows", len(wins))
	}
	for k, w := range wins {
		start := 4 * k
		want := content[start:min(start+6, len(content))]
		if w.IDs[0] != 101 || w.IDs[len(w.IDs)-1] != 102 || !slices.Equal(w.IDs[1:len(w.IDs)-1], want) {
			t.Errorf("window %d: %v, want [CLS] %v [SEP]", k, w.IDs, want)
		}
		if len(w.AttentionMask) != len(w.IDs) || len(w.Offsets) != len(w.IDs) || len(w.TypeIDs) != len(w.IDs) {
			t.Errorf("window %d: ragged fields", k)
		}
	}
	if _, err := tk.Encode(text, Options{MaxLength: 8, Truncation: LongestFirst, Stride: 6}); err == nil {
		t.Errorf("stride >= window: no error")
	}
	// Padding reaches the overflowing windows too.
	enc = mustEncode(t, tk, text, Options{MaxLength: 8, Truncation: LongestFirst, Stride: 2, Overflow: true, Padding: PadFixed})
	for _, w := range append([]Encoding{enc}, enc.Overflowing...) {
		if len(w.IDs) != 8 {
			t.Errorf("padded window has %d tokens", len(w.IDs))
		}
	}
}

func TestTruncationPair(t *testing.T) {
	tk := testTokenizer(t, "bert-base-uncased")
	a, b := words(4), words(12)
	count := func(e Encoding) (na, nb int) {
		for _, s := range e.SequenceIDs {
			switch s {
			case 0:
				na++
			case 1:
				nb++
			}
		}
		return
	}
	for _, c := range []struct {
		strategy Strategy
		max      int
		na, nb   int
	}{
		{LongestFirst, 13, 4, 6}, // only the longer one is cut
		{LongestFirst, 9, 3, 3},  // both: 6/2 each
		{LongestFirst, 10, 3, 4}, // 7: 3 and 4
		{OnlySecond, 13, 4, 6},   // 16 - 10 = 6 removed from b
		{OnlyFirst, 16, 1, 12},   // 3 removed from a
	} {
		enc, err := tk.EncodePair(a, b, Options{MaxLength: c.max, Truncation: c.strategy})
		if err != nil {
			t.Errorf("%v %d: %v", c.strategy, c.max, err)
			continue
		}
		na, nb := count(enc)
		if na != c.na || nb != c.nb || len(enc.IDs) != c.max {
			t.Errorf("%v max %d: %d+%d (len %d), want %d+%d", c.strategy, c.max, na, nb, len(enc.IDs), c.na, c.nb)
		}
	}
	if _, err := tk.EncodePair(a, b, Options{MaxLength: 8, Truncation: OnlyFirst}); err == nil {
		t.Errorf("only_first with a too short first text: no error")
	}
	// Overflow of a pair: windows of the second text with the whole first.
	enc, err := tk.EncodePair(a, b, Options{MaxLength: 13, Truncation: OnlySecond, Stride: 2, Overflow: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(enc.Overflowing) != 2 {
		t.Errorf("%d overflowing windows, want 2", len(enc.Overflowing))
	}
	for _, w := range enc.Overflowing {
		if na, _ := count(w); na != 4 {
			t.Errorf("first text cut in an overflowing window: %q", w.Tokens)
		}
	}
}

func TestPadding(t *testing.T) {
	bert := testTokenizer(t, "bert-base-uncased")
	enc := mustEncode(t, bert, "hello world", Options{Padding: PadFixed, PadLength: 8})
	if !slices.Equal(enc.IDs, []int32{101, 7592, 2088, 102, 0, 0, 0, 0}) ||
		!slices.Equal(enc.AttentionMask, []int32{1, 1, 1, 1, 0, 0, 0, 0}) ||
		enc.Tokens[7] != "[PAD]" || len(enc.Offsets) != 8 {
		t.Errorf("fixed: %v %v %q", enc.IDs, enc.AttentionMask, enc.Tokens)
	}
	enc = mustEncode(t, bert, "hello world", Options{Padding: PadFixed, PadLength: 3, PadToMultipleOf: 8})
	if len(enc.IDs) != 8 {
		t.Errorf("multiple of 8: %d", len(enc.IDs))
	}
	enc = mustEncode(t, bert, "hello world", Options{Padding: PadFixed, PadLength: 6, PadLeft: true})
	if !slices.Equal(enc.IDs, []int32{0, 0, 101, 7592, 2088, 102}) {
		t.Errorf("left: %v", enc.IDs)
	}
	xlmr := testTokenizer(t, "xlmr-spm-unigram")
	encs, err := xlmr.EncodeBatch(context.Background(), []string{"hello world", "hello", ""}, Options{Padding: PadLongest})
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range encs {
		if len(e.IDs) != 5 || len(e.AttentionMask) != 5 || len(e.TypeIDs) != 5 {
			t.Errorf("batch item %d: %v", i, e.IDs)
		}
	}
	if !slices.Equal(encs[2].IDs, []int32{0, 2, 1, 1, 1}) || !slices.Equal(encs[2].AttentionMask, []int32{1, 1, 0, 0, 0}) {
		t.Errorf("xlm-r padding: %v %v", encs[2].IDs, encs[2].AttentionMask)
	}
}

func TestBatchMatchesSequential(t *testing.T) {
	tk := testTokenizer(t, "xlmr-spm-unigram")
	var texts []string
	var pairs []Pair
	for _, c := range loadGolden(t, "xlmr-spm-unigram") {
		texts = append(texts, c.Text)
		if c.TextPair != nil {
			pairs = append(pairs, Pair{c.Text, *c.TextPair})
		}
	}
	encs, err := tk.EncodeBatch(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range texts {
		want := mustEncode(t, tk, s, Options{})
		if !slices.Equal(encs[i].IDs, want.IDs) || !slices.Equal(encs[i].Offsets, want.Offsets) {
			t.Fatalf("item %d differs", i)
		}
	}
	pencs, err := tk.EncodePairBatch(context.Background(), pairs)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range pairs {
		want, _ := tk.EncodePair(p.A, p.B)
		if !slices.Equal(pencs[i].IDs, want.IDs) {
			t.Fatalf("pair %d differs", i)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := tk.EncodeBatch(ctx, texts); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled batch: %v", err)
	}
	if _, err := tk.EncodeBatch(context.Background(), []string{"ok", "bad\xff"}); err == nil || !strings.Contains(err.Error(), "item 1") {
		t.Errorf("bad item: %v", err)
	}
}

// substr returns runes [i, j) of s.
func substr(s string, o [2]int) string {
	r := []rune(s)
	return string(r[o[0]:o[1]])
}

func TestOffsetsBERT(t *testing.T) {
	tk := testTokenizer(t, "bert-base-uncased")
	norm := tk.norm
	for _, text := range []string{
		"Hello, World!",
		"Héllo wörld: café crème brûlée",
		"unflinchingly bleak 你好世界 and desperate",
		"  leading and   inner spaces\t\ttabs ",
		"[CLS] masked [MASK] token",
		"emoji 😀 and ⅷ roman",
	} {
		enc := mustEncode(t, tk, text, Options{SkipSpecialTokens: true})
		for k, tok := range enc.Tokens {
			if enc.IDs[k] == 100 {
				continue
			}
			sub := substr(text, enc.Offsets[k])
			if _, isAdded := tk.special[tok]; isAdded {
				if sub != tok {
					t.Errorf("%q: added token %q at %v is %q", text, tok, enc.Offsets[k], sub)
				}
				continue
			}
			n := norm.normalize(fromOriginal(sub), new(scratch))
			if got := strings.TrimSpace(string(n.s)); got != strings.TrimPrefix(tok, "##") {
				t.Errorf("%q: token %q at %v maps back to %q (normalized %q)", text, tok, enc.Offsets[k], sub, got)
			}
		}
	}
}

func TestOffsetsXLMR(t *testing.T) {
	tk := testTokenizer(t, "xlmr-spm-unigram")
	for _, text := range []string{
		"hello world",
		"The quick brown fox jumps over the lazy dog.",
		"a <mask> here",
		"numbers: 0 1 12 123",
	} {
		enc := mustEncode(t, tk, text, Options{SkipSpecialTokens: true})
		for k, tok := range enc.Tokens {
			sub := substr(text, enc.Offsets[k])
			// An lstrip token (<mask>) holds the white space it took, as in Hugging Face.
			if strings.TrimSpace(sub) != strings.TrimSpace(strings.TrimPrefix(tok, "▁")) {
				t.Errorf("%q: token %q at %v maps back to %q", text, tok, enc.Offsets[k], sub)
			}
		}
	}
	// Offsets count runes, not bytes.
	enc := mustEncode(t, tk, "ééé abc", Options{SkipSpecialTokens: true})
	last := enc.Offsets[len(enc.Offsets)-1]
	if last[1] != 7 {
		t.Errorf("last offset %v, want it to end at rune 7", last)
	}
}

func TestAddedTokens(t *testing.T) {
	bert := testTokenizer(t, "bert-base-uncased")
	enc := mustEncode(t, bert, "[CLS]hello[MASK] world[SEP]", Options{SkipSpecialTokens: true})
	if !slices.Equal(enc.IDs, []int32{101, 7592, 103, 2088, 102}) {
		t.Errorf("bert specials in text: %v %q", enc.IDs, enc.Tokens)
	}
	// Not normalized: the lower-case spelling is ordinary text.
	enc = mustEncode(t, bert, "[mask]", Options{SkipSpecialTokens: true})
	if slices.Contains(enc.IDs, 103) {
		t.Errorf("[mask] matched [MASK]: %q", enc.Tokens)
	}
	xlmr := testTokenizer(t, "xlmr-spm-unigram")
	enc = mustEncode(t, xlmr, "hello   <mask>!", Options{SkipSpecialTokens: true})
	k := slices.Index(enc.IDs, 8001)
	if k < 0 {
		t.Fatalf("<mask> not found: %q", enc.Tokens)
	}
	// lstrip: the match swallows the space before it, which the
	// normalizer's Replace made of the run of three and which maps to the
	// run's last character: [7 14], as HF's Rust tokenizers give it.
	if enc.Offsets[k] != [2]int{7, 14} {
		t.Errorf("<mask> offsets %v, want [7 14]", enc.Offsets[k])
	}
	if id, ok := xlmr.ID("<mask>"); !ok || id != 8001 || xlmr.Token(8001) != "<mask>" {
		t.Errorf("ID/Token of <mask>")
	}
}

func TestVocabAndSpecial(t *testing.T) {
	bert := testTokenizer(t, "bert-base-uncased")
	if bert.VocabSize() != 30522 || bert.Model() != "WordPiece" {
		t.Errorf("bert: %d %s", bert.VocabSize(), bert.Model())
	}
	if s := bert.Special(); s != (SpecialTokens{CLS: 101, SEP: 102, PAD: 0, UNK: 100, MASK: 103, BOS: 101, EOS: 102}) {
		t.Errorf("bert specials %+v", s)
	}
	xlmr := testTokenizer(t, "xlmr-spm-unigram")
	if xlmr.VocabSize() != 8002 || xlmr.Model() != "Unigram" {
		t.Errorf("xlmr: %d %s", xlmr.VocabSize(), xlmr.Model())
	}
	if s := xlmr.Special(); s != (SpecialTokens{CLS: 0, SEP: 2, PAD: 1, UNK: 3, MASK: 8001, BOS: 0, EOS: 2}) {
		t.Errorf("xlmr specials %+v", s)
	}
	if bert.Token(-1) != "" || bert.Token(1<<20) != "" {
		t.Errorf("Token out of range")
	}
	o, ok := bert.FileOptions()
	if !ok || o.MaxLength != 128 || o.Truncation != LongestFirst || o.Padding != PadFixed || o.PadLength != 128 {
		t.Errorf("bert file options %+v %v", o, ok)
	}
	if _, ok := xlmr.FileOptions(); ok {
		t.Errorf("xlmr has no truncation or padding in its file")
	}
}

func TestLongWordIsUnknown(t *testing.T) {
	tk := testTokenizer(t, "bert-base-uncased")
	enc := mustEncode(t, tk, strings.Repeat("a", 101)+" b", Options{SkipSpecialTokens: true})
	if !slices.Equal(enc.IDs, []int32{100, 1038}) || enc.Offsets[0] != [2]int{0, 101} {
		t.Errorf("101-letter word: %v %v", enc.IDs, enc.Offsets)
	}
}

func TestCorruptJSON(t *testing.T) {
	for _, c := range []struct{ json, field string }{
		{`{`, "tokenizer.json"},
		{`{}`, "model"},
		{`{"model":{"type":"BPE","vocab":{}}}`, "model: type"},
		{`{"model":{"type":"WordPiece","vocab":{}}}`, "model: vocab"},
		{`{"model":{"type":"WordPiece","vocab":{"a":0},"unk_token":"[UNK]"}}`, "unk_token"},
		{`{"model":{"type":"WordPiece","vocab":{"a":-3}}}`, "vocab"},
		{`{"model":{"type":"Unigram","vocab":[["a",1.5]],"unk_id":7}}`, "unk_id"},
		{`{"model":{"type":"Unigram","vocab":[["a","x"]],"unk_id":0}}`, "vocab[0]: score"},
		{`{"model":{"type":"Unigram","vocab":[["a",-1]],"unk_id":0},"normalizer":{"type":"Precompiled","precompiled_charsmap":"!!"}}`, "precompiled_charsmap"},
		{`{"model":{"type":"Unigram","vocab":[["a",-1]],"unk_id":0},"normalizer":{"type":"Precompiled","precompiled_charsmap":"AAAAAA=="}}`, "precompiled_charsmap"},
		{`{"model":{"type":"Unigram","vocab":[["a",-1]],"unk_id":0},"normalizer":{"type":"Replace","pattern":{"Regex":"("},"content":""}}`, "pattern.Regex"},
		{`{"model":{"type":"Unigram","vocab":[["a",-1]],"unk_id":0},"pre_tokenizer":{"type":"Metaspace","replacement":"ab"}}`, "replacement"},
		{`{"model":{"type":"Unigram","vocab":[["a",-1]],"unk_id":0},"post_processor":{"type":"TemplateProcessing","single":[{"SpecialToken":{"id":"<s>","type_id":0}}],"pair":[],"special_tokens":{}}}`, "special_tokens"},
		{`{"model":{"type":"Unigram","vocab":[["a",-1]],"unk_id":0},"added_tokens":[{"id":-1,"content":"x"}]}`, "added_tokens[0]"},
		{`{"model":{"type":"Unigram","vocab":[["a",-1]],"unk_id":0},"padding":{"strategy":"Sometimes"}}`, "padding.strategy"},
		{`{"model":{"type":"Unigram","vocab":[["a",-1]],"unk_id":0},"padding":{"strategy":"BatchLongest","pad_id":9}}`, "padding.pad_id"},
		{`{"model":{"type":"Unigram","vocab":[["a",-1]],"unk_id":0},"post_processor":{"type":"BertProcessing","sep":["</s>",5],"cls":["<s>",0]}}`, "post_processor"},
		{`{"model":{"type":"Unigram","vocab":[["a",-1]],"unk_id":0},"added_tokens":[{"id":1000000000,"content":"x"}]}`, "added_tokens[0]"},
	} {
		_, err := FromJSON([]byte(c.json))
		if err == nil || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s: have %v, want an error naming %q", c.json, err, c.field)
		}
	}
}

// checkInvariants is shared by the fuzz target: ids in range, offsets
// within the text, starts non-decreasing, fields of equal length.
func checkInvariants(t *testing.T, tk *Tokenizer, text string, n int, enc Encoding) {
	t.Helper()
	if len(enc.TypeIDs) != len(enc.IDs) || len(enc.Offsets) != len(enc.IDs) || len(enc.Tokens) != len(enc.IDs) || len(enc.AttentionMask) != len(enc.IDs) {
		t.Fatalf("%q: ragged encoding", text)
	}
	prev := 0
	for k, id := range enc.IDs {
		if id < 0 || int(id) >= tk.VocabSize() {
			t.Fatalf("%q: id %d out of range", text, id)
		}
		o := enc.Offsets[k]
		if enc.SequenceIDs[k] < 0 {
			continue
		}
		if o[0] < 0 || o[0] > o[1] || o[1] > n {
			t.Fatalf("%q: offsets %v outside [0, %d]", text, o, n)
		}
		if o[0] < prev {
			t.Fatalf("%q: offsets decrease at token %d: %v", text, k, enc.Offsets)
		}
		prev = o[0]
	}
}

func FuzzEncode(f *testing.F) {
	bert := testTokenizer(f, "bert-base-uncased")
	xlmr := testTokenizer(f, "xlmr-spm-unigram")
	for _, c := range loadGolden(f, "bert-base-uncased") {
		f.Add(c.Text)
	}
	f.Add("a\u0301\u0302 \r\n \U0001F1EB\U0001F1F7 \U0001F468\u200D\U0001F469 \u1100\u1161\u11A8 \ufb01\u0301")
	f.Fuzz(func(t *testing.T, text string) {
		if len(text) > 2048 {
			text = text[:2048] // keep each run cheap; long inputs add nothing new
		}
		if !utf8.ValidString(text) {
			if _, err := bert.Encode(text); err == nil {
				t.Fatalf("%q: invalid UTF-8 accepted", text)
			}
			text = strings.ToValidUTF8(text, "\uFFFD")
		}
		for _, tk := range []*Tokenizer{bert, xlmr} {
			enc, err := tk.Encode(text)
			if err != nil {
				t.Fatalf("%q: %v", text, err)
			}
			n := utf8.RuneCountInString(text)
			checkInvariants(t, tk, text, n, enc)
			enc, err = tk.Encode(text, Options{MaxLength: 8, Truncation: LongestFirst, Stride: 2, Overflow: true, Padding: PadFixed})
			if err != nil {
				t.Fatalf("%q: %v", text, err)
			}
			for _, w := range append([]Encoding{enc}, enc.Overflowing...) {
				if len(w.IDs) != 8 {
					t.Fatalf("%q: window of %d tokens", text, len(w.IDs))
				}
				checkInvariants(t, tk, text, n, w)
			}
			// A batch (one worker's reused memory for every item) gives
			// what Encode does, and InputsOnly the same model inputs.
			o := Options{MaxLength: 8, Truncation: LongestFirst, Stride: 2, Overflow: true, Padding: PadFixed}
			batch := []string{text, "x " + text, text + " é"}
			encs, err := tk.EncodeBatch(context.Background(), batch, o)
			if err != nil {
				t.Fatalf("%q: batch: %v", text, err)
			}
			lo := o
			lo.InputsOnly = true
			for i, s := range batch {
				want, err := tk.Encode(s, o)
				if err != nil || !reflect.DeepEqual(encs[i], want) {
					t.Fatalf("%q: batch item %d differs from Encode (%v)", s, i, err)
				}
				lean, err := tk.Encode(s, lo)
				if err != nil || !sameInputs(lean, want) {
					t.Fatalf("%q: InputsOnly differs from the full encoding (%v)", s, err)
				}
			}
		}
	})
}

// FuzzPrecompiled feeds arbitrary charsmaps and texts to the SentencePiece
// normalizer: a corrupt trie must give an error or no match, never a panic.
func FuzzPrecompiled(f *testing.F) {
	f.Add([]byte{8, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 'a', 0}, "abc")
	f.Add([]byte{4, 0, 0, 0, 0xff, 0xff, 0xff, 0xff}, "\u00e9\r\n")
	f.Fuzz(func(t *testing.T, blob []byte, text string) {
		p, err := newPrecompiled(blob)
		if err != nil || !utf8.ValidString(text) {
			return
		}
		n := p.normalize(fromOriginal(text), new(scratch))
		if len(n.start) != len(n.s) || len(n.end) != len(n.s) {
			t.Fatalf("ragged alignment")
		}
	})
}

func TestLoadVariants(t *testing.T) {
	tk, err := Load(filepath.Join("testdata", "xlmr-spm-unigram"))
	if err != nil || tk.Model() != "Unigram" {
		t.Fatalf("folder: %v", err)
	}
	if _, err := Load(filepath.Join("testdata", "nonexistent")); err == nil {
		t.Errorf("missing path: no error")
	}
	if _, err := Load("testdata"); err == nil {
		t.Errorf("folder without a tokenizer: no error")
	}
	vocab, err := os.ReadFile(filepath.Join("testdata", "bert-base-uncased", "vocab.txt"))
	if err != nil {
		t.Fatal(err)
	}
	cased, err := FromVocab(vocab, []byte(`{"do_lower_case": false}`))
	if err != nil {
		t.Fatal(err)
	}
	// Without lower-casing (and so without accent stripping) "Café" keeps its
	// capital and its accent, neither of which the uncased vocabulary has.
	enc := mustEncode(t, cased, "Café", Options{SkipSpecialTokens: true})
	if !slices.Equal(enc.IDs, []int32{100}) {
		t.Errorf("cased Café: %v %q", enc.IDs, enc.Tokens)
	}
	enc = mustEncode(t, testTokenizer(t, "bert-base-uncased"), "Café", Options{SkipSpecialTokens: true})
	if !slices.Equal(enc.Tokens, []string{"cafe"}) {
		t.Errorf("uncased Café: %q", enc.Tokens)
	}
	if _, err := FromVocab([]byte("a\nb\n"), nil); err == nil {
		t.Errorf("vocab without [UNK]: no error")
	}
}
