package bench

import (
	"fmt"
	"sort"
	"strings"

	"github.com/int8bert/int8bert/checkpoint"
	"github.com/int8bert/int8bert/models"
)

// Arch is a named model architecture with the shapes of a published
// Hugging Face checkpoint, for benchmarking without downloading weights
// (`int8bert bench model --arch NAME`).
type Arch struct {
	Name string
	// Config is the checkpoint's config.json as checkpoint.ParseConfig
	// reads it (DistilBERT's names normalised onto the common ones).
	Config *checkpoint.Config
}

// archDef is a registered architecture: the config.json of the Hugging
// Face model it copies (its model_type picks the family, as models.Load
// does).
type archDef struct {
	config string
}

// The config.json files of the Hugging Face models, with the keys that
// matter to ParseConfig and to the shapes.
var archDefs = map[string]archDef{
	// bert-base-uncased
	"bert-base": {`{
  "architectures": ["BertForMaskedLM"],
  "attention_probs_dropout_prob": 0.1,
  "hidden_act": "gelu",
  "hidden_dropout_prob": 0.1,
  "hidden_size": 768,
  "initializer_range": 0.02,
  "intermediate_size": 3072,
  "layer_norm_eps": 1e-12,
  "max_position_embeddings": 512,
  "model_type": "bert",
  "num_attention_heads": 12,
  "num_hidden_layers": 12,
  "pad_token_id": 0,
  "position_embedding_type": "absolute",
  "type_vocab_size": 2,
  "vocab_size": 30522
}`},
	// bert-large-uncased
	"bert-large": {`{
  "architectures": ["BertForMaskedLM"],
  "attention_probs_dropout_prob": 0.1,
  "hidden_act": "gelu",
  "hidden_dropout_prob": 0.1,
  "hidden_size": 1024,
  "initializer_range": 0.02,
  "intermediate_size": 4096,
  "layer_norm_eps": 1e-12,
  "max_position_embeddings": 512,
  "model_type": "bert",
  "num_attention_heads": 16,
  "num_hidden_layers": 24,
  "pad_token_id": 0,
  "position_embedding_type": "absolute",
  "type_vocab_size": 2,
  "vocab_size": 30522
}`},
	// distilbert-base-uncased: DistilBERT's own key names, no token types,
	// no layer_norm_eps (the modeling code uses 1e-12).
	"distilbert": {`{
  "activation": "gelu",
  "architectures": ["DistilBertForMaskedLM"],
  "attention_dropout": 0.1,
  "dim": 768,
  "dropout": 0.1,
  "hidden_dim": 3072,
  "initializer_range": 0.02,
  "max_position_embeddings": 512,
  "model_type": "distilbert",
  "n_heads": 12,
  "n_layers": 6,
  "pad_token_id": 0,
  "qa_dropout": 0.1,
  "seq_classif_dropout": 0.2,
  "sinusoidal_pos_embds": false,
  "tie_weights_": true,
  "vocab_size": 30522
}`},
	// xlm-roberta-base
	"xlmr-base": {`{
  "architectures": ["XLMRobertaForMaskedLM"],
  "attention_probs_dropout_prob": 0.1,
  "bos_token_id": 0,
  "eos_token_id": 2,
  "hidden_act": "gelu",
  "hidden_dropout_prob": 0.1,
  "hidden_size": 768,
  "initializer_range": 0.02,
  "intermediate_size": 3072,
  "layer_norm_eps": 1e-05,
  "max_position_embeddings": 514,
  "model_type": "xlm-roberta",
  "num_attention_heads": 12,
  "num_hidden_layers": 12,
  "output_past": true,
  "pad_token_id": 1,
  "type_vocab_size": 1,
  "vocab_size": 250002
}`},
	// roberta-base: XLM-R's shapes with byte-level BPE's 50265 ids.
	"roberta-base": {`{
  "architectures": ["RobertaForMaskedLM"],
  "attention_probs_dropout_prob": 0.1,
  "bos_token_id": 0,
  "eos_token_id": 2,
  "hidden_act": "gelu",
  "hidden_dropout_prob": 0.1,
  "hidden_size": 768,
  "initializer_range": 0.02,
  "intermediate_size": 3072,
  "layer_norm_eps": 1e-05,
  "max_position_embeddings": 514,
  "model_type": "roberta",
  "num_attention_heads": 12,
  "num_hidden_layers": 12,
  "pad_token_id": 1,
  "type_vocab_size": 1,
  "vocab_size": 50265
}`},
	// google/electra-base-discriminator: embeddings as wide as the hidden
	// size (no projection).
	"electra-base": {`{
  "architectures": ["ElectraForPreTraining"],
  "attention_probs_dropout_prob": 0.1,
  "embedding_size": 768,
  "hidden_act": "gelu",
  "hidden_dropout_prob": 0.1,
  "hidden_size": 768,
  "initializer_range": 0.02,
  "intermediate_size": 3072,
  "layer_norm_eps": 1e-12,
  "max_position_embeddings": 512,
  "model_type": "electra",
  "num_attention_heads": 12,
  "num_hidden_layers": 12,
  "pad_token_id": 0,
  "position_embedding_type": "absolute",
  "type_vocab_size": 2,
  "vocab_size": 30522
}`},
	// google/electra-small-discriminator: 128-wide embeddings projected
	// onto the hidden size 256.
	"electra-small": {`{
  "architectures": ["ElectraForPreTraining"],
  "attention_probs_dropout_prob": 0.1,
  "embedding_size": 128,
  "hidden_act": "gelu",
  "hidden_dropout_prob": 0.1,
  "hidden_size": 256,
  "initializer_range": 0.02,
  "intermediate_size": 1024,
  "layer_norm_eps": 1e-12,
  "max_position_embeddings": 512,
  "model_type": "electra",
  "num_attention_heads": 4,
  "num_hidden_layers": 12,
  "pad_token_id": 0,
  "position_embedding_type": "absolute",
  "type_vocab_size": 2,
  "vocab_size": 30522
}`},
	// microsoft/mpnet-base (sentence-transformers/all-mpnet-base-v2 has
	// the same shapes): no token types, a relative position bias.
	"mpnet-base": {`{
  "architectures": ["MPNetForMaskedLM"],
  "attention_probs_dropout_prob": 0.1,
  "bos_token_id": 0,
  "eos_token_id": 2,
  "hidden_act": "gelu",
  "hidden_dropout_prob": 0.1,
  "hidden_size": 768,
  "initializer_range": 0.02,
  "intermediate_size": 3072,
  "layer_norm_eps": 1e-05,
  "max_position_embeddings": 514,
  "model_type": "mpnet",
  "num_attention_heads": 12,
  "num_hidden_layers": 12,
  "pad_token_id": 1,
  "relative_attention_num_buckets": 32,
  "vocab_size": 30527
}`},
	// microsoft/deberta-v3-base: model_type deberta-v2 with the
	// disentangled attention over 256 log-spaced position buckets, the
	// relative embeddings shared by the layers' own query and key
	// projections, no absolute positions and no token types.
	"deberta-v3-base": {`{
  "architectures": ["DebertaV2ForMaskedLM"],
  "attention_probs_dropout_prob": 0.1,
  "hidden_act": "gelu",
  "hidden_dropout_prob": 0.1,
  "hidden_size": 768,
  "initializer_range": 0.02,
  "intermediate_size": 3072,
  "layer_norm_eps": 1e-07,
  "max_position_embeddings": 512,
  "max_relative_positions": -1,
  "model_type": "deberta-v2",
  "norm_rel_ebd": "layer_norm",
  "num_attention_heads": 12,
  "num_hidden_layers": 12,
  "pad_token_id": 0,
  "pos_att_type": ["p2c", "c2p"],
  "position_biased_input": false,
  "position_buckets": 256,
  "relative_attention": true,
  "share_att_key": true,
  "type_vocab_size": 0,
  "vocab_size": 128100
}`},
}

