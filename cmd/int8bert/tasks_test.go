package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/int8bert/int8bert/models"
)

func sharedModel(t *testing.T, name string) string {
	dir := filepath.Join("../../../shared/models", name)
	if d := os.Getenv("INT8BERT_SHARED"); d != "" {
		dir = filepath.Join(d, "models", name)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("trained model %s not found (the project's shared folder): %v", name, err)
	}
	return dir
}

func TestClassifyCommand(t *testing.T) {
	t.Setenv("INT8BERT_TUNING_CACHE", "off")
	dir := sharedModel(t, "sst2-distilbert-mini")
	var out, errb bytes.Buffer
	stdin := strings.NewReader("a charming and often affecting journey\n\nunflinchingly bleak and desperate\n")
	if err := runTask(context.Background(), "classify", []string{"--model", dir}, stdin, &out, &errb); err != nil {
		t.Fatal(err, errb.String())
	}
	// The blank line keeps its place, as an error object.
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines, want 3:\n%s", len(lines), out.String())
	}
	want := []string{"positive", "", "negative"}
	for i, l := range lines {
		var r struct {
			Label string
			Score float64
			Error string
		}
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatal(err)
		}
		if !strings.EqualFold(r.Label, want[i]) {
			t.Errorf("line %d: label %q, want %q", i, r.Label, want[i])
		}
		if (want[i] == "") != (r.Error == "blank line") {
			t.Errorf("line %d: error %q", i, r.Error)
		}
	}
}

func TestEmbedAndQAErrors(t *testing.T) {
	t.Setenv("INT8BERT_TUNING_CACHE", "off")
	dir := sharedModel(t, "sst2-xlmr-mini")
	var out, errb bytes.Buffer
	if err := runTask(context.Background(), "embed", []string{"--model", dir, "hello", "world"}, nil, &out, &errb); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out.String(), "\n"); n != 2 {
		t.Errorf("%d embeddings, want 2", n)
	}
	// A classifier has no QA head: a clear error.
	err := runTask(context.Background(), "qa", []string{"--model", dir, "--question", "who?", "some context"}, nil, &out, &errb)
	if err == nil || !strings.Contains(err.Error(), "not question answering") {
		t.Errorf("qa on a classifier: %v", err)
	}
	if err := runTask(context.Background(), "embed", []string{"--model", dir, "--pooling", "max", "x"}, nil, &out, &errb); err == nil {
		t.Error("unknown pooling: no error")
	}
}

// TestModelIDOffline: a model id that is not cached, with HF_HUB_OFFLINE=1,
// fails clearly without touching the network (the endpoint is a server
// that fails the test if called).
func TestModelIDOffline(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("network used in offline mode: %s", r.URL)
	}))
	defer srv.Close()
	t.Setenv("HF_ENDPOINT", srv.URL)
	t.Setenv("HF_HUB_CACHE", t.TempDir())
	t.Setenv("HF_HUB_OFFLINE", "1")
	var out, errb bytes.Buffer
	err := runTask(context.Background(), "classify", []string{"--model", "someone/some-model", "text"}, nil, &out, &errb)
	if err == nil || !strings.Contains(err.Error(), "someone/some-model") {
		t.Errorf("got %v", err)
	}
}

// TestFillMaskAndSparseCommands: fill-mask prints the library's FillMask
// result in the pipeline's shape, one line a text, with the targets'
// warnings on stderr; embed --pooling splade prints the SPLADE vector's
// non-zero values; fill-mask on a classifier is an error.
func TestFillMaskAndSparseCommands(t *testing.T) {
	t.Setenv("INT8BERT_TUNING_CACHE", "off")
	dir := filepath.Join("..", "..", "models", "testdata", "mlm", "bert-mlm")
	ctx := context.Background()
	p, err := models.Load(ctx, dir, models.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	texts := []string{"the man went to the [MASK].", "the [MASK] of the [MASK]"}
	want, err := p.FillMask(ctx, texts, models.FillMaskOptions{TopK: 2, Targets: []string{"house", "City", "car"}})
	if err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if err := runTask(ctx, "fill-mask", append([]string{"--model", dir, "--top-k", "2", "--targets", "house,City,car"}, texts...), nil, &out, &errb); err != nil {
		t.Fatalf("%v: %s", err, errb.String())
	}
	if !strings.Contains(errb.String(), "Replacing with `city`") {
		t.Errorf("stderr %q: want the target's warning", errb.String())
	}
	dec := json.NewDecoder(&out)
	for i := range texts {
		var line struct {
			Text   string          `json:"text"`
			Result json.RawMessage `json:"result"`
		}
		if err := dec.Decode(&line); err != nil {
			t.Fatal(err)
		}
		// The command loads the model again, and its kernels are tuned
		// again: the scores may differ in their last bits from p's.
		var got [][]models.FillMaskToken
		if len(want[i].Masks) == 1 {
			var one []models.FillMaskToken
			if err := json.Unmarshal(line.Result, &one); err != nil {
				t.Fatalf("line %d: %v: %s", i, err, line.Result)
			}
			got = [][]models.FillMaskToken{one}
		} else if err := json.Unmarshal(line.Result, &got); err != nil {
			t.Fatalf("line %d: %v: %s", i, err, line.Result)
		}
		w, _ := json.Marshal(want[i].HF())
		ok := line.Text == texts[i] && len(got) == len(want[i].Masks)
		for k := 0; ok && k < len(got); k++ {
			ok = len(got[k]) == len(want[i].Masks[k])
			for j := 0; ok && j < len(got[k]); j++ {
				g, e := got[k][j], want[i].Masks[k][j]
				ok = g.Token == e.Token && g.TokenStr == e.TokenStr && g.Sequence == e.Sequence &&
					math.Abs(float64(g.Score-e.Score)) <= 1e-5*math.Abs(float64(e.Score))
			}
		}
		if !ok {
			t.Errorf("line %d: %s %s, want %s", i, line.Text, line.Result, w)
		}
	}

	sparse, err := p.EmbedSparse(ctx, texts[:1], models.SparseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := runTask(ctx, "embed", []string{"--model", dir, "--pooling", "splade", texts[0]}, nil, &out, &errb); err != nil {
		t.Fatal(err)
	}
	var line struct {
		Sparse []models.SparseValue `json:"sparse"`
	}
	if err := json.Unmarshal(out.Bytes(), &line); err != nil {
		t.Fatal(err)
	}
	if len(line.Sparse) != len(sparse[0]) {
		t.Fatalf("embed --pooling splade: %d values, want %d", len(line.Sparse), len(sparse[0]))
	}
	// log(1 + ReLU(logit)) of a logit near 0 keeps the logit's absolute
	// error, not its relative one: the values are held to 2e-5 of the
	// vector's largest (at least 1), as the goldens are.
	top := 1.0
	for _, e := range sparse[0] {
		top = max(top, math.Abs(float64(e.Value)))
	}
	for k, v := range line.Sparse {
		if e := sparse[0][k]; v.Index != e.Index || math.Abs(float64(v.Value-e.Value)) > 2e-5*top {
			t.Errorf("embed --pooling splade: value %d is %+v, want %+v", k, v, e)
		}
	}
}
