package models_test

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/int8bert/int8bert/cpu"
	"github.com/int8bert/int8bert/models"
	"github.com/int8bert/int8bert/models/encoder/encodertest"
	"github.com/int8bert/int8bert/selector"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// needBF16 skips, by name, a test of the bf16 precision on a CPU without
// AVX512-BF16 or AMX-BF16.
func needBF16(t *testing.T, sel *selector.Selector) {
	t.Helper()
	if f := sel.Features(); f.BF16Path() == cpu.ISANone {
		t.Skipf("%s: this CPU has neither AVX512-BF16 nor AMX-BF16 (%s): the bf16 precision cannot run here", t.Name(), f.String())
	}
}

// cosine is the cosine similarity of a and b.
func cosine(a, b []float32) float64 {
	var ab, aa, bb float64
	for i := range a {
		ab += float64(a[i]) * float64(b[i])
		aa += float64(a[i]) * float64(a[i])
		bb += float64(b[i]) * float64(b[i])
	}
	return ab / math.Sqrt(aa*bb)
}

// TestBF16Goldens runs every golden checkpoint, golden head and trained
// SST-2 model at bf16 and holds its outputs to the FP32 model's: cosine
// >= 0.9999 on every output, and the same argmax of every row of the
// classification logits.
func TestBF16Goldens(t *testing.T) {
	sel := encodertest.Selector(t)
	needBF16(t, sel)
	for _, c := range checkpoints {
		t.Run(c.dir, func(t *testing.T) {
			dir := checkpointDir(t, c.dir)
			f32, err := models.Load(context.Background(), dir, models.Options{Selector: sel, Threads: 1})
			require.NoError(t, err)
			defer f32.Close()
			bf, err := models.Load(context.Background(), dir, models.Options{Selector: sel, Threads: 1, Precision: models.PrecisionBF16})
			require.NoError(t, err)
			defer bf.Close()
			require.Equal(t, models.PrecisionBF16, bf.Precision())

			in, _ := readGolden(t, dir)
			a, err := f32.Forward(context.Background(), in, false)
			require.NoError(t, err)
			b, err := bf.Forward(context.Background(), in, false)
			require.NoError(t, err)
			pairs := map[string][2][]float32{"last_hidden_state": {a.Last, b.Last}, "logits": {a.Logits, b.Logits},
				"start_logits": {a.StartLogits, b.StartLogits}, "end_logits": {a.EndLogits, b.EndLogits}}
			for name, p := range pairs {
				if len(p[0]) == 0 {
					continue
				}
				require.Len(t, p[1], len(p[0]), name)
				cos := cosine(p[0], p[1])
				t.Logf("%s: cosine %.6f", name, cos)
				assert.GreaterOrEqual(t, cos, 0.9999, "%s: bf16 against fp32", name)
			}
			if n := len(f32.Labels()); n > 1 && len(a.Logits) > 0 {
				for r := 0; r < len(a.Logits)/n; r++ {
					assert.Equal(t, argmax(a.Logits[r*n:(r+1)*n]), argmax(b.Logits[r*n:(r+1)*n]), "row %d's class", r)
				}
			}
		})
	}
}

func argmax(x []float32) int {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return best
}

// TestBF16Refused: without a bf16 path (AVX512-BF16 turned off, as
// INT8BERT_CPU_DISABLE does) loading at bf16 is an ErrConfig error that
// names what is missing; an INT8 model cannot be loaded at bf16, nor a
// bf16 one quantized.
func TestBF16Refused(t *testing.T) {
	dir := shared(t, "golden/models/bert-seqcls")
	f := cpu.X86
	f.AVX512BF16, f.AMXBF16 = false, false
	sel, err := selector.New(selector.Options{Features: &f, CachePath: "off", Reps: 1, RepTime: 100 * 1000})
	require.NoError(t, err)
	defer sel.Close()
	_, err = models.Load(context.Background(), dir, models.Options{Selector: sel, Precision: models.PrecisionBF16})
	require.Error(t, err)
	assert.True(t, errors.Is(err, models.ErrConfig), "%v", err)
	assert.Contains(t, err.Error(), "AVX512-BF16")

	sel2 := encodertest.Selector(t)
	needBF16(t, sel2)
	p, err := models.Load(context.Background(), dir, models.Options{Selector: sel2, Precision: models.PrecisionBF16})
	require.NoError(t, err)
	defer p.Close()
	_, err = p.Quantize(context.Background(), nil, models.PrecisionInt8Dynamic, models.QuantizeOptions{})
	require.Error(t, err)
	assert.True(t, errors.Is(err, models.ErrConfig), "%v", err)
	assert.Contains(t, err.Error(), "bf16")
}
