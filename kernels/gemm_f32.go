package kernels

import (
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
	data, err := packPanels("f32", n, k, w, ldw, nr, 1, func(x float32) float32 { return x })
	if err != nil {
		return nil, err
	}
	return &PackedF32{N: n, K: k, NR: nr, Data: data}, nil
}

// At returns W[j][q] from the packed layout.
func (p *PackedF32) At(j, q int) float32 {
	return p.Data[panelIndex(j, q, p.NR, p.K, 1)]
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
	n, k, nr := g.N, g.K, g.B.NR
	if g.M == 0 || n == 0 {
		return nil
	}
	genericRows(g.M, g.Threads, func() func(int) {
		acc := make([]float32, nr)
		return func(i int) {
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
				finishPanel(g.C[i*g.Ldc:], g.Ep, i, p*nr, n, acc)
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
