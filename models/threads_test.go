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
	cfg, err := checkpoint.ParseConfig([]byte(`{"model_type": "bert", "architectures": ["BertModel"],
		"vocab_size": 1000, "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
		"intermediate_size": 256, "max_position_embeddings": 64, "type_vocab_size": 2, "pad_token_id": 0,
		"hidden_act": "gelu", "layer_norm_eps": 1e-12}`))
	if err != nil {
		t.Fatal(err)
	}
	sel, err := selector.New(selector.Options{CachePath: "off", Reps: 1, Force: "gemmF32_8x48"})
	if err != nil {
		t.Skipf("cannot force gemmF32_8x48: %v", err)
	}
	t.Cleanup(func() { sel.Close() })
	tok := tokenInputs(1000, 2, 48, 5)
	in := &models.Inputs{Batch: tok.Batch, Seq: tok.Seq, IDs: tok.IDs, TypeIDs: tok.TypeIDs, Mask: tok.Mask}
	var calib []*models.Inputs
	for _, c := range calibBatches(1000, 2) {
		calib = append(calib, &models.Inputs{Batch: c.Batch, Seq: c.Seq, IDs: c.IDs, TypeIDs: c.TypeIDs, Mask: c.Mask})
	}
	threads := []int{1, 2, min(3, runtime.NumCPU())}
	for _, prec := range []models.Precision{models.PrecisionFP32, models.PrecisionInt8Static, models.PrecisionInt8Dynamic} {
		t.Run(prec.String(), func(t *testing.T) {
			var want []float32
			for _, th := range threads {
				o := models.Options{Selector: sel, Threads: th, Precision: prec}
				if prec.Int8() {
					o.CalibInputs = calib
				}
				p, err := models.New(models.RandomWeights("bert-tiny", cfg, models.TaskBase, 1), cfg, o)
				if err != nil {
					t.Fatal(err)
				}
				out, err := p.Forward(context.Background(), in, false)
				p.Close()
				if err != nil {
					t.Fatalf("%d threads: %v", th, err)
				}
				if want == nil {
					want = out.Last
					continue
				}
				for i, v := range out.Last {
					if math.Float32bits(v) != math.Float32bits(want[i]) {
						t.Fatalf("%d threads: element %d is %v, %v on %d thread", th, i, v, want[i], threads[0])
					}
				}
			}
		})
	}
}
