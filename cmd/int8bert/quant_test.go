package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/int8bert/int8bert/models"
	"github.com/int8bert/int8bert/selector"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sharedPath is rel inside the project's shared folder ($INT8BERT_SHARED,
// else ../../../shared); the test is skipped, saying why, when it is absent.
func sharedPath(t *testing.T, rel string) string {
	t.Helper()
	root := "../../../shared"
	if d := os.Getenv("INT8BERT_SHARED"); d != "" {
		root = d
	}
	p := filepath.Join(root, rel)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("%s not found (the project's shared folder, $INT8BERT_SHARED): %v", rel, err)
	}
	return p
}

// fastKernels turns the tuning cache off and forces the generic kernels:
// with the cache off, every command would otherwise tune each GEMM shape
// of its model anew (seconds per command, far more under -race). The
// kernels and their selection are tested in their own packages; these
// tests are about the commands.
func fastKernels(t *testing.T) {
	t.Setenv("INT8BERT_TUNING_CACHE", "off")
	t.Setenv("INT8BERT_KERNEL", "generic")
}

// testTuningCache keeps the tuning of the test's commands in a cache file
// of its own (hermetic, like INT8BERT_TUNING_CACHE=off), so that the
// trained models' GEMM shapes are tuned by the first command only and not
// again (seconds) by each of the next.
func testTuningCache(t *testing.T) {
	t.Setenv("INT8BERT_TUNING_CACHE", filepath.Join(t.TempDir(), "tuning.json"))
	t.Setenv("INT8BERT_KERNEL", "")
}

// cli runs the command line args through run and returns stdout, stderr
// and the error.
func cli(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	start := time.Now()
	err := run(context.Background(), args, &out, &errb)
	t.Logf("%.2fs %v", time.Since(start).Seconds(), args[:min(len(args), 8)])
	return out.String(), errb.String(), err
}

// mustCLI is cli that fails the test on an error.
func mustCLI(t *testing.T, args ...string) string {
	t.Helper()
	out, errb, err := cli(t, args...)
	if err != nil {
		t.Fatalf("%q: %v\nstderr:\n%s", args, err, errb)
	}
	return out
}

// wantCLIError checks that args fail; every word of want (case-insensitive)
// must be in the error when want is set.
func wantCLIError(t *testing.T, want string, args ...string) {
	t.Helper()
	_, _, err := cli(t, args...)
	if err == nil {
		t.Errorf("%q: no error", args)
		return
	}
	if want != "" && !strings.Contains(strings.ToLower(err.Error()), strings.ToLower(want)) {
		t.Errorf("%q: error %q does not mention %q", args, err, want)
		return
	}
	t.Logf("%q: %v", args, err)
}

// tinyWords are the words of the tiny test vocabulary (tinyModel): every
// text of these tests is made of them.
var tinyWords = strings.Fields(`. , ? ! ' the a an of in on at to and is was who what where when which
	cat dog sat ran mat park garden house red blue green big small old young man woman child
	paris london city capital france england river seine thames movie film great good bad awful
	boring charming fun story actor plays play played loves love hates likes it this that he she
	they john mary tom lives lived lived works doctor teacher book read reads wrote writes year
	1990 2001 morning evening night sun moon sky rain ate apple bread milk`)

