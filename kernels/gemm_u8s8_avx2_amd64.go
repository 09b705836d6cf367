//go:build amd64 && gc && !purego && !noasm

package kernels

import "github.com/int8bert/int8bert/cpu"

func init() {
	u8s8Asm = append(u8s8Asm, &Kernel{
		Name: "gemmAVX2_2x16", ISA: cpu.ISAAVX2, MR: 2, NR: 16, KB: 4,
		Available: func(f cpu.Features) bool { return f.AVX2 },
		Accepts:   func(m, n, k int) bool { return true },
		RunU8S8:   runAVX2U8S8,
	}, &Kernel{
		Name: "gemmAVX2w_6x16", ISA: cpu.ISAAVX2, MR: 6, NR: 16, KB: 4,
		Available: func(f cpu.Features) bool { return f.AVX2 },
		Accepts:   func(m, n, k int) bool { return true },
		RunU8S8:   runAVX2WideU8S8,
	}, &Kernel{
		// The exact int16 scheme on zmm, for AVX-512 without VNNI; the
		// selector times it against the ymm kernels wherever it runs.
		// AVX2 for the widening and the epilogue it shares with them.
		Name: "gemmAVX512w_12x16", ISA: cpu.ISAAVX512, MR: avx512WideRows, NR: 16, KB: 4,
		Available: func(f cpu.Features) bool { return f.AVX512F && f.AVX512BW && f.AVX2 },
		Accepts:   func(m, n, k int) bool { return true },
		RunU8S8:   runAVX512WideU8S8,
	})
}
