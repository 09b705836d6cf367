package selector

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/int8bert/int8bert/cpu"
	"github.com/int8bert/int8bert/dnnl"
	"github.com/int8bert/int8bert/kernels"
)

// dnnlPrims are the selector's oneDNN matmul primitives, made on first use
// and shared by every operation's oneDNN candidate and every Linear: they
// depend only on the configuration. Each Linear keeps its weights packed
// by them. It is also what the oneDNN candidates have in common.
type dnnlPrims struct {
	s     *Selector
	mu    sync.Mutex
	prims map[string]*dnnlPrim
}

// dnnlU8S8 runs a u8 x s8 GEMM as a oneDNN matmul whose M is the call's M.
// The epilogue maps onto oneDNN as
//
//	ZeroPoint -> SrcZeroPoint (oneDNN compensates from the weights)
//	ActScale  -> SrcScale             ColScale -> WeightScales
//	Bias      -> Bias, or a binary Add [1,N] after the row scale
//	RowScale  -> binary Mul [M,1]     GELU, GELU tanh, ReLU -> eltwise post-ops
//	Residual  -> Sum (the residual copied into an f32 dst first), or binary
//	             Add [M,N] for a requantized dst
//	OutScale, OutZeroPoint -> DstScale, DstZeroPoint (u8 or s8 dst)
type dnnlU8S8 struct{ *dnnlPrims }

type dnnlPrim struct {
	mm  *dnnl.MatMul
	err error
}

// dnnlWeights are a Linear's weights packed for oneDNN, with the weight
// scales they were packed with.
type dnnlWeights struct {
	w      *dnnl.Weights
	scales []float32
}

func (c *dnnlPrims) name() string             { return OneDNN }
func (c *dnnlPrims) backend() string          { return BackendOneDNN }
func (c *dnnlPrims) isa() cpu.ISA             { return OneDNN }
func (c *dnnlPrims) accepts(m, n, k int) bool { return true }

// decline makes (and keeps) the primitive of the key's M: oneDNN declines
// a configuration it has no implementation for. Unless oneDNN is forced, it
// also declines where oneDNN would run its reference code ("ref_*"), which
// is orders of magnitude slower and costs seconds to time on BERT shapes.
func (c *dnnlU8S8) decline(key Key) error {
	ep := &kernels.Epilogue{OutScale: 1}
	mm, err := c.prim(dnnlConfig(key.M, key.K, key.N, key.Epilogue, ep))
	if err != nil {
		return err
	}
	return c.declineRef(mm)
}

// declineRef declines a primitive that runs oneDNN's reference code, unless
// oneDNN is forced.
func (c *dnnlPrims) declineRef(mm *dnnl.MatMul) error {
	if impl := mm.Impl(); strings.HasPrefix(impl, "ref") && !strings.EqualFold(c.s.force, OneDNN) {
		return fmt.Errorf("oneDNN has only its reference implementation (%s) for this epilogue", impl)
	}
	return nil
}

// dnnlConfig maps the call's epilogue onto a matmul configuration.
func dnnlConfig(m, k, n int, kind EpilogueKind, ep *kernels.Epilogue) dnnl.MatMulConfig {
	cfg := dnnl.MatMulConfig{M: m, K: k, N: n, Src: dnnl.U8, Weights: dnnl.S8}
	switch kind.Out {
	case S32:
		cfg.Dst = dnnl.S32
		return cfg
	case F32:
		cfg.Dst = dnnl.F32
	case U8:
		cfg.Dst = dnnl.U8
	case S8:
		cfg.Dst = dnnl.S8
	}
	cfg.SrcZeroPoint = kind.ZeroPoint
	cfg.SrcScale = kind.ActScale
	cfg.WeightScales = kind.ColScale
	if kind.RowScale {
		cfg.PostOps = append(cfg.PostOps, dnnl.PostOp{Kind: dnnl.Mul, Shape: dnnl.PerRow})
		if kind.Bias {
			cfg.PostOps = append(cfg.PostOps, dnnl.PostOp{Kind: dnnl.Add, Shape: dnnl.PerColumn})
		}
	} else {
		cfg.Bias = kind.Bias
	}
	switch kind.Act {
	case kernels.ActGELU:
		cfg.PostOps = append(cfg.PostOps, dnnl.PostOp{Kind: dnnl.GELUErf})
	case kernels.ActGELUTanh:
		cfg.PostOps = append(cfg.PostOps, dnnl.PostOp{Kind: dnnl.GELUTanh})
	case kernels.ActReLU:
		cfg.PostOps = append(cfg.PostOps, dnnl.PostOp{Kind: dnnl.ReLU})
	}
	if kind.Residual {
		if kind.Out == F32 {
			cfg.PostOps = append(cfg.PostOps, dnnl.PostOp{Kind: dnnl.Sum, Scale: 1})
		} else {
			cfg.PostOps = append(cfg.PostOps, dnnl.PostOp{Kind: dnnl.Add, Shape: dnnl.Full})
		}
	}
	if kind.Out == U8 || kind.Out == S8 {
		cfg.DstScale, cfg.DstZeroPoint = ep.OutScale, ep.OutZeroPoint
	}
	return cfg
}

// prim returns the primitive for cfg, making it on first use. A failure is
// remembered too.
func (c *dnnlPrims) prim(cfg dnnl.MatMulConfig) (*dnnl.MatMul, error) {
	id := fmt.Sprintf("%+v", cfg)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.prims == nil {
		return nil, fmt.Errorf("selector: onednn: %w", ErrClosed)
	}
	p := c.prims[id]
	if p == nil {
		p = &dnnlPrim{}
		p.mm, p.err = c.s.eng.NewMatMul(cfg)
		c.prims[id] = p
	}
	return p.mm, p.err
}

