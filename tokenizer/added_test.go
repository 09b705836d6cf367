package tokenizer

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestBPEAddedTokensGolden: a folder of roberta-base's vocab.json and
// merges.txt with an added_tokens.json encodes and decodes as Hugging
// Face's Rust tokenizers do with those tokens added as transformers 4.31
// adds them (testdata/roberta-base/added_golden.json, made by
// _gen/gen_bpe_added.js): split out wherever they stand, the white space
// around them kept, not special.
func TestBPEAddedTokensGolden(t *testing.T) {
	dir := t.TempDir()
	for name, data := range map[string][]byte{"vocab.json": gunzipFile(t, "vocab.json.gz"), "merges.txt": gunzipFile(t, "merges.txt.gz")} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	added, err := os.ReadFile(filepath.Join("testdata", "roberta-base", "added_tokens.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "added_tokens.json"), added, 0o644); err != nil {
		t.Fatal(err)
	}
	tk, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join("testdata", "roberta-base", "added_golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g struct {
		Cases []bpeGoldenCase `json:"cases"`
	}
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatal(err)
	}
	if len(g.Cases) < 10 {
		t.Fatalf("%d golden cases, want the 13 gen_bpe_added.js makes", len(g.Cases))
	}
	checkBPECases(t, tk, g.Cases)
	for i, c := range g.Cases {
		for _, skip := range []bool{false, true} {
			want := c.DecodeKeep
			if skip {
				want = c.DecodeSkip
			}
			got, err := tk.Decode(c.IDs, skip)
			if err != nil || want == nil || got != *want {
				t.Errorf("case %d %q: decode (skip special %v) %q (%v), want %v", i, c.Text, skip, got, err, *want)
			}
		}
	}
	// Without added_tokens.json the same folder does not know them.
	if err := os.Remove(filepath.Join(dir, "added_tokens.json")); err != nil {
		t.Fatal(err)
	}
	plain, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if enc, err := plain.Encode("<ent>", Options{SkipSpecialTokens: true}); err != nil || slices.Contains(enc.IDs, 50262) {
		t.Errorf("without added_tokens.json: %v (%v)", enc.IDs, err)
	}
}

// TestBPEAddedTokensRules: transformers 4.31's rules for added_tokens.json
// on a fast tokenizer made from vocab.json and merges.txt, on a small
// vocabulary: each id the tokenizer's size so far, special names added
// as special, a special token already in the vocabulary keeping its id
// (and the tokens after it numbered as the Rust tokenizers number them),
// and the files transformers refuses refused with ErrFormat.
func TestBPEAddedTokensRules(t *testing.T) {
	vocab := []byte(`{"<s>":0,"<pad>":1,"</s>":2,"<unk>":3,"a":4,"b":5,"ab":6,"<mask>":7}`)
	merges := []byte("#version: 0.2\na b\n")
	for _, c := range []struct {
		name, cfg, added, text string
		ids                    []int32
		// skipped is the decode without the special tokens: the added
		// special ones go, the others stay.
		skipped string
	}{
		{"two new tokens", "", `{"[X]": 8, "[Y]": 9}`, "a[X]b[Y]", []int32{0, 4, 8, 5, 9, 2}, "a[X]b[Y]"},
		{"a special name: special, with the mask's lstrip", `{"mask_token": "[M]"}`, `{"[M]": 8}`, "ab [M]",
			[]int32{0, 6, 8, 2}, "ab"},
		{"a special token already in the vocabulary keeps its id", "", `{"<mask>": 8, "[X]": 9}`, "<mask>[X]",
			// transformers checks the file's ids (9 is 8 + the pending
			// <mask>); the Rust tokenizers then number [X] 8, as the
			// vocabulary did not grow.
			[]int32{0, 7, 8, 2}, "[X]"},
		{"an ordinary token already in the vocabulary is left as it is", "", `{"ab": 8}`, "ab", []int32{0, 6, 2}, "ab"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var cfg []byte
			if c.cfg != "" {
				cfg = []byte(c.cfg)
			}
			tk, err := FromVocabMergesAdded(vocab, merges, cfg, []byte(c.added))
			if err != nil {
				t.Fatal(err)
			}
			enc, err := tk.Encode(c.text)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(enc.IDs, c.ids) {
				t.Errorf("%q: ids %v (%q), want %v", c.text, enc.IDs, enc.Tokens, c.ids)
			}
			if got, err := tk.Decode(enc.IDs, true); err != nil || got != c.skipped {
				t.Errorf("%q: decoded without special tokens %q (%v), want %q", c.text, got, err, c.skipped)
			}
		})
	}
	for _, c := range []struct{ name, vocab, added, want string }{
		{"not consecutive", string(vocab), `{"[X]": 9}`, `"[X]" has id 9, want 8`},
		{"two at one id", string(vocab), `{"[X]": 8, "[Y]": 8}`, "has id 8, want 9"},
		{"a vocabulary token at its own id", string(vocab), `{"a": 4}`, `"a" has id 4, want 8`},
		{"not an object", string(vocab), `["[X]"]`, "want an object of token to id"},
		{"an id not a number", string(vocab), `{"[X]": "8"}`, "want an object of token to id"},
		{"an empty token", string(vocab), `{"": 8}`, "an empty token"},
		{"an id vocab.json gives another token", `{"a":0,"b":1,"ab":4}`, `{"[X]": 3, "[Y]": 4}`, `"[Y]" would take id 4`},
	} {
		_, err := FromVocabMergesAdded([]byte(c.vocab), merges, nil, []byte(c.added))
		if err == nil || !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one wrapping ErrFormat that says %q", c.name, err, c.want)
		}
	}
	// Special tokens missing from vocab.json come after the added ones.
	tk, err := FromVocabMergesAdded([]byte(`{"a":0,"b":1,"ab":2}`), merges, nil, []byte(`{"[X]": 3}`))
	if err != nil {
		t.Fatal(err)
	}
	if enc, err := tk.Encode("[X]<mask>"); err != nil || !slices.Equal(enc.IDs, []int32{4, 3, 8, 6}) {
		t.Errorf("ids %v (%v), want [4 3 8 6]: [X]=3, then <s>=4 <pad>=5 </s>=6 <unk>=7 <mask>=8", enc.IDs, err)
	}
}
