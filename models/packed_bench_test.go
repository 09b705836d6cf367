package models_test

import (
	"context"
	"slices"
	"sort"
	"testing"

	"github.com/int8bert/int8bert/models"
)

// BenchmarkEmbedPaddedVsPacked embeds the first 512 SST-2 dev sentences
// on sst2-bert-mini at INT8-static, one thread: "padded" as the pipeline
// did before packing (sorted longest first, micro-batches of at most
// 2,048 rows x padded length, each padded to its longest), "packed" as
// the pipeline does now (Run of the encoded sentences, mean-pooled:
// passes of at most 2,048 real tokens). Neither times the tokenizer. It reports
// sentences/s and, for padded, the share of computed tokens that are
// padding.
//
//	go test ./models -run '^$' -bench EmbedPaddedVsPacked -benchtime 5x
func BenchmarkEmbedPaddedVsPacked(b *testing.B) {
	ctx := context.Background()
	texts := sst2(b, "dev.tsv", 512)
	p := sst2Model(b, "sst2-bert-mini", models.Options{Precision: models.PrecisionInt8Static, Calib: sst2(b, "train.tsv", 256)})
	var seqs [][]int32
	var enc []models.Sequence
	for _, t := range texts {
		s, err := p.Encode(t, nil, models.EncodeOptions{Truncate: true})
		if err != nil {
			b.Fatal(err)
		}
		seqs, enc = append(seqs, s.IDs()), append(enc, s)
	}
	// The old plan: padded micro-batches under the budget.
	order := make([]int, len(seqs))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, c int) bool { return len(seqs[order[a]]) > len(seqs[order[c]]) })
	var padded []*models.Inputs
	real, computed := 0, 0
	for i := 0; i < len(order); {
		seq := len(seqs[order[i]])
		j := min(i+max(models.DefaultMaxBatchTokens/seq, 1), len(order))
		in := &models.Inputs{Batch: j - i, Seq: seq}
		for _, k := range order[i:j] {
			s := seqs[k]
			in.IDs = append(in.IDs, s...)
			in.IDs = append(in.IDs, make([]int32, seq-len(s))...)
			in.Mask = append(in.Mask, slices.Repeat([]int32{1}, len(s))...)
			in.Mask = append(in.Mask, make([]int32, seq-len(s))...)
			real += len(s)
		}
		computed += len(in.IDs)
		padded = append(padded, in)
		i = j
	}
	// Warm both ways' shapes once.
	run := func() {
		for _, in := range padded {
			out, err := p.Forward(context.Background(), in, false)
			if err != nil {
				b.Fatal(err)
			}
			_ = out.MeanPool(in.Mask)
		}
	}
	runPacked := func() {
		err := p.Run(ctx, enc, func(bt *models.Batch) error {
			for r := range bt.Rows() {
				if _, err := bt.Embedding(r, models.PoolMean, false); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	run()
	runPacked()
	b.Run("padded", func(b *testing.B) {
		for b.Loop() {
			run()
		}
		b.ReportMetric(float64(len(texts)*b.N)/b.Elapsed().Seconds(), "sentences/s")
		b.ReportMetric(100*float64(computed-real)/float64(computed), "%padding")
	})
	b.Run("packed", func(b *testing.B) {
		for b.Loop() {
			runPacked()
		}
		b.ReportMetric(float64(len(texts)*b.N)/b.Elapsed().Seconds(), "sentences/s")
	})
}
