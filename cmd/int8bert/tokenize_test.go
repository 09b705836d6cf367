package main

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

const testTokenizerJSON = "../../tokenizer/testdata/bert-base-uncased/tokenizer.json"

func TestTokenize(t *testing.T) {
	var out, errb bytes.Buffer
	in := strings.NewReader("hello world\r\n\nHello, World!\n")
	if err := runTokenize(context.Background(), []string{"--tokenizer", testTokenizerJSON}, in, &out, &errb); err != nil {
		t.Fatal(err, errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d output lines:\n%s", len(lines), out.String())
	}
	var r tokenizeRecord
	if err := json.Unmarshal([]byte(lines[0]), &r); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(r.InputIDs, []int32{101, 7592, 2088, 102}) || !slices.Equal(r.AttentionMask, []int32{1, 1, 1, 1}) ||
		!slices.Equal(r.Offsets, [][2]int{{0, 0}, {0, 5}, {6, 11}, {0, 0}}) {
		t.Errorf("line 1: %s", lines[0])
	}
	if err := json.Unmarshal([]byte(lines[1]), &r); err != nil || !slices.Equal(r.InputIDs, []int32{101, 102}) {
		t.Errorf("empty line: %s", lines[1])
	}
}

func TestTokenizePair(t *testing.T) {
	var out, errb bytes.Buffer
	in := strings.NewReader("Why?\tBecause.\n")
	args := []string{"--tokenizer", testTokenizerJSON, "--pair", "--max-length", "6", "-pad"}
	if err := runTokenize(context.Background(), args, in, &out, &errb); err != nil {
		t.Fatal(err)
	}
	var r tokenizeRecord
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	// [CLS] why ? [SEP] because . [SEP] is 7 tokens; longest first leaves 3
	// for the texts: 1 for the first, 2 for the second (Hugging Face's split).
	if !slices.Equal(r.InputIDs, []int32{101, 2339, 102, 2138, 1012, 102}) || !slices.Equal(r.TokenTypeIDs, []int32{0, 0, 0, 1, 1, 1}) {
		t.Errorf("pair: %s", out.String())
	}
}

func TestTokenizeErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		in   string
	}{
		{nil, ""},
		{[]string{"--tokenizer", "/nonexistent"}, ""},
		{[]string{"--tokenizer", testTokenizerJSON, "--pair"}, "no tab\n"},
		{[]string{"--tokenizer", testTokenizerJSON}, "bad \xff\n"},
		{[]string{"--tokenizer", testTokenizerJSON, "-pad"}, ""},
	} {
		var out, errb bytes.Buffer
		if err := runTokenize(context.Background(), c.args, strings.NewReader(c.in), &out, &errb); err == nil {
			t.Errorf("%q with %q: no error", c.args, c.in)
		}
	}
}
