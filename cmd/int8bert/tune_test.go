package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/int8bert/int8bert/selector"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTuneModel checks that tune --model tunes the model's own keys and
// writes its tuning record into the folder, after which a second run (the
// user cache off) tunes nothing; and that the flags are checked.
func TestTuneModel(t *testing.T) {
	src := sharedPath(t, "golden/models/bert-seqcls")
	dir := t.TempDir()
	for _, f := range []string{"config.json", "model.safetensors"} {
		b, err := os.ReadFile(filepath.Join(src, f))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), b, 0o644))
	}
	t.Setenv("INT8BERT_KERNEL", "")
	type report struct {
		Record  string `json:"record"`
		Tuned   int    `json:"tuned"`
		Cached  int    `json:"from_cache"`
		Choices []struct {
			Key    string `json:"key"`
			Kernel string `json:"kernel"`
		} `json:"choices"`
	}
	args := []string{"tune", "--model", dir, "--max-batch", "2", "--max-length", "8", "-cache", "off", "-reps", "1", "-rep-time", "100us", "-json"}
	var r report
	require.NoError(t, json.Unmarshal([]byte(mustCLI(t, args...)), &r))
	assert.Equal(t, filepath.Join(dir, "tuning.json"), r.Record)
	assert.NotEmpty(t, r.Choices)
	assert.Equal(t, len(r.Choices), r.Tuned)
	_, err := os.Stat(r.Record)
	require.NoError(t, err)

	var again report
	require.NoError(t, json.Unmarshal([]byte(mustCLI(t, args...)), &again))
	assert.Equal(t, 0, again.Tuned, "the record left keys to tune")
	assert.Equal(t, len(r.Choices), again.Cached)

	out := mustCLI(t, "tune", "--model", dir, "--max-batch", "1", "--max-length", "4", "-cache", "off", "-reps", "1", "-rep-time", "100us", "--record=false")
	assert.Contains(t, out, "record: none")

	wantCLIError(t, "--shapes is for the BERT shapes", "tune", "--model", dir, "--shapes", "8x8x8")
	wantCLIError(t, "--max-batch must be >= 1", "tune", "--model", dir, "--max-batch", "0")
	wantCLIError(t, "--max-length needs --model", "tune", "--max-length", "8")
}

// TestTuneProgress: a run of tunings is announced after half a second, a
// line a second at most, whole lines; a run shorter than that says
// nothing, and a gap of a second starts a new run.
func TestTuneProgress(t *testing.T) {
	var out bytes.Buffer
	clock := time.Unix(0, 0)
	p := &tuneProgress{w: &out, now: func() time.Time { return clock }}
	key := selector.F32KernelKey(8, 64, 8, 1)
	tune := func(d time.Duration) {
		p.event(selector.TuneEvent{Key: key})
		clock = clock.Add(d)
		p.event(selector.TuneEvent{Key: key, Done: true, Took: d})
	}
	tune(100 * time.Millisecond)
	tune(100 * time.Millisecond)
	assert.Empty(t, out.String(), "a short run says nothing")
	for range 10 {
		tune(200 * time.Millisecond) // 2.2 s in all
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	require.Len(t, lines, 2, "%q", out.String())
	assert.Contains(t, lines[0], "tuning kernels for new shapes: 4 done, 0.6 s")
	assert.Contains(t, lines[1], "9 done, 1.6 s")
	assert.True(t, strings.HasSuffix(out.String(), "\n"), "whole lines")

	out.Reset()
	clock = clock.Add(2 * time.Second) // a new run
	tune(100 * time.Millisecond)
	assert.Empty(t, out.String())

	// The background tuner's line says what its thread runs at.
	out.Reset()
	clock = clock.Add(2 * time.Second)
	for range 6 {
		p.event(selector.TuneEvent{Key: key, Background: "idle (SCHED_IDLE)"})
		clock = clock.Add(200 * time.Millisecond)
		p.event(selector.TuneEvent{Key: key, Done: true, Took: 200 * time.Millisecond, Background: "idle (SCHED_IDLE)"})
	}
	assert.Contains(t, out.String(), "; in the background at idle (SCHED_IDLE))")
}
