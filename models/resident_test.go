package models_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/int8bert/int8bert/models"
	"github.com/int8bert/int8bert/models/encoder"
	"github.com/int8bert/int8bert/models/encoder/encodertest"
)

// TestResidentBytes checks the accounting of a golden classifier against
// what its weights' sizes imply, at FP32 and INT8-static: the linears'
// weights once (4 bytes a weight at FP32, 1 at INT8) up to a few packed
// forms, the rest of the weights in float32, kinds that sum to the total,
// a Trim that keeps what the calls need and a Compact that keeps one
// packed form a linear (the same results after each).
func TestResidentBytes(t *testing.T) {
	shared := encodertest.SharedDir
	dir := filepath.Join(shared, "golden", "models", "bert-seqcls")
	if _, err := os.Stat(dir); os.IsNotExist(err) {
		t.Skipf("no golden model at %s", dir)
	}
	texts := []string{"w5 w6 w7", "w8 w9", "w5 w7 w9 w6 w8 w5"}
	for _, prec := range []encoder.Precision{encoder.PrecisionFP32, encoder.PrecisionInt8Static} {
		t.Run(prec.String(), func(t *testing.T) {
			o := models.Options{Threads: 1, Selector: encodertest.Selector(t), Precision: models.Precision(prec)}
			if prec.Int8() {
				o.Calib = texts
			}
			p, err := models.Load(context.Background(), encodertest.WordFolder(t, dir, false), o)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			c := p.Config()
			h, in, labels := c.Hidden, c.Intermediate, len(p.Labels())
			lin := c.Layers * (3*h*h + h*h + 2*h*in) // the four linears' weights
			perWeight := 4
			if prec != encoder.PrecisionFP32 {
				perWeight = 1
			}
			heads := 4 * (h*h + labels*h) // pooler and classifier, FP32
			packedMin := perWeight*lin + heads
			// Embeddings, LayerNorms, biases; INT8 adds per-channel scales
			// and smoothing (a few floats per row and column).
			other := 4 * ((c.Vocab+c.MaxPositions+c.TypeVocab)*h + 2*h + c.Layers*(4*h+3*h+h+in+h) + h + labels)
			check := func(when string, r models.ResidentBytes, packedMax int) {
				t.Helper()
				sum := r.PackedWeights + r.OtherWeights + r.Scratch + r.Tokenizer + r.Tuning
				if sum != r.Total {
					t.Errorf("%s: kinds sum to %d, total %d", when, sum, r.Total)
				}
				for name, v := range map[string]int64{"packed": r.PackedWeights, "other": r.OtherWeights, "scratch": r.Scratch,
					"tokenizer": r.Tokenizer, "tuning": r.Tuning} {
					if v < 0 {
						t.Errorf("%s: %s is %d", when, name, v)
					}
				}
				if r.PackedWeights < int64(packedMin) || r.PackedWeights > int64(packedMax) {
					t.Errorf("%s: packed weights %d, want %d to %d", when, r.PackedWeights, packedMin, packedMax)
				}
				if r.OtherWeights < int64(other) || r.OtherWeights > int64(other)*5/4 {
					t.Errorf("%s: other weights %d, want %d to %d", when, r.OtherWeights, other, other*5/4)
				}
				if r.Tokenizer <= 0 {
					t.Errorf("%s: tokenizer %d, want > 0", when, r.Tokenizer)
				}
				t.Logf("%s: %+v", when, r)
			}
			// As loaded: one compact copy of each linear (and its column
			// sums at INT8), no scratch.
			r := p.ResidentBytes()
			check("loaded", r, packedMin+4*c.Layers*(3*h+h+in+h)+heads)
			if r.Scratch != 0 {
				t.Errorf("loaded: scratch %d before any pass", r.Scratch)
			}
			ctx := context.Background()
			before, err := p.Classify(ctx, texts, models.ClassifyOptions{})
			if err != nil {
				t.Fatal(err)
			}
			// After a call: the packed forms the chosen kernels run on (a
			// few at most), the pass buffers in the pool.
			check("after a call", p.ResidentBytes(), 4*packedMin)
			p.Trim()
			p.Trim() // nothing ran since the first: what is left is kept
			after := p.ResidentBytes()
			check("trimmed", after, 4*packedMin)
			if after.Scratch != 0 {
				t.Errorf("trimmed: scratch %d, want the idle sets released", after.Scratch)
			}
			again, err := p.Classify(ctx, texts, models.ClassifyOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for i := range before {
				for j := range before[i].Scores {
					if before[i].Scores[j] != again[i].Scores[j] {
						t.Fatalf("text %d: score %d %v after Trim, %v before", i, j, again[i].Scores[j], before[i].Scores[j])
					}
				}
			}
			// At rest: one packed form a linear (and the INT8 column sums),
			// the others made again from it by the next call, exactly.
			if _, err := p.Classify(ctx, texts[:1], models.ClassifyOptions{}); err != nil { // a second row count
				t.Fatal(err)
			}
			p.Compact()
			check("compacted", p.ResidentBytes(), packedMin*5/4+4*c.Layers*(3*h+h+in+h)+heads)
			again, err = p.Classify(ctx, texts, models.ClassifyOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for i := range before {
				for j := range before[i].Scores {
					if before[i].Scores[j] != again[i].Scores[j] {
						t.Fatalf("text %d: score %d %v after Compact, %v before", i, j, again[i].Scores[j], before[i].Scores[j])
					}
				}
			}
		})
	}
}
