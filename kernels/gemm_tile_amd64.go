//go:build amd64 && gc && !purego && !noasm

package kernels

import (
	"fmt"
	"math"

	"github.com/int8bert/int8bert/cpu"
)

// This file is the half of a tile driver that the FP32 and BF16 drivers
// (f32Driver, bf16Driver) share: the checks of a call and its split into
// tasks. What differs, the blocking of a task and the micro-kernels it
// calls, is each driver's block.

// tileCall is a call of a tile driver: a GEMMF32 or a GEMMBF16.
type tileCall interface {
	Check() error
	// tileShape returns M, N, K, the packed weights' NR and the threads.
	tileShape() (m, n, k, nr, threads int)
}

func (g *GEMMF32) tileShape() (m, n, k, nr, threads int) {
	return g.M, g.N, g.K, g.B.NR, g.Threads
}

func (g *GEMMBF16) tileShape() (m, n, k, nr, threads int) {
	return g.M, g.N, g.K, g.B.NR, g.Threads
}

// tiler is a tile driver over calls G: block computes rows i0...i1-1 and
// panels p0...p1-1 of C.
type tiler[G any] interface {
	block(g G, i0, i1, p0, p1 int)
}

// tile describes a driver's register tile for runTiles.
type tile[G any] struct {
	op     string // the operation in errors: "f32", "bf16"
	mr, nr int
	// need names the CPU features the tile runs on, ok whether this CPU
	// has them.
	need string
	ok   bool
	// generic computes a call of no k (nothing for the kernels to sum).
	generic func(g G) error
}

// runTiles checks g and computes it with d: it splits N (each task streams
// its own weights) and, when there are too few panels for the threads, M
// as well.
func runTiles[G tileCall, D tiler[G]](d D, t tile[G], g G) error {
	if err := g.Check(); err != nil {
		return err
	}
	m, n, k, nr, threads := g.tileShape()
	if nr != t.nr {
		return fmt.Errorf("kernels: gemm %s %dx%d: weights packed with nr=%d: %w", t.op, t.mr, t.nr, nr, ErrShape)
	}
	if !t.ok {
		return fmt.Errorf("kernels: gemm %s %dx%d: CPU lacks %s (%s)", t.op, t.mr, t.nr, t.need, cpu.X86)
	}
	if m == 0 || n == 0 {
		return nil
	}
	if k == 0 {
		return t.generic(g)
	}
	threads = max(threads, 1)
	panels := (n + t.nr - 1) / t.nr
	nt := min(threads, panels)
	mt := 1
	if nt < threads {
		mt = min(threads/nt, max(1, m/(2*t.mr)))
	}
	if nt*mt == 1 {
		// One task runs here, without the closure Parallel takes: that
		// closure escapes to the heap, and attention's per-head products
		// are hundreds of thousands of one-thread calls per large call.
		d.block(g, 0, m, 0, panels)
		return nil
	}
	Parallel(threads, nt*mt, func(t int) {
		ti, tj := t/nt, t%nt
		i0, i1 := m*ti/mt, m*(ti+1)/mt
		p0, p1 := panels*tj/nt, panels*(tj+1)/nt
		d.block(g, i0, i1, p0, p1)
	})
	return nil
}

// panelCols returns the first column j of panel p (of nr columns) of an
// n-column C, its nv columns (nr but in the last panel) and their mask
// (all 64 bits when nv >= 64).
func panelCols(p, nr, n int) (j, nv int, mask uint64) {
	j = p * nr
	nv = min(nr, n-j)
	mask = math.MaxUint64
	if nv < 64 {
		mask = 1<<uint(nv) - 1
	}
	return j, nv, mask
}

// tileRows is the height of row tile t of the tiles of a block of mc rows:
// balanced tiles, the first mc%tiles one row taller.
func tileRows(mc, tiles, t int) int {
	if t < mc%tiles {
		return mc/tiles + 1
	}
	return mc / tiles
}

// slabFlags returns, for the K slab pc...pc+kc-1 of K, accum (1: the
// kernels add to C, every slab but the first) and last (the epilogue runs
// after it).
func slabFlags(pc, kc, k int) (accum int, last bool) {
	if pc > 0 {
		accum = 1
	}
	return accum, pc+kc >= k
}
