package models_test

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/int8bert/int8bert/models"
	"github.com/int8bert/int8bert/models/encoder/encodertest"
	"github.com/int8bert/int8bert/tokenizer"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// nerGolden is testdata/tasks/*-ner/golden.json (scripts/oracle/make_tasks_golden.py):
// per text, the Rust tokenizer's encoding, HF's logits and the pipeline's
// entities for every aggregation strategy, with ignore_labels default
// (null) and [].
type nerGolden struct {
	Labels []string `json:"labels"`
	Cases  []struct {
		Text    string      `json:"text"`
		IDs     []int32     `json:"ids"`
		Offsets [][2]int    `json:"offsets"`
		Logits  [][]float64 `json:"logits"`
		Runs    []struct {
			Strategy string       `json:"aggregation_strategy"`
			Ignore   []string     `json:"ignore_labels"`
			Entities []goldEntity `json:"entities"`
		} `json:"runs"`
	} `json:"cases"`
}

type goldEntity struct {
	Entity      string  `json:"entity"`
	EntityGroup string  `json:"entity_group"`
	Score       float64 `json:"score"`
	Index       *int    `json:"index"`
	Word        string  `json:"word"`
	Start       int     `json:"start"`
	End         int     `json:"end"`
}

var nerModels = []string{"bert-ner", "xlmr-ner"}

func readNERGolden(t *testing.T, name string) (string, *nerGolden) {
	t.Helper()
	dir := filepath.Join("testdata", "tasks", name)
	b, err := os.ReadFile(filepath.Join(dir, "golden.json"))
	require.NoError(t, err)
	var g nerGolden
	require.NoError(t, json.Unmarshal(b, &g))
	return dir, &g
}

// TestTokenClassifyGolden: on the golden NER models, TokenClassify gives
// what Hugging Face's token-classification pipeline gives, for every
// aggregation strategy, with ignore_labels defaulted and empty: the same
// entities, words and offsets, scores within 1e-5; the logits match HF's
// at the FP32 bar.
func TestTokenClassifyGolden(t *testing.T) {
	sel := encodertest.Selector(t)
	ctx := context.Background()
	for _, name := range nerModels {
		t.Run(name, func(t *testing.T) {
			dir, g := readNERGolden(t, name)
			p, err := models.Load(ctx, dir, models.Options{Selector: sel, Threads: 1})
			require.NoError(t, err)
			defer p.Close()
			require.Equal(t, models.TaskTokenClassification, p.Task())
			require.Equal(t, g.Labels, p.Labels())
			for ci, c := range g.Cases {
				// The encoding is the Rust tokenizer's.
				seq, err := p.Encode(c.Text, nil, models.EncodeOptions{Truncate: true})
				require.NoError(t, err)
				require.Equal(t, c.IDs, seq.IDs(), "case %d ids", ci)
				out, err := p.Forward(ctx, oneInput(c.IDs), false)
				require.NoError(t, err)
				n := len(g.Labels)
				for i, row := range c.Logits {
					for j, v := range row {
						assert.InDelta(t, v, out.Logits[i*n+j], 1e-4*math.Max(1, math.Abs(v)), "case %d logit %d,%d", ci, i, j)
					}
				}
				for _, r := range c.Runs {
					strat, err := models.ParseAggregationStrategy(r.Strategy)
					require.NoError(t, err)
					o := models.TokenClassifyOptions{AggregationStrategy: strat, IgnoreLabels: r.Ignore}
					got, err := p.TokenClassify(ctx, []string{c.Text}, o)
					require.NoError(t, err)
					compareEntities(t, r.Entities, got[0], "%s case %d %s ignore %v", name, ci, r.Strategy, r.Ignore)
				}
			}
			// A batch of all texts gives each text's entities.
			var texts []string
			for _, c := range g.Cases {
				texts = append(texts, c.Text)
			}
			all, err := p.TokenClassify(ctx, texts, models.TokenClassifyOptions{AggregationStrategy: models.AggregateFirst})
			require.NoError(t, err)
			for ci, c := range g.Cases {
				for _, r := range c.Runs {
					if r.Strategy == "first" && r.Ignore == nil {
						compareEntities(t, r.Entities, all[ci], "batch case %d", ci)
					}
				}
			}
		})
	}
}

func compareEntities(t *testing.T, want []goldEntity, got []models.Entity, msg string, args ...any) {
	t.Helper()
	if !assert.Len(t, got, len(want), append([]any{msg + ": %v"}, append(args, got)...)...) {
		return
	}
	for i, w := range want {
		e := got[i]
		assert.Equal(t, w.Entity, e.Entity, append([]any{msg + " entity %d"}, append(args, i)...)...)
		assert.Equal(t, w.EntityGroup, e.EntityGroup, append([]any{msg + " entity %d"}, append(args, i)...)...)
		assert.Equal(t, w.Word, e.Word, append([]any{msg + " entity %d"}, append(args, i)...)...)
		assert.Equal(t, w.Start, e.Start, append([]any{msg + " entity %d"}, append(args, i)...)...)
		assert.Equal(t, w.End, e.End, append([]any{msg + " entity %d"}, append(args, i)...)...)
		assert.Equal(t, w.Index, e.Index, append([]any{msg + " entity %d"}, append(args, i)...)...)
		assert.InDelta(t, w.Score, e.Score, 1e-5, append([]any{msg + " entity %d"}, append(args, i)...)...)
	}
}

