package checkpoint

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Config is a model's config.json for the BERT, DistilBERT and XLM-R families.
//
// DistilBERT's names are normalised onto the common ones by ParseConfig: dim
// becomes HiddenSize, n_layers NumHiddenLayers, n_heads NumAttentionHeads,
// hidden_dim IntermediateSize and activation HiddenAct. Every key of the file,
// known or not, stays available in Raw.
type Config struct {
	ModelType             string   `json:"model_type"`
	Architectures         []string `json:"architectures,omitempty"`
	HiddenSize            int      `json:"hidden_size"`
	NumHiddenLayers       int      `json:"num_hidden_layers"`
	NumAttentionHeads     int      `json:"num_attention_heads"`
	IntermediateSize      int      `json:"intermediate_size"`
	HiddenAct             string   `json:"hidden_act"`
	MaxPositionEmbeddings int      `json:"max_position_embeddings"`
	TypeVocabSize         int      `json:"type_vocab_size"`
	VocabSize             int      `json:"vocab_size"`
	// EmbeddingSize is ELECTRA's embedding_size, the width of the
	// embeddings where it differs from the hidden size; 0 when absent.
	EmbeddingSize int `json:"embedding_size,omitempty"`
	// LayerNormEps is layer_norm_eps; zero when the file has none (DistilBERT
	// hard-codes 1e-12 in its modeling code), see LayerNormEpsilon.
	LayerNormEps float64 `json:"layer_norm_eps"`
	// PadTokenID is pad_token_id; nil when absent or null.
	PadTokenID            *int   `json:"pad_token_id"`
	BOSTokenID            *int   `json:"bos_token_id,omitempty"`
	EOSTokenID            *int   `json:"eos_token_id,omitempty"`
	PositionEmbeddingType string `json:"position_embedding_type"`
	NumLabels             int    `json:"num_labels,omitempty"`
	// ID2Label maps class index (as a decimal string, like the file) to label.
	ID2Label           map[string]string `json:"id2label,omitempty"`
	Label2ID           map[string]int    `json:"label2id,omitempty"`
	ProblemType        string            `json:"problem_type,omitempty"`
	TorchDtype         string            `json:"torch_dtype,omitempty"`
	SinusoidalPosEmbds bool              `json:"sinusoidal_pos_embds,omitempty"`
	// TieWeights is DistilBERT's tie_weights_.
	TieWeights          bool    `json:"tie_weights_,omitempty"`
	TieWordEmbeddings   *bool   `json:"tie_word_embeddings,omitempty"`
	HiddenDropoutProb   float64 `json:"hidden_dropout_prob,omitempty"`
	AttentionDropout    float64 `json:"attention_probs_dropout_prob,omitempty"`
	InitializerRange    float64 `json:"initializer_range,omitempty"`
	TransformersVersion string  `json:"transformers_version,omitempty"`

	// Raw holds every key of the file as undecoded JSON, including the
	// ones decoded above and DistilBERT's original names.
	Raw map[string]json.RawMessage `json:"-"`
}

// distilConfig holds DistilBERT's own names for the common fields.
type distilConfig struct {
	Dim        int    `json:"dim"`
	NLayers    int    `json:"n_layers"`
	NHeads     int    `json:"n_heads"`
	HiddenDim  int    `json:"hidden_dim"`
	Activation string `json:"activation"`
}

// ParseConfig decodes config.json bytes, normalises DistilBERT's names and
// fills defaults transformers applies (num_labels from id2label, absolute
// position embeddings). It does not validate; call Validate.
func ParseConfig(data []byte) (*Config, error) {
	var c Config
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, fmt.Errorf("checkpoint: config: %w", err)
	}
	if err := json.Unmarshal(data, &c.Raw); err != nil {
		return nil, fmt.Errorf("checkpoint: config: %w", err)
	}
	var d distilConfig
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, fmt.Errorf("checkpoint: config: %w", err)
	}
	if _, ok := c.Raw["hidden_size"]; !ok && d.Dim != 0 {
		c.HiddenSize = d.Dim
	}
	if _, ok := c.Raw["num_hidden_layers"]; !ok && d.NLayers != 0 {
		c.NumHiddenLayers = d.NLayers
	}
	if _, ok := c.Raw["num_attention_heads"]; !ok && d.NHeads != 0 {
		c.NumAttentionHeads = d.NHeads
	}
	if _, ok := c.Raw["intermediate_size"]; !ok && d.HiddenDim != 0 {
		c.IntermediateSize = d.HiddenDim
	}
	if _, ok := c.Raw["hidden_act"]; !ok && d.Activation != "" {
		c.HiddenAct = d.Activation
	}
	if c.PositionEmbeddingType == "" {
		c.PositionEmbeddingType = "absolute"
	}
	if c.NumLabels == 0 && len(c.ID2Label) > 0 {
		c.NumLabels = len(c.ID2Label)
	}
	return &c, nil
}

