//go:build cgo && !nodnnl

package dnnl_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/int8bert/int8bert/dnnl"
)

// BenchmarkBERTShapes times oneDNN's u8 x s8 -> s32 and f32 matmuls on the
// BERT-large (M=256) and BERT-base (M=128) linear shapes on one thread, both
// in the same iteration, and reports GOP/s of each and their ratio.
// Run on one pinned core: OMP_WAIT_POLICY=passive taskset -c 0 go test -bench BERTShapes ./dnnl
func BenchmarkBERTShapes(b *testing.B) {
	shapes := []struct{ m, k, n int }{
		{256, 1024, 1024}, {256, 1024, 4096}, {256, 4096, 1024},
		{128, 768, 768}, {128, 768, 3072}, {128, 3072, 768}, {128, 768, 2304},
	}
	eng := engine(b)
	for _, s := range shapes {
		for _, runtimeM := range []bool{false, true} {
			name := fmt.Sprintf("m=%d/k=%d/n=%d", s.m, s.k, s.n)
			if runtimeM {
				name += "/runtime-M"
			}
			b.Run(name, func(b *testing.B) {
				i8 := newBenchMatMul(b, eng, s.m, s.k, s.n, dnnl.U8, runtimeM)
				f32 := newBenchMatMul(b, eng, s.m, s.k, s.n, dnnl.F32, runtimeM)
				var ti8, tf32 time.Duration
				for b.Loop() {
					t0 := time.Now()
					i8()
					t1 := time.Now()
					f32()
					ti8 += t1.Sub(t0)
					tf32 += time.Since(t1)
				}
				ops := 2 * float64(s.m*s.k*s.n) * float64(b.N)
				b.ReportMetric(ops/ti8.Seconds()/1e9, "int8-GOP/s")
				b.ReportMetric(ops/tf32.Seconds()/1e9, "f32-GFLOP/s")
				b.ReportMetric(tf32.Seconds()/ti8.Seconds(), "int8/f32")
			})
		}
	}
}

func newBenchMatMul(b *testing.B, eng *dnnl.Engine, m, k, n int, dt dnnl.DataType, runtimeM bool) func() {
	r := rand.New(rand.NewPCG(1, 2))
	cfg := dnnl.MatMulConfig{M: m, K: k, N: n, Src: dt, Weights: dt, Dst: dt}
	if runtimeM {
		cfg.M = dnnl.RuntimeM
	}
	var src, w, dst any
	if dt == dnnl.U8 {
		cfg.Weights, cfg.Dst = dnnl.S8, dnnl.S32
		// Below VNNI oneDNN takes u8 x s8 only with a declared narrow
		// range: the timing is then that of its VPMADDUBSW kernels.
		fit(b, &cfg, 0)
		a, wb := make([]uint8, m*k), make([]int8, n*k)
		for i := range a {
			a[i] = uint8(r.IntN(256))
		}
		for i := range wb {
			wb[i] = int8(r.IntN(255) - 127)
			if cfg.Weights7Bit {
				wb[i] = int8(r.IntN(128) - 64)
			}
		}
		src, w, dst = a, wb, make([]int32, m*n)
	} else {
		a, wb := make([]float32, m*k), make([]float32, n*k)
		for i := range a {
			a[i] = r.Float32()
		}
		for i := range wb {
			wb[i] = r.Float32()
		}
		src, w, dst = a, wb, make([]float32, m*n)
	}
	mm, err := eng.NewMatMul(cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { mm.Close() })
	pw, err := mm.PackWeights(w, nil, 1)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { pw.Close() })
	args := &dnnl.Args{M: m, Src: src, Dst: dst, Threads: 1}
	return func() {
		if err := mm.Execute(pw, args); err != nil {
			b.Fatal(err)
		}
	}
}
