package kernels

import (
	"math"
	"math/rand/v2"
	"testing"
)

// The per-head pieces of BERT-large attention that are not GEMMs (seq 256,
// head size 64, fused QKV rows of 3*1024 floats): packing K (a transpose
// into the B-panel layout), packing V^T (row copies) and the scaled, masked
// softmax of the 256x256 scores. Run pinned: taskset -c 1 go test
// -run '^$' -bench AttnParts ./kernels
const (
	attnBenchSeq, attnBenchD, attnBenchLd = 256, 64, 3 * 1024
)

func BenchmarkAttnPartsPackK(b *testing.B) {
	r := rand.New(rand.NewPCG(7, 1))
	rows := randF32(r, attnBenchSeq*attnBenchLd, 1, 0)
	for _, nr := range []int{16, 32, 64} {
		b.Run("nr="+itoa(nr), func(b *testing.B) {
			var p PackedF32
			for b.Loop() {
				if err := PackF32Into(&p, attnBenchSeq, attnBenchD, rows[1024:], attnBenchLd, nr); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkAttnPartsPackV(b *testing.B) {
	r := rand.New(rand.NewPCG(7, 2))
	rows := randF32(r, attnBenchSeq*attnBenchLd, 1, 0)
	var p PackedF32
	for b.Loop() {
		if err := PackF32TInto(&p, attnBenchD, attnBenchSeq, rows[2048:], attnBenchLd, 32); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAttnPartsSoftmax(b *testing.B) {
	r := rand.New(rand.NewPCG(7, 3))
	n := attnBenchSeq * attnBenchSeq
	x := randF32(r, n, 8, 0)
	mask := make([]float32, attnBenchSeq)
	for j := attnBenchSeq - 30; j < attnBenchSeq; j++ {
		mask[j] = -math.MaxFloat32
	}
	dst := make([]float32, n)
	scale := float32(1 / math.Sqrt(attnBenchD))
	benchBoth(b, func(b *testing.B) {
		for b.Loop() {
			copy(dst, x) // in place, as attention
			if err := SoftmaxScaled(dst, dst, attnBenchSeq, attnBenchSeq, scale, mask); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func itoa(n int) string {
	s := ""
	for ; n > 0 || s == ""; n /= 10 {
		s = string(rune('0'+n%10)) + s
	}
	return s
}

// BenchmarkAttnPartsSoftmaxL1 is the softmax of 16 rows of 256 scores
// (16 KB, in L1), repeated in place: the arithmetic without the traffic.
func BenchmarkAttnPartsSoftmaxL1(b *testing.B) {
	r := rand.New(rand.NewPCG(7, 4))
	const rows = 16
	x := randF32(r, rows*attnBenchSeq, 8, 0)
	benchBoth(b, func(b *testing.B) {
		for b.Loop() {
			if err := SoftmaxScaled(x, x, rows, attnBenchSeq, 8, nil); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*rows*attnBenchSeq/16), "ns/vector")
	})
}

// BenchmarkAttnPartsSoftmaxU8 is INT8 attention's softmax of one head's
// 256x256 scores to u8 (SoftmaxU8), with a mask (its last 30 keys masked
// out) and without one, and on 16 rows in L1: what the head pays after
// Q K^T and before P V.
func BenchmarkAttnPartsSoftmaxU8(b *testing.B) {
	r := rand.New(rand.NewPCG(7, 5))
	for _, c := range []struct {
		name string
		rows int
		mask bool
	}{{"mask", attnBenchSeq, true}, {"nomask", attnBenchSeq, false}, {"L1", 16, false}} {
		n := attnBenchSeq
		x := randF32(r, c.rows*n, 8, 0)
		var mask []float32
		if c.mask {
			mask = make([]float32, n)
			for j := n - 30; j < n; j++ {
				mask[j] = -math.MaxFloat32
			}
		}
		src := append([]float32(nil), x...)
		dst := make([]uint8, c.rows*n)
		scales := make([]float32, c.rows)
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if c.mask {
					copy(x, src) // the mask is added in place
				}
				if err := SoftmaxU8(dst, n, scales, x, c.rows, n, mask, nil); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*c.rows*n/16), "ns/vector")
		})
	}
}
