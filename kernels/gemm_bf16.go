package kernels

import (
	"fmt"
	"math"

	"github.com/int8bert/int8bert/cpu"
)

// The BF16 operation (docs/DESIGN.md 4.11): C = epilogue(A x W^T) with W
// and A rounded to bfloat16 (ToBF16, round half to even), products of
// bf16 values (exact in float32) summed in float32, and the FP32
// operation's epilogue (bias, activation, residual).

// bf16DAZ rounds x to bfloat16 as ToBF16 does and flushes a subnormal
// result to a zero of its sign: the value VDPBF16PS reads (it treats
// subnormal inputs as zero), so that the packed operands hold exactly what
// the instruction multiplies.
func bf16DAZ(x float32) uint16 {
	h := ToBF16(x)
	if h&0x7f80 == 0 {
		h &= 0x8000
	}
	return h
}

// PackedBF16 is a float32 weight matrix ([N][K], a PyTorch Linear weight)
// rounded to bfloat16 and packed once into panels of NR columns, the
// layout VDPBF16PS reads (K in pairs, N in the kernel's column block):
//
//	panel p (columns p*NR ... p*NR+NR-1) starts at p*NR*KP, KP = K rounded
//	up to even;
//	inside it, pair q (input features 2q and 2q+1) starts at q*2*NR and
//	holds, for each of the NR columns jj in turn, W[j][2q] then W[j][2q+1]
//	(one 32-bit lane of a zmm per column).
//
// Columns past N and the second half of the last pair when K is odd are
// zero. Subnormal bf16 values are stored as zero (bf16DAZ). Data starts on
// a 64-byte boundary.
type PackedBF16 struct {
	N, K int
	NR   int
	Data []uint16
}

// KP is K rounded up to even: the packed length of a column.
func (p *PackedBF16) KP() int { return (p.K + 1) &^ 1 }

// PackBF16 rounds w ([n][ldw], ldw >= k) to bfloat16 and packs it for
// kernels whose panel width is nr (a positive multiple of 16).
func PackBF16(n, k int, w []float32, ldw, nr int) (*PackedBF16, error) {
	data, err := packPanels("bf16", n, k, w, ldw, nr, 2, bf16DAZ)
	if err != nil {
		return nil, err
	}
	return &PackedBF16{N: n, K: k, NR: nr, Data: data}, nil
}

// At returns W[j][q] as packed (bf16 bits).
func (p *PackedBF16) At(j, q int) uint16 {
	return p.Data[panelIndex(j, q, p.NR, p.KP(), 2)]
}

// GEMMBF16 are the operands of one BF16 GEMM with its epilogue:
// C[M][Ldc] = epilogue(bf16(A[M][Lda]) x W^T), W rounded and packed in B,
// A rounded to bf16 inside the call. Ep's bias, activation and residual
// apply as in GEMMF32; its INT8 fields are ignored.
type GEMMBF16 struct {
	M, N, K int
	A       []float32
	Lda     int
	B       *PackedBF16
	Ep      *Epilogue
	C       []float32
	Ldc     int
	// Threads is the number of goroutines to split the work over (<= 1:
	// the calling goroutine only).
	Threads int
}

// KernelBF16 describes one BF16 GEMM implementation. Names carry the tile,
// e.g. "gemmBF16_6x64".
type KernelBF16 struct {
	Name string
	// ISA is cpu.ISAAVX512BF16, cpu.ISAAMXBF16 or cpu.ISAGeneric.
	ISA cpu.ISA
	// MR x NR is the register tile; B must be packed with NR. KStep is the
	// number of k one instruction consumes per lane (2: a bf16 pair).
	MR, NR, KStep int
	// Available reports whether this CPU (after INT8BERT_CPU_DISABLE) runs it.
	Available func(f cpu.Features) bool
	// Accepts reports whether the kernel takes this shape.
	Accepts func(m, n, k int) bool
	// Run computes g. It returns an error wrapping ErrShape for bad
	// operands, and an error when the CPU lacks the kernel's features.
	Run func(g *GEMMBF16) error
}

