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

// SetVNNIS32Variant sets the s32 driver switches (vnniNTStores,
// vnniNTMinBytes, vnniS32WholeK) and returns a function restoring them.
func SetVNNIS32Variant(nt bool, ntMin int, wholeK bool) (restore func()) {
	a, b, c := vnniNTStores, vnniNTMinBytes, vnniS32WholeK
	vnniNTStores, vnniNTMinBytes, vnniS32WholeK = nt, ntMin, wholeK
	return func() { vnniNTStores, vnniNTMinBytes, vnniS32WholeK = a, b, c }
}
