package checkpoint

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"unsafe"
)

// Dtype is a tensor element type, named as in safetensors headers.
type Dtype string

// The element types recognised in safetensors headers and torch storages.
// Float32 conversion supports F32, F16, BF16 and F64; the others are
// available raw.
const (
	F64    Dtype = "F64"
	F32    Dtype = "F32"
	F16    Dtype = "F16"
	BF16   Dtype = "BF16"
	I64    Dtype = "I64"
	I32    Dtype = "I32"
	I16    Dtype = "I16"
	I8     Dtype = "I8"
	U8     Dtype = "U8"
	U16    Dtype = "U16"
	U32    Dtype = "U32"
	U64    Dtype = "U64"
	BOOL   Dtype = "BOOL"
	F8E4M3 Dtype = "F8_E4M3"
	F8E5M2 Dtype = "F8_E5M2"
)

var dtypeSizes = map[Dtype]int{
	F64: 8, F32: 4, F16: 2, BF16: 2, I64: 8, I32: 4, I16: 2, I8: 1, U8: 1,
	U16: 2, U32: 4, U64: 8, BOOL: 1, F8E4M3: 1, F8E5M2: 1,
}

// Size returns the size of one element in bytes, or 0 for an unknown dtype.
func (d Dtype) Size() int { return dtypeSizes[d] }

// Known reports whether d is a recognised dtype.
func (d Dtype) Known() bool { return dtypeSizes[d] != 0 }

// littleEndian reports whether the host stores integers little-endian.
var littleEndian = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// numel returns the product of shape, checking for negative dimensions and
// overflow past maxInt.
func numel(shape []int) (int64, error) {
	n := int64(1)
	for _, d := range shape {
		if d < 0 {
			return 0, fmt.Errorf("negative dimension in shape %v", shape)
		}
		if d != 0 && n > math.MaxInt64/int64(d) {
			return 0, fmt.Errorf("shape %v overflows", shape)
		}
		n *= int64(d)
	}
	return n, nil
}

// toFloat32 converts little-endian raw elements of dtype d into float32.
// When the host is little-endian, d is F32 and b is 4-byte aligned, the result
// aliases b.
func toFloat32(d Dtype, b []byte, alias bool) ([]float32, error) {
	switch d {
	case F32:
		n := len(b) / 4
		if n == 0 {
			return []float32{}, nil
		}
		if alias && littleEndian && uintptr(unsafe.Pointer(&b[0]))%4 == 0 {
			return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), n), nil
		}
		out := make([]float32, n)
		for i := range out {
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
		return out, nil
	case F16:
		out := make([]float32, len(b)/2)
		for i := range out {
			out[i] = HalfToFloat32(binary.LittleEndian.Uint16(b[2*i:]))
		}
		return out, nil
	case BF16:
		out := make([]float32, len(b)/2)
		for i := range out {
			out[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(b[2*i:])) << 16)
		}
		return out, nil
	case F64:
		out := make([]float32, len(b)/8)
		for i := range out {
			out[i] = float32(math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:])))
		}
		return out, nil
	}
	return nil, fmt.Errorf("dtype %s cannot be read as float32", d)
}

// HalfToFloat32 converts an IEEE 754 binary16 value to float32 exactly.
func HalfToFloat32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f: // Inf or NaN
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	case exp != 0: // normal
		return math.Float32frombits(sign | (exp+112)<<23 | mant<<13)
	case mant == 0: // signed zero
		return math.Float32frombits(sign)
	}
	// Subnormal half: value = mant * 2^-24, normal as float32.
	e := uint32(113)
	for mant&0x400 == 0 {
		mant <<= 1
		e--
	}
	return math.Float32frombits(sign | e<<23 | (mant&0x3ff)<<13)
}

// readWhole reads an open file into memory (the non-mmap path).
func readWhole(f *os.File) ([]byte, func() error, error) {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, nil, err
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return nil, nil, err
	}
	return b, func() error { return nil }, nil
}
