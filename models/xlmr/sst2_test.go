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
