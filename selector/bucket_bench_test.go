package selector

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/int8bert/int8bert/kernels"
)

// BenchmarkBucketLoss measures what an M bucket coarser than M itself
// costs: for every M up to 32 and the BERT-base linears, it tunes the key
// of M itself and of the power of two above it (what BucketM gives M) and
// reports the time, at M, of the power of two's winner over the time of
// M's own winner (both from M's own timing). "max-loss" is the worst
// ratio; 1.00 means the coarse bucket picks the same kernel, or one as
// fast. Run it with
//
//	OMP_WAIT_POLICY=passive go test -run '^$' -bench BucketLoss -benchtime 1x ./selector
func BenchmarkBucketLoss(b *testing.B) {
	s, err := New(Options{CachePath: "off", Tuning: TuneSync, Reps: 5, RepTime: 10 * time.Millisecond})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	pow2 := func(m int) int {
		p := 1
		for p < m {
			p <<= 1
		}
		return p
	}
	type lin struct {
		name string
		k, n int
		u8   string
		f32  *kernels.Epilogue
	}
	lins := []lin{
		{"qkv", 768, 2304, "zp+scale+colscale+bias/f32", &kernels.Epilogue{Bias: []float32{}}},
		{"o", 768, 768, "zp+scale+colscale+bias+residual/f32", &kernels.Epilogue{Bias: []float32{}, Residual: []float32{}}},
		{"ffn1", 768, 3072, "zp+scale+colscale+bias+gelu/u8", &kernels.Epilogue{Bias: []float32{}, Act: kernels.ActGELU}},
		{"ffn2", 3072, 768, "zp+rowscale+colscale+bias+residual/f32", &kernels.Epilogue{Bias: []float32{}, Residual: []float32{}}},
	}
	for range b.N {
		worst := 1.0
		for _, l := range lins {
			for _, op := range []string{OpU8S8, OpF32} {
				chs := map[int]*Choice{}
				keyOf := func(m int) Key {
					if op == OpF32 {
						k := F32Key(1, l.k, l.n, l.f32, 1)
						k.M = m
						return k
					}
					ek, err := ParseEpilogueKind(l.u8)
					if err != nil {
						b.Fatal(err)
					}
					return Key{Op: OpU8S8, M: m, K: l.k, N: l.n, Epilogue: ek, Threads: 1}
				}
				for m := 1; m <= 32; m++ {
					ch, err := s.tune(context.Background(), keyOf(m))
					if err != nil {
						b.Fatal(err)
					}
					chs[m] = ch
				}
				for m := 1; m <= 32; m++ {
					own, coarse := chs[m], chs[pow2(m)]
					best, got := own.Measured[0].Median, time.Duration(math.MaxInt64)
					for _, ms := range own.Measured {
						if ms.Kernel == coarse.Kernel {
							got = ms.Median
						}
					}
					loss := float64(got) / float64(best)
					worst = max(worst, loss)
					b.Logf("%-5s %-4s m=%2d: own %-22s %9v; bucket %2d picks %-22s %9v  x%.3f",
						op, l.name, m, own.Kernel, best, pow2(m), coarse.Kernel, fmt.Sprint(got), loss)
				}
			}
		}
		b.ReportMetric(worst, "max-loss")
	}
}
