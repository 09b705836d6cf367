package main

import (
	"bytes"
	"context"
	"encoding/json"
	"github.com/int8bert/int8bert/models"
	"math"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/int8bert/int8bert/models/encoder/encodertest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// multilabelFolder is the golden multi-label head (4 labels, problem_type
// multi_label_classification) with a WordPiece vocabulary that spells
// token id i as "w<i>", and the golden logits of its rows.
func multilabelFolder(t *testing.T) (string, [][]float64) {
	t.Helper()
	src := sharedPath(t, "golden/heads/bert-multilabel")
	dir := encodertest.WordFolder(t, src, false)
	raw, err := os.ReadFile(filepath.Join(src, "golden.json"))
	require.NoError(t, err)
	var g struct {
		Logits [][]float64 `json:"logits"`
	}
	require.NoError(t, json.Unmarshal(raw, &g))
	return dir, g.Logits
}

type classifyOut struct {
	Text   string    `json:"text"`
	Label  string    `json:"label"`
	Score  float64   `json:"score"`
	Scores []float64 `json:"scores"`
	Logits []float64 `json:"logits"`
	Top    []struct {
		Label string  `json:"label"`
		Index int     `json:"index"`
		Score float64 `json:"score"`
	} `json:"top"`
}

func classifyCLI(t *testing.T, args ...string) classifyOut {
	t.Helper()
	var out, errb bytes.Buffer
	require.NoError(t, runTask(context.Background(), "classify", args, nil, &out, &errb), errb.String())
	var r classifyOut
	require.NoError(t, json.Unmarshal(out.Bytes(), &r), out.String())
	return r
}

// TestClassifyHeadFlags: classify's --logits, --function-to-apply and
// --top-k on a multi-label head. By default the scores are per-label
// sigmoids (not a softmax) and no logits are printed; --logits prints the
// reference's logits; --function-to-apply none scores with them;
// --top-k N and all list the best labels, sorted as Hugging Face's
// pipeline does.
func TestClassifyHeadFlags(t *testing.T) {
	fastKernels(t)
	dir, golden := multilabelFolder(t)
	labels := []string{"sports", "politics", "science", "arts"}
	// Golden row 3 is [CLS] 211 [SEP].
	const text = "w211"
	want := golden[3]

	r := classifyCLI(t, "--model", dir, text)
	assert.Nil(t, r.Logits, "no logits without --logits")
	assert.Nil(t, r.Top, "no list without --top-k")
	require.Len(t, r.Scores, 4)
	sum := 0.0
	for j, s := range r.Scores {
		assert.InDelta(t, 1/(1+math.Exp(-want[j])), s, 1e-5, "sigmoid of label %d", j)
		sum += s
	}
	assert.Greater(t, sum, 1.5, "per-label sigmoids, not a softmax")
	assert.Equal(t, "arts", r.Label)
	assert.InDelta(t, 0.6383324861526489, r.Score, 1e-5, "the pipeline's default score")

	r = classifyCLI(t, "--model", dir, "--logits", text)
	require.Len(t, r.Logits, 4)
	for j := range want {
		assert.InDelta(t, want[j], r.Logits[j], 1e-5, "logit %d", j)
	}

	r = classifyCLI(t, "--model", dir, "--function-to-apply", "none", "--top-k", "all", text)
	order := []int{0, 1, 2, 3}
	sort.SliceStable(order, func(a, b int) bool { return want[order[a]] > want[order[b]] })
	require.Len(t, r.Top, 4)
	for k, j := range order {
		assert.Equal(t, labels[j], r.Top[k].Label)
		assert.Equal(t, j, r.Top[k].Index)
		assert.InDelta(t, want[j], r.Top[k].Score, 1e-5, "none: the raw logit")
	}

	r = classifyCLI(t, "--model", dir, "--function-to-apply", "softmax", "--top-k", "2", text)
	require.Len(t, r.Top, 2)
	assert.Equal(t, labels[order[0]], r.Top[0].Label)
	assert.Equal(t, labels[order[1]], r.Top[1].Label)
	sum = 0
	for _, s := range r.Scores {
		sum += s
	}
	assert.InDelta(t, 1, sum, 1e-5, "softmax")
}

// TestClassifyHeadFlagErrors: a bad --function-to-apply or --top-k is an
// error naming the flag and the value, wrapping models.ErrInput, found
// before the model is loaded.
func TestClassifyHeadFlagErrors(t *testing.T) {
	for _, c := range []struct{ flag, value string }{
		{"--function-to-apply", "relu"},
		{"--top-k", "-1"},
		{"--top-k", "two"},
	} {
		var out, errb bytes.Buffer
		err := runTask(context.Background(), "classify", []string{"--model", filepath.Join(t.TempDir(), "absent"), c.flag, c.value, "text"}, nil, &out, &errb)
		require.Error(t, err, "%s %s", c.flag, c.value)
		assert.ErrorIs(t, err, models.ErrInput)
		assert.Contains(t, err.Error(), c.flag)
		assert.Contains(t, err.Error(), c.value)
	}
}
