//go:build cgo && !nodnnl

package dnnl_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/int8bert/int8bert/dnnl"
	"github.com/int8bert/int8bert/kernels"
)

// problem is one matmul with inputs and the reference answer.
type problem struct {
	cfg    dnnl.MatMulConfig
	m      int
	src    any
	w      any
	scales []float32
	args   dnnl.Args
	dst0   []float64 // dst contents before the call (for Sum)
	want   []float64 // reference, before requantization
}

var shapesM = []int{1, 3, 17, 128, 256}
var shapesN = []int{1, 15, 16, 17, 768}

func rng(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x1e8b)) }

// makeProblem fills inputs for cfg at m rows and computes the reference in
// float64 from exact int32 (or float64) accumulators. INT8 data is full
// range unless cfg declares a narrow one (Src7Bit, Weights7Bit; see fit),
// which it then keeps.
func makeProblem(t testing.TB, cfg dnnl.MatMulConfig, m int, seed uint64) *problem {
	r := rng(seed)
	k, n := cfg.K, cfg.N
	p := &problem{cfg: cfg, m: m}
	acc := make([]float64, m*n)
	switch cfg.Src {
	case dnnl.U8, dnnl.S8:
		w := make([]int8, n*k)
		for i := range w {
			w[i] = int8(r.IntN(255) - 127)
			if cfg.Weights7Bit {
				w[i] = int8(r.IntN(128) - 64)
			}
		}
		p.w = w
		accI := make([]int32, m*n)
		if cfg.Src == dnnl.U8 {
			a := make([]uint8, m*k)
			for i := range a {
				a[i] = uint8(r.IntN(256))
				if cfg.Src7Bit {
					a[i] = uint8(r.IntN(128))
				}
			}
			p.src = a
			if err := kernels.GemmU8S8S32Ref(m, n, k, a, k, w, k, accI, n); err != nil {
				t.Fatal(err)
			}
		} else {
			a := make([]int8, m*k)
			for i := range a {
				a[i] = int8(r.IntN(256) - 128)
				if cfg.Src7Bit {
					a[i] = int8(r.IntN(128) - 64)
				}
			}
			p.src = a
			if err := kernels.GemmS8S8S32Ref(m, n, k, a, k, w, k, accI, n); err != nil {
				t.Fatal(err)
			}
		}
		var colsum []int32
		if cfg.SrcZeroPoint {
			p.args.SrcZeroPoint = int32(r.IntN(20)) - 5
			colsum = kernels.ColSums(n, k, w, k)
		}
		if cfg.SrcScale {
			p.args.SrcScale = 0.01 + r.Float32()*0.02
		}
		if cfg.WeightScales {
			p.scales = make([]float32, n)
			for j := range p.scales {
				p.scales[j] = 0.001 + r.Float32()*0.01
			}
		}
		for i := 0; i < m; i++ {
			for j := 0; j < n; j++ {
				v := float64(accI[i*n+j])
				if colsum != nil {
					v -= float64(p.args.SrcZeroPoint) * float64(colsum[j])
				}
				if cfg.SrcScale {
					v *= float64(p.args.SrcScale)
				}
				if cfg.WeightScales {
					v *= float64(p.scales[j])
				}
				acc[i*n+j] = v
			}
		}
	default:
		wf := make([]float32, n*k)
		af := make([]float32, m*k)
		for i := range wf {
			wf[i] = r.Float32()*2 - 1
		}
		for i := range af {
			af[i] = r.Float32()*2 - 1
		}
		if cfg.Src == dnnl.BF16 {
			ab := make([]uint16, len(af))
			for i, x := range af {
				ab[i] = kernels.ToBF16(x)
				af[i] = kernels.FromBF16(ab[i])
			}
			p.src = ab
			wb := make([]uint16, len(wf))
			for i, x := range wf {
				wb[i] = kernels.ToBF16(x)
				wf[i] = kernels.FromBF16(wb[i])
			}
			if seed%2 == 0 {
				p.w = wb
			} else {
				p.w = wf // PackWeights converts f32 to bf16
			}
		} else {
			p.src, p.w = af, wf
		}
		for i := 0; i < m; i++ {
			for j := 0; j < n; j++ {
				var s float64
				for q := 0; q < k; q++ {
					s += float64(af[i*k+q]) * float64(wf[j*k+q])
				}
				acc[i*n+j] = s
			}
		}
	}
	// Magnitude of the accumulators, to size bias and binary operands.
	mag := 1e-9
	for _, v := range acc {
		mag = math.Max(mag, math.Abs(v))
	}
	y := acc
	if cfg.Bias {
		p.args.Bias = make([]float32, n)
		for j := range p.args.Bias {
			p.args.Bias[j] = float32((r.Float64()*2 - 1) * mag / 4)
			for i := 0; i < m; i++ {
				y[i*n+j] += float64(p.args.Bias[j])
			}
		}
	}
	p.dst0 = make([]float64, m*n)
	for idx, po := range cfg.PostOps {
		switch po.Kind {
		case dnnl.GELUErf, dnnl.GELUTanh, dnnl.ReLU:
			for i, v := range y {
				switch po.Kind {
				case dnnl.GELUErf:
					y[i] = kernels.GELU(v)
				case dnnl.GELUTanh:
					y[i] = kernels.GELUTanh(v)
				default:
					y[i] = math.Max(v, 0)
				}
			}
		case dnnl.Sum:
			scale := po.Scale
			if scale == 0 {
				scale = 1
			}
			for i := range p.dst0 {
				p.dst0[i] = (r.Float64()*2 - 1) * mag / 2
				if cfg.Dst == dnnl.S8 || cfg.Dst == dnnl.U8 {
					// The addend is the stored integer itself.
					p.dst0[i] = float64(r.IntN(100))
				}
			}
			p.dst0 = roundDst(cfg.Dst, p.dst0)
			for i := range y {
				y[i] += float64(scale) * p.dst0[i]
			}
		case dnnl.Add, dnnl.Mul:
			rows, cols := 1, n
			switch po.Shape {
			case dnnl.PerRow:
				rows, cols = m, 1
			case dnnl.Full:
				rows = m
			}
			op := make([]float32, rows*cols)
			for i := range op {
				if po.Kind == dnnl.Add {
					op[i] = float32((r.Float64()*2 - 1) * mag / 2)
				} else {
					op[i] = float32(0.5 + r.Float64())
				}
			}
			p.args.Binary = append(p.args.Binary, op)
			for i := 0; i < m; i++ {
				for j := 0; j < n; j++ {
					v := float64(op[(i%rows)*cols+j%cols])
					if po.Kind == dnnl.Add {
						y[i*n+j] += v
					} else {
						y[i*n+j] *= v
					}
				}
			}
		default:
			t.Fatalf("post-op %d: unknown kind", idx)
		}
	}
	p.want = y
	if cfg.Dst == dnnl.S8 || cfg.Dst == dnnl.U8 {
		mx := mag * 1e-3
		for _, v := range y {
			mx = math.Max(mx, math.Abs(v))
		}
		p.cfg.DstScale = float32(mx / 100)
		if cfg.Dst == dnnl.U8 {
			p.cfg.DstZeroPoint = 100
		}
	}
	return p
}