// TestTokenClassifyInt8: the golden NER models quantized (dynamic, and
// static calibrated on the golden texts) keep FP32's logits within the
// INT8 gate (cosine >= 0.999) and give entities over the same spans of
// text.
func TestTokenClassifyInt8(t *testing.T) {
	sel := encodertest.Selector(t)
	ctx := context.Background()
	for _, name := range nerModels {
		dir, g := readNERGolden(t, name)
		var texts []string
		for _, c := range g.Cases {
			texts = append(texts, c.Text)
		}
		f32, err := models.Load(ctx, dir, models.Options{Selector: sel, Threads: 1})
		require.NoError(t, err)
		defer f32.Close()
		for _, prec := range []models.Precision{models.PrecisionInt8Dynamic, models.PrecisionInt8Static} {
			t.Run(name+"/"+prec.String(), func(t *testing.T) {
				q, err := models.Load(ctx, dir, models.Options{Selector: sel, Threads: 1, Precision: prec, Calib: texts})
				require.NoError(t, err)
				defer q.Close()
				for ci, c := range g.Cases {
					in := oneInput(c.IDs)
					a, err := f32.Forward(ctx, in, false)
					require.NoError(t, err)
					b, err := q.Forward(ctx, in, false)
					require.NoError(t, err)
					cos := encodertest.Cosine(a.Logits, b.Logits)
					assert.GreaterOrEqual(t, cos, 0.999, "case %d logits cosine", ci)
				}
				got, err := q.TokenClassify(ctx, texts, models.TokenClassifyOptions{AggregationStrategy: models.AggregateNone, IgnoreLabels: []string{}})
				require.NoError(t, err)
				for ci := range texts {
					// Every token is an entity without ignore_labels: the
					// spans are the tokens', whatever the labels.
					require.Len(t, got[ci], len(g.Cases[ci].IDs)-2)
				}
			})
		}
	}
}

// TestTokenClassifyErrors: a model without the head, and bad options, are
// clear errors.
func TestTokenClassifyErrors(t *testing.T) {
	sel := encodertest.Selector(t)
	ctx := context.Background()
	dir, _ := readNERGolden(t, "bert-ner")
	p, err := models.Load(ctx, dir, models.Options{Selector: sel, Threads: 1})
	require.NoError(t, err)
	defer p.Close()
	_, err = p.TokenClassify(ctx, []string{"x"}, models.TokenClassifyOptions{AggregationStrategy: 9})
	assert.True(t, errors.Is(err, models.ErrInput), "%v", err)
	_, err = models.ParseAggregationStrategy("longest")
	assert.ErrorContains(t, err, "none, simple, first, average, max")
	assert.True(t, errors.Is(err, models.ErrInput))
	_, err = p.Classify(ctx, []string{"x"}, models.ClassifyOptions{})
	assert.True(t, errors.Is(err, models.ErrConfig), "%v", err)

	nli, err := models.Load(ctx, filepath.Join("testdata", "tasks", "xlmr-nli"), models.Options{Selector: sel, Threads: 1})
	require.NoError(t, err)
	defer nli.Close()
	_, err = nli.TokenClassify(ctx, []string{"x"}, models.TokenClassifyOptions{})
	assert.True(t, errors.Is(err, models.ErrConfig), "%v", err)
	assert.ErrorContains(t, err, "not a token classifier")
}

// oneInput is one unpadded sequence of ids (type ids 0).
func oneInput(ids []int32) *models.Inputs {
	in := &models.Inputs{Batch: 1, Seq: len(ids), IDs: ids}
	in.Mask, in.TypeIDs = make([]int32, len(ids)), make([]int32, len(ids))
	for i := range in.Mask {
		in.Mask[i] = 1
	}
	return in
}

// nerStrideGolden is testdata/tasks/*-ner/golden_stride.json.gz
// (scripts/oracle/make_ner_stride_golden.py): per maximum length, stride
// and text, the Rust tokenizer's overflowing windows and the pipeline's
// entities with that stride.
type nerStrideGolden struct {
	Cases []struct {
		MaxLength int    `json:"max_length"`
		Stride    int    `json:"stride"`
		Text      string `json:"text"`
		Windows   []struct {
			IDs []int32 `json:"ids"`
		} `json:"windows"`
		Runs []struct {
			Strategy string       `json:"aggregation_strategy"`
			Ignore   []string     `json:"ignore_labels"`
			Entities []goldEntity `json:"entities"`
		} `json:"runs"`
	} `json:"cases"`
}

