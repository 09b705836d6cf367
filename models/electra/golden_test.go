package electra_test

import (
	"testing"

	"github.com/int8bert/int8bert/models/electra"
	"github.com/int8bert/int8bert/models/encoder/encodertest"
)

// goldens are the committed ELECTRA goldens (models/testdata/golden):
// electra-base projects its 16-wide embeddings onto the hidden size 32,
// electra-seqcls has embeddings as wide as the hidden size;
// electra-discriminator is an ElectraForPreTraining (projected
// embeddings, the replaced-token detection head).
var goldens = []string{"electra-base", "electra-seqcls", "electra-discriminator"}

// TestGolden: FP32 parity with Hugging Face on the base model (with
// embeddings_project), the sequence classifier (dense+GELU+out_proj) and
// the discriminator (its per-token logits).
func TestGolden(t *testing.T) {
	sel := encodertest.Selector(t)
	for _, name := range goldens {
		t.Run(name, func(t *testing.T) { encodertest.Golden(t, sel, encodertest.Repo(name), electra.Family, 1e-5) })
	}
}

// TestGoldenInt8: int8-static and int8-dynamic against FP32 (the
// projection stays FP32 and the first layer quantizes its own input),
// and the saved artifact reloads bit-identical.
func TestGoldenInt8(t *testing.T) {
	sel := encodertest.Selector(t)
	for _, name := range goldens {
		t.Run(name, func(t *testing.T) { encodertest.GoldenInt8(t, sel, encodertest.Repo(name), electra.Family, 0.99) })
	}
}

// TestGoldenInt8Attention: INT8 attention against FP32 attention in the
// same INT8 model (docs/DESIGN.md section 3.10).
func TestGoldenInt8Attention(t *testing.T) {
	sel := encodertest.Selector(t)
	for _, name := range goldens {
		t.Run(name, func(t *testing.T) {
			encodertest.GoldenInt8Attention(t, sel, encodertest.Repo(name), electra.Family, 0.999)
		})
	}
}
