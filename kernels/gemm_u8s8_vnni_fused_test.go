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

// TestVNNIEpArgsLayout checks the offsets of vnniEpArgs against those the
// generator assumes (_gen/gemm_u8s8_vnni: offDst ...).
func TestVNNIEpArgsLayout(t *testing.T) {
	var a vnniEpArgs
	for _, c := range []struct {
		name      string
		got, want uintptr
	}{
		{"dst", unsafe.Offsetof(a.dst), 0}, {"ldd", unsafe.Offsetof(a.ldd), 8},
		{"colSum", unsafe.Offsetof(a.colSum), 16}, {"colScale", unsafe.Offsetof(a.colScale), 24},
		{"bias", unsafe.Offsetof(a.bias), 32}, {"rowScale", unsafe.Offsetof(a.rowScale), 40},
		{"res", unsafe.Offsetof(a.res), 48}, {"ldres", unsafe.Offsetof(a.ldres), 56},
		{"flags", unsafe.Offsetof(a.flags), 64}, {"zp", unsafe.Offsetof(a.zp), 72},
		{"scale", unsafe.Offsetof(a.scale), 76}, {"invOut", unsafe.Offsetof(a.invOut), 80},
		{"outZP", unsafe.Offsetof(a.outZP), 84}, {"lo", unsafe.Offsetof(a.lo), 88},
		{"hi", unsafe.Offsetof(a.hi), 92}, {"outZPi", unsafe.Offsetof(a.outZPi), 96},
	} {
		if c.got != c.want {
			t.Errorf("vnniEpArgs.%s at %d, the assembly reads it at %d", c.name, c.got, c.want)
		}
	}
}

// fusedCase is one random tile epilogue for TestVNNIFusedExact.
type fusedCase struct {
	mr, nr, k int
	a         []uint8
	b         []int8
	args      vnniEpArgs
	esz, ldd  int
	guard     int
}

// newFusedCase draws a tile, its operands and an epilogue: every
// combination of compensation, row or scalar scale, column scales, bias,
// activation, residual and f32/u8/s8 output occurs.
func newFusedCase(r *rand.Rand, mr, nr int) *fusedCase {
	ks := []int{0, 1, 2, 3, 4, 5, 7, 64, 129, 770, 1538}
	c := &fusedCase{mr: mr, nr: nr, k: ks[r.IntN(len(ks))], guard: 16}
	lda := c.k + r.IntN(5)
	c.a = make([]uint8, mr*lda+1)
	for i := range c.a {
		c.a[i] = uint8(r.IntN(256))
	}
	kp := (c.k + 3) &^ 3
	c.b = make([]int8, nr*kp+1)
	for q := 0; q < c.k; q++ {
		for j := 0; j < nr; j++ {
			c.b[(q/4)*nr*4+j*4+q%4] = int8(r.IntN(256) - 128)
		}
	}
	vec := func(n int, s float64) *float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(r.NormFloat64() * s)
		}
		return &v[0]
	}
	e := &c.args
	if r.IntN(2) == 0 {
		sums := make([]int32, nr)
		for i := range sums {
			sums[i] = int32(r.IntN(1<<16) - 1<<15)
		}
		e.colSum, e.zp = &sums[0], int32(r.IntN(256))
	}
	mag := 1 / (64 * math.Sqrt(float64(c.k)+1)) // sums of a few units
	e.scale = float32(mag * (0.5 + r.Float64()))
	if r.IntN(3) == 0 {
		e.rowScale = vec(mr, mag)
	}
	if r.IntN(3) != 0 {
		e.colScale = vec(nr, 1)
	}
	if r.IntN(3) != 0 {
		e.bias = vec(nr, 2)
	}
	e.flags = []int{0, vnniGELU, vnniGELU8, vnniReLU}[r.IntN(4)]
	ldres := nr + r.IntN(4)
	if r.IntN(2) == 0 {
		e.res, e.ldres = vec(mr*ldres, 2), 4*ldres
	}
	c.esz = 4
	switch r.IntN(3) {
	case 1:
		e.flags |= vnniU8
		e.lo, e.hi = 0, 255
		c.esz = 1
	case 2:
		e.flags |= vnniS8
		e.lo, e.hi = -128, 127
		c.esz = 1
	}
	if c.esz == 1 {
		e.invOut, e.outZP = float32(5+40*r.Float64()), float32(r.IntN(20)-10)
		e.outZPi = int32(e.outZP)
	}
	c.ldd = nr + r.IntN(5)
	e.ldd = c.esz * c.ldd
	return c
}

