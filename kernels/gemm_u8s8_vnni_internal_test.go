package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/int8bert/int8bert/cpu"
	"github.com/stretchr/testify/require"
)

// geluAccurate is GELU through erfc, free of the cancellation of 1+erf for
// negative x (where the float64 GELU of ref.go loses its relative accuracy
// below about x = -6).
func geluAccurate(x float64) float64 { return 0.5 * x * math.Erfc(-x/math.Sqrt2) }

// geluXs are the GELU test inputs: a fine sweep of [-12, 12] and random
// values of every magnitude.
func geluXs() []float32 {
	var xs []float32
	for x := -12.0; x <= 12; x += 1.0 / 1024 {
		xs = append(xs, float32(x))
	}
	r := rand.New(rand.NewPCG(11, 12))
	for range 20000 {
		xs = append(xs, float32(r.NormFloat64()*math.Pow(10, float64(r.IntN(9)-5))))
	}
	return append(xs, 0, float32(math.Copysign(0, -1)), 1e-30, -1e-30, 30, -30, 1e6, -1e6)
}

func checkGELU(t *testing.T, name string, xs, ys []float32) {
	t.Helper()
	worst := 0.0
	for i, x := range xs {
		want := geluAccurate(float64(x))
		got := float64(ys[i])
		err := math.Abs(got - want)
		if !(err <= 1e-6*math.Abs(want)+1e-37) {
			t.Fatalf("%s(%g) = %.9g, want %.9g (relative error %.3g)", name, x, got, want, err/math.Abs(want))
		}
		if want != 0 && math.Abs(want) > 1e-30 {
			worst = max(worst, err/math.Abs(want))
		}
		// Against the reference formula of ref.go, where it is accurate.
		if x > -5 {
			if ref := GELU(float64(x)); !(math.Abs(got-ref) <= 1e-6*math.Abs(ref)+1e-37) {
				t.Fatalf("%s(%g) = %.9g, GELU %.9g", name, x, got, ref)
			}
		}
	}
	t.Logf("%s: worst relative error %.3g over %d inputs", name, worst, len(xs))
}

func TestGELUF32Accuracy(t *testing.T) {
	xs := geluXs()
	ys := make([]float32, len(xs))
	for i, x := range xs {
		ys[i] = geluF32(x)
	}
	checkGELU(t, "geluF32", xs, ys)
}

// epiRun calls epi with GELU on y = 0*1 + bias = x.
func epiGELU(epi vnniEpi, xs []float32) []float32 {
	ys := make([]float32, len(xs))
	acc := make([]int32, len(xs))
	epi((*byte)(unsafe.Pointer(&ys[0])), len(xs), &acc[0], len(xs), 1, len(xs), nil, 0, nil, 1, nil, &xs[0], nil, 0, vnniGELU, 0, 0, 0, 0)
	return ys
}

func TestVNNIEpilogueGELUAccuracy(t *testing.T) {
	xs := geluXs()
	checkGELU(t, "vnniEpilogueGo", xs, epiGELU(vnniEpilogueGo, xs))
	if !vnniAvailable(cpu.X86) {
		t.Skipf("the VNNI assembly epilogue is not available here (asm build %v): %s", vnniAsm, cpu.X86)
	}
	checkGELU(t, "vnniEpilogue", xs, epiGELU(vnniEpilogue, xs))
	checkGELU(t, "vnniEpilogue3", xs, epiGELU(vnniEpilogue3, xs))
	checkGELU(t, "vnniEpilogueS", xs, epiGELU(vnniEpilogueS, xs))
	checkGELU(t, "vnniEpilogue3S", xs, epiGELU(vnniEpilogue3S, xs))
}

