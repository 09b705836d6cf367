package models_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/int8bert/int8bert/models"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/int8bert/int8bert/checkpoint"
	"github.com/int8bert/int8bert/models/bert"
	"github.com/int8bert/int8bert/models/encoder"
	"github.com/int8bert/int8bert/models/encoder/encodertest"
	"github.com/int8bert/int8bert/selector"
	"github.com/int8bert/int8bert/smoothquant"
)

// goldenModel is the golden tiny BERT classifier (hidden 64, 2 layers,
// vocabulary 1000) the INT8 robustness tests quantize; the test is skipped
// when the project's shared folder is absent.
func goldenModel(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(encodertest.GoldenDir, "bert-seqcls")
	if _, err := os.Stat(filepath.Join(dir, "config.json")); err != nil {
		t.Skipf("golden model not found at %s (it lives in the project's shared folder; set INT8BERT_SHARED): %v", dir, err)
	}
	return dir
}

// tokenInputs is a batch of random token ids (ids >= 5) of a model with a
// vocabulary of vocab, the last sequence padded at its end.
func tokenInputs(vocab, batch, seq int, seed uint64) *encoder.Inputs {
	r := rand.New(rand.NewPCG(seed, 99))
	in := &encoder.Inputs{Batch: batch, Seq: seq}
	for b := 0; b < batch; b++ {
		for s := 0; s < seq; s++ {
			id, mk := int32(5+r.IntN(vocab-5)), int32(1)
			if b == batch-1 && s >= seq-seq/4 {
				id, mk = 0, 0
			}
			in.IDs = append(in.IDs, id)
			in.Mask = append(in.Mask, mk)
			in.TypeIDs = append(in.TypeIDs, int32(r.IntN(2)))
		}
	}
	return in
}

func calibBatches(vocab, n int) []*encoder.Inputs {
	var out []*encoder.Inputs
	for i := 0; i < n; i++ {
		out = append(out, tokenInputs(vocab, 4, 16, uint64(1000+i)))
	}
	return out
}

// loadTask opens the BERT model folder dir on one thread, for token ids.
func loadTask(dir string, sel *selector.Selector) (*encoder.TaskModel, error) {
	return encoder.LoadTask(dir, bert.Family, encoder.Options{Selector: sel, Threads: 1})
}

