//go:build !(amd64 && gc && !purego && !noasm)

package kernels

// Without assembly F32Kernels lists GenericF32 only.
