//go:build !(amd64 && gc && !purego && !noasm)

package kernels

import "unsafe"

// gemmAVX2_1x16 is the Go twin of the assembly kernel of that name.
func gemmAVX2_1x16(a *uint8, lda int, b *int8, kgroups int, c *int32, ldc int) {
	avx2Twin(1, a, lda, b, kgroups, c, ldc)
}

// gemmAVX2_2x16 is the Go twin of the assembly kernel of that name.
func gemmAVX2_2x16(a *uint8, lda int, b *int8, kgroups int, c *int32, ldc int) {
	avx2Twin(2, a, lda, b, kgroups, c, ldc)
}

func avx2Twin(mr int, a *uint8, lda int, b *int8, kgroups int, c *int32, ldc int) {
	as := unsafe.Slice(a, (mr-1)*lda+4*kgroups)
	bs := unsafe.Slice(b, 64*kgroups)
	cs := unsafe.Slice(c, (mr-1)*ldc+16)
	for i := 0; i < mr; i++ {
		for j := 0; j < 16; j++ {
			var s int32
			for q := 0; q < 4*kgroups; q++ {
				s += int32(as[i*lda+q]) * int32(bs[(q/4)*64+j*4+q%4])
			}
			cs[i*ldc+j] = s
		}
	}
}

// widenU8AVX2 is the Go twin of the assembly function of that name.
func widenU8AVX2(dst *int16, src *uint8, n int) { widenTwin(dst, src, n) }

// widenS8AVX2 is the Go twin of the assembly function of that name.
func widenS8AVX2(dst *int16, src *int8, n int) { widenTwin(dst, src, n) }

func widenTwin[T uint8 | int8](dst *int16, src *T, n int) {
	if n <= 0 {
		return
	}
	d, s := unsafe.Slice(dst, n), unsafe.Slice(src, n)
	for i, x := range s {
		d[i] = int16(x)
	}
}

// avx2Epilogue16 is the Go twin of the assembly function of that name.
func avx2Epilogue16(acc *int32, rows int, ep *byte) {
	(*vnniEpArgs)(unsafe.Pointer(ep)).epilogueGo(acc, 16, rows, 16)
}

// gemmAVX2w_1x8 is the Go twin of the assembly kernel of that name.
func gemmAVX2w_1x8(a *int16, lda int, b *int16, kgroups int, c *int32, ldc int) {
	avx2Wide8Twin(1, a, lda, b, kgroups, c, ldc)
}

// gemmAVX2w_2x8 is the Go twin of the assembly kernel of that name.
func gemmAVX2w_2x8(a *int16, lda int, b *int16, kgroups int, c *int32, ldc int) {
	avx2Wide8Twin(2, a, lda, b, kgroups, c, ldc)
}

// gemmAVX2w_3x8 is the Go twin of the assembly kernel of that name.
func gemmAVX2w_3x8(a *int16, lda int, b *int16, kgroups int, c *int32, ldc int) {
	avx2Wide8Twin(3, a, lda, b, kgroups, c, ldc)
}

// gemmAVX2w_4x8 is the Go twin of the assembly kernel of that name.
func gemmAVX2w_4x8(a *int16, lda int, b *int16, kgroups int, c *int32, ldc int) {
	avx2Wide8Twin(4, a, lda, b, kgroups, c, ldc)
}

// gemmAVX2w_5x8 is the Go twin of the assembly kernel of that name.
func gemmAVX2w_5x8(a *int16, lda int, b *int16, kgroups int, c *int32, ldc int) {
	avx2Wide8Twin(5, a, lda, b, kgroups, c, ldc)
}

// gemmAVX2w_6x8 is the Go twin of the assembly kernel of that name.
func gemmAVX2w_6x8(a *int16, lda int, b *int16, kgroups int, c *int32, ldc int) {
	avx2Wide8Twin(6, a, lda, b, kgroups, c, ldc)
}

func avx2Wide8Twin(mr int, a *int16, lda int, b *int16, kgroups int, c *int32, ldc int) {
	if kgroups <= 0 {
		cs := unsafe.Slice(c, (mr-1)*ldc+8)
		for i := 0; i < mr; i++ {
			clear(cs[i*ldc : i*ldc+8])
		}
		return
	}
	as := unsafe.Slice(a, (mr-1)*lda+4*kgroups)
	bs := unsafe.Slice(b, 64*(kgroups-1)+32)
	cs := unsafe.Slice(c, (mr-1)*ldc+8)
	for i := 0; i < mr; i++ {
		for j := 0; j < 8; j++ {
			var s int32
			for q := 0; q < 4*kgroups; q++ {
				s += int32(as[i*lda+q]) * int32(bs[(q/4)*64+j*4+q%4])
			}
			cs[i*ldc+j] = s
		}
	}
}

