package encoder

import (
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/int8bert/int8bert/cpu"
	"github.com/int8bert/int8bert/selector"
)

// BenchmarkAttentionLayer times one layer's attention of BERT-large at
// 256 tokens (16 heads of 64) and of BERT-base at 512 (12 heads of 64),
// FP32 against bf16 and INT8 (docs/DESIGN.md 3.9, 3.10). Beside ns/op it
// reports cpu-ns/op, the benchmark thread's own CPU time a layer (Linux;
// threadCPUNanos): on a machine shared with other jobs, wall time counts
// the time they held the core and this does not, so an A/B comparison
// there reads cpu-ns/op (one thread, pinned: taskset -c 1).
func BenchmarkAttentionLayer(b *testing.B) {
	for _, sh := range []struct {
		name          string
		seq, h, heads int
	}{{"large-256", 256, 1024, 16}, {"base-512", 512, 768, 12}} {
		b.Run(sh.name, func(b *testing.B) { benchAttentionLayer(b, sh.seq, sh.h, sh.heads) })
	}
}

func benchAttentionLayer(b *testing.B, seq, h, heads int) {
	r := rand.New(rand.NewPCG(1, 2))
	qkv := make([]float32, seq*3*h)
	for i := range qkv {
		qkv[i] = float32(r.NormFloat64())
	}
	sel, err := selector.New(selector.Options{CachePath: "off"})
	if err != nil {
		b.Fatal(err)
	}
	defer sel.Close()
	for _, c := range []struct {
		name   string
		pass   pass
		static bool
	}{
		{"f32", &int8Pass{mode: PrecisionInt8Dynamic.Mode()}, false},
		{"bf16", &floatPass{prec: PrecisionBF16, attnBF16: true}, false},
		{"int8-dynamic", &int8Pass{mode: PrecisionInt8Dynamic.Mode(), attn8: true}, false},
		{"int8-static", &int8Pass{mode: PrecisionInt8Static.Mode(), attn8: true}, true},
	} {
		b.Run(c.name, func(b *testing.B) {
			if c.pass.attention() == AttentionBF16 && !cpu.X86.AVX512BF16 {
				b.Skipf("CPU lacks AVX512-BF16 (%s): bf16 attention would run the generic kernel", cpu.X86)
			}
			m := &Model{cfg: Config{Hidden: h, Heads: heads}, threads: 1, sel: sel, pass: c.pass}
			s := &scratch{qkv: qkv, ctx: make([]float32, seq*h)}
			in := &Inputs{Batch: 1, Seq: seq}
			var q *attnQuant
			if c.static {
				q = &attnQuant{dst: make([]uint8, seq*h), scale: 0.02, zp: 128}
			}
			if err := m.attentionQ(in, s, q); err != nil {
				b.Fatal(err)
			}
			// The thread's CPU time needs the goroutine on one thread
			// (threads: 1 runs the heads on it).
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			c0, cpuOK := threadCPUNanos()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := m.attentionQ(in, s, q); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			if c1, ok := threadCPUNanos(); ok && cpuOK {
				b.ReportMetric(float64(c1-c0)/float64(b.N), "cpu-ns/op")
			}
		})
	}
}
