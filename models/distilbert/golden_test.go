package distilbert_test

import (
	"testing"

	"github.com/int8bert/int8bert/models/distilbert"
	"github.com/int8bert/int8bert/models/encoder/encodertest"
)

// TestGolden: FP32 parity with Hugging Face on the base, sequence
// classification and question answering checkpoints.
func TestGolden(t *testing.T) {
	sel := encodertest.Selector(t)
	for _, name := range []string{"distilbert-base", "distilbert-seqcls", "distilbert-qa"} {
		t.Run(name, func(t *testing.T) { encodertest.Golden(t, sel, name, distilbert.Family, 1e-5) })
	}
}

// TestGoldenInt8: every head in int8-static and int8-dynamic against FP32,
// and the saved artifact reloads bit-identical.
func TestGoldenInt8(t *testing.T) {
	sel := encodertest.Selector(t)
	for _, name := range []string{"distilbert-base", "distilbert-seqcls", "distilbert-qa"} {
		t.Run(name, func(t *testing.T) { encodertest.GoldenInt8(t, sel, name, distilbert.Family, 0.99) })
	}
}

// TestGoldenInt8Attention: INT8 attention against FP32 attention in the
// same INT8 model, both modes: cosine >= 0.999 and the same argmax
// (docs/DESIGN.md section 3.10).
func TestGoldenInt8Attention(t *testing.T) {
	sel := encodertest.Selector(t)
	for _, name := range []string{"distilbert-base", "distilbert-seqcls", "distilbert-qa"} {
		t.Run(name, func(t *testing.T) { encodertest.GoldenInt8Attention(t, sel, name, distilbert.Family, 0.999) })
	}
}