// roundDst rounds addend values to what the destination type can hold.
func roundDst(t dnnl.DataType, v []float64) []float64 {
	for i, x := range v {
		switch t {
		case dnnl.BF16:
			v[i] = float64(kernels.FromBF16(kernels.ToBF16(float32(x))))
		case dnnl.S32:
			v[i] = math.RoundToEven(x)
		default:
			v[i] = float64(float32(x))
		}
	}
	return v
}

func newDst(t dnnl.DataType, init []float64, cfg dnnl.MatMulConfig) any {
	switch t {
	case dnnl.F32:
		d := make([]float32, len(init))
		for i, v := range init {
			d[i] = float32(v)
		}
		return d
	case dnnl.BF16:
		d := make([]uint16, len(init))
		for i, v := range init {
			d[i] = kernels.ToBF16(float32(v))
		}
		return d
	case dnnl.S32:
		d := make([]int32, len(init))
		for i, v := range init {
			d[i] = int32(v)
		}
		return d
	case dnnl.S8:
		d := make([]int8, len(init))
		for i, v := range init {
			d[i] = int8(v)
		}
		return d
	case dnnl.U8:
		d := make([]uint8, len(init))
		for i, v := range init {
			d[i] = uint8(v)
		}
		return d
	}
	return nil
}

