package kernels

import "testing"

// TestVNNISplit checks runVNNI's cut of BERT-sized products: the blocks
// tile the columns in whole panels, none holds more than a quarter of L2
// of weights, and with several threads the tasks come in a multiple of
// the threads with panel counts within one of each other (the N split
// first: BERT-base's QKV used to be 7 blocks on 2 threads).
func TestVNNISplit(t *testing.T) {
	for _, nr := range []int{16, 32, 48, 64} {
		for _, mnk := range [][3]int{{128, 2304, 768}, {128, 768, 768}, {128, 3072, 768}, {128, 768, 3072},
			{1, 768, 768}, {13, 1024, 4096}, {512, 3072, 1024}, {128, 64, 128}} {
			m, n, k := mnk[0], mnk[1], mnk[2]
			for _, threads := range []int{1, 2, 3, 4, 16} {
				s := vnniSplitFor(m, n, 8, nr, k, threads)
				per := max(1, vnniBlockN(nr, k)/nr)
				end, lo, hi := 0, s.panels, 0
				for b := range s.nBlocks {
					j0, j1 := s.cols(b, n)
					if j0 != end || j0%nr != 0 || j1 <= j0 {
						t.Fatalf("m=%d n=%d k=%d nr=%d threads %d: block %d is [%d, %d) after %d", m, n, k, nr, threads, b, j0, j1, end)
					}
					p := (j1 - j0 + nr - 1) / nr
					if p > per {
						t.Errorf("m=%d n=%d k=%d nr=%d threads %d: block %d holds %d panels > %d", m, n, k, nr, threads, b, p, per)
					}
					lo, hi, end = min(lo, p), max(hi, p), j1
				}
				if end != n {
					t.Fatalf("m=%d n=%d nr=%d threads %d: blocks end at %d", m, n, nr, threads, end)
				}
				if hi-lo > 1 {
					t.Errorf("m=%d n=%d nr=%d threads %d: blocks of %d to %d panels", m, n, nr, threads, lo, hi)
				}
				if s.mChunks < 1 || s.rowsPer%8 != 0 || (s.mChunks-1)*s.rowsPer >= m {
					t.Errorf("m=%d threads %d: %d chunks of %d rows", m, threads, s.mChunks, s.rowsPer)
				}
				if tasks := s.nBlocks * s.mChunks; threads > 1 && s.nBlocks < s.panels && tasks%threads != 0 {
					t.Errorf("m=%d n=%d nr=%d threads %d: %d tasks, not a multiple of the threads", m, n, nr, threads, tasks)
				}
			}
		}
	}
}
