// Package deberta maps Hugging Face DeBERTa-v2 and DeBERTa-v3 checkpoints
// (model_type "deberta-v2": DebertaV2Model, ...ForSequenceClassification,
// ...ForTokenClassification, ...ForQuestionAnswering) onto the shared
// encoder: BERT's layers with query_proj/key_proj/value_proj, the
// disentangled relative attention (encoder.Config.Dis: content-to-position
// and position-to-content terms over the shared, normalized relative
// embeddings), no absolute positions where position_biased_input is
// false, and the ContextPooler (dense + pooler_hidden_act on the first
// token) before the sequence classifier.
//
// deberta imports models/encoder and checkpoint; it must not import the
// other family packages, models (which imports it), bench or the command.
package deberta

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/int8bert/int8bert/checkpoint"
	"github.com/int8bert/int8bert/models/encoder"
)

// defaultLayerNormEps is DebertaV2Config's layer_norm_eps.
const defaultLayerNormEps = 1e-7

// Family describes DeBERTa-v2/v3 to the shared loader.
var Family = &encoder.Family{
	Name: "deberta-v2", DisplayName: "DeBERTa-v2", ModelTypes: []string{"deberta-v2"}, Classes: []string{"DebertaV2"},
	Prefix: "deberta.",
	Config: Config,
	Names: func(p string) encoder.Names {
		return encoder.Names{
			WordEmb: p + "embeddings.word_embeddings.weight", PosEmb: p + "embeddings.position_embeddings.weight",
			TypeEmb: p + "embeddings.token_type_embeddings.weight",
			EmbLN:   p + "embeddings.LayerNorm.weight", EmbLNBias: p + "embeddings.LayerNorm.bias",
			RelEmb: p + "encoder.rel_embeddings.weight",
			RelLN:  p + "encoder.LayerNorm.weight", RelLNBias: p + "encoder.LayerNorm.bias",
			Layer: func(i int) encoder.LayerNames {
				l := fmt.Sprintf("%sencoder.layer.%d.", p, i)
				a := l + "attention.self."
				return encoder.LayerNames{
					Q: a + "query_proj.weight", QBias: a + "query_proj.bias",
					K: a + "key_proj.weight", KBias: a + "key_proj.bias",
					V: a + "value_proj.weight", VBias: a + "value_proj.bias",
					PosQ: a + "pos_query_proj.weight", PosQBias: a + "pos_query_proj.bias",
					PosK: a + "pos_key_proj.weight", PosKBias: a + "pos_key_proj.bias",
					O: l + "attention.output.dense.weight", OBias: l + "attention.output.dense.bias",
					AttnLN: l + "attention.output.LayerNorm.weight", AttnLNBias: l + "attention.output.LayerNorm.bias",
					FFN1: l + "intermediate.dense.weight", FFN1Bias: l + "intermediate.dense.bias",
					FFN2: l + "output.dense.weight", FFN2Bias: l + "output.dense.bias",
					OutLN: l + "output.LayerNorm.weight", OutLNBias: l + "output.LayerNorm.bias",
				}
			},
		}
	},
	// The ContextPooler is named pooler.dense outside the deberta.
	// prefix and feeds only the classifier: it is the classifier's first
	// dense (on the first token), its activation pooler_hidden_act, which
	// Config admits as "gelu" only.
	Classifier: []encoder.DenseSpec{
		{Weight: "pooler.dense.weight", Bias: "pooler.dense.bias", Act: encoder.HeadGELU},
		{Weight: "classifier.weight", Bias: "classifier.bias"},
	},
	QA:              encoder.DenseSpec{Weight: "qa_outputs.weight", Bias: "qa_outputs.bias"},
	TokenClassifier: encoder.DenseSpec{Weight: "classifier.weight", Bias: "classifier.bias"},
	Ignored:         []string{"embeddings.position_ids"},
}

// raw decodes config.json's key into v when present and not null,
// reporting whether it did; a value of the wrong type is an error.
func raw(c *checkpoint.Config, key string, v any) (bool, error) {
	r, ok := c.Raw[key]
	if !ok || string(r) == "null" {
		return false, nil
	}
	if err := json.Unmarshal(r, v); err != nil {
		return false, fmt.Errorf("deberta: %s %s: %w", key, r, encoder.ErrConfig)
	}
	return true, nil
}

