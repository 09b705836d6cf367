package kernels

import (
	"fmt"
	"slices"
	"unsafe"

	"github.com/int8bert/int8bert/cpu"
)

// PackedS8 is an int8 weight matrix ([N][K], a PyTorch Linear weight)
// packed once into the VNNI-4 panel layout the u8 x s8 kernels read:
//
//	Kp = K rounded up to 4, Np = N rounded up to NR
//	panel p (columns p*NR ... p*NR+NR-1) starts at p*NR*Kp;
//	inside it, k-group g (rows 4g ... 4g+3 of W^T) starts at g*NR*4;
//	inside that, column j holds its 4 weights at j*4 ... j*4+3.
//
// Padding (k >= K or column >= N) is zero, so kernels may run whole groups
// and whole panels. ColSum[j] is the sum of column j's K weights, for the
// zero-point compensation of a u8 source.
type PackedS8 struct {
	N, K   int
	NR     int
	Kp, Np int
	Data   []int8
	ColSum []int32
}

// PackS8 packs b ([n][ldb], ldb >= k) for kernels whose panel width is nr
// (a multiple of 16).
func PackS8(n, k int, b []int8, ldb, nr int) (*PackedS8, error) {
	if n < 0 || k < 0 || ldb < max(k, 1) || nr <= 0 || nr%16 != 0 {
		return nil, fmt.Errorf("kernels: pack s8 n=%d k=%d ldb=%d nr=%d: %w", n, k, ldb, nr, ErrShape)
	}
	if n > 0 && k > 0 && len(b) < (n-1)*ldb+k {
		return nil, fmt.Errorf("kernels: pack s8 n=%d k=%d: len(b)=%d too short: %w", n, k, len(b), ErrShape)
	}
	p := &PackedS8{N: n, K: k, NR: nr, Kp: (k + 3) &^ 3, Np: (n + nr - 1) / nr * nr}
	p.Data = make([]int8, p.Np*p.Kp)
	p.ColSum = make([]int32, n)
	for j := 0; j < n; j++ {
		panel, jj := j/nr, j%nr
		base := panel * nr * p.Kp
		var s int32
		for q := 0; q < k; q++ {
			w := b[j*ldb+q]
			s += int32(w)
			p.Data[base+(q/4)*nr*4+jj*4+q%4] = w
		}
		p.ColSum[j] = s
	}
	return p, nil
}

// At returns W[j][q] from the packed layout (for tests and the generic
// kernel).
func (p *PackedS8) At(j, q int) int8 {
	return p.Data[(j/p.NR)*p.NR*p.Kp+(q/4)*p.NR*4+(j%p.NR)*4+q%4]
}

// Out is the destination of a GEMM: exactly one of its slices is set. F32
// receives the epilogue's float result, U8 and S8 its requantized result
// (Epilogue.OutScale > 0), S32 the raw accumulators (the epilogue must be
// nil).
type Out struct {
	S32 []int32
	F32 []float32
	U8  []uint8
	S8  []int8
	Ldc int
}

func (o *Out) check(m, n int) error {
	set := 0
	l := 0
	for _, x := range []int{len(o.S32), len(o.F32), len(o.U8), len(o.S8)} {
		if x > 0 {
			set++
			l = x
		}
	}
	if m == 0 || n == 0 {
		return nil
	}
	if set != 1 {
		return fmt.Errorf("kernels: out: %d destinations set, want 1: %w", set, ErrShape)
	}
	if o.Ldc < n || l < (m-1)*o.Ldc+n {
		return fmt.Errorf("kernels: out m=%d n=%d ldc=%d len=%d: %w", m, n, o.Ldc, l, ErrShape)
	}
	return nil
}

// RowStrideU8 is the row stride (Lda) to give a u8 A whose rows are k
// bytes wide: k, or k plus one cache line (64 bytes) when k is a positive
// multiple of 4096 (BERT-large's FFN intermediate). Rows 4096 bytes apart
// map to the same L1 sets, so the 8 or 12 rows a VNNI micro-kernel (8x48,
// 12x32) broadcasts from at each k step evict one another and the GEMM
// runs up to a third slower; one more line a row spreads them over the
// sets. The encoder lays out such A buffers at this stride, and the
// selector times u8s8 kernels on a trial A at it, so both see the same
// call (docs/DESIGN.md section 3.2). k <= 0 returns k.
func RowStrideU8(k int) int {
	if k > 0 && k%4096 == 0 {
		return k + 64
	}
	return k
}

