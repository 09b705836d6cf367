package kernels

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// qkvRows makes n fused QKV rows (heads of d, row stride ld) with one
// all-zero head slice in each of Q, K and V (the scale-1 case).
func qkvRows(r *rand.Rand, n, heads, d, ld int) []float32 {
	h := heads * d
	x := make([]float32, max((n-1)*ld+3*h, 0))
	for i := range x {
		x[i] = float32(r.NormFloat64() * 2)
	}
	if n > 1 {
		for part := 0; part < 3; part++ {
			t, hd := r.IntN(n), r.IntN(heads)
			clear(x[t*ld+part*h+hd*d : t*ld+part*h+hd*d+d])
		}
	}
	return x
}

// newQKVQuant makes a QKVQuant for n tokens with its buffers filled with
// a sentinel, the K packs reserved for panels of nr.
func newQKVQuant(t *testing.T, n, heads, d, nr int) *QKVQuant {
	return newQKVQuantJ(t, n, heads, d, nr, false)
}

// newQKVQuantJ is newQKVQuant with, when joint, the packs of
// QKVQuant.ReserveKeys (one array: Rows's one-call path where D is 64).
func newQKVQuantJ(t *testing.T, n, heads, d, nr int, joint bool) *QKVQuant {
	h := heads * d
	a := &QKVQuant{Heads: heads, D: d, QMul: 0.125, Q: make([]uint8, n*h), Ldq: h,
		QScale: make([]float32, heads*n), KScale: make([]float32, heads*n), VBits: make([]uint32, heads*n),
		Lds: n, K: make([]PackedS8, heads)}
	for i := range a.Q {
		a.Q[i] = 0x5a
	}
	if joint {
		if err := a.ReserveKeys(n, nr); err != nil {
			t.Fatal(err)
		}
		return a
	}
	for i := range a.K {
		if err := a.K[i].ReserveKeys(n, d, nr); err != nil {
			t.Fatal(err)
		}
	}
	return a
}

// TestQKVQuantMatchesPerHead holds QKVQuant.Rows (every head of a token in
// one go) to the per-head functions it replaces, bit for bit: Q against
// QuantizeRowsU8Block (scales times QMul), K against PackQuantS8Into
// (data, column sums, scales), V's VScale against PackQuantS8TInto's
// scale and PackQuantS8TScaledInto's pack against its pack, on every
// element-wise path, the tokens quantized in two disjoint ranges, with
// the packs reserved one by one and on one array (the one-call path).
func TestQKVQuantMatchesPerHead(t *testing.T) {
	eltPaths(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(3, 7))
		for ci, c := range [][4]int{{1, 2, 64, 32}, {17, 4, 64, 64}, {64, 2, 16, 16}, {130, 3, 20, 48}, {33, 1, 7, 32}, {256, 16, 64, 32},
			{1, 2, 64, 32}, {17, 4, 64, 64}, {256, 16, 64, 32}, {50, 12, 64, 16}, {9, 17, 64, 32}, {64, 2, 16, 16}} {
			n, heads, d, nr := c[0], c[1], c[2], c[3]
			joint := ci >= 6
			h := heads * d
			ld := 3*h + r.IntN(5)
			x := qkvRows(r, n, heads, d, ld)
			a := newQKVQuantJ(t, n, heads, d, nr, joint)
			mid := r.IntN(n + 1)
			if err := a.Rows(x, ld, mid, n); err != nil {
				t.Fatal(err)
			}
			if err := a.Rows(x, ld, 0, mid); err != nil {
				t.Fatal(err)
			}
			for hd := 0; hd < heads; hd++ {
				q, qs := make([]uint8, n*d), make([]float32, n)
				if err := QuantizeRowsU8Block(q, d, qs, x[hd*d:], ld, n, d); err != nil {
					t.Fatal(err)
				}
				for i := 0; i < n; i++ {
					if got, want := a.QScale[hd*n+i], qs[i]*a.QMul; math.Float32bits(got) != math.Float32bits(want) {
						t.Fatalf("%v head %d token %d: q scale %v, want %v", c, hd, i, got, want)
					}
					if got, want := a.Q[i*h+hd*d:i*h+hd*d+d], q[i*d:i*d+d]; !slices.Equal(got, want) {
						t.Fatalf("%v head %d token %d: q %v, want %v", c, hd, i, got, want)
					}
				}
				var k PackedS8
				ks := make([]float32, n)
				if err := PackQuantS8Into(&k, ks, n, d, x[h+hd*d:], ld, nr); err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(a.K[hd].Data, k.Data) || !slices.Equal(a.K[hd].ColSum, k.ColSum) {
					t.Fatalf("%v head %d: k pack differs from PackQuantS8Into", c, hd)
				}
				if got := a.KScale[hd*n : hd*n+n]; !slices.Equal(got, ks) {
					t.Fatalf("%v head %d: k scales %v, want %v", c, hd, got, ks)
				}
				var v, vs PackedS8
				want, err := PackQuantS8TInto(&v, d, n, x[2*h+hd*d:], ld, nr)
				if err != nil {
					t.Fatal(err)
				}
				got := a.VScale(hd, 0, n)
				if math.Float32bits(got) != math.Float32bits(want) {
					t.Fatalf("%v head %d: v scale %v, want %v", c, hd, got, want)
				}
				if err := PackQuantS8TScaledInto(&vs, d, n, x[2*h+hd*d:], ld, nr, got); err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(vs.Data, v.Data) || vs.Kp != v.Kp || vs.Np != v.Np {
					t.Fatalf("%v head %d: scaled v pack differs from PackQuantS8TInto", c, hd)
				}
			}
		}
	})
}

