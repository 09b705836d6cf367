package bench

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/int8bert/int8bert/cpu"
	"github.com/int8bert/int8bert/kernels/peak"
	"github.com/int8bert/int8bert/models"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestArithmeticIntensity checks AI against the hand count of BERT-large's
// 256x1024x1024 GEMM: 2*256*1024*1024 ops over A + B + C bytes.
func TestArithmeticIntensity(t *testing.T) {
	ops := 2.0 * 256 * 1024 * 1024
	for d, bytes := range map[string]float64{
		"int8": 256*1024 + 1024*1024 + 4*256*1024,
		"bf16": 2*256*1024 + 2*1024*1024 + 4*256*1024,
		"fp32": 4 * (256*1024 + 1024*1024 + 256*1024),
	} {
		assert.InDelta(t, ops/bytes, ArithmeticIntensity(256, 1024, 1024, d), 1e-9, d)
	}
	assert.InDelta(t, 227.56, ArithmeticIntensity(256, 1024, 1024, "int8"), 0.01)
	assert.Equal(t, 100.0, RooflineGOPS(10, 100, 20), "compute bound")
	assert.Equal(t, 50.0, RooflineGOPS(2.5, 100, 20), "memory bound")
}

// TestModelShapes: BERT-large at 256 tokens has four GEMMs, 24 of each per
// pass, of the paper's Table 5 dimensions (QKV fused).
func TestModelShapes(t *testing.T) {
	a, err := LookupArch("bert-large")
	require.NoError(t, err)
	c, err := a.ModelConfig()
	require.NoError(t, err)
	s := ModelShapes(c, 256, 1)
	require.Len(t, s, 4)
	want := [][3]int{{256, 1024, 3072}, {256, 1024, 1024}, {256, 1024, 4096}, {256, 4096, 1024}}
	for i, w := range want {
		assert.Equal(t, w, [3]int{s[i].M, s[i].K, s[i].N}, s[i].Name)
		assert.Equal(t, 24, s[i].Count)
		assert.Greater(t, s[i].AI["int8"], s[i].AI["bf16"])
		assert.Greater(t, s[i].AI["bf16"], s[i].AI["fp32"])
	}
	assert.Equal(t, 512, ModelShapes(c, 256, 2)[0].M, "batch x seq rows")
}

// syntheticReport is a report with known figures: one model, fp32, bf16
// and int8-static passes, a roofline of 100/200/400 GOP/s at 10 GB/s.
func syntheticReport(t *testing.T) *PaperReport {
	t.Helper()
	c := models.Config{Hidden: 64, Intermediate: 256, Layers: 2, Heads: 4}
	shapes := ModelShapes(c, 32, 1)
	pk := Peaks{Threads: 1, PassGBps: 10, PeakByDType: map[string]float64{"fp32": 100, "bf16": 200, "int8": 400},
		PeakByDType1: map[string]float64{}, Balance: map[string]float64{}, BalanceOne: map[string]float64{}}
	mr := &ModelReport{Arch: "tiny", Seq: 32, Batch: 1, Results: []ModelResult{
		{Precision: "fp32", MsPerBatch: 10, SeqPerS: 100, LinearMs: 8, AttentionMs: 1, OtherMs: 1, LayerNormMs: 0.5},
		{Precision: "bf16", MsPerBatch: 5, SeqPerS: 200, LinearMs: 4, AttentionMs: 0.5, OtherMs: 0.5, LayerNormMs: 0.25},
		{Precision: "int8-static", MsPerBatch: 2.5, SeqPerS: 400, LinearMs: 2, AttentionMs: 0.25, OtherMs: 0.25, LayerNormMs: 0.1},
	}}
	rep := &PaperReport{Peaks: pk, Model: "tiny", ModelSeq: 32, Shapes: shapes, Models: []*ModelReport{mr},
		Meta: PaperMeta{CPU: "test CPU", Cores: 2, Date: time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC), Commit: "abc", Go: "go1.26",
			Command: "int8bert bench paper --quick", Settings: map[string]string{"threads": "1", "batch": "1"}}}
	rep.addModel(PaperModel{Arch: "tiny", Seq: 32}, mr, shapes, pk, 10)
	return rep
}

