package models_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/int8bert/int8bert/models"
	"github.com/int8bert/int8bert/models/encoder/encodertest"
	"github.com/int8bert/int8bert/smoothquant"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sharedDir is the project's shared folder next to the repository
// ($INT8BERT_SHARED overrides it).
func sharedDir() string {
	if d := os.Getenv("INT8BERT_SHARED"); d != "" {
		return d
	}
	return "../../shared"
}

// shared returns rel inside the shared folder, skipping the test, by
// name, when it is absent.
func shared(t *testing.T, rel string) string {
	t.Helper()
	p := filepath.Join(sharedDir(), rel)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("%s not found (the project's shared folder; set INT8BERT_SHARED): %v", p, err)
	}
	return p
}

// checkpointDir returns the folder of a checkpoints entry: one committed
// into testdata as it is, one of the shared folder through shared.
func checkpointDir(t *testing.T, dir string) string {
	t.Helper()
	if strings.HasPrefix(dir, "testdata/") {
		return dir
	}
	return shared(t, dir)
}

// checkpoints are every shared checkpoint, and every golden committed
// into testdata (golden, mlm, tasks), with the family and task that Load
// must pick from its config.json alone, and its number of labels.
var checkpoints = []struct {
	dir    string
	family string
	task   models.Task
	labels int
	// tokenizer: the folder has one (the golden ones have none).
	tokenizer bool
}{
	{"golden/models/bert-base", "bert", models.TaskBase, 0, false},
	{"golden/models/bert-seqcls", "bert", models.TaskSequenceClassification, 3, false},
	{"golden/models/bert-qa", "bert", models.TaskQuestionAnswering, 0, false},
	{"golden/models/distilbert-base", "distilbert", models.TaskBase, 0, false},
	{"golden/models/distilbert-seqcls", "distilbert", models.TaskSequenceClassification, 2, false},
	{"golden/models/distilbert-qa", "distilbert", models.TaskQuestionAnswering, 0, false},
	{"golden/models/xlm-roberta-base", "xlm-roberta", models.TaskBase, 0, false},
	{"golden/models/xlm-roberta-seqcls", "xlm-roberta", models.TaskSequenceClassification, 3, false},
	{"golden/models/xlm-roberta-qa", "xlm-roberta", models.TaskQuestionAnswering, 0, false},
	{"golden/heads/bert-regression", "bert", models.TaskSequenceClassification, 1, false},
	{"golden/heads/bert-multilabel", "bert", models.TaskSequenceClassification, 4, false},
	{"golden/heads/distilbert-regression", "distilbert", models.TaskSequenceClassification, 1, false},
	{"golden/heads/xlm-roberta-crossencoder", "xlm-roberta", models.TaskSequenceClassification, 1, false},
	{"testdata/golden/mpnet-base", "mpnet", models.TaskBase, 0, false},
	{"testdata/golden/mpnet-seqcls", "mpnet", models.TaskSequenceClassification, 3, false},
	{"testdata/golden/deberta-v3-base", "deberta-v2", models.TaskBase, 0, false},
	{"testdata/golden/deberta-v3-seqcls", "deberta-v2", models.TaskSequenceClassification, 3, false},
	{"testdata/golden/deberta-v3-tokcls", "deberta-v2", models.TaskTokenClassification, 5, false},
	{"testdata/golden/deberta-v2-base", "deberta-v2", models.TaskBase, 0, false},
	{"testdata/golden/deberta-v2-qa", "deberta-v2", models.TaskQuestionAnswering, 0, false},
	{"models/sst2-bert-mini", "bert", models.TaskSequenceClassification, 2, true},
	{"models/sst2-distilbert-mini", "distilbert", models.TaskSequenceClassification, 2, true},
	{"models/sst2-xlmr-mini", "xlm-roberta", models.TaskSequenceClassification, 2, true},
	{"testdata/golden/roberta-base-tiny", "roberta", models.TaskBase, 0, false},
	{"testdata/golden/roberta-seqcls", "roberta", models.TaskSequenceClassification, 3, false},
	{"testdata/golden/camembert-base", "camembert", models.TaskBase, 0, false},
	{"testdata/golden/electra-base", "electra", models.TaskBase, 0, false},
	{"testdata/golden/electra-seqcls", "electra", models.TaskSequenceClassification, 3, false},
	{"testdata/golden/electra-discriminator", "electra", models.TaskReplacedTokenDetection, 0, false},
	{"testdata/mlm/bert-mlm", "bert", models.TaskMaskedLM, 0, true},
	{"testdata/mlm/distilbert-mlm", "distilbert", models.TaskMaskedLM, 0, true},
	{"testdata/mlm/xlm-roberta-mlm", "xlm-roberta", models.TaskMaskedLM, 0, false},
	{"testdata/tasks/bert-ner", "bert", models.TaskTokenClassification, 9, true},
	{"testdata/tasks/xlmr-ner", "xlm-roberta", models.TaskTokenClassification, 9, true},
	{"testdata/tasks/xlmr-nli", "xlm-roberta", models.TaskSequenceClassification, 3, true},
	{"testdata/tasks/deberta-nli", "deberta-v2", models.TaskSequenceClassification, 3, false},
}

