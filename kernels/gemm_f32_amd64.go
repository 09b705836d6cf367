//go:build amd64 && gc && !purego && !noasm

package kernels

import (
	"fmt"
	"sync"

	"github.com/int8bert/int8bert/cpu"
)

// f32Kern is one generated micro-kernel (see gemm_f32_avx512_stub_amd64.go).
type f32Kern func(kc int, a *float32, lda int, b *float32, c *float32, ldc int, mask uint64, accum int, pf *float32, res *float32, ldr int)

// f32Driver is the tile driver of one register tile: its kernels for 1...mr
// rows and the blocking, packing and epilogue around them. avx2
// marks the AVX2 + FMA3 tile (gemmF32a*, its epilogue epiF32a); the others
// are AVX-512 (epiF32).
type f32Driver struct {
	mr, nr   int
	bcastReg bool
	kern     []f32Kern
	avx2     bool
	// tune, when set, changes the plan of each task (tests: small K
	// slabs, the A copy and the prefetch on and off); the drivers of
	// F32Kernels have none.
	tune func(f32Plan) f32Plan
}

// f32AVX2Driver is the AVX2 + FMA3 tile (_gen/gemm_f32_avx2), for CPUs without
// AVX-512.
var f32AVX2Driver = f32Driver{mr: 6, nr: 16, avx2: true,
	kern: []f32Kern{nil, gemmF32a1x16, gemmF32a2x16, gemmF32a3x16, gemmF32a4x16, gemmF32a5x16, gemmF32a6x16}}

func init() {
	for i := range f32Drivers {
		f := &f32Drivers[i]
		f32Asm = append(f32Asm, &KernelF32{
			Name: fmt.Sprintf("gemmF32_%dx%d", f.mr, f.nr), ISA: cpu.ISAAVX512, MR: f.mr, NR: f.nr,
			Available: f32Available,
			Accepts:   func(m, n, k int) bool { return m >= 0 && n >= 0 && k >= 0 },
			Run:       f.run,
		})
	}
	f := &f32AVX2Driver
	f32Asm = append(f32Asm, &KernelF32{
		Name: fmt.Sprintf("gemmF32avx2_%dx%d", f.mr, f.nr), ISA: cpu.ISAAVX2, MR: f.mr, NR: f.nr,
		Available: f32AVX2Available,
		Accepts:   func(m, n, k int) bool { return m >= 0 && n >= 0 && k >= 0 },
		Run:       f.run,
	})
}

func f32Available(f cpu.Features) bool { return f.AVX512F && f.AVX512BW }

// f32AVX2Available reports whether the AVX2 tile runs: AVX2 and FMA3.
func f32AVX2Available(f cpu.Features) bool { return f.AVX2 && f.FMA }

func (f *f32Driver) available(c cpu.Features) bool {
	if f.avx2 {
		return f32AVX2Available(c)
	}
	return f32Available(c)
}

// f32DefaultL2 is the L2 size assumed when CPUID reports none.
const f32DefaultL2 = 1 << 20

// f32MinKC is the shortest K slab blocking picks. A slab sized for L2 with
// BERT-large's 256 rows (512 on a 1 MiB L2) costs a second pass over a C of
// up to 4 MiB, which comes back from L3; A's rows stream in order and the
// hardware prefetcher keeps up with them from L3, so a longer slab wins
// (measured against the L2-sized slab when the blocking was settled).
const f32MinKC = 1024

// f32Plan is how a task of the driver walks its block: kc, the longest K
// slab (a multiple of 4), mc, the A rows of a block, copyA, whether A's
// blocks are copied to a padded stride, and prefetch, whether the row
// tiles prefetch the next slab of B. A task takes the plan of
// f32Driver.plan, changed by the driver's tune if it has one.
type f32Plan struct {
	kc, mc   int
	copyA    bool
	prefetch bool
}

// plan returns the blocking of a task of rows rows of A (stride lda) over
// K: the A block (mc x kc) and two panel slabs of B (kc x NR, the one in
// use and the one being prefetched) fill L2, but slabs are at least
// f32MinKC long. Each slab costs a pass over C, so slabs are as long as
// that allows, and balanced. A's blocks are copied when its own stride
// makes the rows of a tile fight over a few L1 sets (f32Aliased).
func (f *f32Driver) plan(rows, k, lda int) f32Plan {
	l2 := cpu.X86.L2
	if l2 <= 0 {
		l2 = f32DefaultL2
	}
	mc := min(rows, 512)
	kmax := max(f32MinKC, l2/(4*(mc+2*f.nr)))
	return f32Plan{kc: f32SlabLen(k, kmax), mc: mc, copyA: f32Aliased(lda, f.mr), prefetch: true}
}

