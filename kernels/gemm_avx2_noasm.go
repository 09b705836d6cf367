//go:build !(amd64 && gc && !purego && !noasm)

package kernels

import "unsafe"

// gemmAVX2_1x16 is the generic twin of the assembly kernel of that name.
func gemmAVX2_1x16(a *uint8, lda int, b *int8, kgroups int, c *int32, ldc int) {
	avx2Twin(1, a, lda, b, kgroups, c, ldc)
}

// gemmAVX2_2x16 is the generic twin of the assembly kernel of that name.
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
