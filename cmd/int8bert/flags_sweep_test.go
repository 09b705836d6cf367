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
