package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/int8bert/int8bert/cpu"
	"github.com/int8bert/int8bert/models"
	"github.com/int8bert/int8bert/selector"
	"github.com/int8bert/int8bert/tokenizer"
)

// noHub points the Hugging Face endpoint at a server that fails the test
// on any request (online mode, empty cache).
func noHub(t *testing.T) {
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

// taskCLI runs classify, embed or qa with stdin and returns stdout's
// lines and the error.
func taskCLI(t *testing.T, stdin string, args ...string) ([]string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	err := runTask(context.Background(), args[0], args[1:], strings.NewReader(stdin), &out, &errb)
	t.Logf("%v: %v\nstderr: %s", args, err, errb.String())
	s := strings.TrimSpace(out.String())
	if s == "" {
		return nil, err
	}
	return strings.Split(s, "\n"), err
}

// TestThreadsFlagDomain: --threads takes 1 to the number of CPUs in every
// command; 0, -1 and 1000 are errors naming the value and the domain
// (they used to be accepted), checked before the model is opened.
func TestThreadsFlagDomain(t *testing.T) {
	noHub(t)
	cpus := runtime.NumCPU()
	for _, cmd := range [][]string{
		{"classify", "--model", "./m", "x"}, {"embed", "--model", "./m", "x"}, {"qa", "--model", "./m", "--question", "q", "x"},
		{"quantize", "--model", "./m", "-o", "./o", "--mode", "dynamic"}, {"forward", "--model", "./m", "--inputs", "./i.json"},
		{"eval", "--model", "./m", "--data", "./d.tsv"}, {"demo", "--model", "./m"},
		{"bench", "model", "--arch", "bert-base"}, {"bench", "gemm"}, {"tune"},
	} {
		for _, n := range []int{0, -1, 1000, cpus + 1} {
			args := append(append([]string(nil), cmd...), "--threads", fmt.Sprint(n))
			if cmd[0] == "classify" || cmd[0] == "embed" || cmd[0] == "qa" {
				args = append(append(append([]string(nil), cmd[:len(cmd)-1]...), "--threads", fmt.Sprint(n)), cmd[len(cmd)-1])
			}
			_, _, err := cli(t, args...)
			require.Error(t, err, "%v", args)
			assert.Contains(t, err.Error(), fmt.Sprintf("--threads %d: want 1 to %d", n, cpus), "%v", args)
		}
	}
}

// TestMaxLengthFlagDomain: --max-length, when given, is a positive number
// of tokens (0 and -1 used to be accepted); left out, the model's.
func TestMaxLengthFlagDomain(t *testing.T) {
	noHub(t)
	for _, n := range []string{"0", "-1"} {
		for _, cmd := range [][]string{{"classify", "--model", "./m", "--max-length", n, "x"}, {"eval", "--model", "./m", "--data", "./d", "--max-length", n}} {
			_, _, err := cli(t, cmd...)
			require.Error(t, err)
			if n == "0" {
				assert.Contains(t, err.Error(), "--max-length 0: want a positive number of tokens")
			} else {
				assert.Contains(t, err.Error(), "--max-length -1 is negative") // every flag's (parseFlags)
			}
		}
	}
}

// TestFlagsAfterTexts: a flag after the texts is refused with a hint (it
// used to be classified as a text); after "--" a text may start with "-".
func TestFlagsAfterTexts(t *testing.T) {
	noHub(t)
	for _, args := range [][]string{
		{"classify", "--model", "./m", "a text", "--threads", "2"},
		{"classify", "--model", "./m", "a text", "-threads=2"},
		{"embed", "--model", "./m", "a text", "--pooling", "cls"},
		{"qa", "--model", "./m", "a context", "--question", "who?"},
	} {
		_, err := taskCLI(t, "", args...)
		require.Error(t, err, "%v", args)
		assert.Contains(t, err.Error(), "flags go before the texts")
	}
	_, _, err := cli(t, "quantize", "--model", "./m", "-o", "./o", "extra", "--alpha", "0.5")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "flags go before the texts")

	fastKernels(t)
	model := tinyModel(t, "distilbert-seqcls")
	lines, err := taskCLI(t, "", "classify", "--model", model, "--", "-threads", "the cat sat")
	require.NoError(t, err, "after --, texts that look like flags")
	require.Len(t, lines, 2)
	assert.Contains(t, lines[0], `"text":"-threads"`)
	lines, err = taskCLI(t, "", "classify", "--model", model, "the dog", "-5 degrees")
	require.NoError(t, err, "a text starting with - that names no flag")
	assert.Len(t, lines, 2)
}

