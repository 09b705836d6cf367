// Package distilbert maps Hugging Face DistilBERT checkpoints
// (DistilBertModel, ...ForSequenceClassification, ...ForQuestionAnswering)
// onto the shared encoder: no token types, its own tensor names, and the
// pre_classifier+ReLU+classifier head on the first token.
//
// distilbert imports models/encoder and checkpoint; it must not
// import the other family packages, models (which imports it), bench or
// the command.
package distilbert

import (
	"fmt"

	"github.com/int8bert/int8bert/checkpoint"
	"github.com/int8bert/int8bert/models/encoder"
)

// Family describes DistilBERT to the shared loader.
var Family = &encoder.Family{
	Name: "distilbert", DisplayName: "DistilBERT", ModelTypes: []string{"distilbert"}, Classes: []string{"DistilBert"}, Prefix: "distilbert.",
	Config: func(c *checkpoint.Config) (encoder.Config, error) {
		// With sinusoidal_pos_embds the fixed table is still saved in the
		// checkpoint, so it is read like a learned one.
		ec, err := encoder.CommonConfig(c)
		ec.TypeVocab = 0
		return ec, err
	},
	Names: func(p string) encoder.Names {
		return encoder.Names{
			WordEmb: p + "embeddings.word_embeddings.weight", PosEmb: p + "embeddings.position_embeddings.weight",
			EmbLN: p + "embeddings.LayerNorm.weight", EmbLNBias: p + "embeddings.LayerNorm.bias",
			Layer: func(i int) encoder.LayerNames {
				l := fmt.Sprintf("%stransformer.layer.%d.", p, i)
				return encoder.LayerNames{
					Q: l + "attention.q_lin.weight", QBias: l + "attention.q_lin.bias",
					K: l + "attention.k_lin.weight", KBias: l + "attention.k_lin.bias",
					V: l + "attention.v_lin.weight", VBias: l + "attention.v_lin.bias",
					O: l + "attention.out_lin.weight", OBias: l + "attention.out_lin.bias",
					AttnLN: l + "sa_layer_norm.weight", AttnLNBias: l + "sa_layer_norm.bias",
					FFN1: l + "ffn.lin1.weight", FFN1Bias: l + "ffn.lin1.bias",
					FFN2: l + "ffn.lin2.weight", FFN2Bias: l + "ffn.lin2.bias",
					OutLN: l + "output_layer_norm.weight", OutLNBias: l + "output_layer_norm.bias",
				}
			},
		}
	},
	Classifier: []encoder.DenseSpec{
		{Weight: "pre_classifier.weight", Bias: "pre_classifier.bias", Act: encoder.HeadReLU},
		{Weight: "classifier.weight", Bias: "classifier.bias"},
	},
	QA:              encoder.DenseSpec{Weight: "qa_outputs.weight", Bias: "qa_outputs.bias"},
	TokenClassifier: encoder.DenseSpec{Weight: "classifier.weight", Bias: "classifier.bias"},
	// DistilBertForMaskedLM: vocab_transform, the config's activation,
	// vocab_layer_norm, vocab_projector (tied to the word embeddings).
	MaskedLM: &encoder.MaskedLMSpec{
		Dense:     encoder.DenseSpec{Weight: "vocab_transform.weight", Bias: "vocab_transform.bias"},
		ConfigAct: true,
		LN:        "vocab_layer_norm.weight", LNBias: "vocab_layer_norm.bias",
		Decoder: "vocab_projector.weight",
		Bias:    []string{"vocab_projector.bias"},
	},
	Ignored: []string{"embeddings.position_ids"},
}