// GEMMU8S8 are the operands of one u8 x s8 GEMM with its epilogue:
// Out = epilogue(A[M][Lda] x B^T), B packed.
type GEMMU8S8 struct {
	M, N, K int
	A       []uint8
	Lda     int
	B       *PackedS8
	Ep      *Epilogue
	Out     Out
	// Threads is the number of goroutines to split M and N over (<= 1: the
	// calling goroutine only).
	Threads int
}

// Check validates the operands against each other.
func (g *GEMMU8S8) Check() error {
	if g.B == nil || g.B.N != g.N || g.B.K != g.K {
		return fmt.Errorf("kernels: gemm u8s8: packed weights do not match n=%d k=%d: %w", g.N, g.K, ErrShape)
	}
	if g.M < 0 || g.Lda < max(g.K, 1) || (g.M > 0 && g.K > 0 && len(g.A) < (g.M-1)*g.Lda+g.K) {
		return fmt.Errorf("kernels: gemm u8s8 m=%d k=%d lda=%d len(a)=%d: %w", g.M, g.K, g.Lda, len(g.A), ErrShape)
	}
	if err := g.Out.check(g.M, g.N); err != nil {
		return err
	}
	if g.Ep != nil && overlaps(g.Ep.Residual, g.Out.F32) {
		return fmt.Errorf("kernels: gemm u8s8: the residual must not share memory with the output (copy it first): %w", ErrShape)
	}
	if g.Out.S32 != nil && g.Ep != nil {
		return fmt.Errorf("kernels: gemm u8s8: an s32 destination takes no epilogue: %w", ErrShape)
	}
	if (g.Out.U8 != nil || g.Out.S8 != nil) && (g.Ep == nil || !(g.Ep.OutScale > 0)) {
		return fmt.Errorf("kernels: gemm u8s8: a u8/s8 destination needs Epilogue.OutScale > 0: %w", ErrShape)
	}
	return g.Ep.check(g.M, g.N)
}

// Kernel describes one GEMM implementation: data, as docs/DESIGN.md section 4.2
// asks. Names carry the tile, e.g. "gemmVNNI_8x48".
type Kernel struct {
	Name string
	// ISA is the instruction set: cpu.ISAAVX512VNNI, ISAAMX, ISAAVX2 or
	// ISAGeneric.
	ISA cpu.ISA
	// MR x NR is the register tile, KB the K step of the inner loop.
	MR, NR, KB int
	// Available reports whether this CPU (after INT8BERT_CPU_DISABLE) runs it.
	Available func(f cpu.Features) bool
	// Accepts reports whether the kernel takes this shape.
	Accepts func(m, n, k int) bool
	// Takes, when set, reports whether the kernel computes a call of g's
	// form: a kernel made for one fused product (INT8 attention's Q Kᵀ,
	// ScoresU8S8) takes no other, and its RunU8S8 refuses (ErrShape) what
	// Takes does not admit. It reads the form only (B's NR, K, Threads,
	// which epilogue steps are set, the destination type), never lengths
	// or values. nil: every call of a shape Accepts admits.
	Takes func(g *GEMMU8S8) bool
	// RunU8S8 computes g; g.B must have been packed with NR.
	RunU8S8 func(g *GEMMU8S8) error
}

// GenericU8S8 is the generic u8 x s8 kernel: plain Go on the packed layout,
// on every CPU; every assembly kernel must equal it bit for bit.
var GenericU8S8 = &Kernel{
	Name: "gemmGeneric_1x16", ISA: cpu.ISAGeneric, MR: 1, NR: 16, KB: 4,
	Available: func(cpu.Features) bool { return true },
	Accepts:   func(m, n, k int) bool { return true },
	RunU8S8:   runGenericU8S8,
}