func (c *dnnlPrims) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var first error
	for _, p := range c.prims {
		if p.mm != nil {
			if err := p.mm.Close(); err != nil && first == nil {
				first = fmt.Errorf("selector: close: %w", err)
			}
		}
	}
	c.prims = nil
	return first
}

func (c *dnnlU8S8) implName(l *Linear[kernels.GEMMU8S8], g *kernels.GEMMU8S8, kind EpilogueKind) string {
	mm, err := c.prim(dnnlConfig(g.M, l.k, l.n, kind, g.Ep))
	if err != nil {
		return ""
	}
	return mm.Impl()
}

// dnnlWeights returns l's weights packed for mm with the given scales (nil
// for none), packing them when no packed copy fits.
func (l *Linear[G]) dnnlWeights(mm *dnnl.MatMul, scales []float32, threads int) (*dnnl.Weights, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, fmt.Errorf("selector: %s linear: %w", l.op.op, ErrClosed)
	}
	for _, d := range l.dw {
		if (d.scales == nil) == (scales == nil) && slices.Equal(d.scales, scales) && mm.Accepts(d.w) {
			return d.w, nil
		}
	}
	var own []float32
	if scales != nil {
		own = slices.Clone(scales)
	}
	w, err := mm.PackWeights(l.weightsLocked(), own, threads)
	if err != nil {
		return nil, err
	}
	l.dw = append(l.dw, &dnnlWeights{w: w, scales: own})
	return w, nil
}

func (c *dnnlU8S8) run(l *Linear[kernels.GEMMU8S8], g *kernels.GEMMU8S8, kind EpilogueKind) error {
	m, k, n, ep := g.M, l.k, l.n, g.Ep
	mm, err := c.prim(dnnlConfig(m, k, n, kind, ep))
	if err != nil {
		return err
	}
	var scales []float32
	if kind.ColScale {
		scales = ep.ColScale[:n]
	}
	w, err := l.dnnlWeights(mm, scales, max(g.Threads, 1))
	if err != nil {
		return err
	}
	args := &dnnl.Args{M: m, Threads: max(g.Threads, 1), Src: compact(g.A, m, k, g.Lda)}
	if kind.Out != S32 {
		if kind.ZeroPoint {
			args.SrcZeroPoint = ep.ZeroPoint
		}
		if kind.ActScale {
			args.SrcScale = ep.ActScale
		}
		if kind.RowScale {
			args.Binary = append(args.Binary, ep.RowScale[:m])
			if kind.Bias {
				args.Binary = append(args.Binary, ep.Bias[:n])
			}
		} else if kind.Bias {
			args.Bias = ep.Bias[:n]
		}
		if kind.Residual && kind.Out != F32 {
			args.Binary = append(args.Binary, compact(ep.Residual, m, n, ldr(ep, n)))
		}
	}
	exec := func(dst any) error {
		args.Dst = dst
		// oneDNN's OpenMP threads run now: the pool's idle workers park
		// rather than spin against them (docs/DESIGN.md section 2.4).
		kernels.ForeignEnter()
		defer kernels.ForeignExit()
		return mm.Execute(w, args)
	}
	o := g.Out
	switch kind.Out {
	case S32:
		return viaDst(o.S32, o.Ldc, m, n, exec, nil)
	case U8:
		return viaDst(o.U8, o.Ldc, m, n, exec, nil)
	case S8:
		return viaDst(o.S8, o.Ldc, m, n, exec, nil)
	}
	return viaDst(o.F32, o.Ldc, m, n, exec, residualPre(kind, ep, m, n))
}

// residualPre returns, for a kind with a residual, what fills an f32
// destination with it first (the addend of oneDNN's Sum post-op); nil
// otherwise.
func residualPre(kind EpilogueKind, ep *kernels.Epilogue, m, n int) func([]float32) {
	if !kind.Residual {
		return nil
	}
	return func(d []float32) {
		lr := ldr(ep, n)
		for i := 0; i < m; i++ {
			copy(d[i*n:(i+1)*n], ep.Residual[i*lr:i*lr+n])
		}
	}
}

func ldr(ep *kernels.Epilogue, n int) int {
	if ep.LdResidual == 0 {
		return n
	}
	return ep.LdResidual
}

// compact returns the m x n matrix x (row stride ld) without padding.
func compact[E any](x []E, m, n, ld int) []E {
	if ld == n {
		return x[:m*n]
	}
	c := make([]E, m*n)
	for i := 0; i < m; i++ {
		copy(c[i*n:(i+1)*n], x[i*ld:i*ld+n])
	}
	return c
}

// viaDst runs exec on dst when its rows are contiguous (ldc == n), else on
// a compact buffer copied into dst afterwards. pre, when set, fills the
// buffer first (the addend of a Sum post-op).
func viaDst[T any](dst []T, ldc, m, n int, exec func(any) error, pre func([]T)) error {
	if ldc == n {
		d := dst[:m*n]
		if pre != nil {
			pre(d)
		}
		return exec(d)
	}
	d := make([]T, m*n)
	if pre != nil {
		pre(d)
	}
	if err := exec(d); err != nil {
		return err
	}
	for i := 0; i < m; i++ {
		copy(dst[i*ldc:i*ldc+n], d[i*n:(i+1)*n])
	}
	return nil
}