// TestPaperTables checks the rows derived from a model report: the
// hotspot shares add up to 100, the speed-ups over fp32 and bf16, and the
// ceiling from the roofline of every linear.
func TestPaperTables(t *testing.T) {
	rep := syntheticReport(t)
	require.Len(t, rep.Hotspots, 3)
	for _, h := range rep.Hotspots {
		assert.InDelta(t, 100, h.LinearPct+h.AttentionPct+h.LayerNormPct+h.OtherPct, 1e-9, h.Precision)
	}
	assert.InDelta(t, 80, rep.Hotspots[0].LinearPct, 1e-9)
	assert.InDelta(t, 5, rep.Hotspots[0].LayerNormPct, 1e-9)
	require.Len(t, rep.Speedups, 3)
	i8 := rep.Speedups[2]
	assert.InDelta(t, 4, i8.VsFP32, 1e-9)
	assert.InDelta(t, 2, i8.VsBF16, 1e-9)
	assert.InDelta(t, 4, i8.LinearVsFP32, 1e-9)
	assert.InDelta(t, 2, i8.LinearVsBF16, 1e-9)

	require.Len(t, rep.Ceilings, 3)
	for _, c := range rep.Ceilings {
		d := DTypeOf(must(models.ParsePrecision(c.Precision)))
		roof := 0.0
		for _, s := range rep.Shapes {
			roof += float64(s.Count) * s.Ops() / math.Min(rep.Peaks.PeakByDType[d], s.AI[d]*10) / 1e6
		}
		assert.InDelta(t, roof, c.RoofMs, 1e-9, c.Precision)
		assert.InDelta(t, c.LinearMs-roof, c.LinearLossMs, 1e-9)
		ceil := 1e3 / (roof + c.AttentionMs + c.OtherMs)
		assert.InDelta(t, ceil, c.CeilSeqPerS, 1e-6)
		assert.InDelta(t, 100*(1-c.SeqPerS/ceil), c.GapPct, 1e-6)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestPaperWriteFiles writes a report: Markdown with every table under
// its label and the command, JSON, and the three charts.
func TestPaperWriteFiles(t *testing.T) {
	rep := syntheticReport(t)
	rep.GEMMs = []GEMMFigure{{Shape: "qkv 32x64x192", DType: "int8", Kernel: "k", GOPS: 100, AI: 10, EffGBps: 10, Roofline: 100, PctRoof: 100, Bound: "memory"}}
	acc := 0.8
	rep.Accuracy = []AccuracyRow{{Model: "m", Task: "sst2", Precision: "fp32", N: 10, Accuracy: &acc, Agreement: &acc}}
	dir := filepath.Join(t.TempDir(), "out")
	files, err := rep.WriteFiles(dir)
	require.NoError(t, err)
	for _, n := range []string{"report.md", "report.json", "roofline.svg", "roofline.png", "speedups.svg", "speedups.png", "hotspots-tiny.svg", "hotspots-tiny.png"} {
		p := filepath.Join(dir, n)
		assert.Contains(t, files, p)
		st, err := os.Stat(p)
		if assert.NoError(t, err, n) {
			assert.Greater(t, st.Size(), int64(100), n)
		}
	}
	md, err := os.ReadFile(filepath.Join(dir, "report.md"))
	require.NoError(t, err)
	s := string(md)
	for _, h := range []string{"Table 3", "Table 4", "Table 5", "Tables 6-7", "Tables 11-13", "Table 14", "Table 15"} {
		assert.Contains(t, s, "## "+h)
	}
	assert.Equal(t, 7, strings.Count(s, "_Reproduce: `int8bert bench paper --quick`_"), "the command above every table")
	assert.Contains(t, s, "test CPU")
	assert.Contains(t, s, "80.00%")
	assert.Contains(t, s, "| tiny | int8-static | 2.5 |")
}

// TestPaperTiny runs the whole measurement on a tiny golden model with
// the shortest timings: every table has its rows.
func TestPaperTiny(t *testing.T) {
	root := filepath.Join(sharedFolder(), "golden", "models", "bert-base")
	if _, err := os.Stat(root); err != nil {
		t.Skipf("%s: golden models not found at %s (the project's shared folder): %v", t.Name(), root, err)
	}
	precs := []models.Precision{models.PrecisionFP32, models.PrecisionInt8Dynamic}
	if cpu.X86.BF16Path() != cpu.ISANone {
		precs = append(precs, models.PrecisionBF16)
	} else {
		t.Logf("%s: no bf16 path on this CPU: bf16 left out", t.Name())
	}
	steps := 0
	var est time.Duration
	rep, err := Paper(context.Background(), PaperOptions{Models: []PaperModel{{Arch: root, Seq: 8}}, Precisions: precs,
		MinTime: time.Millisecond, Reps: 1, PeakTime: 10 * time.Millisecond, TriadBytes: 3 << 20, GEMMReps: 1, GEMMRepTime: time.Millisecond,
		Progress: func(step, n int, what string) { steps = step; assert.Equal(t, 4, n) }, Estimate: func(d time.Duration) { est = d }})
	require.NoError(t, err)
	assert.Equal(t, 4, steps)
	assert.Greater(t, est, time.Duration(0))
	assert.Len(t, rep.Hotspots, len(precs))
	assert.Len(t, rep.Speedups, len(precs))
	assert.Len(t, rep.Shapes, 4)
	assert.NotEmpty(t, rep.GEMMs)
	assert.Greater(t, rep.Peaks.TriadOne.BestGBps, 0.0)
	if peak.Available() {
		assert.Greater(t, rep.Peaks.OneCore.FP32GFLOPS, 0.0)
		assert.Len(t, rep.Ceilings, len(precs))
	}
	for _, s := range rep.Speedups {
		if s.Precision == "fp32" {
			assert.InDelta(t, 1, s.VsFP32, 1e-9)
		}
	}
	_, err = Paper(context.Background(), PaperOptions{Models: []PaperModel{{Arch: root, Seq: 0}}})
	assert.ErrorIs(t, err, models.ErrConfig)
}

// TestEstimatePaper: one part for the GEMMs and one per architecture
// (folders are not counted); a shape tuned once, or found in the cache,
// is not counted again; a longer MinTime costs more.
func TestEstimatePaper(t *testing.T) {
	precs := []models.Precision{models.PrecisionFP32, models.PrecisionInt8Static}
	o := PaperOptions{Models: []PaperModel{{"bert-base", 64}, {"distilbert", 64}, {"xlmr-base", 64}, {"/a/folder", 8}}, Precisions: precs,
		MinTime: 200 * time.Millisecond, Reps: 2, PeakTime: 100 * time.Millisecond}
	parts := EstimatePaper(o, 200, nil)
	require.Len(t, parts, 4)
	assert.Equal(t, "GEMM shapes", parts[0].Name)
	assert.Equal(t, "bert-base at seq 64", parts[1].Name)
	// The same shapes as bert-base: no tuning, and a smaller model.
	assert.Less(t, parts[2].Time+2*4*estTunePerShape, parts[1].Time)
	// xlmr-base's 250k-token embeddings cost their building, not their
	// quantizing (they stay FP32): xlmr-base is bert-base's linears with
	// (250002+514+1) - (30522+512+2) rows of 768 more to make.
	emb := time.Duration(float64((250002+514+1)-(30522+512+2)) * 768 * estLoadNsPerParam)
	assert.InDelta(t, float64(parts[1].Time-2*4*estTunePerShape+emb), float64(parts[3].Time), 0.02*float64(parts[3].Time))
	warm := EstimatePaper(o, 200, func(string, int, int, int) bool { return true })
	assert.Equal(t, SumParts(parts)-2*4*estTunePerShape, SumParts(warm), "8 uncached shapes (2 ops x 4) in the cold run")
	o.MinTime = 10 * time.Second
	assert.Greater(t, SumParts(EstimatePaper(o, 200, nil)), SumParts(parts)+3*2*9*time.Second)
	assert.Nil(t, EstimatePaper(o, 0, nil))
}
