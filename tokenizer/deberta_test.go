package tokenizer

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// DeBERTa-v3's tokenizer.json layout (testdata/deberta-v3-spm, made by
// _gen/gen_deberta.js as transformers 4.31's DebertaV2Converter writes
// it): a SentencePiece Unigram model with [PAD] [CLS] [SEP] [UNK] first
// and [MASK] added after the pieces, Strip + Precompiled + Replace, a
// Sequence of Metaspace, [CLS] A [SEP] B [SEP] with type ids 0 and 1.

// debertaVariant is testdata/deberta-v3-spm/tokenizer.json edited as
// gen_deberta.js does for the golden variant of that name: "lower"
// (do_lower_case: Lowercase first) or "punct" (split_by_punct:
// Punctuation first).
func debertaVariant(tb testing.TB, name string) map[string]any {
	tb.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "deberta-v3-spm", "tokenizer.json"))
	if err != nil {
		tb.Fatal(err)
	}
	var j map[string]any
	if err := json.Unmarshal(data, &j); err != nil {
		tb.Fatal(err)
	}
	switch name {
	case "base":
	case "lower":
		n := j["normalizer"].(map[string]any)
		n["normalizers"] = append([]any{map[string]any{"type": "Lowercase"}}, n["normalizers"].([]any)...)
	case "punct":
		p := j["pre_tokenizer"].(map[string]any)
		p["pretokenizers"] = append([]any{map[string]any{"type": "Punctuation", "behavior": "Isolated"}}, p["pretokenizers"].([]any)...)
	default:
		tb.Fatalf("no variant %q", name)
	}
	return j
}

func debertaGolden(tb testing.TB) map[string][]bpeGoldenCase {
	tb.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "deberta-v3-spm", "golden.json.gz"))
	if err != nil {
		tb.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		tb.Fatal(err)
	}
	var g struct {
		Variants map[string][]bpeGoldenCase `json:"variants"`
	}
	if err := json.NewDecoder(zr).Decode(&g); err != nil {
		tb.Fatal(err)
	}
	return g.Variants
}

// TestDeBERTaGolden checks the DeBERTa-v3 layout, and its do_lower_case
// and split_by_punct forms, against Hugging Face's Rust tokenizers on the
// shared awkward texts and pairs plus our own (special tokens in the
// text, leading and trailing spaces that Strip removes, runs of spaces,
// characters the charsmap rewrites): ids, type ids, tokens, offsets,
// special-tokens mask, with and without the special tokens.
func TestDeBERTaGolden(t *testing.T) {
	golden := debertaGolden(t)
	for _, name := range []string{"base", "lower", "punct"} {
		t.Run(name, func(t *testing.T) {
			cases := golden[name]
			if len(cases) < 250 {
				t.Fatalf("%d golden cases, want the 256 made by gen_deberta.js", len(cases))
			}
			tk := fromMap(t, debertaVariant(t, name))
			if tk.Model() != "Unigram" {
				t.Fatalf("model %q", tk.Model())
			}
			checkBPECases(t, tk, cases)
		})
	}
}

// TestDeBERTaDecodeGolden checks Decode (the Metaspace decoder) against
// the Rust tokenizers, with and without special tokens.
func TestDeBERTaDecodeGolden(t *testing.T) {
	tk := fromMap(t, debertaVariant(t, "base"))
	n := 0
	for i, c := range debertaGolden(t)["base"] {
		for _, k := range []struct {
			skip bool
			want *string
		}{{false, c.DecodeKeep}, {true, c.DecodeSkip}} {
			if k.want == nil {
				continue
			}
			have, err := tk.Decode(c.IDs, k.skip)
			if err != nil {
				t.Fatalf("case %d: %v", i, err)
			}
			if have != *k.want {
				t.Errorf("case %d %q (skip %v): have %q, want %q", i, c.Text, k.skip, have, *k.want)
			}
			n++
		}
	}
	if n < 500 {
		t.Fatalf("only %d decodes checked", n)
	}
}

// TestPunctuationBehavior: only the Isolated behaviour is implemented;
// the others are refused by name rather than run as Isolated.
func TestPunctuationBehavior(t *testing.T) {
	j := debertaVariant(t, "punct")
	p := j["pre_tokenizer"].(map[string]any)["pretokenizers"].([]any)[0].(map[string]any)
	p["behavior"] = "MergedWithPrevious"
	data, err := json.Marshal(j)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := FromJSON(data); err == nil || !strings.Contains(err.Error(), "MergedWithPrevious") {
		t.Fatalf("Punctuation MergedWithPrevious: err %v, want a refusal naming it", err)
	}
	delete(p, "behavior") // the default is Isolated
	data, _ = json.Marshal(j)
	if _, err := FromJSON(data); err != nil {
		t.Fatal(err)
	}
}