// TestTokenClassifyStrideGolden: with a stride, TokenClassify runs texts
// longer than MaxLength in the Rust tokenizer's overflowing windows and
// gives the entities of Hugging Face's pipeline with that stride (each
// window aggregated and filtered, then merged where they overlap), for
// every strategy but none and ignore_labels defaulted and empty; all of a
// batch's texts at once give the same.
func TestTokenClassifyStrideGolden(t *testing.T) {
	sel := encodertest.Selector(t)
	ctx := context.Background()
	for _, name := range nerModels {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join("testdata", "tasks", name)
			f, err := os.Open(filepath.Join(dir, "golden_stride.json.gz"))
			require.NoError(t, err)
			defer f.Close()
			zr, err := gzip.NewReader(f)
			require.NoError(t, err)
			var g nerStrideGolden
			require.NoError(t, json.NewDecoder(zr).Decode(&g))
			require.NotEmpty(t, g.Cases)
			pipes := map[int]*models.Pipeline{}
			defer func() {
				for _, p := range pipes {
					p.Close()
				}
			}()
			multi := 0
			batches := map[[2]int][]int{} // (max length, stride) -> cases
			for ci, c := range g.Cases {
				p := pipes[c.MaxLength]
				if p == nil {
					p, err = models.Load(ctx, dir, models.Options{Selector: sel, Threads: 1, MaxLength: c.MaxLength})
					require.NoError(t, err)
					pipes[c.MaxLength] = p
				}
				batches[[2]int{c.MaxLength, c.Stride}] = append(batches[[2]int{c.MaxLength, c.Stride}], ci)
				// The windows are the Rust tokenizer's.
				enc, err := p.Tok.Encode(c.Text, tokenizer.Options{MaxLength: c.MaxLength, Truncation: tokenizer.LongestFirst,
					Overflow: true, Stride: c.Stride})
				require.NoError(t, err)
				wins := append([]tokenizer.Encoding{enc}, enc.Overflowing...)
				require.Len(t, wins, len(c.Windows), "case %d windows", ci)
				for wi, w := range c.Windows {
					require.Equal(t, w.IDs, wins[wi].IDs, "case %d window %d ids", ci, wi)
				}
				if len(wins) > 1 {
					multi++
				}
				stride := c.Stride
				for _, r := range c.Runs {
					strat, err := models.ParseAggregationStrategy(r.Strategy)
					require.NoError(t, err)
					o := models.TokenClassifyOptions{AggregationStrategy: strat, IgnoreLabels: r.Ignore, Stride: &stride}
					got, err := p.TokenClassify(ctx, []string{c.Text}, o)
					require.NoError(t, err)
					compareEntities(t, r.Entities, got[0], "%s case %d (max %d stride %d) %s ignore %v", name, ci, c.MaxLength, c.Stride, r.Strategy, r.Ignore)
				}
			}
			require.Greater(t, multi, len(g.Cases)/2, "cases that overflow")
			for key, cis := range batches {
				var texts []string
				for _, ci := range cis {
					texts = append(texts, g.Cases[ci].Text)
				}
				stride := key[1]
				all, err := pipes[key[0]].TokenClassify(ctx, texts, models.TokenClassifyOptions{AggregationStrategy: models.AggregateMax, Stride: &stride})
				require.NoError(t, err)
				for k, ci := range cis {
					for _, r := range g.Cases[ci].Runs {
						if r.Strategy == "max" && r.Ignore == nil {
							compareEntities(t, r.Entities, all[k], "batch (max %d stride %d) case %d", key[0], key[1], ci)
						}
					}
				}
			}
		})
	}
}

// TestTokenClassifyStrideErrors: the pipeline's refusals of a stride.
func TestTokenClassifyStrideErrors(t *testing.T) {
	sel := encodertest.Selector(t)
	ctx := context.Background()
	dir, _ := readNERGolden(t, "bert-ner")
	p, err := models.Load(ctx, dir, models.Options{Selector: sel, Threads: 1, MaxLength: 16})
	require.NoError(t, err)
	defer p.Close()
	for _, c := range []struct {
		stride int
		strat  models.AggregationStrategy
		want   string
	}{
		{-1, models.AggregateSimple, "stride -1"},
		{16, models.AggregateSimple, "stride 16: want 0 to 15"},
		{4, models.AggregateNone, "aggregation strategy other than none"},
		// Under the maximum length, but not under the tokens left after
		// [CLS] and [SEP]: the tokenizer's refusal.
		{14, models.AggregateFirst, "stride 14"},
	} {
		s := c.stride
		_, err := p.TokenClassify(ctx, []string{strings.Repeat("berlin ", 30)}, models.TokenClassifyOptions{AggregationStrategy: c.strat, Stride: &s})
		assert.True(t, errors.Is(err, models.ErrInput), "stride %d: %v", c.stride, err)
		assert.ErrorContains(t, err, c.want)
	}
}
