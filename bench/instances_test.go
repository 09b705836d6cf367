package bench

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/int8bert/int8bert/models"
)

func TestModelInstances(t *testing.T) {
	t.Setenv("INT8BERT_TUNING_CACHE", "off")
	t.Setenv("INT8BERT_KERNEL", "generic")
	root := "../../shared"
	if d := os.Getenv("INT8BERT_SHARED"); d != "" {
		root = d
	}
	arch := filepath.Join(root, "golden/models/bert-base")
	if _, err := os.Stat(arch); err != nil {
		t.Skipf("%s: %v", arch, err)
	}
	r, err := Model(context.Background(), ModelOptions{Arch: arch, Seq: 8, Precisions: []models.Precision{models.PrecisionFP32, models.PrecisionInt8Static},
		MinTime: time.Millisecond, Reps: 2, PeakTime: -1, Instances: 2})
	if err != nil {
		t.Fatal(err)
	}
	if r.Instances != 2 || r.Loads != 1 || len(r.Results) != 2 {
		t.Fatalf("instances %d, loads %d, %d results; want 2, 1 (the model loaded once), 2", r.Instances, r.Loads, len(r.Results))
	}
	for _, x := range r.Results {
		ir := x.Instances
		if ir == nil {
			t.Fatalf("%s: no instances result", x.Precision)
		}
		if ir.Instances != 2 || len(ir.MsPerBatch) != 2 || len(ir.Passes) != 2 || ir.Pinned {
			t.Errorf("%s: %+v; want 2 unpinned instances' figures", x.Precision, ir)
		}
		for i := range 2 {
			if ir.MsPerBatch[i] <= 0 || ir.Passes[i] < 2 {
				t.Errorf("%s: instance %d: %v ms, %d passes", x.Precision, i, ir.MsPerBatch[i], ir.Passes[i])
			}
		}
		if ir.SeqPerS <= 0 || ir.OneSeqPerS <= 0 || ir.Scaling != ir.SeqPerS/ir.OneSeqPerS || ir.WeightBytes <= 0 {
			t.Errorf("%s: %+v", x.Precision, ir)
		}
		if runtime.GOOS == "linux" && (ir.RSS <= 0 || ir.RSSAfter <= 0 || ir.ExtraPerInstance != (ir.RSSAfter-ir.RSS)) {
			t.Errorf("%s: RSS %d, after %d, extra %d: want both set on Linux", x.Precision, ir.RSS, ir.RSSAfter, ir.ExtraPerInstance)
		}
	}
	// One instance: no instances result.
	r, err = Model(context.Background(), ModelOptions{Arch: arch, Seq: 8, Precisions: []models.Precision{models.PrecisionFP32},
		MinTime: time.Millisecond, Reps: 1, PeakTime: -1})
	if err != nil || r.Instances != 1 || r.Results[0].Instances != nil {
		t.Fatalf("one instance: %v, %+v", err, r)
	}
}
