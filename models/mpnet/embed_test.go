package mpnet_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/int8bert/int8bert/models"
	"github.com/int8bert/int8bert/models/encoder/encodertest"
	"github.com/int8bert/int8bert/models/mpnet"
	"github.com/stretchr/testify/require"
)

// sentenceFolder is the golden mpnet-base as a sentence-transformers
// folder of all-mpnet-base-v2's layout: its weights, a tokenizer whose
// word "wN" is id N (<s> 0, <pad> 1, </s> 2, <unk> 3, RoBERTa's
// post-processor) and a mean Pooling module.
func sentenceFolder(t *testing.T) string {
	t.Helper()
	src, out := "../testdata/golden/mpnet-base", t.TempDir()
	for _, f := range []string{"config.json", "model.safetensors"} {
		encodertest.LinkFile(t, filepath.Join(src, f), filepath.Join(out, f))
	}
	vocab := map[string]int{"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}
	for i := 4; i < 500; i++ {
		vocab[fmt.Sprintf("w%d", i)] = i
	}
	var added []map[string]any
	for _, s := range []string{"<s>", "<pad>", "</s>", "<unk>"} {
		added = append(added, map[string]any{"id": vocab[s], "content": s, "special": true})
	}
	write := func(name string, v any) {
		js, err := json.Marshal(v)
		require.NoError(t, err)
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(out, name)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(out, name), js, 0o644))
	}
	write("tokenizer.json", map[string]any{
		"added_tokens": added, "normalizer": nil, "pre_tokenizer": map[string]any{"type": "WhitespaceSplit"},
		"post_processor": map[string]any{"type": "RobertaProcessing", "sep": []any{"</s>", 2}, "cls": []any{"<s>", 0}},
		"model":          map[string]any{"type": "WordPiece", "vocab": vocab, "unk_token": "<unk>"},
	})
	write("modules.json", []map[string]any{
		{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
		{"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
	})
	write("1_Pooling/config.json", map[string]any{"word_embedding_dimension": 32, "pooling_mode_mean_tokens": true})
	return out
}

// TestEmbedMean: Embed of the golden rows' texts through the
// sentence-transformers folder (mean pooling, as all-mpnet-base-v2) is the
// mean of Hugging Face's last hidden state over each row's tokens, within
// the FP32 parity bar.
func TestEmbedMean(t *testing.T) {
	raw, err := os.ReadFile("../testdata/golden/mpnet-base/golden.json")
	require.NoError(t, err)
	var g struct {
		Inputs  map[string][][]int `json:"inputs"`
		Outputs struct {
			Last [][][]float64 `json:"last_hidden_state"`
		} `json:"outputs"`
	}
	require.NoError(t, json.Unmarshal(raw, &g))
	p, err := encodertest.LoadAs(sentenceFolder(t), mpnet.Family, models.Options{Selector: encodertest.Selector(t), Threads: 1})
	require.NoError(t, err)
	defer p.Close()
	if pool, _ := p.Pooling(); pool != models.PoolMean {
		t.Fatalf("pooling %v, want mean", pool)
	}
	// Rows 0 and 2 are <s> words </s> (row 1 is a pair).
	var texts []string
	var want [][]float64
	for _, r := range []int{0, 2} {
		ids, mask, last := g.Inputs["input_ids"][r], g.Inputs["attention_mask"][r], g.Outputs.Last[r]
		var words []string
		mean := make([]float64, len(last[0]))
		n := 0
		for j, id := range ids {
			if mask[j] == 0 {
				continue
			}
			if j > 0 && id != 2 {
				words = append(words, fmt.Sprintf("w%d", id))
			}
			for k, v := range last[j] {
				mean[k] += v
			}
			n++
		}
		for k := range mean {
			mean[k] /= float64(n)
		}
		texts, want = append(texts, strings.Join(words, " ")), append(want, mean)
	}
	got, err := p.Embed(context.Background(), texts, models.EmbedOptions{})
	require.NoError(t, err)
	for r := range want {
		maxRef, maxDiff := 0.0, 0.0
		for k, w := range want[r] {
			maxRef, maxDiff = math.Max(maxRef, math.Abs(w)), math.Max(maxDiff, math.Abs(float64(got[r][k])-w))
		}
		t.Logf("text %d: max |diff| %.3g, relative %.3g", r, maxDiff, maxDiff/maxRef)
		require.LessOrEqual(t, maxDiff/maxRef, 1e-5, "text %d", r)
	}
}
