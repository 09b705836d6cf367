//go:build amd64 && gc && !purego && !noasm

package kernels

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/int8bert/int8bert/cpu"
)

// TestCvtBF16Row holds the assembly row packer to its twin, packBF16Row
// (bf16DAZ), bit for bit: ties, NaNs, infinities, subnormals and the
// masked tail of every length.
func TestCvtBF16Row(t *testing.T) {
	if !cpu.X86.AVX512F || !cpu.X86.AVX512BW {
		t.Skipf("CPU lacks AVX512F/AVX512BW (%s): cannot run cvtBF16Row", cpu.X86)
	}
	r := rand.New(rand.NewPCG(5, 6))
	special := []uint32{0, 0x80000000, 0x7f800000, 0xff800000, 0x7f800001, 0xffc00000, 0x7fffffff,
		0x00000001, 0x807fffff, 0x007f8000, 0x007fffff, 0x00800000, 0x3f808000, 0x3f818000, 0x3f817fff,
		0x7f7fffff, 0xff7f8000, 0x7f7f8000, 0x3f800000}
	for n := 0; n <= 100; n++ {
		src := make([]float32, n+1)
		for i := range src {
			switch r.IntN(3) {
			case 0:
				src[i] = math.Float32frombits(special[r.IntN(len(special))])
			case 1:
				src[i] = math.Float32frombits(r.Uint32())
			default:
				// A tie or near-tie of the rounding.
				src[i] = math.Float32frombits(r.Uint32()&0xffff0000 | 0x8000 + uint32(r.IntN(3)) - 1)
			}
		}
		got := make([]uint16, n+8)
		want := make([]uint16, n+8)
		for i := range got {
			got[i], want[i] = 0xbeef, 0xbeef
		}
		if n > 0 {
			cvtBF16Row(n, &src[0], &got[0])
		}
		packBF16Row(want[:n], src[:n])
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("n=%d [%d] x=%#x: got %#x, want %#x", n, i, math.Float32bits(src[min(i, n)]), got[i], want[i])
			}
		}
	}
}
