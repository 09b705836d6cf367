package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"time"

	"github.com/int8bert/int8bert/dnnl"
)

// Shape is one GEMM of a BERT layer: M tokens, K inputs, N outputs.
type Shape struct {
	Name    string `json:"name"`
	M, K, N int
}

// String prints the shape as MxKxN with its name.
func (s Shape) String() string { return fmt.Sprintf("%s %dx%dx%d", s.Name, s.M, s.K, s.N) }

// Ops is the number of multiply-adds times two.
func (s Shape) Ops() float64 { return 2 * float64(s.M) * float64(s.K) * float64(s.N) }

// BERTShapes are the linear layers of BERT-large at 256 tokens and of
// BERT-base at 128 tokens (QKV fused, attention output, FFN1, FFN2).
var BERTShapes = []Shape{
	{"bert-large qkv-one", 256, 1024, 1024},
	{"bert-large ffn1", 256, 1024, 4096},
	{"bert-large ffn2", 256, 4096, 1024},
	{"bert-base attn-out", 128, 768, 768},
	{"bert-base qkv", 128, 768, 2304},
	{"bert-base ffn1", 128, 768, 3072},
	{"bert-base ffn2", 128, 3072, 768},
}

// GEMMOptions control a GEMM measurement.
type GEMMOptions struct {
	// Threads per call (oneDNN's OpenMP threads); 1 by default.
	Threads int
	// MinTime is how long each measurement runs at least; 300 ms by default.
	MinTime time.Duration
	// RuntimeM makes oneDNN primitives take M at run time instead of one
	// primitive per M.
	RuntimeM bool
	// Progress, when set, is called before each measurement.
	Progress func(what string)
}

// GEMMResult is one measured kernel on one shape.
type GEMMResult struct {
	Shape    string  `json:"shape"`
	M        int     `json:"m"`
	K        int     `json:"k"`
	N        int     `json:"n"`
	DType    string  `json:"dtype"`
	Epilogue string  `json:"epilogue"`
	Kernel   string  `json:"kernel"`
	Backend  string  `json:"backend"`
	GOPS     float64 `json:"gops"`
	MsPerOp  float64 `json:"ms_per_call"`
	// VsF32 is this result's throughput over the f32 oneDNN result on the
	// same shape in the same run (1 for f32 itself).
	VsF32 float64 `json:"vs_f32"`
}

// DNNLGEMM measures oneDNN's INT8 (u8 x s8 -> s32) and f32 matmuls on each
// shape, one after the other in this run, and fills VsF32.
func DNNLGEMM(ctx context.Context, shapes []Shape, o GEMMOptions) ([]GEMMResult, error) {
	if !dnnl.Available {
		return nil, dnnl.ErrUnavailable
	}
	if o.Threads <= 0 {
		o.Threads = 1
	}
	if o.MinTime <= 0 {
		o.MinTime = 300 * time.Millisecond
	}
	eng, err := dnnl.DefaultEngine()
	if err != nil {
		return nil, err
	}
	var out []GEMMResult
	for _, s := range shapes {
		var f32 float64
		for _, dt := range []dnnl.DataType{dnnl.F32, dnnl.U8} {
			if err := ctx.Err(); err != nil {
				return out, err
			}
			if o.Progress != nil {
				o.Progress(fmt.Sprintf("onednn %s %v", map[dnnl.DataType]string{dnnl.F32: "f32", dnnl.U8: "int8"}[dt], s))
			}
			r, err := measureDNNL(eng, s, dt, o)
			if err != nil {
				return out, fmt.Errorf("bench: %v %v: %w", s, dt, err)
			}
			if dt == dnnl.F32 {
				f32 = r.GOPS
			}
			r.VsF32 = r.GOPS / f32
			out = append(out, r)
		}
	}
	return out, nil
}

func measureDNNL(eng *dnnl.Engine, s Shape, dt dnnl.DataType, o GEMMOptions) (GEMMResult, error) {
	r := rand.New(rand.NewPCG(uint64(s.M), uint64(s.N)))
	cfg := dnnl.MatMulConfig{M: s.M, K: s.K, N: s.N, Src: dt, Weights: dt, Dst: dt}
	if o.RuntimeM {
		cfg.M = dnnl.RuntimeM
	}
	var src, w, dst any
	name := "f32"
	switch dt {
	case dnnl.U8:
		cfg.Weights, cfg.Dst = dnnl.S8, dnnl.S32
		a := make([]uint8, s.M*s.K)
		for i := range a {
			a[i] = uint8(r.IntN(256))
		}
		b := make([]int8, s.N*s.K)
		for i := range b {
			b[i] = int8(r.IntN(255) - 127)
		}
		src, w, dst, name = a, b, make([]int32, s.M*s.N), "int8"
	default:
		a := make([]float32, s.M*s.K)
		for i := range a {
			a[i] = r.Float32() - 0.5
		}
		b := make([]float32, s.N*s.K)
		for i := range b {
			b[i] = r.Float32() - 0.5
		}
		src, w, dst = a, b, make([]float32, s.M*s.N)
	}
	mm, err := eng.NewMatMul(cfg)
	if err != nil {
		return GEMMResult{}, err
	}
	defer mm.Close()
	pw, err := mm.PackWeights(w, nil, o.Threads)
	if err != nil {
		return GEMMResult{}, err
	}
	defer pw.Close()
	args := &dnnl.Args{M: s.M, Src: src, Dst: dst, Threads: o.Threads}
	per, err := timeIt(o.MinTime, func() error { return mm.Execute(pw, args) })
	if err != nil {
		return GEMMResult{}, err
	}
	return GEMMResult{
		Shape: s.Name, M: s.M, K: s.K, N: s.N, DType: name, Epilogue: "none",
		Kernel: mm.Impl(), Backend: "onednn", GOPS: s.Ops() / per.Seconds() / 1e9,
		MsPerOp: float64(per.Microseconds()) / 1e3,
	}, nil
}

// timeIt runs f once to warm up, then in batches until minTime has passed,
// and returns the median time of one call over the batches.
func timeIt(minTime time.Duration, f func() error) (time.Duration, error) {
	if err := f(); err != nil {
		return 0, err
	}
	start := time.Now()
	if err := f(); err != nil {
		return 0, err
	}
	one := time.Since(start)
	batch := 1
	if one > 0 {
		batch = max(1, int(minTime/10/one))
	}
	var per []time.Duration
	begin := time.Now()
	for len(per) < 5 || time.Since(begin) < minTime {
		t0 := time.Now()
		for i := 0; i < batch; i++ {
			if err := f(); err != nil {
				return 0, err
			}
		}
		per = append(per, time.Since(t0)/time.Duration(batch))
	}
	sort.Slice(per, func(i, j int) bool { return per[i] < per[j] })
	return per[len(per)/2], nil
}
