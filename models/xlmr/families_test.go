package xlmr_test

import (
	"testing"

	"github.com/int8bert/int8bert/models/encoder"
	"github.com/int8bert/int8bert/models/encoder/encodertest"
	"github.com/int8bert/int8bert/models/xlmr"
)

// committed are the golden folders of models/testdata/golden of the
// RoBERTa-architecture families other than XLM-R.
var committed = []struct {
	name string
	fam  *encoder.Family
}{
	{"roberta-base-tiny", xlmr.RoBERTa},
	{"roberta-seqcls", xlmr.RoBERTa},
	{"camembert-base", xlmr.CamemBERT},
}

// TestGoldenFamilies: FP32 parity with Hugging Face on the committed
// RoBERTa and CamemBERT goldens.
func TestGoldenFamilies(t *testing.T) {
	sel := encodertest.Selector(t)
	for _, c := range committed {
		t.Run(c.name, func(t *testing.T) { encodertest.Golden(t, sel, encodertest.Repo(c.name), c.fam, 1e-5) })
	}
}

// TestGoldenFamiliesInt8: int8-static and int8-dynamic against FP32, and
// the saved artifact reloads bit-identical.
func TestGoldenFamiliesInt8(t *testing.T) {
	sel := encodertest.Selector(t)
	for _, c := range committed {
		t.Run(c.name, func(t *testing.T) { encodertest.GoldenInt8(t, sel, encodertest.Repo(c.name), c.fam, 0.99) })
	}
}

// TestGoldenFamiliesInt8Attention: INT8 attention against FP32 attention
// in the same INT8 model (docs/DESIGN.md section 3.10).
func TestGoldenFamiliesInt8Attention(t *testing.T) {
	sel := encodertest.Selector(t)
	for _, c := range committed {
		t.Run(c.name, func(t *testing.T) { encodertest.GoldenInt8Attention(t, sel, encodertest.Repo(c.name), c.fam, 0.999) })
	}
}
