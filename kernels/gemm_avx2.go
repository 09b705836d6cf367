package kernels

//go:generate sh -c "cd _gen && go run ./avx2 -out ../gemm_avx2_amd64.s -stubs ../gemm_avx2_stub_amd64.go -pkg kernels"

// runAVX2U8S8 drives the exact AVX2 micro-kernels (gemmAVX2_2x16 and its
// one-row twin) over a PackedS8 with NR = 16: whole groups of 4 in assembly,
// the K%4 tail in Go, and the epilogue of each 2x16 tile while it is in L1:
// vnniEpilogueGo (the float32 steps of the VNNI kernels' epilogue, one call
// per tile), but with GELU the reference's float64 GELU per element
// (storeEpilogue), which in Go is the faster of the two. Each task takes a
// range of panels and runs every row pair against one panel before the
// next, so the panel (16 x K bytes) stays in L1.
func runAVX2U8S8(g *GEMMU8S8) error {
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
	e := newVNNIEp(g)
	if e.flags&(vnniGELU|vnniGELU8) != 0 {
		e.goPath = true
	}
	groups := k / 4
	panels := g.B.Np / 16
	tasks := min(panels, max(g.Threads, 1))
	Parallel(g.Threads, tasks, func(t int) {
		var tile [2 * 16]int32
		for p := panels * t / tasks; p < panels*(t+1)/tasks; p++ {
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
					clear(tile[:])
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
				if o := g.Out.S32; o != nil {
					for r := 0; r < rows; r++ {
						copy(o[(i0+r)*g.Out.Ldc+j0:(i0+r)*g.Out.Ldc+j0+cols], tile[r*16:r*16+cols])
					}
					continue
				}
				vnniTileEpilogue(g, &e, vnniEpilogueGo, tile[:], 16, i0, j0, rows, cols)
			}
		}
	})
	return nil
}
