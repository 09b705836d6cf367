package kernels

import (
	"fmt"
	"unsafe"

	"github.com/int8bert/int8bert/cpu"
)

// PackedF32 is a float32 weight matrix ([N][K], a PyTorch Linear weight)
// packed once into panels of NR columns, the layout the FP32 kernels read:
//
//	panel p (columns p*NR ... p*NR+NR-1) starts at p*NR*K;
//	inside it, row q of W^T (input feature q) starts at q*NR and holds the
//	NR columns' weights contiguously.
//
// Columns past N (the last panel's padding) are zero. Data starts on a
// 64-byte boundary.
type PackedF32 struct {
	N, K int
	NR   int
	Data []float32
}

// PackF32 packs w ([n][ldw], ldw >= k) for kernels whose panel width is nr
// (a positive multiple of 16).
func PackF32(n, k int, w []float32, ldw, nr int) (*PackedF32, error) {
	if n < 0 || k < 0 || ldw < max(k, 1) || nr <= 0 || nr%16 != 0 {
		return nil, fmt.Errorf("kernels: pack f32 n=%d k=%d ldw=%d nr=%d: %w", n, k, ldw, nr, ErrShape)
	}
	if n > 0 && k > 0 && len(w) < (n-1)*ldw+k {
		return nil, fmt.Errorf("kernels: pack f32 n=%d k=%d: len(w)=%d too short: %w", n, k, len(w), ErrShape)
	}
	panels := (n + nr - 1) / nr
	size := panels * nr * k
	buf := make([]float32, size+16)
	off := 0
	if a := uintptr(unsafe.Pointer(unsafe.SliceData(buf))) % 64; a != 0 {
		off = int(64-a) / 4
	}
	p := &PackedF32{N: n, K: k, NR: nr, Data: buf[off : off+size : off+size]}
	for j := 0; j < n && k > 0; j++ { // k = 0: nothing to read (w may be empty)
		base := (j / nr) * nr * k
		jj := j % nr
		for q, x := range w[j*ldw : j*ldw+k] {
			p.Data[base+q*nr+jj] = x
		}
	}
	return p, nil
}

// At returns W[j][q] from the packed layout.
func (p *PackedF32) At(j, q int) float32 {
	return p.Data[(j/p.NR)*p.NR*p.K+q*p.NR+j%p.NR]
}

// GEMMF32 are the operands of one FP32 GEMM with its epilogue:
// C[M][Ldc] = epilogue(A[M][Lda] x W^T), W packed in B. Ep's bias,
// activation and residual apply as in GemmF32Ref; its INT8 fields are
// ignored.
type GEMMF32 struct {
	M, N, K int
	A       []float32
	Lda     int
	B       *PackedF32
	Ep      *Epilogue
	C       []float32
	Ldc     int
	// Threads is the number of goroutines to split the work over (<= 1:
	// the calling goroutine only).
	Threads int
}

// Check validates the operands against each other.
func (g *GEMMF32) Check() error {
	if g.B == nil || g.B.N != g.N || g.B.K != g.K || g.N < 0 || g.K < 0 {
		return fmt.Errorf("kernels: gemm f32: packed weights do not match n=%d k=%d: %w", g.N, g.K, ErrShape)
	}
	if g.B.NR <= 0 || g.B.NR%16 != 0 || len(g.B.Data) < (g.N+g.B.NR-1)/g.B.NR*g.B.NR*g.K {
		return fmt.Errorf("kernels: gemm f32: packed weights nr=%d len=%d malformed: %w", g.B.NR, len(g.B.Data), ErrShape)
	}
	if g.M < 0 || g.Lda < max(g.K, 1) || (g.M > 0 && g.K > 0 && len(g.A) < (g.M-1)*g.Lda+g.K) {
		return fmt.Errorf("kernels: gemm f32 m=%d k=%d lda=%d len(a)=%d: %w", g.M, g.K, g.Lda, len(g.A), ErrShape)
	}
	if g.Ldc < max(g.N, 1) || (g.M > 0 && g.N > 0 && len(g.C) < (g.M-1)*g.Ldc+g.N) {
		return fmt.Errorf("kernels: gemm f32 m=%d n=%d ldc=%d len(c)=%d: %w", g.M, g.N, g.Ldc, len(g.C), ErrShape)
	}
	if err := g.Ep.checkFloat(g.M, g.N); err != nil {
		return fmt.Errorf("kernels: gemm f32: %w", err)
	}
	if overlaps(g.A, g.C) || (g.Ep != nil && overlaps(g.Ep.Residual, g.C)) {
		return fmt.Errorf("kernels: gemm f32: a and the residual must not share memory with c (copy the residual first): %w", ErrShape)
	}
	return nil
}

// KernelF32 describes one FP32 GEMM implementation. Names carry the tile,
// e.g. "gemmF32_14x32".
type KernelF32 struct {
	Name string
	// ISA is cpu.ISAAVX512, ISAAVX2 (AVX2 + FMA3) or ISAGeneric.
	ISA cpu.ISA
	// MR x NR is the register tile; B must be packed with NR.
	MR, NR int
	// Available reports whether this CPU (after INT8BERT_CPU_DISABLE) runs it.
	Available func(f cpu.Features) bool
	// Accepts reports whether the kernel takes this shape.
	Accepts func(m, n, k int) bool
	// Run computes g. It returns an error wrapping ErrShape for bad
	// operands, and an error when the CPU lacks the kernel's features.
	Run func(g *GEMMF32) error
}

// GenericF32 is the plain Go kernel on the packed layout (any NR): float32
// accumulation in the order p = 0...K-1, the epilogue in float64 as
// GemmF32Ref.
var GenericF32 = &KernelF32{
	Name: "gemmF32Generic_1x16", ISA: cpu.ISAGeneric, MR: 1, NR: 16,
	Available: func(cpu.Features) bool { return true },
	Accepts:   func(m, n, k int) bool { return m >= 0 && n >= 0 && k >= 0 },
	Run:       runGenericF32,
}

func runGenericF32(g *GEMMF32) error {
	if err := g.Check(); err != nil {
		return err
	}
	m, n, k, nr := g.M, g.N, g.K, g.B.NR
	if m == 0 || n == 0 {
		return nil
	}
	threads := max(g.Threads, 1)
	rowsPer := (m + threads - 1) / threads
	Parallel(threads, (m+rowsPer-1)/rowsPer, func(t int) {
		acc := make([]float32, nr)
		for i := t * rowsPer; i < min(m, (t+1)*rowsPer); i++ {
			a := g.A[i*g.Lda : i*g.Lda+k]
			for p := 0; p*nr < n; p++ {
				panel := g.B.Data[p*nr*k : (p+1)*nr*k]
				clear(acc)
				for q, x := range a {
					row := panel[q*nr : q*nr+nr]
					for jj, w := range row {
						acc[jj] += x * w
					}
				}
				for jj := 0; jj < nr && p*nr+jj < n; jj++ {
					j := p*nr + jj
					g.C[i*g.Ldc+j] = float32(g.Ep.finish(i, j, n, float64(acc[jj])))
				}
			}
		}
	})
	return nil
}

// F32Kernels lists every FP32 kernel compiled into this binary, the generic
// one first, including those this CPU cannot run (see KernelF32.Available).
func F32Kernels() []*KernelF32 {
	return append([]*KernelF32{GenericF32}, f32Asm...)
}

// f32Asm is filled by the assembly kernel files of this architecture.
var f32Asm []*KernelF32
