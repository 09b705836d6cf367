// Package mpnet maps Hugging Face MPNet checkpoints (MPNetModel,
// ...ForSequenceClassification, ...ForQuestionAnswering; the encoder of
// sentence-transformers' all-mpnet-base-v2) onto the shared encoder:
// position ids counted from padding index 1 (as RoBERTa's), no token
// types, attention named attn.q/k/v/o, the relative position bias shared
// by all layers (encoder.Config.RelBuckets), and the dense+tanh+out_proj
// classification head on <s>.
//
// mpnet imports models/encoder and checkpoint; it must not import the
// other family packages, models (which imports it), bench or the command.
package mpnet

import (
	"encoding/json"
	"fmt"

	"github.com/int8bert/int8bert/checkpoint"
	"github.com/int8bert/int8bert/models/encoder"
)

// The constants of Hugging Face's modeling_mpnet.py (transformers 4.31):
// MPNetEmbeddings fixes padding_idx at 1 whatever pad_token_id says, and
// MPNetEncoder.compute_position_bias buckets with its defaults, 32 buckets
// and max distance 128, whatever relative_attention_num_buckets says (that
// only sizes the table).
const (
	paddingIdx  = 1
	buckets     = 32
	maxDistance = 128
)

// Family describes MPNet to the shared loader.
var Family = &encoder.Family{
	Name: "mpnet", DisplayName: "MPNet", ModelTypes: []string{"mpnet"}, Classes: []string{"MPNet"}, Prefix: "mpnet.",
	Config: func(c *checkpoint.Config) (encoder.Config, error) {
		ec, err := encoder.CommonConfig(c)
		if err != nil {
			return ec, err
		}
		table := buckets // MPNetConfig's default
		if raw, ok := c.Raw["relative_attention_num_buckets"]; ok {
			if err := json.Unmarshal(raw, &table); err != nil {
				return ec, fmt.Errorf("mpnet: relative_attention_num_buckets %s: %w", raw, encoder.ErrConfig)
			}
		}
		if table < buckets {
			return ec, fmt.Errorf("mpnet: relative_attention_num_buckets %d: Hugging Face's MPNet buckets relative positions into %d: %w",
				table, buckets, encoder.ErrConfig)
		}
		ec.TypeVocab = 0
		ec.PaddingIdx, ec.PositionsFromPadding = paddingIdx, true
		ec.RelBuckets, ec.RelMaxDistance, ec.RelTable = buckets, maxDistance, table
		return ec, ec.Validate()
	},
	Names: func(p string) encoder.Names {
		return encoder.Names{
			WordEmb: p + "embeddings.word_embeddings.weight", PosEmb: p + "embeddings.position_embeddings.weight",
			EmbLN: p + "embeddings.LayerNorm.weight", EmbLNBias: p + "embeddings.LayerNorm.bias",
			RelBias: p + "encoder.relative_attention_bias.weight",
			Layer: func(i int) encoder.LayerNames {
				l := fmt.Sprintf("%sencoder.layer.%d.", p, i)
				return encoder.LayerNames{
					Q: l + "attention.attn.q.weight", QBias: l + "attention.attn.q.bias",
					K: l + "attention.attn.k.weight", KBias: l + "attention.attn.k.bias",
					V: l + "attention.attn.v.weight", VBias: l + "attention.attn.v.bias",
					O: l + "attention.attn.o.weight", OBias: l + "attention.attn.o.bias",
					AttnLN: l + "attention.LayerNorm.weight", AttnLNBias: l + "attention.LayerNorm.bias",
					FFN1: l + "intermediate.dense.weight", FFN1Bias: l + "intermediate.dense.bias",
					FFN2: l + "output.dense.weight", FFN2Bias: l + "output.dense.bias",
					OutLN: l + "output.LayerNorm.weight", OutLNBias: l + "output.LayerNorm.bias",
				}
			},
		}
	},
	Pooler: &encoder.DenseSpec{Weight: "pooler.dense.weight", Bias: "pooler.dense.bias", Act: encoder.HeadTanh},
	Classifier: []encoder.DenseSpec{
		{Weight: "classifier.dense.weight", Bias: "classifier.dense.bias", Act: encoder.HeadTanh},
		{Weight: "classifier.out_proj.weight", Bias: "classifier.out_proj.bias"},
	},
	QA:              encoder.DenseSpec{Weight: "qa_outputs.weight", Bias: "qa_outputs.bias"},
	TokenClassifier: encoder.DenseSpec{Weight: "classifier.weight", Bias: "classifier.bias"},
	Ignored:         []string{"embeddings.position_ids"},
}
