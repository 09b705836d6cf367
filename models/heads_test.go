package models_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/int8bert/int8bert/models"
	"github.com/int8bert/int8bert/models/encoder"
	"github.com/int8bert/int8bert/models/encoder/encodertest"
	"github.com/int8bert/int8bert/tokenizer"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// heads are the golden heads of ../shared/golden/heads: the function
// Hugging Face's pipeline applies by default to each, and its number of
// labels.
var heads = []struct {
	name   string
	labels int
	// problem is config.json's problem_type.
	problem string
	// def is the pipeline's default function for the head.
	def models.ClassificationFunction
}{
	{"bert-regression", 1, encoder.ProblemRegression, models.FunctionSigmoid},
	{"bert-multilabel", 4, encoder.ProblemMultiLabelClassification, models.FunctionSigmoid},
	{"xlm-roberta-crossencoder", 1, "", models.FunctionSigmoid},
	{"distilbert-regression", 1, "", models.FunctionSigmoid},
}

// headGolden is a golden head's golden.json: token ids, the logits, and the
// pipeline's post-processing of them for every function_to_apply and
// top_k.
type headGolden struct {
	Family string               `json:"family"`
	Inputs map[string][][]int32 `json:"inputs"`
	Logits [][]float64          `json:"logits"`
	// Pipeline: function_to_apply null is the default; top_k 1 with
	// legacy is the pipeline without top_k (one {label, score} per row),
	// top_k null every label and top_k 2 the two best, sorted.
	Pipeline []struct {
		FunctionToApply *string           `json:"function_to_apply"`
		TopK            *int              `json:"top_k"`
		Legacy          bool              `json:"legacy"`
		PerRow          []json.RawMessage `json:"per_row"`
	} `json:"pipeline"`
}

type labelScore struct {
	Label string  `json:"label"`
	Score float64 `json:"score"`
}

func readHeadGolden(t *testing.T, dir string) *headGolden {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "golden.json"))
	require.NoError(t, err)
	var g headGolden
	require.NoError(t, json.Unmarshal(raw, &g))
	require.NotEmpty(t, g.Logits)
	require.Len(t, g.Pipeline, 12, "4 functions x 3 top_k")
	return &g
}

// options maps one pipeline case onto ClassifyOptions.
func (g *headGolden) options(t *testing.T, i int) models.ClassifyOptions {
	t.Helper()
	c := g.Pipeline[i]
	var o models.ClassifyOptions
	if c.FunctionToApply != nil {
		fn, err := models.ParseClassificationFunction(*c.FunctionToApply)
		require.NoError(t, err)
		o.FunctionToApply = fn
	}
	switch {
	case c.TopK == nil:
		o.TopK = models.TopKAll
	case c.Legacy:
		require.Equal(t, 1, *c.TopK, "legacy is top_k 1")
	default:
		o.TopK = *c.TopK
	}
	return o
}

// name is the case as the pipeline's arguments.
func (g *headGolden) name(i int) string {
	c := g.Pipeline[i]
	fn, k := "null", "null"
	if c.FunctionToApply != nil {
		fn = *c.FunctionToApply
	}
	if c.TopK != nil {
		k = fmt.Sprint(*c.TopK)
	}
	return fmt.Sprintf("function_to_apply=%s,top_k=%s,legacy=%v", fn, k, c.Legacy)
}

// check compares a row's result with case i of the pipeline within tol.
func (g *headGolden) check(t *testing.T, i, row int, got models.Classification, tol float64) {
	t.Helper()
	c := g.Pipeline[i]
	what := fmt.Sprintf("%s row %d", g.name(i), row)
	if c.Legacy {
		var want labelScore
		require.NoError(t, json.Unmarshal(c.PerRow[row], &want), what)
		assert.Equal(t, want.Label, got.Label, what)
		assert.InDelta(t, want.Score, got.Score, tol, what)
		assert.Nil(t, got.Top, "%s: no top_k, no list", what)
		return
	}
	var want []labelScore
	require.NoError(t, json.Unmarshal(c.PerRow[row], &want), what)
	require.Len(t, got.Top, len(want), what)
	for j := range want {
		assert.Equal(t, want[j].Label, got.Top[j].Label, "%s: label %d", what, j)
		assert.InDelta(t, want[j].Score, got.Top[j].Score, tol, "%s: label %d", what, j)
	}
	// The best label is the list's first.
	assert.Equal(t, want[0].Label, got.Label, what)
}

