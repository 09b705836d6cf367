package kernels

import (
	"fmt"
	"math"
)

// The quantize and dequantize steps of the encoder (W8A8): per-token and
// per-tensor activation quantizers and the dequantizers of u8 and s32
// data, on the element-wise path of eltwise.go.

// absMaxBitsLimit is the bit pattern of +Inf: an absolute value whose bits
// reach it is infinite or NaN.
const absMaxBitsLimit = 0x7f800000

func nonFiniteErr(op string, rows, h int, x []float32) error {
	j := findNonFinite(x)
	if j < 0 {
		j = 0
	}
	return fmt.Errorf("kernels: %s rows=%d h=%d: row %d col %d: %v: %w", op, rows, h, j/max(h, 1), j%max(h, 1), x[j], ErrNonFinite)
}

// QuantizeRowsU8 quantizes each row of x dynamically (one scale per token)
// to symmetric s8 stored as u8 with +128, the VPDPBUSD source convention
// whose compensation is 128*colsum(W) (docs/DESIGN.md section 3.3):
//
//	scales[i] = max_j |x[i][j]| / 127   (1 for an all-zero row)
//	dst[i][j] = clamp(roundHalfEven(x[i][j]*(1/scales[i])), -128, 127) + 128
//
// which is Quantize(x, scales[i], 0, -128, 127) + 128. A NaN or infinite
// input is an error wrapping ErrNonFinite naming its row and column; rows
// before it are written.
func QuantizeRowsU8(dst []uint8, scales []float32, x []float32, rows, h int) error {
	const op = "quantize rows u8"
	if err := checkRows(op, rows, h, "dst", len(dst), "x", len(x)); err != nil {
		return err
	}
	if len(scales) < rows {
		return eltShape(op, rows, h, "len(scales)=%d < rows", len(scales))
	}
	if h == 0 {
		return nil
	}
	f := eltImpl()
	for i := 0; i < rows; i++ {
		xr := x[i*h : i*h+h]
		b := f.absMax(xr)
		if b >= absMaxBitsLimit {
			return nonFiniteErr(op, rows, h, x[:(i+1)*h])
		}
		s := math.Float32frombits(b) / 127
		if s == 0 {
			s = 1
		}
		scales[i] = s
		f.qRow(dst[i*h:i*h+h], xr, 1/s)
	}
	return nil
}

// QuantizeRowsU8Pre is QuantizeRowsU8 of x*pre: each element is first
// multiplied by pre[j] (SmoothQuant's per-channel 1/s, docs/DESIGN.md section 3.4),
// the product rounded to float32, then each row is quantized exactly as
// QuantizeRowsU8 does:
//
//	v[j] = x[i][j]*pre[j]
//	scales[i] = max_j |v[j]| / 127   (1 for an all-zero row)
//	dst[i][j] = clamp(roundHalfEven(v[j]*(1/scales[i])), -128, 127) + 128
//
// pre nil is QuantizeRowsU8; otherwise len(pre) >= h. A NaN or infinite
// product (a NaN or infinite x or pre, or an overflowing product) is an
// error wrapping ErrNonFinite naming its row and column; rows before it are
// written.
func QuantizeRowsU8Pre(dst []uint8, scales []float32, x []float32, rows, h int, pre []float32) error {
	if pre == nil {
		return QuantizeRowsU8(dst, scales, x, rows, h)
	}
	const op = "quantize rows u8 pre"
	if err := checkRows(op, rows, h, "dst", len(dst), "x", len(x)); err != nil {
		return err
	}
	if len(scales) < rows {
		return eltShape(op, rows, h, "len(scales)=%d < rows", len(scales))
	}
	if len(pre) < h {
		return eltShape(op, rows, h, "len(pre)=%d < h", len(pre))
	}
	if h == 0 {
		return nil
	}
	f := eltImpl()
	pre = pre[:h]
	for i := 0; i < rows; i++ {
		xr := x[i*h : i*h+h]
		b := f.absMaxP(xr, pre)
		if b >= absMaxBitsLimit {
			for j, v := range xr {
				if p := v * pre[j]; p != p || math.IsInf(float64(p), 0) {
					return fmt.Errorf("kernels: %s rows=%d h=%d: row %d col %d: %v*%v: %w", op, rows, h, i, j, v, pre[j], ErrNonFinite)
				}
			}
			return fmt.Errorf("kernels: %s rows=%d h=%d: row %d: %w", op, rows, h, i, ErrNonFinite)
		}
		s := math.Float32frombits(b) / 127
		if s == 0 {
			s = 1
		}
		scales[i] = s
		f.qRowP(dst[i*h:i*h+h], xr, pre, 1/s)
	}
	return nil
}

func checkStatic(op string, rows, h int, scale float32, zp int32, lo, hi int32) error {
	if !(scale > 0) || math.IsInf(float64(scale), 0) {
		return eltShape(op, rows, h, "scale %v not positive and finite", scale)
	}
	if zp < lo || zp > hi {
		return eltShape(op, rows, h, "zero point %d outside [%d, %d]", zp, lo, hi)
	}
	return nil
}

