package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// goldenInputs writes the inputs of golden/models/<name>/golden.json as a
// forward --inputs file.
func goldenInputs(t *testing.T, name string) (model, inputs string) {
	t.Helper()
	model = sharedPath(t, filepath.Join("golden/models", name))
	b, err := os.ReadFile(filepath.Join(model, "golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g struct {
		Inputs json.RawMessage `json:"inputs"`
	}
	if err := json.Unmarshal(b, &g); err != nil || len(g.Inputs) == 0 {
		t.Fatalf("%s/golden.json: no inputs (%v)", model, err)
	}
	return model, writeFile(t, "inputs.json", string(g.Inputs))
}

// forwardOut runs forward and returns its outputs by name.
func forwardOut(t *testing.T, args ...string) map[string]any {
	t.Helper()
	out := mustCLI(t, append([]string{"forward"}, args...)...)
	var r map[string]any
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("forward output: %v", err)
	}
	return r
}

// flatten returns the numbers of a nested JSON array and its shape.
func flatten(v any) (vals []float64, shape []int, ok bool) {
	switch x := v.(type) {
	case float64:
		return []float64{x}, nil, true
	case []any:
		var inner []int
		for i, e := range x {
			ev, es, ok := flatten(e)
			if !ok || (i > 0 && !slices.Equal(es, inner)) {
				return nil, nil, false
			}
			inner = es
			vals = append(vals, ev...)
		}
		return vals, append([]int{len(x)}, inner...), true
	}
	return nil, nil, false
}

// TestForwardPrecision: forward --precision int8-dynamic on the tiny
// golden models gives finite outputs of FP32's names and shapes, close to
// them; int8-static without --calib, or on the tokenizer-less folder, fails.
func TestForwardPrecision(t *testing.T) {
	fastKernels(t)
	for _, name := range []string{"bert-base", "distilbert-seqcls", "xlm-roberta-qa"} {
		t.Run(name, func(t *testing.T) {
			model, in := goldenInputs(t, name)
			fp := forwardOut(t, "--model", model, "--inputs", in)
			q := forwardOut(t, "--model", model, "--inputs", in, "--precision", "int8-dynamic")
			asStored := forwardOut(t, "--model", model, "--inputs", in, "--precision", "fp32")
			if len(fp) == 0 || len(q) != len(fp) || len(asStored) != len(fp) {
				t.Fatalf("outputs: fp32 %d, int8-dynamic %d, --precision fp32 %d", len(fp), len(q), len(asStored))
			}
			for k, v := range fp {
				fv, fs, ok := flatten(v)
				if !ok {
					t.Fatalf("fp32 %s: not a regular array", k)
				}
				qv, qs, ok := flatten(q[k])
				if !ok || !slices.Equal(fs, qs) {
					t.Errorf("%s: int8-dynamic shape %v, fp32 %v", k, qs, fs)
					continue
				}
				var num, den float64
				for i := range qv {
					if math.IsNaN(qv[i]) || math.IsInf(qv[i], 0) {
						t.Fatalf("%s: non-finite int8-dynamic output", k)
					}
					num += (qv[i] - fv[i]) * (qv[i] - fv[i])
					den += fv[i] * fv[i]
				}
				// Relative RMS error of W8A8 on a tiny random model: loose.
				rel := math.Sqrt(num / den)
				t.Logf("%s %v: relative error %.4f", k, fs, rel)
				if rel > 0.2 {
					t.Errorf("%s: int8-dynamic is %.3f (relative) away from fp32", k, rel)
				}
				sv, _, _ := flatten(asStored[k])
				for i := range sv {
					if sv[i] != fv[i] {
						t.Errorf("%s: --precision fp32 differs from the default on an FP32 model", k)
						break
					}
				}
			}
		})
	}
	model, in := goldenInputs(t, "bert-base")
	wantCLIError(t, "--calib", "forward", "--model", model, "--inputs", in, "--precision", "int8-static")
	// The calibration texts need a tokenizer, which this folder lacks.
	calib := tinyCalib(t, 4)
	wantCLIError(t, "", "forward", "--model", model, "--inputs", in, "--precision", "int8-static", "--calib", calib)
	wantCLIError(t, "", "forward", "--model", model, "--inputs", in, "--precision", "int7")
	wantCLIError(t, "", "forward", "--model", model, "--inputs", in, "--precision", "int8-dynamic", "--alpha", "x")
}

// TestForwardStaticTiny: with a tokenizer in the folder, forward
// --precision int8-static --calib works.
func TestForwardStaticTiny(t *testing.T) {
	fastKernels(t)
	model := tinyModel(t, "bert-seqcls")
	in := writeFile(t, "in.json", `{"input_ids": [[101, 5, 6, 7, 102], [101, 8, 102, 0, 0]], "attention_mask": [[1,1,1,1,1],[1,1,1,0,0]]}`)
	calib := tinyCalib(t, 8)
	fp := forwardOut(t, "--model", model, "--inputs", in)
	st := forwardOut(t, "--model", model, "--inputs", in, "--precision", "int8-static", "--calib", calib)
	fv, fs, _ := flatten(fp["logits"])
	sv, ss, ok := flatten(st["logits"])
	if !ok || !slices.Equal(fs, ss) || !slices.Equal(fs, []int{2, 3}) {
		t.Fatalf("logits shapes: fp32 %v, int8-static %v; want [2 3]", fs, ss)
	}
	for i := range sv {
		if math.IsNaN(sv[i]) || math.IsInf(sv[i], 0) || math.Abs(sv[i]-fv[i]) > 0.1+0.1*math.Abs(fv[i]) {
			t.Errorf("logit %d: int8-static %v, fp32 %v", i, sv[i], fv[i])
		}
	}
	// A saved artifact runs as stored and refuses another precision.
	art := filepath.Join(t.TempDir(), "art")
	mustCLI(t, "quantize", "--model", model, "--calib", calib, "-o", art)
	a := forwardOut(t, "--model", art, "--inputs", in)
	av, _, _ := flatten(a["logits"])
	for i := range av {
		if math.Abs(av[i]-sv[i]) > 1e-4 {
			t.Errorf("logit %d: artifact %v, at-load int8-static %v", i, av[i], sv[i])
		}
	}
	wantCLIError(t, "", "forward", "--model", art, "--inputs", in, "--precision", "fp32")
	wantCLIError(t, "", "forward", "--model", art, "--inputs", in, "--precision", "int8-dynamic")
}
