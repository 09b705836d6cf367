//go:build amd64 && gc && !purego && !noasm

package kernels

// vnniAsm reports whether the VNNI micro-kernels are the generated
// assembly (true here) or their Go twins (gemm_u8s8_vnni_noasm.go).
const vnniAsm = true

func init() {
	u8s8Asm = append(u8s8Asm, VNNIKernels()...)
	attnU8S8Asm = append(attnU8S8Asm, ScoresU8S8)
}