// TestHeadsPostprocessGolden: on the reference's own logits, the
// post-processing gives what Hugging Face's TextClassificationPipeline
// gives for every function_to_apply and top_k on every golden head
// (regression, multi-label, a cross-encoder, DistilBERT's one-label
// head), to float32 precision.
func TestHeadsPostprocessGolden(t *testing.T) {
	sel := encodertest.Selector(t)
	for _, h := range heads {
		t.Run(h.name, func(t *testing.T) {
			dir := shared(t, filepath.Join("golden/heads", h.name))
			g := readHeadGolden(t, dir)
			p, err := models.Load(context.Background(), dir, models.Options{Selector: sel, Threads: 1})
			require.NoError(t, err)
			defer p.Close()
			m := p
			require.Len(t, m.Labels(), h.labels)
			assert.Equal(t, h.problem, m.ProblemType())
			assert.Equal(t, h.def, m.DefaultFunction())
			for i := range g.Pipeline {
				o := g.options(t, i)
				for row, l := range g.Logits {
					logits := make([]float32, len(l))
					for j, v := range l {
						logits[j] = float32(v)
					}
					got, err := m.Postprocess(logits, o)
					require.NoError(t, err)
					g.check(t, i, row, got, 1e-6)
				}
			}
		})
	}
}

// headFolder makes a model folder of golden head dir with a tokenizer
// that spells token id i as the word "w<i>" (BERT's WordPiece vocab.txt,
// or for XLM-R a tokenizer.json with RobertaProcessing), and returns it
// with each golden row as text: one text, or a pair (B non-empty).
func headFolder(t *testing.T, dir string, g *headGolden) (string, []tokenizer.Pair) {
	t.Helper()
	out := encodertest.WordFolder(t, dir, g.Family == "xlm-roberta")
	cls, sep := int32(101), int32(102)
	if g.Family == "xlm-roberta" {
		cls, sep = 0, 2
	}
	var rows []tokenizer.Pair
	for r, ids := range g.Inputs["input_ids"] {
		var segs [][]string
		var cur []string
		for k, id := range ids {
			if g.Inputs["attention_mask"][r][k] == 0 {
				continue
			}
			if id == cls || id == sep {
				if len(cur) > 0 {
					segs = append(segs, cur)
				}
				cur = nil
				continue
			}
			cur = append(cur, fmt.Sprintf("w%d", id))
		}
		require.True(t, len(segs) == 1 || len(segs) == 2, "row %d: %d segments", r, len(segs))
		p := tokenizer.Pair{A: strings.Join(segs[0], " ")}
		if len(segs) == 2 {
			p.B = strings.Join(segs[1], " ")
		}
		rows = append(rows, p)
	}
	return out, rows
}

// classifyRows classifies the golden rows as a user would: the texts with
// Classify, the pairs with ClassifyPairs, in the rows' order.
func classifyRows(t *testing.T, p *models.Pipeline, rows []tokenizer.Pair, o models.ClassifyOptions) []models.Classification {
	t.Helper()
	var single []string
	var pairs []tokenizer.Pair
	for _, r := range rows {
		if r.B == "" {
			single = append(single, r.A)
		} else {
			pairs = append(pairs, r)
		}
	}
	ctx := context.Background()
	var rs, rp []models.Classification
	var err error
	if len(single) > 0 {
		rs, err = p.Classify(ctx, single, o)
		require.NoError(t, err)
	}
	if len(pairs) > 0 {
		rp, err = p.ClassifyPairs(ctx, pairs, o)
		require.NoError(t, err)
	}
	out := make([]models.Classification, 0, len(rows))
	for _, r := range rows {
		if r.B == "" {
			out, rs = append(out, rs[0]), rs[1:]
		} else {
			out, rp = append(out, rp[0]), rp[1:]
		}
	}
	return out
}

