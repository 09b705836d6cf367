//go:build amd64 && gc && !purego && !noasm

package kernels

import "github.com/int8bert/int8bert/cpu"

func init() {
	u8s8Asm = append(u8s8Asm, &Kernel{
		Name: "gemmAVXVNNI_6x16", ISA: cpu.ISAAVXVNNI, MR: 6, NR: 16, KB: 4,
		Available: func(f cpu.Features) bool { return f.AVX2 && f.AVXVNNI },
		Accepts:   func(m, n, k int) bool { return true },
		RunU8S8:   runAVXVNNIU8S8,
	})
}
