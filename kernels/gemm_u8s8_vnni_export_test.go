package kernels

import (
	"fmt"

	"github.com/int8bert/int8bert/cpu"
)

// VNNIGoTwinKernels returns the VNNI driver over the plain Go twins of its
// micro-kernels and epilogue (vnniMicroGo, vnniEpilogueGo), available on
// every build, so the driver's blocking, tails and threading are tested where
// the assembly cannot run.
func VNNIGoTwinKernels() []*Kernel {
	var ks []*Kernel
	for _, t := range vnniTiles {
		mr, nr := t[0], t[1]
		micros := make([]vnniMicro, mr+1)
		for r := 1; r <= mr; r++ {
			micros[r] = func(a *uint8, lda int, b *int8, k int, c *int32, ldc int, nmask uint64, add int) {
				vnniMicroGo(r, nr, a, lda, b, k, c, ldc, nmask, add)
			}
		}
		ks = append(ks, vnniKernel(fmt.Sprintf("gemmVNNIGoTwin_%dx%d", mr, nr), mr, nr, micros,
			vnniEpilogueGo, func(cpu.Features) bool { return true }))
	}
	return ks
}

// AVX2DriverKernels returns both AVX2 u8 x s8 drivers (runAVX2U8S8,
// runAVX2WideU8S8) on every build: over the assembly where it is built in
// (available with AVX2), else over the Go twins of the micro-kernels
// and widening functions (always available), so the drivers' tails,
// padding and threading are tested everywhere.
func AVX2DriverKernels() []*Kernel {
	avail := func(f cpu.Features) bool { return f.AVX2 || !vnniAsm }
	return []*Kernel{
		{Name: "avx2Driver_2x16", ISA: "avx2", MR: 2, NR: 16, KB: 4, Available: avail,
			Accepts: func(m, n, k int) bool { return true }, RunU8S8: runAVX2U8S8},
		{Name: "avx2WideDriver_6x16", ISA: "avx2", MR: 6, NR: 16, KB: 4, Available: avail,
			Accepts: func(m, n, k int) bool { return true }, RunU8S8: runAVX2WideU8S8},
		{Name: "avx512WideDriver_12x16", ISA: "avx512", MR: avx512WideRows, NR: 16, KB: 4,
			Available: func(f cpu.Features) bool { return f.AVX512F && f.AVX512BW && f.AVX2 || !vnniAsm },
			Accepts:   func(m, n, k int) bool { return true }, RunU8S8: runAVX512WideU8S8},
	}
}

// AVXVNNIDriverKernel returns the AVX-VNNI driver (runAVXVNNIU8S8) on every
// build: over the assembly where it is built in (available with AVX2 and
// AVX-VNNI), else over the Go twins of its micro-kernels (always
// available).
func AVXVNNIDriverKernel() *Kernel {
	return &Kernel{Name: "avxvnniDriver_6x16", ISA: cpu.ISAAVXVNNI, MR: 6, NR: 16, KB: 4,
		Available: func(f cpu.Features) bool { return f.AVX2 && f.AVXVNNI || !vnniAsm },
		Accepts:   func(m, n, k int) bool { return true }, RunU8S8: runAVXVNNIU8S8}
}
