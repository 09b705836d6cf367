package kernels

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestPackBF16Into: PackBF16Into and PackBF16TInto (of the transpose)
// give PackBF16's bits, reusing one PackedBF16 whose storage is poisoned
// between uses so that stale padding would show.
func TestPackBF16Into(t *testing.T) {
	r := rand.New(rand.NewPCG(43, 1))
	var into, intoT PackedBF16
	for _, c := range [][3]int{{0, 4, 16}, {1, 1, 16}, {128, 64, 64}, {100, 64, 48}, {64, 128, 32}, {17, 3, 32}, {300, 77, 48}, {5, 200, 16}, {64, 511, 64}} {
		n, k, nr := c[0], c[1], c[2]
		ldw := k + r.IntN(5)
		w := randF32(r, max(n*ldw, 1), 1, 0)
		w[0] = 1e-40 // a subnormal: stored as zero
		want, err := PackBF16(n, k, w, ldw, nr)
		if err != nil {
			t.Fatal(err)
		}
		ldwt := n + r.IntN(5)
		wt := make([]float32, max(k*ldwt, 1))
		for j := range n {
			for q := range k {
				wt[q*ldwt+j] = w[j*ldw+q]
			}
		}
		for _, p := range []*PackedBF16{&into, &intoT} {
			for i := range p.Data[:cap(p.Data)] {
				p.Data[:cap(p.Data)][i] = 0x7fc1 // a NaN
			}
		}
		if err := PackBF16Into(&into, n, k, w, ldw, nr); err != nil {
			t.Fatal(err)
		}
		if err := PackBF16TInto(&intoT, n, k, wt, ldwt, nr); err != nil {
			t.Fatal(err)
		}
		for _, got := range []struct {
			name string
			p    *PackedBF16
		}{{"into", &into}, {"transposed", &intoT}} {
			if got.p.N != n || got.p.K != k || got.p.NR != nr || !slices.Equal(got.p.Data, want.Data) {
				t.Fatalf("%s n=%d k=%d nr=%d: packed differs from PackBF16", got.name, n, k, nr)
			}
		}
	}
	bad := []error{
		PackBF16Into(&into, 2, 3, make([]float32, 5), 3, 16),  // w short
		PackBF16Into(&into, 2, 3, make([]float32, 6), 2, 16),  // ldw < k
		PackBF16Into(&into, 2, 3, make([]float32, 6), 3, 8),   // nr
		PackBF16TInto(&into, 3, 2, make([]float32, 5), 3, 16), // wt short
		PackBF16TInto(&into, 3, 2, make([]float32, 6), 2, 16), // ldwt < n
		PackBF16TInto(&into, -1, 2, nil, 1, 16),
	}
	for i, err := range bad {
		if !errors.Is(err, ErrShape) {
			t.Errorf("bad case %d: %v, want ErrShape", i, err)
		}
	}
}