// TestHeadsGolden: each golden head (a regression head, a multi-label
// head, an XLM-R cross-encoder scoring sentence pairs, DistilBERT's
// one-label head), loaded at FP32 and given the golden rows as text
// (ClassifyPairs for the pairs), returns the reference's logits and, for
// every function_to_apply and top_k, what Hugging Face's text-
// classification pipeline returns.
func TestHeadsGolden(t *testing.T) {
	sel := encodertest.Selector(t)
	for _, h := range heads {
		t.Run(h.name, func(t *testing.T) {
			src := shared(t, filepath.Join("golden/heads", h.name))
			g := readHeadGolden(t, src)
			dir, rows := headFolder(t, src, g)
			p, err := models.Load(context.Background(), dir, models.Options{Selector: sel, Threads: 1, Precision: models.PrecisionFP32})
			require.NoError(t, err)
			defer p.Close()
			require.NotNil(t, p.Tok)
			// The tokenizer gives the golden ids back: the rows are the
			// reference's inputs.
			for r, row := range rows {
				var e tokenizer.Encoding
				if row.B == "" {
					e, err = p.Tok.Encode(row.A, tokenizer.Options{})
				} else {
					e, err = p.Tok.EncodePair(row.A, row.B, tokenizer.Options{})
				}
				require.NoError(t, err)
				assert.Equal(t, g.Inputs["input_ids"][r][:e.Len()], e.IDs, "row %d ids", r)
				if tt := g.Inputs["token_type_ids"]; tt != nil {
					assert.Equal(t, tt[r][:e.Len()], e.TypeIDs, "row %d type ids", r)
				}
			}
			if h.name == "xlm-roberta-crossencoder" {
				for _, r := range rows {
					require.NotEmpty(t, r.B, "the cross-encoder scores pairs")
				}
			}
			for i := range g.Pipeline {
				res := classifyRows(t, p, rows, g.options(t, i))
				require.Len(t, res, len(rows))
				for row, r := range res {
					require.Len(t, r.Logits, h.labels)
					for j, want := range g.Logits[row] {
						assert.InDelta(t, want, r.Logits[j], 1e-5, "row %d logit %d", row, j)
					}
					g.check(t, i, row, r, 2e-5)
				}
			}
		})
	}
}

// TestClassifyOptions: the options' domain. An unknown function name, an
// out-of-range function or a negative top_k is an error wrapping
// ErrInput, before any work; FunctionNone gives the raw logits;
// TopK larger than the labels gives every label; names parse in any case
// and round-trip as text.
func TestClassifyOptions(t *testing.T) {
	for _, s := range []string{"", "default", "sigmoid", "SOFTMAX", "None"} {
		_, err := models.ParseClassificationFunction(s)
		assert.NoError(t, err, s)
	}
	for _, s := range []string{"relu", "soft max", "identity"} {
		_, err := models.ParseClassificationFunction(s)
		require.Error(t, err, s)
		assert.True(t, errors.Is(err, models.ErrInput), "%q: %v", s, err)
		assert.Contains(t, err.Error(), s)
	}
	for _, f := range []models.ClassificationFunction{models.FunctionDefault, models.FunctionSigmoid, models.FunctionSoftmax, models.FunctionNone} {
		b, err := f.MarshalText()
		require.NoError(t, err)
		var g models.ClassificationFunction
		require.NoError(t, g.UnmarshalText(b))
		assert.Equal(t, f, g)
	}
	_, err := models.ClassificationFunction(42).MarshalText()
	assert.ErrorIs(t, err, models.ErrInput)

	dir := shared(t, "golden/heads/bert-multilabel")
	p, err := models.Load(context.Background(), dir, models.Options{Selector: encodertest.Selector(t), Threads: 1})
	require.NoError(t, err)
	defer p.Close()
	logits := []float32{-1, 2, 0.5, 2}
	for _, o := range []models.ClassifyOptions{{TopK: -1}, {FunctionToApply: 42}, {FunctionToApply: -1}} {
		_, err := p.Postprocess(logits, o)
		assert.ErrorIs(t, err, models.ErrInput, "%+v", o)
		// Classify checks the options before it needs a tokenizer.
		_, err = p.Classify(context.Background(), []string{"w5"}, o)
		assert.ErrorIs(t, err, models.ErrInput, "%+v", o)
		_, err = p.ClassifyPairs(context.Background(), []tokenizer.Pair{{A: "w5", B: "w6"}}, o)
		assert.ErrorIs(t, err, models.ErrInput, "%+v", o)
	}
	_, err = p.Postprocess(logits[:3], models.ClassifyOptions{})
	assert.ErrorIs(t, err, models.ErrInput, "3 logits for 4 labels")

	c, err := p.Postprocess(logits, models.ClassifyOptions{FunctionToApply: models.FunctionNone, TopK: 10})
	require.NoError(t, err)
	assert.Equal(t, logits, c.Scores, "none: the raw logits")
	assert.Equal(t, models.FunctionNone, c.Function)
	require.Len(t, c.Top, 4, "top_k beyond the labels: every label")
	// Equal scores keep label order, as Python's stable sort does.
	assert.Equal(t, []string{"politics", "arts", "science", "sports"},
		[]string{c.Top[0].Label, c.Top[1].Label, c.Top[2].Label, c.Top[3].Label})
	assert.Equal(t, 1, c.Index, "the first of equal best scores")
	c, err = p.Postprocess(logits, models.ClassifyOptions{})
	require.NoError(t, err)
	assert.Equal(t, models.FunctionSigmoid, c.Function, "multi-label: sigmoid")
	assert.Nil(t, c.Top)
	c, err = p.Postprocess(logits, models.ClassifyOptions{FunctionToApply: models.FunctionSoftmax, TopK: 1})
	require.NoError(t, err)
	require.Len(t, c.Top, 1, "top_k 1: a list of one")
	var sum float64
	for _, s := range c.Scores {
		sum += float64(s)
	}
	assert.InDelta(t, 1, sum, 1e-6, "softmax sums to 1")
}