// Config maps a DebertaV2Config onto the engine's, as transformers 4.31's
// modeling_deberta_v2.py reads it, refusing what the engine does not
// compute: no relative attention, pos_att_type other than c2p and p2c,
// conv_kernel_size > 0 (the ConvLayer), attention_head_size other than
// hidden_size / num_attention_heads, embedding_size other than
// hidden_size, pooler_hidden_size other than hidden_size and a
// pooler_hidden_act other than gelu.
func Config(c *checkpoint.Config) (encoder.Config, error) {
	bad := func(format string, args ...any) (encoder.Config, error) {
		return encoder.Config{}, fmt.Errorf("deberta: %s: %w", fmt.Sprintf(format, args...), encoder.ErrConfig)
	}
	cc := *c
	cc.PositionEmbeddingType = "" // DeBERTa has no such key; ParseConfig defaults it
	if _, ok := c.Raw["layer_norm_eps"]; !ok {
		cc.LayerNormEps = defaultLayerNormEps
	}
	ec, err := encoder.CommonConfig(&cc)
	if err != nil {
		return ec, err
	}
	h := c.HiddenSize
	var (
		relative, shared, biased = false, false, true
		buckets, maxRel          = -1, -1
		convKernel               = 0
		headSize                 = h / c.NumAttentionHeads
		embSize, poolSize        = h, h
		poolAct                  = "gelu"
		norm                     = "none"
	)
	var posType json.RawMessage
	for _, f := range []struct {
		key string
		v   any
	}{
		{"relative_attention", &relative}, {"share_att_key", &shared}, {"position_biased_input", &biased},
		{"position_buckets", &buckets}, {"max_relative_positions", &maxRel}, {"conv_kernel_size", &convKernel},
		{"attention_head_size", &headSize}, {"embedding_size", &embSize}, {"pooler_hidden_size", &poolSize},
		{"pooler_hidden_act", &poolAct}, {"norm_rel_ebd", &norm}, {"pos_att_type", &posType},
	} {
		if _, err := raw(c, f.key, f.v); err != nil {
			return encoder.Config{}, err
		}
	}
	switch {
	case !relative:
		return bad("relative_attention false: only DeBERTa's relative attention is implemented")
	case convKernel > 0:
		return bad("conv_kernel_size %d: the convolution layer is not implemented", convKernel)
	case headSize != h/c.NumAttentionHeads:
		return bad("attention_head_size %d: want hidden_size / num_attention_heads = %d", headSize, h/c.NumAttentionHeads)
	case embSize != h:
		return bad("embedding_size %d: want hidden_size %d (the embeddings' projection is not implemented)", embSize, h)
	case poolSize != h:
		return bad("pooler_hidden_size %d: want hidden_size %d", poolSize, h)
	case poolAct != "gelu":
		return bad("pooler_hidden_act %q: only gelu is implemented", poolAct)
	}
	types, err := posAttTypes(posType)
	if err != nil {
		return encoder.Config{}, err
	}
	d := encoder.Disentangled{Shared: shared, C2P: slices.Contains(types, "c2p"), P2C: slices.Contains(types, "p2c")}
	for _, n := range strings.Split(strings.ToLower(norm), "|") {
		switch n = strings.TrimSpace(n); n {
		case "layer_norm":
			d.NormLN = true
		case "none", "":
		default:
			return bad("norm_rel_ebd %q: want none or layer_norm", norm)
		}
	}
	if maxRel < 1 {
		maxRel = c.MaxPositionEmbeddings
	}
	d.Span = maxRel
	if buckets > 0 {
		d.Span, d.Buckets, d.MaxPos = buckets, buckets, maxRel
	}
	ec.Dis = d
	ec.NoPositions = !biased
	return ec, ec.Validate()
}

// posAttTypes is pos_att_type as DebertaV2Config reads it: a list, or a
// string of names split at "|"; only c2p and p2c are implemented (the
// modeling code ignores any other name, so one is refused here rather than
// silently dropped).
func posAttTypes(r json.RawMessage) ([]string, error) {
	if len(r) == 0 || string(r) == "null" {
		return nil, nil
	}
	var list []string
	if err := json.Unmarshal(r, &list); err != nil {
		var s string
		if err := json.Unmarshal(r, &s); err != nil {
			return nil, fmt.Errorf("deberta: pos_att_type %s: want a list or a string: %w", r, encoder.ErrConfig)
		}
		for _, x := range strings.Split(strings.ToLower(s), "|") {
			list = append(list, strings.TrimSpace(x))
		}
	}
	for _, t := range list {
		if t != "c2p" && t != "p2c" {
			return nil, fmt.Errorf("deberta: pos_att_type %q: only c2p and p2c are implemented: %w", t, encoder.ErrConfig)
		}
	}
	return list, nil
}
