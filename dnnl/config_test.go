package dnnl_test

import (
	"errors"
	"testing"

	"github.com/int8bert/int8bert/dnnl"
)

func TestValidate(t *testing.T) {
	ok := []dnnl.MatMulConfig{
		{M: 1, K: 3, N: 5, Src: dnnl.F32, Weights: dnnl.F32, Dst: dnnl.F32, Bias: true},
		{K: 3, N: 5, Src: dnnl.BF16, Weights: dnnl.BF16, Dst: dnnl.BF16},
		{K: 3, N: 5, Src: dnnl.U8, Weights: dnnl.S8, Dst: dnnl.U8, DstScale: 0.1, DstZeroPoint: 128, SrcZeroPoint: true},
		{K: 3, N: 5, Src: dnnl.S8, Weights: dnnl.S8, Dst: dnnl.S32, PostOps: []dnnl.PostOp{{Kind: dnnl.Mul, Shape: dnnl.PerRow}}},
	}
	for i, c := range ok {
		if err := c.Validate(); err != nil {
			t.Errorf("ok[%d]: %v", i, err)
		}
	}
	bad := []dnnl.MatMulConfig{
		{M: 1, K: 3, N: 0, Src: dnnl.F32, Weights: dnnl.F32, Dst: dnnl.F32},
		{K: 3, N: 5, Src: dnnl.BF16, Weights: dnnl.S8, Dst: dnnl.F32},
		{K: 3, N: 5, Src: dnnl.U8, Weights: dnnl.S8, Dst: dnnl.BF16},
		{K: 3, N: 5, Src: dnnl.U8, Weights: dnnl.S8, Dst: dnnl.U8, DstScale: -1},
		{K: 3, N: 5, Src: dnnl.BF16, Weights: dnnl.BF16, Dst: dnnl.F32, SrcZeroPoint: true},
		{K: 3, N: 5, Src: dnnl.F32, Weights: dnnl.F32, Dst: dnnl.F32, PostOps: []dnnl.PostOp{{Kind: dnnl.Mul, Shape: 7}}},
	}
	for i, c := range bad {
		if err := c.Validate(); !errors.Is(err, dnnl.ErrInvalidArgument) {
			t.Errorf("bad[%d]: got %v", i, err)
		}
	}
}

func TestNames(t *testing.T) {
	if dnnl.U8.String() != "u8" || dnnl.BF16.Size() != 2 || dnnl.DataType(0).Size() != 0 {
		t.Error("data type names or sizes")
	}
	if dnnl.GELUErf.String() != "gelu_erf" || dnnl.PerRow.String() != "[M,1]" {
		t.Error("post-op names")
	}
	for _, isa := range []dnnl.ISA{dnnl.ISAAVX2, dnnl.ISAAVX512CoreVNNI, dnnl.ISAAVX512CoreAMX} {
		got, err := dnnl.ParseISA(isa.String())
		if err != nil || got != isa {
			t.Errorf("ParseISA(%q) = %v, %v", isa.String(), got, err)
		}
	}
	if _, err := dnnl.ParseISA("avx9000"); !errors.Is(err, dnnl.ErrInvalidArgument) {
		t.Errorf("ParseISA of an unknown name: %v", err)
	}
}
