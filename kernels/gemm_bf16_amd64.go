//go:build amd64 && gc && !purego && !noasm

package kernels

import (
	"fmt"
	"sync"

	"github.com/int8bert/int8bert/cpu"
)

// bf16Kern is one generated micro-kernel (see gemm_bf16_avx512_stub_amd64.go).
type bf16Kern func(kp int, a *uint16, lda int, b *uint16, c *float32, ldc int, mask uint64, accum int)

// bf16Driver is the tile driver of one AVX512-BF16 register tile: its
// kernels for 1...mr rows and the blocking, A packing and epilogue around
// them (docs/DESIGN.md 4.11).
type bf16Driver struct {
	mr, nr int
	kern   []bf16Kern
}

func init() {
	if cpu.X86.AVX512F && cpu.X86.AVX512BW {
		bf16Rows = func(dst []uint16, src []float32) {
			if len(src) > 0 {
				cvtBF16Row(len(src), &src[0], &dst[:len(src)][0])
			}
		}
	}
	for i := range bf16Drivers {
		f := &bf16Drivers[i]
		bf16Asm = append(bf16Asm, &KernelBF16{
			Name: fmt.Sprintf("gemmBF16_%dx%d", f.mr, f.nr), ISA: cpu.ISAAVX512BF16, MR: f.mr, NR: f.nr, KStep: 2,
			Available: bf16Available,
			Accepts:   func(m, n, k int) bool { return m >= 0 && n >= 0 && k >= 0 },
			Run:       f.run,
		})
	}
}

// bf16Available reports whether the AVX512-BF16 tiles run: AVX512F and
// AVX512BW (the row packer and the FP32 epilogue) and AVX512-BF16.
func bf16Available(f cpu.Features) bool { return f.AVX512F && f.AVX512BW && f.AVX512BF16 }

// bf16KC is the longest K slab (in k, even): one summation chain runs
// across slabs (the kernels start from C), so slabs only bound the A
// block and the B slab a task keeps in L2.
const bf16KC = 4096

// bf16MC bounds the rows of an A block: mc x kc bf16 values.
func bf16MC(kc int) int {
	l2 := cpu.X86.L2
	if l2 <= 0 {
		l2 = f32DefaultL2
	}
	return max(16, min(512, l2/2/(2*kc)))
}

// bf16Scratch holds the per-task bf16 copies of A blocks.
var bf16Scratch sync.Pool

func (f *bf16Driver) run(g *GEMMBF16) error {
	return runTiles(f, tile[*GEMMBF16]{op: "bf16", mr: f.mr, nr: f.nr, need: "AVX512F/AVX512BW/AVX512BF16",
		ok: bf16Available(cpu.X86), generic: runGenericBF16}, g)
}

// block computes rows i0...i1-1 and panels p0...p1-1 of C: per K slab and
// block of rows, the rows' slab of A is rounded to bf16 pairs once
// (cvtBF16Row) into a scratch block, which every panel's row tiles read.
func (f *bf16Driver) block(g *GEMMBF16, i0, i1, p0, p1 int) {
	K, nr, kpAll := g.K, f.nr, g.B.KP()
	slabs := (K + bf16KC - 1) / bf16KC
	KC := ((K+slabs-1)/slabs + 1) &^ 1
	MC := bf16MC(KC)
	// The stride of the bf16 block: KC rounded up to 32 (a cache line),
	// plus one line, so that the rows of a tile do not share L1 sets.
	ldp := (min(KC, kpAll)+31)&^31 + 32
	need := min(MC, i1-i0) * ldp
	bufp, _ := bf16Scratch.Get().(*[]uint16)
	if bufp == nil || cap(*bufp) < need {
		b := make([]uint16, need)
		bufp = &b
	}
	buf := (*bufp)[:need]
	defer bf16Scratch.Put(bufp)
	act, actGo := f32EpiAct(g.Ep)
	epi := GEMMF32{M: g.M, N: g.N, K: g.K, Ep: g.Ep, C: g.C, Ldc: g.Ldc}
	var avx512 f32Driver // the AVX-512 FP32 epilogue (epiF32)
	for pc := 0; pc < K; pc += KC {
		kc := min(KC, K-pc)
		kp := (kc + 1) / 2
		accum, last := slabFlags(pc, kc, K)
		for ic := i0; ic < i1; ic += MC {
			mc := min(MC, i1-ic)
			for r := 0; r < mc; r++ {
				row := g.A[(ic+r)*g.Lda+pc : (ic+r)*g.Lda+pc+kc]
				cvtBF16Row(kc, &row[0], &buf[r*ldp])
				if kc&1 != 0 {
					buf[r*ldp+kc] = 0
				}
			}
			tiles := (mc + f.mr - 1) / f.mr
			for p := p0; p < p1; p++ {
				j, nv, mask := panelCols(p, nr, g.N)
				bp := &g.B.Data[p*nr*kpAll+pc*nr]
				ir := 0
				for t := 0; t < tiles; t++ {
					mr := tileRows(mc, tiles, t)
					f.kern[mr](kp, &buf[ir*ldp], ldp, bp, &g.C[(ic+ir)*g.Ldc+j], g.Ldc, mask, accum)
					if last && g.Ep != nil {
						avx512.epilogue(&epi, ic+ir, mr, j, nv, act, actGo)
					}
					ir += mr
				}
			}
		}
	}
}