// tinyModel is a temporary model folder of a tiny golden model (2 layers,
// hidden 64, vocabulary 1000, random weights; golden/models/<name>) with a
// WordPiece vocab.txt of tinyWords at the ids the model takes, so that text
// commands (quantize, eval, classify, qa) run on it in well under a second.
func tinyModel(t *testing.T, name string) string {
	t.Helper()
	src := sharedPath(t, filepath.Join("golden/models", name))
	dir := t.TempDir()
	for _, f := range []string{"config.json", "model.safetensors"} {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var cfg struct {
		Vocab int `json:"vocab_size"`
	}
	if b, err := os.ReadFile(filepath.Join(src, "config.json")); err != nil || json.Unmarshal(b, &cfg) != nil || cfg.Vocab < 200 {
		t.Fatalf("%s/config.json: vocab_size %d, %v", src, cfg.Vocab, err)
	}
	vocab := make([]string, cfg.Vocab)
	special := map[int]string{0: "[PAD]", 100: "[UNK]", 101: "[CLS]", 102: "[SEP]", 103: "[MASK]"}
	w := 0
	seen := map[string]bool{}
	for i := range vocab {
		if s, ok := special[i]; ok {
			vocab[i] = s
			continue
		}
		for w < len(tinyWords) && seen[tinyWords[w]] {
			w++
		}
		if w < len(tinyWords) {
			vocab[i] = tinyWords[w]
			seen[tinyWords[w]] = true
			w++
		} else {
			vocab[i] = fmt.Sprintf("[unused%d]", i)
		}
	}
	files := map[string]string{
		"vocab.txt":             strings.Join(vocab, "\n") + "\n",
		"tokenizer_config.json": `{"do_lower_case": true, "tokenizer_class": "BertTokenizer", "unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]", "cls_token": "[CLS]", "mask_token": "[MASK]"}`,
	}
	for f, s := range files {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// tinyCalib writes calibration texts of tiny-vocabulary words.
func tinyCalib(t *testing.T, n int) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("sentence\tlabel\n")
	for i := 0; i < n; i++ {
		k := 3 + i%9
		var ws []string
		for j := 0; j < k; j++ {
			ws = append(ws, tinyWords[5+(i*7+j*13)%(len(tinyWords)-5)])
		}
		fmt.Fprintf(&b, "%s .\t%d\n", strings.Join(ws, " "), i%2)
	}
	p := filepath.Join(t.TempDir(), "calib.tsv")
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// quantizeOutput is quantize -json's output.
type quantizeOutput struct {
	Out    string `json:"out"`
	Recipe struct {
		Mode       string `json:"mode"`
		Alpha      string `json:"alpha"`
		Range      string `json:"range"`
		CalibTexts int    `json:"calib_texts"`
		Layers     []struct {
			Name     string   `json:"name"`
			Alpha    float64  `json:"alpha"`
			SQNR     *float64 `json:"sqnr_db"`
			Fallback bool     `json:"fallback"`
		} `json:"layers"`
	} `json:"recipe"`
}

// checkQuantize parses quantize -json output and checks the artifact
// folder and the recipe: mode, one layer per linear (4 per encoder layer of
// model's config), alphas in [0,1].
func checkQuantize(t *testing.T, out, model, dir, mode string) quantizeOutput {
	t.Helper()
	var q quantizeOutput
	if err := json.Unmarshal([]byte(out), &q); err != nil {
		t.Fatalf("quantize -json is not JSON: %v\n%s", err, out)
	}
	if q.Out != dir {
		t.Errorf("out %q, want %q", q.Out, dir)
	}
	if q.Recipe.Mode != mode {
		t.Errorf("recipe.mode %q, want %q", q.Recipe.Mode, mode)
	}
	for _, f := range []string{models.ArtifactFile, "config.json"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("artifact folder: %v", err)
		}
	}
	var cfg struct {
		Layers  int `json:"num_hidden_layers"`
		NLayers int `json:"n_layers"` // DistilBERT
	}
	b, err := os.ReadFile(filepath.Join(model, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	layers := max(cfg.Layers, cfg.NLayers)
	if len(q.Recipe.Layers) != 4*layers {
		t.Errorf("%d layer entries, want 4 per encoder layer (%d layers): %+v", len(q.Recipe.Layers), layers, q.Recipe.Layers)
	}
	names := map[string]bool{}
	for _, l := range q.Recipe.Layers {
		if names[l.Name] {
			t.Errorf("layer %q twice in the recipe", l.Name)
		}
		names[l.Name] = true
		if !(l.Alpha >= 0 && l.Alpha <= 1) {
			t.Errorf("layer %s: alpha %v outside [0,1]", l.Name, l.Alpha)
		}
		if l.SQNR != nil && math.IsNaN(*l.SQNR) {
			t.Errorf("layer %s: SQNR NaN", l.Name)
		}
	}
	return q
}

type classifyLine struct {
	Text   string    `json:"text"`
	Label  string    `json:"label"`
	Score  float64   `json:"score"`
	Scores []float64 `json:"scores"`
}

func parseClassify(t *testing.T, out string, n int) []classifyLine {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != n {
		t.Fatalf("%d classify lines, want %d:\n%s", len(lines), n, out)
	}
	res := make([]classifyLine, n)
	for i, l := range lines {
		if err := json.Unmarshal([]byte(l), &res[i]); err != nil {
			t.Fatalf("classify line %d: %v: %s", i, err, l)
		}
		if res[i].Label == "" || !(res[i].Score > 0 && res[i].Score <= 1) {
			t.Errorf("classify line %d: %s", i, l)
		}
	}
	return res
}

var sst2Sentences = []string{
	"a charming and often affecting journey .",
	"unflinchingly bleak and desperate",
	"the acting is superb and the story moving",
	"it 's a boring , lifeless mess .",
	"one of the year 's best films",
	"i wanted to like it , but it fell flat",
}

// sst2Labels are sst2Sentences' labels (0 negative, 1 positive).
var sst2Labels = []int{1, 0, 1, 0, 1, 0}

// TestQuantizeStaticArtifact: quantize --mode static writes an artifact
// that classify and eval open as stored, with the labels of an at-load
// quantization on the same calibration texts; the artifact cannot run as
// another precision.
func TestQuantizeStaticArtifact(t *testing.T) {
	if testing.Short() {
		t.Skip("quantizes and runs a trained SST-2 model (~10 s, far more under -race): not in -short")
	}
	testTuningCache(t)
	model := sharedPath(t, "models/sst2-xlmr-mini")
	calib := sharedPath(t, "data/sst2/train.tsv")
	dev := sharedPath(t, "data/sst2/dev.tsv")
	dir := filepath.Join(t.TempDir(), "int8")
	out := mustCLI(t, "quantize", "--model", model, "--calib", calib, "--calib-size", "64", "--mode", "static", "--alpha", "0.5", "-o", dir, "-json")
	q := checkQuantize(t, out, model, dir, "static")
	if q.Recipe.Alpha != "0.5" || q.Recipe.CalibTexts != 64 {
		t.Errorf("recipe alpha %q, %d calibration texts; want 0.5, 64", q.Recipe.Alpha, q.Recipe.CalibTexts)
	}
	if _, err := os.Stat(filepath.Join(dir, "tokenizer.json")); err != nil {
		t.Errorf("no tokenizer in the artifact folder: %v", err)
	}

	stored := parseClassify(t, mustCLI(t, append([]string{"classify", "--model", dir}, sst2Sentences...)...), len(sst2Sentences))
	atLoad := parseClassify(t, mustCLI(t, append([]string{"classify", "--model", model, "--precision", "int8-static",
		"--calib", calib, "--calib-size", "64"}, sst2Sentences...)...), len(sst2Sentences))
	for i := range stored {
		if stored[i].Label != atLoad[i].Label {
			t.Errorf("%q: artifact says %s, at-load int8-static says %s", sst2Sentences[i], stored[i].Label, atLoad[i].Label)
		}
		if d := math.Abs(stored[i].Score - atLoad[i].Score); d > 1e-3 {
			t.Errorf("%q: artifact score %v, at-load %v", sst2Sentences[i], stored[i].Score, atLoad[i].Score)
		}
	}
	// Asking for the stored precision by name is fine (the same texts: no
	// new GEMM shape to tune).
	named := parseClassify(t, mustCLI(t, append([]string{"classify", "--model", dir, "--precision", "int8-static"}, sst2Sentences...)...), len(sst2Sentences))
	for i := range named {
		if named[i].Label != stored[i].Label || named[i].Score != stored[i].Score {
			t.Errorf("%q: --precision int8-static gives %+v, as stored %+v", sst2Sentences[i], named[i], stored[i])
		}
	}
	wantCLIError(t, "fp32", "classify", "--model", dir, "--precision", "fp32", "good")
	wantCLIError(t, "int8-dynamic", "classify", "--model", dir, "--precision", "int8-dynamic", "good")

	// eval of the artifact on the same sentences in one batch (no new GEMM
	// shape to tune): its accuracy is that of classify's labels.
	var tsv strings.Builder
	tsv.WriteString("sentence\tlabel\n")
	right := 0
	for i, s := range sst2Sentences {
		fmt.Fprintf(&tsv, "%s\t%d\n", s, sst2Labels[i])
		if stored[i].Label == []string{"negative", "positive"}[sst2Labels[i]] {
			right++
		}
	}
	data := writeFile(t, "dev.tsv", tsv.String())
	var r evalOutput
	decodeEval(t, mustCLI(t, "eval", "--model", dir, "--task", "sst2", "--data", data, "--batch", "32", "--precision", "int8-static", "-json"), &r)
	checkEval(t, &r, "sst2", len(sst2Sentences), "int8-static")
	if want := float64(right) / float64(len(sst2Sentences)); len(r.Results) == 1 && *r.Results[0].Accuracy != want {
		t.Errorf("eval of the artifact: accuracy %v, classify's labels give %v", *r.Results[0].Accuracy, want)
	}
	wantCLIError(t, "fp32", "eval", "--model", dir, "--task", "sst2", "--data", dev, "--limit", "8", "--precision", "fp32")
}

// TestQuantizeTiny runs quantize on the tiny golden classifier: static and
// dynamic artifacts, auto alpha, and the artifact opened again by classify,
// eval and forward.
func TestQuantizeTiny(t *testing.T) {
	fastKernels(t)
	model := tinyModel(t, "bert-seqcls")
	calib := tinyCalib(t, 24)
	texts := []string{"the cat sat on the mat .", "a great movie", "john lives in paris"}

	static := filepath.Join(t.TempDir(), "static")
	checkQuantize(t, mustCLI(t, "quantize", "--model", model, "--calib", calib, "--calib-size", "16", "-o", static, "-json"), model, static, "static")
	a := parseClassify(t, mustCLI(t, append([]string{"classify", "--model", static}, texts...)...), len(texts))
	b := parseClassify(t, mustCLI(t, append([]string{"classify", "--model", model, "--precision", "int8-static", "--calib", calib, "--calib-size", "16"}, texts...)...), len(texts))
	for i := range a {
		if a[i].Label != b[i].Label || math.Abs(a[i].Score-b[i].Score) > 1e-4 {
			t.Errorf("%q: artifact %s %v, at-load %s %v", texts[i], a[i].Label, a[i].Score, b[i].Label, b[i].Score)
		}
	}
	wantCLIError(t, "fp32", "classify", "--model", static, "--precision", "fp32", "x")
	// quantize refuses an INT8 model.
	wantCLIError(t, "int8", "quantize", "--model", static, "--mode", "dynamic", "-o", filepath.Join(t.TempDir(), "again"))

	dynamic := filepath.Join(t.TempDir(), "dynamic")
	q := checkQuantize(t, mustCLI(t, "quantize", "--model", model, "--mode", "dynamic", "-o", dynamic, "-json"), model, dynamic, "dynamic")
	if q.Recipe.CalibTexts != 0 {
		t.Errorf("dynamic without --calib: %d calibration texts in the recipe", q.Recipe.CalibTexts)
	}
	parseClassify(t, mustCLI(t, append([]string{"classify", "--model", dynamic}, texts...)...), len(texts))
	// The text output names the artifact and every linear.
	out := mustCLI(t, "quantize", "--model", model, "--mode", "dynamic", "-o", filepath.Join(t.TempDir(), "text"))
	if !strings.Contains(out, models.ArtifactFile) || !strings.Contains(out, "qkv") {
		t.Errorf("quantize text output:\n%s", out)
	}

	auto := filepath.Join(t.TempDir(), "auto")
	q = checkQuantize(t, mustCLI(t, "quantize", "--model", model, "--calib", calib, "--calib-size", "8", "--alpha", "auto", "-o", auto, "-json"), model, auto, "static")
	if q.Recipe.Alpha != "auto" {
		t.Errorf("recipe alpha %q, want auto", q.Recipe.Alpha)
	}
	pct := filepath.Join(t.TempDir(), "pct")
	q = checkQuantize(t, mustCLI(t, "quantize", "--model", model, "--calib", calib, "--range", "percentile", "--percentile", "99.9", "-o", pct, "-json"), model, pct, "static")
	if q.Recipe.Range != "percentile" {
		t.Errorf("recipe range %q, want percentile", q.Recipe.Range)
	}
}

func TestQuantizeErrors(t *testing.T) {
	fastKernels(t)
	model := tinyModel(t, "bert-seqcls")
	calib := tinyCalib(t, 8)
	out := func() string { return filepath.Join(t.TempDir(), "q") }
	wantCLIError(t, "--calib", "quantize", "--model", model, "--mode", "static", "-o", out())
	wantCLIError(t, "required", "quantize", "--model", model, "--calib", calib)
	wantCLIError(t, "required", "quantize", "--calib", calib, "-o", out())
	wantCLIError(t, "", "quantize", "--model", model, "--calib", calib, "--mode", "fast", "-o", out())
	wantCLIError(t, "unexpected", "quantize", "--model", model, "--calib", calib, "-o", out(), "extra")
	for _, a := range []string{"1.5", "-0.1", "abc", "NaN", ""} {
		wantCLIError(t, "", "quantize", "--model", model, "--calib", calib, "--alpha", a, "-o", out())
		wantCLIError(t, "", "quantize", "--model", model, "--mode", "dynamic", "--alpha", a, "-o", out())
	}
	wantCLIError(t, "", "quantize", "--model", model, "--calib", calib, "--range", "minmax", "-o", out())
	wantCLIError(t, "", "quantize", "--model", model, "--calib", calib, "--range", "percentile", "--percentile", "150", "-o", out())
	wantCLIError(t, "", "quantize", "--model", model, "--calib", filepath.Join(t.TempDir(), "missing.tsv"), "-o", out())
	empty := filepath.Join(t.TempDir(), "empty.tsv")
	os.WriteFile(empty, []byte("sentence\tlabel\n\n"), 0o644)
	wantCLIError(t, "no calibration text", "quantize", "--model", model, "--calib", empty, "-o", out())
	// A failed quantize leaves no artifact behind.
	o := out()
	cli(t, "quantize", "--model", model, "--calib", calib, "--alpha", "2", "-o", o)
	if _, err := os.Stat(filepath.Join(o, models.ArtifactFile)); err == nil {
		t.Error("a failed quantize wrote an artifact")
	}
	// At-load quantization flags on the task commands.
	wantCLIError(t, "--calib", "classify", "--model", model, "--precision", "int8-static", "x")
	wantCLIError(t, "", "classify", "--model", model, "--precision", "int9", "x")
	wantCLIError(t, "", "classify", "--model", model, "--precision", "int8-dynamic", "--alpha", "7", "x")
}

// TestQuantizeIntoOwnFolder: -o naming the FP32 model's folder is refused
// before anything is written.
func TestQuantizeIntoOwnFolder(t *testing.T) {
	dir := t.TempDir()
	var out, errb bytes.Buffer
	err := run(context.Background(), []string{"quantize", "--model", dir, "--mode", "dynamic", "-o", dir}, &out, &errb)
	if err == nil || !strings.Contains(err.Error(), "own folder") {
		t.Fatalf("quantize into the model's folder: %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("the folder was written: %v", entries)
	}
}

// TestQuantizeTuningRecord: quantize tunes the artifact's shapes for one
// sequence of every length up to the model's longest, so that the tuning
// record it saves holds attention's keys at the longest length's row class;
// --tune-record=false leaves them out.
func TestQuantizeTuningRecord(t *testing.T) {
	testTuningCache(t)
	model := tinyModel(t, "bert-seqcls")
	p, err := models.Load(context.Background(), model, models.Options{})
	require.NoError(t, err)
	longest := selector.BucketM(p.MaxLength())
	p.Close()
	hasLongest := func(dir string) bool {
		f, err := selector.LoadCacheFile(filepath.Join(dir, models.TuningRecordFile))
		if err != nil {
			return false
		}
		for _, sec := range f.Sections {
			for k := range sec.Entries {
				attention := strings.HasPrefix(k, selector.OpF32Kernel+" ") || strings.HasPrefix(k, selector.OpU8S8Kernel+" ")
				if attention && strings.Contains(k, fmt.Sprintf(" m=%d ", longest)) {
					return true
				}
			}
		}
		return false
	}
	off := filepath.Join(t.TempDir(), "off")
	mustCLI(t, "quantize", "--model", model, "--mode", "dynamic", "--tune-record=false", "-o", off)
	assert.False(t, hasLongest(off), "without --tune-record, nothing ran that long")
	if testing.Short() {
		t.Log("TestQuantizeTuningRecord: -short leaves out the tuning of every length (tens of seconds under -race); the long stage runs it")
		return
	}
	testTuningCache(t) // a cache of its own: the record holds what this run tuned
	on := filepath.Join(t.TempDir(), "on")
	mustCLI(t, "quantize", "--model", model, "--mode", "dynamic", "-o", on)
	assert.True(t, hasLongest(on), "the record covers %d rows of attention", longest)
}
