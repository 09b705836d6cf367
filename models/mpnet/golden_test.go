package mpnet_test

import (
	"testing"

	"github.com/int8bert/int8bert/models/encoder/encodertest"
	"github.com/int8bert/int8bert/models/mpnet"
)

// goldens are the tiny MPNet checkpoints made by Hugging Face transformers
// 4.31 (scripts/oracle/make_mpnet_golden.py), committed with the
// repository: rows of 96, 70 and 23 tokens, so the relative position bias
// uses every bucket, the log-spaced ones included.
var goldens = []string{"../testdata/golden/mpnet-base", "../testdata/golden/mpnet-seqcls"}

// TestGolden: FP32 parity with Hugging Face (its float64 run) on the base
// and sequence classification checkpoints.
func TestGolden(t *testing.T) {
	sel := encodertest.Selector(t)
	for _, name := range goldens {
		t.Run(name, func(t *testing.T) { encodertest.Golden(t, sel, name, mpnet.Family, 1e-5) })
	}
}

// TestGoldenInt8: int8-static and int8-dynamic against FP32, and the
// saved artifact (which carries the bias table) reloads bit-identical.
func TestGoldenInt8(t *testing.T) {
	sel := encodertest.Selector(t)
	for _, name := range goldens {
		t.Run(name, func(t *testing.T) { encodertest.GoldenInt8(t, sel, name, mpnet.Family, 0.99) })
	}
}

// TestGoldenInt8Attention: INT8 attention (the bias added to its f32
// scores) against FP32 attention in the same INT8 model, both modes:
// cosine >= 0.999 and the same argmax (docs/DESIGN.md section 3.10).
func TestGoldenInt8Attention(t *testing.T) {
	sel := encodertest.Selector(t)
	for _, name := range goldens {
		t.Run(name, func(t *testing.T) { encodertest.GoldenInt8Attention(t, sel, name, mpnet.Family, 0.999) })
	}
}
