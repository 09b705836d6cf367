package kernels

import (
	"sync"
	"unsafe"

	"github.com/int8bert/int8bert/cpu"
)

// runAVX2U8S8 drives the exact AVX2 micro-kernels (gemmAVX2_2x16 and its
// one-row twin) over a PackedS8 with NR = 16: whole groups of 4 in assembly,
// the K%4 tail in Go, and the epilogue of each 2x16 tile while it is in L1
// (avx2TileOut: the VNNI kernels' epilogue steps, in AVX2 assembly for full
// tiles). Each task takes a range of panels and runs every row pair against
// one panel before the next, so the panel (16 x K bytes) stays in L1.
func runAVX2U8S8(g *GEMMU8S8) error {
	if ok, err := checkPanels16(g); !ok {
		return err
	}
	runPanels16(g, avx2Work{})
	return nil
}

// checkPanels16 checks g for a driver over a PackedS8 with NR = 16; ok is
// false where there is nothing to run (err says why, or M or N is 0).
func checkPanels16(g *GEMMU8S8) (ok bool, err error) {
	if err := g.Check(); err != nil {
		return false, err
	}
	if g.B.NR != 16 {
		return false, errPanel(g.B.NR, 16)
	}
	return g.M > 0 && g.N > 0, nil
}

// panelWork is the per-panel work of a driver of runPanels16: panels
// [p0, p1) of g with one task's scratch st, whose epilogue is g's.
type panelWork interface {
	panels(g *GEMMU8S8, st *u8s8Scratch, p0, p1 int)
}

// runPanels16 is the task loop of the AVX2, int16 and AVX-VNNI drivers (g
// checked, NR = 16): up to g.Threads tasks, each a range of consecutive
// panels that w runs with a u8s8Scratch from u8s8ScratchPool. One task
// runs on the calling goroutine, without the closure Parallel takes (it
// escapes: garbage on every call, and attention makes many small ones);
// w is a value of a type parameter, not an interface, so that it is not
// boxed either.
func runPanels16[W panelWork](g *GEMMU8S8, w W) {
	panels := g.B.Np / 16
	tasks := min(panels, max(g.Threads, 1))
	if tasks <= 1 {
		panelsTask(g, w, 0, panels)
		return
	}
	Parallel(g.Threads, tasks, func(t int) {
		panelsTask(g, w, panels*t/tasks, panels*(t+1)/tasks)
	})
}

// panelsTask runs panels [p0, p1) of g through w with pooled scratch.
func panelsTask[W panelWork](g *GEMMU8S8, w W, p0, p1 int) {
	st := u8s8ScratchPool.Get().(*u8s8Scratch)
	st.x.init(g)
	w.panels(g, st, p0, p1)
	u8s8ScratchPool.Put(st)
}

// u8s8Scratch is what a task of runPanels16 needs besides C: the
// epilogue, a tile's sums and those of its K%4 tail, the tail's bytes of
// A (the int16 kernels use the sums only). The sums go to assembly through function values, so on a task's
// stack they would be allocated on every call (attention makes many small
// ones); they come from u8s8ScratchPool.
type u8s8Scratch struct {
	x          avx2Epi
	tile, tail [avx512WideRows * 16]int32
	atail      [6 * 4]uint8
}

var u8s8ScratchPool = sync.Pool{New: func() any { return new(u8s8Scratch) }}

// avx2Work is runAVX2U8S8's panelWork: every row pair against a panel
// before the next.
type avx2Work struct{}

func (avx2Work) panels(g *GEMMU8S8, st *u8s8Scratch, p0, p1 int) {
	m, n, k := g.M, g.N, g.K
	groups := k / 4
	tile := st.tile[:2*16]
	for p := p0; p < p1; p++ {
		panel := g.B.Data[p*16*g.B.Kp:]
		j0 := p * 16
		cols := min(16, n-j0)
		for i0 := 0; i0 < m; i0 += 2 {
			rows := min(2, m-i0)
			a := g.A[i0*g.Lda:]
			if groups > 0 {
				if rows == 2 {
					gemmAVX2_2x16(&a[0], g.Lda, &panel[0], groups, &tile[0], 16)
				} else {
					gemmAVX2_1x16(&a[0], g.Lda, &panel[0], groups, &tile[0], 16)
				}
			} else {
				clear(tile)
			}
			if groups*4 < k {
				for r := 0; r < rows; r++ {
					row := g.A[(i0+r)*g.Lda:]
					for c := 0; c < cols; c++ {
						acc := tile[r*16+c]
						for q := groups * 4; q < k; q++ {
							acc += int32(row[q]) * int32(panel[groups*64+c*4+q%4])
						}
						tile[r*16+c] = acc
					}
				}
			}
			avx2TileOut(g, &st.x, tile, i0, j0, rows, cols)
		}
	}
}

