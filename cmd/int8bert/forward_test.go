package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// TestForwardTinyModel runs forward on the tiny DistilBERT checkpoint that
// ships in checkpoint/testdata (pytorch_model.bin only).
func TestForwardTinyModel(t *testing.T) {
	t.Setenv("INT8BERT_TUNING_CACHE", "off")
	dir := t.TempDir()
	in := filepath.Join(dir, "in.json")
	os.WriteFile(in, []byte(`{"input_ids": [[2, 15, 99, 3], [2, 7, 3, 0]], "attention_mask": [[1,1,1,1],[1,1,1,0]]}`), 0o644)
	var out, errb bytes.Buffer
	if err := runForward(context.Background(), []string{"--model", "../../checkpoint/testdata/distilbert-tiny", "--inputs", in}, &out, &errb); err != nil {
		t.Fatal(err, errb.String())
	}
	var r map[string][][][]float64
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	h := r["last_hidden_state"]
	if len(h) != 2 || len(h[0]) != 4 || len(h[0][0]) != 64 {
		t.Fatalf("last_hidden_state shape %d x %d x %d, want 2 x 4 x 64", len(h), len(h[0]), len(h[0][0]))
	}
	for _, v := range h[1][2] {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			t.Fatal("non-finite output")
		}
	}
}

func TestForwardBadInputs(t *testing.T) {
	t.Setenv("INT8BERT_TUNING_CACHE", "off")
	dir := t.TempDir()
	model := "../../checkpoint/testdata/distilbert-tiny"
	for name, body := range map[string]string{
		"ragged":       `{"input_ids": [[2, 15, 3], [2, 3]]}`,
		"out of vocab": `{"input_ids": [[2, 5000, 3]]}`,
		"bad mask":     `{"input_ids": [[2, 3]], "attention_mask": [[1, 2]]}`,
		"too long":     `{"input_ids": [[` + longIDs(200) + `]]}`,
		"not json":     `{"input_ids": `,
		"empty":        `{"input_ids": []}`,
	} {
		p := filepath.Join(dir, "in.json")
		os.WriteFile(p, []byte(body), 0o644)
		var out, errb bytes.Buffer
		if err := runForward(context.Background(), []string{"--model", model, "--inputs", p}, &out, &errb); err == nil {
			t.Errorf("%s: no error", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
	var out, errb bytes.Buffer
	if err := runForward(context.Background(), []string{"--model", dir, "--inputs", filepath.Join(dir, "in.json")}, &out, &errb); err == nil {
		t.Error("a folder without config.json: no error")
	}
}

func longIDs(n int) string {
	var b bytes.Buffer
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString("5")
	}
	return b.String()
}
