package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBenchPaperTiny runs bench paper on a tiny model with the shortest
// timings, Table 15 included: the report, its JSON and the charts are
// written, and the Markdown on stdout names the command above its tables.
func TestBenchPaperTiny(t *testing.T) {
	fastKernels(t)
	cls := tinyModel(t, "bert-seqcls")
	dev := writeFile(t, "dev.tsv", "sentence\tlabel\nthe cat sat on the mat .\t1\na boring movie\t0\njohn loves mary\t1\nthe old man ate bread\t0\n")
	out := filepath.Join(t.TempDir(), "report")
	args := []string{"bench", "paper", "--models", cls + ":8", "--precision", "fp32,int8-dynamic", "--min-time", "1ms", "--reps", "1",
		"--peak-time", "10ms", "--triad-mib", "3", "--eval", cls, "--eval-data", dev, "--out", out, "--pin=false"}
	md := mustCLI(t, args...)
	for _, h := range []string{"## Table 3", "## Table 4", "## Table 5", "## Tables 6-7", "## Tables 11-13", "## Table 14", "## Table 15"} {
		if !strings.Contains(md, h) {
			t.Errorf("the report has no %q", h)
		}
	}
	if !strings.Contains(md, "_Reproduce: `int8bert bench paper --models") {
		t.Errorf("the report does not print its command:\n%s", md[:min(len(md), 800)])
	}
	for _, f := range []string{"report.md", "report.json", "roofline.svg", "roofline.png", "speedups.png", "hotspots-" + filepath.Base(cls) + ".svg"} {
		if st, err := os.Stat(filepath.Join(out, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	raw, err := os.ReadFile(filepath.Join(out, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Accuracy []struct {
			Precision string   `json:"precision"`
			N         int      `json:"n"`
			Accuracy  *float64 `json:"accuracy"`
		} `json:"table15_accuracy"`
		Speedups []any `json:"table11_13_speedups"`
	}
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Accuracy) != 2 || rep.Accuracy[0].N != 4 || rep.Accuracy[0].Accuracy == nil || len(rep.Speedups) != 2 {
		t.Errorf("report.json: accuracy %+v, %d speed-up rows; want two precisions of 4 examples each", rep.Accuracy, len(rep.Speedups))
	}
}

// TestBenchPaperErrors: bad flags fail before anything is measured.
func TestBenchPaperErrors(t *testing.T) {
	wantCLIError(t, "sequence length", "bench", "paper", "--models", "bert-base:x")
	wantCLIError(t, "--eval-data", "bench", "paper", "--eval", "somewhere")
	wantCLIError(t, "precision", "bench", "paper", "--precision", "fp16")
	wantCLIError(t, "positive", "bench", "paper", "--batch", "0")
	wantCLIError(t, "unexpected", "bench", "paper", "extra")
	wantCLIError(t, "no examples", "bench", "paper", "--eval", "m", "--eval-data", writeFile(t, "empty.tsv", "sentence\tlabel\n"))
}
