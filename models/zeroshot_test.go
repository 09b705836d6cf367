package models_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/int8bert/int8bert/models"
	"github.com/int8bert/int8bert/models/encoder/encodertest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// zeroShotGolden is testdata/tasks/xlmr-nli/golden.json
// (scripts/oracle/make_tasks_golden.py).
type zeroShotGolden struct {
	Orders map[string]map[string]string `json:"orders"`
	Cases  []struct {
		Text       string          `json:"text"`
		Template   string          `json:"template"`
		Candidates json.RawMessage `json:"candidate_labels"`
		Order      string          `json:"order"`
		MultiLabel bool            `json:"multi_label"`
		PairIDs    [][]int32       `json:"pair_ids"`
		Result     struct {
			Sequence string    `json:"sequence"`
			Labels   []string  `json:"labels"`
			Scores   []float64 `json:"scores"`
		} `json:"result"`
	} `json:"cases"`
}

// nliDir is the golden NLI model, its config.json's id2label replaced by
// the golden order's (a copy in a temporary folder) unless it is the
// folder's own.
func nliDir(t *testing.T, order map[string]string) string {
	t.Helper()
	src := filepath.Join("testdata", "tasks", "xlmr-nli")
	if order == nil {
		return src
	}
	dst := t.TempDir()
	for _, f := range []string{"model.safetensors", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"} {
		b, err := os.ReadFile(filepath.Join(src, f))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dst, f), b, 0o644))
	}
	b, err := os.ReadFile(filepath.Join(src, "config.json"))
	require.NoError(t, err)
	var cfg map[string]any
	require.NoError(t, json.Unmarshal(b, &cfg))
	l2i := map[string]any{}
	for i, l := range order {
		var k int
		_, err := fmt.Sscan(i, &k)
		require.NoError(t, err)
		l2i[l] = k
	}
	cfg["id2label"], cfg["label2id"] = order, l2i
	b, err = json.Marshal(cfg)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dst, "config.json"), b, 0o644))
	return dst
}

// TestZeroShotGolden: ZeroShot gives Hugging Face's zero-shot pipeline's
// labels, in its order, and scores within 1e-5, single- and multi-label,
// for two templates, a list and a comma-separated string of labels, one
// label, and the entailment label first (contradiction then the last).
func TestZeroShotGolden(t *testing.T) {
	sel := encodertest.Selector(t)
	ctx := context.Background()
	b, err := os.ReadFile(filepath.Join("testdata", "tasks", "xlmr-nli", "golden.json"))
	require.NoError(t, err)
	var g zeroShotGolden
	require.NoError(t, json.Unmarshal(b, &g))
	for _, order := range []string{"cne", "enc"} {
		t.Run(order, func(t *testing.T) {
			var o map[string]string
			if order != "cne" {
				o = g.Orders[order]
			}
			p, err := models.Load(ctx, nliDir(t, o), models.Options{Selector: sel, Threads: 1})
			require.NoError(t, err)
			defer p.Close()
			want := map[string]int{"cne": 2, "enc": 0}[order]
			require.Equal(t, want, p.EntailmentID())
			checkZeroShotCases(t, p, &g, order)
		})
	}
}

// checkZeroShotCases runs the golden cases of one id2label order on p:
// the (premise, hypothesis) ids, then the labels in HF's order and the
// scores within 1e-5.
func checkZeroShotCases(t *testing.T, p *models.Pipeline, g *zeroShotGolden, order string) {
	t.Helper()
	ctx := context.Background()
	n := 0
	for ci, c := range g.Cases {
		if c.Order != order {
			continue
		}
		n++
		var labels []string
		if json.Unmarshal(c.Candidates, &labels) != nil {
			var s string
			require.NoError(t, json.Unmarshal(c.Candidates, &s))
			labels = models.ParseCandidateLabels(s)
		}
		for j, l := range labels {
			h := c.Template
			if h == "This example is {}." {
				h = "This example is " + l + "."
			} else {
				h = "The topic is " + l
			}
			seq, err := p.Encode(c.Text, &h, models.EncodeOptions{Truncate: true})
			require.NoError(t, err)
			require.Equal(t, c.PairIDs[j], seq.IDs(), "case %d pair %d", ci, j)
		}
		res, err := p.ZeroShot(ctx, []string{c.Text}, models.ZeroShotOptions{CandidateLabels: labels,
			HypothesisTemplate: c.Template, MultiLabel: c.MultiLabel})
		require.NoError(t, err)
		r := res[0]
		assert.Equal(t, c.Result.Sequence, r.Sequence)
		assert.Equal(t, c.Result.Labels, r.Labels, "case %d", ci)
		require.Len(t, r.Scores, len(c.Result.Scores))
		for j, s := range c.Result.Scores {
			assert.InDelta(t, s, r.Scores[j], 1e-5, "case %d score %d", ci, j)
		}
	}
	require.Positive(t, n)
}