// QuantizeTensorU8 quantizes x with one static scale and zero point:
// dst[k] = Quantize(x[k], scale, zp, 0, 255) (multiply by the float32
// inverse scale, add zp, round half to even, saturate). A NaN or infinite
// input is an error wrapping ErrNonFinite naming its row and column (dst is
// then partly written).
func QuantizeTensorU8(dst []uint8, x []float32, rows, h int, scale float32, zp int32) error {
	const op = "quantize tensor u8"
	if err := checkRows(op, rows, h, "dst", len(dst), "x", len(x)); err != nil {
		return err
	}
	if err := checkStatic(op, rows, h, scale, zp, 0, 255); err != nil {
		return err
	}
	n := rows * h
	if eltImpl().qU8(dst[:n], x[:n], 1/scale, float32(zp)) >= absMaxBitsLimit {
		return nonFiniteErr(op, rows, h, x[:n])
	}
	return nil
}

// QuantizeBlockU8 is QuantizeTensorU8 of a rows x cols block of x with
// row stride ldx into dst with row stride ldd (one head of attention's
// context inside the [tokens][hidden] matrix): it checks its arguments
// once and quantizes row by row. Errors as QuantizeTensorU8, naming the
// block's row and column.
func QuantizeBlockU8(dst []uint8, ldd int, x []float32, ldx, rows, cols int, scale float32, zp int32) error {
	const op = "quantize block u8"
	if rows < 0 || cols < 0 || ldd < cols || ldx < cols {
		return eltShape(op, rows, cols, "strides ldd=%d ldx=%d below %d columns", ldd, ldx, cols)
	}
	if rows == 0 || cols == 0 {
		return nil
	}
	if need := (rows-1)*ldd + cols; len(dst) < need {
		return eltShape(op, rows, cols, "len(dst)=%d < %d", len(dst), need)
	}
	if need := (rows-1)*ldx + cols; len(x) < need {
		return eltShape(op, rows, cols, "len(x)=%d < %d", len(x), need)
	}
	if err := checkStatic(op, rows, cols, scale, zp, 0, 255); err != nil {
		return err
	}
	f, inv, z := eltImpl(), 1/scale, float32(zp)
	for i := 0; i < rows; i++ {
		xr := x[i*ldx : i*ldx+cols]
		if f.qU8(dst[i*ldd:i*ldd+cols], xr, inv, z) >= absMaxBitsLimit {
			j := max(findNonFinite(xr), 0)
			return fmt.Errorf("kernels: %s rows=%d cols=%d: row %d col %d: %v: %w", op, rows, cols, i, j, xr[j], ErrNonFinite)
		}
	}
	return nil
}

// QuantizeTensorS8 quantizes x with one static scale and zero point:
// dst[k] = Quantize(x[k], scale, zp, -128, 127). Errors as QuantizeTensorU8.
func QuantizeTensorS8(dst []int8, x []float32, rows, h int, scale float32, zp int32) error {
	const op = "quantize tensor s8"
	if err := checkRows(op, rows, h, "dst", len(dst), "x", len(x)); err != nil {
		return err
	}
	if err := checkStatic(op, rows, h, scale, zp, -128, 127); err != nil {
		return err
	}
	n := rows * h
	if eltImpl().qS8(dst[:n], x[:n], 1/scale, float32(zp)) >= absMaxBitsLimit {
		return nonFiniteErr(op, rows, h, x[:n])
	}
	return nil
}

// DequantizeU8 computes dst[i][j] = (float32(q[i][j]) - zp) * scales[i],
// one scale per row (len(scales) >= rows) or, with len(scales) == 1, one per
// tensor. With zp = 128 it inverts QuantizeRowsU8 up to rounding.
func DequantizeU8(dst []float32, q []uint8, rows, h int, scales []float32, zp int32) error {
	const op = "dequantize u8"
	if err := checkRows(op, rows, h, "dst", len(dst), "q", len(q)); err != nil {
		return err
	}
	if len(scales) != 1 && len(scales) < rows {
		return eltShape(op, rows, h, "len(scales)=%d: want 1 or >= rows", len(scales))
	}
	if zp < 0 || zp > 255 {
		return eltShape(op, rows, h, "zero point %d outside [0, 255]", zp)
	}
	f := eltImpl()
	for i := 0; i < rows && h > 0; i++ {
		s := scales[0]
		if len(scales) > 1 {
			s = scales[i]
		}
		f.dqU8(dst[i*h:i*h+h], q[i*h:i*h+h], s, float32(zp))
	}
	return nil
}

// DequantizeS32 turns int32 GEMM accumulators ([rows][n]) into float32:
// dst[i][j] = (float32(acc[i][j]) * rowScales[i]) * colScales[j], each
// product rounded to float32. rowScales has one scale per row or, with
// length 1, one per tensor; colScales (per output channel, len >= n) may be
// nil for 1. |acc| above 2^24 loses bits in the conversion, as in every
// float32 epilogue.
func DequantizeS32(dst []float32, acc []int32, rows, n int, rowScales, colScales []float32) error {
	const op = "dequantize s32"
	if err := checkRows(op, rows, n, "dst", len(dst), "acc", len(acc)); err != nil {
		return err
	}
	if len(rowScales) != 1 && len(rowScales) < rows {
		return eltShape(op, rows, n, "len(row scales)=%d: want 1 or >= rows", len(rowScales))
	}
	if colScales != nil && len(colScales) < n {
		return eltShape(op, rows, n, "len(col scales)=%d < n", len(colScales))
	}
	var cs []float32
	if colScales != nil {
		cs = colScales[:n]
	}
	f := eltImpl()
	for i := 0; i < rows && n > 0; i++ {
		s := rowScales[0]
		if len(rowScales) > 1 {
			s = rowScales[i]
		}
		f.dqS32(dst[i*n:i*n+n], acc[i*n:i*n+n], s, cs)
	}
	return nil
}