// TestDefaultFunction: the function the pipeline picks from problem_type
// and the number of labels, as transformers 4.31 does (multi-label or one
// label: sigmoid, even for regression; single-label or several labels:
// softmax, even for a regression with several outputs).
func TestDefaultFunction(t *testing.T) {
	for _, c := range []struct {
		problem string
		labels  int
		want    models.ClassificationFunction
	}{
		{"", 1, models.FunctionSigmoid},
		{"", 2, models.FunctionSoftmax},
		{encoder.ProblemRegression, 1, models.FunctionSigmoid},
		{encoder.ProblemRegression, 3, models.FunctionSoftmax},
		{encoder.ProblemMultiLabelClassification, 1, models.FunctionSigmoid},
		{encoder.ProblemMultiLabelClassification, 5, models.FunctionSigmoid},
		{encoder.ProblemSingleLabelClassification, 1, models.FunctionSigmoid},
		{encoder.ProblemSingleLabelClassification, 3, models.FunctionSoftmax},
	} {
		m := models.WithEngine(&encoder.TaskModel{Task: encoder.TaskSequenceClassification, ProblemType: c.problem, Labels: make([]string, c.labels)})
		assert.Equal(t, c.want, m.DefaultFunction(), "problem_type %q, %d labels", c.problem, c.labels)
	}
}

// TestProblemTypeUnknown: a problem_type Hugging Face rejects is a load
// error naming it and wrapping ErrConfig.
func TestProblemTypeUnknown(t *testing.T) {
	src := shared(t, "golden/heads/bert-multilabel")
	dir := t.TempDir()
	encodertest.LinkFile(t, filepath.Join(src, "model.safetensors"), filepath.Join(dir, "model.safetensors"))
	cfg, err := os.ReadFile(filepath.Join(src, "config.json"))
	require.NoError(t, err)
	cfg = []byte(strings.Replace(string(cfg), `"multi_label_classification"`, `"multilabel"`, 1))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.json"), cfg, 0o644))
	_, err = models.Load(context.Background(), dir, models.Options{Selector: encodertest.Selector(t), Threads: 1})
	require.Error(t, err)
	assert.ErrorIs(t, err, models.ErrConfig)
	assert.Contains(t, err.Error(), `"multilabel"`)
}
