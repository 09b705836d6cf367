package models_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/int8bert/int8bert/checkpoint"
	"github.com/int8bert/int8bert/models"
	"github.com/int8bert/int8bert/models/encoder/encodertest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSymlinksOutside: a model folder whose symlinks resolve outside it is
// refused (ErrConfig, checkpoint.ErrUnsafePath) unless
// Options.AllowSymlinksOutside; links inside it, a hub snapshot's links
// into its blobs, and a folder reached through a link are fine.
func TestSymlinksOutside(t *testing.T) {
	ctx := context.Background()
	base := t.TempDir()
	outside := filepath.Join(base, "secret")
	require.NoError(t, os.WriteFile(outside, []byte("{}"), 0o600))
	mk := func(name string) string {
		d := filepath.Join(base, name)
		require.NoError(t, os.MkdirAll(d, 0o755))
		return d
	}
	refused := func(dir, what string) {
		t.Helper()
		_, err := (&models.Options{}).Resolve(ctx, dir)
		if assert.Error(t, err, what) {
			assert.ErrorIs(t, err, models.ErrConfig, what)
			assert.ErrorIs(t, err, checkpoint.ErrUnsafePath, what)
			assert.Contains(t, err.Error(), "--allow-symlinks-outside", what)
		}
		got, err := (&models.Options{AllowSymlinksOutside: true}).Resolve(ctx, dir)
		assert.NoError(t, err, what+", allowed")
		assert.Equal(t, dir, got, what)
	}
	accepted := func(dir, what string) {
		t.Helper()
		_, err := (&models.Options{}).Resolve(ctx, dir)
		assert.NoError(t, err, what)
	}

	d := mk("abs")
	require.NoError(t, os.Symlink(outside, filepath.Join(d, "config.json")))
	refused(d, "an absolute link out")

	d = mk("rel")
	require.NoError(t, os.Symlink("../secret", filepath.Join(d, "config.json")))
	refused(d, "a relative link out")

	d = mk("nested")
	require.NoError(t, os.MkdirAll(filepath.Join(d, "1_Pooling"), 0o755))
	require.NoError(t, os.Symlink("../../secret", filepath.Join(d, "1_Pooling", "config.json")))
	refused(d, "a link out of a module folder")

	d = mk("dirlink")
	require.NoError(t, os.Symlink(base, filepath.Join(d, "2_Dense")))
	refused(d, "a linked folder outside")

	d = mk("dangling")
	require.NoError(t, os.Symlink("nowhere", filepath.Join(d, "config.json")))
	_, err := (&models.Options{}).Resolve(ctx, d)
	assert.ErrorIs(t, err, checkpoint.ErrUnsafePath, "a dangling link")

	d = mk("inside")
	require.NoError(t, os.WriteFile(filepath.Join(d, "real.json"), []byte("{}"), 0o644))
	require.NoError(t, os.Symlink("real.json", filepath.Join(d, "config.json")))
	accepted(d, "a link inside the folder")
	require.NoError(t, os.Symlink(d, filepath.Join(base, "current")))
	accepted(filepath.Join(base, "current"), "the folder reached through a link")

	// The hub cache layout: snapshots link to ../../blobs/<etag>.
	repo := mk("hub/models--org--m")
	snap := mk("hub/models--org--m/snapshots/0123456789abcdef0123456789abcdef01234567")
	mk("hub/models--org--m/blobs")
	require.NoError(t, os.WriteFile(filepath.Join(repo, "blobs", "e1"), []byte("{}"), 0o644))
	require.NoError(t, os.Symlink("../../blobs/e1", filepath.Join(snap, "config.json")))
	accepted(snap, "a hub snapshot linking into its blobs")
	other := mk("hub/models--org--other/blobs")
	require.NoError(t, os.WriteFile(filepath.Join(other, "e2"), []byte("{}"), 0o644))
	require.NoError(t, os.Symlink("../../../models--org--other/blobs/e2", filepath.Join(snap, "vocab.txt")))
	refused(snap, "a hub snapshot linking into another repository")
}

// TestSymlinksOutsideLoad: Load refuses a real model folder whose weights
// are a link out of it, and loads it when allowed.
func TestSymlinksOutsideLoad(t *testing.T) {
	src := shared(t, "golden/models/bert-base")
	dir := encodertest.WordFolder(t, src, false)
	w := filepath.Join(dir, "model.safetensors")
	require.NoError(t, os.Remove(w))
	abs, err := filepath.Abs(filepath.Join(src, "model.safetensors"))
	require.NoError(t, err)
	require.NoError(t, os.Symlink(abs, w))
	o := models.Options{Selector: encodertest.Selector(t), Threads: 1}
	_, err = models.Load(context.Background(), dir, o)
	require.Error(t, err)
	assert.ErrorIs(t, err, checkpoint.ErrUnsafePath)
	assert.ErrorIs(t, err, models.ErrConfig)
	assert.Contains(t, err.Error(), "model.safetensors")
	o.AllowSymlinksOutside = true
	p, err := models.Load(context.Background(), dir, o)
	require.NoError(t, err)
	p.Close()
}

// TestModulesPathOutside: every path modules.json declares must stay inside
// the model folder; an oversized modules.json is refused by size.
func TestModulesPathOutside(t *testing.T) {
	ctx := context.Background()
	sel := encodertest.Selector(t)
	for _, path := range []string{"../1_Pooling", "/etc", "1_Pooling/../../x", `..\\x`, ".."} {
		mods := `[{"idx":0,"name":"0","path":"","type":"sentence_transformers.models.Transformer"},` +
			`{"idx":1,"name":"1","path":"` + path + `","type":"sentence_transformers.models.Pooling"}]`
		dir := sentenceFolder(t, "sst2-bert-mini", map[string]string{"modules.json": mods, "1_Pooling/config.json": stPoolingMean})
		_, err := models.Load(ctx, dir, models.Options{Selector: sel})
		if assert.Error(t, err, path) {
			assert.ErrorIs(t, err, models.ErrConfig, path)
			assert.ErrorIs(t, err, checkpoint.ErrUnsafePath, path)
			assert.Contains(t, err.Error(), "modules.json", path)
		}
	}
	dir := sentenceFolder(t, "sst2-bert-mini", nil)
	f, err := os.Create(filepath.Join(dir, "modules.json"))
	require.NoError(t, err)
	require.NoError(t, f.Truncate(checkpoint.MaxConfigSize+1)) // sparse: declared, not written
	f.Close()
	_, err = models.Load(ctx, dir, models.Options{Selector: sel})
	require.Error(t, err)
	assert.ErrorIs(t, err, checkpoint.ErrTooLarge)
	assert.ErrorIs(t, err, models.ErrConfig)
	assert.True(t, strings.Contains(err.Error(), "modules.json"), err.Error())
}
