package models

import (
	"math"
	"runtime/debug"
	"slices"
	"testing"
	"time"

	"github.com/int8bert/int8bert/checkpoint"
)

// TestFillRandomNormalOdd: odd sizes fill every element.
func TestFillRandomNormalOdd(t *testing.T) {
	odd := make([]float32, 7)
	fillRandomNormal(odd, 1, 1)
	if odd[6] == 0 {
		t.Error("last element of an odd-sized tensor not filled")
	}
}

// TestRandomWeightsSpeed measures the generator on memory already mapped:
// XLM-R base's 250002x768 word embeddings must take seconds at most.
func TestRandomWeightsSpeed(t *testing.T) {
	v := make([]float32, 1<<23)
	for i := range v {
		v[i] = 1
	}
	best := time.Duration(math.MaxInt64)
	for rep := 0; rep < 3; rep++ {
		start := time.Now()
		fillRandomNormal(v, uint64(rep), 0.02)
		best = min(best, time.Since(start))
	}
	rate := float64(len(v)) / best.Seconds()
	xlmr := time.Duration(250002 * 768 / rate * float64(time.Second))
	t.Logf("%.0f M values/s: xlmr-base word embeddings in %v, plus the page faults of a fresh 768 MB", rate/1e6, xlmr)
	if raceBuild() {
		t.Skip("the race detector slows the generator down; no timing check")
	}
	if xlmr > 4*time.Second {
		t.Errorf("%.0f M values/s: xlmr-base word embeddings would take %v", rate/1e6, xlmr)
	}
}

// raceBuild reports whether the test binary was built with -race.
func raceBuild() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range bi.Settings {
		if s.Key == "-race" && s.Value == "true" {
			return true
		}
	}
	return false
}

// TestRandomWeightsParallel: the chunked parallel generation of XLM-R
// base's 250002x768 word embeddings (768 MB) gives what one sequential
// pass gives (bench's TestRandomWeightsXLMREmbedding checks its values).
func TestRandomWeightsParallel(t *testing.T) {
	if testing.Short() {
		t.Skip("generates 768 MB; skipped in -short mode")
	}
	cfg, err := checkpoint.ParseConfig([]byte(`{"model_type": "xlm-roberta", "architectures": ["XLMRobertaModel"],
		"vocab_size": 250002, "hidden_size": 768, "num_hidden_layers": 1, "num_attention_heads": 12,
		"intermediate_size": 3072, "max_position_embeddings": 514, "type_vocab_size": 1, "pad_token_id": 1,
		"hidden_act": "gelu", "layer_norm_eps": 1e-05}`))
	if err != nil {
		t.Fatal(err)
	}
	r := RandomWeights("xlmr-base", cfg, TaskBase, 1)
	v, _, err := r.Float32("embeddings.word_embeddings.weight")
	if err != nil {
		t.Fatal(err)
	}
	seq := make([]float32, 1<<18+3)
	randomNormalPairs(seq, randTensorSeed(1, "embeddings.word_embeddings.weight"), 0, (len(seq)+1)/2, 0.02)
	if !slices.Equal(seq[:768], v[:768]) || !slices.Equal(seq[2*768:], v[2*768:len(seq)]) {
		t.Error("parallel generation differs from a sequential pass")
	}
}