// f32SlabLen returns the length of K slabs at most kmax long (rounded up to
// 4) that split k into equal parts.
func f32SlabLen(k, kmax int) int {
	slabs := (k + kmax - 1) / kmax
	return ((k+slabs-1)/slabs + 3) &^ 3
}

// f32PFLines must match pfLines of the generator (_gen/gemm_f32_avx512).
const f32PFLines = 2

// f32Aliased reports whether mr rows at stride lda floats put more than 6
// lines on one set of a 64-set L1 (4 KiB way size).
func f32Aliased(lda, mr int) bool {
	var seen [64]bool
	d := 0
	for r := 0; r < min(mr, 64); r++ {
		s := (r * lda * 4 / 64) % 64
		if !seen[s] {
			seen[s] = true
			d++
		}
	}
	return (mr+d-1)/d > 6
}

// f32Scratch holds the per-task copies of A blocks.
var f32Scratch sync.Pool

func (f *f32Driver) run(g *GEMMF32) error {
	t := tile[*GEMMF32]{op: "f32", mr: f.mr, nr: f.nr, need: "AVX512F/AVX512BW", generic: runGenericF32}
	if f.avx2 {
		t.need = "AVX2/FMA3"
	}
	t.ok = f.available(cpu.X86)
	return runTiles(f, t, g)
}

// block computes rows i0...i1-1 and panels p0...p1-1 of C.
func (f *f32Driver) block(g *GEMMF32, i0, i1, p0, p1 int) {
	pl := f.plan(i1-i0, g.K, g.Lda)
	if f.tune != nil {
		pl = f.tune(pl) // by value: a pointer would move pl to the heap
	}
	K, nr := g.K, f.nr
	KC, MC := pl.kc, min(pl.mc, i1-i0)
	ep := g.Ep
	var ldr int
	act, actGo := f32EpiAct(ep)
	if ep != nil {
		ldr = ep.ldr(g.N)
	}
	// An A block is copied into a scratch buffer with a padded stride when
	// the plan says (A's stride a multiple of 4 KiB: K = 1024, 3072, 4096).
	// The scratch is taken only then: a pool emptied by a GC would
	// otherwise cost an allocation per call.
	copyA := pl.copyA
	ldp := (min(KC, K)+15)&^15 + 16
	var buf []float32
	if copyA {
		need := min(MC, i1-i0)*ldp + 16
		bufp, _ := f32Scratch.Get().(*[]float32)
		if bufp == nil || cap(*bufp) < need {
			b := make([]float32, need)
			bufp = &b
		}
		buf = (*bufp)[:need]
		defer f32Scratch.Put(bufp)
	}
	for pc := 0; pc < K; pc += KC {
		kc := min(KC, K-pc)
		accum, last := slabFlags(pc, kc, K)
		for ic := i0; ic < i1; ic += MC {
			mc := min(MC, i1-ic)
			if copyA {
				for r := 0; r < mc; r++ {
					copy(buf[r*ldp:r*ldp+kc], g.A[(ic+r)*g.Lda+pc:])
				}
			}
			// Balanced row tiles of at most mr rows.
			tiles := (mc + f.mr - 1) / f.mr
			for p := p0; p < p1; p++ {
				j, nv, mask := panelCols(p, nr, g.N)
				bp := &g.B.Data[p*nr*K+pc*nr]
				// The row tiles share the prefetch of the slab the next
				// panel (or the next K slab) reads, f32PFLines cache lines
				// per 4 k steps each.
				var next []float32
				switch {
				case !pl.prefetch:
				case p+1 < p1:
					next = g.B.Data[(p+1)*nr*K+pc*nr:][:kc*nr]
				case pc+kc < K:
					kn := min(kc, K-pc-kc)
					next = g.B.Data[p0*nr*K+(pc+kc)*nr:][:kn*nr]
				}
				pfStep := kc / 4 * f32PFLines * 16 // floats per kernel call
				ir := 0
				for t := 0; t < tiles; t++ {
					mr := tileRows(mc, tiles, t)
					c := &g.C[(ic+ir)*g.Ldc+j]
					var pf *float32
					if off := t * pfStep; off < len(next) {
						pf = &next[off]
					}
					var res *float32
					if last && ep != nil && ep.Residual != nil {
						res = &ep.Residual[(ic+ir)*ldr+j]
					}
					if copyA {
						f.kern[mr](kc, &buf[ir*ldp], ldp, bp, c, g.Ldc, mask, accum, pf, res, ldr)
					} else {
						f.kern[mr](kc, &g.A[(ic+ir)*g.Lda+pc], g.Lda, bp, c, g.Ldc, mask, accum, pf, res, ldr)
					}
					if last && ep != nil {
						f.epilogue(g, ic+ir, mr, j, nv, act, actGo)
					}
					ir += mr
				}
			}
		}
	}
}

