package models_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/int8bert/int8bert/checkpoint"
	"github.com/int8bert/int8bert/models/bert"
	"github.com/int8bert/int8bert/models/electra"
	"github.com/int8bert/int8bert/models/encoder"
	"github.com/int8bert/int8bert/models/encoder/encodertest"
	"github.com/int8bert/int8bert/smoothquant"
)

// TestQuantizeArtifactStreamed quantizes models whose artifact is written
// to a temporary file a tensor at a time (QuantizeOptions.TempDir) and,
// where no file can be made, encoded in memory: the temporary file is
// gone at once; the saved artifact is the bytes EncodeSafetensors gives
// its tensors; both ways give the same tensors and recipe (its creation
// time aside); the saved folder loads and runs bit for bit as the model
// just quantized. ELECTRA's embeddings are narrower than its hidden
// width (the embedding tables the model holds are written from it).
func TestQuantizeArtifactStreamed(t *testing.T) {
	sel := encodertest.Selector(t)
	for _, c := range []struct {
		name string
		dir  string
		fam  *encoder.Family
	}{
		{"electra", filepath.Join("testdata", "golden", "electra-base"), electra.Family},
		{"bert-ner", filepath.Join("testdata", "tasks", "bert-ner"), bert.Family},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, err := encoder.LoadTask(c.dir, c.fam, encoder.Options{Selector: sel, Threads: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			vocab := m.Encoder.Config().Vocab
			quantize := func(tmp string) *encoder.TaskModel {
				t.Helper()
				q, err := m.Quantize(context.Background(), calibBatches(vocab, 2), encoder.PrecisionInt8Static,
					encoder.QuantizeOptions{Options: smoothquant.Options{Alpha: 0.5, AlphaSet: true}, TempDir: tmp})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { q.Close() })
				return q
			}
			tmp := t.TempDir()
			streamed := quantize(tmp)
			if left, _ := os.ReadDir(tmp); len(left) != 0 {
				t.Errorf("the temporary artifact stays in %s: %v", tmp, left)
			}
			inMemory := quantize(filepath.Join(tmp, "missing")) // no file can be made there
			art := func(q *encoder.TaskModel) []byte {
				t.Helper()
				dir := t.TempDir()
				if err := q.Save(dir); err != nil {
					t.Fatal(err)
				}
				b, err := os.ReadFile(filepath.Join(dir, encoder.ArtifactFile))
				if err != nil {
					t.Fatal(err)
				}
				return b
			}
			a, b := art(streamed), art(inMemory)
			sa, sb := parseArtifact(t, a), parseArtifact(t, b)
			if !slices.Equal(sa.Names(), sb.Names()) {
				t.Fatalf("tensors %v streamed, %v in memory", sa.Names(), sb.Names())
			}
			tensors := map[string]checkpoint.Tensor{}
			for _, n := range sa.Names() {
				ia, ra, _ := sa.Raw(n)
				ib, rb, _ := sb.Raw(n)
				if !slices.Equal(ia.Shape, ib.Shape) || ia.Dtype != ib.Dtype || !bytes.Equal(ra, rb) {
					t.Errorf("tensor %s: %s %v streamed, %s %v in memory, or other bytes", n, ia.Dtype, ia.Shape, ib.Dtype, ib.Shape)
				}
				tensors[n] = checkpoint.Tensor{Dtype: ia.Dtype, Shape: ia.Shape, Data: ra}
			}
			ra, rb := recipeOf(t, sa), recipeOf(t, sb)
			rb.Created = ra.Created
			ja, _ := ra.Encode()
			jb, _ := rb.Encode()
			if ja != jb {
				t.Errorf("recipes differ beyond their creation time:\n%s\n%s", ja, jb)
			}
			enc, err := checkpoint.EncodeSafetensors(tensors, sa.Metadata())
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(enc, a) {
				t.Fatalf("the saved artifact (%d bytes) is not EncodeSafetensors's encoding of its tensors (%d bytes)", len(a), len(enc))
			}
			dir := t.TempDir()
			if err := streamed.Save(dir); err != nil {
				t.Fatal(err)
			}
			back, err := encoder.LoadTask(dir, c.fam, encoder.Options{Selector: sel, Threads: 1})
			if err != nil {
				t.Fatalf("the saved artifact does not load: %v", err)
			}
			defer back.Close()
			in := tokenInputs(vocab, 2, 12, 5)
			for _, q := range []*encoder.TaskModel{inMemory, back} {
				want, err := streamed.Forward(in, false)
				if err != nil {
					t.Fatal(err)
				}
				got, err := q.Forward(in, false)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(got.Last, want.Last) || !slices.Equal(got.Logits, want.Logits) {
					t.Fatal("a model from the same artifact gives other outputs")
				}
			}
		})
	}
}

func parseArtifact(t *testing.T, b []byte) *checkpoint.Safetensors {
	t.Helper()
	st, err := checkpoint.ParseSafetensors(b)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func recipeOf(t *testing.T, st *checkpoint.Safetensors) *smoothquant.Recipe {
	t.Helper()
	r, err := smoothquant.DecodeRecipe(st.Metadata()[smoothquant.MetadataKey])
	if err != nil {
		t.Fatal(err)
	}
	if r.Created.IsZero() || time.Since(r.Created) > time.Hour {
		t.Fatalf("recipe created %v", r.Created)
	}
	return r
}
