package encoder

import (
	"fmt"

	"github.com/int8bert/int8bert/checkpoint"
	"github.com/int8bert/int8bert/kernels"
)

// ActivationOf maps a config's hidden_act onto a kernel activation.
func ActivationOf(name string) (kernels.Activation, error) {
	switch name {
	case "gelu":
		return kernels.ActGELU, nil
	case "gelu_new", "gelu_pytorch_tanh", "gelu_fast":
		return kernels.ActGELUTanh, nil
	case "relu":
		return kernels.ActReLU, nil
	}
	return 0, fmt.Errorf("encoder: activation %q: %w", name, ErrConfig)
}

// CommonConfig maps the fields BERT-like configs share onto Config after
// checkpoint's validation.
func CommonConfig(c *checkpoint.Config) (Config, error) {
	if err := c.Validate(); err != nil {
		return Config{}, fmt.Errorf("%w: %w", err, ErrConfig)
	}
	act, err := ActivationOf(c.HiddenAct)
	if err != nil {
		return Config{}, err
	}
	if c.PositionEmbeddingType != "" && c.PositionEmbeddingType != "absolute" {
		return Config{}, fmt.Errorf("encoder: position_embedding_type %q: %w", c.PositionEmbeddingType, ErrConfig)
	}
	return Config{
		Vocab: c.VocabSize, Hidden: c.HiddenSize, Layers: c.NumHiddenLayers, Heads: c.NumAttentionHeads,
		Intermediate: c.IntermediateSize, MaxPositions: c.MaxPositionEmbeddings, TypeVocab: c.TypeVocabSize,
		LayerNormEps: float32(c.LayerNormEpsilon()), Activation: act,
	}, nil
}

// BERTNames are the tensor names BERT and RoBERTa-style models use.
func BERTNames(prefix string) Names {
	p := prefix
	return Names{
		WordEmb: p + "embeddings.word_embeddings.weight", PosEmb: p + "embeddings.position_embeddings.weight",
		TypeEmb: p + "embeddings.token_type_embeddings.weight",
		EmbLN:   p + "embeddings.LayerNorm.weight", EmbLNBias: p + "embeddings.LayerNorm.bias",
		Layer: func(i int) LayerNames {
			l := fmt.Sprintf("%sencoder.layer.%d.", p, i)
			return LayerNames{
				Q: l + "attention.self.query.weight", QBias: l + "attention.self.query.bias",
				K: l + "attention.self.key.weight", KBias: l + "attention.self.key.bias",
				V: l + "attention.self.value.weight", VBias: l + "attention.self.value.bias",
				O: l + "attention.output.dense.weight", OBias: l + "attention.output.dense.bias",
				AttnLN: l + "attention.output.LayerNorm.weight", AttnLNBias: l + "attention.output.LayerNorm.bias",
				FFN1: l + "intermediate.dense.weight", FFN1Bias: l + "intermediate.dense.bias",
				FFN2: l + "output.dense.weight", FFN2Bias: l + "output.dense.bias",
				OutLN: l + "output.LayerNorm.weight", OutLNBias: l + "output.LayerNorm.bias",
			}
		},
	}
}
