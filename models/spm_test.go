package models_test

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/int8bert/int8bert/models"
	"github.com/int8bert/int8bert/models/encoder/encodertest"
	"github.com/int8bert/int8bert/tokenizer"
)

// TestLoadSentencePieceOnly: a DeBERTa-v3 golden folder given only a
// SentencePiece spm.model as its tokenizer (testdata/spm/spm.model, the
// first 499 pieces of tokenizer/testdata/deberta-v3-spm's, made by
// tokenizer/_gen/gen_spm.py) loads with a working tokenizer converted as
// DebertaV2Converter does: the ids tokenizer.Load gives, [CLS] text
// [SEP], and a finite embedding.
func TestLoadSentencePieceOnly(t *testing.T) {
	dir := spmOnlyFolder(t)
	p, err := models.Load(context.Background(), dir, models.Options{Selector: encodertest.Selector(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if p.Tok == nil || p.Tok.Model() != "Unigram" || p.Tok.VocabSize() != 500 {
		t.Fatalf("tokenizer %v", p.Tok)
	}
	want, err := tokenizer.Load(filepath.Join(dir, "spm.model"))
	if err != nil {
		t.Fatal(err)
	}
	text := "the model reads this text."
	enc, err := p.Tok.Encode(text)
	if err != nil {
		t.Fatal(err)
	}
	w, _ := want.Encode(text)
	if len(enc.IDs) < 4 || enc.IDs[0] != 1 || enc.IDs[len(enc.IDs)-1] != 2 || !slices.Equal(enc.IDs, w.IDs) {
		t.Fatalf("ids %v (%q), want [CLS]=1 ... [SEP]=2 and %v", enc.IDs, enc.Tokens, w.IDs)
	}
	if slices.Contains(enc.IDs[1:len(enc.IDs)-1], 3) {
		t.Errorf("ids %v (%q): unknown pieces in plain English", enc.IDs, enc.Tokens)
	}
	vecs, err := p.Embed(context.Background(), []string{text}, models.EmbedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(vecs) != 1 || len(vecs[0]) != p.Config().Hidden {
		t.Fatalf("embedding shape %d x %d", len(vecs), len(vecs[0]))
	}
	for _, v := range vecs[0] {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			t.Fatalf("embedding %v", vecs[0])
		}
	}

	// An INT8 artifact saved from it keeps spm.model, so it reloads
	// with the same tokenizer.
	q, err := models.Load(context.Background(), dir, models.Options{Selector: encodertest.Selector(t), Precision: models.PrecisionInt8Dynamic})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	out := t.TempDir()
	if err := q.Save(out); err != nil {
		t.Fatal(err)
	}
	back, err := models.Load(context.Background(), out, models.Options{Selector: encodertest.Selector(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer back.Close()
	if back.Tok == nil {
		t.Fatal("the saved artifact has no tokenizer")
	}
	if e, _ := back.Tok.Encode(text); !slices.Equal(e.IDs, enc.IDs) {
		t.Errorf("saved artifact's ids %v, want %v", e.IDs, enc.IDs)
	}
}

// TestLoadSentencePieceFromHub: a hub id whose repository has spm.model
// and no tokenizer.json or vocab.txt is fetched with its spm.model and
// loads with that tokenizer.
func TestLoadSentencePieceFromHub(t *testing.T) {
	dir := spmOnlyFolder(t)
	asked := fakeHub(t, "org/deberta-spm", dir)
	p, err := models.Load(context.Background(), "org/deberta-spm", models.Options{Selector: encodertest.Selector(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if p.Tok == nil || p.Tok.Model() != "Unigram" {
		t.Fatalf("tokenizer %v", p.Tok)
	}
	if !slices.Contains(asked(), "spm.model") {
		t.Errorf("spm.model was not fetched (asked %v)", asked())
	}
}

// spmOnlyFolder is the DeBERTa-v3 golden model's folder with
// testdata/spm/spm.model as its only tokenizer file.
func spmOnlyFolder(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for dst, src := range map[string]string{
		"config.json":       "testdata/golden/deberta-v3-base/config.json",
		"model.safetensors": "testdata/golden/deberta-v3-base/model.safetensors",
		"spm.model":         "testdata/spm/spm.model",
	} {
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, dst), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
