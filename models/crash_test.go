package models_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/int8bert/int8bert/internal/crashtest"
	"github.com/int8bert/int8bert/models"
	"github.com/int8bert/int8bert/models/encoder"
	"github.com/int8bert/int8bert/models/encoder/encodertest"
	"github.com/int8bert/int8bert/selector"
)

// crashModel is the committed tiny BERT token classifier (with its
// tokenizer) that the crash test quantizes and saves.
var crashModel = filepath.Join("testdata", "tasks", "bert-ner")

// TestCrashChild is the child process of TestCrashSave: it quantizes
// crashModel (INT8 dynamic, at load) and saves it into
// INT8BERT_CRASH_OUT, saying Ready once quantized. It runs only as that
// child.
func TestCrashChild(t *testing.T) {
	if crashtest.Child() != "quantize-save" {
		t.Skip("the child process of TestCrashSave; runs only under it")
	}
	// Every child must write the same artifact data (TestCrashSave
	// compares finished runs' bytes): a selector that chooses by timing
	// may pick other kernels in another process, and what they compute
	// or record would differ; the generic kernels are the same in each.
	sel, err := selector.New(selector.Options{CachePath: "off", Force: "generic", Reps: 1, RepTime: 100 * time.Microsecond})
	if err != nil {
		t.Fatal(err)
	}
	defer sel.Close()
	q, err := models.Load(context.Background(), crashModel, models.Options{Selector: sel, Precision: models.PrecisionInt8Dynamic})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	// The kills are drawn over Save: a kill while quantizing in memory
	// leaves the folder untouched and would prove nothing.
	crashtest.Ready()
	crashtest.Phase("save")
	if err := q.Save(os.Getenv("INT8BERT_CRASH_OUT")); err != nil {
		t.Fatal(err)
	}
	crashtest.Done()
}

// TestCrashSave kills a process that quantizes a model and saves it
// (docs/DESIGN.md section 6.1), half the runs into a folder holding a
// previous artifact of the model (INT8 static), half into an empty one.
// After each kill every file is the previous one or the new one whole;
// the folder over a previous artifact loads; an empty folder's either
// loads or is refused with an error naming what is missing.
func TestCrashSave(t *testing.T) {
	kills := 50
	if testing.Short() {
		kills = 3
	}
	sel := encodertest.Selector(t)
	prev := t.TempDir()
	{
		p, err := models.Load(context.Background(), crashModel, models.Options{Selector: sel,
			Precision: models.PrecisionInt8Static, Calib: []string{"Angela Merkel met Emmanuel Macron in Paris.", "The cat sat on the mat in Berlin."}})
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Save(prev); err != nil {
			t.Fatal(err)
		}
		p.Close()
	}
	prevArt, err := os.ReadFile(filepath.Join(prev, encoder.ArtifactFile))
	if err != nil {
		t.Fatal(err)
	}
	var newArt []byte
	base := t.TempDir()
	outOf := func(i int) string { return filepath.Join(base, strconv.Itoa(i+2)) }
	withPrev := func(i int) bool { return i%2 == 0 }
	outcomes := map[string]int{}
	res := crashtest.Kill(t, crashtest.Options{
		Op: "quantize-save", Test: "TestCrashChild", Kills: kills, Seed: 4,
		Env: func(i int) []string { return []string{"INT8BERT_CRASH_OUT=" + outOf(i)} },
		Before: func(i int) {
			out := outOf(i)
			if err := os.MkdirAll(out, 0o755); err != nil {
				t.Fatal(err)
			}
			if withPrev(i) {
				entries, err := os.ReadDir(prev)
				if err != nil {
					t.Fatal(err)
				}
				for _, e := range entries {
					b, err := os.ReadFile(filepath.Join(prev, e.Name()))
					if err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(filepath.Join(out, e.Name()), b, 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
		},
		After: func(i int, killed bool, phase string) {
			out := outOf(i)
			art, err := os.ReadFile(filepath.Join(out, encoder.ArtifactFile))
			state := "no artifact"
			switch {
			case err != nil:
			case bytes.Equal(art, prevArt):
				state = "previous artifact"
			case newArt == nil && !killed:
				newArt, state = art, "new artifact"
			case len(art) == len(newArt) && bytes.Equal(art[len(art)-4096:], newArt[len(newArt)-4096:]):
				// Two finished runs' artifacts differ in their recipe
				// (its hash and times); whole, they share length and data.
				state = "new artifact"
			default:
				t.Fatalf("run %d (killed %v in %q): the artifact (%d bytes) is neither the previous nor the new one", i, killed, phase, len(art))
			}
			for _, f := range []string{"config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"} {
				got, err := os.ReadFile(filepath.Join(out, f))
				want, _ := os.ReadFile(filepath.Join(crashModel, f))
				if err == nil && !bytes.Equal(got, want) {
					t.Fatalf("run %d: %s is a partial copy (%d of %d bytes)", i, f, len(got), len(want))
				}
			}
			p, err := models.Load(context.Background(), out, models.Options{Selector: sel})
			switch {
			case err == nil:
				if !p.Precision().Int8() {
					t.Fatalf("run %d: the folder left (%s) loads as %s", i, state, p.Precision())
				}
				p.Close()
				outcomes[state+", loads"]++
			case withPrev(i) || !killed:
				t.Fatalf("run %d (killed %v in %q, %s): the folder does not load: %v", i, killed, phase, state, err)
			case state != "no artifact" && !strings.Contains(err.Error(), "config.json") && !strings.Contains(err.Error(), "tokenizer"):
				t.Fatalf("run %d: a folder with an artifact is refused without naming the missing file: %v", i, err)
			default:
				outcomes[state+", refused"]++
			}
			if err := os.RemoveAll(out); err != nil {
				t.Fatal(err)
			}
		},
	})
	t.Logf("%v; outcomes %v", res, outcomes)
	if newArt == nil {
		t.Fatal("no run finished")
	}
}