// run computes the case with the fused kernel f into a fresh buffer with
// guard bands (filled with 0x5a) and returns the buffer.
func (c *fusedCase) run(f vnniMicroE) []byte {
	buf := make([]byte, c.esz*c.mr*c.ldd+2*c.guard)
	for i := range buf {
		buf[i] = 0x5a
	}
	e := c.args
	e.dst = unsafe.Pointer(&buf[c.guard])
	f(&c.a[0], (len(c.a)-1)/c.mr, &c.b[0], c.k, (*byte)(unsafe.Pointer(&e)))
	return buf
}

// old is the unfused path of the driver: the micro-kernel stores the tile,
// the assembly epilogue (the split one, as the driver's) reads it.
func (c *fusedCase) old() vnniMicroE {
	micro := vnniMicros[c.nr][c.mr]
	epi := vnniEpilogueFor(c.nr)
	return func(a *uint8, lda int, b *int8, k int, ep *byte) {
		e := (*vnniEpArgs)(unsafe.Pointer(ep))
		t := make([]int32, c.mr*c.nr)
		micro(a, lda, b, k, &t[0], c.nr, math.MaxUint64>>(64-c.nr), 0)
		epi((*byte)(e.dst), e.ldd/c.esz, &t[0], c.nr, c.mr, c.nr, e.colSum, e.zp, e.rowScale, e.scale, e.colScale, e.bias, e.res, e.ldres/4, e.flags, e.invOut, e.outZP, e.lo, e.hi)
	}
}

// TestVNNIFusedExact checks every fused micro-kernel, bit for bit and
// guard bands included, against the micro-kernel + assembly epilogue path
// it replaces and against its Go twin (vnniMicroEGo), on random tiles and
// epilogues.
func TestVNNIFusedExact(t *testing.T) {
	if !vnniAvailable(cpu.X86) {
		t.Skipf("the VNNI assembly is not available here (asm build %v): %s", vnniAsm, cpu.X86)
	}
	r := rand.New(rand.NewPCG(31, 32))
	for tile, f := range vnniFusedMicros {
		mr, nr := tile[0], tile[1]
		for it := 0; it < 400; it++ {
			c := newFusedCase(r, mr, nr)
			got := c.run(f)
			for _, ref := range []struct {
				name string
				f    vnniMicroE
			}{
				{"micro+epilogue", c.old()},
				{"Go twin", func(a *uint8, lda int, b *int8, k int, ep *byte) { vnniMicroEGo(mr, nr, a, lda, b, k, ep) }},
			} {
				want := c.run(ref.f)
				for p := range got {
					if got[p] != want[p] {
						t.Fatalf("vnniU8S8E_%dx%d it %d k=%d flags=%d esz=%d: byte %d (guard %d) = %#x, %s gives %#x",
							mr, nr, it, c.k, c.args.flags, c.esz, p, c.guard, got[p], ref.name, want[p])
					}
				}
			}
		}
	}
}