// TestBlankLinesKeepTheirPlace: blank input lines get an object of their
// own, so that output line i is input line i (they used to be dropped).
func TestBlankLinesKeepTheirPlace(t *testing.T) {
	fastKernels(t)
	model := tinyModel(t, "distilbert-seqcls")
	for _, task := range []string{"classify", "embed"} {
		lines, err := taskCLI(t, "the cat sat\n\n  \nthe dog ran\r\n", task, "--model", model, "--batch", "2")
		require.NoError(t, err)
		require.Len(t, lines, 4, task)
		for i, want := range []string{"the cat sat", "", "  ", "the dog ran"} {
			var o map[string]any
			require.NoError(t, json.Unmarshal([]byte(lines[i]), &o))
			assert.Equal(t, want, o["text"], "%s line %d", task, i+1)
			if strings.TrimSpace(want) == "" {
				assert.Equal(t, "blank line", o["error"])
				assert.Equal(t, float64(i+1), o["line"])
			} else {
				assert.NotContains(t, o, "error")
			}
		}
	}
	lines, err := taskCLI(t, "the cat\n\n", "qa", "--model", tinyModel(t, "distilbert-qa"), "--question", "who?")
	require.NoError(t, err)
	require.Len(t, lines, 2)
	assert.Contains(t, lines[1], `"error":"blank line"`)
}

// TestInvalidLine: a line the model refuses (invalid UTF-8) is an error
// naming its line, or with --lenient an error object on its line while
// the others are classified.
func TestInvalidLine(t *testing.T) {
	fastKernels(t)
	model := tinyModel(t, "distilbert-seqcls")
	stdin := "the cat sat\nthe \xff dog\nthe dog ran\n"
	_, err := taskCLI(t, stdin, "classify", "--model", model)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "line 2")
	assert.Contains(t, err.Error(), "UTF-8")
	assert.Contains(t, err.Error(), "--lenient")
	lines, err := taskCLI(t, stdin, "classify", "--model", model, "--lenient")
	require.NoError(t, err)
	require.Len(t, lines, 3)
	var bad map[string]any
	require.NoError(t, json.Unmarshal([]byte(lines[1]), &bad))
	assert.Equal(t, float64(2), bad["line"])
	assert.Contains(t, bad["error"], "UTF-8")
	for _, i := range []int{0, 2} {
		assert.Contains(t, lines[i], `"label"`)
	}
}