// check compares dst with the reference: exact for s32 without scaling, one
// step for s8/u8 and scaled s32, relative error for f32 and bf16.
func (p *problem) check(t testing.TB, dst any) {
	t.Helper()
	n := p.cfg.N
	bad := 0
	report := func(i int, got, want float64) {
		if bad < 3 {
			t.Errorf("%s: at [%d,%d] got %v want %v", p.name(), i/n, i%n, got, want)
		}
		bad++
	}
	scale := 0.0
	for _, v := range p.want {
		scale = math.Max(scale, math.Abs(v))
	}
	switch d := dst.(type) {
	case []int32:
		exact := !p.cfg.SrcScale && !p.cfg.WeightScales && len(p.cfg.PostOps) == 0 && !p.cfg.Bias
		for i, w := range p.want {
			g := float64(d[i])
			if (exact && g != w) || math.Abs(g-w) > 1 {
				report(i, g, w)
			}
		}
	case []int8, []uint8:
		for i, w := range p.want {
			var g float64
			lo, hi := -128.0, 127.0
			if s, ok := d.([]int8); ok {
				g = float64(s[i])
			} else {
				g = float64(d.([]uint8)[i])
				lo, hi = 0, 255
			}
			q := kernels.Quantize(w, p.cfg.DstScale, p.cfg.DstZeroPoint, lo, hi)
			if math.Abs(g-q) > 1 {
				report(i, g, q)
			}
		}
	case []float32:
		for i, w := range p.want {
			g := float64(d[i])
			if math.Abs(g-w) > 2e-5*scale+1e-6*math.Abs(w) || math.IsNaN(g) {
				report(i, g, w)
			}
		}
	case []uint16:
		for i, w := range p.want {
			g := float64(kernels.FromBF16(d[i]))
			if math.Abs(g-w) > 1e-2*math.Abs(w)+1e-4*scale {
				report(i, g, w)
			}
		}
	}
	if bad > 0 {
		t.Errorf("%s: %d of %d values differ", p.name(), bad, len(p.want))
	}
}

func (p *problem) name() string {
	c := p.cfg
	s := fmt.Sprintf("%vx%v->%v m=%d k=%d n=%d", c.Src, c.Weights, c.Dst, p.m, c.K, c.N)
	if c.M == dnnl.RuntimeM {
		s += " runtime-M"
	}
	if c.Bias {
		s += " bias"
	}
	if c.SrcScale || c.WeightScales {
		s += " scales"
	}
	if c.SrcZeroPoint {
		s += " zp"
	}
	for _, po := range c.PostOps {
		s += " " + po.Kind.String()
		if po.Kind == dnnl.Add || po.Kind == dnnl.Mul {
			s += po.Shape.String()
		}
	}
	return s
}

// run creates the primitive, packs the weights, executes and checks. A
// bf16 matmul that oneDNN does not implement at its effective ISA is a
// skip that says so (skipUnimplementedBF16), never a failure.
func (p *problem) run(t testing.TB, eng *dnnl.Engine) {
	t.Helper()
	mm, err := eng.NewMatMul(p.cfg)
	if err != nil {
		skipUnimplementedBF16(t, p.cfg, err)
		t.Fatalf("%s: %v", p.name(), err)
	}
	defer mm.Close()
	w, err := mm.PackWeights(p.w, p.scales, 1)
	if err != nil {
		t.Fatalf("%s: %v", p.name(), err)
	}
	defer w.Close()
	args := p.args
	args.M = p.m
	args.Src = p.src
	args.Dst = newDst(p.cfg.Dst, p.dst0, p.cfg)
	args.Threads = 1
	if err := mm.Execute(w, &args); err != nil {
		t.Fatalf("%s: %v", p.name(), err)
	}
	p.check(t, args.Dst)
}

func engine(t testing.TB) *dnnl.Engine {
	e, err := dnnl.DefaultEngine()
	if err != nil {
		t.Fatalf("oneDNN is built in but the engine fails: %v", err)
	}
	return e
}

type typeCombo struct{ src, wei, dst dnnl.DataType }

func (tc typeCombo) String() string { return fmt.Sprintf("%vx%v->%v", tc.src, tc.wei, tc.dst) }