// Archs lists the architecture names LookupArch knows, sorted.
func Archs() []string {
	names := make([]string, 0, len(archDefs))
	for n := range archDefs {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// LookupArch returns the named architecture. Each call returns a fresh
// Arch (its Config may be modified by the caller).
func LookupArch(name string) (*Arch, error) {
	d, ok := archDefs[name]
	if !ok {
		return nil, fmt.Errorf("bench: unknown architecture %q (known: %s)", name, strings.Join(Archs(), ", "))
	}
	cfg, err := checkpoint.ParseConfig([]byte(d.config))
	if err != nil {
		return nil, fmt.Errorf("bench: architecture %s: %w", name, err)
	}
	return &Arch{Name: name, Config: cfg}, nil
}

// ModelConfig is the shape of the architecture's encoder, as models.Load
// reads it from config.json.
func (a *Arch) ModelConfig() (models.Config, error) {
	if a == nil || a.Config == nil {
		return models.Config{}, fmt.Errorf("bench: incomplete architecture: %w", models.ErrConfig)
	}
	return models.ConfigOf(a.Config)
}

// RandomWeights returns the random weights of a checkpoint of a for task
// (models.RandomWeights: deterministic in a, task and seed).
func RandomWeights(a *Arch, task models.Task, seed uint64) *models.RandomSource {
	if a == nil {
		return models.RandomWeights("", nil, task, seed)
	}
	return models.RandomWeights(a.Name, a.Config, task, seed)
}
