package encoder

import (
	"math/rand/v2"
	"testing"

	"github.com/int8bert/int8bert/selector"
)

// BenchmarkAttentionLayer times one layer's attention of BERT-large at
// 256 tokens (16 heads of 64), FP32 against INT8 (docs/DESIGN.md 3.10).
func BenchmarkAttentionLayer(b *testing.B) {
	const seq, h, heads = 256, 1024, 16
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
		prec   Precision
		int8   bool
		static bool
	}{{"f32", PrecisionInt8Dynamic, false, false}, {"int8-dynamic", PrecisionInt8Dynamic, true, false}, {"int8-static", PrecisionInt8Static, true, true}} {
		b.Run(c.name, func(b *testing.B) {
			m := &Model{cfg: Config{Hidden: h, Heads: heads}, threads: 1, sel: sel, pass: &int8Pass{mode: c.prec.Mode(), attn8: c.int8}}
			s := &scratch{qkv: qkv, ctx: make([]float32, seq*h)}
			in := &Inputs{Batch: 1, Seq: seq}
			var q *attnQuant
			if c.static {
				q = &attnQuant{dst: make([]uint8, seq*h), scale: 0.02, zp: 128}
			}
			if err := m.attentionQ(in, s, q); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := m.attentionQ(in, s, q); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