// LoadConfig reads and parses dir/config.json (or the file itself when path
// names a file). It does not validate; call Validate.
func LoadConfig(path string) (*Config, error) {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		path = filepath.Join(path, "config.json")
	}
	data, err := ReadFileLimited(path, MaxConfigSize, "config.json")
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	c, err := ParseConfig(data)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %s: %w", path, errors.Unwrap(err))
	}
	return c, nil
}

// JSON is c as a config.json: its decoded fields as they are now, and
// every key of Raw that they do not write (the family-specific keys, such
// as DeBERTa's position_buckets, that only Raw keeps), so that a changed
// copy of a parsed config still parses to the same family and shape.
// Where a field and Raw both hold a key the field wins; a field left at
// its zero value and omitted when empty is taken from Raw.
func (c *Config) JSON() ([]byte, error) {
	b, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: config: %w", err)
	}
	if len(c.Raw) == 0 {
		return b, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("checkpoint: config: %w", err)
	}
	for k, v := range c.Raw {
		if _, ok := m[k]; !ok {
			m[k] = v
		}
	}
	b, err = json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: config: %w", err)
	}
	return b, nil
}

// IsDistilBERT reports whether the config describes a DistilBERT model.
func (c *Config) IsDistilBERT() bool {
	return c.ModelType == "distilbert"
}

// LayerNormEpsilon returns layer_norm_eps, or the value the family's modeling
// code hard-codes when the file has none (1e-12 for BERT and DistilBERT).
func (c *Config) LayerNormEpsilon() float64 {
	if c.LayerNormEps > 0 {
		return c.LayerNormEps
	}
	return 1e-12
}

// HeadSize returns HiddenSize / NumAttentionHeads (0 when heads is 0).
func (c *Config) HeadSize() int {
	if c.NumAttentionHeads == 0 {
		return 0
	}
	return c.HiddenSize / c.NumAttentionHeads
}

// supportedActivations are the hidden_act values the encoder implements.
var supportedActivations = map[string]bool{
	"gelu": true, "gelu_new": true, "gelu_pytorch_tanh": true, "gelu_fast": true,
	"relu": true, "silu": true, "swish": true, "tanh": true,
}

// Validate checks that the sizes are positive and consistent and that the
// activation and position embedding type are supported.
func (c *Config) Validate() error {
	var errs []string
	pos := func(name string, v int) {
		if v <= 0 {
			errs = append(errs, fmt.Sprintf("%s must be positive, got %d", name, v))
		}
	}
	pos("hidden_size", c.HiddenSize)
	pos("num_hidden_layers", c.NumHiddenLayers)
	pos("num_attention_heads", c.NumAttentionHeads)
	pos("intermediate_size", c.IntermediateSize)
	pos("vocab_size", c.VocabSize)
	pos("max_position_embeddings", c.MaxPositionEmbeddings)
	if c.TypeVocabSize < 0 {
		errs = append(errs, fmt.Sprintf("type_vocab_size must not be negative, got %d", c.TypeVocabSize))
	}
	if c.HiddenSize > 0 && c.NumAttentionHeads > 0 && c.HiddenSize%c.NumAttentionHeads != 0 {
		errs = append(errs, fmt.Sprintf("hidden_size %d is not divisible by num_attention_heads %d", c.HiddenSize, c.NumAttentionHeads))
	}
	if c.LayerNormEps < 0 {
		errs = append(errs, fmt.Sprintf("layer_norm_eps must not be negative, got %g", c.LayerNormEps))
	}
	if !supportedActivations[c.HiddenAct] {
		errs = append(errs, fmt.Sprintf("unsupported activation %q", c.HiddenAct))
	}
	if c.PositionEmbeddingType != "" && c.PositionEmbeddingType != "absolute" {
		errs = append(errs, fmt.Sprintf("unsupported position_embedding_type %q (only absolute)", c.PositionEmbeddingType))
	}
	if c.PadTokenID != nil && c.VocabSize > 0 && (*c.PadTokenID < 0 || *c.PadTokenID >= c.VocabSize) {
		errs = append(errs, fmt.Sprintf("pad_token_id %d outside vocabulary of %d", *c.PadTokenID, c.VocabSize))
	}
	if c.NumLabels < 0 {
		errs = append(errs, fmt.Sprintf("num_labels must not be negative, got %d", c.NumLabels))
	}
	if len(errs) > 0 {
		return fmt.Errorf("checkpoint: invalid config (model_type %q): %s", c.ModelType, strings.Join(errs, "; "))
	}
	return nil
}
