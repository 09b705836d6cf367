//go:build !(amd64 && gc && !purego && !noasm)

package kernels

// peakAsm says this build has no peak loops: MeasurePeak returns zeros.
const peakAsm = false

// The peak loops and the VDPBF16PS probe exist only in assembly; these
// twins do nothing and are never called (MeasurePeak checks peakAsm).

func peakFMA(n int)       {}
func peakVNNI(n int)      {}
func peakBF16(n int)      {}
func peakFMA256(n int)    {}
func peakMADDWD256(n int) {}

func dpbf16psHigh(acc *[16]float32, a *[32]uint16, b *[32]uint16) {}
func dpbf16psLow(acc *[16]float32, a *[32]uint16, b *[32]uint16)  {}
