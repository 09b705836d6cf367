package kernels

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"
)

func TestPackF32Into(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 1))
	var into, intoT PackedF32
	// One PackedF32 reused over shapes that grow and shrink, its storage
	// poisoned with NaN between uses so stale padding would show.
	for _, c := range [][3]int{{0, 4, 16}, {1, 1, 16}, {128, 64, 64}, {100, 64, 64}, {64, 128, 64}, {17, 3, 32}, {300, 77, 48}, {5, 200, 16}, {128, 64, 32}} {
		n, k, nr := c[0], c[1], c[2]
		ldw := k + r.IntN(5)
		w := randF32(r, max(n*ldw, 1), 1, 0)
		want, err := PackF32(n, k, w, ldw, nr)
		if err != nil {
			t.Fatal(err)
		}
		// The transpose of w's [n][k] block, with its own stride.
		ldwt := n + r.IntN(5)
		wt := make([]float32, max(k*ldwt, 1))
		for j := 0; j < n; j++ {
			for q := 0; q < k; q++ {
				wt[q*ldwt+j] = w[j*ldw+q]
			}
		}
		for _, p := range []*PackedF32{&into, &intoT} {
			full := p.Data[:cap(p.Data)]
			for i := range full {
				full[i] = float32(math.NaN())
			}
		}
		if err := PackF32Into(&into, n, k, w, ldw, nr); err != nil {
			t.Fatal(err)
		}
		if err := PackF32TInto(&intoT, n, k, wt, ldwt, nr); err != nil {
			t.Fatal(err)
		}
		for name, got := range map[string]*PackedF32{"into": &into, "transposed": &intoT} {
			if got.N != n || got.K != k || got.NR != nr || len(got.Data) != len(want.Data) {
				t.Fatalf("%s %v: shape %d %d %d len %d, want len %d", name, c, got.N, got.K, got.NR, len(got.Data), len(want.Data))
			}
			if len(got.Data) > 0 && uintptr(unsafe.Pointer(&got.Data[0]))%64 != 0 {
				t.Fatalf("%s %v: data not 64-byte aligned", name, c)
			}
			if i := bitsEqual(got.Data, want.Data); i >= 0 {
				t.Fatalf("%s %v: data[%d] = %v, want %v", name, c, i, got.Data[i], want.Data[i])
			}
			for i, v := range got.Data {
				if v != v {
					t.Fatalf("%s %v: stale data[%d]", name, c, i)
				}
			}
		}
	}
}

func TestPackF32IntoNoAllocs(t *testing.T) {
	w := make([]float32, 128*64)
	var p, pt PackedF32
	_ = PackF32Into(&p, 128, 64, w, 64, 64)
	_ = PackF32TInto(&pt, 64, 128, w, 64, 64)
	if a := testing.AllocsPerRun(10, func() {
		_ = PackF32Into(&p, 100, 64, w, 64, 64)
		_ = PackF32TInto(&pt, 64, 100, w, 64, 64)
	}); a != 0 {
		t.Fatalf("%v allocations per reuse, want 0", a)
	}
}

func TestPackF32IntoShapeErrors(t *testing.T) {
	var p PackedF32
	w := make([]float32, 10)
	for name, err := range map[string]error{
		"nr":       PackF32Into(&p, 2, 2, w, 2, 24),
		"ldw":      PackF32Into(&p, 2, 4, w, 3, 16),
		"short":    PackF32Into(&p, 3, 4, w, 4, 16),
		"t nr":     PackF32TInto(&p, 2, 2, w, 2, 0),
		"t ldwt":   PackF32TInto(&p, 4, 2, w, 3, 16),
		"t short":  PackF32TInto(&p, 4, 3, w, 4, 16),
		"negative": PackF32TInto(&p, -1, 3, w, 4, 16),
	} {
		if !errors.Is(err, ErrShape) {
			t.Fatalf("%s: err = %v, want ErrShape", name, err)
		}
	}
}
