package encoder

import (
	"runtime"
	"testing"
	"time"

	"github.com/int8bert/int8bert/kernels"
	"github.com/int8bert/int8bert/kernels/peak"
	"github.com/int8bert/int8bert/selector"
)

// BenchmarkBERTBaseFP32 runs the FP32 encoder with random weights of
// BERT-base's shape (12 layers, hidden 768, 12 heads, FFN 3072) on one
// sequence of 128 tokens, one thread, and reports the linear layers'
// GFLOP/s and their share of the FMA peak measured in the same run, and the
// time split between linears, attention and LayerNorm.
func BenchmarkBERTBaseFP32(b *testing.B) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	c := Config{Vocab: 1000, Hidden: 768, Layers: 12, Heads: 12, Intermediate: 3072, MaxPositions: 512, TypeVocab: 2,
		LayerNormEps: 1e-12, Activation: kernels.ActGELU}
	sel, err := selector.New(selector.Options{CachePath: "off"})
	if err != nil {
		b.Fatal(err)
	}
	defer sel.Close()
	prof := &Profile{}
	m, err := newModel(c, NewLoader(randomSource(c, false)), BERTNames(""), sel, Options{Threads: 1, Profile: prof})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	const seq = 128
	in := &Inputs{Batch: 1, Seq: seq, IDs: make([]int32, seq), Mask: make([]int32, seq)}
	for i := range in.IDs {
		in.IDs[i], in.Mask[i] = int32(i*7%1000), 1
	}
	if _, err := m.Forward(in, false); err != nil { // tunes every key once
		b.Fatal(err)
	}
	*prof = Profile{}
	start := time.Now()
	for b.Loop() {
		if _, err := m.Forward(in, false); err != nil {
			b.Fatal(err)
		}
	}
	total := time.Since(start)
	p := prof.Snapshot()
	peak := peak.Measure(200 * time.Millisecond).FP32GFLOPS
	gflops := p.LinearFLOPs / p.Linear.Seconds() / 1e9
	b.ReportMetric(gflops, "linear-GFLOP/s")
	if peak > 0 {
		b.ReportMetric(100*gflops/peak, "linear-%peak")
	}
	b.ReportMetric(100*p.Linear.Seconds()/total.Seconds(), "linear-%time")
	b.ReportMetric(100*p.Attention.Seconds()/total.Seconds(), "attention-%time")
	b.ReportMetric(100*p.LayerNorm.Seconds()/total.Seconds(), "layernorm-%time")
}
