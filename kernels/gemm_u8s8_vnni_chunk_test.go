package kernels

import (
	"math/rand/v2"
	"testing"

	"github.com/int8bert/int8bert/cpu"
)

// TestVNNIChunkRows checks the single thread's row chunks: all the rows
// in one chunk when their A fits vnniPanelMajorBytes, else chunks of
// whole tiles whose A fits (one tile at least), no more chunks than needed.
func TestVNNIChunkRows(t *testing.T) {
	lim := vnniPanelMajorBytes()
	for _, mr := range []int{6, 8, 12} {
		for _, m := range []int{1, 7, 128, 680, 1024, 4096, 4097} {
			for _, k := range []int{0, 4, 768, 3072, lim, 2 * lim} {
				c := vnniChunkRows(m, k, mr)
				if m*max(k, 1) <= lim {
					if c != m {
						t.Errorf("m=%d k=%d mr=%d: chunks of %d rows, want all %d", m, k, mr, c, m)
					}
					continue
				}
				if c%mr != 0 || c <= 0 || (c > mr && c*k > lim) {
					t.Errorf("m=%d k=%d mr=%d: chunks of %d rows (%d bytes of A, limit %d)", m, k, mr, c, c*k, lim)
				}
				per := max(1, lim/max(k, 1)/mr)
				if want := (m/mr + per) / per; (m+c-1)/c > want {
					t.Errorf("m=%d k=%d mr=%d: %d chunks of %d rows, more than the %d that fit", m, k, mr, (m+c-1)/c, c, want)
				}
			}
		}
	}
}

// TestVNNIChunkedExact runs the fused kernels (f32 with a residual, u8
// with GELU) and the s32 path on one thread with L2 made small, so that
// the rows go in several chunks, and checks every output against the same
// kernel run with a large L2 (one chunk): the bits must not depend on the
// chunking.
func TestVNNIChunkedExact(t *testing.T) {
	if !vnniAvailable(cpu.X86) {
		t.Skip("no VNNI")
	}
	defer func(f cpu.Features) { cpu.X86 = f }(cpu.X86)
	l2 := cpu.X86.L2
	r := rand.New(rand.NewPCG(3, 4))
	for _, tile := range vnniTiles {
		kn := newVNNIKernel(tile[0], tile[1])
		for _, sh := range [][3]int{{5*tile[0] + 3, 2*tile[1] + 5, 300}, {97, 131, 768}, {64, 64, 1537}} {
			m, n, k := sh[0], sh[1], sh[2]
			a, p, cs, bias := vnniBenchOperands(t, m, k, n, tile[1])
			for i := range a {
				a[i] = uint8(r.IntN(256))
			}
			res := make([]float32, m*n)
			for i := range res {
				res[i] = float32(r.NormFloat64())
			}
			for _, out := range []string{"f32", "u8", "s32"} {
				run := func(l2 int) any {
					cpu.X86.L2 = l2
					ep := &Epilogue{ZeroPoint: 128, ColSum: p.ColSum, ActScale: 1.0 / 128, ColScale: cs, Bias: bias}
					g := &GEMMU8S8{M: m, N: n, K: k, A: a, Lda: k, B: p, Ep: ep, Threads: 1}
					var o any
					switch out {
					case "f32":
						ep.Residual, ep.LdResidual = res, n
						f := make([]float32, m*n)
						g.Out, o = Out{F32: f, Ldc: n}, f
					case "u8":
						ep.Act, ep.OutScale, ep.OutZeroPoint = ActGELU, 0.03, 6
						u := make([]uint8, m*n)
						g.Out, o = Out{U8: u, Ldc: n}, u
					default:
						g.Ep = nil
						s := make([]int32, m*n)
						g.Out, o = Out{S32: s, Ldc: n}, s
					}
					if err := kn.RunU8S8(g); err != nil {
						t.Fatal(err)
					}
					return o
				}
				cpu.X86.L2 = l2
				if vnniChunkRows(m, k, tile[0]) != m {
					t.Fatalf("%v: the default L2 already chunks", sh)
				}
				want := run(1 << 30)
				cpu.X86.L2 = 4 * k * tile[0]
				if c := vnniChunkRows(m, k, tile[0]); c >= m {
					t.Fatalf("%v: L2 %d gives one chunk of %d rows", sh, cpu.X86.L2, c)
				}
				got := run(4 * k * tile[0])
				switch w := want.(type) {
				case []float32:
					for i, v := range got.([]float32) {
						if v != w[i] {
							t.Fatalf("%s %v out=%s: C[%d][%d] = %v, want %v", kn.Name, sh, out, i/n, i%n, v, w[i])
						}
					}
				case []uint8:
					for i, v := range got.([]uint8) {
						if v != w[i] {
							t.Fatalf("%s %v out=%s: C[%d][%d] = %v, want %v", kn.Name, sh, out, i/n, i%n, v, w[i])
						}
					}
				case []int32:
					for i, v := range got.([]int32) {
						if v != w[i] {
							t.Fatalf("%s %v out=%s: C[%d][%d] = %v, want %v", kn.Name, sh, out, i/n, i%n, v, w[i])
						}
					}
				}
			}
		}
	}
}
