package xlmr_test

import (
	"testing"

	"github.com/int8bert/int8bert/models/encoder/encodertest"
	"github.com/int8bert/int8bert/models/xlmr"
)

// TestSST2Logits: the trained SST-2 model's logits as its golden.json.
func TestSST2Logits(t *testing.T) {
	encodertest.SST2Logits(t, encodertest.Selector(t), "sst2-xlmr-mini", xlmr.Family, 1e-5)
}

// TestSST2Tokens: our tokenizer, from each tokenizer file of the model's
// folder, gives the 64 golden sentences the reference's ids.
func TestSST2Tokens(t *testing.T) {
	encodertest.SST2Tokens(t, "sst2-xlmr-mini")
}

// TestSST2DevAccuracy: FP32 accuracy on the 872 SST-2 dev sentences, as the
// model's README states (tokenized by our tokenizer from its tokenizer.json).
func TestSST2DevAccuracy(t *testing.T) {
	encodertest.SST2Accuracy(t, encodertest.Selector(t), "sst2-xlmr-mini", xlmr.Family, 0.7935779690742493)
}

// TestSST2Int8: int8-static and int8-dynamic within 0.3 points of FP32 on
// SST-2 dev, logits cosine >= 0.999.
func TestSST2Int8(t *testing.T) {
	encodertest.SST2Int8(t, encodertest.Selector(t), "sst2-xlmr-mini", xlmr.Family)
}
