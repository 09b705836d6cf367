package bench_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/int8bert/int8bert/bench"
	"github.com/int8bert/int8bert/models"
	"github.com/int8bert/int8bert/models/encoder/encodertest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestWriteRandomClassifier: the folder loads through the front door as
// a classifier of the architecture's shape, with the tokenizer given.
func TestWriteRandomClassifier(t *testing.T) {
	if testing.Short() {
		t.Skip("writes and loads a random DistilBERT-base (66M weights, over a minute under -race): not in -short")
	}
	dir := t.TempDir()
	require.NoError(t, bench.WriteRandomClassifier(dir, "distilbert", "../tokenizer/testdata/bert-base-uncased"))
	p, err := models.Load(context.Background(), dir, models.Options{Selector: encodertest.Selector(t)})
	require.NoError(t, err)
	defer p.Close()
	assert.Equal(t, models.TaskSequenceClassification, p.Task())
	assert.Equal(t, 768, p.Config().Hidden)
	assert.Equal(t, []string{"negative", "positive"}, p.Labels())
	c, err := p.Classify(context.Background(), []string{"a charming journey"}, models.ClassifyOptions{})
	require.NoError(t, err)
	assert.Len(t, c, 1)
	assert.Error(t, bench.WriteRandomClassifier(filepath.Join(dir, "x"), "no-such-arch", "."))
	assert.Error(t, bench.WriteRandomClassifier(filepath.Join(dir, "y"), "distilbert", t.TempDir()), "no tokenizer")
}