func runGenericU8S8(g *GEMMU8S8) error {
	if err := g.Check(); err != nil {
		return err
	}
	m, n, k := g.M, g.N, g.K
	rowsPer := max(1, (m+max(g.Threads, 1)-1)/max(g.Threads, 1))
	tasks := (m + rowsPer - 1) / rowsPer
	// acc is Σ_q A[i][q] B[q][j] over B's packed column j (PackedS8.At's
	// layout, walked a group of 4 at a time: the reference of every check,
	// so its speed is the selector's tuning time).
	nr, kp := g.B.NR, g.B.Kp
	acc := func(i, j int) int32 {
		var s int32
		if k == 0 {
			return 0
		}
		a := g.A[i*g.Lda : i*g.Lda+k]
		col := g.B.Data[(j/nr)*nr*kp+(j%nr)*4:]
		q := 0
		for ; q+4 <= k; q += 4 {
			b := col[q*nr : q*nr+4]
			s += int32(a[q])*int32(b[0]) + int32(a[q+1])*int32(b[1]) + int32(a[q+2])*int32(b[2]) + int32(a[q+3])*int32(b[3])
		}
		for ; q < k; q++ {
			s += int32(a[q]) * int32(col[(q/4)*nr*4+q%4])
		}
		return s
	}
	Parallel(g.Threads, tasks, func(t int) {
		for i := t * rowsPer; i < min(m, (t+1)*rowsPer); i++ {
			for j := 0; j < n; j++ {
				storeEpilogue(g, i, j, acc(i, j))
			}
		}
	})
	return nil
}

// storeEpilogue applies g.Ep to one accumulator and stores it in g.Out.
func storeEpilogue(g *GEMMU8S8, i, j int, acc int32) {
	o := &g.Out
	idx := i*o.Ldc + j
	switch {
	case o.S32 != nil:
		o.S32[idx] = acc
	case o.F32 != nil:
		o.F32[idx] = float32(g.Ep.finish(i, j, g.N, g.Ep.dequant(i, j, acc)))
	case o.U8 != nil:
		y := g.Ep.finish(i, j, g.N, g.Ep.dequant(i, j, acc))
		o.U8[idx] = uint8(Quantize(y, g.Ep.OutScale, g.Ep.OutZeroPoint, 0, 255))
	case o.S8 != nil:
		y := g.Ep.finish(i, j, g.N, g.Ep.dequant(i, j, acc))
		o.S8[idx] = int8(Quantize(y, g.Ep.OutScale, g.Ep.OutZeroPoint, -128, 127))
	}
}

// U8S8Kernels lists every u8 x s8 kernel compiled into this binary,
// including those this CPU cannot run (see Kernel.Available).
func U8S8Kernels() []*Kernel {
	return append([]*Kernel{GenericU8S8}, u8s8Asm...)
}

// u8s8Asm is filled by the assembly kernel files of this architecture.
var u8s8Asm []*Kernel

// AttentionU8S8Kernels lists the kernels made for INT8 attention's
// products (B an activation packed by the caller), each for one form of
// call (Kernel.Takes): candidates of those products beside U8S8Kernels(),
// which serve every form. Today the scores kernel, ScoresU8S8, where this
// build has its assembly.
func AttentionU8S8Kernels() []*Kernel { return slices.Clone(attnU8S8Asm) }

// attnU8S8Asm is filled by the assembly kernel files of this architecture.
var attnU8S8Asm []*Kernel

func errPanel(have, want int) error {
	return fmt.Errorf("kernels: weights packed with NR=%d, this kernel needs NR=%d: %w", have, want, ErrShape)
}

// overlaps reports whether two float32 slices share memory. Kernels that
// accumulate over K blocks into C would read a residual or input that aliases
// C after it was overwritten, so their Check refuses it.
func overlaps(a, b []float32) bool {
	if len(a) == 0 || len(b) == 0 {
		return false
	}
	a0 := uintptr(unsafe.Pointer(&a[0]))
	b0 := uintptr(unsafe.Pointer(&b[0]))
	return a0 < b0+uintptr(len(b))*4 && b0 < a0+uintptr(len(a))*4
}