// f32EpiAct returns the act code of epiF32 and epiF32a for ep's
// activation (1 the erfc GELU, 2 ReLU, 3 the rational GELU, 0 none), and
// whether the activation runs in Go instead (the tanh GELU).
func f32EpiAct(ep *Epilogue) (act int, actGo bool) {
	if ep == nil {
		return 0, false
	}
	switch ep.Act {
	case ActGELU:
		act = 3 // the rational GELU (geluQ8F32)
		if ep.PreciseGELU {
			act = 1
		}
	case ActReLU:
		act = 2
	case ActGELUTanh:
		actGo = true
	}
	return act, actGo
}

// epilogue applies g.Ep to the tile of rows i...i+mr-1, columns j...j+nv-1
// while it is in L1: in assembly (epiF32 of the AVX-512 tiles, masked
// tail included; epiF32a of the AVX2 tile on whole groups of 16 columns),
// the rest in Go (f32EpilogueGo): the tanh GELU, and on the AVX2 tile
// the erfc GELU and the columns past the last whole 16.
func (f *f32Driver) epilogue(g *GEMMF32, i, mr, j, nv, act int, actGo bool) {
	ep := g.Ep
	var bias, res *float32
	ldr := ep.ldr(g.N)
	if ep.Bias != nil {
		bias = &ep.Bias[j]
	}
	if ep.Residual != nil {
		res = &ep.Residual[i*ldr+j]
	}
	switch {
	case bias == nil && res == nil && act == 0 && !actGo:
		return
	case actGo:
		f32EpilogueGo(g, i, mr, j, j+nv, act, actGo)
	case !f.avx2:
		epiF32(mr, nv/16, 1<<uint(nv%16)-1, &g.C[i*g.Ldc+j], g.Ldc, bias, res, ldr, act)
	case act == 1:
		f32EpilogueGo(g, i, mr, j, j+nv, act, actGo)
	default:
		whole := nv / 16 * 16
		if whole > 0 {
			epiF32a(mr, whole/16, &g.C[i*g.Ldc+j], g.Ldc, bias, res, ldr, act)
		}
		if whole < nv {
			f32EpilogueGo(g, i, mr, j+whole, j+nv, act, actGo)
		}
	}
}

// f32EpilogueGo is the epilogue of rows i...i+mr-1, columns j0...j1-1 in Go:
// the rational GELU and ReLU as the assembly computes them (float32), the
// erfc and tanh GELU in float64 with the residual added before rounding.
func f32EpilogueGo(g *GEMMF32, i, mr, j0, j1, act int, actGo bool) {
	ep := g.Ep
	ldr := ep.ldr(g.N)
	for r := i; r < i+mr; r++ {
		row := g.C[r*g.Ldc+j0 : r*g.Ldc+j1]
		for jj := range row {
			j := j0 + jj
			y := row[jj]
			if ep.Bias != nil {
				y += ep.Bias[j]
			}
			switch {
			case actGo || act == 1:
				v := GELU(float64(y))
				if actGo {
					v = GELUTanh(float64(y))
				}
				if ep.Residual != nil {
					v += float64(ep.Residual[r*ldr+j])
				}
				row[jj] = float32(v)
				continue
			case act == 2:
				if y < 0 {
					y = 0
				}
			case act == 3:
				y = geluQ8F32(y)
			}
			if ep.Residual != nil {
				y += ep.Residual[r*ldr+j]
			}
			row[jj] = y
		}
	}
}