// golden is what the five kinds of golden.json hold: inputs and outputs
// (golden/models), inputs and logits (golden/heads), top-level ids and
// logits (the trained SST-2 models), inputs with the logits in
// logits.f32 (testdata/mlm), or pipeline cases with their ids and
// logits (testdata/tasks).
type golden struct {
	Inputs        map[string][][]int32       `json:"inputs"`
	Outputs       map[string]json.RawMessage `json:"outputs"`
	InputIDs      [][]int32                  `json:"input_ids"`
	AttentionMask [][]int32                  `json:"attention_mask"`
	TokenTypeIDs  [][]int32                  `json:"token_type_ids"`
	Logits        json.RawMessage            `json:"logits"`
	LogitsShape   []int                      `json:"logits_shape"`
	Cases         []goldenCase               `json:"cases"`
}

// goldenCase is one case of a testdata/tasks golden: a NER text's ids and
// its logits per token, or a zero-shot case's (premise, hypothesis) ids
// and the logits of each pair.
type goldenCase struct {
	IDs     []int32     `json:"ids"`
	PairIDs [][]int32   `json:"pair_ids"`
	Logits  [][]float64 `json:"logits"`
}

// casesInputs are the distinct sequences of a tasks golden's cases, packed
// (one pass, no padding), and their logits in the same order: one row per
// token for NER, one per pair for zero-shot.
func casesInputs(t *testing.T, cases []goldenCase) (*models.Inputs, map[string][]float64) {
	t.Helper()
	in := &models.Inputs{}
	var logits []float64
	seen := map[string]bool{}
	add := func(ids []int32, rows [][]float64) {
		key := fmt.Sprint(ids)
		if seen[key] {
			return
		}
		seen[key] = true
		in.Lens = append(in.Lens, len(ids))
		in.IDs = append(in.IDs, ids...)
		in.Seq = max(in.Seq, len(ids))
		for _, r := range rows {
			logits = append(logits, r...)
		}
	}
	for _, c := range cases {
		switch {
		case c.IDs != nil:
			require.Len(t, c.Logits, len(c.IDs), "a NER case's logits: one row per token")
			add(c.IDs, c.Logits)
		case c.Logits != nil:
			require.Len(t, c.Logits, len(c.PairIDs), "a zero-shot case's logits: one row per pair")
			for i, ids := range c.PairIDs {
				add(ids, c.Logits[i:i+1])
			}
		}
	}
	require.NotEmpty(t, in.Lens, "golden cases with logits")
	in.Batch = len(in.Lens)
	return in, map[string][]float64{"logits": logits}
}

// readLogitsF32 reads testdata/mlm's logits.f32: little-endian float32
// values of the given shape.
func readLogitsF32(t *testing.T, dir string, shape []int) []float64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "logits.f32"))
	require.NoError(t, err)
	n := 1
	for _, d := range shape {
		n *= d
	}
	require.Len(t, b, 4*n, "logits.f32 for shape %v", shape)
	out := make([]float64, n)
	for i := range out {
		out[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])))
	}
	return out
}

