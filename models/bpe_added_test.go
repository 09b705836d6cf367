package models_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/int8bert/int8bert/models"
	"github.com/int8bert/int8bert/models/encoder/encodertest"
)

// legacyBPEFolder is the tiny RoBERTa golden's folder with a legacy
// byte-level BPE tokenizer (vocab.json, merges.txt) and an
// added_tokens.json whose [X] is id 9.
func legacyBPEFolder(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"vocab.json":        `{"<s>":0,"<pad>":1,"</s>":2,"<unk>":3,"a":4,"b":5,"ab":6,"<mask>":7,"Ġ":8}`,
		"merges.txt":        "#version: 0.2\na b\n",
		"added_tokens.json": `{"[X]": 9}`,
	}
	for _, f := range []string{"config.json", "model.safetensors"} {
		b, err := os.ReadFile(filepath.Join("testdata/golden/roberta-base-tiny", f))
		if err != nil {
			t.Fatal(err)
		}
		files[f] = string(b)
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestLoadLegacyBPEAddedTokens: a hub repository whose tokenizer is a
// legacy vocab.json and merges.txt with an added_tokens.json is fetched
// with all three and loads with the added token; an INT8 artifact saved
// from it keeps added_tokens.json, so it reloads with the same ids.
func TestLoadLegacyBPEAddedTokens(t *testing.T) {
	dir := legacyBPEFolder(t)
	asked := fakeHub(t, "org/roberta-legacy", dir)
	sel := encodertest.Selector(t)
	p, err := models.Load(context.Background(), "org/roberta-legacy", models.Options{Selector: sel, Precision: models.PrecisionInt8Dynamic})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for _, f := range []string{"vocab.json", "merges.txt", "added_tokens.json"} {
		if !slices.Contains(asked(), f) {
			t.Errorf("%s was not fetched (asked %v)", f, asked())
		}
	}
	want := []int32{0, 6, 8, 9, 4, 2} // <s> ab Ġ [X] a </s>
	if p.Tok == nil {
		t.Fatal("no tokenizer")
	}
	if e, err := p.Tok.Encode("ab [X]a"); err != nil || !slices.Equal(e.IDs, want) {
		t.Fatalf("ids %v (%v), want %v", e.IDs, err, want)
	}
	out := t.TempDir()
	if err := p.Save(out); err != nil {
		t.Fatal(err)
	}
	back, err := models.Load(context.Background(), out, models.Options{Selector: sel})
	if err != nil {
		t.Fatal(err)
	}
	defer back.Close()
	if back.Tok == nil {
		t.Fatal("the saved artifact has no tokenizer")
	}
	if e, err := back.Tok.Encode("ab [X]a"); err != nil || !slices.Equal(e.IDs, want) {
		t.Errorf("saved artifact's ids %v (%v), want %v", e.IDs, err, want)
	}
	if _, err := back.Embed(context.Background(), []string{"ab [X]a"}, models.EmbedOptions{Pool: models.PoolMean}); err != nil {
		t.Errorf("embed: %v", err)
	}
}
