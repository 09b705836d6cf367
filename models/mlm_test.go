package models_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/int8bert/int8bert/models"
	"github.com/int8bert/int8bert/models/encoder/encodertest"
)

// mlmGolden is a golden.json of testdata/mlm (scripts/oracle/make_mlm_golden.py).
type mlmGolden struct {
	ModelClass  string               `json:"model_class"`
	Inputs      map[string][][]int32 `json:"inputs"`
	LogitsShape []int                `json:"logits_shape"`
	Splade      [][][2]float64       `json:"splade"`
	FillMask    *struct {
		Texts []string `json:"texts"`
		Calls []struct {
			Args struct {
				TopK    int      `json:"top_k"`
				Targets []string `json:"targets"`
			} `json:"args"`
			Results  []json.RawMessage `json:"results"`
			Warnings []string          `json:"warnings"`
		} `json:"calls"`
	} `json:"fill_mask"`
	SpladeText *struct {
		Texts    []string       `json:"texts"`
		InputIDs [][]int32      `json:"input_ids"`
		Vectors  [][][2]float64 `json:"vectors"`
	} `json:"splade_text"`
}

var mlmFolders = []string{"bert-mlm", "distilbert-mlm", "xlm-roberta-mlm"}

func readMLMGolden(t *testing.T, name string) (string, *mlmGolden, []float32) {
	t.Helper()
	dir := filepath.Join("testdata", "mlm", name)
	raw, err := os.ReadFile(filepath.Join(dir, "golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g mlmGolden
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "logits.f32"))
	if err != nil {
		t.Fatal(err)
	}
	logits := make([]float32, len(b)/4)
	for i := range logits {
		logits[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return dir, &g, logits
}

// padded are the golden's id inputs as one padded batch.
func (g *mlmGolden) padded() *models.Inputs {
	ids := g.Inputs["input_ids"]
	in := &models.Inputs{Batch: len(ids), Seq: len(ids[0])}
	for _, r := range ids {
		in.IDs = append(in.IDs, r...)
	}
	for _, r := range g.Inputs["attention_mask"] {
		in.Mask = append(in.Mask, r...)
	}
	for _, r := range g.Inputs["token_type_ids"] {
		in.TypeIDs = append(in.TypeIDs, r...)
	}
	return in
}

// TestMaskedLMGolden: models.Load opens every masked-LM golden without a
// family named, and its FP32 logits match Hugging Face's within 1e-5 of
// the largest where the mask is 1.
func TestMaskedLMGolden(t *testing.T) {
	sel := encodertest.Selector(t)
	for _, name := range mlmFolders {
		t.Run(name, func(t *testing.T) {
			dir, g, want := readMLMGolden(t, name)
			p, err := models.Load(context.Background(), dir, models.Options{Selector: sel, Threads: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			if p.Task() != models.TaskMaskedLM || p.Architecture() != g.ModelClass {
				t.Fatalf("task %v, architecture %s; want ForMaskedLM, %s", p.Task(), p.Architecture(), g.ModelClass)
			}
			in := g.padded()
			out, err := p.Forward(context.Background(), in, false)
			if err != nil {
				t.Fatal(err)
			}
			rel := maskedRelErr(out.Logits, want, in.Mask, g.LogitsShape[2])
			t.Logf("%s logits: relative error %.3g", name, rel)
			if !(rel <= 1e-5) {
				t.Errorf("%s logits: relative error %.3g > 1e-5", name, rel)
			}
		})
	}
}

// maskedRelErr is the largest |got - want| over the largest |want|, over
// the rows (of width values) whose mask is 1.
func maskedRelErr(got, want []float32, mask []int32, width int) float64 {
	if len(got) != len(want) {
		return math.Inf(1)
	}
	maxRef, maxDiff := 0.0, 0.0
	for i, w := range want {
		if mask[i/width] == 0 {
			continue
		}
		maxRef = math.Max(maxRef, math.Abs(float64(w)))
		maxDiff = math.Max(maxDiff, math.Abs(float64(got[i])-float64(w)))
	}
	return maxDiff / maxRef
}

// TestFillMaskGolden: FillMask gives Hugging Face's fill-mask pipeline
// results (tokens, order, decoded strings; scores within 1e-5) for every
// call of the goldens, top_k and targets included, and its warnings for
// targets outside the vocabulary.
func TestFillMaskGolden(t *testing.T) {
	sel := encodertest.Selector(t)
	for _, name := range []string{"bert-mlm", "distilbert-mlm"} {
		t.Run(name, func(t *testing.T) {
			dir, g, _ := readMLMGolden(t, name)
			p, err := models.Load(context.Background(), dir, models.Options{Selector: sel, Threads: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			for ci, c := range g.FillMask.Calls {
				res, err := p.FillMask(context.Background(), g.FillMask.Texts, models.FillMaskOptions{TopK: c.Args.TopK, Targets: c.Args.Targets})
				if err != nil {
					t.Fatalf("call %d: %v", ci, err)
				}
				for i, r := range res {
					var want [][]models.FillMaskToken
					if len(r.Masks) == 1 {
						var one []models.FillMaskToken
						if err := json.Unmarshal(c.Results[i], &one); err != nil {
							t.Fatal(err)
						}
						want = [][]models.FillMaskToken{one}
					} else if err := json.Unmarshal(c.Results[i], &want); err != nil {
						t.Fatalf("call %d text %d: %v (HF has one mask, we found %d)", ci, i, err, len(r.Masks))
					}
					compareFillMask(t, ci, i, r.Masks, want)
				}
				if c.Args.Targets != nil {
					_, warns, err := p.ResolveTargets(c.Args.Targets)
					if err != nil {
						t.Fatal(err)
					}
					// HF warns once per text of the call.
					for j, w := range c.Warnings {
						if w != warns[j%len(warns)] {
							t.Errorf("call %d: warning %q, want %q", ci, warns[j%len(warns)], w)
						}
					}
				}
			}
		})
	}
}

func compareFillMask(t *testing.T, call, text int, got, want [][]models.FillMaskToken) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("call %d text %d: %d masks, want %d", call, text, len(got), len(want))
		return
	}
	for m := range want {
		if len(got[m]) != len(want[m]) {
			t.Errorf("call %d text %d mask %d: %d candidates, want %d", call, text, m, len(got[m]), len(want[m]))
			continue
		}
		for k, w := range want[m] {
			g := got[m][k]
			if g.Token != w.Token || g.TokenStr != w.TokenStr || g.Sequence != w.Sequence || math.Abs(float64(g.Score-w.Score)) > 1e-5 {
				t.Errorf("call %d text %d mask %d #%d: %+v, want %+v", call, text, m, k, g, w)
			}
		}
	}
}

// TestFillMaskErrors: a text without a mask, negative top_k and targets
// that all vanish are ErrInput; a model without a masked-LM head is
// ErrConfig.
func TestFillMaskErrors(t *testing.T) {
	sel := encodertest.Selector(t)
	dir, _, _ := readMLMGolden(t, "bert-mlm")
	p, err := models.Load(context.Background(), dir, models.Options{Selector: sel, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx := context.Background()
	for _, c := range []struct {
		texts []string
		o     models.FillMaskOptions
	}{
		{[]string{"the [MASK] is here", "no mask here"}, models.FillMaskOptions{}},
		{[]string{"the [MASK]"}, models.FillMaskOptions{TopK: -1}},
		{[]string{"the [MASK]"}, models.FillMaskOptions{Targets: []string{}}},
		{[]string{"the [MASK]"}, models.FillMaskOptions{Targets: []string{"  "}}},
	} {
		if _, err := p.FillMask(ctx, c.texts, c.o); !errors.Is(err, models.ErrInput) {
			t.Errorf("%q %+v: %v, want ErrInput", c.texts, c.o, err)
		}
	}
	if _, err := p.Embed(ctx, []string{"x"}, models.EmbedOptions{}); err != nil {
		t.Errorf("embed on a masked-LM model (its encoder's states): %v", err)
	}
}

// sparseEqual compares a SPLADE vector with the golden's [index, value]
// pairs: the same indices, values within 1e-5 of the largest.
func sparseEqual(t *testing.T, what string, got []models.SparseValue, want [][2]float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d non-zero values, want %d", what, len(got), len(want))
		return
	}
	maxRef := 0.0
	for _, w := range want {
		maxRef = math.Max(maxRef, w[1])
	}
	for k, w := range want {
		if got[k].Index != int(w[0]) || math.Abs(float64(got[k].Value)-w[1]) > 1e-5*maxRef {
			t.Errorf("%s: #%d = %+v, want %v", what, k, got[k], w)
			return
		}
	}
}

// TestSpladeGolden: SPLADE vectors equal the python reference's, on token
// ids (every family) and on texts (EmbedSparse, BERT and DistilBERT).
func TestSpladeGolden(t *testing.T) {
	sel := encodertest.Selector(t)
	for _, name := range mlmFolders {
		t.Run(name, func(t *testing.T) {
			dir, g, _ := readMLMGolden(t, name)
			p, err := models.Load(context.Background(), dir, models.Options{Selector: sel, Threads: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			in := g.padded()
			out, err := p.Forward(context.Background(), in, false)
			if err != nil {
				t.Fatal(err)
			}
			for b, want := range g.Splade {
				got, err := p.SparseOf(out, b, in.Mask)
				if err != nil {
					t.Fatal(err)
				}
				sparseEqual(t, name+" ids", got, want)
			}
			if g.SpladeText == nil {
				return
			}
			res, err := p.EmbedSparse(context.Background(), g.SpladeText.Texts, models.SparseOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for i, want := range g.SpladeText.Vectors {
				sparseEqual(t, name+" text "+g.SpladeText.Texts[i], res[i], want)
			}
		})
	}
	p := sst2Model(t, "sst2-bert-mini", models.Options{})
	if _, err := p.EmbedSparse(context.Background(), []string{"x"}, models.SparseOptions{}); !errors.Is(err, models.ErrConfig) {
		t.Errorf("sparse embedding of a classifier: %v, want ErrConfig", err)
	}
}

// TestMaskedLMInt8: int8-static and int8-dynamic masked-LM models keep
// the logits (cosine >= 0.99 with FP32 where the mask is 1, the gate of
// the random-weight goldens) and the SPLADE vectors (cosine >= 0.99).
func TestMaskedLMInt8(t *testing.T) {
	sel := encodertest.Selector(t)
	ctx := context.Background()
	for _, name := range []string{"bert-mlm", "distilbert-mlm"} {
		t.Run(name, func(t *testing.T) {
			dir, g, _ := readMLMGolden(t, name)
			p, err := models.Load(ctx, dir, models.Options{Selector: sel, Threads: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			in := g.padded()
			ref, err := p.Forward(ctx, in, false)
			if err != nil {
				t.Fatal(err)
			}
			refSparse, err := p.EmbedSparse(ctx, g.SpladeText.Texts, models.SparseOptions{})
			if err != nil {
				t.Fatal(err)
			}
			calib := append(append([]string{}, g.FillMask.Texts...), g.SpladeText.Texts...)
			for _, prec := range []models.Precision{models.PrecisionInt8Static, models.PrecisionInt8Dynamic} {
				q, err := p.Quantize(ctx, calib, prec, models.QuantizeOptions{})
				if err != nil {
					t.Fatal(err)
				}
				out, err := q.Forward(ctx, in, false)
				if err != nil {
					t.Fatal(err)
				}
				var a, b []float32
				v := g.LogitsShape[2]
				for r, m := range in.Mask {
					if m == 1 {
						a = append(a, ref.Logits[r*v:(r+1)*v]...)
						b = append(b, out.Logits[r*v:(r+1)*v]...)
					}
				}
				cos := encodertest.Cosine(a, b)
				sp, err := q.EmbedSparse(ctx, g.SpladeText.Texts, models.SparseOptions{})
				if err != nil {
					t.Fatal(err)
				}
				worst := 1.0
				for i := range sp {
					worst = math.Min(worst, encodertest.Cosine(densify(refSparse[i], v), densify(sp[i], v)))
				}
				t.Logf("%s %s: logits cosine %.5f, SPLADE cosine (worst text) %.5f", name, prec, cos, worst)
				if !(cos >= 0.99) || !(worst >= 0.99) {
					t.Errorf("%s %s: logits cosine %.5f, SPLADE %.5f; want >= 0.99", name, prec, cos, worst)
				}
				if _, err := q.FillMask(ctx, g.FillMask.Texts, models.FillMaskOptions{}); err != nil {
					t.Errorf("%s %s: fill-mask: %v", name, prec, err)
				}
				q.Close()
			}
		})
	}
}

func densify(s []models.SparseValue, n int) []float32 {
	v := make([]float32, n)
	for _, x := range s {
		v[x.Index] = x.Value
	}
	return v
}
