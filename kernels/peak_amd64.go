//go:build amd64 && gc && !purego && !noasm

package kernels

// peakAsm says the peak loops are assembly (peak_amd64.s).
const peakAsm = true
