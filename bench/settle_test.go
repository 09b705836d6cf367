package bench

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/int8bert/int8bert/models"
)

// TestModelSettlesEachPrecision checks that Model makes untimed passes
// after the collection that precedes each precision's timed passes, so
// that the first timed pass runs on buffers the earlier passes made (as
// every later one does) instead of allocating them again: before the
// settle step the first pass after the release allocated the whole
// scratch (the model's pool holds idle buffers weakly) and faulted it in,
// and the precision timed first read more attention and "other" time than
// the same precision timed later. It checks allocations, not times: the
// first timed pass allocates no more than the others' most.
func TestModelSettlesEachPrecision(t *testing.T) {
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
	// A ballast (never touched, so never resident) keeps the timed
	// GOGC's collections out of the passes: a collection between two
	// passes frees the idle scratch as release does, and the pass after
	// it would allocate it again whatever Model does.
	ballast := make([]byte, 512<<20)
	defer runtime.KeepAlive(ballast)
	precs := []models.Precision{models.PrecisionInt8Dynamic, models.PrecisionFP32, models.PrecisionInt8Static}
	// 16 x 128 tokens: about 4 MB of scratch, against 512 kB of output
	// a pass.
	r, err := Model(context.Background(), ModelOptions{Arch: arch, Seq: 128, Batch: 16, Precisions: precs,
		MinTime: time.Millisecond, Reps: 4, PeakTime: -1})
	if err != nil {
		t.Fatal(err)
	}
	var gcs []uint32
	for _, p := range buildOrder(precs) {
		i := slices.Index(precs, p)
		x := r.Results[i]
		st := x.settled
		if st.Passes < settleMinPasses || st.Passes > settleMaxPasses {
			t.Errorf("%s: %d settle passes, want %d to %d", p, st.Passes, settleMinPasses, settleMaxPasses)
		}
		gcs = append(gcs, st.GCs)
		if len(x.allocs) != x.Passes || x.Passes < 2 {
			t.Fatalf("%s: %d passes, %d allocation counts", p, x.Passes, len(x.allocs))
		}
		most := slices.Max(x.allocs[1:])
		if x.allocs[0] > most+256<<10 {
			t.Errorf("%s: the first timed pass allocated %d bytes, the others at most %d: it was not warm (%v)", p, x.allocs[0], most, x.allocs)
		}
	}
	// Each precision's settle step follows a collection of its own.
	for i := 1; i < len(gcs); i++ {
		if gcs[i] <= gcs[i-1] {
			t.Errorf("collections completed before each settle step, in build order: %v; want a collection before each", gcs)
		}
	}
}