// TestVNNIFusedDriverExact runs the registered kernels and the same driver
// without the fused micro-kernels (the path of activations the assembly
// lacks) on shapes with tails, several N blocks, padded strides, one and
// two threads and long K (several K steps on the unfused path), for each
// epilogue kind, and requires equal bytes.
func TestVNNIFusedDriverExact(t *testing.T) {
	if !vnniAvailable(cpu.X86) {
		t.Skipf("the VNNI assembly is not available here (asm build %v): %s", vnniAsm, cpu.X86)
	}
	r := rand.New(rand.NewPCG(41, 42))
	for _, tile := range vnniTiles {
		kn := newVNNIKernel(tile[0], tile[1])
		unfused := vnniKernel("unfused", tile[0], tile[1], vnniMicros[tile[1]][:tile[0]+1], vnniEpilogueFor(tile[1]), vnniAvailable)
		for _, sh := range [][3]int{{8, 48, 64}, {17, 200, 131}, {25, 1100, 67}, {12, 96, 1700}, {7, 40, 5}, {30, 130, 3}, {24, 192, 100}} {
			m, n, k := sh[0], sh[1], sh[2]
			for kind := 0; kind < 6; kind++ {
				lda, ldc := k+r.IntN(3), n+r.IntN(3)
				if n%16 == 0 && kind%2 == 0 {
					ldc = n // unpadded rows
				}
				a := make([]uint8, m*lda)
				for i := range a {
					a[i] = uint8(r.IntN(256))
				}
				w := make([]int8, n*k)
				for i := range w {
					w[i] = int8(r.IntN(255) - 127)
				}
				p, _ := PackS8(n, k, w, k, kn.NR)
				vec := func(l int, s float64) []float32 {
					v := make([]float32, l)
					for i := range v {
						v[i] = float32(r.NormFloat64() * s)
					}
					return v
				}
				cs := 1 / (64 * math.Sqrt(float64(k)+1))
				ep := &Epilogue{ZeroPoint: 128, ColSum: p.ColSum, ActScale: 1.0 / 128, ColScale: vec(n, cs), Bias: vec(n, 1)}
				f32 := true
				switch kind {
				case 1:
					ep.Act = ActGELU
				case 2:
					ep.Residual, ep.LdResidual = vec(m*(n+2), 1), n+2
				case 3:
					ep.Act, ep.OutScale, ep.OutZeroPoint, f32 = ActGELU, 0.03, 6, false
				case 4:
					ep.ZeroPoint, ep.RowScale, ep.ActScale, ep.Act = 0, vec(m, 1.0/128), 0, ActReLU
				case 5:
					ep.Act, ep.OutScale, ep.OutZeroPoint, f32 = ActGELUTanh, 0.05, -3, false // the Go path
				}
				var outs [2][]byte
				for fi, kr := range []*Kernel{unfused, kn} {
					threads := 1 + (kind+fi)%2
					g := &GEMMU8S8{M: m, N: n, K: k, A: a, Lda: lda, B: p, Ep: ep, Threads: threads}
					const guard = 16
					if f32 {
						buf := make([]float32, m*ldc+2*guard+16)
						for i := range buf {
							buf[i] = -7
						}
						off := guard
						for uintptr(unsafe.Pointer(&buf[off]))%64 != 0 {
							off++
						}
						g.Out = Out{F32: buf[off : off+m*ldc], Ldc: ldc}
						outs[fi] = unsafe.Slice((*byte)(unsafe.Pointer(&buf[0])), 4*len(buf))
					} else if kind == 5 {
						buf := make([]int8, m*ldc+2*guard)
						for i := range buf {
							buf[i] = 0x5a
						}
						g.Out = Out{S8: buf[guard : guard+m*ldc], Ldc: ldc}
						outs[fi] = unsafe.Slice((*byte)(unsafe.Pointer(&buf[0])), len(buf))
					} else {
						buf := make([]uint8, m*ldc+2*guard)
						for i := range buf {
							buf[i] = 0x5a
						}
						g.Out = Out{U8: buf[guard : guard+m*ldc], Ldc: ldc}
						outs[fi] = buf
					}
					require.NoError(t, kr.RunU8S8(g))
				}
				for q := range outs[0] {
					if outs[0][q] != outs[1][q] {
						t.Fatalf("%s %dx%dx%d kind %d: byte %d fused %#x, unfused %#x", kn.Name, m, k, n, kind, q, outs[1][q], outs[0][q])
					}
				}
			}
		}
	}
}

// VNNIFusedGoTwinKernels returns the VNNI driver over the Go twins of the
// micro-kernels, of the fused ones (vnniMicroEGo) and of the epilogue, so
// the driver's fused path runs the kernel suite on every build.
func VNNIFusedGoTwinKernels() []*Kernel {
	var ks []*Kernel
	for _, t := range vnniTiles {
		mr, nr := t[0], t[1]
		micros := make([]vnniMicro, mr+1)
		for r := 1; r <= mr; r++ {
			micros[r] = func(a *uint8, lda int, b *int8, k int, c *int32, ldc int, nmask uint64, add int) {
				vnniMicroGo(r, nr, a, lda, b, k, c, ldc, nmask, add)
			}
		}
		fused := func(a *uint8, lda int, b *int8, k int, ep *byte) { vnniMicroEGo(mr, nr, a, lda, b, k, ep) }
		ks = append(ks, vnniKernelE(fmt.Sprintf("gemmVNNIFusedGoTwin_%dx%d", mr, nr), mr, nr, micros, fused,
			vnniEpilogueGo, func(cpu.Features) bool { return true }))
	}
	return ks
}