func readGolden(t *testing.T, dir string) (*models.Inputs, map[string][]float64) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "golden.json"))
	require.NoError(t, err)
	var g golden
	require.NoError(t, json.Unmarshal(raw, &g))
	if g.Cases != nil {
		return casesInputs(t, g.Cases)
	}
	if g.Inputs != nil {
		g.InputIDs, g.AttentionMask, g.TokenTypeIDs = g.Inputs["input_ids"], g.Inputs["attention_mask"], g.Inputs["token_type_ids"]
	}
	outs := map[string]json.RawMessage{}
	for k, v := range g.Outputs {
		outs[k] = v
	}
	if g.Logits != nil {
		outs["logits"] = g.Logits
	}
	require.NotEmpty(t, g.InputIDs, "golden inputs")
	in := &models.Inputs{Batch: len(g.InputIDs), Seq: len(g.InputIDs[0])}
	for b := range g.InputIDs {
		in.IDs = append(in.IDs, g.InputIDs[b]...)
		in.Mask = append(in.Mask, g.AttentionMask[b]...)
		if g.TokenTypeIDs != nil {
			in.TypeIDs = append(in.TypeIDs, g.TokenTypeIDs[b]...)
		}
	}
	want := map[string][]float64{}
	for k, v := range outs {
		want[k] = flatten(t, v)
	}
	if g.LogitsShape != nil {
		want["logits"] = readLogitsF32(t, dir, g.LogitsShape)
	}
	return in, want
}

// flatten reads a nested JSON array of numbers.
func flatten(t *testing.T, raw json.RawMessage) []float64 {
	var v any
	require.NoError(t, json.Unmarshal(raw, &v))
	var out []float64
	var walk func(any)
	walk = func(x any) {
		switch y := x.(type) {
		case float64:
			out = append(out, y)
		case []any:
			for _, e := range y {
				walk(e)
			}
		default:
			t.Fatalf("unexpected %T in a golden output", x)
		}
	}
	walk(v)
	return out
}

// TestLoadEverySharedCheckpoint opens every shared golden checkpoint,
// committed golden and trained SST-2 model through Load with no family named, checks the family
// and task it picked, and compares the FP32 outputs with the reference's.
func TestLoadEverySharedCheckpoint(t *testing.T) {
	sel := encodertest.Selector(t)
	for _, c := range checkpoints {
		t.Run(c.dir, func(t *testing.T) {
			dir := checkpointDir(t, c.dir)
			p, err := models.Load(context.Background(), dir, models.Options{Selector: sel, Threads: 1})
			require.NoError(t, err)
			defer p.Close()
			m := p
			assert.Equal(t, c.family, m.Family(), "family")
			assert.Equal(t, c.task, m.Task(), "task")
			assert.Len(t, m.Labels(), c.labels, "labels")
			assert.Equal(t, c.tokenizer, p.Tok != nil, "tokenizer loaded")
			assert.Equal(t, models.PrecisionFP32, m.Precision())

			in, want := readGolden(t, dir)
			out, err := m.Forward(context.Background(), in, false)
			require.NoError(t, err)
			got := map[string][]float32{"last_hidden_state": out.Last, "pooler_output": out.PoolerOutput,
				"logits": out.Logits, "start_logits": out.StartLogits, "end_logits": out.EndLogits}
			perToken := map[string]bool{"last_hidden_state": true, "start_logits": true, "end_logits": true,
				"logits": c.task == models.TaskTokenClassification || c.task == models.TaskReplacedTokenDetection ||
					c.task == models.TaskMaskedLM}
			require.NotEmpty(t, want)
			for key, w := range want {
				g, ok := got[key]
				require.True(t, ok, "unknown golden output %q", key)
				require.Len(t, g, len(w), key)
				// Packed inputs (Lens) have no padding: every row counts.
				rows := in.Batch * in.Seq
				if in.Lens != nil {
					rows = len(in.IDs)
				}
				per := len(w) / rows
				maxRef, maxDiff := 0.0, 0.0
				for i := range w {
					if perToken[key] && in.Mask != nil && in.Mask[i/max(per, 1)] == 0 {
						continue
					}
					maxRef = math.Max(maxRef, math.Abs(w[i]))
					maxDiff = math.Max(maxDiff, math.Abs(float64(g[i])-w[i]))
				}
				t.Logf("%s: max |diff| %.3g, relative %.3g", key, maxDiff, maxDiff/maxRef)
				assert.LessOrEqual(t, maxDiff/maxRef, 1e-5, "%s relative to the reference", key)
			}
		})
	}
}