// TestVNNIEpilogueMatchesGo compares the assembly epilogues with their Go twin
// on random tiles of 1 ... 9 rows of every length 1 ... 70 and every
// option, with padded strides and guards after each row.
func TestVNNIEpilogueMatchesGo(t *testing.T) {
	if !vnniAvailable(cpu.X86) {
		t.Skipf("the VNNI assembly epilogue is not available here (asm build %v): %s", vnniAsm, cpu.X86)
	}
	r := rand.New(rand.NewPCG(21, 22))
	vec := func(n int, s float64) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(r.NormFloat64() * s)
		}
		return v
	}
	for it := 0; it < 8000; it++ {
		n, rows := 1+it%70, 1+r.IntN(9)
		ldacc, ldd, ldres := n+r.IntN(3), n+r.IntN(3)+1, n+r.IntN(3)
		acc := make([]int32, rows*ldacc)
		sums := make([]int32, n)
		for i := range acc {
			acc[i] = int32(r.IntN(1<<22) - 1<<21)
		}
		for i := range sums {
			sums[i] = int32(r.IntN(1<<14) - 1<<13)
		}
		opt := func(v []float32) *float32 {
			if r.IntN(2) == 0 {
				return nil
			}
			return &v[0]
		}
		var colSum *int32
		zp := int32(0)
		if r.IntN(2) == 0 {
			colSum, zp = &sums[0], int32(r.IntN(256))
		}
		colScale, bias, res := opt(vec(n, 1)), opt(vec(n, 2)), opt(vec(rows*ldres, 2))
		rowScale := opt(vec(rows, 1e-6))
		scale := float32(1e-6 * (0.5 + r.Float64()))
		flags := []int{0, vnniGELU, vnniReLU}[r.IntN(3)] | []int{0, vnniU8, vnniS8}[r.IntN(3)]
		invOut, outZP, lo, hi := float32(20*r.Float64()), float32(r.IntN(20)-10), float32(0), float32(255)
		if flags&vnniS8 != 0 {
			lo, hi = -128, 127
		}
		got, want := make([]float32, rows*ldd+8), make([]float32, rows*ldd+8)
		for i := range got {
			got[i], want[i] = -7, -7
		}
		gp, wp := (*byte)(unsafe.Pointer(&got[0])), (*byte)(unsafe.Pointer(&want[0]))
		epi := []vnniEpi{vnniEpilogue, vnniEpilogue3, vnniEpilogueS, vnniEpilogue3S}[it%4]
		epi(gp, ldd, &acc[0], ldacc, rows, n, colSum, zp, rowScale, scale, colScale, bias, res, ldres, flags, invOut, outZP, lo, hi)
		vnniEpilogueGo(wp, ldd, &acc[0], ldacc, rows, n, colSum, zp, rowScale, scale, colScale, bias, res, ldres, flags, invOut, outZP, lo, hi)
		if flags&(vnniU8|vnniS8) != 0 {
			gb := unsafe.Slice(gp, 4*len(got))
			wb := unsafe.Slice(wp, 4*len(want))
			for p := range gb {
				d := int(gb[p]) - int(wb[p])
				if flags&vnniS8 != 0 {
					d = int(int8(gb[p])) - int(int8(wb[p]))
				}
				inTile := p < rows*ldd && p%ldd < n
				if !inTile && d != 0 || d < -1 || d > 1 {
					t.Fatalf("it %d rows=%d n=%d ldd=%d flags=%d: byte %d = %d, want %d", it, rows, n, ldd, flags, p, gb[p], wb[p])
				}
			}
			continue
		}
		for p := range got {
			g, w := float64(got[p]), float64(want[p])
			inTile := p < rows*ldd && p%ldd < n
			if !inTile && g != w || !(math.Abs(g-w) <= 1e-6*math.Abs(w)+1e-6) {
				t.Fatalf("it %d rows=%d n=%d flags=%d: [%d] = %v, want %v", it, rows, n, flags, p, g, w)
			}
		}
	}
}

