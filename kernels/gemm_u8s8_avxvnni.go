package kernels

// avxvnniMicros are gemmAVXVNNI_<MR>x16 by MR (1 ... 6).
var avxvnniMicros = [...]func(a *uint8, lda int, b *int8, kgroups int, c *int32, ldc int){
	nil, gemmAVXVNNI_1x16, gemmAVXVNNI_2x16, gemmAVXVNNI_3x16, gemmAVXVNNI_4x16, gemmAVXVNNI_5x16, gemmAVXVNNI_6x16,
}

// runAVXVNNIU8S8 drives gemmAVXVNNI_6x16 (and its 1- to 5-row twins) over
// a PackedS8 with NR = 16: the VEX VPDPBUSD reads the packed bytes as they
// are, so unlike runAVX2WideU8S8 nothing is widened. The whole groups of 4
// k run in one micro-kernel call per tile; a K%4 tail runs as one more
// group over the rows' last bytes copied into a zero-padded block (the
// panel is zero beyond K). Each task takes a range of panels and runs
// every 6 rows against one panel before the next, so the panel (16 x Kp
// bytes) stays in L1 or L2; the epilogue of each tile runs while it is in
// L1 (avx2TileOut, shared with the AVX2 drivers).
func runAVXVNNIU8S8(g *GEMMU8S8) error {
	if ok, err := checkPanels16(g); !ok {
		return err
	}
	runPanels16(g, avxvnniWork{})
	return nil
}

// avxvnniWork is runAVXVNNIU8S8's panelWork: every 6 rows against a
// panel before the next.
type avxvnniWork struct{}

func (avxvnniWork) panels(g *GEMMU8S8, st *u8s8Scratch, p0, p1 int) {
	m, n, k := g.M, g.N, g.K
	groups, rem := k/4, k%4
	tile, tail, atail := st.tile[:6*16], st.tail[:6*16], st.atail[:]
	for p := p0; p < p1; p++ {
		panel := g.B.Data[p*16*g.B.Kp:]
		j0 := p * 16
		cols := min(16, n-j0)
		for i0 := 0; i0 < m; i0 += 6 {
			rows := min(6, m-i0)
			micro := avxvnniMicros[rows]
			if groups > 0 {
				micro(&g.A[i0*g.Lda], g.Lda, &panel[0], groups, &tile[0], 16)
			} else {
				clear(tile)
			}
			if rem > 0 {
				for r := 0; r < rows; r++ {
					row := g.A[(i0+r)*g.Lda+groups*4 : (i0+r)*g.Lda+k]
					copy(atail[r*4:r*4+4], row)
					clear(atail[r*4+rem : r*4+4])
				}
				micro(&atail[0], 4, &panel[groups*64], 1, &tail[0], 16)
				for i := range rows * 16 {
					tile[i] += tail[i]
				}
			}
			avx2TileOut(g, &st.x, tile, i0, j0, rows, cols)
		}
	}
}
