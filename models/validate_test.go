package models_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/int8bert/int8bert/models"
	"github.com/int8bert/int8bert/models/encoder"
	"github.com/int8bert/int8bert/models/encoder/encodertest"
	"github.com/int8bert/int8bert/selector"
	"github.com/int8bert/int8bert/smoothquant"
	"github.com/int8bert/int8bert/tokenizer"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// withVocab copies the shared model folder rel (config.json and weights)
// to a new folder with a BERT vocab.txt of n tokens.
func withVocab(t *testing.T, rel string, n int) string {
	t.Helper()
	dir := copyModel(t, rel, func(map[string]any) {})
	var b strings.Builder
	for _, s := range []string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"} {
		b.WriteString(s + "\n")
	}
	for i := 5; i < n; i++ {
		fmt.Fprintf(&b, "w%d\n", i)
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "vocab.txt"), []byte(b.String()), 0o644))
	return dir
}

// TestLoadOptionDomains: every option outside its domain is an error
// wrapping ErrConfig that names the value and the domain (Threads -1 and
// Precision(42) used to load; zero values are the defaults).
func TestLoadOptionDomains(t *testing.T) {
	sel := encodertest.Selector(t)
	ctx := context.Background()
	dir := shared(t, "golden/models/bert-seqcls")
	cpus := runtime.NumCPU()
	for _, c := range []struct {
		name  string
		o     models.Options
		words []string
	}{
		{"negative threads", models.Options{Threads: -1}, []string{"Threads -1", fmt.Sprintf("1 to %d", cpus)}},
		{"more threads than CPUs", models.Options{Threads: cpus + 1}, []string{fmt.Sprintf("Threads %d", cpus+1), fmt.Sprintf("1 to %d", cpus)}},
		{"threads 1000", models.Options{Threads: 1000}, []string{"Threads 1000"}},
		{"negative max length", models.Options{MaxLength: -1}, []string{"MaxLength -1", "want 0"}},
		{"max length past the model", models.Options{MaxLength: 129}, []string{"MaxLength 129", "128"}},
		{"precision 42", models.Options{Precision: models.Precision(42)}, []string{"Precision(42)", "PrecisionInt8Dynamic"}},
		{"negative quantize threads", models.Options{Precision: models.PrecisionInt8Dynamic, Quant: models.QuantizeOptions{Options: smoothquant.Options{Threads: -2}}},
			[]string{"Threads -2"}},
		{"negative sample rows", models.Options{Precision: models.PrecisionInt8Dynamic, Quant: models.QuantizeOptions{SampleRows: -1}},
			[]string{"SampleRows -1"}},
		{"negative calibration batch", models.Options{Precision: models.PrecisionInt8Dynamic, Quant: models.QuantizeOptions{BatchSize: -8}},
			[]string{"BatchSize -8"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.o.Selector = sel
			p, err := models.Load(ctx, dir, c.o)
			if p != nil {
				p.Close()
			}
			require.Error(t, err)
			t.Log(err)
			assert.ErrorIs(t, err, models.ErrConfig)
			for _, w := range c.words {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
	for _, o := range []models.Options{{}, {Threads: 1}, {Threads: cpus}, {MaxLength: 128}, {Precision: models.PrecisionFP32}} {
		o.Selector = sel
		p, err := models.Load(ctx, dir, o)
		require.NoError(t, err, "%+v", o)
		p.Close()
	}
}

// TestMaxLengthLeavesRoomForText: a MaxLength the tokenizer's special
// tokens fill is refused at load, not at the first call.
func TestMaxLengthLeavesRoomForText(t *testing.T) {
	sel := encodertest.Selector(t)
	dir := withVocab(t, "golden/models/bert-seqcls", 1000)
	_, err := models.Load(context.Background(), dir, models.Options{Selector: sel, MaxLength: 2})
	require.Error(t, err)
	t.Log(err)
	assert.ErrorIs(t, err, models.ErrConfig)
	assert.Contains(t, err.Error(), "MaxLength 2")
	assert.Contains(t, err.Error(), "2 special tokens")
	p, err := models.Load(context.Background(), dir, models.Options{Selector: sel, MaxLength: 3})
	require.NoError(t, err)
	_, err = p.Classify(context.Background(), []string{"w7 w8 w9"}, models.ClassifyOptions{})
	assert.NoError(t, err)
	p.Close()
}

// TestTokenizerVocabCheckedAtLoad: a tokenizer with ids past the model's
// embedding table is a load error naming both sizes (it used to load and
// fail on the first text holding such a token).
func TestTokenizerVocabCheckedAtLoad(t *testing.T) {
	sel := encodertest.Selector(t)
	_, err := models.Load(context.Background(), withVocab(t, "golden/models/bert-seqcls", 1001), models.Options{Selector: sel})
	require.Error(t, err)
	t.Log(err)
	assert.ErrorIs(t, err, models.ErrConfig)
	assert.Contains(t, err.Error(), "ids 0 to 1000")
	assert.Contains(t, err.Error(), "1000 rows")
	p, err := models.Load(context.Background(), withVocab(t, "golden/models/bert-seqcls", 1000), models.Options{Selector: sel})
	require.NoError(t, err, "a tokenizer as large as the table")
	p.Close()
}

// TestQuantizeOptionsZeroIsDefaults: a zero QuantizeOptions quantizes at
// the documented alpha 0.5 (it used to mean alpha 0); AlphaSet asks for
// alpha 0 itself.
func TestQuantizeOptionsZeroIsDefaults(t *testing.T) {
	sel := encodertest.Selector(t)
	dir := shared(t, "golden/models/bert-seqcls")
	in, _ := readGolden(t, dir)
	for _, c := range []struct {
		q    models.QuantizeOptions
		want float64
	}{
		{models.QuantizeOptions{}, 0.5},
		{models.QuantizeOptions{Options: smoothquant.Options{Alpha: 0, AlphaSet: true}}, 0},
		{models.QuantizeOptions{Options: smoothquant.Options{Alpha: 0.75}}, 0.75},
	} {
		p, err := models.Load(context.Background(), dir, models.Options{Selector: sel, Precision: models.PrecisionInt8Static,
			CalibInputs: []*models.Inputs{in}, Quant: c.q})
		require.NoError(t, err)
		r := p.Recipe()
		assert.Equal(t, fmt.Sprint(c.want), r.Alpha, "%+v", c.q)
		for _, l := range r.Layers {
			if !strings.HasSuffix(l.Name, "ffn2") { // FFN2 is not smoothed in static mode
				assert.Equal(t, c.want, l.Alpha, "%s", l.Name)
			}
		}
		p.Close()
	}
}

// failingHub points the Hugging Face endpoint at a server that fails the
// test on any request, with an empty cache and online mode.
func failingHub(t *testing.T) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("the hub was asked for %s", r.URL)
		http.Error(w, "no", http.StatusNotFound)
	}))
	t.Cleanup(srv.Close)
	t.Setenv("HF_ENDPOINT", srv.URL)
	t.Setenv("HF_HUB_CACHE", t.TempDir())
	t.Setenv("HF_HUB_OFFLINE", "")
}

