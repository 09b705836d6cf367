package kernels

import "unsafe"

// amxConfig is the AMX tile configuration of gemmAMX_32x32x64: palette 1,
// tiles 0-3 the 16x16 int32 accumulators, 4-5 the A tiles (16 rows x 64
// bytes), 6-7 the B tiles (16 k-groups x 16 columns x 4 bytes); every tile
// is 16 rows of 64 bytes.
var amxConfig = func() (c [64]byte) {
	c[0] = 1 // palette
	for t := 0; t < 8; t++ {
		c[16+2*t] = 64 // colsb, little-endian uint16
		c[48+t] = 16   // rows
	}
	return c
}()

// amxTileFunc is the shape of the AMX tile kernel, so the driver can run
// with its Go twin (amxTileGo) on CPUs without AMX.
type amxTileFunc func(a *uint8, lda int, b0, b1 *int8, kblocks int, c *int32, ldc int)

// runAMXU8S8 drives a 32x32 AMX tile kernel over weights packed with
// NR = 16 and K a multiple of 64. Row blocks shorter than 32 and a last odd
// panel are computed from zero-padded copies; the epilogue runs on each
// 32x32 tile while it is in L1.
func runAMXU8S8(g *GEMMU8S8, tile amxTileFunc) error {
	if err := g.Check(); err != nil {
		return err
	}
	if g.B.NR != 16 {
		return errPanel(g.B.NR, 16)
	}
	m, n, k := g.M, g.N, g.K
	if m == 0 || n == 0 {
		return nil
	}
	if k%64 != 0 {
		return errPanel(k, 64) // Accepts excludes this; say so if called anyway
	}
	kb := k / 64
	panels := g.B.Np / 16
	pairs := (panels + 1) / 2
	rowBlocks := (m + 31) / 32
	zeroPanel := make([]int8, 16*g.B.Kp)
	Parallel(g.Threads, rowBlocks*pairs, func(t int) {
		rb, pp := t%rowBlocks, t/rowBlocks
		i0 := rb * 32
		rows := min(32, m-i0)
		a, lda := g.A[i0*g.Lda:], g.Lda
		if rows < 32 {
			pad := make([]uint8, 32*k)
			for r := 0; r < rows; r++ {
				copy(pad[r*k:(r+1)*k], g.A[(i0+r)*g.Lda:])
			}
			a, lda = pad, k
		}
		b0 := g.B.Data[2*pp*16*g.B.Kp:]
		b1 := zeroPanel
		if 2*pp+1 < panels {
			b1 = g.B.Data[(2*pp+1)*16*g.B.Kp:]
		}
		var c [32 * 32]int32
		tile(&a[0], lda, &b0[0], &b1[0], kb, &c[0], 32)
		j0 := 2 * pp * 16
		for r := 0; r < rows; r++ {
			for j := 0; j < min(32, n-j0); j++ {
				storeEpilogue(g, i0+r, j0+j, c[r*32+j])
			}
		}
	})
	return nil
}

// amxTileGo is the Go twin of amxTile32x32.
func amxTileGo(a *uint8, lda int, b0, b1 *int8, kblocks int, c *int32, ldc int) {
	k := 64 * kblocks
	as := unsafe.Slice(a, 31*lda+k)
	p0 := unsafe.Slice(b0, 16*k)
	p1 := unsafe.Slice(b1, 16*k)
	cs := unsafe.Slice(c, 31*ldc+32)
	for i := 0; i < 32; i++ {
		for j := 0; j < 32; j++ {
			p, jj := p0, j
			if j >= 16 {
				p, jj = p1, j-16
			}
			var s int32
			for q := 0; q < k; q++ {
				s += int32(as[i*lda+q]) * int32(p[(q/4)*64+jj*4+q%4])
			}
			cs[i*ldc+j] = s
		}
	}
}