// gemmAVX512w_1x16 is the Go twin of the assembly kernel of that name.
func gemmAVX512w_1x16(a *int16, lda int, b *int16, kgroups int, c *int32, ldc int) {
	avx512Wide16Twin(1, a, lda, b, kgroups, c, ldc)
}

// gemmAVX512w_2x16 is the Go twin of the assembly kernel of that name.
func gemmAVX512w_2x16(a *int16, lda int, b *int16, kgroups int, c *int32, ldc int) {
	avx512Wide16Twin(2, a, lda, b, kgroups, c, ldc)
}

// gemmAVX512w_3x16 is the Go twin of the assembly kernel of that name.
func gemmAVX512w_3x16(a *int16, lda int, b *int16, kgroups int, c *int32, ldc int) {
	avx512Wide16Twin(3, a, lda, b, kgroups, c, ldc)
}

// gemmAVX512w_4x16 is the Go twin of the assembly kernel of that name.
func gemmAVX512w_4x16(a *int16, lda int, b *int16, kgroups int, c *int32, ldc int) {
	avx512Wide16Twin(4, a, lda, b, kgroups, c, ldc)
}

// gemmAVX512w_5x16 is the Go twin of the assembly kernel of that name.
func gemmAVX512w_5x16(a *int16, lda int, b *int16, kgroups int, c *int32, ldc int) {
	avx512Wide16Twin(5, a, lda, b, kgroups, c, ldc)
}

// gemmAVX512w_6x16 is the Go twin of the assembly kernel of that name.
func gemmAVX512w_6x16(a *int16, lda int, b *int16, kgroups int, c *int32, ldc int) {
	avx512Wide16Twin(6, a, lda, b, kgroups, c, ldc)
}

// gemmAVX512w_7x16 is the Go twin of the assembly kernel of that name.
func gemmAVX512w_7x16(a *int16, lda int, b *int16, kgroups int, c *int32, ldc int) {
	avx512Wide16Twin(7, a, lda, b, kgroups, c, ldc)
}

// gemmAVX512w_8x16 is the Go twin of the assembly kernel of that name.
func gemmAVX512w_8x16(a *int16, lda int, b *int16, kgroups int, c *int32, ldc int) {
	avx512Wide16Twin(8, a, lda, b, kgroups, c, ldc)
}

// gemmAVX512w_9x16 is the Go twin of the assembly kernel of that name.
func gemmAVX512w_9x16(a *int16, lda int, b *int16, kgroups int, c *int32, ldc int) {
	avx512Wide16Twin(9, a, lda, b, kgroups, c, ldc)
}

// gemmAVX512w_10x16 is the Go twin of the assembly kernel of that name.
func gemmAVX512w_10x16(a *int16, lda int, b *int16, kgroups int, c *int32, ldc int) {
	avx512Wide16Twin(10, a, lda, b, kgroups, c, ldc)
}

// gemmAVX512w_11x16 is the Go twin of the assembly kernel of that name.
func gemmAVX512w_11x16(a *int16, lda int, b *int16, kgroups int, c *int32, ldc int) {
	avx512Wide16Twin(11, a, lda, b, kgroups, c, ldc)
}

// gemmAVX512w_12x16 is the Go twin of the assembly kernel of that name.
func gemmAVX512w_12x16(a *int16, lda int, b *int16, kgroups int, c *int32, ldc int) {
	avx512Wide16Twin(12, a, lda, b, kgroups, c, ldc)
}

// avx512Wide16Twin is gemmAVX512w's 16 columns as the two halves of
// avx2Wide8Twin.
func avx512Wide16Twin(mr int, a *int16, lda int, b *int16, kgroups int, c *int32, ldc int) {
	avx2Wide8Twin(mr, a, lda, b, kgroups, c, ldc)
	avx2Wide8Twin(mr, a, lda, (*int16)(unsafe.Add(unsafe.Pointer(b), 64)), kgroups, (*int32)(unsafe.Add(unsafe.Pointer(c), 32)), ldc)
}