// TestInfoModel: info --model prints the family, task, precision, recipe
// and tuning state of an INT8 artifact and of an FP32 folder.
func TestInfoModel(t *testing.T) {
	fastKernels(t)
	model := tinyModel(t, "distilbert-seqcls")
	dir := filepath.Join(t.TempDir(), "int8")
	mustCLI(t, "quantize", "--model", model, "--calib", tinyCalib(t, 16), "--mode", "static", "-o", dir)
	out := mustCLI(t, "info", "--model", dir)
	t.Log(out)
	for _, w := range []string{"family:    DistilBERT (distilbert)", "DistilBertForSequenceClassification", "precision: int8-static",
		"mode static, alpha 0.5", "0.5 on 6", "0 on 2", "calibration: 16 texts", "sha256 ", "tuning:    cache off"} {
		assert.Contains(t, out, w)
	}
	var r modelReport
	require.NoError(t, json.Unmarshal([]byte(mustCLI(t, "info", "--model", dir, "-json")), &r))
	assert.Equal(t, "DistilBERT", r.Family)
	assert.Equal(t, "int8-static", r.Precision)
	require.NotNil(t, r.Recipe)
	assert.Equal(t, 8, r.Recipe.Linears)
	assert.Len(t, r.Recipe.CalibHash, 64)
	assert.Equal(t, "off", r.Tuning.State)
	here := selector.DescribeInt8(cpu.X86)
	assert.Equal(t, here.Tier, r.Int8Here.Tier)
	assert.Contains(t, out, "int8 here: "+here.Tier+" tier: "+here.Scheme)

	t.Setenv("INT8BERT_KERNEL", "")
	cache := filepath.Join(t.TempDir(), "tuning.json")
	t.Setenv("INT8BERT_TUNING_CACHE", cache)
	out = mustCLI(t, "info", "--model", model)
	assert.Contains(t, out, "recipe:    none")
	assert.Contains(t, out, "no cache yet at "+cache)
	mustCLI(t, "classify", "--model", model, "the cat sat")
	require.NoError(t, json.Unmarshal([]byte(mustCLI(t, "info", "--model", model, "-json")), &r))
	assert.Equal(t, "valid", r.Tuning.State)
	assert.Equal(t, "f32", r.Tuning.Op)
	assert.Positive(t, r.Tuning.Entries, "classify tuned the model's linears")
	assert.Equal(t, "f32", r.Tuning.Attention)
	assert.Equal(t, selector.OpF32Kernel, r.Tuning.AttnOp)

	// The artifact's kernels: every linear and both attention products,
	// by row class, once a call has tuned them.
	mustCLI(t, "classify", "--model", dir, "the cat sat on the mat")
	r = modelReport{}
	require.NoError(t, json.Unmarshal([]byte(mustCLI(t, "info", "--model", dir, "-json")), &r))
	parts := map[string]bool{}
	for _, k := range r.Tuning.Kernels {
		parts[k.Part] = true
		assert.NotEmpty(t, k.Kernel, "%+v", k)
		assert.Positive(t, k.M, "%+v", k)
	}
	want := []string{"qkv", "o", "ffn1", "ffn2"}
	if r.Tuning.Attention == "int8" {
		assert.Equal(t, selector.OpU8S8Kernel, r.Tuning.AttnOp)
		want = append(want, "attention scores", "attention context")
	}
	for _, p := range want {
		assert.True(t, parts[p], "no kernel listed for %s: %+v", p, r.Tuning.Kernels)
	}
	out = mustCLI(t, "info", "--model", dir)
	assert.Contains(t, out, "attention: "+r.Tuning.Attention+" ("+r.Tuning.AttnOp+")")
	assert.Regexp(t, `kernels:   qkv \([^)]*\): m[0-9]+ gemm`, out)
}

// TestInfoModelMPNet: info --model names the MPNet family and head of the
// committed golden checkpoint, FP32 and quantized.
func TestInfoModelMPNet(t *testing.T) {
	fastKernels(t)
	model := filepath.Join("..", "..", "models", "testdata", "golden", "mpnet-seqcls")
	// MPNet is no BERT-type model for TEI: without a sentence-transformers
	// pooling it has none of its own (it printed "pooling default (), 0
	// values").
	for _, w := range []string{"family:    MPNet (mpnet)", "MPNetForSequenceClassification", "precision: fp32",
		"embedding: no pooling of its own", "need --pooling"} {
		assert.Contains(t, mustCLI(t, "info", "--model", model), w)
	}
	dir := filepath.Join(t.TempDir(), "int8")
	mustCLI(t, "quantize", "--model", model, "--mode", "dynamic", "-o", dir)
	out := mustCLI(t, "info", "--model", dir)
	for _, w := range []string{"family:    MPNet (mpnet)", "MPNetForSequenceClassification", "precision: int8-dynamic"} {
		assert.Contains(t, out, w)
	}
}

// TestQuantizeWritesReadableFiles: the artifact folder's files are 0644
// (the artifact used to be 0600).
func TestQuantizeWritesReadableFiles(t *testing.T) {
	fastKernels(t)
	dir := filepath.Join(t.TempDir(), "int8")
	mustCLI(t, "quantize", "--model", tinyModel(t, "distilbert-seqcls"), "--mode", "dynamic", "-o", dir)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.NotEmpty(t, entries)
	for _, e := range entries {
		st, err := os.Stat(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		assert.Equal(t, fs.FileMode(0o644), st.Mode().Perm(), e.Name())
	}
}

// TestPathsNeverGoToTheHub: a --model that looks like a path, and the
// demo's shipped model outside the repository root, are "no such folder"
// errors; the hub is never asked (it used to be).
func TestPathsNeverGoToTheHub(t *testing.T) {
	noHub(t)
	root := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(root, "models"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "config.json"), []byte("{}"), 0o644))
	t.Chdir(root)
	for _, c := range []struct{ model, want string }{
		{"./missing", "no such model folder ./missing"},
		{"../missing", "no such model folder ../missing"},
		{"/missing/model", "no such model folder /missing/model"},
		{"models/missing", "no such model folder models/missing"},
		{"config.json", "config.json is a file, not a model folder"},
	} {
		_, err := taskCLI(t, "", "classify", "--model", c.model, "x")
		require.Error(t, err)
		assert.Contains(t, err.Error(), c.want)
		_, _, err = cli(t, "quantize", "--model", c.model, "--mode", "dynamic", "-o", "./out")
		require.Error(t, err)
		assert.Contains(t, err.Error(), c.want)
	}
	_, _, err := cli(t, "demo")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "run the demo from the repository root")
	assert.Contains(t, err.Error(), "assets/sst2-xlmr-mini")
}