// GenericBF16 is the plain Go kernel on the packed layout (any NR): what
// VDPBF16PS computes, lane by lane, for every pair q in order
//
//	acc = (acc + a[2q+1]*w[2q+1]) + a[2q]*w[2q]
//
// (float32 sums rounded to nearest even, each product of two bf16 values
// exact in float32; A rounded by ToBF16 with subnormals read as zero), so
// that its accumulators equal the AVX512-BF16 kernels' bit for bit
// wherever no product or partial sum is subnormal; then the epilogue in
// float64 as GemmF32Ref (GenericF32's).
var GenericBF16 = &KernelBF16{
	Name: "gemmBF16Generic_1x16", ISA: cpu.ISAGeneric, MR: 1, NR: 16, KStep: 2,
	Available: func(cpu.Features) bool { return true },
	Accepts:   func(m, n, k int) bool { return m >= 0 && n >= 0 && k >= 0 },
	Run:       runGenericBF16,
}

// packBF16Row rounds the n floats of src to bf16 (bf16DAZ) into dst[:n]
// and zeroes dst[n:]: the twin of the assembly row packer (cvtBF16Row).
func packBF16Row(dst []uint16, src []float32) {
	for i, x := range src {
		dst[i] = bf16DAZ(x)
	}
	clear(dst[len(src):])
}

func runGenericBF16(g *GEMMBF16) error {
	if err := g.Check(); err != nil {
		return err
	}
	n, nr := g.N, g.B.NR
	kp := g.B.KP()
	if g.M == 0 || n == 0 {
		return nil
	}
	genericRows(g.M, g.Threads, func() func(int) {
		acc := make([]float32, nr)
		a16 := make([]uint16, kp)
		af := make([]float32, kp)
		return func(i int) {
			packBF16Row(a16, g.A[i*g.Lda:i*g.Lda+g.K])
			for q, h := range a16 {
				af[q] = FromBF16(h)
			}
			for p := 0; p*nr < n; p++ {
				panel := g.B.Data[p*nr*kp : (p+1)*nr*kp]
				clear(acc)
				for q := 0; q < kp; q += 2 {
					a0, a1 := af[q], af[q+1]
					row := panel[q*nr : q*nr+2*nr]
					for jj := range acc {
						w0, w1 := FromBF16(row[2*jj]), FromBF16(row[2*jj+1])
						// Two statements: Go must round each sum (no FMA
						// fusion across an assignment to a float32).
						s := acc[jj] + a1*w1
						acc[jj] = s + float32(a0*w0)
					}
				}
				finishPanel(g.C[i*g.Ldc:], g.Ep, i, p*nr, n, acc)
			}
		}
	})
	return nil
}

// BF16Kernels lists every BF16 kernel compiled into this binary, the
// generic one first, including those this CPU cannot run (see
// KernelBF16.Available).
func BF16Kernels() []*KernelBF16 {
	return append([]*KernelBF16{GenericBF16}, bf16Asm...)
}

// bf16Asm is filled by the assembly kernel files of this architecture.
var bf16Asm []*KernelBF16

// GemmBF16Ref is the reference of the BF16 operation: A and W rounded to
// bf16 (ToBF16, subnormals read as zero, as the kernels read them), the
// products summed in float64, then the epilogue as GemmF32Ref. w is
// [n][ldw] float32. absSum, when not nil (len >= m*n), receives
// sum_k |a||w| of the rounded operands per element, the scale of a
// float32 summation's error.
func GemmBF16Ref(m, n, k int, a []float32, lda int, w []float32, ldw int, c []float32, ldc int, ep *Epilogue, absSum []float64) error {
	if err := CheckGEMM(m, n, k, len(a), lda, len(w), ldw, len(c), ldc); err != nil {
		return err
	}
	if err := ep.checkFloat(m, n); err != nil {
		return err
	}
	if absSum != nil && len(absSum) < m*n {
		return fmt.Errorf("kernels: gemm bf16 ref: len(absSum)=%d < m*n=%d: %w", len(absSum), m*n, ErrShape)
	}
	round := func(x float32) float64 { return float64(FromBF16(bf16DAZ(x))) }
	ar := make([]float64, k)
	wr := make([]float64, n*k)
	for j := 0; j < n; j++ {
		for q := 0; q < k; q++ {
			wr[j*k+q] = round(w[j*ldw+q])
		}
	}
	for i := 0; i < m; i++ {
		for q := range ar {
			ar[q] = round(a[i*lda+q])
		}
		for j := 0; j < n; j++ {
			var s, sa float64
			for q, x := range wr[j*k : (j+1)*k] {
				s += ar[q] * x
				sa += math.Abs(ar[q] * x)
			}
			c[i*ldc+j] = float32(ep.finish(i, j, n, s))
			if absSum != nil {
				absSum[i*n+j] = sa
			}
		}
	}
	return nil
}
