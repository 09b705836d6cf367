//go:build amd64 && gc && !purego && !noasm

package kernels

import "github.com/int8bert/int8bert/cpu"

// amxTile32x32 computes a 32x32 int32 tile with AMX (TDPBUSD on 16x64 tiles):
//
//	for i < 32, j < 32: c[i*ldc+j] = sum over q < 64*kblocks of
//	    a[i*lda+q] * W[j][q]
//
// where columns 0..15 come from the NR=16 panel b0 and 16..31 from b1, each
// laid out as PackedS8 (k-group g at 64g). cfg is the 64-byte tile
// configuration amxConfig. It runs only where cpu reports AMX granted.
//
//go:noescape
func amxTile32x32(a *uint8, lda int, b0 *int8, b1 *int8, kblocks int, c *int32, ldc int, cfg *byte)

func init() {
	u8s8Asm = append(u8s8Asm, &Kernel{
		Name: "gemmAMX_32x32x64", ISA: cpu.ISAAMX, MR: 32, NR: 16, KB: 64,
		Available: func(f cpu.Features) bool { return f.AMXTile && f.AMXInt8 && f.AMX.Granted() },
		Accepts:   func(m, n, k int) bool { return k%64 == 0 },
		RunU8S8: func(g *GEMMU8S8) error {
			return runAMXU8S8(g, func(a *uint8, lda int, b0, b1 *int8, kb int, c *int32, ldc int) {
				amxTile32x32(a, lda, b0, b1, kb, c, ldc, &amxConfig[0])
			})
		},
	})
}
