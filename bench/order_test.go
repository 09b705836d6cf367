package bench

import (
	"slices"
	"testing"

	"github.com/int8bert/int8bert/models"
)

// TestBuildOrder checks the order Model builds and times the precisions
// in: each once, FP32 first, the INT8 ones (quantized from it) next,
// BF16 (its own model) last, the INT8 ones in the order given.
func TestBuildOrder(t *testing.T) {
	fp32, bf16, st, dy := models.PrecisionFP32, models.PrecisionBF16, models.PrecisionInt8Static, models.PrecisionInt8Dynamic
	for _, c := range []struct{ in, want []models.Precision }{
		{[]models.Precision{fp32, bf16, st, dy}, []models.Precision{fp32, st, dy, bf16}},
		{[]models.Precision{bf16, dy, st, fp32}, []models.Precision{fp32, dy, st, bf16}},
		{[]models.Precision{st, st, fp32, st}, []models.Precision{fp32, st}},
		{[]models.Precision{bf16}, []models.Precision{bf16}},
		{nil, nil},
	} {
		if got := buildOrder(c.in); !slices.Equal(got, c.want) {
			t.Errorf("buildOrder(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}

// TestNeedsFP32 checks when Model may release the FP32 model: once no
// precision left is FP32 or an INT8 one still to be quantized from it.
func TestNeedsFP32(t *testing.T) {
	fp32, bf16, st, dy := models.PrecisionFP32, models.PrecisionBF16, models.PrecisionInt8Static, models.PrecisionInt8Dynamic
	none := map[models.Precision]*models.Pipeline{}
	done := map[models.Precision]*models.Pipeline{st: nil, dy: nil}
	done[st], done[dy] = &models.Pipeline{}, &models.Pipeline{}
	for _, c := range []struct {
		rest      []models.Precision
		quantized map[models.Precision]*models.Pipeline
		want      bool
	}{
		{[]models.Precision{st, dy, bf16}, none, true},
		{[]models.Precision{st, dy, bf16}, done, false},
		{[]models.Precision{bf16}, none, false},
		{[]models.Precision{fp32, bf16}, done, true},
		{nil, none, false},
	} {
		if got := needsFP32(c.rest, c.quantized); got != c.want {
			t.Errorf("needsFP32(%v, %d quantized) = %v, want %v", c.rest, len(c.quantized), got, c.want)
		}
	}
}
