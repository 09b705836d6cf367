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
func peakMADDWD512(n int)  {}
func peakAVXVNNI256(n int) {}

func dpbf16psHigh(acc *[16]float32, a *[32]uint16, b *[32]uint16) {}
func dpbf16psLow(acc *[16]float32, a *[32]uint16, b *[32]uint16)  {}

func schemeInt16Y(n int) {}
func schemeU7S8Y(n int)  {}
func schemeSignY(n int)  {}
func schemeU7S7Y(n int)  {}
func schemeInt16Z(n int) {}
func schemeU7S8Z(n int)  {}
func schemeSignZ(n int)  {}
func schemeU7S7Z(n int)  {}