// TestLibraryNotesGoToStderrLog: the library's warnings reach the
// command's stderr through its logger (they used to be printed by the
// library itself, bypassing the command's stderr).
func TestLibraryNotesGoToStderrLog(t *testing.T) {
	fastKernels(t)
	cache := filepath.Join(t.TempDir(), "tuning.json")
	require.NoError(t, os.WriteFile(cache, []byte("{corrupt"), 0o644))
	t.Setenv("INT8BERT_TUNING_CACHE", cache)
	t.Setenv("INT8BERT_KERNEL", "")
	var out, errb bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"classify", "--model", tinyModel(t, "distilbert-seqcls"), "the cat"}, &out, &errb))
	assert.Contains(t, errb.String(), "level=WARN")
	assert.Contains(t, errb.String(), "component=selector")
	assert.Contains(t, errb.String(), "tuning.json")
}

// TestMaxBatchTokensFlag: --max-batch-tokens reaches the library's
// micro-batcher (a budget of one short text per pass gives the results of
// the default budget, in input order), and a value outside its domain is
// an error naming it.
func TestMaxBatchTokensFlag(t *testing.T) {
	fastKernels(t)
	model := tinyModel(t, "distilbert-seqcls")
	in := "a long sentence about a cat that sat on a mat all day\nshort\nthe dog ran far away\n"
	want, err := taskCLI(t, in, "classify", "--model", model, "--logits")
	require.NoError(t, err)
	got, err := taskCLI(t, in, "classify", "--model", model, "--logits", "--max-batch-tokens", "8", "--batch", "2")
	require.NoError(t, err)
	require.Len(t, got, 3)
	for i := range want {
		var w, g map[string]any
		require.NoError(t, json.Unmarshal([]byte(want[i]), &w))
		require.NoError(t, json.Unmarshal([]byte(got[i]), &g))
		assert.Equal(t, w["text"], g["text"], "line %d", i+1)
		assert.InDeltaSlice(t, w["logits"], g["logits"], 1e-4, "line %d", i+1)
	}
	wantCLIError(t, "--max-batch-tokens -1 is negative", "classify", "--model", model, "--max-batch-tokens", "-1", "x")
}

// TestClassifyPairsFlag: classify --pairs reads "A<tab>B" lines and gives
// the library's ClassifyPairs result for each, with both texts; a line
// without a tab is bad input (an error object with --lenient, else an
// error naming the line).
func TestClassifyPairsFlag(t *testing.T) {
	fastKernels(t)
	model := tinyModel(t, "distilbert-seqcls")
	lines, err := taskCLI(t, "the cat sat\ton the mat\nno tab here\n", "classify", "--model", model, "--pairs", "--logits", "--lenient", "--precision", "fp32")
	require.NoError(t, err)
	require.Len(t, lines, 2)
	var o map[string]any
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &o))
	assert.Equal(t, "the cat sat", o["text"])
	assert.Equal(t, "on the mat", o["text_pair"])
	p, err := models.Load(context.Background(), model, models.Options{Precision: models.PrecisionFP32})
	require.NoError(t, err)
	defer p.Close()
	want, err := p.ClassifyPairs(context.Background(), []tokenizer.Pair{{A: "the cat sat", B: "on the mat"}}, models.ClassifyOptions{})
	require.NoError(t, err)
	assert.InDeltaSlice(t, want[0].Logits, o["logits"], 1e-4)
	assert.Contains(t, lines[1], `"line":2`)
	assert.Contains(t, lines[1], "no tab")
	_, err = taskCLI(t, "no tab here\n", "classify", "--model", model, "--pairs")
	require.ErrorContains(t, err, "line 1")
	wantCLIError(t, "--pairs is for classify", "embed", "--model", model, "--pairs", "x")
}
