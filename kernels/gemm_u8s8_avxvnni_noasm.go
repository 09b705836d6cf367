//go:build !(amd64 && gc && !purego && !noasm)

package kernels

// The Go twins of the AVX-VNNI micro-kernels (gemm_u8s8_avxvnni_amd64.s):
// the same sums as the AVX2 ones over the same panel layout.

// gemmAVXVNNI_1x16 is the Go twin of the assembly kernel of that name.
func gemmAVXVNNI_1x16(a *uint8, lda int, b *int8, kgroups int, c *int32, ldc int) {
	avx2Twin(1, a, lda, b, kgroups, c, ldc)
}

// gemmAVXVNNI_2x16 is the Go twin of the assembly kernel of that name.
func gemmAVXVNNI_2x16(a *uint8, lda int, b *int8, kgroups int, c *int32, ldc int) {
	avx2Twin(2, a, lda, b, kgroups, c, ldc)
}

// gemmAVXVNNI_3x16 is the Go twin of the assembly kernel of that name.
func gemmAVXVNNI_3x16(a *uint8, lda int, b *int8, kgroups int, c *int32, ldc int) {
	avx2Twin(3, a, lda, b, kgroups, c, ldc)
}

// gemmAVXVNNI_4x16 is the Go twin of the assembly kernel of that name.
func gemmAVXVNNI_4x16(a *uint8, lda int, b *int8, kgroups int, c *int32, ldc int) {
	avx2Twin(4, a, lda, b, kgroups, c, ldc)
}

// gemmAVXVNNI_5x16 is the Go twin of the assembly kernel of that name.
func gemmAVXVNNI_5x16(a *uint8, lda int, b *int8, kgroups int, c *int32, ldc int) {
	avx2Twin(5, a, lda, b, kgroups, c, ldc)
}

// gemmAVXVNNI_6x16 is the Go twin of the assembly kernel of that name.
func gemmAVXVNNI_6x16(a *uint8, lda int, b *int8, kgroups int, c *int32, ldc int) {
	avx2Twin(6, a, lda, b, kgroups, c, ldc)
}
