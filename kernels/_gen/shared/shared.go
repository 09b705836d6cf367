// Package shared holds what several generators of kernels/_gen emit alike:
// the constants of the rational GELU and the addressing of a row tile.
package shared

import (
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// The rational GELU of the assembly kernels, geluQ8F32 in
// kernels/gemm_vnni.go (the same float32 values): phi(x) =
// max(fma(xc, P(s)/Q(s), 1/2), 0) with xc = x clamped to +-GELU8Clamp and
// s = xc^2; P has degrees 0...6, Q degrees 0...3 (Q(0) = 1).
var (
	GELU8Clamp = float32(5.39902306)
	GELU8P     = []float32{0.398943156, 0.0188730471, 0.00337341172, -1.12970756e-05, 1.0707414e-06, -1.8711102e-08, 1.324474e-10}
	GELU8Q     = []float32{1, 0.213986263, 0.019102091, 0.000794661115}
)

// RowAddr returns the address of row r of a tile whose rows are reached
// from one base per 5 rows: bases[r/5] + {0, L, 2L, 3L, 4L}[r%5] + disp
// (l is the row stride L, l3 holds 3L).
func RowAddr(bases []reg.GPPhysical, l, l3 reg.GPPhysical, r, disp int) Mem {
	b := bases[r/5]
	switch r % 5 {
	case 0:
		return Mem{Base: b, Disp: disp}
	case 1:
		return Mem{Base: b, Index: l, Scale: 1, Disp: disp}
	case 2:
		return Mem{Base: b, Index: l, Scale: 2, Disp: disp}
	case 3:
		return Mem{Base: b, Index: l3, Scale: 1, Disp: disp}
	}
	return Mem{Base: b, Index: l, Scale: 4, Disp: disp}
}
