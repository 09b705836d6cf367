package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// evalOutput is eval -json's output.
type evalOutput struct {
	Task    string `json:"task"`
	Results []struct {
		Precision  string   `json:"precision"`
		Accuracy   *float64 `json:"accuracy"`
		ExactMatch *float64 `json:"exact_match"`
		F1         *float64 `json:"f1"`
		Agreement  *float64 `json:"agreement_with_fp32"`
		N          int      `json:"n"`
	} `json:"results"`
}

// decodeEval parses eval -json output strictly (every field known).
func decodeEval(t *testing.T, out string, r *evalOutput) {
	t.Helper()
	*r = evalOutput{}
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(r); err != nil {
		t.Fatalf("eval -json: %v\n%s", err, out)
	}
}

// checkEval checks an eval report of task over the precisions precs, n
// examples each: scores in range (fractions for accuracy, percentages for
// squad), agreement in [0,1] and 1 for fp32.
func checkEval(t *testing.T, r *evalOutput, task string, n int, precs ...string) {
	t.Helper()
	if r.Task != task {
		t.Errorf("task %q, want %q", r.Task, task)
	}
	if len(r.Results) != len(precs) {
		t.Fatalf("%d results, want %d (%v): %+v", len(r.Results), len(precs), precs, r)
	}
	hasFP32 := false
	for _, p := range precs {
		hasFP32 = hasFP32 || p == "fp32"
	}
	in := func(p *float64, hi float64) bool { return p != nil && *p >= 0 && *p <= hi }
	for i, x := range r.Results {
		if x.Precision != precs[i] {
			t.Errorf("result %d: precision %q, want %q", i, x.Precision, precs[i])
		}
		if x.N != n {
			t.Errorf("%s: n %d, want %d", x.Precision, x.N, n)
		}
		if task == "squad" {
			if !in(x.ExactMatch, 100) || !in(x.F1, 100) || *x.F1 < *x.ExactMatch || x.Accuracy != nil {
				t.Errorf("%s: exact match %v, F1 %v, accuracy %v", x.Precision, x.ExactMatch, x.F1, x.Accuracy)
			}
		} else if !in(x.Accuracy, 1) || x.ExactMatch != nil || x.F1 != nil {
			t.Errorf("%s: accuracy %v, exact match %v, F1 %v", x.Precision, x.Accuracy, x.ExactMatch, x.F1)
		}
		if !hasFP32 {
			if x.Agreement != nil {
				t.Errorf("%s: agreement_with_fp32 %v without an fp32 run", x.Precision, *x.Agreement)
			}
		} else if !in(x.Agreement, 1) {
			t.Errorf("%s: agreement_with_fp32 %v", x.Precision, x.Agreement)
		} else if x.Precision == "fp32" && *x.Agreement != 1 {
			t.Errorf("fp32 agrees with itself on %v", *x.Agreement)
		}
	}
}

func TestEvalSST2(t *testing.T) {
	if testing.Short() {
		t.Skip("evaluates a trained SST-2 model at two precisions (seconds, far more under -race): not in -short")
	}
	testTuningCache(t)
	model := sharedPath(t, "models/sst2-bert-mini")
	dev := sharedPath(t, "data/sst2/dev.tsv")
	var r evalOutput
	decodeEval(t, mustCLI(t, "eval", "--model", model, "--task", "sst2", "--data", dev, "--limit", "64",
		"--precision", "fp32,int8-dynamic", "-json"), &r)
	checkEval(t, &r, "sst2", 64, "fp32", "int8-dynamic")
	for _, x := range r.Results {
		// 80.85% on the whole dev set; 64 sentences leave some room.
		if *x.Accuracy < 0.65 || *x.Agreement < 0.9 {
			t.Errorf("%s: accuracy %.3f, agreement %.3f: too low for this model", x.Precision, *x.Accuracy, *x.Agreement)
		}
	}
}

