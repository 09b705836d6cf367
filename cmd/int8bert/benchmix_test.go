package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/int8bert/int8bert/models/encoder/encodertest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// soakModels are the two models of the soak in small: the golden tiny
// BERT classifier quantized INT8-static by the quantize command, and
// the golden tiny BERT as a sentence-transformers embedder (mean
// pooling, normalised), both with the word tokenizer of
// encodertest.WordFolder; and texts of its words.
func soakModels(t *testing.T) (cls, emb, texts string) {
	t.Helper()
	fp32 := encodertest.WordFolder(t, sharedPath(t, "golden/models/bert-seqcls"), false)
	var lines []string
	for i := range 40 {
		var w []string
		for k := range 2 + i%9 {
			w = append(w, "w"+strings.Repeat("1", 1+k%2)+string(rune('0'+(i+k)%10)))
		}
		lines = append(lines, strings.Join(w, " "))
	}
	texts = writeFile(t, "texts.txt", strings.Join(lines, "\n")+"\n")
	cls = filepath.Join(t.TempDir(), "cls-int8")
	require.NoError(t, run(context.Background(), []string{"quantize", "--model", fp32, "--calib", texts, "--tune-record=false", "-o", cls}, io.Discard, io.Discard))
	emb = encodertest.WordFolder(t, sharedPath(t, "golden/models/bert-base"), false)
	st := filepath.Join("..", "..", "models", "testdata", "sentence", "bert-base-mean")
	for _, f := range []string{"modules.json", filepath.Join("1_Pooling", "config.json")} {
		b, err := os.ReadFile(filepath.Join(st, f))
		require.NoError(t, err)
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(emb, f)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(emb, f), b, 0o644))
	}
	return cls, emb, texts
}

// TestBenchServeMixed: bench serve --soak runs the mixed load over every
// route of an INT8-static classifier and an embedder for a few seconds:
// every request answered 2xx, samples of the server's memory and
// goroutines, a verdict (here with tolerances no run can exceed: the
// test does not time the machine); an error response makes it fail;
// bad values of the mixed mode's flags are refused by name.
func TestBenchServeMixed(t *testing.T) {
	t.Setenv("INT8BERT_TUNING_CACHE", "off")
	cls, emb, texts := soakModels(t)
	models := []string{"--model", "cls=" + cls, "--model", "emb=" + emb, "--data", texts, "--instances", "1"}
	var out bytes.Buffer
	err := run(context.Background(), append([]string{"bench", "serve", "--soak", "3s", "--sample", "1s", "--clients", "4",
		"--rss-tolerance", "1000", "--goroutine-tolerance", "1000", "--goroutine-slack", "100000", "-json"}, models...), &out, io.Discard)
	require.NoError(t, err, "%s", &out)
	var rep benchServeReport
	require.NoError(t, json.Unmarshal(out.Bytes(), &rep), "%s", &out)
	require.NotNil(t, rep.Mix)
	res := rep.Mix.Result
	assert.True(t, rep.Mix.Flat, rep.Mix.Verdict)
	assert.Positive(t, res.Requests)
	assert.Equal(t, res.Requests, res.OK, "errors %d, refused %d, failed %d", res.Errors, res.Refused, res.Failed)
	assert.GreaterOrEqual(t, len(res.Samples), 2)
	byRoute := map[string][]string{}
	for _, tg := range res.Plan {
		byRoute[tg.Route] = append(byRoute[tg.Route], tg.Model)
	}
	assert.Equal(t, []string{"cls"}, byRoute["/predict"])
	assert.Equal(t, []string{"emb"}, byRoute["/embed"])
	assert.Equal(t, []string{"emb"}, byRoute["/v1/embeddings"])
	assert.Equal(t, []string{"cls", "emb"}, byRoute["/tokenize"])
	assert.Equal(t, []string{""}, byRoute["/metrics"])

	// The text form: the sample table, a row per target, the verdict.
	out.Reset()
	err = run(context.Background(), append([]string{"bench", "serve", "--mix", "/predict=3,/embed,/health", "--duration", "2s", "--clients", "2",
		"--rss-tolerance", "1000", "--goroutine-tolerance", "1000", "--goroutine-slack", "100000"}, models...), &out, io.Discard)
	require.NoError(t, err, "%s", &out)
	text := out.String()
	assert.Contains(t, text, "3 targets over 3 routes (a cycle of 6 requests)")
	assert.Contains(t, text, "rss MiB")
	assert.Contains(t, text, "\nflat: ")
	for _, row := range []string{"/predict cls 3 ", "/embed emb 2 ", "/health 1 "} {
		found := false
		for _, line := range strings.Split(text, "\n") {
			found = found || strings.HasPrefix(strings.Join(strings.Fields(line), " ")+" ", row)
		}
		assert.True(t, found, "no row %q in\n%s", row, text)
	}

	// Error responses (every inference past a 1ns --request-timeout)
	// fail the command.
	err = run(context.Background(), append([]string{"bench", "serve", "--mix", "/predict,/health", "--duration", "1s", "--clients", "2",
		"--request-timeout", "1ns"}, models...), io.Discard, io.Discard)
	if assert.Error(t, err) {
		assert.Contains(t, err.Error(), "error responses")
	}

	for _, c := range []struct{ flag, args string }{
		{"mix", "--mix /nope"}, {"mix", "--mix /embed=0"}, {"mix", "--mix /embed=101"}, {"mix", "--mix /embed,/embed"},
		{"soak", "--soak -1s"}, {"sample", "--sample -1s"}, {"sample", "--soak 2s --sample 2s"}, {"sample", "--sample 1s"},
		{"clients", "--mix all --clients 1,2"}, {"route", "--mix all --route /embed"}, {"rate", "--mix all --rate 2"},
		{"rss-tolerance", "--mix all --rss-tolerance NaN"}, {"goroutine-tolerance", "--mix all --goroutine-tolerance 1001"},
		{"goroutine-slack", "--mix all --goroutine-slack -1"},
	} {
		err := run(context.Background(), append(append([]string{"bench", "serve"}, strings.Fields(c.args)...), models...), io.Discard, io.Discard)
		if assert.Error(t, err, c.args) {
			assert.Contains(t, err.Error(), c.flag, c.args)
		}
	}
}