// forwardOn opens the BERT model folder dir on threads threads and runs
// one pass of in through it.
func forwardOn(t *testing.T, dir string, sel *selector.Selector, threads int, in *encoder.Inputs) *encoder.TaskOutput {
	t.Helper()
	m, err := encoder.LoadTask(dir, bert.Family, encoder.Options{Selector: sel, Threads: threads})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	out, err := m.Forward(in, false)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func loadFP32(t *testing.T, sel *selector.Selector) *encoder.TaskModel {
	t.Helper()
	m, err := loadTask(goldenModel(t), sel)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// savedInt8 quantizes the golden model at prec and saves it to a new
// folder (config.json and the artifact), which it returns.
func savedInt8(t *testing.T, sel *selector.Selector, prec encoder.Precision) string {
	t.Helper()
	m := loadFP32(t, sel)
	q, err := m.Quantize(context.Background(), calibBatches(1000, 2), prec, encoder.QuantizeOptions{Options: smoothquant.Options{Alpha: 0.5}})
	if err != nil {
		t.Fatalf("quantize %s: %v", prec, err)
	}
	defer q.Close()
	dir := t.TempDir()
	if err := q.Save(dir); err != nil {
		t.Fatalf("save %s: %v", prec, err)
	}
	back, err := loadTask(dir, sel)
	if err != nil {
		t.Fatalf("the unmodified artifact does not load: %v", err)
	}
	back.Close()
	return dir
}

// variant copies the saved model folder src to a new folder, where edit
// rewrites the artifact's bytes.
func variant(t *testing.T, src string, edit func(art []byte) []byte) string {
	t.Helper()
	dir := t.TempDir()
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if e.Name() == encoder.ArtifactFile {
			b = edit(b)
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// rewrite re-encodes an artifact after edit changes its tensors or
// metadata.
func rewrite(t *testing.T, art []byte, edit func(tensors map[string]checkpoint.Tensor, meta map[string]string)) []byte {
	t.Helper()
	st, err := checkpoint.ParseSafetensors(art)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	tensors := map[string]checkpoint.Tensor{}
	for _, n := range st.Names() {
		info, raw, err := st.Raw(n)
		if err != nil {
			t.Fatal(err)
		}
		tensors[n] = checkpoint.Tensor{Dtype: info.Dtype, Shape: info.Shape, Data: append([]byte(nil), raw...)}
	}
	meta := map[string]string{}
	for k, v := range st.Metadata() {
		meta[k] = v
	}
	edit(tensors, meta)
	out, err := checkpoint.EncodeSafetensors(tensors, meta)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// editRecipe changes the recipe JSON as a generic map.
func editRecipe(t *testing.T, art []byte, edit func(r map[string]any)) []byte {
	return rewrite(t, art, func(_ map[string]checkpoint.Tensor, meta map[string]string) {
		var r map[string]any
		if err := json.Unmarshal([]byte(meta[smoothquant.MetadataKey]), &r); err != nil {
			t.Fatal(err)
		}
		edit(r)
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		meta[smoothquant.MetadataKey] = string(b)
	})
}

func setF32(tensors map[string]checkpoint.Tensor, name string, v ...float32) {
	tt := tensors[name]
	tensors[name] = checkpoint.Float32Tensor(tt.Shape, v)
}

// loadErr loads dir and returns the error, failing the test on a panic or
// a success.
func loadErr(t *testing.T, sel *selector.Selector, dir string) (err error) {
	t.Helper()
	defer func() {
		if p := recover(); p != nil {
			t.Fatalf("loading panicked: %v", p)
		}
	}()
	m, err := loadTask(dir, sel)
	if err == nil {
		m.Close()
		t.Fatal("the bad artifact loaded without an error")
	}
	return err
}

func TestInt8BadArtifacts(t *testing.T) {
	sel := encodertest.Selector(t)
	static := savedInt8(t, sel, encoder.PrecisionInt8Static)
	cases := []struct {
		name string
		edit func([]byte) []byte
		// want are the sentinels one of which the error must wrap (none:
		// any error), and words its message must hold.
		want  []error
		words []string
	}{
		{name: "truncated", edit: func(b []byte) []byte { return b[:len(b)/2] }},
		{name: "truncated header", edit: func(b []byte) []byte { return b[:20] }},
		{name: "header length past the file", edit: func(b []byte) []byte {
			b = append([]byte(nil), b...)
			binary.LittleEndian.PutUint64(b[:8], uint64(len(b))+1000)
			return b
		}},
		{name: "huge header length", edit: func(b []byte) []byte {
			b = append([]byte(nil), b...)
			binary.LittleEndian.PutUint64(b[:8], math.MaxUint64-3)
			return b
		}},
		{name: "empty", edit: func([]byte) []byte { return nil }},
		{name: "no recipe", edit: func(b []byte) []byte {
			return rewrite(t, b, func(_ map[string]checkpoint.Tensor, meta map[string]string) { delete(meta, smoothquant.MetadataKey) })
		}, want: []error{models.ErrConfig}, words: []string{smoothquant.MetadataKey}},
		{name: "recipe not JSON", edit: func(b []byte) []byte {
			return rewrite(t, b, func(_ map[string]checkpoint.Tensor, meta map[string]string) {
				meta[smoothquant.MetadataKey] = "{not json"
			})
		}, want: []error{smoothquant.ErrInvalid}},
		{name: "newer format", edit: func(b []byte) []byte {
			return editRecipe(t, b, func(r map[string]any) { r["format"] = smoothquant.RecipeFormat + 1 })
		}, want: []error{smoothquant.ErrInvalid}, words: []string{"format"}},
		{name: "missing format", edit: func(b []byte) []byte {
			return editRecipe(t, b, func(r map[string]any) { delete(r, "format") })
		}, want: []error{smoothquant.ErrInvalid}, words: []string{"format"}},
		{name: "bad mode", edit: func(b []byte) []byte {
			return editRecipe(t, b, func(r map[string]any) { r["mode"] = "int4" })
		}, want: []error{smoothquant.ErrInvalid}, words: []string{"int4"}},
		{name: "other family", edit: func(b []byte) []byte {
			return editRecipe(t, b, func(r map[string]any) { r["family"] = "distilbert" })
		}, want: []error{models.ErrConfig}, words: []string{"distilbert", "bert"}},
		{name: "too few linears", edit: func(b []byte) []byte {
			return editRecipe(t, b, func(r map[string]any) {
				l := r["layers"].([]any)
				r["layers"] = l[:len(l)-1]
			})
		}, want: []error{models.ErrConfig}, words: []string{"7 linears", "8"}},
		{name: "too many linears", edit: func(b []byte) []byte {
			return editRecipe(t, b, func(r map[string]any) {
				l := r["layers"].([]any)
				r["layers"] = append(l, l[0])
			})
		}, want: []error{models.ErrConfig}, words: []string{"9 linears"}},
		{name: "missing int8 weight", edit: func(b []byte) []byte {
			return rewrite(t, b, func(ts map[string]checkpoint.Tensor, _ map[string]string) { delete(ts, "int8.layer.1.ffn1.weight") })
		}, want: []error{smoothquant.ErrInvalid}, words: []string{"int8.layer.1.ffn1.weight"}},
		{name: "missing weight scale", edit: func(b []byte) []byte {
			return rewrite(t, b, func(ts map[string]checkpoint.Tensor, _ map[string]string) {
				delete(ts, "int8.layer.0.o.weight_scale")
			})
		}, want: []error{smoothquant.ErrInvalid}, words: []string{"int8.layer.0.o.weight_scale"}},
		{name: "int8 weight as f32", edit: func(b []byte) []byte {
			return rewrite(t, b, func(ts map[string]checkpoint.Tensor, _ map[string]string) {
				w := ts["int8.layer.0.qkv.weight"]
				ts["int8.layer.0.qkv.weight"] = checkpoint.Float32Tensor(w.Shape, make([]float32, len(w.Data)))
			})
		}, want: []error{smoothquant.ErrInvalid}, words: []string{"int8.layer.0.qkv.weight"}},
		{name: "misshapen int8 weight", edit: func(b []byte) []byte {
			return rewrite(t, b, func(ts map[string]checkpoint.Tensor, _ map[string]string) {
				w := ts["int8.layer.0.ffn2.weight"]
				ts["int8.layer.0.ffn2.weight"] = checkpoint.Int8Tensor([]int{w.Shape[1], w.Shape[0]}, make([]int8, len(w.Data)))
			})
		}, want: []error{smoothquant.ErrInvalid}, words: []string{"int8.layer.0.ffn2.weight", "shape"}},
		{name: "act_scale 0", edit: func(b []byte) []byte {
			return rewrite(t, b, func(ts map[string]checkpoint.Tensor, _ map[string]string) {
				setF32(ts, "int8.layer.0.qkv.act_scale", 0)
			})
		}, want: []error{smoothquant.ErrInvalid}, words: []string{"int8.layer.0.qkv.act_scale"}},
		{name: "act_scale NaN", edit: func(b []byte) []byte {
			return rewrite(t, b, func(ts map[string]checkpoint.Tensor, _ map[string]string) {
				setF32(ts, "int8.layer.1.ffn2.act_scale", float32(math.NaN()))
			})
		}, want: []error{smoothquant.ErrInvalid}, words: []string{"int8.layer.1.ffn2.act_scale", "NaN"}},
		{name: "act_scale missing", edit: func(b []byte) []byte {
			return rewrite(t, b, func(ts map[string]checkpoint.Tensor, _ map[string]string) { delete(ts, "int8.layer.1.o.act_scale") })
		}, want: []error{smoothquant.ErrInvalid}, words: []string{"int8.layer.1.o.act_scale"}},
		{name: "act_zero_point out of range", edit: func(b []byte) []byte {
			return rewrite(t, b, func(ts map[string]checkpoint.Tensor, _ map[string]string) {
				setF32(ts, "int8.layer.0.ffn1.act_zero_point", 300)
			})
		}, want: []error{smoothquant.ErrInvalid}, words: []string{"int8.layer.0.ffn1.act_zero_point"}},
		{name: "smooth 0", edit: func(b []byte) []byte {
			return rewrite(t, b, func(ts map[string]checkpoint.Tensor, _ map[string]string) {
				s := ts["int8.layer.0.qkv.smooth"]
				setF32(ts, "int8.layer.0.qkv.smooth", make([]float32, s.Shape[0])...)
			})
		}, want: []error{smoothquant.ErrInvalid}, words: []string{"int8.layer.0.qkv.smooth"}},
		{name: "weight scale Inf", edit: func(b []byte) []byte {
			return rewrite(t, b, func(ts map[string]checkpoint.Tensor, _ map[string]string) {
				s := ts["int8.layer.1.qkv.weight_scale"]
				v := make([]float32, s.Shape[0])
				for i := range v {
					v[i] = 0.01
				}
				v[7] = float32(math.Inf(1))
				setF32(ts, "int8.layer.1.qkv.weight_scale", v...)
			})
		}, want: []error{smoothquant.ErrInvalid}, words: []string{"int8.layer.1.qkv.weight_scale"}},
		{name: "missing layer norm", edit: func(b []byte) []byte {
			return rewrite(t, b, func(ts map[string]checkpoint.Tensor, _ map[string]string) {
				delete(ts, "bert.encoder.layer.1.output.LayerNorm.weight")
			})
		}, words: []string{"bert.encoder.layer.1.output.LayerNorm.weight"}},
		{name: "missing embeddings", edit: func(b []byte) []byte {
			return rewrite(t, b, func(ts map[string]checkpoint.Tensor, _ map[string]string) {
				delete(ts, "bert.embeddings.word_embeddings.weight")
			})
		}},
		{name: "stray FP32 linear", edit: func(b []byte) []byte {
			return rewrite(t, b, func(ts map[string]checkpoint.Tensor, _ map[string]string) {
				ts["bert.encoder.layer.0.attention.self.query.weight"] = checkpoint.Float32Tensor([]int{64, 64}, make([]float32, 64*64))
			})
		}, want: []error{models.ErrConfig}, words: []string{"bert.encoder.layer.0.attention.self.query.weight"}},
	}
	for _, c := range cases {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			dir := variant(t, static, c.edit)
			err := loadErr(t, sel, dir)
			t.Logf("%v", err)
			if len(c.want) > 0 {
				ok := false
				for _, w := range c.want {
					ok = ok || errors.Is(err, w)
				}
				if !ok {
					t.Errorf("error %q wraps none of %v", err, c.want)
				}
			}
			for _, w := range c.words {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
			if !strings.Contains(err.Error(), encoder.ArtifactFile) {
				t.Errorf("error %q does not name the artifact file", err)
			}
		})
	}
}

// writeVocab gives a saved model folder a BERT vocab.txt, so that
// encoder.Load (a pipeline) can open it.
func writeVocab(t *testing.T, dir string, n int) {
	t.Helper()
	var b strings.Builder
	for _, s := range []string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"} {
		b.WriteString(s + "\n")
	}
	for i := 5; i < n; i++ {
		fmt.Fprintf(&b, "w%d\n", i)
	}
	if err := os.WriteFile(filepath.Join(dir, "vocab.txt"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestInt8LoadAtOtherPrecision(t *testing.T) {
	sel := encodertest.Selector(t)
	for _, stored := range []encoder.Precision{encoder.PrecisionInt8Static, encoder.PrecisionInt8Dynamic} {
		dir := savedInt8(t, sel, stored)
		writeVocab(t, dir, 1000)
		p, err := encodertest.LoadAs(dir, bert.Family, models.Options{Selector: sel})
		if err != nil {
			t.Fatalf("%s: load as stored: %v", stored, err)
		}
		if p.Precision() != models.Precision(stored) {
			t.Errorf("loaded as stored: %s, want %s", p.Precision(), stored)
		}
		p.Close()
		if p, err = encodertest.LoadAs(dir, bert.Family, models.Options{Selector: sel, Precision: models.Precision(stored)}); err != nil {
			t.Fatalf("%s: load at its own precision: %v", stored, err)
		}
		p.Close()
		for _, other := range []encoder.Precision{encoder.PrecisionFP32, encoder.PrecisionInt8Static, encoder.PrecisionInt8Dynamic} {
			if other == stored {
				continue
			}
			p, err := encodertest.LoadAs(dir, bert.Family, models.Options{Selector: sel, Precision: models.Precision(other), Calib: []string{"w5 w6 w7"}})
			if err == nil {
				p.Close()
				t.Errorf("an %s artifact loaded as %s", stored, other)
				continue
			}
			t.Logf("%s as %s: %v", stored, other, err)
			if !errors.Is(err, models.ErrConfig) || !strings.Contains(err.Error(), stored.String()) || !strings.Contains(err.Error(), other.String()) {
				t.Errorf("%s as %s: error %q should wrap ErrConfig and name both precisions", stored, other, err)
			}
		}
	}
}

func TestInt8QuantizeErrors(t *testing.T) {
	sel := encodertest.Selector(t)
	m := loadFP32(t, sel)
	ctx := context.Background()
	if _, err := m.Quantize(ctx, nil, encoder.PrecisionInt8Static, encoder.QuantizeOptions{}); !errors.Is(err, smoothquant.ErrCalibration) {
		t.Errorf("int8-static without calibration data: %v, want ErrCalibration", err)
	}
	if _, err := m.Quantize(ctx, []*encoder.Inputs{}, encoder.PrecisionInt8Static, encoder.QuantizeOptions{}); !errors.Is(err, smoothquant.ErrCalibration) {
		t.Errorf("int8-static with an empty batch list: %v, want ErrCalibration", err)
	}
	if _, err := m.Quantize(ctx, calibBatches(1000, 1), encoder.PrecisionFP32, encoder.QuantizeOptions{}); !errors.Is(err, models.ErrConfig) {
		t.Errorf("quantize to fp32: %v, want ErrConfig", err)
	}
	if _, err := m.Quantize(ctx, calibBatches(1000, 1), encoder.PrecisionInt8Static,
		encoder.QuantizeOptions{Options: smoothquant.Options{Alpha: 1.5}}); !errors.Is(err, smoothquant.ErrInvalid) {
		t.Errorf("alpha 1.5: %v, want ErrInvalid", err)
	}
	bad := calibBatches(1000, 1)
	bad[0].IDs[3] = 5000
	if _, err := m.Quantize(ctx, bad, encoder.PrecisionInt8Static, encoder.QuantizeOptions{}); !errors.Is(err, models.ErrInput) {
		t.Errorf("calibration batch with an id outside the vocabulary: %v, want ErrInput", err)
	}
	// Dynamic without data quantizes without smoothing.
	dyn, err := m.Quantize(ctx, nil, encoder.PrecisionInt8Dynamic, encoder.QuantizeOptions{})
	if err != nil {
		t.Fatalf("int8-dynamic without calibration data: %v", err)
	}
	defer dyn.Close()
	q, err := m.Quantize(ctx, calibBatches(1000, 1), encoder.PrecisionInt8Static, encoder.QuantizeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	for _, im := range []*encoder.TaskModel{q, dyn} {
		for _, p := range []encoder.Precision{encoder.PrecisionInt8Static, encoder.PrecisionInt8Dynamic} {
			_, err := im.Quantize(ctx, calibBatches(1000, 1), p, encoder.QuantizeOptions{})
			if !errors.Is(err, models.ErrConfig) || !strings.Contains(err.Error(), "already") {
				t.Errorf("quantize an %s model to %s: %v, want ErrConfig saying it is already INT8", im.Encoder.Precision(), p, err)
			}
		}
		if _, err := im.Encoder.Calibrate(ctx, calibBatches(1000, 1), 0, nil); !errors.Is(err, models.ErrConfig) {
			t.Errorf("calibrate an %s model: %v, want ErrConfig", im.Encoder.Precision(), err)
		}
	}
	// The FP32 model is unchanged and still quantizes.
	in := tokenInputs(1000, 2, 8, 5)
	for _, im := range []*encoder.TaskModel{q, dyn} {
		out, err := im.Forward(in, false)
		if err != nil {
			t.Fatal(err)
		}
		if !allFinite(out.Last) || !allFinite(out.Logits) {
			t.Errorf("%s outputs are not finite", im.Encoder.Precision())
		}
	}
}

func allFinite(v []float32) bool {
	for _, x := range v {
		if f := float64(x); math.IsNaN(f) || math.IsInf(f, 0) {
			return false
		}
	}
	return true
}

// overrides maps a tensor name to an edit of (a copy of) its values.
type overrides map[string]func(v []float32)

// editedModel opens the golden model's weights with edits and builds an
// FP32 model of them.
func editedModel(t *testing.T, sel *selector.Selector, edits overrides) *encoder.TaskModel {
	t.Helper()
	dir := goldenModel(t)
	cfg, err := checkpoint.LoadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	ck, err := checkpoint.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ck.Close() })
	m, err := encoder.NewTask(editSource{ck, edits}, cfg, bert.Family, encoder.Options{Selector: sel, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

type editSource struct {
	encoder.Source
	edits overrides
}

func (e editSource) Float32(name string) ([]float32, []int, error) {
	v, shape, err := e.Source.Float32(name)
	if err != nil {
		return nil, nil, err
	}
	if f, ok := e.edits[name]; ok {
		v = append([]float32(nil), v...)
		f(v)
	}
	return v, shape, nil
}

func TestInt8NaNCalibration(t *testing.T) {
	sel := encodertest.Selector(t)
	const h, nanID = 64, 7
	m := editedModel(t, sel, overrides{"bert.embeddings.word_embeddings.weight": func(v []float32) {
		v[nanID*h+3] = float32(math.NaN())
	}})
	batches := calibBatches(1000, 2)
	batches[1].IDs[5] = nanID
	for _, p := range []encoder.Precision{encoder.PrecisionInt8Static, encoder.PrecisionInt8Dynamic} {
		q, err := m.Quantize(context.Background(), batches, p, encoder.QuantizeOptions{Options: smoothquant.Options{Auto: true}})
		if err == nil {
			out, ferr := q.Forward(batches[0], false)
			q.Close()
			t.Fatalf("%s: calibration data with NaN quantized without an error (forward: %v, finite: %v)", p, ferr, ferr == nil && allFinite(out.Last))
		}
		t.Logf("%s: %v", p, err)
		if !errors.Is(err, smoothquant.ErrCalibration) {
			t.Errorf("%s: error %q does not wrap ErrCalibration", p, err)
		}
		for _, w := range []string{"batch 1", "NaN"} {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not say %q", p, err, w)
			}
		}
	}
	// Calibration batches without the NaN token quantize fine.
	q, err := m.Quantize(context.Background(), batches[:1], encoder.PrecisionInt8Static, encoder.QuantizeOptions{})
	if err != nil {
		t.Fatalf("clean calibration data: %v", err)
	}
	q.Close()
}

// TestInt8ZeroChannel: channel j of every LayerNorm output is always 0
// (gamma and beta 0), V's output channel j is 0 (the O projection's input
// channel j) and FFN1's output channel j is 0 (FFN2's input channel j, as
// GELU(0) = 0). Smoothing must not divide by zero there, and the INT8
// outputs must stay finite and close to FP32's.
func TestInt8ZeroChannel(t *testing.T) {
	sel := encodertest.Selector(t)
	const h, j = 64, 11
	zeroAt := func(idx ...int) func([]float32) {
		return func(v []float32) {
			for _, i := range idx {
				v[i] = 0
			}
		}
	}
	zeroRow := func(row, k int) func([]float32) {
		return func(v []float32) { clear(v[row*k : (row+1)*k]) }
	}
	edits := overrides{
		"bert.embeddings.LayerNorm.weight": zeroAt(j),
		"bert.embeddings.LayerNorm.bias":   zeroAt(j),
	}
	for li := 0; li < 2; li++ {
		p := fmt.Sprintf("bert.encoder.layer.%d.", li)
		for _, ln := range []string{"attention.output.LayerNorm.", "output.LayerNorm."} {
			edits[p+ln+"weight"], edits[p+ln+"bias"] = zeroAt(j), zeroAt(j)
		}
		edits[p+"attention.self.value.weight"], edits[p+"attention.self.value.bias"] = zeroRow(j, h), zeroAt(j)
		edits[p+"intermediate.dense.weight"], edits[p+"intermediate.dense.bias"] = zeroRow(j, h), zeroAt(j)
	}
	m := editedModel(t, sel, edits)
	in := tokenInputs(1000, 3, 12, 77)
	ref, err := m.Forward(in, true)
	if err != nil {
		t.Fatal(err)
	}
	for r := 0; r < in.Batch*in.Seq; r++ {
		if v := ref.Last[r*h+j]; v != 0 {
			t.Fatalf("setup: channel %d of the FP32 output is %v, not 0", j, v)
		}
	}
	for _, p := range []encoder.Precision{encoder.PrecisionInt8Static, encoder.PrecisionInt8Dynamic} {
		for _, o := range []smoothquant.Options{{Alpha: 0.5}, {Alpha: 1}, {Alpha: 0, AlphaSet: true}, {Auto: true}} {
			name := fmt.Sprintf("%s alpha %v auto %v", p, o.Alpha, o.Auto)
			q, err := m.Quantize(context.Background(), calibBatches(1000, 2), p, encoder.QuantizeOptions{Options: o})
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			out, err := q.Forward(in, false)
			if err != nil {
				q.Close()
				t.Fatalf("%s: %v", name, err)
			}
			for _, l := range q.Encoder.Recipe().Layers {
				if math.IsNaN(l.SQNR) || l.SQNR < 10 {
					t.Errorf("%s: %s SQNR %.1f dB", name, l.Name, l.SQNR)
				}
			}
			if !allFinite(out.Last) || !allFinite(out.Logits) || !allFinite(out.PoolerOutput) {
				t.Errorf("%s: outputs are not finite", name)
			} else {
				c := encodertest.Cosine(ref.Last, out.Last)
				if !(c >= 0.99) {
					t.Errorf("%s: last hidden state cosine with fp32 %.5f < 0.99", name, c)
				}
				for r := 0; r < in.Batch*in.Seq; r++ {
					if v := out.Last[r*h+j]; v != 0 {
						t.Errorf("%s: zero channel %d of row %d is %v", name, j, r, v)
						break
					}
				}
				t.Logf("%s: cosine %.6f", name, c)
			}
			q.Close()
		}
	}
}

func TestInt8ConcurrentForward(t *testing.T) {
	sel := encodertest.Selector(t)
	m := loadFP32(t, sel)
	const workers = 8
	var ins []*encoder.Inputs
	for i := 0; i < workers; i++ {
		ins = append(ins, tokenInputs(1000, 1+i%3, 6+2*i, uint64(300+i)))
	}
	for _, p := range []encoder.Precision{encoder.PrecisionInt8Static, encoder.PrecisionInt8Dynamic} {
		q, err := m.Quantize(context.Background(), calibBatches(1000, 2), p, encoder.QuantizeOptions{Options: smoothquant.Options{Alpha: 0.5}})
		if err != nil {
			t.Fatal(err)
		}
		serial := make([]*encoder.TaskOutput, workers)
		for i, in := range ins {
			if serial[i], err = q.Forward(in, true); err != nil {
				t.Fatal(err)
			}
		}
		got := make([]*encoder.TaskOutput, workers)
		errs := make([]error, workers)
		var wg sync.WaitGroup
		for rep := 0; rep < 3; rep++ {
			for i := range ins {
				wg.Add(1)
				go func() {
					defer wg.Done()
					got[i], errs[i] = q.Forward(ins[i], true)
				}()
			}
			wg.Wait()
			for i := range ins {
				if errs[i] != nil {
					t.Fatalf("%s: goroutine %d: %v", p, i, errs[i])
				}
				same := func(name string, a, b []float32) {
					if len(a) != len(b) {
						t.Errorf("%s %s input %d: %d values concurrently, %d serially", p, name, i, len(b), len(a))
						return
					}
					for k := range a {
						if math.Float32bits(a[k]) != math.Float32bits(b[k]) {
							t.Errorf("%s %s input %d: value %d is %v concurrently, %v serially", p, name, i, k, b[k], a[k])
							return
						}
					}
				}
				same("last", serial[i].Last, got[i].Last)
				same("logits", serial[i].Logits, got[i].Logits)
				for l := range serial[i].HiddenStates {
					same(fmt.Sprintf("hidden %d", l), serial[i].HiddenStates[l], got[i].HiddenStates[l])
				}
			}
		}
		q.Close()
	}
}

// TestInt8StaticSmoothedFFN2 rewrites a static artifact so that layer 0's
// FFN2 carries a smoothing vector of 2 (weight scales doubled, act_scale
// halved): the same linear, exactly, in powers of two. The runtime, which
// in static mode requantizes FFN2's input in FFN1's epilogue, must honour
// the smoothing (or refuse the artifact), never silently ignore it.
func TestInt8StaticSmoothedFFN2(t *testing.T) {
	sel := encodertest.Selector(t)
	static := savedInt8(t, sel, encoder.PrecisionInt8Static)
	const pre = "int8.layer.0.ffn2."
	dir := variant(t, static, func(b []byte) []byte {
		return rewrite(t, b, func(ts map[string]checkpoint.Tensor, _ map[string]string) {
			if _, ok := ts[pre+"smooth"]; ok {
				t.Fatalf("setup: static FFN2 already smoothed")
			}
			f32 := func(name string) []float32 {
				d := ts[name].Data
				v := make([]float32, len(d)/4)
				for i := range v {
					v[i] = math.Float32frombits(binary.LittleEndian.Uint32(d[4*i:]))
				}
				return v
			}
			ws := f32(pre + "weight_scale")
			for i := range ws {
				ws[i] *= 2
			}
			setF32(ts, pre+"weight_scale", ws...)
			as := f32(pre + "act_scale")
			setF32(ts, pre+"act_scale", as[0]/2)
			k := ts[pre+"weight"].Shape[1]
			s := make([]float32, k)
			for i := range s {
				s[i] = 2
			}
			ts[pre+"smooth"] = checkpoint.Float32Tensor([]int{k}, s)
		})
	})
	in := tokenInputs(1000, 2, 10, 31)
	forward := func(dir string) *encoder.TaskOutput { return forwardOn(t, dir, sel, 1, in) }
	m, err := loadTask(dir, sel)
	if err != nil {
		// Refusing the artifact is acceptable, if it says why.
		if !errors.Is(err, smoothquant.ErrInvalid) && !errors.Is(err, models.ErrConfig) {
			t.Fatalf("refused with an unclear error: %v", err)
		}
		t.Logf("refused: %v", err)
		return
	}
	m.Close()
	want, got := forward(static), forward(dir)
	for i := range want.Last {
		if math.Float32bits(want.Last[i]) != math.Float32bits(got.Last[i]) {
			t.Fatalf("last hidden state %d: %v with the smoothed FFN2, %v without (cosine %.6f): the smoothing is ignored",
				i, got.Last[i], want.Last[i], encodertest.Cosine(want.Last, got.Last))
		}
	}
}

// TestInt8DynamicChunkedFFN runs a dynamic INT8 pass of more rows than
// the encoder's FFN chunk (256: 5 x 64 tokens, the last sequence padded)
// on one thread, where the FFN goes in row chunks and the quantize steps
// are fused into the LayerNorms and attention, and on two, where none
// is: every output must have the same bits. A pass of fewer rows (3 x 20)
// checks the fused steps without the chunks.
func TestInt8DynamicChunkedFFN(t *testing.T) {
	sel := encodertest.Selector(t)
	dir := savedInt8(t, sel, encoder.PrecisionInt8Dynamic)
	for _, c := range []struct{ batch, seq int }{{5, 64}, {3, 20}} {
		in := tokenInputs(1000, c.batch, c.seq, 17)
		forward := func(threads int) *encoder.TaskOutput { return forwardOn(t, dir, sel, threads, in) }
		want, got := forward(2), forward(1)
		if len(got.Last) != len(want.Last) || len(got.Last) < c.batch*c.seq {
			t.Fatalf("%d x %d: last hidden state of %d values on one thread, %d on two", c.batch, c.seq, len(got.Last), len(want.Last))
		}
		for i := range want.Last {
			if math.Float32bits(want.Last[i]) != math.Float32bits(got.Last[i]) {
				t.Fatalf("%d x %d: last hidden state %d: %v on one thread (fused, FFN in chunks), %v on two", c.batch, c.seq, i, got.Last[i], want.Last[i])
			}
		}
	}
}
