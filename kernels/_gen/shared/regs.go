package shared

import "github.com/mmcloughlin/avo/reg"

// Zmm returns the physical zmm register i (0...31): the generators that
// number their registers themselves (accumulators, B vectors, broadcasts)
// name them through it.
func Zmm(i int) reg.VecPhysical {
	return []reg.VecPhysical{reg.Z0, reg.Z1, reg.Z2, reg.Z3, reg.Z4, reg.Z5, reg.Z6, reg.Z7,
		reg.Z8, reg.Z9, reg.Z10, reg.Z11, reg.Z12, reg.Z13, reg.Z14, reg.Z15,
		reg.Z16, reg.Z17, reg.Z18, reg.Z19, reg.Z20, reg.Z21, reg.Z22, reg.Z23,
		reg.Z24, reg.Z25, reg.Z26, reg.Z27, reg.Z28, reg.Z29, reg.Z30, reg.Z31}[i]
}

// Ymm returns the physical ymm register i (0...15, those VEX reaches), as
// Zmm does for zmm.
func Ymm(i int) reg.VecPhysical {
	return []reg.VecPhysical{reg.Y0, reg.Y1, reg.Y2, reg.Y3, reg.Y4, reg.Y5, reg.Y6, reg.Y7,
		reg.Y8, reg.Y9, reg.Y10, reg.Y11, reg.Y12, reg.Y13, reg.Y14, reg.Y15}[i]
}

// ColMasks are the opmask registers of a tile's column masks, one per zmm
// of a row (up to 64 columns).
var ColMasks = []reg.OpmaskPhysical{reg.K1, reg.K2, reg.K3, reg.K4}

// ZeroAccs returns mr rows of nv new accumulators of a tile, each made
// by newReg (YMM, ZMM) and zeroed by zero as it is made.
func ZeroAccs(mr, nv int, newReg func() reg.VecVirtual, zero func(z reg.VecVirtual)) [][]reg.VecVirtual {
	acc := make([][]reg.VecVirtual, mr)
	for i := range acc {
		acc[i] = make([]reg.VecVirtual, nv)
		for v := range acc[i] {
			acc[i][v] = newReg()
			zero(acc[i][v])
		}
	}
	return acc
}
