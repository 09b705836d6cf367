package kernels

import (
	"math/rand/v2"
	"testing"

	"github.com/int8bert/int8bert/cpu"
)

func amxProblem(m, n, k int, seed uint64) ([]uint8, []int8, []int32) {
	r := rand.New(rand.NewPCG(seed, 99))
	a := make([]uint8, m*k)
	for i := range a {
		a[i] = uint8(r.IntN(256))
	}
	b := make([]int8, n*k)
	for i := range b {
		b[i] = int8(r.IntN(256) - 128)
	}
	want := make([]int32, m*n)
	if err := GemmU8S8S32Ref(m, n, k, a, k, b, k, want, n); err != nil {
		panic(err)
	}
	return a, b, want
}

// TestAMXDriverWithTwin runs the AMX driver (padding, panel pairs, tails,
// threads) with the tile kernel's Go twin, so it is checked on every host.
func TestAMXDriverWithTwin(t *testing.T) {
	for _, s := range []struct{ m, n, k int }{{1, 1, 64}, {32, 32, 64}, {33, 17, 128}, {70, 80, 192}} {
		a, b, want := amxProblem(s.m, s.n, s.k, uint64(s.m))
		p, err := PackS8(s.n, s.k, b, s.k, 16)
		if err != nil {
			t.Fatal(err)
		}
		for _, threads := range []int{1, 3} {
			got := make([]int32, s.m*s.n)
			g := &GEMMU8S8{M: s.m, N: s.n, K: s.k, A: a, Lda: s.k, B: p, Out: Out{S32: got, Ldc: s.n}, Threads: threads}
			if err := runAMXU8S8(g, amxTileGo); err != nil {
				t.Fatal(err)
			}
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("%+v threads=%d: [%d] = %d, want %d", s, threads, i, got[i], want[i])
				}
			}
		}
	}
	if amxConfig[0] != 1 || amxConfig[16] != 64 || amxConfig[48] != 16 {
		t.Errorf("tile config %v", amxConfig)
	}
}

// TestAMXKernel runs the assembly AMX kernel where the CPU has AMX and the
// kernel granted permission; elsewhere it says why it did not run.
func TestAMXKernel(t *testing.T) {
	var k *Kernel
	for _, c := range U8S8Kernels() {
		if c.ISA == "amx" {
			k = c
		}
	}
	if k == nil {
		t.Skip("no AMX kernel in this build (noasm, purego or not amd64)")
	}
	if !k.Available(cpu.X86) {
		t.Skipf("AMX kernel not run: AMX-TILE=%v AMX-INT8=%v, permission %s", cpu.X86.AMXTile, cpu.X86.AMXInt8, cpu.X86.AMX)
	}
	for _, s := range []struct{ m, n, k int }{{32, 32, 64}, {45, 50, 768}} {
		a, b, want := amxProblem(s.m, s.n, s.k, 7)
		p, _ := PackS8(s.n, s.k, b, s.k, 16)
		got := make([]int32, s.m*s.n)
		g := &GEMMU8S8{M: s.m, N: s.n, K: s.k, A: a, Lda: s.k, B: p, Out: Out{S32: got, Ldc: s.n}, Threads: 1}
		if err := k.RunU8S8(g); err != nil {
			t.Fatal(err)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("%+v: [%d] = %d, want %d", s, i, got[i], want[i])
			}
		}
	}
}
