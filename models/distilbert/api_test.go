package distilbert_test

import (
	"context"
	"github.com/int8bert/int8bert/models"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/int8bert/int8bert/models/distilbert"
	"github.com/int8bert/int8bert/models/encoder/encodertest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestConcurrentClassify: one loaded model serves 8 goroutines at once with
// the same results as serial calls.
func TestConcurrentClassify(t *testing.T) {
	dir := filepath.Join(encodertest.ModelsDir, "sst2-distilbert-mini")
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("trained model not found (the project's shared folder): %v", err)
	}
	p, err := encodertest.LoadAs(dir, distilbert.Family, models.Options{Selector: encodertest.Selector(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	texts := []string{"a gorgeous , witty , seductive movie .", "the story is bleak and the acting is worse .", "", "ok"}
	want, err := p.Classify(context.Background(), texts, models.ClassifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := 0; r < 3; r++ {
				got, err := p.Classify(context.Background(), texts, models.ClassifyOptions{})
				if err != nil {
					t.Error(err)
					return
				}
				for i := range got {
					for j := range got[i].Logits {
						if got[i].Logits[j] != want[i].Logits[j] {
							t.Errorf("goroutine result differs at text %d", i)
							return
						}
					}
				}
			}
		}()
	}
	wg.Wait()
	if _, err := p.Classify(context.Background(), []string{"bad \xff utf-8"}, models.ClassifyOptions{}); err == nil {
		t.Error("invalid UTF-8 classified without an error")
	}
	if _, err := p.Answer(context.Background(), "q", "c", models.QAOptions{}); err == nil {
		t.Error("Answer on a classifier: no error")
	}
}

// TestAnswerSpans: with a long context split into windows, every answer is
// the context's text at its rune offsets, within the length bound, and the
// answers come best first. (The golden QA model has random weights, so the
// spans themselves are arbitrary; the span logic is what is checked.)
func TestAnswerSpans(t *testing.T) {
	dir := filepath.Join(encodertest.GoldenDir, "distilbert-qa")
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("golden models not found (the project's shared folder): %v", err)
	}
	// The golden model has no tokenizer: a copy of its folder gets a
	// vocab.txt of the words below.
	vocab := "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n"
	words := []string{"the", "cat", "sat", "on", "mat", "who", "where", "did", "a", "dog", "ran", "to", "park", "é", "café", "?", "."}
	for _, w := range words {
		vocab += w + "\n"
	}
	folder := t.TempDir()
	for _, f := range []string{"config.json", "model.safetensors"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(folder, f), b, 0o644))
	}
	require.NoError(t, os.WriteFile(filepath.Join(folder, "vocab.txt"), []byte(vocab), 0o644))
	p, err := encodertest.LoadAs(folder, distilbert.Family, models.Options{Selector: encodertest.Selector(t), MaxLength: 24})
	require.NoError(t, err)
	defer p.Close()
	ctxText := ""
	for i := 0; i < 12; i++ {
		ctxText += "the cat sat on the mat . a dog ran to the café park . "
	}
	runes := []rune(ctxText)
	ans, err := p.Answer(context.Background(), "where did the cat sit ?", ctxText, models.QAOptions{NBest: 5, MaxAnswerLength: 4, DocStride: 4})
	require.NoError(t, err)
	require.Len(t, ans, 5)
	for i, a := range ans {
		assert.True(t, a.Start >= 0 && a.End <= len(runes) && a.Start < a.End && string(runes[a.Start:a.End]) == a.Text,
			"answer %d %+v is not the context at its offsets", i, a)
		if i > 0 {
			assert.LessOrEqual(t, a.Score, ans[i-1].Score, "answers not best first: %v", ans)
		}
	}
	t.Logf("best answer %q at runes %d..%d of %d", ans[0].Text, ans[0].Start, ans[0].End, len(runes))
}
