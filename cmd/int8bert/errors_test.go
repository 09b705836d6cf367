package main

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/int8bert/int8bert/models"
)

// TestFirstErrorsReadWell: the errors a new user meets first (a missing
// folder, a file given as the folder, no config.json, a config.json that
// is not JSON, an unknown model_type, no weights, a weights file that is
// not a model, no tokenizer) say what failed, on which input and what to
// do, end with that (docs/DESIGN.md section 2.1: no category suffix such
// as "encoder: unsupported configuration"), and still wrap ErrConfig for
// errors.Is (a missing folder or file also fs.ErrNotExist).
func TestFirstErrorsReadWell(t *testing.T) {
	noHub(t)
	root := t.TempDir()
	t.Chdir(root)
	good := tinyModel(t, "distilbert-seqcls")
	folder := func(name string, files map[string]string) string {
		dir := filepath.Join(root, name)
		require.NoError(t, os.MkdirAll(dir, 0o755))
		for f, body := range files {
			if body == "" { // copy the tiny model's file
				b, err := os.ReadFile(filepath.Join(good, f))
				require.NoError(t, err)
				body = string(b)
			}
			require.NoError(t, os.WriteFile(filepath.Join(dir, f), []byte(body), 0o644))
		}
		return "./" + name
	}
	require.NoError(t, os.WriteFile("afile", []byte("x"), 0o644))
	for _, c := range []struct {
		name, model string
		want        []string
		notExist    bool
	}{
		{"missing folder", "./missing", []string{"no such model folder ./missing", "check the path"}, true},
		{"a file", "./afile", []string{"./afile is a file, not a model folder", "give the folder that holds config.json"}, false},
		{"no config.json", folder("empty", nil), []string{"empty has no config.json", "give the folder of a Hugging Face model"}, true},
		{"config.json not JSON", folder("badjson", map[string]string{"config.json": "{"}), []string{"badjson/config.json", "download it again"}, false},
		{"unknown model_type", folder("gpt2", map[string]string{"config.json": `{"model_type": "gpt2"}`}), []string{`model_type "gpt2"`, "is not supported; supported: model_type bert"}, false},
		{"no weights", folder("noweights", map[string]string{"config.json": ""}), []string{"noweights has no weights", "download them"}, true},
		{"weights not a model", folder("notmodel", map[string]string{"config.json": "", "model.safetensors": "hello"}), []string{"model.safetensors", "is not a model's weights", "download it again"}, false},
		{"no tokenizer", folder("notok", map[string]string{"config.json": "", "model.safetensors": ""}), []string{"notok has no tokenizer", "copy the model's tokenizer.json"}, false},
	} {
		_, err := taskCLI(t, "", "classify", "--model", c.model, "x")
		require.Error(t, err, c.name)
		msg := err.Error()
		for _, w := range c.want {
			assert.Contains(t, msg, w, c.name)
		}
		assert.NotContains(t, msg, "unsupported configuration", "%s: a category suffix", c.name)
		assert.NotContains(t, msg, "file does not exist", "%s: a category suffix", c.name)
		assert.False(t, strings.HasSuffix(msg, ": "+models.ErrConfig.Error()), c.name)
		assert.ErrorIs(t, err, models.ErrConfig, c.name)
		assert.Equal(t, c.notExist, errors.Is(err, fs.ErrNotExist), "%s: fs.ErrNotExist", c.name)
	}
}
