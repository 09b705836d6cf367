//go:build !(amd64 && gc && !purego && !noasm)

package kernels

import "github.com/int8bert/int8bert/cpu"

// Without assembly there are no AVX2 softmax passes (eltwise_avx2_amd64.s):
// eltAVX2Funcs stays nil and the Go twins run.

func eltAVX2Available(cpu.Features) bool { return false }
