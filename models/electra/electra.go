// Package electra maps Hugging Face ELECTRA discriminator checkpoints
// (ElectraModel, ...ForSequenceClassification, ...ForQuestionAnswering,
// ...ForTokenClassification, and ...ForPreTraining as the discriminators
// are published: the replaced-token detection head)
// onto the shared encoder: BERT's layers and absolute positions, with
// embeddings embedding_size wide projected onto the hidden size by
// embeddings_project where the two differ, no pooler, and the
// dense+GELU+out_proj classification head on the first token.
//
// electra imports models/encoder and checkpoint; it must not
// import the other family packages, models (which imports it), bench or
// the command.
package electra

import (
	"fmt"

	"github.com/int8bert/int8bert/checkpoint"
	"github.com/int8bert/int8bert/models/encoder"
)

// DefaultEmbeddingSize is the embedding_size of a config.json that has
// none: ElectraConfig's default in transformers.
const DefaultEmbeddingSize = 128

// Family describes ELECTRA to the shared loader.
var Family = &encoder.Family{
	Name: "electra", DisplayName: "ELECTRA", ModelTypes: []string{"electra"}, Classes: []string{"Electra"}, Prefix: "electra.",
	Config: func(c *checkpoint.Config) (encoder.Config, error) {
		ec, err := encoder.CommonConfig(c)
		if err != nil {
			return ec, err
		}
		if ec.Embedding, err = EmbeddingSize(c); err != nil {
			return ec, err
		}
		return ec, ec.Validate()
	},
	Names: func(p string) encoder.Names {
		n := encoder.BERTNames(p)
		n.EmbProj, n.EmbProjBias = p+"embeddings_project.weight", p+"embeddings_project.bias"
		return n
	},
	Classifier: []encoder.DenseSpec{
		{Weight: "classifier.dense.weight", Bias: "classifier.dense.bias", Act: encoder.HeadGELU},
		{Weight: "classifier.out_proj.weight", Bias: "classifier.out_proj.bias"},
	},
	QA:              encoder.DenseSpec{Weight: "qa_outputs.weight", Bias: "qa_outputs.bias"},
	TokenClassifier: encoder.DenseSpec{Weight: "classifier.weight", Bias: "classifier.bias"},
	// ElectraForPreTraining, as google/electra-*-discriminator are
	// published: the replaced-token detection head, read where present.
	Discriminator: &encoder.DiscriminatorSpec{
		Dense:      encoder.DenseSpec{Weight: "discriminator_predictions.dense.weight", Bias: "discriminator_predictions.dense.bias"},
		Prediction: encoder.DenseSpec{Weight: "discriminator_predictions.dense_prediction.weight", Bias: "discriminator_predictions.dense_prediction.bias"},
	},
	Ignored: []string{"embeddings.position_ids", "embeddings.token_type_ids"},
}

// EmbeddingSize is config.json's embedding_size (DefaultEmbeddingSize
// when absent or null, as transformers reads it); not a positive integer
// is an error wrapping encoder.ErrConfig.
func EmbeddingSize(c *checkpoint.Config) (int, error) {
	switch raw, ok := c.Raw["embedding_size"]; {
	case c.EmbeddingSize > 0:
		return c.EmbeddingSize, nil
	case ok && string(raw) != "null":
		return 0, fmt.Errorf("electra: embedding_size %s: want a positive integer: %w", raw, encoder.ErrConfig)
	}
	return DefaultEmbeddingSize, nil
}
