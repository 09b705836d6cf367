package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// committedGolden copies the golden folder name committed under
// models/testdata/golden (config.json and weights) to a new folder.
func committedGolden(t *testing.T, name string) string {
	t.Helper()
	src := filepath.Join("..", "..", "models", "testdata", "golden", name)
	dir := t.TempDir()
	for _, f := range []string{"config.json", "model.safetensors"} {
		b, err := os.ReadFile(filepath.Join(src, f))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), b, 0o644))
	}
	return dir
}

// TestInfoModelFamilies: info --model names the RoBERTa, CamemBERT and
// ELECTRA families and their classes, from config.json alone, for the
// FP32 folder and for its int8-dynamic artifact.
func TestInfoModelFamilies(t *testing.T) {
	fastKernels(t)
	for _, c := range []struct{ golden, family, id, arch string }{
		{"roberta-seqcls", "RoBERTa", "roberta", "RobertaForSequenceClassification"},
		{"camembert-base", "CamemBERT", "camembert", "CamembertModel"},
		{"electra-base", "ELECTRA", "electra", "ElectraModel"},
		{"electra-seqcls", "ELECTRA", "electra", "ElectraForSequenceClassification"},
		{"electra-discriminator", "ELECTRA", "electra", "ElectraForPreTraining"},
	} {
		t.Run(c.golden, func(t *testing.T) {
			model := committedGolden(t, c.golden)
			int8 := filepath.Join(t.TempDir(), "int8")
			mustCLI(t, "quantize", "--model", model, "--mode", "dynamic", "-o", int8)
			for dir, prec := range map[string]string{model: "fp32", int8: "int8-dynamic"} {
				out := mustCLI(t, "info", "--model", dir)
				t.Log(out)
				assert.Contains(t, out, "family:    "+c.family+" ("+c.id+")")
				assert.Contains(t, out, c.arch)
				assert.Contains(t, out, "precision: "+prec)
				var r modelReport
				require.NoError(t, json.Unmarshal([]byte(mustCLI(t, "info", "--model", dir, "-json")), &r))
				assert.Equal(t, c.family, r.Family)
				assert.Equal(t, c.id, r.FamilyID)
				assert.Equal(t, 32, r.Hidden)
			}
		})
	}
}
