//go:build amd64 && gc && !purego && !noasm

package peak

// haveAsm says the peak loops are assembly (peak_amd64.s).
const haveAsm = true
