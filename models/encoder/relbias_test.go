package encoder

import (
	"encoding/json"
	"errors"
	"os"
	"testing"

	"github.com/int8bert/int8bert/kernels"
)

// TestRelBucketMatchesHuggingFace: relBucket gives Hugging Face's
// MPNetEncoder.relative_position_bucket (32 buckets, max distance 128) for
// every relative position the golden lists (-600 to 600), the torch float32
// log-spaced buckets included.
func TestRelBucketMatchesHuggingFace(t *testing.T) {
	raw, err := os.ReadFile("../testdata/golden/mpnet-base/golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var g struct {
		Buckets struct {
			From    int   `json:"from"`
			Buckets []int `json:"buckets"`
		} `json:"relative_position_buckets"`
	}
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatal(err)
	}
	if len(g.Buckets.Buckets) < 1000 {
		t.Fatalf("the golden lists %d buckets", len(g.Buckets.Buckets))
	}
	seen := map[int]bool{}
	for k, want := range g.Buckets.Buckets {
		rel := g.Buckets.From + k
		if got := relBucket(rel, 32, 128); got != want {
			t.Errorf("relative position %d: bucket %d, Hugging Face %d", rel, got, want)
		}
		seen[want] = true
	}
	// Bucket 16 (keys after the query at distance 0) is never reached.
	if len(seen) != 31 || seen[16] {
		t.Errorf("the golden's positions use %d buckets (16: %v), want the 31 but 16", len(seen), seen[16])
	}
}

// TestRelBiasRows: the bias row of query i, key j is the table's entry
// for bucket(j-i) and the head, for every row of sequences up to the
// longest, the first and last rows included.
func TestRelBiasRows(t *testing.T) {
	c := Config{Vocab: 10, Hidden: 8, Layers: 1, Heads: 2, Intermediate: 8, MaxPositions: 40, LayerNormEps: 1e-5,
		PaddingIdx: 1, PositionsFromPadding: true, RelBuckets: 32, RelMaxDistance: 128, RelTable: 32}
	table := make([]float32, 32*2)
	for i := range table {
		table[i] = float32(i)
	}
	m := &Model{cfg: c, relBias: relBiasVectors(c, table)}
	for _, n := range []int{1, 2, 17, c.MaxSeq()} {
		for hd := range 2 {
			for i := range n {
				row := m.relBiasRow(hd, i, n)
				for j, v := range row {
					if want := table[relBucket(j-i, 32, 128)*2+hd]; v != want {
						t.Fatalf("n %d head %d: bias[%d][%d] = %v, want %v", n, hd, i, j, v, want)
					}
				}
			}
		}
	}
}

// TestRelConfig: a relative bias configuration outside its domain is an
// ErrConfig error.
func TestRelConfig(t *testing.T) {
	base := Config{Vocab: 10, Hidden: 8, Layers: 1, Heads: 2, Intermediate: 8, MaxPositions: 40, LayerNormEps: 1e-5, Activation: kernels.ActGELU}
	for _, c := range []struct{ buckets, dist, table int }{{-2, 128, 32}, {3, 128, 32}, {32, 8, 32}, {32, 128, 16}} {
		cfg := base
		cfg.RelBuckets, cfg.RelMaxDistance, cfg.RelTable = c.buckets, c.dist, c.table
		if err := cfg.Validate(); !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: %v, want an ErrConfig error", c, err)
		}
	}
	cfg := base
	cfg.RelBuckets, cfg.RelMaxDistance, cfg.RelTable = 32, 128, 32
	if err := cfg.Validate(); err != nil {
		t.Error(err)
	}
}
