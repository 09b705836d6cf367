package kernels

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/int8bert/int8bert/cpu"
)

// vnniScoresMicros are the scores kernels by row count (index 1..6).
var vnniScoresMicros = [...]func(a *uint8, lda int, b *int8, k int, c *float32, ldc int, n int, colSum *int32, zp int32, rowScale *float32, colScale *float32){
	nil, vnniScores_1x64, vnniScores_2x64, vnniScores_3x64, vnniScores_4x64, vnniScores_5x64, vnniScores_6x64,
}

// ScoresU8S8 is the kernel of INT8 attention's Q Kᵀ (docs/DESIGN.md
// section 3.10): each call of vnniScores_<mr>x64 computes up to 6 rows
// over every key panel, with the epilogue of every u8s8 kernel, bit for
// bit. It takes only calls of the scores form (Takes): B packed with
// NR = 64, K a multiple of 4, the epilogue exactly a zero point with its
// column sums, a scale per column and optionally one per row (INT8
// attention leaves Q's to the softmax where nothing is added to the
// scores), f32 out, one thread;
// RunU8S8 refuses any other (ErrShape). A candidate of attention's
// products (AttentionU8S8Kernels), not of the linears.
var ScoresU8S8 = &Kernel{
	Name: "vnniScores_6x64", ISA: cpu.ISAAVX512VNNI, MR: 6, NR: 64, KB: 4,
	Available: vnniAvailable,
	Accepts:   func(m, n, k int) bool { return k%4 == 0 },
	Takes:     scoresForm,
	RunU8S8:   runScoresKernel,
}

// runScoresKernel is ScoresU8S8's RunU8S8.
func runScoresKernel(g *GEMMU8S8) error {
	took, err := runScoresU8S8(g)
	if err == nil && !took {
		err = fmt.Errorf("kernels: vnniScores_6x64: not a call of the scores form, or no VNNI assembly here: %w", ErrShape)
	}
	return err
}

// runScoresU8S8 computes g when it is of the scores form (scoresForm) and
// the CPU runs the VNNI assembly. It reports false (and computes nothing)
// otherwise.
func runScoresU8S8(g *GEMMU8S8) (bool, error) {
	if !vnniAsm || !vnniAvailable(cpu.X86) || !scoresForm(g) {
		return false, nil
	}
	if err := g.Check(); err != nil {
		return true, err
	}
	runScores(g, vnniScoresMicros[:])
	return true, nil
}

// scoresForm reports whether g is of the form ScoresU8S8 takes.
func scoresForm(g *GEMMU8S8) bool {
	ep := g.Ep
	if g.B == nil || g.B.NR != 64 || g.K%4 != 0 || g.Threads > 1 || ep == nil || g.Out.F32 == nil {
		return false
	}
	return ep.ZeroPoint != 0 && ep.ColSum != nil && ep.ColScale != nil &&
		ep.ActScale == 0 && ep.Bias == nil && ep.Act == ActNone && ep.Residual == nil &&
		ep.OutScale == 0 && ep.OutZeroPoint == 0
}

// runScores runs the scores kernels (or their twins, micros) over g's
// rows, 6 at a time.
func runScores(g *GEMMU8S8, micros []func(a *uint8, lda int, b *int8, k int, c *float32, ldc int, n int, colSum *int32, zp int32, rowScale *float32, colScale *float32)) {
	m, n, k := g.M, g.N, g.K
	if m == 0 || n == 0 {
		return
	}
	ep := g.Ep
	var a *uint8
	var b *int8
	if k > 0 {
		b = &g.B.Data[0]
	}
	for i := 0; i < m; i += 6 {
		rows := min(6, m-i)
		if k > 0 {
			a = &g.A[i*g.Lda]
		}
		var rs *float32 // nil: no row scale (INT8 attention folds Q's into the softmax)
		if ep.RowScale != nil {
			rs = &ep.RowScale[i]
		}
		micros[rows](a, g.Lda, b, k, &g.Out.F32[i*g.Out.Ldc], g.Out.Ldc, n, &ep.ColSum[0], ep.ZeroPoint, rs, &ep.ColScale[0])
	}
}

// vnniScoresGo is the Go twin of vnniScores_<mr>x64: for each 64-column
// panel, vnniMicroGo's sums and then the epilogue's float32 steps in the
// assembly's order.
func vnniScoresGo(mr int, a *uint8, lda int, b *int8, k int, c *float32, ldc int, n int, colSum *int32, zp int32, rowScale *float32, colScale *float32) {
	const nr = 64
	cs := unsafe.Slice(colSum, n)
	ks := unsafe.Slice(colScale, n)
	var rs []float32 // nil: no row scale
	if rowScale != nil {
		rs = unsafe.Slice(rowScale, mr)
	}
	out := unsafe.Slice(c, (mr-1)*ldc+n)
	var t [6 * nr]int32
	for p := 0; p*nr < n; p++ {
		cols := min(nr, n-p*nr)
		var bp *int8
		if b != nil {
			bp = (*int8)(unsafe.Add(unsafe.Pointer(b), p*nr*k))
		}
		if k == 0 {
			clear(t[:])
		} else {
			vnniMicroGo(mr, nr, a, lda, bp, k, &t[0], nr, math.MaxUint64, 0)
		}
		for i := 0; i < mr; i++ {
			for jj := 0; jj < cols; jj++ {
				j := p*nr + jj
				s := float32(t[i*nr+jj] - zp*cs[j])
				if rs != nil {
					s = float32(s * rs[i])
				}
				out[i*ldc+j] = s * ks[j]
			}
		}
	}
}
