// Package xlmr maps Hugging Face's RoBERTa-style checkpoints onto the
// shared encoder: XLM-RoBERTa (XLMRobertaModel, ...ForSequenceClassification,
// ...ForQuestionAnswering), RoBERTa (Roberta*) and CamemBERT (Camembert*).
// The three share one architecture (position ids counted from
// padding_idx+1, RoBERTa tensor names under "roberta.", the
// dense+tanh+out_proj classification head on <s>) and differ only in
// their names, model_type and tokenizer, so each Family is made by one
// constructor from those.
//
// xlmr imports models/encoder and checkpoint; it must not
// import the other family packages, models (which imports it), bench or
// the command.
package xlmr

import (
	"fmt"

	"github.com/int8bert/int8bert/checkpoint"
	"github.com/int8bert/int8bert/models/encoder"
)

// Family describes XLM-RoBERTa to the shared loader.
var Family = newFamily("xlm-roberta", "XLM-RoBERTa", "XLMRoberta")

// RoBERTa describes RoBERTa (model_type "roberta"; byte-level BPE
// tokenizer) to the shared loader.
var RoBERTa = newFamily("roberta", "RoBERTa", "Roberta")

// CamemBERT describes CamemBERT (model_type "camembert"; SentencePiece
// tokenizer) to the shared loader.
var CamemBERT = newFamily("camembert", "CamemBERT", "Camembert")

// newFamily is a RoBERTa-architecture family of model_type name whose
// Hugging Face classes start with class.
func newFamily(name, display, class string) *encoder.Family {
	return &encoder.Family{
		Name: name, DisplayName: display, ModelTypes: []string{name}, Classes: []string{class}, Prefix: "roberta.",
		Config: func(c *checkpoint.Config) (encoder.Config, error) {
			ec, err := encoder.CommonConfig(c)
			if err != nil {
				return ec, err
			}
			if c.PadTokenID == nil {
				return ec, fmt.Errorf("xlmr: %s config has no pad_token_id, which numbers the positions: %w", display, encoder.ErrConfig)
			}
			ec.PaddingIdx, ec.PositionsFromPadding = *c.PadTokenID, true
			return ec, ec.Validate()
		},
		Names:  encoder.BERTNames,
		Pooler: &encoder.DenseSpec{Weight: "pooler.dense.weight", Bias: "pooler.dense.bias", Act: encoder.HeadTanh},
		Classifier: []encoder.DenseSpec{
			{Weight: "classifier.dense.weight", Bias: "classifier.dense.bias", Act: encoder.HeadTanh},
			{Weight: "classifier.out_proj.weight", Bias: "classifier.out_proj.bias"},
		},
		QA:              encoder.DenseSpec{Weight: "qa_outputs.weight", Bias: "qa_outputs.bias"},
		TokenClassifier: encoder.DenseSpec{Weight: "classifier.weight", Bias: "classifier.bias"},
		// *ForMaskedLM: lm_head (dense, exact GELU whatever hidden_act
		// says, layer_norm, decoder tied to the word embeddings, bias).
		MaskedLM: &encoder.MaskedLMSpec{
			Dense: encoder.DenseSpec{Weight: "lm_head.dense.weight", Bias: "lm_head.dense.bias"},
			LN:    "lm_head.layer_norm.weight", LNBias: "lm_head.layer_norm.bias",
			Decoder: "lm_head.decoder.weight",
			Bias:    []string{"lm_head.bias", "lm_head.decoder.bias"},
		},
		Ignored: []string{"embeddings.position_ids"},
	}
}
