//go:build cgo && !nodnnl

package dnnl

import (
	"fmt"
	"unsafe"

	dc "github.com/int8bert/int8bert/dnnl/cgo"
)

// Available reports whether this build calls oneDNN.
const Available = true

// statusError is the one place a oneDNN status becomes a Go error.
func statusError(st dc.Status) error {
	switch st {
	case dc.Success:
		return nil
	case dc.OutOfMemory:
		return ErrOutOfMemory
	case dc.InvalidArguments:
		return ErrInvalidArgument
	case dc.Unimplemented:
		return ErrUnimplemented
	case dc.RuntimeError:
		return ErrRuntime
	}
	return fmt.Errorf("dnnl: status %d: %w", int(st), ErrRuntime)
}

// GetInfo reports oneDNN's version, runtime and effective ISA.
func GetInfo() (Info, error) {
	ci := dc.GetInfo()
	isa := ISA(ci.EffectiveISA)
	return Info{
		Version: fmt.Sprintf("%d.%d.%d", ci.Major, ci.Minor, ci.Patch),
		Hash:    ci.Hash, Runtime: runtimeName(ci.CPURuntime),
		ISA: isa, ISAName: isa.String(),
	}, nil
}

// SetMaxISA caps the ISA oneDNN dispatches to. oneDNN accepts this only
// before its first primitive is created in the process (as the environment
// variable DNNL_MAX_CPU_ISA); later calls fail with ErrInvalidArgument.
func SetMaxISA(isa ISA) error {
	if err := statusError(dc.SetMaxISA(int(isa))); err != nil {
		return fmt.Errorf("dnnl: set max ISA %v (only before the first primitive): %w", isa, err)
	}
	return nil
}

type engineImpl struct{ e *dc.Engine }

func newEngineImpl() (engineImpl, error) {
	e, st := dc.NewEngine()
	return engineImpl{e}, statusError(st)
}

func (e engineImpl) destroy() { e.e.Destroy() }

type matmulImpl struct{ m *dc.MatMul }

type layoutImpl struct{ l *dc.Layout }

func (l layoutImpl) destroy() { l.l.Destroy() }

var shimTypes = map[DataType]int{F32: dc.F32, BF16: dc.BF16, S8: dc.S8, U8: dc.U8, S32: dc.S32}
var shimPostOps = map[PostOpKind]int{GELUErf: dc.PostGELUErf, GELUTanh: dc.PostGELUTanh, ReLU: dc.PostReLU, Sum: dc.PostSum, Add: dc.PostAdd, Mul: dc.PostMul}
var shimShapes = map[Broadcast]int{PerColumn: dc.BinRow, PerRow: dc.BinCol, Full: dc.BinFull}

func newMatMulImpl(e engineImpl, c *MatMulConfig) (matmulImpl, error) {
	cc := dc.Config{
		M: int64(c.M), K: int64(c.K), N: int64(c.N),
		Src: shimTypes[c.Src], Wei: shimTypes[c.Weights], Dst: shimTypes[c.Dst],
		Bias: c.Bias, SrcScale: c.SrcScale, WeiScales: c.WeightScales, SrcZP: c.SrcZeroPoint,
		DstQuant: c.Dst == S8 || c.Dst == U8, DstScale: c.DstScale, DstZeroPoint: c.DstZeroPoint,
	}
	for _, p := range c.PostOps {
		cc.PostOps = append(cc.PostOps, dc.PostOp{Kind: shimPostOps[p.Kind], Shape: shimShapes[p.Shape], Scale: p.Scale})
	}
	m, st := dc.NewMatMul(e.e, &cc)
	return matmulImpl{m}, statusError(st)
}

func (m matmulImpl) destroy()            { m.m.Destroy() }
func (m matmulImpl) weightsSize() int    { return m.m.WeightsSize() }
func (m matmulImpl) scratchpadSize() int { return m.m.ScratchpadSize() }
func (m matmulImpl) implName() string    { return m.m.Impl() }

func (m matmulImpl) pack(t DataType, w, packed unsafe.Pointer, threads int) error {
	return statusError(m.m.PackWeights(shimTypes[t], w, packed, threads))
}

func (m matmulImpl) layout() (layoutImpl, error) {
	l, st := m.m.Layout()
	return layoutImpl{l}, statusError(st)
}

func (m matmulImpl) accepts(l layoutImpl) bool { return m.m.Accepts(l.l) }

func (m matmulImpl) execute(a *execArgs) error {
	ca := dc.ExecArgs{
		M: int64(a.m), Src: a.src, Weights: a.weights, Dst: a.dst, Bias: a.bias,
		SrcScale: a.srcScale, WeiScales: a.weiScales, SrcZeroPoint: a.srcZeroPoint,
		Scratchpad: a.scratchpad, Threads: a.threads,
	}
	copy(ca.Binary[:], a.binary[:])
	return statusError(m.m.Execute(&ca))
}

func allocC(size int) unsafe.Pointer { return dc.Alloc(size) }
func freeC(p unsafe.Pointer)         { dc.Free(p) }
