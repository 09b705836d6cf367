package tokenizer

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// bpeGoldenCase is one text (or pair) of testdata/roberta-base/golden.json.gz,
// as Hugging Face's Rust tokenizers encoded and decoded it.
type bpeGoldenCase struct {
	Text         string   `json:"text"`
	TextPair     *string  `json:"text_pair"`
	IDs          []int32  `json:"ids"`
	TypeIDs      []int32  `json:"type_ids"`
	Tokens       []string `json:"tokens"`
	Offsets      [][2]int `json:"offsets"`
	Special      []int32  `json:"special"`
	IDsPlain     []int32  `json:"ids_plain"`
	OffsetsPlain [][2]int `json:"offsets_plain"`
	DecodeKeep   *string  `json:"decode_keep"`
	DecodeSkip   *string  `json:"decode_skip"`
	CutIDs       []int32  `json:"cut_ids"`
	DecodeCut    *string  `json:"decode_cut"`
}

func gunzipFile(tb testing.TB, name string) []byte {
	tb.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "roberta-base", name))
	if err != nil {
		tb.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		tb.Fatal(err)
	}
	var out bytes.Buffer
	if _, err := out.ReadFrom(zr); err != nil {
		tb.Fatal(err)
	}
	return out.Bytes()
}

// bpeVariant edits roberta-base's tokenizer.json as _gen/gen_bpe.js does
// for the golden variant of that name.
func bpeVariant(tb testing.TB, name string) map[string]any {
	tb.Helper()
	var j map[string]any
	if err := json.Unmarshal(gunzipFile(tb, "tokenizer.json.gz"), &j); err != nil {
		tb.Fatal(err)
	}
	pre := j["pre_tokenizer"].(map[string]any)
	post := j["post_processor"].(map[string]any)
	switch name {
	case "base":
	case "prefix":
		pre["add_prefix_space"], post["add_prefix_space"] = true, true
	case "notrim":
		post["trim_offsets"] = false
	case "bytelevel_post":
		pre["add_prefix_space"] = true
		j["post_processor"] = map[string]any{"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true}
	case "noregex":
		pre["use_regex"] = false
		j["post_processor"] = nil
	default:
		tb.Fatalf("no variant %q", name)
	}
	return j
}

func fromMap(tb testing.TB, j map[string]any) *Tokenizer {
	tb.Helper()
	data, err := json.Marshal(j)
	if err != nil {
		tb.Fatal(err)
	}
	tk, err := FromJSON(data)
	if err != nil {
		tb.Fatal(err)
	}
	return tk
}

// robertaTokenizer is roberta-base's tokenizer.json (variant base), loaded once.
func robertaTokenizer(tb testing.TB) *Tokenizer {
	tb.Helper()
	if v, ok := tokCache.Load("roberta-base"); ok {
		return v.(*Tokenizer)
	}
	tk := fromMap(tb, bpeVariant(tb, "base"))
	tokCache.Store("roberta-base", tk)
	return tk
}

func bpeGolden(tb testing.TB) map[string][]bpeGoldenCase {
	tb.Helper()
	if v, ok := goldenOnce.Load("roberta-base/bpe"); ok {
		return v.(map[string][]bpeGoldenCase)
	}
	var g struct {
		Variants map[string][]bpeGoldenCase `json:"variants"`
	}
	if err := json.Unmarshal(gunzipFile(tb, "golden.json.gz"), &g); err != nil {
		tb.Fatal(err)
	}
	goldenOnce.Store("roberta-base/bpe", g.Variants)
	return g.Variants
}

func encodeCase(tk *Tokenizer, c bpeGoldenCase, o Options) (Encoding, error) {
	if c.TextPair != nil {
		return tk.EncodePair(c.Text, *c.TextPair, o)
	}
	return tk.Encode(c.Text, o)
}

// checkBPECases compares tk with the Rust tokenizers on every golden case
// of a variant: ids, type ids, tokens, offsets and special-tokens mask,
// with the special tokens and without.
func checkBPECases(t *testing.T, tk *Tokenizer, cases []bpeGoldenCase) {
	t.Helper()
	bad := 0
	for i, c := range cases {
		enc, err := encodeCase(tk, c, Options{})
		if err != nil {
			t.Errorf("case %d %q: %v", i, c.Text, err)
			continue
		}
		if !slices.Equal(enc.IDs, c.IDs) || !slices.Equal(enc.TypeIDs, c.TypeIDs) || !slices.Equal(enc.Tokens, c.Tokens) ||
			!slices.Equal(enc.Offsets, c.Offsets) || !slices.Equal(enc.SpecialTokensMask, c.Special) {
			bad++
			if bad <= 5 {
				t.Errorf("case %d %q:\n have %v %v %q %v %v\n want %v %v %q %v %v", i, c.Text,
					enc.IDs, enc.TypeIDs, enc.Tokens, enc.Offsets, enc.SpecialTokensMask,
					c.IDs, c.TypeIDs, c.Tokens, c.Offsets, c.Special)
			}
			continue
		}
		plain, err := encodeCase(tk, c, Options{SkipSpecialTokens: true})
		if err != nil {
			t.Errorf("case %d %q without special tokens: %v", i, c.Text, err)
			continue
		}
		if !slices.Equal(plain.IDs, c.IDsPlain) || !slices.Equal(plain.Offsets, c.OffsetsPlain) {
			bad++
			if bad <= 5 {
				t.Errorf("case %d %q without special tokens:\n have %v %v\n want %v %v", i, c.Text, plain.IDs, plain.Offsets, c.IDsPlain, c.OffsetsPlain)
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d cases differ", bad, len(cases))
	}
}

// TestBPEGolden checks roberta-base's byte-level BPE, and four variants of
// its pre- and post-processing (add_prefix_space, no offset trimming, the
// ByteLevel post-processor, no regex), against Hugging Face's Rust
// tokenizers on the shared awkward texts and pairs.
func TestBPEGolden(t *testing.T) {
	golden := bpeGolden(t)
	for _, name := range []string{"base", "prefix", "notrim", "bytelevel_post", "noregex"} {
		t.Run(name, func(t *testing.T) {
			cases := golden[name]
			if len(cases) < 250 {
				t.Fatalf("%d golden cases, want the 252 made by gen_bpe.js", len(cases))
			}
			tk := robertaTokenizer(t)
			if name != "base" {
				tk = fromMap(t, bpeVariant(t, name))
			}
			if tk.Model() != "BPE" {
				t.Fatalf("model %q", tk.Model())
			}
			checkBPECases(t, tk, cases)
		})
	}
}

// TestBPEDecodeGolden checks Decode (the ByteLevel decoder) against the
// Rust tokenizers, with and without special tokens, and on id lists cut
// inside characters (invalid UTF-8 becomes U+FFFD as Rust replaces it).
func TestBPEDecodeGolden(t *testing.T) {
	tk := robertaTokenizer(t)
	n := 0
	for i, c := range bpeGolden(t)["base"] {
		for _, k := range []struct {
			ids  []int32
			skip bool
			want *string
		}{{c.IDs, false, c.DecodeKeep}, {c.IDs, true, c.DecodeSkip}, {c.CutIDs, false, c.DecodeCut}} {
			if k.want == nil {
				continue
			}
			have, err := tk.Decode(k.ids, k.skip)
			if err != nil {
				t.Fatalf("case %d: %v", i, err)
			}
			if have != *k.want {
				t.Errorf("case %d %q (skip %v): have %q, want %q", i, c.Text, k.skip, have, *k.want)
			}
			n++
		}
	}
	if n < 700 {
		t.Fatalf("only %d decodes checked", n)
	}
}

// TestBPEMergePairs reads the newer [["a", "b"], ...] form of merges and
// gets the ids of the "a b" form.
func TestBPEMergePairs(t *testing.T) {
	j := bpeVariant(t, "base")
	model := j["model"].(map[string]any)
	var pairs []any
	for _, m := range model["merges"].([]any) {
		l, r, _ := strings.Cut(m.(string), " ")
		pairs = append(pairs, []any{l, r})
	}
	model["merges"] = pairs
	tk := fromMap(t, j)
	for _, c := range bpeGolden(t)["base"] {
		enc, err := encodeCase(tk, c, Options{})
		if err != nil || !slices.Equal(enc.IDs, c.IDs) {
			t.Fatalf("%q: have %v (%v), want %v", c.Text, enc.IDs, err, c.IDs)
		}
	}
}

// TestBPEVocabMerges loads the legacy vocab.json and merges.txt pair from a
// folder, as RobertaTokenizerFast makes a tokenizer of them, and gets the
// Rust tokenizers' results on tokenizer.json.
func TestBPEVocabMerges(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"vocab.json", "merges.txt"} {
		if err := os.WriteFile(filepath.Join(dir, name), gunzipFile(t, name+".gz"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if f, ok := Find(dir); !ok || filepath.Base(f) != "vocab.json" {
		t.Fatalf("Find: %q %v", f, ok)
	}
	for _, path := range []string{dir, filepath.Join(dir, "merges.txt")} {
		tk, err := Load(path)
		if err != nil {
			t.Fatal(err)
		}
		if tk.Model() != "BPE" || tk.VocabSize() != robertaTokenizer(t).VocabSize() {
			t.Fatalf("model %q with %d ids", tk.Model(), tk.VocabSize())
		}
		sp := tk.Special()
		if sp.CLS != 0 || sp.PAD != 1 || sp.SEP != 2 || sp.UNK != 3 || sp.MASK != 50264 {
			t.Fatalf("special tokens %+v", sp)
		}
		checkBPECases(t, tk, bpeGolden(t)["base"])
	}
	// add_prefix_space from tokenizer_config.json.
	cfg := `{"add_prefix_space": true, "mask_token": {"content": "<mask>", "lstrip": true}}`
	if err := os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	tk, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	checkBPECases(t, tk, bpeGolden(t)["prefix"])
}

// TestBPEBadFiles checks that broken BPE files are refused with an error
// that names the problem and wraps ErrFormat.
func TestBPEBadFiles(t *testing.T) {
	model := func(body string) string {
		return `{"model":{"type":"BPE","vocab":{"a":0,"b":1,"ab":2,"<unk>":3}` + body + `}}`
	}
	for _, c := range []struct{ name, json, want string }{
		{"bad JSON", `{"model":{"type":"BPE","vocab":{"a":0}`, "unexpected end"},
		{"no merges", model(``), "merges: missing"},
		{"null merges", model(`,"merges":null`), "merges: missing"},
		{"unknown merge token", model(`,"merges":["a c"]`), `"c" is not in the vocabulary`},
		{"merge result unknown", model(`,"merges":["b a"]`), `"ba" (the merge of "b" and "a") is not in the vocabulary`},
		{"merge without space", model(`,"merges":["ab"]`), "not two tokens"},
		{"merge of three", model(`,"merges":[["a","b","c"]]`), `want "a b" or ["a", "b"]`},
		{"dropout", model(`,"merges":["a b"],"dropout":0.1`), "dropout: 0.1 is not supported"},
		{"unk not in vocab", model(`,"merges":["a b"],"unk_token":"<x>"`), `unk_token: "<x>" is not in the vocabulary`},
		{"empty vocab", `{"model":{"type":"BPE","vocab":{},"merges":[]}}`, "vocab: empty"},
		{"vocab not a map", `{"model":{"type":"BPE","vocab":[1],"merges":[]}}`, "cannot unmarshal"},
	} {
		_, err := FromJSON([]byte(c.json))
		if err == nil || !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one wrapping ErrFormat that says %q", c.name, err, c.want)
		}
	}
	vocab := []byte(`{"<s>":0,"<pad>":1,"</s>":2,"<unk>":3,"a":4,"b":5,"ab":6,"<mask>":7}`)
	for _, c := range []struct{ name, vocab, merges, cfg, want string }{
		{"bad vocab.json", `{"a":`, "#version: 0.2\na b\n", "", "vocab.json: unexpected end"},
		{"empty vocab.json", `{}`, "#version: 0.2\na b\n", "", "vocab.json: empty"},
		{"no merges", string(vocab), "#version: 0.2\n", "", "merges.txt: no merges"},
		{"three tokens", string(vocab), "#version: 0.2\na b\na b c\n", "", "merges.txt: line 3"},
		{"unknown merge token", string(vocab), "#version: 0.2\na c\n", "", `"c" is not in the vocabulary`},
		{"bad config", string(vocab), "#version: 0.2\na b\n", `{"add_prefix_space": 1}`, "tokenizer_config.json"},
		{"bad token in config", string(vocab), "#version: 0.2\na b\n", `{"mask_token": 5}`, "mask_token"},
	} {
		_, err := FromVocabMerges([]byte(c.vocab), []byte(c.merges), []byte(c.cfg))
		if err == nil || !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one wrapping ErrFormat that says %q", c.name, err, c.want)
		}
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "vocab.json"), vocab, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, ok := Find(dir); ok {
		t.Error("Find: vocab.json without merges.txt found")
	}
	if _, err := LoadFile(filepath.Join(dir, "vocab.json")); err == nil || !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "merges.txt") {
		t.Errorf("vocab.json without merges.txt: %v", err)
	}
	// A special token missing from vocab.json is added at the next id.
	tk, err := FromVocabMerges([]byte(`{"a":0,"b":1,"ab":2}`), []byte("#version: 0.2\na b\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if enc, err := tk.Encode("ab<mask>"); err != nil || !slices.Equal(enc.IDs, []int32{3, 2, 7, 5}) {
		t.Errorf("ids %v (%v), want [3 2 7 5]: <s>=3 <pad>=4 </s>=5 <unk>=6 <mask>=7", enc.IDs, err)
	}
}

// TestBPEModelOptions checks the model's options on small vocabularies,
// with the results Hugging Face's Rust tokenizers give (worked out with
// npm @anush008/tokenizers 0.6.0 on these files): the continuing-subword
// prefix and end-of-word suffix, unknown characters (fused or not, or left
// out without an unknown token), byte fallback and ignore_merges.
func TestBPEModelOptions(t *testing.T) {
	ws := `"pre_tokenizer":{"type":"WhitespaceSplit"}`
	for _, c := range []struct {
		name, json, text string
		want             []int32
	}{
		{"prefix and suffix",
			`{` + ws + `,"model":{"type":"BPE","continuing_subword_prefix":"##","end_of_word_suffix":"</w>","vocab":{"a":0,"##b":1,"##c</w>":2,"ab":3,"abc</w>":4,"c</w>":5,"##b</w>":6},"merges":["a ##b","ab ##c</w>"]}}`,
			"abc ab c", []int32{4, 0, 6, 5}},
		{"unknown, fused",
			`{` + ws + `,"model":{"type":"BPE","unk_token":"<unk>","fuse_unk":true,"vocab":{"<unk>":0,"a":1,"b":2,"ab":3},"merges":["a b"]}}`,
			"xyab axy", []int32{0, 3, 1, 0}},
		{"unknown, not fused",
			`{` + ws + `,"model":{"type":"BPE","unk_token":"<unk>","vocab":{"<unk>":0,"a":1,"b":2,"ab":3},"merges":["a b"]}}`,
			"xyab", []int32{0, 0, 3}},
		{"no unknown token",
			`{` + ws + `,"model":{"type":"BPE","vocab":{"a":1,"b":2,"ab":3},"merges":["a b"]}}`,
			"axb", []int32{3}},
		{"byte fallback",
			`{` + ws + `,"model":{"type":"BPE","unk_token":"<unk>","byte_fallback":true,"vocab":{"<unk>":0,"a":1,"<0xC3>":2,"<0xA9>":3},"merges":[]}}`,
			"aéz", []int32{1, 2, 3, 0}},
		{"ignore merges",
			`{` + ws + `,"model":{"type":"BPE","ignore_merges":true,"vocab":{"a":0,"b":1,"c":2,"bc":3,"abc":4},"merges":["b c"]}}`,
			"abc cabc", []int32{4, 2, 0, 3}},
	} {
		tk, err := FromJSON([]byte(c.json))
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		enc, err := tk.Encode(c.text)
		if err != nil || !slices.Equal(enc.IDs, c.want) {
			t.Errorf("%s: %q: ids %v (%v), want %v", c.name, c.text, enc.IDs, err, c.want)
		}
	}
}

// TestGPT2Split checks the hand-written GPT-2 pattern on the cases where
// its alternatives and the white-space lookahead decide.
func TestGPT2Split(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"Hello world", []string{"Hello", " world"}},
		{"a   b", []string{"a", "  ", " b"}},
		{"a \nb", []string{"a", " ", "\n", "b"}},
		{"x   ", []string{"x", "   "}},
		{"I'm she's 'sa ''s 'S", []string{"I", "'m", " she", "'s", " '", "sa", " ''", "s", " '", "S"}},
		{"?'s x'll we're", []string{"?'", "s", " x", "'ll", " we", "'re"}},
		{"abc123 45 !!x", []string{"abc", "123", " 45", " !!", "x"}},
		{"e\u0301", []string{"e", "\u0301"}},
		{"\u00a0\u00a0b", []string{"\u00a0", "\u00a0", "b"}},
	} {
		var have []string
		for i := 0; i < len(c.in); {
			j := gpt2Next([]byte(c.in), i)
			have = append(have, c.in[i:j])
			i = j
		}
		if !slices.Equal(have, c.want) {
			t.Errorf("%q: have %q, want %q", c.in, have, c.want)
		}
	}
}

// naiveBPE merges word (ids of its characters) the slow way: the lowest
// ranked pair, leftmost first, until none is left.
func naiveBPE(m *bpe, ids []int32) []int32 {
	ids = slices.Clone(ids)
	for {
		best, at := bpeRule{rank: -1}, -1
		for k := 0; k+1 < len(ids); k++ {
			if r, ok := m.merges[bpeMergeKey(ids[k], ids[k+1])]; ok && (at < 0 || r.rank < best.rank) {
				best, at = r, k
			}
		}
		if at < 0 {
			return ids
		}
		ids = append(append(ids[:at:at], best.id), ids[at+2:]...)
	}
}

// FuzzBPE encodes arbitrary text with roberta-base's tokenizer: valid
// encodings whose offsets lie in the text, the heap merging equal to the
// naive one on every word, and decoding giving the text back. Short runs
// want -fuzzminimizetime=10x (see FuzzTokenizerJSON).
func FuzzBPE(f *testing.F) {
	for _, s := range []string{"Hello, world!", "  \n\t x  ", "I'm 'sa", "café 😀 你好", "<mask> <s>", "\xff", strings.Repeat("ab", 300)} {
		f.Add(s)
	}
	tk := robertaTokenizer(f)
	m := tk.model.(*bpe)
	f.Fuzz(func(t *testing.T, text string) {
		enc, err := tk.Encode(text)
		if !utf8.ValidString(text) {
			var bad *InvalidUTF8Error
			if !errors.As(err, &bad) {
				t.Fatalf("invalid UTF-8 %q: %v", text, err)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		checkEncoding(t, tk, enc)
		runes := utf8.RuneCountInString(text)
		for i, o := range enc.Offsets {
			if o[0] < 0 || o[0] > o[1] || o[1] > runes {
				t.Fatalf("token %d %q: offsets %v outside the %d characters", i, enc.Tokens[i], o, runes)
			}
		}
		// Every word of up to 128 bytes (the naive merging is cubic): the
		// heap merging equals the naive one.
		sc := new(scratch)
		for i := 0; i < len(text); {
			j := gpt2Next([]byte(text), i)
			if j-i > 128 {
				i = j
				continue
			}
			var word []byte
			for k := i; k < j; k++ {
				word = append(word, byteRuneUTF8[text[k]][:byteRuneLen[text[k]]]...)
			}
			var chars []int32
			for _, r := range string(word) {
				chars = append(chars, m.single[r])
			}
			var have []int32
			for _, p := range m.tokenize(word, nil, sc) {
				have = append(have, p.id)
			}
			if want := naiveBPE(m, chars); !slices.Equal(have, want) {
				t.Fatalf("word %q: have %v, want %v", text[i:j], have, want)
			}
			i = j
		}
		// Decoding gives the text back, unless an added token took white space.
		if !strings.Contains(text, "<mask>") {
			if dec, err := tk.Decode(enc.IDs, false); err != nil || dec != "<s>"+text+"</s>" {
				t.Fatalf("decode: %q (%v), want %q", dec, err, "<s>"+text+"</s>")
			}
		}
	})
}