// TestMissingFilesAreNotExist: a missing model folder, config.json or
// weights file wraps fs.ErrNotExist as well as ErrConfig, and a path is
// never looked up on the hub (a file, ./x, ../x, /x, and a/b whose a is a
// local folder).
func TestMissingFilesAreNotExist(t *testing.T) {
	failingHub(t)
	sel := encodertest.Selector(t)
	ctx := context.Background()
	root := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(root, "assets"), 0o755))
	file := filepath.Join(root, "model.safetensors")
	require.NoError(t, os.WriteFile(file, []byte("x"), 0o644))
	noWeights := writeConfig(t, map[string]any{"model_type": "bert", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
		"intermediate_size": 128, "hidden_act": "gelu", "max_position_embeddings": 128, "type_vocab_size": 2, "vocab_size": 1000})
	t.Chdir(root)
	for _, c := range []struct {
		path     string
		notExist bool
		words    string
	}{
		{"./no-such-model", true, "no such model folder"},
		{"../no-such-model", true, "no such model folder"},
		{filepath.Join(root, "no-such-model"), true, "no such model folder"},
		{"assets/sst2-xlmr-mini", true, "no such model folder"},
		{"model.safetensors", false, "is a file"},
		{t.TempDir(), true, "config.json"},
		{noWeights, true, "model.safetensors"},
	} {
		p, err := models.Load(ctx, c.path, models.Options{Selector: sel})
		if p != nil {
			p.Close()
		}
		require.Error(t, err, c.path)
		t.Log(err)
		assert.ErrorIs(t, err, models.ErrConfig, c.path)
		assert.Equal(t, c.notExist, errors.Is(err, fs.ErrNotExist), "%s: %v", c.path, err)
		assert.Contains(t, err.Error(), c.words)
	}
}