// BenchmarkVNNIMicro calls the full-size micro-kernels on one tile with A
// and B in L1 (k=256) and with B from L2 (k=1024): the ceiling of the
// GEMMs of BenchmarkVNNI.
func BenchmarkVNNIMicro(b *testing.B) {
	if !vnniAvailable(cpu.X86) {
		b.Skipf("the VNNI assembly is not available here (asm build %v): %s", vnniAsm, cpu.X86)
	}
	for _, t := range vnniTiles {
		for _, k := range []int{256, 1024} {
			mr, nr := t[0], t[1]
			micro := vnniMicros[nr][mr]
			a := make([]uint8, mr*k)
			w := make([]int8, nr*k)
			c := make([]int32, mr*nr)
			b.Run(fmt.Sprintf("tile=%dx%d/k=%d", mr, nr, k), func(b *testing.B) {
				for b.Loop() {
					micro(&a[0], k, &w[0], k, &c[0], nr, math.MaxUint64, 0)
				}
				b.ReportMetric(2*float64(mr*nr*k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GOP/s")
			})
		}
	}
}

// TestVNNINTStoresExact checks the non-temporal s32 stores (64-byte
// aligned outputs of at least L2, here a 1 KiB one so that small outputs
// qualify and every panel is its own N block) against the Go twins with
// plain stores, on shapes with M, N and K tails and two threads, and that
// the padding of each row is left alone.
func TestVNNINTStoresExact(t *testing.T) {
	if !vnniAvailable(cpu.X86) {
		t.Skip("no VNNI")
	}
	defer func(f cpu.Features) { cpu.X86 = f }(cpu.X86)
	cpu.X86.L2 = 1 << 10
	r := rand.New(rand.NewPCG(7, 8))
	for _, tile := range vnniTiles {
		mr, nr := tile[0], tile[1]
		micros := make([]vnniMicro, mr+1)
		for q := 1; q <= mr; q++ {
			micros[q] = func(a *uint8, lda int, b *int8, k int, c *int32, ldc int, nmask uint64, add int) {
				vnniMicroGo(q, nr, a, lda, b, k, c, ldc, nmask, add)
			}
		}
		twin := vnniKernel("twin", mr, nr, micros, vnniEpilogueGo, func(cpu.Features) bool { return true })
		asm := vnniKernel("asm", mr, nr, vnniMicros[nr][:mr+1], vnniEpilogueFor(nr), vnniAvailable)
		for _, sh := range [][3]int{{mr, nr, 64}, {3*mr + 1, 5*nr + 7, 4099}, {37, 131, 300}, {2*mr - 1, 2 * nr, 1537}} {
			m, n, k := sh[0], sh[1], sh[2]
			ldc := (n + 15) &^ 15
			a := make([]uint8, m*k)
			for i := range a {
				a[i] = uint8(r.IntN(256))
			}
			w := make([]int8, n*k)
			for i := range w {
				w[i] = int8(r.IntN(256) - 128)
			}
			p, err := PackS8(n, k, w, k, nr)
			if err != nil {
				t.Fatal(err)
			}
			aligned := func() []int32 {
				buf := make([]int32, m*ldc+16)
				off := (64 - int(uintptr(unsafe.Pointer(&buf[0]))%64)) % 64 / 4
				c := buf[off : off+m*ldc]
				for i := range c {
					c[i] = -7
				}
				return c
			}
			want := aligned()
			require.NoError(t, twin.RunU8S8(&GEMMU8S8{M: m, N: n, K: k, A: a, Lda: k, B: p, Out: Out{S32: want, Ldc: ldc}}))
			for _, threads := range []int{1, 2} {
				got := aligned()
				g := &GEMMU8S8{M: m, N: n, K: k, A: a, Lda: k, B: p, Out: Out{S32: got, Ldc: ldc}, Threads: threads}
				require.Equal(t, 2, vnniNT(g), "%dx%d %v: non-temporal stores not selected", m, n, sh)
				require.NoError(t, asm.RunU8S8(g))
				for i := range got {
					if got[i] != want[i] {
						t.Fatalf("%dx%d %v threads=%d: C[%d][%d] = %d, want %d", mr, nr, sh, threads, i/ldc, i%ldc, got[i], want[i])
					}
				}
			}
		}
	}
}
