package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/int8bert/int8bert/models"
)

func tasksModel(name string) string {
	return filepath.Join("..", "..", "models", "testdata", "tasks", name)
}

// TestNERCommand: ner prints one object per line with the entities of
// the golden NER model: grouped with a strategy, every token (O ones
// included) with --ignore-labels "".
func TestNERCommand(t *testing.T) {
	t.Setenv("INT8BERT_TUNING_CACHE", "off")
	text := "My name is Wolfgang and I live in Berlin."
	var out, errb bytes.Buffer
	err := runTask(context.Background(), "ner", []string{"--model", tasksModel("bert-ner"), "--aggregation-strategy", "none", "--ignore-labels", "", text}, nil, &out, &errb)
	if err != nil {
		t.Fatal(err, errb.String())
	}
	var r struct {
		Text     string
		Entities []models.Entity
	}
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatal(err, out.String())
	}
	// bert-base-uncased splits the text into 10 tokens, every one kept.
	if r.Text != text || len(r.Entities) != 10 || r.Entities[0].Word != "my" || r.Entities[0].Index == nil || *r.Entities[0].Index != 1 {
		t.Errorf("ner none: %s", out.String())
	}
	out.Reset()
	err = runTask(context.Background(), "ner", []string{"--model", tasksModel("bert-ner"), "--aggregation-strategy", "first"}, strings.NewReader(text+"\n"), &out, &errb)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `"entity_group"`) || strings.Contains(out.String(), `"index"`) {
		t.Errorf("ner first: %s", out.String())
	}
	// --stride runs a text longer than --max-length whole: entities past
	// the truncation; without a strategy it is refused.
	long := strings.Repeat("Wolfgang lives in Berlin. ", 8)
	for _, stride := range []string{"", "4"} {
		out.Reset()
		args := []string{"--model", tasksModel("bert-ner"), "--max-length", "16", "--aggregation-strategy", "simple", "--ignore-labels", ""}
		if stride != "" {
			args = append(args, "--stride", stride)
		}
		err = runTask(context.Background(), "ner", append(args, long), nil, &out, &errb)
		if err != nil {
			t.Fatal(err, errb.String())
		}
		if err := json.Unmarshal(out.Bytes(), &r); err != nil {
			t.Fatal(err, out.String())
		}
		last := r.Entities[len(r.Entities)-1].End
		if reach := len(long) - 1; (stride == "4") != (last == reach) {
			t.Errorf("--stride %s: entities end at %d, the text at %d", stride, last, reach)
		}
	}
	err = runTask(context.Background(), "ner", []string{"--model", tasksModel("bert-ner"), "--stride", "4", long}, nil, &out, &errb)
	if !errors.Is(err, models.ErrInput) || !strings.Contains(err.Error(), "other than none") {
		t.Errorf("--stride with none: %v", err)
	}
	err = runTask(context.Background(), "ner", []string{"--model", tasksModel("bert-ner"), "--aggregation-strategy", "longest", text}, nil, &out, &errb)
	if !errors.Is(err, models.ErrInput) || !strings.Contains(err.Error(), "aggregation_strategy") {
		t.Errorf("bad strategy: %v", err)
	}
	// A model without the head.
	err = runTask(context.Background(), "ner", []string{"--model", tasksModel("xlmr-nli"), text}, nil, &out, &errb)
	if !errors.Is(err, models.ErrConfig) || !strings.Contains(err.Error(), "not a token classifier") {
		t.Errorf("nli model: %v", err)
	}
}

// TestZeroShotCommand: zero-shot prints the labels best first with
// scores summing to one (single-label), and refuses a run without labels,
// a template without {} and a model without the head.
func TestZeroShotCommand(t *testing.T) {
	t.Setenv("INT8BERT_TUNING_CACHE", "off")
	var out, errb bytes.Buffer
	err := runTask(context.Background(), "zero-shot", []string{"--model", tasksModel("xlmr-nli"), "--labels", "sports, politics,science", "The match was won."}, nil, &out, &errb)
	if err != nil {
		t.Fatal(err, errb.String())
	}
	var r models.ZeroShotResult
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatal(err, out.String())
	}
	var sum float32
	for i, s := range r.Scores {
		sum += s
		if i > 0 && s > r.Scores[i-1] {
			t.Errorf("scores not sorted: %v", r.Scores)
		}
	}
	if r.Sequence != "The match was won." || len(r.Labels) != 3 || sum < 0.999 || sum > 1.001 {
		t.Errorf("zero-shot: %s", out.String())
	}
	for _, c := range []struct {
		args []string
		want string
		is   error
	}{
		{[]string{"--labels", " , "}, "--labels", models.ErrInput},
		{[]string{"--labels", "a", "--hypothesis-template", "about"}, "no {}", models.ErrInput},
		{[]string{"--labels", "a", "--model", tasksModel("bert-ner")}, "not an NLI", models.ErrConfig},
	} {
		args := append([]string{"--model", tasksModel("xlmr-nli")}, c.args...)
		err := runTask(context.Background(), "zero-shot", append(args, "text"), nil, &out, &errb)
		if !errors.Is(err, c.is) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.args, err, c.want)
		}
	}
}
