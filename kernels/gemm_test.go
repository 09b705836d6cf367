package kernels

import (
	"errors"
	"math/rand/v2"
	"testing"
)

func TestPackS8Layout(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, c := range []struct{ n, k, nr int }{{1, 1, 16}, {17, 5, 16}, {50, 67, 48}, {64, 8, 64}} {
		ldb := c.k + 3
		b := make([]int8, c.n*ldb)
		for i := range b {
			b[i] = int8(r.IntN(256) - 128)
		}
		p, err := PackS8(c.n, c.k, b, ldb, c.nr)
		if err != nil {
			t.Fatal(err)
		}
		for j := 0; j < c.n; j++ {
			var s int32
			for q := 0; q < c.k; q++ {
				if p.At(j, q) != b[j*ldb+q] {
					t.Fatalf("%+v: W[%d][%d] packed %d, want %d", c, j, q, p.At(j, q), b[j*ldb+q])
				}
				s += int32(b[j*ldb+q])
			}
			if p.ColSum[j] != s {
				t.Fatalf("%+v: colsum[%d] = %d, want %d", c, j, p.ColSum[j], s)
			}
		}
		// Padding is zero.
		for j := c.n; j < p.Np; j++ {
			for q := 0; q < p.Kp; q++ {
				if p.At(j, q) != 0 {
					t.Fatalf("padding column %d not zero", j)
				}
			}
		}
	}
}

func TestGenericU8S8MatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	m, n, k := 9, 21, 13
	a := make([]uint8, m*k)
	for i := range a {
		a[i] = uint8(r.IntN(256))
	}
	b := make([]int8, n*k)
	for i := range b {
		b[i] = int8(r.IntN(255) - 127)
	}
	want := make([]int32, m*n)
	if err := GemmU8S8S32Ref(m, n, k, a, k, b, k, want, n); err != nil {
		t.Fatal(err)
	}
	p, _ := PackS8(n, k, b, k, 16)
	for _, threads := range []int{1, 2, 5} {
		got := make([]int32, m*n)
		g := &GEMMU8S8{M: m, N: n, K: k, A: a, Lda: k, B: p, Out: Out{S32: got, Ldc: n}, Threads: threads}
		if err := GenericU8S8.RunU8S8(g); err != nil {
			t.Fatal(err)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("threads=%d: [%d] = %d want %d", threads, i, got[i], want[i])
			}
		}
	}
}

func TestParallelRunsEveryTask(t *testing.T) {
	for _, threads := range []int{0, 1, 2, 7} {
		seen := make([]int32, 100)
		Parallel(threads, len(seen), func(i int) { seen[i]++ })
		for i, s := range seen {
			if s != 1 {
				t.Fatalf("threads=%d: task %d ran %d times", threads, i, s)
			}
		}
	}
}

func TestAliasedResidualRefused(t *testing.T) {
	p, _ := PackS8(4, 4, make([]int8, 16), 4, 16)
	out := make([]float32, 8)
	g := &GEMMU8S8{M: 2, N: 4, K: 4, A: make([]uint8, 8), Lda: 4, B: p,
		Ep: &Epilogue{ActScale: 1, Residual: out[2:]}, Out: Out{F32: out, Ldc: 4}}
	if err := GenericU8S8.RunU8S8(g); !errors.Is(err, ErrShape) {
		t.Fatalf("residual aliasing the output: got %v, want ErrShape", err)
	}
	pf, _ := PackF32(4, 4, make([]float32, 16), 4, 16)
	c := make([]float32, 8)
	gf := &GEMMF32{M: 2, N: 4, K: 4, A: c, Lda: 4, B: pf, C: c, Ldc: 4}
	if err := GenericF32.Run(gf); !errors.Is(err, ErrShape) {
		t.Fatalf("a aliasing c: got %v, want ErrShape", err)
	}
}
