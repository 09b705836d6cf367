package electra_test

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/int8bert/int8bert/models/electra"
	"github.com/int8bert/int8bert/models/encoder"
	"github.com/int8bert/int8bert/models/encoder/encodertest"
)

const goldenBase = "../testdata/golden/electra-base"

// edited copies the golden folder src with config.json's key set to
// value (deleted when value is nil).
func edited(t *testing.T, src, key string, value any) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(src, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	if value == nil {
		delete(cfg, key)
	} else {
		cfg[key] = value
	}
	dir := t.TempDir()
	raw, _ = json.Marshal(cfg)
	w, err := os.ReadFile(filepath.Join(src, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "model.safetensors"), w, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestEmbeddingSizeErrors: an embedding_size that is not a positive
// integer, or that the weights do not have, is an ErrConfig error naming
// it; none at all means transformers' default, 128.
func TestEmbeddingSizeErrors(t *testing.T) {
	sel := encodertest.Selector(t)
	for _, c := range []struct {
		name  string
		value any
		want  string
	}{
		{"zero", 0, "embedding_size 0"},
		{"negative", -4, "embedding_size -4"},
		{"string", "16", "embedding_size"},
		{"as wide as hidden: no projection, 16-wide tensors", 32, "word_embeddings.weight has shape [1000 16], want [1000 32]"},
		{"absent: the default 128", nil, "want [1000 128]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, err := encoder.LoadTask(edited(t, goldenBase, "embedding_size", c.value), electra.Family, encoder.Options{Selector: sel})
			if err == nil {
				m.Close()
				t.Fatal("loaded")
			}
			t.Log(err)
			if !errors.Is(err, encoder.ErrConfig) {
				t.Errorf("%v does not wrap encoder.ErrConfig", err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("%v does not say %q", err, c.want)
			}
		})
	}
}

// TestPackedProjection: the projected embeddings of packed inputs (no
// padding computed) give each sequence's padded rows, within rounding.
func TestPackedProjection(t *testing.T) {
	m, err := encoder.LoadTask(goldenBase, electra.Family, encoder.Options{Selector: encodertest.Selector(t), Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	raw, err := os.ReadFile(filepath.Join(goldenBase, "golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g struct {
		Inputs map[string][][]int32 `json:"inputs"`
	}
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatal(err)
	}
	ids, mask, types := g.Inputs["input_ids"], g.Inputs["attention_mask"], g.Inputs["token_type_ids"]
	padded := &encoder.Inputs{Batch: len(ids), Seq: len(ids[0])}
	packed := &encoder.Inputs{Batch: len(ids)}
	for b := range ids {
		padded.IDs, padded.Mask, padded.TypeIDs = append(padded.IDs, ids[b]...), append(padded.Mask, mask[b]...), append(padded.TypeIDs, types[b]...)
		n := 0
		for _, v := range mask[b] {
			n += int(v)
		}
		packed.Lens = append(packed.Lens, n)
		packed.IDs, packed.TypeIDs = append(packed.IDs, ids[b][:n]...), append(packed.TypeIDs, types[b][:n]...)
	}
	a, err := m.Forward(padded, false)
	if err != nil {
		t.Fatal(err)
	}
	p, err := m.Forward(packed, false)
	if err != nil {
		t.Fatal(err)
	}
	h := a.Hidden
	worst := 0.0
	for b := range ids {
		ps, pe := p.Rows(b)
		as, _ := a.Rows(b)
		for i := 0; i < (pe-ps)*h; i++ {
			worst = math.Max(worst, math.Abs(float64(p.Last[ps*h+i]-a.Last[as*h+i])))
		}
	}
	t.Logf("packed against padded: max |diff| %.3g", worst)
	if worst > 1e-5 {
		t.Errorf("packed rows differ from padded ones by %.3g", worst)
	}
}
