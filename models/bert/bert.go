// Package bert maps Hugging Face BERT checkpoints (BertModel,
// BertForSequenceClassification, BertForQuestionAnswering) onto the shared
// encoder: configuration, tensor names and heads.
//
// bert imports models/encoder and checkpoint; it must not
// import the other family packages, models (which imports it), bench or
// the command.
package bert

import (
	"github.com/int8bert/int8bert/checkpoint"
	"github.com/int8bert/int8bert/models/encoder"
)

// Family describes BERT to the shared loader.
var Family = &encoder.Family{
	Name: "bert", DisplayName: "BERT", ModelTypes: []string{"bert"}, Classes: []string{"Bert"}, Prefix: "bert.",
	Config: func(c *checkpoint.Config) (encoder.Config, error) { return encoder.CommonConfig(c) },
	Names:  encoder.BERTNames,
	Pooler: &encoder.DenseSpec{Weight: "pooler.dense.weight", Bias: "pooler.dense.bias", Act: encoder.HeadTanh},
	// BERT classifies the pooler output.
	PoolerForClassification: true,
	Classifier:              []encoder.DenseSpec{{Weight: "classifier.weight", Bias: "classifier.bias"}},
	QA:                      encoder.DenseSpec{Weight: "qa_outputs.weight", Bias: "qa_outputs.bias"},
	TokenClassifier:         encoder.DenseSpec{Weight: "classifier.weight", Bias: "classifier.bias"},
	// BertForMaskedLM: cls.predictions (transform dense + hidden_act +
	// LayerNorm, decoder tied to the word embeddings, bias); a
	// pre-training checkpoint's next-sentence head is left unread.
	MaskedLM: &encoder.MaskedLMSpec{
		Dense:     encoder.DenseSpec{Weight: "cls.predictions.transform.dense.weight", Bias: "cls.predictions.transform.dense.bias"},
		ConfigAct: true,
		LN:        "cls.predictions.transform.LayerNorm.weight", LNBias: "cls.predictions.transform.LayerNorm.bias",
		Decoder: "cls.predictions.decoder.weight",
		Bias:    []string{"cls.predictions.bias", "cls.predictions.decoder.bias"},
		Ignored: []string{"cls.seq_relationship.weight", "cls.seq_relationship.bias"},
	},
	Ignored: []string{"embeddings.position_ids"},
}
