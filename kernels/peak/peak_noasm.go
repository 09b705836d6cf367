//go:build !(amd64 && gc && !purego && !noasm)

package peak

// haveAsm says this build has no peak loops: Measure returns zeros.
const haveAsm = false

// The peak loops and the VDPBF16PS probe exist only in assembly; these
// stand-ins do nothing and are never called (Measure checks haveAsm).

func peakFMA(n int)        {}
func peakVNNI(n int)       {}
func peakBF16(n int)       {}
func peakFMA256(n int)     {}
func peakMADDWD256(n int)  {}
func peakAVXVNNI256(n int) {}

func dpbf16psHigh(acc *[16]float32, a *[32]uint16, b *[32]uint16) {}
func dpbf16psLow(acc *[16]float32, a *[32]uint16, b *[32]uint16)  {}
