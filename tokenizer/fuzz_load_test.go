package tokenizer

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"unicode/utf8"
)

// shrunkTokenizer is testdata's tokenizer.json name with its vocabulary
// cut to the ids below keep (the added tokens above it moved to the last
// ids kept), a seed small enough for the fuzzer to mutate quickly.
func shrunkTokenizer(tb testing.TB, name string, keep int) []byte {
	tb.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", name, "tokenizer.json"))
	if err != nil {
		tb.Fatal(err)
	}
	var j map[string]any
	if err := json.Unmarshal(raw, &j); err != nil {
		tb.Fatal(err)
	}
	model := j["model"].(map[string]any)
	// Added tokens past keep take the last ids below it.
	next := keep - 1
	moved := map[string]int{}
	var added []any
	for _, a := range j["added_tokens"].([]any) {
		at := a.(map[string]any)
		if id := int(at["id"].(float64)); id >= keep {
			at["id"] = float64(next)
			moved[at["content"].(string)] = next
			next--
		}
		added = append(added, at)
	}
	j["added_tokens"] = added
	// SentencePiece's charsmap is hundreds of KB, which the fuzzer's
	// minimization of every new input would crawl through; FuzzPrecompiled
	// covers it on its own.
	j["normalizer"] = withoutPrecompiled(j["normalizer"])
	switch v := model["vocab"].(type) {
	case map[string]any: // WordPiece: token -> id
		out := map[string]any{}
		for tok, id := range v {
			if int(id.(float64)) <= next {
				out[tok] = id
			}
		}
		for tok, id := range moved {
			out[tok] = float64(id)
		}
		model["vocab"] = out
	case []any: // Unigram: [piece, score] by id
		out := append([]any(nil), v[:next+1]...)
		for range moved {
			out = append(out, nil)
		}
		for tok, id := range moved {
			out[id] = []any{tok, 0.0}
		}
		model["vocab"] = out
	}
	b, err := json.Marshal(j)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := FromJSON(b); err != nil {
		tb.Fatalf("shrunk %s does not load: %v", name, err)
	}
	return b
}

// withoutPrecompiled is a normalizer without its Precompiled parts.
func withoutPrecompiled(n any) any {
	m, ok := n.(map[string]any)
	if !ok {
		return n
	}
	switch m["type"] {
	case "Precompiled":
		return nil
	case "Sequence":
		var kept []any
		for _, c := range m["normalizers"].([]any) {
			if c := withoutPrecompiled(c); c != nil {
				kept = append(kept, c)
			}
		}
		m["normalizers"] = kept
	}
	return m
}

// checkEncoding checks what the model relies on in any encoding of a
// tokenizer that loaded: parallel slices of one length, ids inside the
// vocabulary, masks of 0 and 1.
func checkEncoding(t *testing.T, tk *Tokenizer, e Encoding) {
	t.Helper()
	n := len(e.IDs)
	if len(e.TypeIDs) != n || len(e.AttentionMask) != n || len(e.Tokens) != n || len(e.Offsets) != n || len(e.SequenceIDs) != n {
		t.Fatalf("ragged encoding: %d ids, %d types, %d mask, %d tokens, %d offsets, %d sequence ids",
			n, len(e.TypeIDs), len(e.AttentionMask), len(e.Tokens), len(e.Offsets), len(e.SequenceIDs))
	}
	for i, id := range e.IDs {
		if id < 0 || int(id) >= tk.VocabSize() {
			t.Fatalf("token %d: id %d outside the vocabulary of %d", i, id, tk.VocabSize())
		}
		if m := e.AttentionMask[i]; m != 0 && m != 1 {
			t.Fatalf("token %d: mask %d", i, m)
		}
	}
	for _, o := range e.Overflowing {
		checkEncoding(t, tk, o)
	}
}

// FuzzTokenizerJSON feeds arbitrary bytes to FromJSON, the reader of
// tokenizer.json: an error or a tokenizer, never a panic; a tokenizer that
// loads encodes texts and pairs, truncated and padded, into well-formed
// encodings whose ids are inside its vocabulary. Short runs want
// -fuzzminimizetime=10x: minimizing a new tokenizer.json input with the
// default 60 s takes all of a 20 s run.
func FuzzTokenizerJSON(f *testing.F) {
	f.Add(shrunkTokenizer(f, "bert-base-uncased", 120), "Hello, world! Café naïve")
	f.Add(shrunkTokenizer(f, "xlmr-spm-unigram", 120), "\u00e9t\u00e9 \U0001F1EB\U0001F1F7 x")
	f.Add([]byte(`{"model":{"type":"WordPiece","unk_token":"[UNK]","vocab":{"[UNK]":0,"a":1,"##b":2}}}`), "ab a")
	f.Add([]byte(`{"model":{"type":"Unigram","unk_id":0,"vocab":[["<unk>",0],["a",-1],["\u2581a",-2]]},"pre_tokenizer":{"type":"Metaspace","replacement":"\u2581","add_prefix_space":true}}`), "a a")
	f.Add([]byte(`{"model":{"type":"BPE"}}`), "")
	f.Add([]byte(`{}`), "x")
	f.Fuzz(func(t *testing.T, data []byte, text string) {
		tk, err := FromJSON(data)
		if err != nil {
			return
		}
		if len(text) > 512 {
			text = text[:512]
		}
		if !utf8.ValidString(text) {
			text = fmt.Sprintf("%q", text)
		}
		_ = tk.Special()
		_ = tk.AddedTokens()
		_, _ = tk.FileOptions()
		for _, o := range []Options{
			{},
			{MaxLength: 6, Truncation: LongestFirst, Stride: 1, Overflow: true, Padding: PadFixed},
			{SkipSpecialTokens: true, MaxLength: 3, Truncation: OnlyFirst, Padding: PadFixed, PadLeft: true, TruncateLeft: true},
		} {
			if e, err := tk.Encode(text, o); err == nil {
				checkEncoding(t, tk, e)
			}
			if e, err := tk.EncodePair(text, "second "+text, o); err == nil {
				checkEncoding(t, tk, e)
			}
		}
	})
}

// FuzzVocab feeds arbitrary vocab.txt and tokenizer_config.json bytes to
// FromVocab: an error or a tokenizer, never a panic.
func FuzzVocab(f *testing.F) {
	vocab, err := os.ReadFile(filepath.Join("testdata", "bert-base-uncased", "vocab.txt"))
	if err == nil && len(vocab) > 2048 {
		vocab = vocab[:2048] // the specials (ids 0 and 100 to 103) and a few words
	}
	cfg, _ := os.ReadFile(filepath.Join("testdata", "bert-base-uncased", "tokenizer_config.json"))
	f.Add(vocab, cfg, "Hello world")
	f.Add([]byte("[PAD]\n[UNK]\n[CLS]\n[SEP]\na\n##b\n"), []byte(`{"do_lower_case": false}`), "ab A")
	f.Add([]byte("a\nb\n"), []byte(nil), "a")
	f.Fuzz(func(t *testing.T, vocab, cfg []byte, text string) {
		tk, err := FromVocab(vocab, cfg)
		if err != nil {
			return
		}
		if !utf8.ValidString(text) || len(text) > 512 {
			return
		}
		if e, err := tk.Encode(text, Options{MaxLength: 8, Truncation: LongestFirst, Padding: PadFixed}); err == nil {
			checkEncoding(t, tk, e)
		}
	})
}