// TestQKVQuantErrors checks that a NaN or an infinity is an ErrNonFinite
// naming its token, head and part, and that bad shapes are ErrShape, on
// every element-wise path.
func TestQKVQuantErrors(t *testing.T) {
	eltPaths(t, func(t *testing.T) {
		const n, heads = 9, 3
		r := rand.New(rand.NewPCG(1, 1))
		for _, dj := range []struct {
			d     int
			joint bool
		}{{16, false}, {64, false}, {64, true}} {
			d := dj.d
			h := heads * d
			for _, c := range []struct {
				part int
				name string
				v    float64
			}{{0, "q", math.NaN()}, {1, "k", math.Inf(1)}, {2, "v", math.Inf(-1)}} {
				x := qkvRows(r, n, heads, d, 3*h)
				x[5*3*h+c.part*h+2*d+3] = float32(c.v)
				a := newQKVQuantJ(t, n, heads, d, 16, dj.joint)
				err := a.Rows(x, 3*h, 0, n)
				if !errors.Is(err, ErrNonFinite) {
					t.Fatalf("d=%d %s: %v, want ErrNonFinite", d, c.name, err)
				}
				if want := "token 5 head 2 " + c.name + " col 3"; !strings.Contains(err.Error(), want) {
					t.Fatalf("d=%d %s: %q does not name %q", d, c.name, err, want)
				}
				if err := a.Rows(x, 3*h, 0, 5); err != nil { // the rows before it are fine
					t.Fatalf("d=%d %s: rows before the bad token: %v", d, c.name, err)
				}
			}
		}
		const d = 16
		h := heads * d
		x := qkvRows(r, n, heads, d, 3*h)
		for name, f := range map[string]func(a *QKVQuant) error{
			"ldx < 3h":     func(a *QKVQuant) error { return a.Rows(x, 3*h-1, 0, n) },
			"t1 > lds":     func(a *QKVQuant) error { return a.Rows(x, 3*h, 0, n+1) },
			"t0 > t1":      func(a *QKVQuant) error { return a.Rows(x, 3*h, 4, 3) },
			"short x":      func(a *QKVQuant) error { return a.Rows(x[:len(x)-1], 3*h, 0, n) },
			"short scales": func(a *QKVQuant) error { a.KScale = a.KScale[:len(a.KScale)-1]; return a.Rows(x, 3*h, 0, n) },
			"pack k":       func(a *QKVQuant) error { _ = a.K[1].ReserveKeys(n, d+4, 16); return a.Rows(x, 3*h, 0, n) },
			"pack n":       func(a *QKVQuant) error { _ = a.K[0].ReserveKeys(n-1, d, 16); return a.Rows(x, 3*h, 0, n) },
			"few packs":    func(a *QKVQuant) error { a.K = a.K[:2]; return a.Rows(x, 3*h, 0, n) },
		} {
			if err := f(newQKVQuant(t, n, heads, d, 16)); !errors.Is(err, ErrShape) {
				t.Errorf("%s: %v, want ErrShape", name, err)
			}
		}
		var p PackedS8
		if err := p.ReserveKeys(4, 16, 24); !errors.Is(err, ErrShape) {
			t.Errorf("reserve nr=24: %v, want ErrShape", err)
		}
		for _, s := range []float32{0, -1, float32(math.Inf(1)), float32(math.NaN())} {
			if err := PackQuantS8TScaledInto(&p, d, n, x[2*h:], 3*h, 16, s); !errors.Is(err, ErrShape) {
				t.Errorf("scaled pack, scale %v: %v, want ErrShape", s, err)
			}
		}
	})
}

