package encodertest

import (
	"context"
	"testing"

	"github.com/int8bert/int8bert/models/encoder"
	"github.com/int8bert/int8bert/selector"
)

// GoldenInt8Attention is the accuracy gate of INT8 attention
// (docs/DESIGN.md section 3.10): the golden model folder name quantized in
// both modes (calibrated on its golden inputs), saved, and loaded twice,
// with encoder.AttentionInt8 and with encoder.AttentionF32; on the golden
// inputs every output of the INT8-attention model has a cosine of at
// least minCos with the FP32-attention model's (per-token outputs where
// attention_mask is 1), and the argmax of each row of logits (each
// sequence's start and end for QA) agrees.
func GoldenInt8Attention(t *testing.T, sel *selector.Selector, name string, fam *encoder.Family, minCos float64) {
	t.Helper()
	_, m, in := loadGolden(t, sel, name, fam)
	defer m.Close()
	for _, prec := range []encoder.Precision{encoder.PrecisionInt8Static, encoder.PrecisionInt8Dynamic} {
		q, err := m.Quantize(context.Background(), []*encoder.Inputs{in}, prec, encoder.QuantizeOptions{})
		if err != nil {
			t.Fatalf("%s: quantize %s: %v", name, prec, err)
		}
		dir := t.TempDir()
		if err := q.Save(dir); err != nil {
			t.Fatal(err)
		}
		q.Close()
		var outs [2]*encoder.TaskOutput
		for i, mode := range []encoder.AttentionMode{encoder.AttentionF32, encoder.AttentionInt8} {
			p, err := encoder.LoadTask(dir, fam, encoder.Options{Selector: sel, Threads: 1, Attention: mode})
			if err != nil {
				t.Fatalf("%s %s: load with attention %v: %v", name, prec, mode, err)
			}
			if got := p.Encoder.Attention(); got != mode {
				t.Errorf("%s %s: loaded with attention %v, runs %v", name, prec, mode, got)
			}
			if outs[i], err = p.Forward(in, false); err != nil {
				t.Fatal(err)
			}
			p.Close()
		}
		for _, o := range outputsOf(outs[0], outs[1], m.Task) {
			a, b := o.ref, o.got
			if o.perToken {
				a, b = maskRows(a, in), maskRows(b, in)
			}
			c := Cosine(a, b)
			t.Logf("%s %s %s: int8 attention vs f32 attention: cosine %.6f", name, prec, o.name, c)
			if !(c >= minCos) {
				t.Errorf("%s %s %s: int8 attention's cosine with f32 attention's %.6f < %v", name, prec, o.name, c, minCos)
			}
			if o.name == "logits" || o.name == "start_logits" || o.name == "end_logits" {
				// Masked where there is one value per token; a row of
				// several labels per token is compared whole.
				n, masked := len(o.ref)/in.Batch, o.perToken && len(o.ref) == len(in.Mask)
				for r := 0; r < in.Batch; r++ {
					ra, rb := argmax(o.ref[r*n:(r+1)*n], in.Mask, r, masked), argmax(o.got[r*n:(r+1)*n], in.Mask, r, masked)
					if ra != rb {
						t.Errorf("%s %s %s: row %d: argmax %d with int8 attention, %d with f32", name, prec, o.name, r, rb, ra)
					}
				}
			}
		}
	}
}

// argmax is the index of the largest of x (row r of a batch; perToken:
// over the row's real tokens only).
func argmax(x []float32, mask []int32, r int, perToken bool) int {
	best := -1
	for j, v := range x {
		if perToken && mask != nil && mask[r*len(x)+j] == 0 {
			continue
		}
		if best < 0 || v > x[best] {
			best = j
		}
	}
	return best
}