// TestEveryGoldenListed: every model folder committed into the golden
// folders of testdata (golden, mlm, tasks: a config.json beside
// model.safetensors) is in checkpoints, so that the parity test covers
// each golden as it is added. (testdata/sentence holds sentence-transformers
// modules over the shared models.)
func TestEveryGoldenListed(t *testing.T) {
	listed := map[string]bool{}
	for _, c := range checkpoints {
		listed[c.dir] = true
	}
	found := 0
	for _, root := range []string{"testdata/golden", "testdata/mlm", "testdata/tasks"} {
		err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || d.Name() != "model.safetensors" {
				return err
			}
			dir := filepath.ToSlash(filepath.Dir(path))
			if _, err := os.Stat(filepath.Join(dir, "config.json")); err != nil {
				return nil
			}
			found++
			assert.True(t, listed[dir], "%s is a model folder the parity test does not list (checkpoints)", dir)
			return nil
		})
		require.NoError(t, err)
	}
	require.GreaterOrEqual(t, found, 20, "model folders under testdata's golden folders")
}

// writeConfig makes a model folder holding only config.json.
func writeConfig(t *testing.T, cfg map[string]any) string {
	t.Helper()
	dir := t.TempDir()
	raw, err := json.Marshal(cfg)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.json"), raw, 0o644))
	return dir
}

