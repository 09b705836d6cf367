package models

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/int8bert/int8bert/checkpoint"
	"github.com/stretchr/testify/require"
)

// FuzzFamilyConfig feeds arbitrary config.json bytes through what Load
// does with them before reading weights: parse, pick the family and the
// task, map onto the encoder's Config. An error or a config, never a
// panic; a config that maps validates and takes at least one token.
func FuzzFamilyConfig(f *testing.F) {
	shared := filepath.Join("..", "..", "shared")
	if d := os.Getenv("INT8BERT_SHARED"); d != "" {
		shared = d
	}
	paths := []string{filepath.Join("..", "checkpoint", "testdata", "distilbert-tiny", "config.json")}
	committed, _ := filepath.Glob(filepath.Join("testdata", "golden", "*", "config.json"))
	paths = append(paths, committed...)
	for _, pat := range []string{"golden/models/*/config.json", "golden/heads/*/config.json", "models/*/config.json"} {
		m, _ := filepath.Glob(filepath.Join(shared, pat))
		paths = append(paths, m...)
	}
	for _, p := range paths {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(`{"model_type":"xlm-roberta","hidden_size":8,"num_hidden_layers":1,"num_attention_heads":2,"intermediate_size":8,"hidden_act":"gelu","vocab_size":10,"max_position_embeddings":3,"pad_token_id":1}`))
	f.Add([]byte(`{"architectures":["RobertaForQuestionAnswering"],"hidden_act":"relu"}`))
	f.Add([]byte(`{"model_type":"gpt2"}`))
	f.Add([]byte(`{"model_type":"electra","hidden_size":8,"embedding_size":4,"num_hidden_layers":1,"num_attention_heads":2,"intermediate_size":8,"hidden_act":"gelu","vocab_size":10,"max_position_embeddings":3}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := checkpoint.ParseConfig(data)
		if err != nil {
			return
		}
		fam, err := familyOf(cfg)
		if err != nil {
			return
		}
		for _, a := range cfg.Architectures {
			fam.TaskOf(a)
		}
		ec, err := fam.Config(cfg)
		if err != nil {
			return
		}
		require.NoError(t, ec.Validate(), "a mapped config must validate: %+v", ec)
		require.GreaterOrEqual(t, ec.MaxSeq(), 1, "a mapped config must take a token: %+v", ec)
	})
}