// TestZeroShotGoldenDeBERTa: the zero-shot pipeline on a DeBERTa-v3 NLI
// cross-encoder (testdata/tasks/deberta-nli, labels contradiction,
// entailment, neutral: entailment in the middle) with the DeBERTa-v3
// tokenizer layout (../tokenizer/testdata/deberta-v3-spm) equals HF's:
// the pairs' ids, the labels' order and the scores, single- and
// multi-label, the default and a custom template, under the folder's
// id2label and another order of the same weights.
func TestZeroShotGoldenDeBERTa(t *testing.T) {
	sel := encodertest.Selector(t)
	src := filepath.Join("testdata", "tasks", "deberta-nli")
	b, err := os.ReadFile(filepath.Join(src, "golden.json"))
	require.NoError(t, err)
	var g zeroShotGolden
	require.NoError(t, json.Unmarshal(b, &g))
	for _, order := range []string{"cen", "enc"} {
		t.Run(order, func(t *testing.T) {
			// The folder lacks the tokenizer (kept once, in the
			// tokenizer's testdata): a copy gets it and the order.
			dst := t.TempDir()
			copyFile := func(from, to string) {
				b, err := os.ReadFile(from)
				require.NoError(t, err)
				require.NoError(t, os.WriteFile(to, b, 0o644))
			}
			copyFile(filepath.Join(src, "model.safetensors"), filepath.Join(dst, "model.safetensors"))
			copyFile(filepath.Join("..", "tokenizer", "testdata", "deberta-v3-spm", "tokenizer.json"), filepath.Join(dst, "tokenizer.json"))
			b, err := os.ReadFile(filepath.Join(src, "config.json"))
			require.NoError(t, err)
			var cfg map[string]any
			require.NoError(t, json.Unmarshal(b, &cfg))
			l2i := map[string]any{}
			for i, l := range g.Orders[order] {
				var k int
				_, err := fmt.Sscan(i, &k)
				require.NoError(t, err)
				l2i[l] = k
			}
			cfg["id2label"], cfg["label2id"] = g.Orders[order], l2i
			b, err = json.Marshal(cfg)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(filepath.Join(dst, "config.json"), b, 0o644))
			p, err := models.Load(context.Background(), dst, models.Options{Selector: sel, Threads: 1})
			require.NoError(t, err)
			defer p.Close()
			require.Equal(t, "deberta-v2", p.Family())
			require.Equal(t, map[string]int{"cen": 1, "enc": 0}[order], p.EntailmentID())
			checkZeroShotCases(t, p, &g, order)
		})
	}
}

// TestZeroShotErrors: bad input and models the pipeline cannot use are
// clear errors.
func TestZeroShotErrors(t *testing.T) {
	sel := encodertest.Selector(t)
	ctx := context.Background()
	p, err := models.Load(ctx, nliDir(t, nil), models.Options{Selector: sel, Threads: 1})
	require.NoError(t, err)
	defer p.Close()
	for _, c := range []struct {
		o    models.ZeroShotOptions
		want string
	}{
		{models.ZeroShotOptions{}, "no candidate labels"},
		{models.ZeroShotOptions{CandidateLabels: []string{"a"}, HypothesisTemplate: "no placeholder"}, "has no {}"},
		{models.ZeroShotOptions{CandidateLabels: []string{"a"}, HypothesisTemplate: "{} and {}"}, "more than one"},
		{models.ZeroShotOptions{CandidateLabels: []string{"a"}, HypothesisTemplate: "{label}"}, "only {}"},
		{models.ZeroShotOptions{CandidateLabels: []string{"a", " "}}, "blank"},
	} {
		_, err := p.ZeroShot(ctx, []string{"text"}, c.o)
		assert.True(t, errors.Is(err, models.ErrInput), "%+v: %v", c.o, err)
		assert.ErrorContains(t, err, c.want)
	}
	// {0} and braces are Python's format too.
	_, err = p.ZeroShot(ctx, []string{"text"}, models.ZeroShotOptions{CandidateLabels: []string{"a"}, HypothesisTemplate: "{{x}} {0}"})
	assert.NoError(t, err)

	// Labels that name no entailment.
	noEnt, err := models.Load(ctx, nliDir(t, map[string]string{"0": "a", "1": "b", "2": "c"}), models.Options{Selector: sel, Threads: 1})
	require.NoError(t, err)
	defer noEnt.Close()
	_, err = noEnt.ZeroShot(ctx, []string{"text"}, models.ZeroShotOptions{CandidateLabels: []string{"x"}})
	assert.True(t, errors.Is(err, models.ErrConfig), "%v", err)
	assert.ErrorContains(t, err, "entail")

	// A token classifier is not an NLI model.
	ner, err := models.Load(ctx, filepath.Join("testdata", "tasks", "bert-ner"), models.Options{Selector: sel, Threads: 1})
	require.NoError(t, err)
	defer ner.Close()
	_, err = ner.ZeroShot(ctx, []string{"text"}, models.ZeroShotOptions{CandidateLabels: []string{"x"}})
	assert.True(t, errors.Is(err, models.ErrConfig), "%v", err)
}