// TestLoadUnsupported: a model_type or architecture Load does not open is
// an error that wraps models.ErrConfig and names what it got and what is
// supported.
func TestLoadUnsupported(t *testing.T) {
	sel := encodertest.Selector(t)
	base := map[string]any{"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 128,
		"hidden_act": "gelu", "max_position_embeddings": 128, "type_vocab_size": 2, "vocab_size": 1000}
	with := func(kv ...any) map[string]any {
		c := map[string]any{}
		for k, v := range base {
			c[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			c[kv[i].(string)] = kv[i+1]
		}
		return c
	}
	for _, c := range []struct {
		name string
		cfg  map[string]any
		want []string
	}{
		{"unknown model_type", with("model_type", "gpt2", "architectures", []string{"GPT2LMHeadModel"}),
			[]string{`"gpt2"`, "bert, distilbert, xlm-roberta, roberta", "BertForSequenceClassification", "XLMRobertaForQuestionAnswering"}},
		{"unsupported head", with("model_type", "bert", "architectures", []string{"BertForPreTraining"}),
			[]string{"BertForPreTraining", "BertModel, BertForSequenceClassification, BertForQuestionAnswering, BertForMaskedLM"}},
		{"another family's class", with("model_type", "bert", "architectures", []string{"DistilBertModel"}),
			[]string{"DistilBertModel", "BertModel"}},
		{"no model_type, unknown architecture", with("architectures", []string{"T5Model"}),
			[]string{"T5Model", "DistilBertForSequenceClassification"}},
		{"neither", with(), []string{"neither", "BertModel"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := models.Load(context.Background(), writeConfig(t, c.cfg), models.Options{Selector: sel})
			if p != nil {
				p.Close()
			}
			require.Error(t, err)
			t.Log(err)
			assert.ErrorIs(t, err, models.ErrConfig)
			for _, w := range c.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

// copyModel copies the shared folder rel's config.json (edited by edit)
// and weights to a new folder.
func copyModel(t *testing.T, rel string, edit func(cfg map[string]any)) string {
	t.Helper()
	src := shared(t, rel)
	raw, err := os.ReadFile(filepath.Join(src, "config.json"))
	require.NoError(t, err)
	var cfg map[string]any
	require.NoError(t, json.Unmarshal(raw, &cfg))
	edit(cfg)
	dir := writeConfig(t, cfg)
	w, err := os.ReadFile(filepath.Join(src, "model.safetensors"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "model.safetensors"), w, 0o644))
	return dir
}

// TestLoadArchitectureAndWeights: the task config.json names must be the
// head the weights hold; without architectures the weights decide, and
// without model_type the architecture names the family.
func TestLoadArchitectureAndWeights(t *testing.T) {
	sel := encodertest.Selector(t)
	ctx := context.Background()
	for _, arch := range []string{"BertModel", "BertForQuestionAnswering"} {
		dir := copyModel(t, "golden/models/bert-seqcls", func(c map[string]any) { c["architectures"] = []string{arch} })
		_, err := models.Load(ctx, dir, models.Options{Selector: sel})
		require.Error(t, err, arch)
		t.Log(err)
		assert.ErrorIs(t, err, models.ErrConfig)
		assert.Contains(t, err.Error(), arch)
		assert.Contains(t, err.Error(), "BertForSequenceClassification")
	}

	dir := copyModel(t, "golden/models/bert-qa", func(c map[string]any) { delete(c, "architectures") })
	p, err := models.Load(ctx, dir, models.Options{Selector: sel})
	require.NoError(t, err)
	assert.Equal(t, models.TaskQuestionAnswering, p.Task(), "task from the weights")
	p.Close()

	dir = copyModel(t, "golden/models/xlm-roberta-seqcls", func(c map[string]any) { delete(c, "model_type") })
	p, err = models.Load(ctx, dir, models.Options{Selector: sel})
	require.NoError(t, err)
	assert.Equal(t, "xlm-roberta", p.Family(), "family from the architecture")
	assert.Equal(t, models.TaskSequenceClassification, p.Task())
	p.Close()
}

// TestLoadOptions: precision, calibration and max length are options of
// Load, checked at load.
func TestLoadOptions(t *testing.T) {
	sel := encodertest.Selector(t)
	ctx := context.Background()
	dir := shared(t, "golden/models/bert-seqcls")
	in, _ := readGolden(t, dir)

	p, err := models.Load(ctx, dir, models.Options{Selector: sel, Precision: models.PrecisionInt8Dynamic})
	require.NoError(t, err, "int8-dynamic without calibration data")
	assert.Equal(t, models.PrecisionInt8Dynamic, p.Precision())
	assert.Equal(t, dir, p.Recipe().Source)
	p.Close()

	_, err = models.Load(ctx, dir, models.Options{Selector: sel, Precision: models.PrecisionInt8Static})
	require.Error(t, err)
	assert.ErrorIs(t, err, smoothquant.ErrCalibration)
	assert.Contains(t, err.Error(), "Options.Calib")

	p, err = models.Load(ctx, dir, models.Options{Selector: sel, Precision: models.PrecisionInt8Static, CalibInputs: []*models.Inputs{in}})
	require.NoError(t, err, "int8-static on token batches")
	assert.Equal(t, models.PrecisionInt8Static, p.Precision())
	_, err = p.Forward(context.Background(), in, false)
	require.NoError(t, err)
	p.Close()

	// Calibration texts and text methods need a tokenizer, which the
	// golden folder lacks.
	_, err = models.Load(ctx, dir, models.Options{Selector: sel, Precision: models.PrecisionInt8Static, Calib: []string{"a text"}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no tokenizer")
	p, err = models.Load(ctx, dir, models.Options{Selector: sel})
	require.NoError(t, err)
	_, err = p.Classify(ctx, []string{"a text"}, models.ClassifyOptions{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no tokenizer")
	assert.Equal(t, 128, p.MaxLength(), "the model's longest sequence")
	p.Close()

	for _, n := range []int{-1, 129} {
		_, err = models.Load(ctx, dir, models.Options{Selector: sel, MaxLength: n})
		require.Error(t, err, "max length %d", n)
		assert.ErrorIs(t, err, models.ErrConfig)
	}
}

// TestEmbedOptions: Embed pools and normalises as its options say.
func TestEmbedOptions(t *testing.T) {
	p, err := models.Load(context.Background(), shared(t, "models/sst2-bert-mini"),
		models.Options{Selector: encodertest.Selector(t), MaxLength: 32})
	require.NoError(t, err)
	defer p.Close()
	assert.Equal(t, 32, p.MaxLength())
	texts := []string{"a charming movie", "the plot is thin and the acting is worse"}
	ctx := context.Background()
	for _, pool := range []models.Pooling{models.PoolMean, models.PoolCLS} {
		raw, err := p.Embed(ctx, texts, models.EmbedOptions{Pool: pool})
		require.NoError(t, err)
		unit, err := p.Embed(ctx, texts, models.EmbedOptions{Pool: pool, Normalize: true})
		require.NoError(t, err)
		require.Len(t, unit, len(texts))
		for i := range unit {
			var n, dot float64
			for j, v := range unit[i] {
				n += float64(v) * float64(v)
				dot += float64(v) * float64(raw[i][j])
			}
			assert.InDelta(t, 1, n, 1e-5, "pool %d text %d: unit norm", pool, i)
			assert.Greater(t, dot, 0.0, "pool %d text %d: same direction", pool, i)
		}
	}
	// Pooling is a set of modes: a bit that is none is refused.
	_, err = p.Embed(ctx, texts, models.EmbedOptions{Pool: models.Pooling(1 << 20)})
	require.Error(t, err)
	assert.ErrorIs(t, err, models.ErrInput)
}
