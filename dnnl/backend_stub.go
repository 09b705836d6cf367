//go:build !cgo || nodnnl

package dnnl

import "unsafe"

// Available reports whether this build calls oneDNN.
const Available = false

// GetInfo returns ErrUnavailable in this build.
func GetInfo() (Info, error) { return Info{}, ErrUnavailable }

// SetMaxISA returns ErrUnavailable in this build.
func SetMaxISA(ISA) error { return ErrUnavailable }

type engineImpl struct{}

func newEngineImpl() (engineImpl, error) { return engineImpl{}, ErrUnavailable }
func (engineImpl) destroy()              {}

type matmulImpl struct{}

type layoutImpl struct{}

func (layoutImpl) destroy() {}

func newMatMulImpl(engineImpl, *MatMulConfig) (matmulImpl, error) {
	return matmulImpl{}, ErrUnavailable
}

func (matmulImpl) destroy()            {}
func (matmulImpl) weightsSize() int    { return 0 }
func (matmulImpl) scratchpadSize() int { return 0 }
func (matmulImpl) implName() string    { return "" }
func (matmulImpl) pack(DataType, unsafe.Pointer, unsafe.Pointer, int) error {
	return ErrUnavailable
}
func (matmulImpl) layout() (layoutImpl, error) { return layoutImpl{}, ErrUnavailable }
func (matmulImpl) accepts(layoutImpl) bool     { return false }
func (matmulImpl) execute(*execArgs) error     { return ErrUnavailable }
func allocC(int) unsafe.Pointer                { return nil }
func freeC(unsafe.Pointer)                     {}
