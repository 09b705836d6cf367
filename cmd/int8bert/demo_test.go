package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestDemo runs the main job on the model that ships in assets/.
func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("the demo classifies SST-2 dev three times; skipped in -short mode")
	}
	t.Setenv("INT8BERT_TUNING_CACHE", t.TempDir()+"/tuning.json")
	var out, errb bytes.Buffer
	err := run(context.Background(), []string{"demo", "--model", "../../assets/sst2-xlmr-mini", "--data", "../../assets/sst2/dev.tsv",
		"--calib", "../../assets/sst2/calib.tsv", "--calib-size", "64", "--seq", "32", "--min-time", "10ms"}, &out, &errb)
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, errb.String())
	}
	s := out.String()
	for _, want := range []string{"predictions", "SST-2 dev accuracy", "int8-static", "int8-dynamic", "speed-up vs fp32", "positive", "negative"} {
		if !strings.Contains(s, want) {
			t.Errorf("demo output lacks %q:\n%s", want, s)
		}
	}
	// FP32 accuracy of the shipped model, as its README states (79.36%).
	if !strings.Contains(s, "fp32          0.7936") {
		t.Errorf("demo: FP32 accuracy is not the model's 0.7936:\n%s", s)
	}
	t.Log(s)
}

// TestDemoErrors: a model that is not a classifier, a missing model.
func TestDemoErrors(t *testing.T) {
	for _, args := range [][]string{
		{"demo", "--model", "./no-such-folder"},
		{"demo", "--model", "../../assets/sst2-xlmr-mini", "--calib", "./no-such-file"},
		{"demo", "extra"},
	} {
		var out, errb bytes.Buffer
		if err := run(context.Background(), args, &out, &errb); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}
