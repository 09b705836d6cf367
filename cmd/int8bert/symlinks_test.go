package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/int8bert/int8bert/checkpoint"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAllowSymlinksOutside: a model folder whose weights are a link out of
// it is refused, naming the flag; --allow-symlinks-outside loads it.
func TestAllowSymlinksOutside(t *testing.T) {
	dir, _ := multilabelFolder(t)
	w := filepath.Join(dir, "model.safetensors")
	require.NoError(t, os.Remove(w))
	abs, err := filepath.Abs(filepath.Join(sharedPath(t, "golden/heads/bert-multilabel"), "model.safetensors"))
	require.NoError(t, err)
	require.NoError(t, os.Symlink(abs, w))

	var out, errb bytes.Buffer
	err = runTask(context.Background(), "classify", []string{"--model", dir, "w5 w17"}, nil, &out, &errb)
	require.Error(t, err)
	assert.True(t, errors.Is(err, checkpoint.ErrUnsafePath), err.Error())
	assert.Contains(t, err.Error(), "--allow-symlinks-outside")

	r := classifyCLI(t, "--model", dir, "--allow-symlinks-outside", "w5 w17")
	assert.NotEmpty(t, r.Label)
}
