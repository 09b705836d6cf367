package bert_test

import (
	"testing"

	"github.com/int8bert/int8bert/models/bert"
	"github.com/int8bert/int8bert/models/encoder/encodertest"
)

// TestSST2Logits: the trained SST-2 model's logits as its golden.json.
func TestSST2Logits(t *testing.T) {
	encodertest.SST2Logits(t, encodertest.Selector(t), "sst2-bert-mini", bert.Family, 1e-5)
}
