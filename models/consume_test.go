package models_test

import (
	"context"
	"slices"
	"testing"

	"github.com/int8bert/int8bert/models"
	"github.com/int8bert/int8bert/models/encoder/encodertest"
)

// TestQuantizeConsume checks QuantizeOptions.Consume's accounting: the
// FP32 pipeline quantized with it holds no packed weights of its
// layers' linears once QuantizeInputs returns (its heads' and other
// weights stay until Close), and the
// INT8 model it made gives the bits of one quantized without it.
func TestQuantizeConsume(t *testing.T) {
	cfg := tinyBERTConfig(t)
	ctx := context.Background()
	sel := encodertest.Selector(t)
	in := &models.Inputs{Batch: 1, Seq: 16}
	for i := range 16 {
		in.IDs = append(in.IDs, int32(10+37*i))
		in.Mask = append(in.Mask, 1)
	}
	in.TypeIDs = make([]int32, 16)
	run := func(consume bool) ([]float32, models.ResidentBytes) {
		t.Helper()
		p, err := models.New(models.RandomWeights("bert-tiny", cfg, models.TaskBase, 1), cfg, models.Options{Selector: sel, Threads: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		if _, err := p.Forward(ctx, in, false); err != nil { // packs the FP32 linears
			t.Fatal(err)
		}
		if r := p.ResidentBytes(); r.PackedWeights < 4*2*(4*64*64+2*64*256) {
			t.Fatalf("FP32 packed weights %d before quantizing, want at least the linears' %d", r.PackedWeights, 4*2*(4*64*64+2*64*256))
		}
		q, err := p.QuantizeInputs(ctx, []*models.Inputs{in}, models.PrecisionInt8Static, models.QuantizeOptions{Consume: consume})
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close()
		out, err := q.Forward(ctx, in, false)
		if err != nil {
			t.Fatal(err)
		}
		return slices.Clone(out.Last), p.ResidentBytes()
	}
	kept, rk := run(false)
	consumed, rc := run(true)
	if rk.PackedWeights == 0 {
		t.Errorf("without Consume the FP32 pipeline holds no packed weights: %+v", rk)
	}
	// The pooler (a head: 64 x 64 FP32) is all that is left packed, in
	// the form its key's kernel chose on the shared selector: at most
	// twice its weights (a panel of 48 pads its 64 columns to 96; a
	// oneDNN form keeps the compact copy beside it). The layers' linears
	// were 12 times that.
	if pooler := int64(2 * 4 * 64 * 64); rc.PackedWeights > pooler {
		t.Errorf("with Consume the FP32 pipeline still holds %d bytes of packed weights, want at most the pooler's %d: %+v", rc.PackedWeights, pooler, rc)
	}
	if rc.OtherWeights != rk.OtherWeights {
		t.Errorf("other weights %d with Consume, %d without: want the same (released at Close)", rc.OtherWeights, rk.OtherWeights)
	}
	if !slices.Equal(kept, consumed) {
		t.Errorf("the INT8 model quantized with Consume differs from the one quantized without")
	}
}
