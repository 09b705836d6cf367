package kernels

import (
	"os"
	"slices"
	"testing"
	"time"

	"github.com/int8bert/int8bert/cpu"
)

// runVNNIOldSplit is runVNNI with the split it had before vnniSplitFor
// (blocks of vnniBlockN columns whatever the threads; M cut into
// 2*threads/nBlocks chunks): TestVNNISplitAB's baseline.
func runVNNIOldSplit(g *GEMMU8S8, mr, nr int) {
	micros, fused, epi := vnniMicros[nr][:mr+1], vnniFusedMicros[[2]int{mr, nr}], vnniEpilogueFor(nr)
	m, n := g.M, g.N
	e := newVNNIEp(g)
	nc := vnniBlockN(nr, g.B.Kp)
	nBlocks := (n + nc - 1) / nc
	mTiles := (m + mr - 1) / mr
	mChunks := min(mTiles, max(1, (2*g.Threads+nBlocks-1)/nBlocks))
	rowsPer := (mTiles + mChunks - 1) / mChunks * mr
	mChunks = (m + rowsPer - 1) / rowsPer
	Parallel(g.Threads, mChunks*nBlocks, func(t int) {
		i0 := (t / nBlocks) * rowsPer
		j0 := (t % nBlocks) * nc
		vnniBlock(g, &e, mr, nr, micros, fused, epi, i0, min(m, i0+rowsPer), j0, min(n, j0+nc))
	})
}

// TestVNNISplitAB times BERT-base's four linears (seq 128) on 2 threads
// with the old split and vnniSplitFor, call by call alternately, and logs
// the min and median of each and of the per-pair ratio. A measurement,
// not a check: run it with INT8BERT_SPLIT_AB=1 (and -v) on a quiet
// machine.
func TestVNNISplitAB(t *testing.T) {
	if os.Getenv("INT8BERT_SPLIT_AB") == "" {
		t.Skip("set INT8BERT_SPLIT_AB=1 to time the split")
	}
	if !vnniAvailable(cpu.X86) {
		t.Skip("no VNNI here")
	}
	const reps = 300
	for _, tile := range [][2]int{{8, 48}, {12, 32}, {6, 64}} {
		mr, nr := tile[0], tile[1]
		kn := newVNNIKernel(mr, nr)
		for _, sh := range []struct {
			name    string
			m, k, n int
		}{{"qkv", 128, 768, 2304}, {"o", 128, 768, 768}, {"ffn1", 128, 768, 3072}, {"ffn2", 128, 3072, 768}} {
			a, p, cs, bias := vnniBenchOperands(t, sh.m, sh.k, sh.n, nr)
			ep := &Epilogue{ZeroPoint: 128, ColSum: p.ColSum, ActScale: 1.0 / 128, ColScale: cs, Bias: bias}
			g := &GEMMU8S8{M: sh.m, N: sh.n, K: sh.k, A: a, Lda: sh.k, B: p, Ep: ep, Out: Out{F32: make([]float32, sh.m*sh.n), Ldc: sh.n}, Threads: 2}
			var old, cur, ratio, one, scale []float64
			g1 := *g
			g1.Threads = 1
			us := func(f func()) float64 {
				t0 := time.Now()
				f()
				return time.Since(t0).Seconds() * 1e6
			}
			runOld := func() { runVNNIOldSplit(g, mr, nr) }
			runNew := func() {
				if err := kn.RunU8S8(g); err != nil {
					t.Error(err)
				}
			}
			for r := range reps {
				var o, c float64
				if r%2 == 0 {
					o, c = us(runOld), us(runNew)
				} else {
					c, o = us(runNew), us(runOld)
				}
				s := us(func() { _ = kn.RunU8S8(&g1) })
				old, cur, ratio, one, scale = append(old, o), append(cur, c), append(ratio, o/c), append(one, s), append(scale, s/c)
			}
			for _, s := range [][]float64{old, cur, ratio, one, scale} {
				slices.Sort(s)
			}
			t.Logf("%dx%d %-4s 1 thread: min %6.0f med %6.0f us; new on 2 over 1, per triple: median %.3f", mr, nr, sh.name, one[0], one[reps/2], scale[reps/2])
			sp := vnniSplitFor(sh.m, sh.n, mr, nr, p.Kp, 2)
			oldBlocks := (sh.n + vnniBlockN(nr, p.Kp) - 1) / vnniBlockN(nr, p.Kp)
			t.Logf("%dx%d %-4s old %2d blocks: min %6.0f med %6.0f us; new %2d tasks: min %6.0f med %6.0f us; old/new per pair: median %.3f (q1 %.3f, q3 %.3f)",
				mr, nr, sh.name, oldBlocks, old[0], old[reps/2],
				sp.nBlocks*sp.mChunks, cur[0], cur[reps/2], ratio[reps/2], ratio[reps/4], ratio[3*reps/4])
		}
	}
}
