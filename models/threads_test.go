package models_test

import (
	"context"
	"math"
	"runtime"
	"testing"

	"github.com/int8bert/int8bert/checkpoint"
	"github.com/int8bert/int8bert/cpu"
	"github.com/int8bert/int8bert/models"
	"github.com/int8bert/int8bert/selector"
)

// tinyBERTConfig is the config of a 2-layer BERT of hidden size 64 (4
// heads, FFN 256, a vocabulary of 1,000), for random weights.
func tinyBERTConfig(t *testing.T) *checkpoint.Config {
	t.Helper()
	cfg, err := checkpoint.ParseConfig([]byte(`{"model_type": "bert", "architectures": ["BertModel"],
		"vocab_size": 1000, "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
		"intermediate_size": 256, "max_position_embeddings": 64, "type_vocab_size": 2, "pad_token_id": 0,
		"hidden_act": "gelu", "layer_norm_eps": 1e-12}`))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestThreadsSameBits runs one pass of a small random BERT (2 layers,
// hidden 64, 2 sequences of 48 tokens, the last padded) on 1, 2 and 3
// threads at each precision and wants the same bits from every count:
// the GEMMs split along N (and M) without changing any sum, attention
// runs per head, and LayerNorm and the quantization of the linears'
// inputs run by chunks of rows (docs/DESIGN.md, "One request on all its
// threads"). The FP32 linears are forced to one native kernel so that
// the selector picks the same for each thread count (its keys include
// the threads, and two FP32 kernels may round differently); the INT8
// ones are exact whichever it picks.
func TestThreadsSameBits(t *testing.T) {
	if !cpu.X86.AVX512F {
		t.Skip("the forced FP32 kernel (gemmF32_8x48) needs AVX-512")
	}
	if runtime.NumCPU() < 2 {
		t.Skip("needs 2 CPUs")
	}
	cfg := tinyBERTConfig(t)
	sel, err := selector.New(selector.Options{CachePath: "off", Reps: 1, Force: "gemmF32_8x48"})
	if err != nil {
		t.Skipf("cannot force gemmF32_8x48: %v", err)
	}
	t.Cleanup(func() { sel.Close() })
	tok := tokenInputs(1000, 2, 48, 5)
	in := &models.Inputs{Batch: tok.Batch, Seq: tok.Seq, IDs: tok.IDs, TypeIDs: tok.TypeIDs, Mask: tok.Mask}
	load := func(o models.Options) (*models.Pipeline, error) {
		return models.New(models.RandomWeights("bert-tiny", cfg, models.TaskBase, 1), cfg, o)
	}
	threadsSameBits(t, sel, load, []int{1, 2, min(3, runtime.NumCPU())}, allPrecisions, in)
}

// allPrecisions are the precisions whose passes the thread tests compare.
var allPrecisions = []models.Precision{models.PrecisionFP32, models.PrecisionInt8Static, models.PrecisionInt8Dynamic}

// threadsSameBits loads a model with load on each count of threads (the
// INT8 precisions calibrated on random batches) and wants the same bits
// of the last hidden state from every count, for each of ins.
func threadsSameBits(t *testing.T, sel *selector.Selector, load func(models.Options) (*models.Pipeline, error),
	threads []int, precs []models.Precision, ins ...*models.Inputs) {
	t.Helper()
	// Calibrated without type ids: XLM-R has one type.
	var calib []*models.Inputs
	for _, c := range calibBatches(1000, 2) {
		calib = append(calib, &models.Inputs{Batch: c.Batch, Seq: c.Seq, IDs: c.IDs, Mask: c.Mask})
	}
	for _, prec := range precs {
		t.Run(prec.String(), func(t *testing.T) {
			want := make([][]float32, len(ins))
			for _, th := range threads {
				o := models.Options{Selector: sel, Threads: th, Precision: prec}
				if prec.Int8() {
					o.CalibInputs = calib
				}
				p, err := load(o)
				if err != nil {
					t.Fatal(err)
				}
				for k, in := range ins {
					out, err := p.Forward(context.Background(), in, false)
					if err != nil {
						p.Close()
						t.Fatalf("%d threads, input %d: %v", th, k, err)
					}
					if want[k] == nil {
						want[k] = out.Last
						continue
					}
					for i, v := range out.Last {
						if math.Float32bits(v) != math.Float32bits(want[k][i]) {
							p.Close()
							t.Fatalf("%d threads, input %d: element %d is %v, %v on %d thread", th, k, i, v, want[k][i], threads[0])
						}
					}
				}
				p.Close()
			}
		})
	}
}

// TestThreadsSameBitsSeq128 is TestThreadsSameBits on one request of 128
// tokens, the shape issue 30 times: the golden BERT and XLM-R classifiers
// (XLM-R counts its positions past the padding, which the row chunks of
// the embeddings must do alone), padded and packed (two sequences, so a
// chunk straddles them), and a random BERT of BERT-base's widths (hidden
// 768, 12 heads, FFN 3072; 2 layers), whose GEMMs split along N into the
// same panel blocks as BERT-base's, on 1 and 2 threads.
func TestThreadsSameBitsSeq128(t *testing.T) {
	if !cpu.X86.AVX512F {
		t.Skip("the forced FP32 kernel (gemmF32_8x48) needs AVX-512")
	}
	if runtime.NumCPU() < 2 {
		t.Skip("needs 2 CPUs")
	}
	sel, err := selector.New(selector.Options{CachePath: "off", Reps: 1, Force: "gemmF32_8x48"})
	if err != nil {
		t.Skipf("cannot force gemmF32_8x48: %v", err)
	}
	t.Cleanup(func() { sel.Close() })
	threads := []int{1, 2}
	// seq128 is one padded sequence of 128 tokens (its last quarter
	// padding, id pad) and the same ids packed as two sequences.
	seq128 := func(pad int32, types bool) []*models.Inputs {
		tok := tokenInputs(1000, 1, 128, 7)
		padded := &models.Inputs{Batch: 1, Seq: 128, IDs: tok.IDs, Mask: tok.Mask}
		ids := append([]int32(nil), tok.IDs...)
		for i, mk := range tok.Mask {
			if mk == 0 {
				ids[i] = pad
			}
		}
		padded.IDs = ids
		// Packed: 77 + 51 real tokens, a padding id inside the first
		// (XLM-R's positions skip it).
		pids := append([]int32(nil), ids[:96]...)
		pids = append(pids, ids[:32]...)
		pids[40] = pad
		packed := &models.Inputs{Batch: 2, Lens: []int{77, 51}, IDs: pids}
		if types {
			padded.TypeIDs = tok.TypeIDs
			packed.TypeIDs = append(append([]int32(nil), tok.TypeIDs[:96]...), tok.TypeIDs[:32]...)
		}
		return []*models.Inputs{padded, packed}
	}
	for _, c := range []struct {
		name  string
		pad   int32
		types bool
	}{{"bert-seqcls", 0, true}, {"xlm-roberta-seqcls", 1, false}} {
		t.Run(c.name, func(t *testing.T) {
			dir := goldenDir(t, c.name)
			load := func(o models.Options) (*models.Pipeline, error) { return models.Load(context.Background(), dir, o) }
			precs := allPrecisions
			if testing.Short() {
				precs = precs[:2] // FP32 and INT8-static; dynamic in the long stage
			}
			threadsSameBits(t, sel, load, threads, precs, seq128(c.pad, c.types)...)
		})
	}
	t.Run("bert-base-widths", func(t *testing.T) {
		if testing.Short() {
			// About 20 s here, a minute under the race detector: the
			// long stage runs it.
			t.Skip("BERT-base's widths take a minute under -race -short; the long stage runs them")
		}
		cfg, err := checkpoint.ParseConfig([]byte(`{"model_type": "bert", "architectures": ["BertModel"],
			"vocab_size": 1000, "hidden_size": 768, "num_hidden_layers": 2, "num_attention_heads": 12,
			"intermediate_size": 3072, "max_position_embeddings": 128, "type_vocab_size": 2, "pad_token_id": 0,
			"hidden_act": "gelu", "layer_norm_eps": 1e-12}`))
		if err != nil {
			t.Fatal(err)
		}
		load := func(o models.Options) (*models.Pipeline, error) {
			return models.New(models.RandomWeights("bert-base-widths", cfg, models.TaskBase, 1), cfg, o)
		}
		threadsSameBits(t, sel, load, threads, allPrecisions, seq128(0, true)[0])
	})
}