// avx2Epi is the epilogue of the AVX2 drivers' tiles: the operands of
// vnniEpilogueGo at C[0][0] (args) and whether full tiles go to
// avx2Epilogue16 (asm: AVX2 and FMA3, and no erfc GELU nor Go-only
// activation); the rest, and every tile otherwise, take the Go twin, whose
// bits avx2Epilogue16 shares (the VNNI kernels' too).
type avx2Epi struct {
	e    vnniEp
	args vnniEpArgs
	asm  bool
}

// init sets x to g's epilogue (x is pooled: see u8s8Scratch).
func (x *avx2Epi) init(g *GEMMU8S8) {
	*x = avx2Epi{e: newVNNIEp(g)}
	if g.Out.S32 == nil {
		x.args = vnniEpArgsFor(g, &x.e)
		x.asm = (cpu.X86.FMA || !vnniAsm) && !x.e.goPath && x.e.flags&vnniGELU == 0
	}
}

// avx2TileOut writes a rows x cols tile of sums (row stride 16) whose
// top-left element is C[i0][j0]: copied to an s32 output, else through the
// epilogue.
func avx2TileOut(g *GEMMU8S8, x *avx2Epi, tile []int32, i0, j0, rows, cols int) {
	if o := g.Out.S32; o != nil {
		for r := 0; r < rows; r++ {
			copy(o[(i0+r)*g.Out.Ldc+j0:(i0+r)*g.Out.Ldc+j0+cols], tile[r*16:r*16+cols])
		}
		return
	}
	if x.asm && cols == 16 {
		ea := x.args // at sets only the pointers
		x.args.at(&ea, i0, j0)
		avx2Epilogue16(&tile[0], rows, (*byte)(unsafe.Pointer(&ea)))
		return
	}
	vnniTileEpilogue(g, &x.e, vnniEpilogueGo, tile, 16, i0, j0, rows, cols)
}

// avx2WideMicros are gemmAVX2w_<MR>x8 by MR (1 ... 6).
var avx2WideMicros = [...]func(a *int16, lda int, b *int16, kgroups int, c *int32, ldc int){
	nil, gemmAVX2w_1x8, gemmAVX2w_2x8, gemmAVX2w_3x8, gemmAVX2w_4x8, gemmAVX2w_5x8, gemmAVX2w_6x8,
}

// avx2Wide holds the int16 scratch of runAVX2WideU8S8: A's rows, and one
// widened panel per task.
var avx2Wide = sync.Pool{New: func() any { return new([]int16) }}

func avx2WideBuf(n int) *[]int16 {
	p := avx2Wide.Get().(*[]int16)
	if cap(*p) < n {
		*p = make([]int16, n)
	}
	*p = (*p)[:n]
	return p
}

// runAVX2WideU8S8 drives gemmAVX2w_6x8 (and its 1- to 5-row twins), two
// calls per 6 x 16 tile (the panel's halves), over a PackedS8 with NR = 16:
// A's rows are widened to int16 once per call (zero-padded to Kp, so the
// K%4 tail needs no special case), and each task widens one weight panel
// at a time (16 x Kp int16: 32 KiB at K = 1024) and runs every 6 rows
// against it before the next. Exact like gemmAVX2_2x16; faster where M is
// large enough to amortize the panel's widening (the selector times both
// per shape). Outputs as runAVX2U8S8.
func runAVX2WideU8S8(g *GEMMU8S8) error {
	return runWideU8S8(g, 6, func(rows int, a *int16, kp int, w []int16, tile *[avx512WideRows * 16]int32) {
		micro := avx2WideMicros[rows]
		micro(a, kp, &w[0], kp/4, &tile[0], 16)
		micro(a, kp, &w[32], kp/4, &tile[8], 16)
	})
}

// avx512WideRows is the MR of gemmAVX512w: 12 rows x 16 columns.
const avx512WideRows = 12

