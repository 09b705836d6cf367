package kernels

import (
	"math/rand/v2"
	"testing"

	"github.com/int8bert/int8bert/cpu"
)

// TestAVX2ExactOnFullRange: full-range u8 x s8 data (where VPMADDUBSW
// would saturate) must give the exact int32 result on the AVX2 path.
func TestAVX2ExactOnFullRange(t *testing.T) {
	var k *Kernel
	for _, c := range U8S8Kernels() {
		if c.ISA == "avx2" {
			k = c
		}
	}
	if k == nil {
		t.Skip("no AVX2 kernel in this build (noasm, purego or not amd64)")
	}
	if !k.Available(cpu.X86) {
		t.Skipf("this CPU lacks AVX2 (or it is disabled): %s", cpu.X86)
	}
	if k.Available(cpu.Features{}) {
		t.Error("the AVX2 kernel claims to run on a CPU without AVX2")
	}
	r := rand.New(rand.NewPCG(11, 12))
	for _, s := range []struct{ m, n, k int }{{1, 1, 1}, {2, 16, 4}, {3, 17, 5}, {7, 33, 67}, {17, 48, 259}} {
		a := make([]uint8, s.m*(s.k+1))
		for i := range a {
			a[i] = 255 - uint8(r.IntN(3))
		}
		b := make([]int8, s.n*s.k)
		for i := range b {
			b[i] = int8(-128 + r.IntN(2)*255)
		}
		want := make([]int32, s.m*s.n)
		if err := GemmU8S8S32Ref(s.m, s.n, s.k, a, s.k+1, b, s.k, want, s.n); err != nil {
			t.Fatal(err)
		}
		p, err := PackS8(s.n, s.k, b, s.k, 16)
		if err != nil {
			t.Fatal(err)
		}
		for _, threads := range []int{1, 2} {
			got := make([]int32, s.m*s.n)
			g := &GEMMU8S8{M: s.m, N: s.n, K: s.k, A: a, Lda: s.k + 1, B: p, Out: Out{S32: got, Ldc: s.n}, Threads: threads}
			if err := k.RunU8S8(g); err != nil {
				t.Fatal(err)
			}
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("%+v threads=%d: [%d] = %d, want %d", s, threads, i, got[i], want[i])
				}
			}
		}
	}
}

// TestPanels16DriversAllocs wants the drivers of runPanels16 (AVX2, int16
// and AVX-VNNI) to allocate nothing on one thread, with an s32 and a
// float32 output and a K%4 tail: they run the task on the calling
// goroutine and take their scratch from pools, and INT8 attention calls
// them many times a pass (models/encoder's TestAttentionInt8Allocs).
func TestPanels16DriversAllocs(t *testing.T) {
	if raceOn {
		t.Skip("the race detector's sync.Pool drops a quarter of what is put back")
	}
	const m, n, k = 13, 40, 67
	a, p, cs, bias := vnniBenchOperands(t, m, k, n, 16)
	ep := &Epilogue{ZeroPoint: 3, ColSum: make([]int32, n), ActScale: 0.5, ColScale: cs, Bias: bias, Act: ActReLU}
	f := cpu.X86
	for _, d := range []struct {
		name string
		run  func(*GEMMU8S8) error
		ok   bool
	}{
		{"avx2", runAVX2U8S8, f.AVX2},
		{"avx2wide", runAVX2WideU8S8, f.AVX2},
		{"avx512wide", runAVX512WideU8S8, f.AVX512F && f.AVX512BW},
		{"avxvnni", runAVXVNNIU8S8, f.AVX2 && f.AVXVNNI},
	} {
		if vnniAsm && !d.ok {
			t.Logf("%s: skipped, this CPU cannot run it (or it is disabled): %s", d.name, f)
			continue
		}
		for _, g := range []*GEMMU8S8{
			{M: m, N: n, K: k, A: a, Lda: k, B: p, Out: Out{S32: make([]int32, m*n), Ldc: n}, Threads: 1},
			{M: m, N: n, K: k, A: a, Lda: k, B: p, Out: Out{F32: make([]float32, m*n), Ldc: n}, Ep: ep, Threads: 1},
		} {
			if err := d.run(g); err != nil {
				t.Fatalf("%s: %v", d.name, err)
			}
			if allocs := testing.AllocsPerRun(50, func() { _ = d.run(g) }); allocs > 0 {
				t.Errorf("%s (s32 output %v): %.1f allocations a call on one thread, want 0", d.name, g.Out.S32 != nil, allocs)
			}
		}
	}
}
