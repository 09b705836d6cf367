//go:build !(amd64 && gc && !purego && !noasm)

package kernels

// Without the assembly, the kernel names resolve to their Go twins.

const eltwiseHaveAsm = false

func eltAddSum(dst, x, r []float32) float32         { return eltAddSumGeneric(dst, x, r) }
func eltSum(x []float32) float32                    { return eltSumGeneric(x) }
func eltSumSqDev(x []float32, mean float32) float32 { return eltSumSqDevGeneric(x, mean) }
func eltNorm(dst, x, gamma, beta []float32, mean, rstd float32) {
	eltNormGeneric(dst, x, gamma, beta, mean, rstd)
}
func eltNormQ(dst []float32, q []uint8, x, gamma, beta, pre []float32, mean, rstd, inv, zp float32) {
	eltNormQGeneric(dst, q, x, gamma, beta, pre, mean, rstd, inv, zp)
}
func eltMaxMask(dst, x, mask []float32) float32 { return eltMaxMaskGeneric(dst, x, mask) }
func eltMaxMaskScale(dst, x, mask []float32, s float32) float32 {
	return eltMaxMaskScaleGeneric(dst, x, mask, s)
}
func eltMax(x []float32) float32                    { return eltMaxGeneric(x) }
func eltExpSum(dst, x []float32, m float32) float32 { return eltExpSumGeneric(dst, x, m) }
func eltScale(x []float32, s float32)               { eltScaleGeneric(x, s) }
func eltSoftmaxRows(dst, x, mask []float32, rows, n int, s float32) (int, float32, float32) {
	return eltSoftmaxRowsGeneric(dst, x, mask, rows, n, s)
}
func packT16(dst, w []float32, nblk, ldw, ldd int)      { packT16Generic(dst, w, nblk, ldw, ldd) }
func eltGELU(dst, x []float32)                          { eltGELUGeneric(dst, x) }
func eltAbsMax(x []float32) uint32                      { return eltAbsMaxGeneric(x) }
func eltQuantRow(dst []uint8, x []float32, inv float32) { eltQuantRowGeneric(dst, x, inv) }
func eltAbsMaxPre(x, pre []float32) uint32              { return eltAbsMaxPreGeneric(x, pre) }
func eltQuantRowPre(dst []uint8, x, pre []float32, inv float32) {
	eltQuantRowPreGeneric(dst, x, pre, inv)
}
func eltQuantU8(dst []uint8, x []float32, inv, zp float32) uint32 {
	return eltQuantU8Generic(dst, x, inv, zp)
}
func eltExpQuantU8(dst []uint8, x []float32, a, c float32) (sum, bits uint32) {
	return eltExpQuantU8Generic(dst, x, a, c)
}
func eltQKVToken(tmp []uint32, q []uint8, kd []int8, x []float32, heads, kh, nr4 int, qmul float32) uint32 {
	return eltQKVTokenGeneric(tmp, q, kd, x, heads, kh, nr4, qmul)
}
func eltSoftmaxU8Rows(dst []uint8, ldd int, scales, x []float32, n int, mask, xscale []float32) (row int, bits uint32) {
	return eltSoftmaxU8RowsGeneric(dst, ldd, scales, x, n, mask, xscale)
}
func eltPackQuantKRow(dst []int8, x []float32, stride int) (scale float32, colsum int32, bits uint32) {
	return eltPackQuantKRowGeneric(dst, x, stride)
}
func eltPackQuantVT4(dst []int8, r0, r1, r2, r3 []float32, inv float32, nr, panel int) {
	eltPackQuantVT4Generic(dst, r0, r1, r2, r3, inv, nr, panel)
}
func eltQuantS8(dst []int8, x []float32, inv, zp float32) uint32 {
	return eltQuantS8Generic(dst, x, inv, zp)
}
func eltDequantU8(dst []float32, q []uint8, scale, zp float32) {
	eltDequantU8Generic(dst, q, scale, zp)
}
func eltDequantS32(dst []float32, acc []int32, rs float32, cs []float32) {
	eltDequantS32Generic(dst, acc, rs, cs)
}
