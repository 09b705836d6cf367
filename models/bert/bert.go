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
	Ignored:                 []string{"embeddings.position_ids"},
}