var combos = []typeCombo{
	{dnnl.F32, dnnl.F32, dnnl.F32},
	{dnnl.BF16, dnnl.BF16, dnnl.F32}, {dnnl.BF16, dnnl.BF16, dnnl.BF16},
	{dnnl.U8, dnnl.S8, dnnl.F32}, {dnnl.U8, dnnl.S8, dnnl.S32}, {dnnl.U8, dnnl.S8, dnnl.S8}, {dnnl.U8, dnnl.S8, dnnl.U8},
	{dnnl.S8, dnnl.S8, dnnl.F32}, {dnnl.S8, dnnl.S8, dnnl.S32}, {dnnl.S8, dnnl.S8, dnnl.S8}, {dnnl.S8, dnnl.S8, dnnl.U8},
}

// TestShapes runs every M x N of the issue for each type combination at a K
// that is not a multiple of 4, with a fixed and a run-time M.
func TestShapes(t *testing.T) {
	eng := engine(t)
	seed := uint64(1)
	for _, tc := range combos {
		t.Run(tc.String(), func(t *testing.T) {
			skipWithoutBF16(t, eng, tc)
			for _, m := range shapesM {
				for _, n := range shapesN {
					k := 67
					if m*n >= 128*768 {
						k = 259
					}
					if testing.Short() && m*n*k > 1<<22 && tc.src != dnnl.U8 {
						continue
					}
					cfg := dnnl.MatMulConfig{M: m, K: k, N: n, Src: tc.src, Weights: tc.wei, Dst: tc.dst}
					if seed%2 == 0 {
						cfg.M = dnnl.RuntimeM
					}
					if tc.src == dnnl.U8 || tc.src == dnnl.S8 {
						if tc.dst != dnnl.S32 {
							cfg.SrcScale, cfg.WeightScales = true, true
						}
					}
					fit(t, &cfg, seed)
					makeProblem(t, cfg, m, seed).run(t, eng)
					seed++
				}
			}
		})
	}
}

// postOpSets are the attribute and post-op configurations every type
// combination runs with.
func postOpSets(int8 bool) []dnnl.MatMulConfig {
	var sets []dnnl.MatMulConfig
	base := dnnl.MatMulConfig{}
	if int8 {
		base.SrcScale, base.WeightScales = true, true
	}
	add := func(c dnnl.MatMulConfig) { sets = append(sets, c) }
	add(base)
	b := base
	b.Bias = true
	add(b)
	for _, k := range []dnnl.PostOpKind{dnnl.GELUErf, dnnl.GELUTanh, dnnl.ReLU, dnnl.Sum} {
		c := b
		c.PostOps = []dnnl.PostOp{{Kind: k}}
		add(c)
	}
	for _, k := range []dnnl.PostOpKind{dnnl.Add, dnnl.Mul} {
		for _, s := range []dnnl.Broadcast{dnnl.PerColumn, dnnl.PerRow, dnnl.Full} {
			c := base
			c.PostOps = []dnnl.PostOp{{Kind: k, Shape: s}}
			add(c)
		}
	}
	// The FFN1 and FFN2 chains of a BERT layer.
	c := b
	c.PostOps = []dnnl.PostOp{{Kind: dnnl.GELUErf}}
	add(c)
	c = b
	c.PostOps = []dnnl.PostOp{{Kind: dnnl.Sum, Scale: 0.5}, {Kind: dnnl.Mul, Shape: dnnl.PerRow}, {Kind: dnnl.Add, Shape: dnnl.Full}}
	add(c)
	if int8 {
		c = b
		c.SrcZeroPoint = true
		add(c)
		c = dnnl.MatMulConfig{SrcZeroPoint: true}
		add(c)
		c = dnnl.MatMulConfig{SrcScale: true, Bias: true}
		add(c)
	}
	return sets
}

// TestPostOps runs every post-op and attribute for every type combination.
func TestPostOps(t *testing.T) {
	eng := engine(t)
	seed := uint64(1000)
	for _, tc := range combos {
		int8 := tc.src == dnnl.U8 || tc.src == dnnl.S8
		t.Run(tc.String(), func(t *testing.T) {
			skipWithoutBF16(t, eng, tc)
			for i, set := range postOpSets(int8) {
				m := shapesM[i%3]
				n := shapesN[(i+int(seed))%len(shapesN)]
				if i%5 == 4 {
					m, n = 128, 768
				}
				cfg := set
				cfg.K, cfg.N = 43, n
				cfg.Src, cfg.Weights, cfg.Dst = tc.src, tc.wei, tc.dst
				cfg.M = m
				if i%2 == 1 && !perRowOperand(cfg) {
					cfg.M = dnnl.RuntimeM
				}
				fit(t, &cfg, seed)
				t.Run(strconv.Itoa(i), func(t *testing.T) {
					makeProblem(t, cfg, m, seed).run(t, eng)
				})
				seed++
			}
		})
	}
}

