// Package xlmr maps Hugging Face XLM-RoBERTa checkpoints (XLMRobertaModel,
// ...ForSequenceClassification, ...ForQuestionAnswering) onto the shared
// encoder: position ids counted from padding_idx+1, RoBERTa tensor names,
// and the dense+tanh+out_proj classification head on <s>.
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
var Family = &encoder.Family{
	Name: "xlm-roberta", DisplayName: "XLM-RoBERTa", ModelTypes: []string{"xlm-roberta", "roberta"}, Classes: []string{"XLMRoberta", "Roberta"}, Prefix: "roberta.",
	Config: func(c *checkpoint.Config) (encoder.Config, error) {
		ec, err := encoder.CommonConfig(c)
		if err != nil {
			return ec, err
		}
		if c.PadTokenID == nil {
			return ec, fmt.Errorf("xlmr: config has no pad_token_id, which numbers the positions: %w", encoder.ErrConfig)
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
	QA: encoder.DenseSpec{Weight: "qa_outputs.weight", Bias: "qa_outputs.bias"},
	// XLMRobertaForMaskedLM / RobertaForMaskedLM: lm_head (dense, exact
	// GELU whatever hidden_act says, layer_norm, decoder tied to the word
	// embeddings, bias).
	MaskedLM: &encoder.MaskedLMSpec{
		Dense: encoder.DenseSpec{Weight: "lm_head.dense.weight", Bias: "lm_head.dense.bias"},
		LN:    "lm_head.layer_norm.weight", LNBias: "lm_head.layer_norm.bias",
		Decoder: "lm_head.decoder.weight",
		Bias:    []string{"lm_head.bias", "lm_head.decoder.bias"},
	},
	Ignored: []string{"embeddings.position_ids"},
}
