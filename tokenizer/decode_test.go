package tokenizer

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestDecodeMatchesRust: Decode gives Hugging Face's Rust tokenizers'
// decode of every golden case, with and without the special tokens (ids
// outside the vocabulary left out), on both golden tokenizers and on
// BERT's vocab.txt form.
func TestDecodeMatchesRust(t *testing.T) {
	vocab, err := Load(filepath.Join("testdata", "bert-base-uncased", "vocab.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		dir string
		tk  *Tokenizer
	}{
		{"bert-base-uncased", testTokenizer(t, "bert-base-uncased")},
		{"bert-base-uncased", vocab},
		{"xlmr-spm-unigram", testTokenizer(t, "xlmr-spm-unigram")},
	} {
		data, err := os.ReadFile(filepath.Join("testdata", c.dir, "decode_golden.json"))
		if err != nil {
			t.Fatal(err)
		}
		var g struct {
			Cases []struct {
				IDs  []int32 `json:"ids"`
				Skip string  `json:"skip"`
				Keep string  `json:"keep"`
			} `json:"cases"`
		}
		if err := json.Unmarshal(data, &g); err != nil {
			t.Fatal(err)
		}
		if len(g.Cases) < 100 {
			t.Fatalf("%s: %d cases", c.dir, len(g.Cases))
		}
		for _, k := range g.Cases {
			for skip, want := range map[bool]string{true: k.Skip, false: k.Keep} {
				got, err := c.tk.Decode(k.IDs, skip)
				if err != nil {
					t.Fatalf("%s: %v: %v", c.dir, k.IDs, err)
				}
				if got != want {
					t.Errorf("%s: Decode(%v, skip special %v) = %q, want %q", c.dir, k.IDs, skip, got, want)
				}
			}
		}
	}
}

// TestDecoders: the decoders the golden tokenizers lack; the wants are
// what Hugging Face's Rust decoders (npm @anush008/tokenizers 0.6.0) give
// on the same tokens. An unknown decoder fails Decode, not the load.
func TestDecoders(t *testing.T) {
	for _, c := range []struct {
		json   string
		tokens []string
		want   string
	}{
		{`{"type":"Sequence","decoders":[{"type":"Replace","pattern":{"String":"▁"},"content":" "},{"type":"ByteFallback"},{"type":"Fuse"},{"type":"Strip","content":" ","start":1,"stop":0}]}`,
			[]string{"▁Hey", "<0xE2>", "<0x82>", "<0xAC>", "▁friend", "<0xFF>", "!"}, "Hey€ friend\uFFFD!"},
		{`{"type":"Metaspace","replacement":"▁","prepend_scheme":"never","split":true}`, []string{"▁a", "▁b"}, " a b"},
		{`{"type":"Metaspace","replacement":"▁","prepend_scheme":"first","split":true}`, []string{"▁a▁x", "▁b"}, "ax b"},
		{`{"type":"WordPiece","prefix":"##","cleanup":false}`, []string{"do", "n", "'", "t", "##s", "."}, "do n ' ts ."},
		{`{"type":"WordPiece","prefix":"##","cleanup":true}`, []string{"i", "do", "not", "'", "m", "it", "'", "s", "!", "?", "x ' y", "a do not"}, "i do not ' m it ' s!? x'y a don't"},
	} {
		d := parseDecoder(json.RawMessage(c.json))
		out, err := d.chain(c.tokens)
		if err != nil {
			t.Fatalf("%s: %v", c.json, err)
		}
		got := ""
		for _, s := range out {
			got += s
		}
		if got != c.want {
			t.Errorf("%s on %q: %q, want %q", c.json, c.tokens, got, c.want)
		}
	}
	d := parseDecoder(json.RawMessage(`{"type":"CTC","pad_token":"<pad>"}`))
	if _, err := d.chain([]string{"a"}); !errors.Is(err, ErrDecoder) {
		t.Errorf("CTC decoder: %v, want ErrDecoder", err)
	}
}