// writeFile writes body to name in a temporary folder.
func writeFile(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestEvalTiny runs eval's three tasks on the tiny golden models (random
// weights: only the shape of the report is checked), and on a static
// artifact.
func TestEvalTiny(t *testing.T) {
	fastKernels(t)
	cls := tinyModel(t, "bert-seqcls")
	sst := writeFile(t, "dev.tsv", "sentence\tlabel\nthe cat sat on the mat .\t1\na boring movie\t0\njohn loves mary\t1\nthe old man ate bread\t0\nparis is a big city\t1\n")
	var r evalOutput
	decodeEval(t, mustCLI(t, "eval", "--model", cls, "--data", sst, "--precision", "fp32,int8-dynamic", "--batch", "2", "-json"), &r)
	checkEval(t, &r, "sst2", 5, "fp32", "int8-dynamic")

	// --limit keeps the first examples; int8-static needs --calib.
	calib := tinyCalib(t, 16)
	decodeEval(t, mustCLI(t, "eval", "--model", cls, "--data", sst, "--limit", "3", "--precision", "int8-static,fp32", "--calib", calib, "-json"), &r)
	checkEval(t, &r, "sst2", 3, "int8-static", "fp32")
	// ... and says so before evaluating anything (the default --precision
	// holds int8-static).
	for _, args := range [][]string{{"--precision", "fp32,int8-static"}, nil} {
		_, errb, err := cli(t, append([]string{"eval", "--model", cls, "--data", sst}, args...)...)
		if err == nil || !strings.Contains(err.Error(), "--calib") {
			t.Errorf("eval %q without --calib: %v", args, err)
		}
		if strings.Contains(errb, "evaluating") {
			t.Errorf("eval %q evaluated before failing for want of --calib:\n%s", args, errb)
		}
	}

	// The text report.
	out := mustCLI(t, "eval", "--model", cls, "--data", sst, "--precision", "fp32")
	if !strings.Contains(out, "accuracy") || !strings.Contains(out, "fp32") {
		t.Errorf("eval text output:\n%s", out)
	}

	// A static artifact evaluates as itself only.
	art := filepath.Join(t.TempDir(), "static")
	mustCLI(t, "quantize", "--model", cls, "--calib", calib, "-o", art)
	decodeEval(t, mustCLI(t, "eval", "--model", art, "--data", sst, "--precision", "int8-static", "-json"), &r)
	checkEval(t, &r, "sst2", 5, "int8-static")
	// Without --precision, as stored.
	decodeEval(t, mustCLI(t, "eval", "--model", art, "--data", sst, "-json"), &r)
	checkEval(t, &r, "sst2", 5, "int8-static")
	wantCLIError(t, "fp32", "eval", "--model", art, "--data", sst, "--precision", "fp32")
	if _, errb, err := cli(t, "eval", "--model", art, "--data", sst, "--precision", "int8-static,fp32"); err == nil || strings.Contains(errb, "evaluating") {
		t.Errorf("eval of an artifact as int8-static,fp32: %v, after evaluating:\n%s", err, errb)
	}
	wantCLIError(t, "", "eval", "--model", art, "--data", sst, "--precision", "int8-dynamic")

	// MNLI: sentence pairs, GLUE's label names onto the model's 3 classes.
	mnli := writeFile(t, "dev_matched.tsv", "index\tsentence1\tsentence2\tgold_label\n"+
		"0\tthe cat sat on the mat .\ta cat sat .\tentailment\n"+
		"1\tjohn lives in paris .\tjohn lives in london .\tcontradiction\n"+
		"2\tmary reads a book .\tmary likes the book .\tneutral\n"+
		"3\tthe dog ran .\tthe dog sat .\t-\n")
	decodeEval(t, mustCLI(t, "eval", "--model", cls, "--task", "mnli", "--data", mnli, "--precision", "fp32,int8-dynamic", "-json"), &r)
	checkEval(t, &r, "mnli", 3, "fp32", "int8-dynamic")

	// SQuAD on the tiny QA model.
	qa := tinyModel(t, "bert-qa")
	squad := writeFile(t, "dev-v1.1.json", `{"version": "1.1", "data": [{"title": "t", "paragraphs": [
		{"context": "john lives in paris . mary lives in london . the cat sat on the mat .", "qas": [
			{"id": "q1", "question": "where does john live ?", "answers": [{"text": "paris", "answer_start": 14}]},
			{"id": "q2", "question": "who lives in london ?", "answers": [{"text": "mary", "answer_start": 22}, {"text": "mary"}]}]},
		{"context": "the old man wrote a book in 1990 .", "qas": [
			{"id": "q3", "question": "when was the book written ?", "answers": [{"text": "1990", "answer_start": 28}]}]}]}]}`)
	decodeEval(t, mustCLI(t, "eval", "--model", qa, "--task", "squad", "--data", squad, "--precision", "fp32,int8-dynamic", "-json"), &r)
	checkEval(t, &r, "squad", 3, "fp32", "int8-dynamic")
	out = mustCLI(t, "eval", "--model", qa, "--task", "squad", "--data", squad, "--precision", "int8-dynamic", "--limit", "1")
	if !strings.Contains(out, "F1") || !strings.Contains(out, "(1 examples)") {
		t.Errorf("squad text output:\n%s", out)
	}
	// A classifier cannot answer questions, nor a QA model classify.
	wantCLIError(t, "", "eval", "--model", cls, "--task", "squad", "--data", squad, "--precision", "fp32")
	wantCLIError(t, "", "eval", "--model", qa, "--task", "sst2", "--data", sst, "--precision", "fp32")
}

func TestEvalDataErrors(t *testing.T) {
	fastKernels(t)
	cls := tinyModel(t, "bert-seqcls")
	dir := t.TempDir()
	unlabelled := writeFile(t, "test.tsv", "index\tsentence\n0\tthe cat sat .\n1\ta dog ran .\n")
	wantCLIError(t, "label", "eval", "--model", cls, "--data", unlabelled, "--precision", "fp32")
	wantCLIError(t, "missing.tsv", "eval", "--model", cls, "--data", filepath.Join(dir, "missing.tsv"), "--precision", "fp32")
	wantCLIError(t, "no examples", "eval", "--model", cls, "--data", writeFile(t, "empty.tsv", "sentence\tlabel\n"), "--precision", "fp32")
	wantCLIError(t, "", "eval", "--model", cls, "--data", writeFile(t, "bad.tsv", "sentence\tlabel\nthe cat\t7\n"), "--precision", "fp32")
	wantCLIError(t, "", "eval", "--model", cls, "--task", "squad", "--data", writeFile(t, "bad.json", `{"data": [`), "--precision", "fp32")
	wantCLIError(t, "", "eval", "--model", cls, "--task", "mnli", "--data", writeFile(t, "bad_mnli.tsv", "sentence1\tsentence2\tgold_label\na\tb\tmaybe\n"), "--precision", "fp32")
	sst := writeFile(t, "dev.tsv", "sentence\tlabel\nthe cat\t1\n")
	wantCLIError(t, "task", "eval", "--model", cls, "--task", "cola", "--data", sst)
	wantCLIError(t, "required", "eval", "--model", cls)
	wantCLIError(t, "required", "eval", "--data", sst)
	wantCLIError(t, "", "eval", "--model", cls, "--data", sst, "--precision", "fp16")
	wantCLIError(t, "batch", "eval", "--model", cls, "--data", sst, "--batch", "0")
}
