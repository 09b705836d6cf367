package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sweepCommands are the commands whose flags are swept.
var sweepCommands = [][]string{
	{"info"}, {"classify"}, {"embed"}, {"qa"}, {"fill-mask"}, {"ner"}, {"zero-shot"}, {"forward"},
	{"bench", "gemm"}, {"bench", "model"}, {"bench", "paper"}, {"bench", "serve"}, {"bench", "cold"},
	{"demo"}, {"quantize"}, {"eval"}, {"tune"}, {"tokenize"}, {"serve"}, {"health"},
}

// flagsOf are the flags of the command args names, seen as it parses -h.
func flagsOf(t *testing.T, args []string) *flag.FlagSet {
	t.Helper()
	var fs *flag.FlagSet
	seenFlags = func(f *flag.FlagSet) { fs = f }
	defer func() { seenFlags = nil }()
	_ = run(context.Background(), append(append([]string(nil), args...), "-h"), io.Discard, io.Discard)
	require.NotNil(t, fs, "%v parses no flags", args)
	return fs
}

// flagBad are the invalid values of a flag by the type its value holds.
func flagBad(v any) []string {
	switch v.(type) {
	case int, int64:
		return []string{"-1", "-9999999999", "1e999", "NaN"}
	case uint, uint64:
		return []string{"-1", "NaN"}
	case float64:
		return []string{"NaN", "Inf", "-Inf", "-1", "1e999"}
	case time.Duration:
		return []string{"-1s", "NaN"}
	}
	return nil
}

// TestEveryFlagRefusesInvalidValues: every numeric flag of every command
// (found by reflection on the flag set the command parses, so that a new
// flag is swept) given a negative (unless negativeMeans says what it
// means), NaN, infinite or overflowing value is refused with an error
// that names it, before the command does anything else: the context is
// cancelled and no model is given, so a value let through ends in
// another error.
func TestEveryFlagRefusesInvalidValues(t *testing.T) {
	t.Setenv("INT8BERT_TUNING_CACHE", "off")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var report []string
	checked := 0
	for _, cmd := range sweepCommands {
		fs := flagsOf(t, cmd)
		fs.VisitAll(func(f *flag.Flag) {
			g, ok := f.Value.(flag.Getter)
			if !ok {
				return
			}
			for _, v := range flagBad(g.Get()) {
				if negativeMeans[f.Name] && strings.HasPrefix(v, "-") {
					continue // a negative value means something (its help says what)
				}
				checked++
				done := make(chan error, 1)
				args := append(append([]string(nil), cmd...), "--"+f.Name+"="+v)
				go func() {
					defer func() {
						if p := recover(); p != nil {
							done <- fmt.Errorf("panic: %v", p)
						}
					}()
					done <- run(ctx, args, io.Discard, io.Discard)
				}()
				var err error
				select {
				case err = <-done:
				case <-time.After(30 * time.Second):
					t.Fatalf("%v: still running after 30s", args)
				}
				if err == nil || !strings.Contains(err.Error(), f.Name) {
					report = append(report, fmt.Sprintf("%v: %v", args, err))
				}
			}
		})
	}
	assert.Greater(t, checked, 200, "the sweep found too few flags")
	sort.Strings(report)
	assert.Empty(t, report, "%s", strings.Join(report, "\n"))
}

// TestEnumFlagsRefuseUnknownValues: a flag that takes one of a set of
// words (or a number in a domain) refuses anything else naming the flag
// and the value, before the command does anything (the context is
// cancelled: a value let through ends in another error), also where
// the command would not use it (SmoothQuant's flags at FP32).
func TestEnumFlagsRefuseUnknownValues(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	m := "../../assets/sst2-xlmr-mini"
	for _, c := range []struct {
		flag string
		args []string
	}{
		{"precision", []string{"classify", "--model", m, "--precision", "int4", "x"}},
		{"function_to_apply", []string{"classify", "--model", m, "--function-to-apply", "cube", "x"}},
		{"top-k", []string{"classify", "--model", m, "--top-k", "many", "x"}},
		{"range", []string{"classify", "--model", m, "--range", "median", "x"}},
		{"alpha", []string{"classify", "--model", m, "--alpha", "NaN", "x"}},
		{"alpha", []string{"embed", "--model", m, "--alpha", "1.5", "x"}},
		{"percentile", []string{"embed", "--model", m, "--percentile", "101", "x"}},
		{"percentile", []string{"classify", "--model", m, "--range", "percentile", "--percentile", "30", "x"}},
		{"pooling", []string{"embed", "--model", m, "--pooling", "median", "x"}},
		{"aggregation_strategy", []string{"ner", "--model", m, "--aggregation-strategy", "longest", "x"}},
		{"mode", []string{"quantize", "--model", m, "-o", "unused", "--mode", "median"}},
		{"range", []string{"quantize", "--model", m, "-o", "unused", "--range", "median"}},
		{"alpha", []string{"quantize", "--model", m, "-o", "unused", "--alpha", "2"}},
		{"pooling", []string{"serve", "--model", m, "--pooling", "median"}},
		{"precision", []string{"serve", "--model", m, "--precision", "int4"}},
		{"dtype", []string{"serve", "--model", m, "--dtype", "float8"}},
		{"dtype", []string{"bench", "gemm", "--dtypes", "int4"}},
		{"route", []string{"bench", "serve", "--model", m, "--route", "/x"}},
		{"rate", []string{"bench", "serve", "--model", m, "--rate", "NaN"}},
		{"architecture", []string{"bench", "model", "--arch", "bert-huge"}},
		{"task", []string{"eval", "--model", m, "--data", "x", "--task", "glue"}},
		{"precision", []string{"eval", "--model", m, "--data", "x", "--precision", "int4"}},
	} {
		err := run(ctx, c.args, io.Discard, io.Discard)
		if assert.Error(t, err, "%v", c.args) {
			assert.Contains(t, err.Error(), c.flag, "%v", c.args)
			assert.NotContains(t, err.Error(), "context canceled", "%v: checked after the work began", c.args)
		}
	}
}