// BenchmarkQKVQuant times the quantization of one BERT-large layer's Q, K
// and V maxima at 256 tokens (16 heads of 64): per head, as INT8 attention
// did it before QKVQuant (one head's slice of every row: strided), against
// QKVQuant.Rows (every head of a token at once, one call a token on
// AVX-512), V packed with the scale Rows found in both. Run pinned: taskset -c 1
// go test -run '^$' -bench QKVQuant ./kernels
func BenchmarkQKVQuant(b *testing.B) {
	const n, heads, d, nr = 256, 16, 64, 32
	h := heads * d
	r := rand.New(rand.NewPCG(7, 9))
	x := qkvRows(r, n, heads, d, 3*h)
	b.Run("per-head", func(b *testing.B) {
		q, qs, ks := make([]uint8, n*d), make([]float32, n), make([]float32, n)
		var k, v PackedS8
		for b.Loop() {
			for hd := 0; hd < heads; hd++ {
				if err := QuantizeRowsU8Block(q, d, qs, x[hd*d:], 3*h, n, d); err != nil {
					b.Fatal(err)
				}
				if err := PackQuantS8Into(&k, ks, n, d, x[h+hd*d:], 3*h, nr); err != nil {
					b.Fatal(err)
				}
				if _, err := PackQuantS8TInto(&v, d, n, x[2*h+hd*d:], 3*h, nr); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("tokens", func(b *testing.B) {
		a := &QKVQuant{Heads: heads, D: d, QMul: 0.125, Q: make([]uint8, n*h), Ldq: h,
			QScale: make([]float32, heads*n), KScale: make([]float32, heads*n), VBits: make([]uint32, heads*n), Lds: n}
		if err := a.ReserveKeys(n, nr); err != nil {
			b.Fatal(err)
		}
		var v PackedS8
		for b.Loop() {
			if err := a.Rows(x, 3*h, 0, n); err != nil {
				b.Fatal(err)
			}
			for hd := 0; hd < heads; hd++ {
				if err := PackQuantS8TScaledInto(&v, d, n, x[2*h+hd*d:], 3*h, nr, a.VScale(hd, 0, n)); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}

// TestQKVTokenTwin holds the AVX-512 one-call token quantization to its
// twin bit for bit: every word of tmp, Q's bytes and every byte of the K
// panels (words it must not write keep a sentinel), over head counts up
// to 16, every panel width, all-zero and subnormal slices, and a NaN or
// an infinity (the bits returned, nothing else compared).
func TestQKVTokenTwin(t *testing.T) {
	if !eltwiseAVX512() {
		t.Skipf("%s: the one-call token pass is AVX-512 only and this CPU (or build) runs without it: QKVQuant.Rows loops over the heads instead", t.Name())
	}
	r := rand.New(rand.NewPCG(6, 6))
	for _, heads := range []int{1, 2, 5, 12, 16} {
		for _, nr := range []int{16, 32, 64} {
			for trial := 0; trial < 5; trial++ {
				h := heads * 64
				x := make([]float32, 3*h)
				for i := range x {
					x[i] = float32(r.NormFloat64() * 2)
				}
				switch trial {
				case 1:
					clear(x[r.IntN(3)*h+r.IntN(heads)*64:][:64])
				case 2:
					for i := range x[h : h+64] {
						x[h+i] = math.Float32frombits(uint32(1 + r.IntN(50)))
					}
				case 3:
					x[r.IntN(3*h)] = float32(math.NaN())
				case 4:
					x[r.IntN(3*h)] = float32(math.Inf(-1))
				}
				kh := 64*nr + 8 // a head's pack, and a few bytes past it
				gq, wq := make([]uint8, h), make([]uint8, h)
				gk, wk := make([]int8, heads*kh), make([]int8, heads*kh)
				for i := range gk {
					gk[i], wk[i] = 0x55, 0x55
				}
				gt, wt := make([]uint32, 128), make([]uint32, 128)
				off := 4 * r.IntN(nr) // the key's column in its panel
				gb := eltQKVToken(gt, gq, gk[off:], x, heads, kh, nr*4, 0.125)
				wb := eltQKVTokenGeneric(wt, wq, wk[off:], x, heads, kh, nr*4, 0.125)
				if gb != wb {
					t.Fatalf("heads %d nr %d trial %d: bits %#x, twin %#x", heads, nr, trial, gb, wb)
				}
				if wb >= absMaxBitsLimit {
					continue
				}
				for i := range wt {
					if i%16 < heads && gt[i] != wt[i] {
						t.Fatalf("heads %d nr %d trial %d: tmp[%d] %#x, twin %#x", heads, nr, trial, i, gt[i], wt[i])
					}
				}
				if !slices.Equal(gq, wq) || !slices.Equal(gk, wk) {
					t.Fatalf("heads %d nr %d trial %d: bytes differ from the twin", heads, nr, trial)
				}
			}
		}
	}
}

// TestPackQuantS8TScaledRows: V packed range by range (chunks of 4 to 36
// tokens, in a shuffled order, one range on another goroutine) equals
// PackQuantS8TScaledInto bit for bit, on the AVX-512 and the Go element-
// wise paths, for lengths with and without a last partial group and
// panels wider than the head; bad ranges are errors.
func TestPackQuantS8TScaledRows(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	for _, generic := range []bool{false, true} {
		if !generic && !eltwiseAVX512() {
			t.Logf("%s: avx512 element-wise path not live here: the Go path only", t.Name())
			continue
		}
		func() {
			defer func(old bool) { eltwiseForceGeneric = old }(eltwiseForceGeneric)
			eltwiseForceGeneric = generic
			for _, c := range []struct{ n, k, nr, ld int }{{64, 256, 64, 3072}, {64, 37, 64, 200}, {32, 5, 64, 40}, {48, 1, 16, 48}, {64, 130, 32, 64}} {
				wt := make([]float32, c.k*c.ld)
				for i := range wt {
					wt[i] = float32(r.NormFloat64())
				}
				scale := float32(4.0 / 127)
				var want, got PackedS8
				if err := PackQuantS8TScaledInto(&want, c.n, c.k, wt, c.ld, c.nr, scale); err != nil {
					t.Fatal(err)
				}
				got.Data = make([]int8, len(want.Data)+64) // reused storage: every byte rewritten
				for i := range got.Data {
					got.Data[i] = 99
				}
				if err := got.ReserveT(c.n, c.k, c.nr); err != nil {
					t.Fatal(err)
				}
				var bounds []int
				for q := 0; q < c.k; q += 4 * (1 + r.IntN(9)) {
					bounds = append(bounds, q)
				}
				bounds = append(bounds, c.k)
				order := r.Perm(len(bounds) - 1)
				done := make(chan error, 1)
				go func() {
					done <- PackQuantS8TScaledRows(&got, bounds[order[0]], bounds[order[0]+1], wt, c.ld, scale)
				}()
				for _, i := range order[1:] {
					if err := PackQuantS8TScaledRows(&got, bounds[i], bounds[i+1], wt, c.ld, scale); err != nil {
						t.Fatal(err)
					}
				}
				if err := <-done; err != nil {
					t.Fatal(err)
				}
				if got.N != want.N || got.K != want.K || got.Kp != want.Kp || got.Np != want.Np || got.NR != want.NR || len(got.ColSum) != 0 {
					t.Fatalf("generic %v %+v: shape %d %d %d %d %d, want %d %d %d %d %d", generic, c, got.N, got.K, got.Kp, got.Np, got.NR, want.N, want.K, want.Kp, want.Np, want.NR)
				}
				if !slices.Equal(got.Data, want.Data) {
					t.Fatalf("generic %v %+v: ranges %v: packs differ", generic, c, bounds)
				}
			}
		}()
	}
	var p PackedS8
	wt := make([]float32, 64*10)
	if err := p.ReserveT(64, 10, 64); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		q0, q1 int
		scale  float32
	}{{2, 8, 1}, {0, 6, 1}, {8, 12, 1}, {-4, 4, 1}, {4, 0, 1}, {0, 4, 0}, {0, 4, float32(math.Inf(1))}, {0, 4, float32(math.NaN())}} {
		if err := PackQuantS8TScaledRows(&p, c.q0, c.q1, wt, 64, c.scale); !errors.Is(err, ErrShape) {
			t.Errorf("rows [%d,%d) scale %v: err %v, want ErrShape", c.q0, c.q1, c.scale, err)
		}
	}
	if err := PackQuantS8TScaledRows(&p, 0, 10, wt[:64*9], 64, 1); !errors.Is(err, ErrShape) {
		t.Errorf("short wt: err %v, want ErrShape", err)
	}
	if err := p.ReserveT(64, 10, 24); !errors.Is(err, ErrShape) {
		t.Errorf("nr 24: err %v, want ErrShape", err)
	}
}
