package models_test

import (
	"context"
	"sync"
	"testing"

	"github.com/int8bert/int8bert/models"
	"github.com/stretchr/testify/require"
)

// rowResult is what a Run gives for one sequence: its mean-pooled last
// hidden state (every token's row) and its classifier's logits.
type rowResult struct {
	emb, logits []float32
}

// runRows runs seqs in one RunWith under o and returns each sequence's
// result (nil for a sequence no Batch showed) and the passes run.
func runRows(t *testing.T, p *models.Pipeline, seqs []models.Sequence, o models.RunOptions) ([]*rowResult, int) {
	t.Helper()
	out := make([]*rowResult, len(seqs))
	passes := 0
	err := p.RunWith(context.Background(), seqs, o, func(b *models.Batch) error {
		passes++
		real, computed := b.Tokens()
		require.Equal(t, real, computed)
		for r, i := range b.Rows() {
			require.Nil(t, out[i], "sequence %d shown twice", i)
			emb, err := b.Embedding(r, models.PoolMean, false)
			require.NoError(t, err)
			c, err := b.Classification(r, models.ClassifyOptions{})
			require.NoError(t, err)
			out[i] = &rowResult{emb: emb, logits: c.Logits}
		}
		return nil
	})
	require.NoError(t, err)
	return out, passes
}

// TestRunDropsUnwantedRows: in one packed pass of 12 sequences of
// different lengths, the odd ones are refused from layer 2 on (decided by
// Wanted itself, from the layer it is asked about: no timing): they get
// no row, the tokens computed drop by exactly their share of the layers
// not run, and every other sequence's pooled hidden states and logits are
// bit for bit those of the uncancelled pass on the same model, at FP32
// and INT8-static. A pass all of whose rows leave shows no Batch, and a
// Wanted that keeps every row costs no allocation per layer.
func TestRunDropsUnwantedRows(t *testing.T) {
	texts := sst2(t, "dev.tsv", 12)
	// A few calibration texts: the test is about bits, not accuracy.
	calib := sst2(t, "train.tsv", 8)
	for _, prec := range []models.Precision{models.PrecisionFP32, models.PrecisionInt8Static} {
		t.Run(prec.String(), func(t *testing.T) {
			o := models.Options{Precision: prec}
			if prec != models.PrecisionFP32 {
				o.Calib = calib
			}
			p := sst2Model(t, "sst2-bert-mini", o)
			layers := p.Config().Layers
			require.GreaterOrEqual(t, layers, 3, "the test drops rows after layer 1 of a model with more")
			seqs := make([]models.Sequence, len(texts))
			total, dropped := 0, 0
			lens := map[int]bool{}
			for i, text := range texts {
				s, err := p.Encode(text, nil, models.EncodeOptions{Truncate: true})
				require.NoError(t, err)
				seqs[i] = s
				lens[s.Len()] = true
				total += s.Len()
				if i%2 == 1 {
					dropped += s.Len()
				}
			}
			require.Greater(t, len(lens), 4, "sequences of different lengths")

			var full models.RunStats
			want, passes := runRows(t, p, seqs, models.RunOptions{Stats: &full})
			require.Equal(t, 1, passes, "one packed pass")
			require.Equal(t, total, full.Tokens)
			require.Equal(t, total*layers, full.TokenLayers)
			require.Zero(t, full.Saved())

			var st models.RunStats
			got, passes := runRows(t, p, seqs, models.RunOptions{Stats: &st,
				Wanted: func(layer, seq int) bool { return layer < 2 || seq%2 == 0 }})
			require.Equal(t, 1, passes)
			for i := range seqs {
				if i%2 == 1 {
					require.Nil(t, got[i], "sequence %d left the pass: no row", i)
					continue
				}
				require.NotNil(t, got[i], "sequence %d", i)
				require.Equal(t, want[i].emb, got[i].emb, "sequence %d: hidden states bit for bit", i)
				require.Equal(t, want[i].logits, got[i].logits, "sequence %d: logits bit for bit", i)
			}
			require.Equal(t, total, st.Tokens)
			require.Equal(t, 2*total+(layers-2)*(total-dropped), st.TokenLayers)
			require.Equal(t, dropped*(layers-2)/layers, st.Saved())
			require.Less(t, st.Computed(), full.Computed(), "computed tokens drop")

			// Every row gone after layer 0: no Batch, one layer computed.
			var none models.RunStats
			_, passes = runRows(t, p, seqs, models.RunOptions{Stats: &none,
				Wanted: func(layer, seq int) bool { return layer < 1 }})
			require.Zero(t, passes)
			require.Equal(t, total, none.TokenLayers)
			// Gone before the pass: nothing computed.
			var before models.RunStats
			_, passes = runRows(t, p, seqs, models.RunOptions{Stats: &before,
				Wanted: func(int, int) bool { return false }})
			require.Zero(t, passes)
			require.Zero(t, before.TokenLayers)
			require.Equal(t, total, before.Saved())

			// Keeping every row allocates what Run does, plus a constant
			// (the live rows' state), not something per layer. (Under
			// -race, sync.Pool drops items at random: no steady count.)
			if syncPoolDrops() {
				t.Log("sync.Pool drops items in this build (-race): allocations not compared")
				return
			}
			run := func(o models.RunOptions) float64 {
				return testing.AllocsPerRun(5, func() {
					_ = p.RunWith(context.Background(), seqs, o, func(*models.Batch) error { return nil })
				})
			}
			plain := run(models.RunOptions{})
			kept := run(models.RunOptions{Wanted: func(int, int) bool { return true }})
			t.Logf("allocations: %v plain, %v with Wanted", plain, kept)
			require.LessOrEqual(t, kept-plain, 2.0, "allocations with every row wanted: %v against %v", kept, plain)
		})
	}
}

// syncPoolDrops reports whether sync.Pool drops what it is given, as it
// does at random under the race detector.
func syncPoolDrops() bool {
	var p sync.Pool
	for range 64 {
		p.Put(new(int))
		if p.Get() == nil {
			return true
		}
	}
	return false
}
