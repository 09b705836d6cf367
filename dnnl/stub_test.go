//go:build !cgo || nodnnl

package dnnl_test

import (
	"errors"
	"testing"

	"github.com/int8bert/int8bert/dnnl"
)

// TestUnavailable: without oneDNN every entry point returns ErrUnavailable
// (after argument validation), and nothing panics.
func TestUnavailable(t *testing.T) {
	if dnnl.Available {
		t.Fatal("Available is true in a build without oneDNN")
	}
	t.Log("built without oneDNN (CGO_ENABLED=0 or -tags nodnnl): checking the stub")
	if _, err := dnnl.GetInfo(); !errors.Is(err, dnnl.ErrUnavailable) {
		t.Errorf("GetInfo: %v", err)
	}
	if err := dnnl.SetMaxISA(dnnl.ISAAVX2); !errors.Is(err, dnnl.ErrUnavailable) {
		t.Errorf("SetMaxISA: %v", err)
	}
	if _, err := dnnl.NewEngine(); !errors.Is(err, dnnl.ErrUnavailable) {
		t.Errorf("NewEngine: %v", err)
	}
	if _, err := dnnl.DefaultEngine(); !errors.Is(err, dnnl.ErrUnavailable) {
		t.Errorf("DefaultEngine: %v", err)
	}
	var e *dnnl.Engine
	if _, err := e.NewMatMul(dnnl.MatMulConfig{M: 1, K: 1, N: 1, Src: dnnl.F32, Weights: dnnl.F32, Dst: dnnl.F32}); err == nil {
		t.Error("NewMatMul on a nil engine succeeded")
	}
}
