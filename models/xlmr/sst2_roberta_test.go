package xlmr_test

import (
	"testing"

	"github.com/int8bert/int8bert/models/encoder/encodertest"
	"github.com/int8bert/int8bert/models/xlmr"
)

// robertaBPE is the RoBERTa SST-2 classifier with a byte-level BPE trained
// on SST-2, committed under assets/ (its README says how it was made).
const robertaBPE = "../../assets/sst2-roberta-bpe-mini"

// TestSST2RoBERTaBPETokens: our byte-level BPE, from the folder's
// tokenizer.json and from its vocab.json + merges.txt, gives the ids the
// reference (transformers' RobertaTokenizer, checked against the Rust
// tokenizers) gave the 64 golden sentences.
func TestSST2RoBERTaBPETokens(t *testing.T) {
	encodertest.SST2Tokens(t, robertaBPE)
}

// TestSST2RoBERTaBPELogits: the RoBERTa-BPE model's logits as its golden.json.
func TestSST2RoBERTaBPELogits(t *testing.T) {
	encodertest.SST2Logits(t, encodertest.Selector(t), robertaBPE, xlmr.RoBERTa, 1e-5)
}

// TestSST2RoBERTaBPEDevAccuracy: FP32 accuracy on the 872 SST-2 dev
// sentences, as the model's README states (text tokenized by our BPE).
func TestSST2RoBERTaBPEDevAccuracy(t *testing.T) {
	encodertest.SST2Accuracy(t, encodertest.Selector(t), robertaBPE, xlmr.RoBERTa, 0.7534403800964355)
}

// TestSST2RoBERTaBPEInt8: int8-static and int8-dynamic within 0.3 points
// of FP32 on SST-2 dev, logits cosine >= 0.999.
func TestSST2RoBERTaBPEInt8(t *testing.T) {
	encodertest.SST2Int8(t, encodertest.Selector(t), robertaBPE, xlmr.RoBERTa)
}
