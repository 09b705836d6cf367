package checkpoint

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestConfigBERTAndXLMR(t *testing.T) {
	c, err := ParseConfig([]byte(`{
		"model_type": "xlm-roberta", "architectures": ["XLMRobertaForSequenceClassification"],
		"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 128,
		"hidden_act": "gelu", "max_position_embeddings": 130, "type_vocab_size": 1, "vocab_size": 1000,
		"layer_norm_eps": 1e-5, "pad_token_id": 1, "bos_token_id": 0, "eos_token_id": 2,
		"id2label": {"0": "NEG", "1": "POS"}, "label2id": {"NEG": 0, "POS": 1},
		"problem_type": "single_label_classification", "torch_dtype": "float32",
		"classifier_dropout": null, "something_new": [1, 2]}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.NumLabels != 2 || c.ID2Label["1"] != "POS" || c.Label2ID["NEG"] != 0 || c.PadTokenID == nil || *c.PadTokenID != 1 ||
		c.LayerNormEpsilon() != 1e-5 || c.PositionEmbeddingType != "absolute" || c.HeadSize() != 16 || c.IsDistilBERT() {
		t.Errorf("parsed %+v", c)
	}
	if string(c.Raw["something_new"]) != "[1, 2]" {
		t.Errorf("unknown field not kept: %q", c.Raw["something_new"])
	}
}

func TestConfigDistilBERTNames(t *testing.T) {
	c, err := ParseConfig([]byte(`{"model_type":"distilbert","dim":768,"n_layers":6,"n_heads":12,"hidden_dim":3072,
		"activation":"gelu","max_position_embeddings":512,"vocab_size":30522,"pad_token_id":0,"sinusoidal_pos_embds":true,"tie_weights_":true}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.HiddenSize != 768 || c.NumHiddenLayers != 6 || c.NumAttentionHeads != 12 || c.IntermediateSize != 3072 ||
		c.HiddenAct != "gelu" || !c.SinusoidalPosEmbds || !c.TieWeights || c.LayerNormEpsilon() != 1e-12 {
		t.Errorf("normalised %+v", c)
	}
	if _, ok := c.Raw["dim"]; !ok {
		t.Error("original name dim not in Raw")
	}
}

func TestConfigValidate(t *testing.T) {
	base := `"model_type":"bert","hidden_size":64,"num_hidden_layers":2,"num_attention_heads":4,"intermediate_size":128,"max_position_embeddings":128,"vocab_size":1000,"type_vocab_size":2`
	cases := []struct{ json, want string }{
		{`{` + base + `,"hidden_act":"gelu","num_attention_heads":5}`, "not divisible"},
		{`{` + base + `,"hidden_act":"gelu","hidden_size":0}`, "hidden_size must be positive"},
		{`{` + base + `,"hidden_act":"gelu","num_hidden_layers":-1}`, "num_hidden_layers must be positive"},
		{`{` + base + `,"hidden_act":"mish"}`, `unsupported activation "mish"`},
		{`{` + base + `,"hidden_act":"gelu","position_embedding_type":"relative_key"}`, `unsupported position_embedding_type "relative_key"`},
		{`{` + base + `,"hidden_act":"gelu","pad_token_id":1000}`, "pad_token_id"},
	}
	for _, c := range cases {
		cfg, err := ParseConfig([]byte(c.json))
		if err != nil {
			t.Fatal(err)
		}
		err = cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", c.json, err, c.want)
		}
	}
	if _, err := ParseConfig([]byte(`{"hidden_size": "big"}`)); err == nil {
		t.Error("bad JSON type accepted")
	}
	path := filepath.Join(t.TempDir(), "config.json")
	os.WriteFile(path, []byte(`{`), 0o644)
	if _, err := LoadConfig(path); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("error %v does not name %s", err, path)
	}
}

// TestConfigJSON: a changed copy of a parsed config written with JSON
// keeps the keys only Raw holds and the changed fields, and parses back
// to the same values.
func TestConfigJSON(t *testing.T) {
	c, err := ParseConfig([]byte(`{"model_type":"deberta-v2","hidden_size":768,"num_hidden_layers":12,
		"num_attention_heads":12,"intermediate_size":3072,"hidden_act":"gelu","max_position_embeddings":512,
		"vocab_size":128100,"type_vocab_size":0,"position_buckets":256,"pos_att_type":"p2c|c2p","share_att_key":true}`))
	if err != nil {
		t.Fatal(err)
	}
	cc := *c
	cc.HiddenSize, cc.VocabSize = 32, 100
	b, err := cc.JSON()
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseConfig(b)
	if err != nil {
		t.Fatal(err)
	}
	if back.HiddenSize != 32 || back.VocabSize != 100 || back.NumHiddenLayers != 12 || back.ModelType != "deberta-v2" {
		t.Errorf("fields %+v", back)
	}
	for k, want := range map[string]string{"position_buckets": "256", "pos_att_type": `"p2c|c2p"`, "share_att_key": "true", "hidden_size": "32"} {
		if got := string(back.Raw[k]); got != want {
			t.Errorf("%s: %s, want %s", k, got, want)
		}
	}
	if c.HiddenSize != 768 || string(c.Raw["hidden_size"]) != "768" {
		t.Errorf("the original changed: %d %s", c.HiddenSize, c.Raw["hidden_size"])
	}
	// Without Raw, the fields alone.
	b, err = (&Config{ModelType: "bert", HiddenSize: 8}).JSON()
	if err != nil || !strings.Contains(string(b), `"hidden_size":8`) || strings.Contains(string(b), "position_buckets") {
		t.Errorf("%s %v", b, err)
	}
}
