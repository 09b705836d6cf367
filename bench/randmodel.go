package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/int8bert/int8bert/checkpoint"
	"github.com/int8bert/int8bert/models"
)

// WriteRandomClassifier writes a Hugging Face model folder for arch (one
// of Archs) with a two-label sequence classification head and the random
// weights bench model times (RandomWeights, seed 1): config.json,
// model.safetensors, and the tokenizer files of tokDir (tokenizer.json,
// and vocab.txt, tokenizer_config.json, special_tokens_map.json where
// present), whose vocabulary must fit the architecture's. It gives the
// server's load test (bench serve --arch) a model of real size to run
// real texts through; its predictions mean nothing.
func WriteRandomClassifier(dir, arch, tokDir string) error {
	a, err := LookupArch(arch)
	if err != nil {
		return err
	}
	cls, err := models.ArchitectureOf(a.Config, models.TaskSequenceClassification)
	if err != nil {
		return fmt.Errorf("bench: %s: %w", arch, err)
	}
	var cfg map[string]any
	if err := json.Unmarshal([]byte(archDefs[arch].config), &cfg); err != nil {
		return fmt.Errorf("bench: %s: %w", arch, err)
	}
	cfg["architectures"] = []string{cls}
	cfg["id2label"] = map[string]string{"0": "negative", "1": "positive"}
	cfg["label2id"] = map[string]int{"negative": 0, "positive": 1}
	js, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	src := RandomWeights(a, models.TaskSequenceClassification, 1)
	if err := src.Err(); err != nil {
		return err
	}
	tensors := map[string]checkpoint.Tensor{}
	for _, name := range src.Names() {
		v, shape, err := src.Float32(name)
		if err != nil {
			return err
		}
		tensors[name] = checkpoint.Float32Tensor(shape, v)
	}
	if err := checkpoint.Save(filepath.Join(dir, "model.safetensors"), tensors, map[string]string{"format": "pt"}); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), append(js, '\n'), 0o644); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	copied := 0
	for _, f := range []string{"tokenizer.json", "vocab.txt", "tokenizer_config.json", "special_tokens_map.json"} {
		b, err := os.ReadFile(filepath.Join(tokDir, f))
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("bench: tokenizer: %w", err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		copied++
	}
	if copied == 0 {
		return fmt.Errorf("bench: %s holds no tokenizer.json or vocab.txt: %w", tokDir, os.ErrNotExist)
	}
	return nil
}
