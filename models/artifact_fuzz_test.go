package models_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/int8bert/int8bert/models/encoder"
	"github.com/int8bert/int8bert/models/encoder/encodertest"
	"github.com/int8bert/int8bert/smoothquant"
	"github.com/stretchr/testify/require"
)

// splitArtifact cuts a safetensors file into its JSON header (without
// the metadata) and data, and returns the recipe of the metadata.
func splitArtifact(tb testing.TB, art []byte) (header []byte, recipe string, data []byte) {
	tb.Helper()
	n := binary.LittleEndian.Uint64(art[:8])
	var h map[string]json.RawMessage
	require.NoError(tb, json.Unmarshal(art[8:8+n], &h))
	var meta map[string]string
	require.NoError(tb, json.Unmarshal(h["__metadata__"], &meta))
	delete(h, "__metadata__")
	header, err := json.Marshal(h)
	require.NoError(tb, err)
	return header, meta[smoothquant.MetadataKey], art[8+n:]
}

// joinArtifact is splitArtifact's inverse: a header that is a JSON object
// gets the recipe as its metadata; any other header is written as it is.
func joinArtifact(header []byte, recipe string, data []byte) []byte {
	var h map[string]json.RawMessage
	if json.Unmarshal(header, &h) == nil && h != nil {
		meta, _ := json.Marshal(map[string]string{"format": "int8bert", smoothquant.MetadataKey: recipe})
		h["__metadata__"] = meta
		header, _ = json.Marshal(h)
	}
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	out = append(out, header...)
	return append(out, data...)
}

// FuzzInt8Artifact loads INT8 artifacts whose safetensors header (dtypes,
// shapes, offsets, names) and recipe are arbitrary, over the data of a
// real one (the golden tiny BERT classifier quantized in both modes): an
// error or a model, never a panic; a model that loads runs a batch or
// says why not, and its outputs have the batch's shape.
func FuzzInt8Artifact(f *testing.F) {
	dir := filepath.Join(encodertest.GoldenDir, "bert-seqcls")
	if _, err := os.Stat(filepath.Join(dir, "config.json")); err != nil {
		f.Skipf("golden model not found at %s (it lives in the project's shared folder; set INT8BERT_SHARED): %v", dir, err)
	}
	sel := encodertest.Selector(f)
	fp32, err := loadTask(dir, sel)
	require.NoError(f, err)
	defer fp32.Close()
	config, err := os.ReadFile(filepath.Join(dir, "config.json"))
	require.NoError(f, err)
	var data []byte
	for _, prec := range []encoder.Precision{encoder.PrecisionInt8Static, encoder.PrecisionInt8Dynamic} {
		q, err := fp32.Quantize(context.Background(), calibBatches(1000, 1), prec, encoder.QuantizeOptions{})
		require.NoError(f, err)
		out := f.TempDir()
		require.NoError(f, q.Save(out))
		q.Close()
		art, err := os.ReadFile(filepath.Join(out, encoder.ArtifactFile))
		require.NoError(f, err)
		h, r, d := splitArtifact(f, art)
		if data == nil {
			data = d // the static artifact's data under every header
		}
		f.Add(h, r)
	}
	f.Add([]byte(`{}`), `{"format":1,"mode":"static","layers":[]}`)
	f.Add([]byte(`not json`), ``)
	in := tokenInputs(1000, 2, 8, 7)
	f.Fuzz(func(t *testing.T, header []byte, recipe string) {
		d := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(d, "config.json"), config, 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(d, encoder.ArtifactFile), joinArtifact(header, recipe, data), 0o644))
		m, err := loadTask(d, sel)
		if err != nil {
			return
		}
		defer m.Close()
		require.True(t, m.Encoder.Precision().Int8(), "an artifact loaded as %s", m.Encoder.Precision())
		out, err := m.Forward(in, false)
		if err != nil {
			return
		}
		require.Len(t, out.Last, in.Batch*in.Seq*out.Hidden)
		require.Len(t, out.Logits, in.Batch*len(m.Labels))
	})
}
