package kernels

import "math"

// ToBF16 rounds x to bfloat16 (round half to even; NaN stays NaN) and
// returns its bits: the upper half of the float32.
func ToBF16(x float32) uint16 {
	b := math.Float32bits(x)
	if b&0x7fffffff > 0x7f800000 { // NaN: keep it quiet and NaN
		return uint16(b>>16) | 0x40
	}
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}

// FromBF16 widens bfloat16 bits to float32 exactly.
func FromBF16(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }
