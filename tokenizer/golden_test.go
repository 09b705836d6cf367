package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
)

type goldenCase struct {
	Kind         string  `json:"kind"`
	Text         string  `json:"text"`
	TextPair     *string `json:"text_pair"`
	InputIDs     []int32 `json:"input_ids"`
	TypeIDs      []int32 `json:"token_type_ids"`
	RustInputIDs []int32 `json:"rust_input_ids"`
	RustTypeIDs  []int32 `json:"rust_token_type_ids"`
}

type goldenFile struct {
	Cases []goldenCase `json:"cases"`
}

var (
	tokCache   sync.Map
	goldenOnce sync.Map
)

// testTokenizer loads testdata/<name>/tokenizer.json once per test binary
// (roberta-base's is gzipped: robertaTokenizer).
func testTokenizer(t testing.TB, name string) *Tokenizer {
	t.Helper()
	if name == "roberta-base" {
		return robertaTokenizer(t)
	}
	if v, ok := tokCache.Load(name); ok {
		return v.(*Tokenizer)
	}
	tk, err := Load(filepath.Join("testdata", name, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	tokCache.Store(name, tk)
	return tk
}

func loadGolden(t testing.TB, name string) []goldenCase {
	t.Helper()
	if v, ok := goldenOnce.Load(name); ok {
		return v.([]goldenCase)
	}
	data, err := os.ReadFile(filepath.Join("testdata", name, "golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g goldenFile
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatal(err)
	}
	goldenOnce.Store(name, g.Cases)
	return g.Cases
}

func checkGolden(t *testing.T, name string, tk *Tokenizer) {
	cases := loadGolden(t, name)
	matched, rustOnly := 0, 0
	for i, c := range cases {
		var enc Encoding
		var err error
		if c.TextPair != nil {
			enc, err = tk.EncodePair(c.Text, *c.TextPair)
		} else {
			enc, err = tk.Encode(c.Text)
		}
		if err != nil {
			t.Errorf("case %d %q: %v", i, c.Text, err)
			continue
		}
		wantIDs, wantTypes := c.InputIDs, c.TypeIDs
		differ := !slices.Equal(c.InputIDs, c.RustInputIDs) || !slices.Equal(c.TypeIDs, c.RustTypeIDs)
		if differ {
			wantIDs, wantTypes = c.RustInputIDs, c.RustTypeIDs
		}
		if !slices.Equal(enc.IDs, wantIDs) || !slices.Equal(enc.TypeIDs, wantTypes) {
			pair := ""
			if c.TextPair != nil {
				pair = *c.TextPair
			}
			t.Errorf("case %d %q / %q:\n have %v %v\n want %v %v\n tokens %q", i, c.Text, pair, enc.IDs, enc.TypeIDs, wantIDs, wantTypes, enc.Tokens)
			continue
		}
		matched++
		if differ {
			rustOnly++
			t.Logf("case %d %q: slow and Rust references disagree; matched the Rust one", i, c.Text)
		}
	}
	t.Logf("%s: %d of %d golden cases match (%d where the Rust reference was followed)", name, matched, len(cases), rustOnly)
}

func TestGoldenBERT(t *testing.T) {
	checkGolden(t, "bert-base-uncased", testTokenizer(t, "bert-base-uncased"))
}

func TestGoldenBERTVocabTxt(t *testing.T) {
	tk, err := Load(filepath.Join("testdata", "bert-base-uncased", "vocab.txt"))
	if err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "bert-base-uncased", tk)
}

func TestGoldenXLMR(t *testing.T) {
	checkGolden(t, "xlmr-spm-unigram", testTokenizer(t, "xlmr-spm-unigram"))
}