// avx512WideMicros are gemmAVX512w_<MR>x16 by MR (1 ... 12).
var avx512WideMicros = [...]func(a *int16, lda int, b *int16, kgroups int, c *int32, ldc int){
	nil, gemmAVX512w_1x16, gemmAVX512w_2x16, gemmAVX512w_3x16, gemmAVX512w_4x16, gemmAVX512w_5x16,
	gemmAVX512w_6x16, gemmAVX512w_7x16, gemmAVX512w_8x16, gemmAVX512w_9x16, gemmAVX512w_10x16,
	gemmAVX512w_11x16, gemmAVX512w_12x16,
}

// runAVX512WideU8S8 is runAVX2WideU8S8 with gemmAVX512w_12x16 (and its 1-
// to 11-row twins), one call per 12 x 16 tile: the exact int16 scheme on
// zmm, for AVX-512 CPUs without VNNI (Skylake-SP, Cascade Lake with VNNI
// disabled), where the ymm kernel leaves half of each vector idle. The
// same widened operands and epilogue (avx2TileOut).
func runAVX512WideU8S8(g *GEMMU8S8) error {
	return runWideU8S8(g, avx512WideRows, func(rows int, a *int16, kp int, w []int16, tile *[avx512WideRows * 16]int32) {
		avx512WideMicros[rows](a, kp, &w[0], kp/4, &tile[0], 16)
	})
}

// runWideU8S8 is the driver of the int16 kernels: A's rows widened to
// int16 once per call (zero-padded to Kp, so the K%4 tail needs no special
// case), each task widening one weight panel at a time (16 x Kp int16: 32
// KiB at K = 1024) and running tiles of up to mr rows against it (tile:
// rows x 16 sums, row stride 16) before the next panel, each tile's
// epilogue while it is in L1.
func runWideU8S8(g *GEMMU8S8, mr int, tile wideTile) error {
	if ok, err := checkPanels16(g); !ok {
		return err
	}
	m, kp := g.M, g.B.Kp
	var a16 []int16
	if kp > 0 {
		ab := avx2WideBuf(m * kp)
		defer avx2Wide.Put(ab)
		a16 = *ab
		chunks := min(m, max(g.Threads, 1))
		if chunks <= 1 {
			widenRows(g, a16, 0, m)
		} else {
			Parallel(g.Threads, chunks, func(t int) {
				widenRows(g, a16, m*t/chunks, m*(t+1)/chunks)
			})
		}
	}
	runPanels16(g, wideWork{mr: mr, tile: tile, a16: a16})
	return nil
}

// wideTile runs one tile of rows (<= mr) x 16 of an int16 kernel: a is the
// widened rows (kp apart), w the widened panel, t the sums.
type wideTile func(rows int, a *int16, kp int, w []int16, t *[avx512WideRows * 16]int32)

// widenRows widens rows [i0, i1) of g.A into a16 (rows g.B.Kp apart,
// zero past K).
func widenRows(g *GEMMU8S8, a16 []int16, i0, i1 int) {
	k, kp := g.K, g.B.Kp
	for i := i0; i < i1; i++ {
		row, dst := g.A[i*g.Lda:i*g.Lda+k], a16[i*kp:(i+1)*kp]
		body := k &^ 15
		if body > 0 {
			widenU8AVX2(&dst[0], &row[0], body)
		}
		for q := body; q < k; q++ {
			dst[q] = int16(row[q])
		}
		clear(dst[k:])
	}
}

// wideWork is runWideU8S8's panelWork: each panel widened, then tiles of
// up to mr rows of a16 (A widened) against it.
type wideWork struct {
	mr   int
	tile wideTile
	a16  []int16
}

func (d wideWork) panels(g *GEMMU8S8, st *u8s8Scratch, p0, p1 int) {
	m, n, kp := g.M, g.N, g.B.Kp
	mr, a16 := d.mr, d.a16
	sums := &st.tile
	var w []int16
	if kp > 0 {
		wb := avx2WideBuf(16 * kp)
		defer avx2Wide.Put(wb)
		w = *wb
	}
	for p := p0; p < p1; p++ {
		j0 := p * 16
		cols := min(16, n-j0)
		if kp > 0 {
			widenS8AVX2(&w[0], &g.B.Data[p*16*kp], 16*kp)
		}
		for i0 := 0; i0 < m; i0 += mr {
			rows := min(mr, m-i0)
			if kp > 0 {
				d.tile(rows, &a16[i0*kp], kp, w, sums)
			} else {
				clear(sums[:])
			}
			avx2TileOut(g, &st.x, sums[:], i0, j0, rows, cols)
		}
	}
}