func TestImplAndInfo(t *testing.T) {
	info, err := dnnl.GetInfo()
	if err != nil {
		t.Fatal(err)
	}
	if info.Version == "" || info.ISAName == "" {
		t.Fatalf("empty info %+v", info)
	}
	t.Logf("oneDNN %s runtime %s ISA %s", info.Version, info.Runtime, info.ISAName)
	cfg := dnnl.MatMulConfig{M: 128, K: 768, N: 768, Src: dnnl.U8, Weights: dnnl.S8, Dst: dnnl.S32}
	fit(t, &cfg, 0)
	mm, err := engine(t).NewMatMul(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer mm.Close()
	if mm.Impl() == "" {
		t.Error("no implementation name")
	}
	t.Logf("u8 128x768x768 implementation: %s", mm.Impl())
}

func TestWeightsSharedAcrossM(t *testing.T) {
	eng := engine(t)
	cfg := dnnl.MatMulConfig{K: 64, N: 48, Src: dnnl.U8, Weights: dnnl.S8, Dst: dnnl.S32}
	cfg.M = 8
	fit(t, &cfg, 77)
	p := makeProblem(t, cfg, 8, 77)
	a, err := eng.NewMatMul(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	cfg.M = dnnl.RuntimeM
	b, err := eng.NewMatMul(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	w, err := a.PackWeights(p.w, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if !b.Accepts(w) {
		t.Logf("runtime-M primitive wants another weight layout than M=8")
		return
	}
	dst := make([]int32, 8*48)
	if err := b.Execute(w, &dnnl.Args{M: 8, Src: p.src, Dst: dst, Threads: 1}); err != nil {
		t.Fatal(err)
	}
	p.check(t, dst)
}

func TestRequantRounding(t *testing.T) {
	// One value per rounding case: x/scale = 2.5 -> 2, 3.5 -> 4, -0.5 -> 0.
	eng := engine(t)
	cfg := dnnl.MatMulConfig{M: 1, K: 1, N: 3, Src: dnnl.S8, Weights: dnnl.S8, Dst: dnnl.S8,
		SrcScale: true, DstScale: 1}
	fit(t, &cfg, 0)
	mm, err := eng.NewMatMul(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer mm.Close()
	w, err := mm.PackWeights([]int8{5, 7, -1}, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	dst := make([]int8, 3)
	if err := mm.Execute(w, &dnnl.Args{M: 1, Src: []int8{1}, Dst: dst, SrcScale: 0.5}); err != nil {
		t.Fatal(err)
	}
	if dst[0] != 2 || dst[1] != 4 || dst[2] != 0 {
		t.Fatalf("got %v, want [2 4 0] (round half to even)", dst)
	}
}

func perRowOperand(c dnnl.MatMulConfig) bool {
	for _, p := range c.PostOps {
		if (p.Kind == dnnl.Add || p.Kind == dnnl.Mul) && p.Shape != dnnl.PerColumn {
			return true
		}
	}
	return false
}

// TestRuntimeMWithRowOperands: oneDNN 2.x refuses [M,1] and [M,N] post-op
// operands with a run-time M; that must be a clear error, and the same
// config with a fixed M must work.
func TestRuntimeMWithRowOperands(t *testing.T) {
	eng := engine(t)
	cfg := dnnl.MatMulConfig{M: dnnl.RuntimeM, K: 32, N: 16, Src: dnnl.U8, Weights: dnnl.S8, Dst: dnnl.F32,
		PostOps: []dnnl.PostOp{{Kind: dnnl.Mul, Shape: dnnl.PerRow}}}
	fit(t, &cfg, 0)
	mm, err := eng.NewMatMul(cfg)
	if err != nil {
		if !errors.Is(err, dnnl.ErrUnimplemented) || errors.Is(err, dnnl.ErrSaturation) {
			t.Fatalf("got %v, want ErrUnimplemented", err)
		}
		t.Logf("as expected on this oneDNN: %v", err)
	} else {
		mm.Close()
		makeProblem(t, cfg, 5, 9).run(t, eng)
	}
	cfg.M = 5
	makeProblem(t, cfg, 5, 9).run(t, eng)
}
