package encodertest

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/int8bert/int8bert/models"
	"github.com/int8bert/int8bert/models/encoder"
	"github.com/int8bert/int8bert/selector"
)

// CalibTexts are the first n sentences of SST-2 train (the calibration set
// of the INT8 tests: never the dev sentences they are scored on).
func CalibTexts(t testing.TB, n int) []string {
	t.Helper()
	texts, _, err := ReadSST2(filepath.Join(DataDir, "sst2", "train.tsv"))
	if os.IsNotExist(err) {
		t.Skipf("SST-2 train data not found in %s (the project's shared folder): %v", DataDir, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return texts[:min(n, len(texts))]
}

// classifyAll returns the logits ([n][labels]) and predictions of texts.
func classifyAll(t testing.TB, p *models.Pipeline, texts []string) ([]float32, []int) {
	t.Helper()
	var logits []float32
	var pred []int
	for i := 0; i < len(texts); i += 32 {
		res, err := p.Classify(context.Background(), texts[i:min(i+32, len(texts))], models.ClassifyOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			logits = append(logits, r.Logits...)
			pred = append(pred, r.Index)
		}
	}
	return logits, pred
}

// SST2Int8 quantizes the trained SST-2 model name in both modes (alpha 0.5,
// calibrated on 256 SST-2 train sentences) and checks, on the 872 dev
// sentences, that each mode's accuracy is within 0.3 points of FP32 and
// that its logits have a cosine similarity of at least 0.999 with FP32's
// (over the whole dev set, and reported per sentence at the worst).
func SST2Int8(t *testing.T, sel *selector.Selector, name string, fam *encoder.Family) {
	t.Helper()
	if testing.Short() {
		t.Skip("INT8 SST-2 dev accuracy (872 sentences, two quantizations) is skipped in -short mode; run without -short")
	}
	dir, texts, labels := sst2Dev(t, name)
	calib := CalibTexts(t, 256)
	// MaxLength 64: as trained.
	p, err := LoadAs(dir, fam, models.Options{Selector: sel, Threads: 2, MaxLength: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	accOf := func(pred []int) float64 {
		c := 0
		for i, y := range pred {
			if y == labels[i] {
				c++
			}
		}
		return float64(c) / float64(len(pred))
	}
	ref, refPred := classifyAll(t, p, texts)
	fp32 := accOf(refPred)
	t.Logf("%s fp32: accuracy %.4f", name, fp32)
	for _, prec := range []models.Precision{models.PrecisionInt8Static, models.PrecisionInt8Dynamic} {
		q, err := p.Quantize(context.Background(), calib, prec, models.QuantizeOptions{})
		if err != nil {
			t.Fatalf("%s: quantize %s: %v", name, prec, err)
		}
		got, pred := classifyAll(t, q, texts)
		q.Close()
		acc := accOf(pred)
		agree := 0
		for i := range pred {
			if pred[i] == refPred[i] {
				agree++
			}
		}
		cos, worst := Cosine(ref, got), 1.0
		n := len(ref) / len(texts)
		for i := range texts {
			worst = math.Min(worst, Cosine(ref[i*n:(i+1)*n], got[i*n:(i+1)*n]))
		}
		t.Logf("%s %s: accuracy %.4f (fp32 %.4f, %+.2f points), agreement %.4f, logits cosine %.6f (worst sentence %.6f)",
			name, prec, acc, fp32, 100*(acc-fp32), float64(agree)/float64(len(pred)), cos, worst)
		if math.Abs(acc-fp32) > 0.003+1e-9 {
			t.Errorf("%s %s: accuracy %.4f is more than 0.3 points from fp32 %.4f", name, prec, acc, fp32)
		}
		if !(cos >= 0.999) {
			t.Errorf("%s %s: logits cosine %.6f < 0.999", name, prec, cos)
		}
	}
}

// Cosine is the cosine similarity of a and b (1 when both are zero). It
// is here rather than bench.Cosine because bench's own tests import this
// package.
func Cosine(a, b []float32) float64 {
	var ab, aa, bb float64
	for i := range a {
		ab += float64(a[i]) * float64(b[i])
		aa += float64(a[i]) * float64(a[i])
		bb += float64(b[i]) * float64(b[i])
	}
	if aa == 0 && bb == 0 {
		return 1
	}
	return ab / math.Sqrt(aa*bb)
}

// GoldenInt8 quantizes the golden model folder name in both modes
// (calibrated on its own golden inputs), checks every output against the
// FP32 model's (cosine >= minCos where attention_mask is 1), saves the
// INT8 model, loads it back and checks that the outputs are bit-identical.
func GoldenInt8(t *testing.T, sel *selector.Selector, name string, fam *encoder.Family, minCos float64) {
	t.Helper()
	_, m, in := loadGolden(t, sel, name, fam)
	defer m.Close()
	ref, err := m.Forward(in, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, prec := range []encoder.Precision{encoder.PrecisionInt8Static, encoder.PrecisionInt8Dynamic} {
		q, err := m.Quantize(context.Background(), []*encoder.Inputs{in}, prec, encoder.QuantizeOptions{})
		if err != nil {
			t.Fatalf("%s: quantize %s: %v", name, prec, err)
		}
		got, err := q.Forward(in, false)
		if err != nil {
			t.Fatalf("%s %s: forward: %v", name, prec, err)
		}
		for _, o := range outputsOf(ref, got, m.Task) {
			a, b := maskRows(o.ref, in), maskRows(o.got, in)
			if !o.perToken {
				a, b = o.ref, o.got
			}
			c := Cosine(a, b)
			t.Logf("%s %s %s: cosine with fp32 %.6f", name, prec, o.name, c)
			if !(c >= minCos) {
				t.Errorf("%s %s %s: cosine with fp32 %.6f < %v", name, prec, o.name, c, minCos)
			}
		}
		saved := t.TempDir()
		if err := q.Save(saved); err != nil {
			t.Fatalf("%s %s: save: %v", name, prec, err)
		}
		back, err := loadModel(saved, fam, sel)
		if err != nil {
			t.Fatalf("%s %s: load the saved artifact: %v", name, prec, err)
		}
		if back.Encoder.Precision() != prec || back.Task != m.Task {
			t.Errorf("%s: saved %s %s, loaded %s %s", name, prec, m.Task, back.Encoder.Precision(), back.Task)
		}
		again, err := back.Forward(in, false)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range outputsOf(got, again, m.Task) {
			for i := range o.ref {
				if math.Float32bits(o.ref[i]) != math.Float32bits(o.got[i]) {
					t.Errorf("%s %s %s: loaded artifact differs at %d: %v, before saving %v", name, prec, o.name, i, o.got[i], o.ref[i])
					break
				}
			}
		}
		back.Close()
		q.Close()
	}
}

type outputPair struct {
	name     string
	ref, got []float32
	perToken bool
}

// outputsOf pairs the outputs two forward passes of a model of task t
// both have.
func outputsOf(a, b *encoder.TaskOutput, t encoder.Task) []outputPair {
	var out []outputPair
	add := func(name string, x, y []float32, perToken bool) {
		if x != nil {
			out = append(out, outputPair{name, x, y, perToken})
		}
	}
	add("last_hidden_state", a.Last, b.Last, true)
	add("pooler_output", a.PoolerOutput, b.PoolerOutput, false)
	add("logits", a.Logits, b.Logits, PerTokenLogits(t))
	add("start_logits", a.StartLogits, b.StartLogits, true)
	add("end_logits", a.EndLogits, b.EndLogits, true)
	return out
}

// maskRows keeps the values of the tokens whose attention mask is 1.
func maskRows(x []float32, in *encoder.Inputs) []float32 {
	per := len(x) / len(in.Mask)
	var out []float32
	for i, mk := range in.Mask {
		if mk != 0 {
			out = append(out, x[i*per:(i+1)*per]...)
		}
	}
	return out
}
