package serve

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/int8bert/int8bert/models"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func tasksModel(name string) string {
	return filepath.Join("..", "models", "testdata", "tasks", name)
}

// TestNERAndZeroShotRoutes: /ner and /zero-shot answer as the library
// does (a text gets one answer, a list a list), with the pipeline's
// options; bad input is a 422 and a model without the head a 424.
func TestNERAndZeroShotRoutes(t *testing.T) {
	_, ts := newServer(t, Config{Models: []ModelSpec{{Name: "ner", Source: tasksModel("bert-ner")},
		{Name: "nli", Source: tasksModel("xlmr-nli")}}})
	ctx := context.Background()
	text := "My name is Wolfgang and I live in Berlin."

	p, err := models.Load(ctx, tasksModel("bert-ner"), models.Options{Selector: loadOptions(t).Selector})
	require.NoError(t, err)
	defer p.Close()
	want, err := p.TokenClassify(ctx, []string{text}, models.TokenClassifyOptions{AggregationStrategy: models.AggregateSimple})
	require.NoError(t, err)
	code, b := post(t, ts, "/ner", `{"inputs": "`+text+`", "aggregation_strategy": "simple", "model": "ner"}`)
	require.Equal(t, 200, code, "%s", b)
	assert.Equal(t, want[0], decode[[]models.Entity](t, b))
	code, b = post(t, ts, "/ner", `{"inputs": ["`+text+`", "Paris"], "ignore_labels": [], "model": "ner"}`)
	require.Equal(t, 200, code, "%s", b)
	all := decode[[][]models.Entity](t, b)
	require.Len(t, all, 2)
	assert.Len(t, all[0], 10, "every token without ignore_labels")

	// With a stride, a text longer than the maximum length (64) is run
	// whole, as the library runs it.
	long := strings.Repeat("Wolfgang and Angela live in Berlin. ", 12)
	stride := 16
	want, err = p.TokenClassify(ctx, []string{long}, models.TokenClassifyOptions{AggregationStrategy: models.AggregateFirst, Stride: &stride})
	require.NoError(t, err)
	trunc, err := p.TokenClassify(ctx, []string{long}, models.TokenClassifyOptions{AggregationStrategy: models.AggregateFirst})
	require.NoError(t, err)
	require.Greater(t, want[0][len(want[0])-1].End, trunc[0][len(trunc[0])-1].End, "the stride reaches past the truncation")
	code, b = post(t, ts, "/ner", `{"inputs": "`+long+`", "aggregation_strategy": "first", "stride": 16, "model": "ner"}`)
	require.Equal(t, 200, code, "%s", b)
	assert.Equal(t, want[0], decode[[]models.Entity](t, b))

	nli, err := models.Load(ctx, tasksModel("xlmr-nli"), models.Options{Selector: loadOptions(t).Selector})
	require.NoError(t, err)
	defer nli.Close()
	zo := models.ZeroShotOptions{CandidateLabels: []string{"sports", "politics"}, MultiLabel: true}
	zw, err := nli.ZeroShot(ctx, []string{text}, zo)
	require.NoError(t, err)
	code, b = post(t, ts, "/zero-shot", `{"inputs": "`+text+`", "candidate_labels": "sports, politics", "multi_label": true, "model": "nli"}`)
	require.Equal(t, 200, code, "%s", b)
	assert.Equal(t, zw[0], decode[models.ZeroShotResult](t, b))
	code, b = post(t, ts, "/zero-shot", `{"inputs": ["a", "b"], "candidate_labels": ["x", "y", "z"], "model": "nli"}`)
	require.Equal(t, 200, code, "%s", b)
	assert.Len(t, decode[[]models.ZeroShotResult](t, b), 2)

	for _, c := range []struct {
		route, body string
		code        int
		msg         string
	}{
		{"/ner", `{"inputs": [], "model": "ner"}`, 422, "`inputs` is required"},
		{"/ner", `{"inputs": "x", "aggregation_strategy": "longest", "model": "ner"}`, 422, "aggregation_strategy"},
		{"/ner", `{"inputs": "x", "model": "nli"}`, 424, "token classification"},
		{"/ner", `{"inputs": "x", "stride": 4, "model": "ner"}`, 422, "aggregation strategy other than none"},
		{"/ner", `{"inputs": "x", "aggregation_strategy": "simple", "stride": 64, "model": "ner"}`, 422, "stride 64"},
		{"/zero-shot", `{"inputs": "x", "candidate_labels": [], "model": "nli"}`, 422, "`candidate_labels` is required"},
		{"/zero-shot", `{"inputs": "x", "candidate_labels": "a", "hypothesis_template": "about", "model": "nli"}`, 422, "no {}"},
		{"/zero-shot", `{"inputs": "x", "candidate_labels": "a", "model": "ner"}`, 424, "NLI"},
	} {
		code, b := post(t, ts, c.route, c.body)
		teiError(t, code, b, c.code, c.msg)
	}
}
