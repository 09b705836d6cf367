package kernels

import (
	"fmt"
	"unsafe"
)

// This file is what the FP32 and BF16 operations share (docs/DESIGN.md
// 4.11): both multiply float32 activations by weights packed once into
// panels of NR columns, with the FP32 epilogue. They differ in the packed
// element (float32, or the bf16 bits as uint16) and in ks, the run of k a
// column holds contiguously (1, or a bf16 pair: 2).

// packedFloat is the element of a packed float weight matrix.
type packedFloat interface{ float32 | uint16 }

// packPanels packs w ([n][ldw], ldw >= k), each value converted by conv,
// into panels of nr columns (a positive multiple of 16), K rounded up to
// ks:
//
//	panel p (columns p*NR ... p*NR+NR-1) starts at p*NR*KP;
//	inside it, group q (input features q*ks ... q*ks+ks-1) starts at
//	q*ks*NR and holds, for each of the NR columns jj in turn, the column's
//	ks values.
//
// Columns past n and the tail of the last group are zero. The data starts
// on a 64-byte boundary. op names the operation in errors.
func packPanels[E packedFloat](op string, n, k int, w []float32, ldw, nr, ks int, conv func(float32) E) ([]E, error) {
	if n < 0 || k < 0 || ldw < max(k, 1) || nr <= 0 || nr%16 != 0 {
		return nil, fmt.Errorf("kernels: pack %s n=%d k=%d ldw=%d nr=%d: %w", op, n, k, ldw, nr, ErrShape)
	}
	if n > 0 && k > 0 && len(w) < (n-1)*ldw+k {
		return nil, fmt.Errorf("kernels: pack %s n=%d k=%d: len(w)=%d too short: %w", op, n, k, len(w), ErrShape)
	}
	kp := (k + ks - 1) / ks * ks
	size := (n + nr - 1) / nr * nr * kp
	var zero E
	es := int(unsafe.Sizeof(zero))
	buf := make([]E, size+64/es)
	off := 0
	if a := uintptr(unsafe.Pointer(unsafe.SliceData(buf))) % 64; a != 0 {
		off = int(64-a) / es
	}
	data := buf[off : off+size : off+size]
	for j := 0; j < n && k > 0; j++ { // k = 0: nothing to read (w may be empty)
		base := (j/nr)*nr*kp + ks*(j%nr)
		for q, x := range w[j*ldw : j*ldw+k] {
			data[base+q/ks*ks*nr+q%ks] = conv(x)
		}
	}
	return data, nil
}

// panelIndex is the index of W[j][q] in weights packPanels packed.
func panelIndex(j, q, nr, kp, ks int) int {
	return (j/nr)*nr*kp + q/ks*ks*nr + ks*(j%nr) + q%ks
}

// packedDims is the shape of packed weights as a call's check reads it
// (ok false: no weights).
type packedDims struct {
	ok            bool
	n, k, nr, len int
	kp            int // the packed K
}

// Check validates the operands against each other.
func (g *GEMMF32) Check() error {
	var b packedDims
	if g.B != nil {
		b = packedDims{true, g.B.N, g.B.K, g.B.NR, len(g.B.Data), g.B.K}
	}
	return checkFloatGEMM("f32", g.M, g.N, g.K, g.A, g.Lda, b, g.Ep, g.C, g.Ldc)
}

// Check validates the operands against each other.
func (g *GEMMBF16) Check() error {
	var b packedDims
	if g.B != nil {
		b = packedDims{true, g.B.N, g.B.K, g.B.NR, len(g.B.Data), g.B.KP()}
	}
	return checkFloatGEMM("bf16", g.M, g.N, g.K, g.A, g.Lda, b, g.Ep, g.C, g.Ldc)
}

// checkFloatGEMM validates the operands of an FP32 or BF16 call (op names
// it in errors) against each other.
func checkFloatGEMM(op string, m, n, k int, a []float32, lda int, b packedDims, ep *Epilogue, c []float32, ldc int) error {
	if !b.ok || b.n != n || b.k != k || n < 0 || k < 0 {
		return fmt.Errorf("kernels: gemm %s: packed weights do not match n=%d k=%d: %w", op, n, k, ErrShape)
	}
	if b.nr <= 0 || b.nr%16 != 0 || b.len < (n+b.nr-1)/b.nr*b.nr*b.kp {
		return fmt.Errorf("kernels: gemm %s: packed weights nr=%d len=%d malformed: %w", op, b.nr, b.len, ErrShape)
	}
	if m < 0 || lda < max(k, 1) || (m > 0 && k > 0 && len(a) < (m-1)*lda+k) {
		return fmt.Errorf("kernels: gemm %s m=%d k=%d lda=%d len(a)=%d: %w", op, m, k, lda, len(a), ErrShape)
	}
	if ldc < max(n, 1) || (m > 0 && n > 0 && len(c) < (m-1)*ldc+n) {
		return fmt.Errorf("kernels: gemm %s m=%d n=%d ldc=%d len(c)=%d: %w", op, m, n, ldc, len(c), ErrShape)
	}
	if err := ep.checkFloat(m, n); err != nil {
		return fmt.Errorf("kernels: gemm %s: %w", op, err)
	}
	if overlaps(a, c) || (ep != nil && overlaps(ep.Residual, c)) {
		return fmt.Errorf("kernels: gemm %s: a and the residual must not share memory with c (copy the residual first): %w", op, ErrShape)
	}
	return nil
}

// genericRows runs the rows of an m-row call split over threads
// goroutines: each task asks newTask for its row function (with buffers of
// its own) and calls it on each of its rows. It is the generic kernels'
// loop.
func genericRows(m, threads int, newTask func() func(i int)) {
	threads = max(threads, 1)
	rowsPer := (m + threads - 1) / threads
	Parallel(threads, (m+rowsPer-1)/rowsPer, func(t int) {
		row := newTask()
		for i := t * rowsPer; i < min(m, (t+1)*rowsPer); i++ {
			row(i)
		}
	})
}

// finishPanel writes the accumulators of row i, panel columns j0...j0+nr-1
// (those below n), through the epilogue in float64 into c (row i's start).
func finishPanel(c []float32, ep *Epilogue, i, j0, n int, acc []float32) {
	for jj := 0; jj < len(acc) && j0+jj < n; jj++ {
		c[j0+jj] = float32(ep.finish(i, j0+jj, n, float64(acc[jj])))
	}
}