// TestTextErrorsWrapErrInput: a text the tokenizer refuses is bad input
// (ErrInput), from every text method.
func TestTextErrorsWrapErrInput(t *testing.T) {
	sel := encodertest.Selector(t)
	p, err := models.Load(context.Background(), withVocab(t, "golden/models/bert-seqcls", 1000), models.Options{Selector: sel})
	require.NoError(t, err)
	defer p.Close()
	ctx := context.Background()
	bad := "w5 \xff w6"
	_, err = p.Classify(ctx, []string{"w5", bad}, models.ClassifyOptions{})
	require.Error(t, err)
	assert.ErrorIs(t, err, models.ErrInput)
	assert.Contains(t, err.Error(), "UTF-8")
	_, err = p.Embed(ctx, []string{bad}, models.EmbedOptions{})
	assert.ErrorIs(t, err, models.ErrInput)
	_, err = p.ClassifyPairs(ctx, []tokenizer.Pair{{A: "w5", B: bad}}, models.ClassifyOptions{})
	assert.ErrorIs(t, err, models.ErrInput)
}

// TestMessagesUseDisplayNames: errors name the family as users know it
// ("XLM-RoBERTa") and the Hugging Face class, not the internal
// "xlm-robertaForSequenceClassification".
func TestMessagesUseDisplayNames(t *testing.T) {
	sel := encodertest.Selector(t)
	p, err := models.Load(context.Background(), shared(t, "golden/models/xlm-roberta-seqcls"), models.Options{Selector: sel})
	require.NoError(t, err)
	defer p.Close()
	_, err = p.Answer(context.Background(), "who?", "someone", models.QAOptions{})
	require.Error(t, err)
	t.Log(err)
	assert.Contains(t, err.Error(), "XLM-RoBERTa")
	assert.Contains(t, err.Error(), "XLMRobertaForSequenceClassification")
	assert.NotContains(t, err.Error(), "xlm-robertaFor")
	assert.NotContains(t, err.Error(), "bench:")
}

// TestSavedFilesAreReadable: Save writes the artifact and the files it
// copies with mode 0644 (it used to leave the artifact 0600).
func TestSavedFilesAreReadable(t *testing.T) {
	sel := encodertest.Selector(t)
	p, err := models.Load(context.Background(), withVocab(t, "golden/models/bert-seqcls", 1000),
		models.Options{Selector: sel, Precision: models.PrecisionInt8Dynamic})
	require.NoError(t, err)
	defer p.Close()
	dir := filepath.Join(t.TempDir(), "int8")
	require.NoError(t, p.Save(dir))
	for _, f := range []string{encoder.ArtifactFile, "config.json", "vocab.txt"} {
		st, err := os.Stat(filepath.Join(dir, f))
		require.NoError(t, err)
		assert.Equal(t, fs.FileMode(0o644), st.Mode().Perm(), f)
	}
}

// TestLibraryIsSilent: the library writes nothing to stderr; the notes of
// the process-wide selector (here: a corrupt tuning cache) go to
// Options.Logger, and a selector made with no Warn discards its own. It runs in a child process, where the process-wide
// selector is made after the cache is corrupted.
func TestLibraryIsSilent(t *testing.T) {
	dir := shared(t, "golden/models/bert-seqcls")
	if os.Getenv("INT8BERT_SILENT_CHILD") == "1" {
		var logs bytes.Buffer
		p, err := models.Load(context.Background(), dir, models.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		require.NoError(t, err)
		// One process-wide selector: the loaders' is selector.Default.
		def, err := selector.Default()
		require.NoError(t, err)
		require.Same(t, def, p.Selector())
		p.Close()
		require.Contains(t, logs.String(), "level=WARN")
		require.Contains(t, logs.String(), "component=selector")
		// A selector made directly, with no Warn, is silent too.
		sel, err := selector.New(selector.Options{CachePath: os.Getenv("INT8BERT_TUNING_CACHE")})
		require.NoError(t, err)
		require.NoError(t, sel.Close())
		return
	}
	cache := filepath.Join(t.TempDir(), "tuning.json")
	require.NoError(t, os.WriteFile(cache, []byte("{corrupt"), 0o644))
	cmd := exec.Command(os.Args[0], "-test.run=^TestLibraryIsSilent$", "-test.v")
	cmd.Env = append(os.Environ(), "INT8BERT_SILENT_CHILD=1", "INT8BERT_TUNING_CACHE="+cache)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "child:\n%s\n%s", stdout.String(), stderr.String())
	assert.Contains(t, stdout.String(), "--- PASS: TestLibraryIsSilent")
	assert.Empty(t, stderr.String(), "the library wrote to stderr")
}
