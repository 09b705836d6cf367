package kernels

//go:generate sh -c "cd _gen && go run ./avx2 -out ../gemm_avx2_amd64.s -stubs ../gemm_avx2_stub_amd64.go -pkg kernels"

// runAVX2U8S8 drives the exact AVX2 micro-kernels (gemmAVX2_2x16 and its
// one-row twin) over a PackedS8 with NR = 16: whole groups of 4 in assembly,
// the K%4 tail and the epilogue in Go on each 2x16 tile while it is in L1.
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
	groups := k / 4
	panels := g.B.Np / 16
	// Split over rows (pairs) and panels.
	rowTasks := (m + 1) / 2
	tasks := rowTasks * panels
	Parallel(g.Threads, tasks, func(t int) {
		var tile [2 * 16]int32
		rp, p := t%rowTasks, t/rowTasks
		i0 := rp * 2
		rows := min(2, m-i0)
		panel := g.B.Data[p*16*g.B.Kp:]
		a := g.A[i0*g.Lda:]
		if groups > 0 {
			if rows == 2 {
				gemmAVX2_2x16(&a[0], g.Lda, &panel[0], groups, &tile[0], 16)
			} else {
				gemmAVX2_1x16(&a[0], g.Lda, &panel[0], groups, &tile[0], 16)
			}
		}
		j0 := p * 16
		cols := min(16, n-j0)
		for r := 0; r < rows; r++ {
			row := g.A[(i0+r)*g.Lda:]
			for c := 0; c < cols; c++ {
				acc := tile[r*16+c]
				for q := groups * 4; q < k; q++ {
					acc += int32(row[q]) * int32(panel[groups*64+c*4+q%4])
				}
				storeEpilogue(g, i0+r, j0+c, acc)
			}
		}
	})
	return nil
}
