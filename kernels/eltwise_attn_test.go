package kernels

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// TestPackF32IntoPaths checks PackF32Into on both paths (the AVX-512 16x16
// transpose and its Go twin) against PackF32, bit for bit (NaN payloads
// included: the pack only moves data), over shapes with and without tails
// in n and k and with every panel width.
func TestPackF32IntoPaths(t *testing.T) {
	eltPaths(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(5, 16))
		var into PackedF32
		for _, c := range [][3]int{{256, 64, 32}, {256, 64, 16}, {256, 64, 64}, {16, 16, 16}, {15, 16, 16}, {17, 17, 16},
			{33, 15, 48}, {100, 80, 32}, {64, 1, 64}, {48, 200, 48}, {31, 47, 16}, {1, 16, 16}, {0, 16, 16}, {16, 0, 16}} {
			n, k, nr := c[0], c[1], c[2]
			ldw := k + r.IntN(20)
			w := make([]float32, max((n-1)*ldw+k, 1))
			for i := range w {
				w[i] = math.Float32frombits(r.Uint32()) // any bits: NaNs with payloads too
			}
			want, err := PackF32(n, k, w, ldw, nr)
			if err != nil {
				t.Fatal(err)
			}
			full := into.Data[:cap(into.Data)]
			for i := range full {
				full[i] = float32(math.NaN())
			}
			if err := PackF32Into(&into, n, k, w, ldw, nr); err != nil {
				t.Fatal(err)
			}
			if len(into.Data) != len(want.Data) {
				t.Fatalf("%v: len %d, want %d", c, len(into.Data), len(want.Data))
			}
			for i := range want.Data {
				if math.Float32bits(into.Data[i]) != math.Float32bits(want.Data[i]) {
					t.Fatalf("%v: data[%d] bits %#x, want %#x", c, i, math.Float32bits(into.Data[i]), math.Float32bits(want.Data[i]))
				}
			}
		}
	})
}

// TestPackT16Guard checks that the transpose writes only its block.
func TestPackT16Guard(t *testing.T) {
	eltPaths(t, func(t *testing.T) {
		const nblk, ldw, ldd = 3, 53, 24
		w := make([]float32, 15*ldw+16*nblk)
		for i := range w {
			w[i] = float32(i)
		}
		dst, check := guarded((16*nblk-1)*ldd+16, float32(-7))
		eltImpl().packT16(dst, w, nblk, ldw, ldd)
		check(t)
		for q := 0; q < 16*nblk; q++ {
			for r := 0; r < ldd && q*ldd+r < len(dst); r++ {
				want := float32(-7)
				if r < 16 {
					want = w[r*ldw+q]
				}
				if dst[q*ldd+r] != want {
					t.Fatalf("dst[%d*%d+%d] = %v, want %v", q, ldd, r, dst[q*ldd+r], want)
				}
			}
		}
	})
}

// TestExpMatchesTwin compares the vector exp (through eltExpSum with m = 0)
// with its Go twin bit for bit on a dense grid of [-110, 0.5], special
// values and random arguments, and the twin with float64 in units in the
// last place.
func TestExpMatchesTwin(t *testing.T) {
	var xs []float32
	for x := float32(-110); x <= 0.5; x += 1.0 / 1024 {
		xs = append(xs, x)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 1 << 16 {
		xs = append(xs, float32(-r.Float64()*104), -float32(r.ExpFloat64()*1e-3))
	}
	xs = append(xs, 0, float32(math.Copysign(0, -1)), float32(math.Inf(-1)), float32(math.NaN()), -math.MaxFloat32, -103.97, -87.33, -87.34, 1e-30, -1e-30)
	twin := make([]float32, len(xs))
	for i, x := range xs {
		twin[i] = eltExp(x)
	}
	if eltwiseAVX512() {
		got := make([]float32, len(xs))
		eltExpSum(got, xs, 0)
		if k := bitsEqual(got, twin); k >= 0 {
			t.Fatalf("exp(%v): asm %v (%#x), twin %v (%#x)", xs[k], got[k], math.Float32bits(got[k]), twin[k], math.Float32bits(twin[k]))
		}
	} else {
		t.Log("avx512 element-wise path not live: twin only")
	}
	var worst float64
	for i, x := range xs {
		if x != x || x < -87.3 { // NaN; subnormal or zero results
			continue
		}
		want := math.Exp(float64(x))
		ulp := float64(math.Nextafter32(float32(want), float32(math.Inf(1))) - float32(want))
		worst = max(worst, math.Abs(float64(twin[i])-want)/ulp)
	}
	t.Logf("max error %.3g ulp (normal results)", worst)
	if worst > 2 {
		t.Fatalf("exp error %.3g ulp", worst)
	}
}

// TestSoftmaxScaledRows checks the fused multi-row SoftmaxScaled: the
// AVX-512 kernel against its twin bit for bit (outputs and errors) over
// odd and even row counts, row lengths with tails, masks with -Inf and
// finfo.min, rows fully masked by -Inf values at either place of a pair,
// rows in error, and aliasing; and the result against float64 softmax.
func TestSoftmaxScaledRows(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	inf := float32(math.Inf(-1))
	for _, rows := range []int{1, 2, 3, 4, 7} {
		for _, n := range []int{1, 5, 16, 17, 31, 32, 33, 64, 100, 256, 257} {
			for variant := 0; variant < 6; variant++ {
				x := randF32(r, rows*n, 10, 0)
				var mask []float32
				if variant%2 == 1 {
					mask = make([]float32, n)
					for j := n - n/4; j < n; j++ {
						mask[j] = -math.MaxFloat32
					}
					if n > 3 {
						mask[2] = inf
					}
				}
				switch variant / 2 {
				case 1: // a row of -Inf (zeros out), at a varying place
					row := r.IntN(rows)
					for j := 0; j < n; j++ {
						x[row*n+j] = inf
					}
				case 2: // a NaN or +Inf: an error
					bad := []float32{float32(math.NaN()), float32(math.Inf(1))}[r.IntN(2)]
					x[r.IntN(rows*n)] = bad
				}
				name := fmt.Sprintf("%dx%d/v%d", rows, n, variant)
				scale := float32(0.125)
				run := func(generic, inPlace bool) ([]float32, error) {
					var d []float32
					var err error
					withPath(generic, func() {
						if inPlace {
							d = append([]float32(nil), x...)
							err = SoftmaxScaled(d, d, rows, n, scale, mask)
						} else {
							d = make([]float32, rows*n)
							err = SoftmaxScaled(d, x, rows, n, scale, mask)
						}
					})
					return d, err
				}
				g, ge := run(true, false)
				g2, ge2 := run(true, true)
				if fmt.Sprint(ge) != fmt.Sprint(ge2) || (ge == nil && bitsEqual(g, g2) >= 0) {
					t.Fatalf("%s: generic in place differs: %v vs %v", name, ge, ge2)
				}
				if eltwiseAVX512() {
					for _, inPlace := range []bool{false, true} {
						a, ae := run(false, inPlace)
						if fmt.Sprint(ae) != fmt.Sprint(ge) {
							t.Fatalf("%s in place %v: errors differ: asm %v, twin %v", name, inPlace, ae, ge)
						}
						want := map[bool][]float32{false: g, true: g2}[inPlace]
						if k := bitsEqual(a, want); k >= 0 {
							t.Fatalf("%s in place %v: dst[%d] asm %v, twin %v", name, inPlace, k, a[k], want[k])
						}
					}
				}
				if variant/2 == 2 {
					if ge == nil {
						t.Fatalf("%s: no error", name)
					}
					continue
				}
				if ge != nil {
					t.Fatalf("%s: %v", name, ge)
				}
				// Against float64 softmax of the float32 scores x*scale+mask.
				for i := 0; i < rows; i++ {
					s := make([]float64, n)
					m := math.Inf(-1)
					for j := range s {
						v := x[i*n+j] * scale
						if mask != nil {
							v += mask[j]
						}
						s[j] = float64(v)
						m = max(m, s[j])
					}
					var sum float64
					for j := range s {
						sum += math.Exp(s[j] - m)
					}
					for j := range s {
						want := math.Exp(s[j]-m) / sum
						if math.IsInf(m, -1) {
							want = 0
						}
						got := float64(g[i*n+j])
						if math.Abs(got-want) > want*(1e-6+1.2e-7*math.Abs(s[j]-m))+1e-37 {
							t.Fatalf("%s: row %d col %d: %v, want %v", name, i, j, got, want)
						}
					}
				}
			}
		}
	}
}

// TestSumS8 checks the eight-bytes-at-a-time sum against a plain loop.
func TestSumS8(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 8))
	for _, n := range []int{0, 1, 7, 8, 9, 64, 511, 512, 513, 1024, 4099} {
		x := make([]int8, n)
		for i := range x {
			x[i] = int8(r.IntN(256) - 128)
			if n == 1024 {
				x[i] = -128
			}
			if n == 4099 {
				x[i] = 127
			}
		}
		var want int32
		for _, v := range x {
			want += int32(v)
		}
		if got := sumS8(x); got != want {
			t.Fatalf("n=%d: sumS8 = %d, want %d", n, got, want)
		}
	}
}

// TestExpQuantU8Twin holds the fused AVX-512 pass of SoftmaxU8 to its twin
// bit for bit: the bytes, their sum and the non-finite flag, over lengths
// with and without tails, rows whose maximum is m, rows with masked
// (-MaxFloat32) and non-finite values, and m 30 under the maximum
// (exponentials above 255, clamped).
func TestExpQuantU8Twin(t *testing.T) {
	if !eltwiseAVX512() {
		t.Skipf("%s: the fused pass is AVX-512 only and this CPU (or build) runs without it: the three passes run instead", t.Name())
	}
	r := rand.New(rand.NewPCG(3, 10))
	for n := 0; n <= 140; n++ {
		for trial := 0; trial < 4; trial++ {
			x := make([]float32, n)
			m := float32(math.Inf(-1))
			for j := range x {
				x[j] = float32(r.NormFloat64() * 4)
				if trial == 1 && j%5 == 2 {
					x[j] = -math.MaxFloat32
				}
				m = max(m, x[j])
			}
			if trial == 2 && n > 0 {
				x[r.IntN(n)] = float32(math.NaN())
			}
			if trial == 3 {
				m -= 10 // exponentials above 1 (under 2^31): clamped to 255
			}
			if n == 0 {
				m = 0
			}
			sc := float32(1)
			if trial == 1 || trial == 2 {
				sc = 0.37 // a row scale folded into the exponent
			}
			a, cc, _ := eltExpU8Args(m, sc)
			got, want := make([]uint8, n), make([]uint8, n)
			gs, gb := eltExpQuantU8(got, x, a, cc)
			ws, wb := eltExpQuantU8Generic(want, x, a, cc)
			if gs != ws || gb != wb || string(got) != string(want) {
				t.Fatalf("n=%d trial %d: asm (sum %d, bits %#x) %v, twin (sum %d, bits %#x) %v", n, trial, gs, gb, got, ws, wb, want)
			}
		}
	}
}

// TestPackQuantKRowTwin holds the one-call AVX-512 key pack to its twin
// bit for bit: the scale, the column sum, the bits and every byte of the
// panel (bytes it must not write are checked against a sentinel), over
// lengths with and without tails, all-zero and subnormal rows, and NaN.
func TestPackQuantKRowTwin(t *testing.T) {
	if !eltwiseAVX512() {
		t.Skipf("%s: the one-call key pack is AVX-512 only and this CPU (or build) runs without it: the separate passes run instead", t.Name())
	}
	r := rand.New(rand.NewPCG(9, 4))
	for k := 0; k <= 100; k++ {
		for trial := 0; trial < 5; trial++ {
			x := make([]float32, k)
			for j := range x {
				switch trial {
				case 1:
					x[j] = 0
				case 2:
					x[j] = math.Float32frombits(uint32(1 + r.IntN(50))) // subnormal: scale 0 -> 1
				default:
					x[j] = float32(r.NormFloat64() * 3)
				}
			}
			if trial == 3 && k > 0 {
				x[r.IntN(k)] = float32(math.NaN())
			}
			if trial == 4 && k > 0 {
				x[r.IntN(k)] = float32(math.Inf(-1))
			}
			stride := 64 + 16*(trial%3)
			size := ((k+3)/4+1)*stride + 8
			got, want := make([]int8, size), make([]int8, size)
			for i := range got {
				got[i], want[i] = 0x55, 0x55
			}
			gs, gc, gb := eltPackQuantKRow(got, x, stride)
			ws, wc, wb := eltPackQuantKRowGeneric(want, x, stride)
			if gb != wb || (wb < absMaxBitsLimit && (math.Float32bits(gs) != math.Float32bits(ws) || gc != wc)) {
				t.Fatalf("k=%d trial %d: asm (%v, %d, %#x), twin (%v, %d, %#x)", k, trial, gs, gc, gb, ws, wc, wb)
			}
			if wb >= absMaxBitsLimit {
				continue
			}
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("k=%d trial %d stride %d: byte %d: asm %d, twin %d", k, trial, stride, i, got[i], want[i])
				}
			}
		}
	}
}

// TestPackQuantVT4Twin holds the AVX-512 four-key Vᵀ pack to its twin bit
// for bit, every byte of the destination included (the words of other
// groups and panels hold a sentinel and must keep it), over channel
// counts with and without tails and every panel width.
func TestPackQuantVT4Twin(t *testing.T) {
	if !eltwiseAVX512() {
		t.Skipf("%s: the four-key Vᵀ pack is AVX-512 only and this CPU (or build) runs without it: the Go loop runs instead", t.Name())
	}
	r := rand.New(rand.NewPCG(2, 8))
	for _, nr := range []int{16, 32, 48, 64} {
		for n := 1; n <= 130; n++ {
			var rows [4][]float32
			for i := range rows {
				rows[i] = make([]float32, n)
				for j := range rows[i] {
					rows[i][j] = float32(r.NormFloat64() * 40)
				}
			}
			panel := nr * 12 // a panel of 12 keys' words
			size := ((n+nr-1)/nr)*panel + 64
			got, want := make([]int8, size), make([]int8, size)
			for i := range got {
				got[i], want[i] = 0x55, 0x55
			}
			eltPackQuantVT4(got, rows[0], rows[1], rows[2], rows[3], 1.7, nr, panel)
			eltPackQuantVT4Generic(want, rows[0], rows[1], rows[2], rows[3], 1.7, nr, panel)
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("nr %d n %d: byte %d: asm %d, twin %d", nr, n, i, got[i], want[i])
				}
			}
		}
	}
}

// TestExpU8Accuracy holds eltExpU8 (the low-degree 255*exp of INT8
// attention's probabilities) to float64 on a dense grid of [-20, 0]: a
// relative error under 3e-6 down to -16, below which it is under half a
// u8 step (rounds to 0), and a byte that is the correctly rounded one or
// a neighbour, never further.
func TestExpU8Accuracy(t *testing.T) {
	worst := 0.0
	for x := float32(-30); x <= 0; x += 1.0 / 4096 {
		got := float64(eltExpU8(x))
		want := 255 * math.Exp2(float64(x))
		if x >= eltExpU8Min {
			rel := math.Abs(got-want) / want
			worst = max(worst, rel)
			if rel > 3e-6 {
				t.Fatalf("eltExpU8(%v) = %v, want %v (relative error %.3g)", x, got, want, rel)
			}
		} else if got >= 0.5 {
			t.Fatalf("eltExpU8(%v) = %v: rounds above 0", x, got)
		}
		if d := math.Abs(math.RoundToEven(got) - math.RoundToEven(want)); d > 1 {
			t.Fatalf("eltExpU8(%v): byte %v, correctly rounded %v", x, math.RoundToEven(got), math.RoundToEven(want))
		}
	}
	if f := eltExpU8(float32(math.NaN())); f == f {
		t.Fatalf("eltExpU8(NaN) = %v", f)
	}
	t.Logf("worst relative error %.3g", worst)
}

// softmaxU8Rows makes rows x n scores for the softmax tests: normal
// values, with row special (if in range) all -Inf and, at bad (if in
// range), a NaN or +Inf (poison).
func softmaxU8Rows(r *rand.Rand, rows, n, special, bad int, poison float32) []float32 {
	x := make([]float32, rows*n)
	for i := range x {
		x[i] = float32(r.NormFloat64() * 3)
	}
	if special >= 0 && special < rows {
		for j := 0; j < n; j++ {
			x[special*n+j] = float32(math.Inf(-1))
		}
	}
	if bad >= 0 && bad < rows*n {
		x[bad] = poison
	}
	return x
}

// TestSoftmaxU8RowsTwin holds the AVX-512 one-call row loop of SoftmaxU8
// to its twin bit for bit: bytes, scales, the scores it leaves (the mask
// added), the row it stops at and the bits it returns, with and without a
// mask and row scales, over lengths with tails, rows all -Inf, NaN or +Inf
// values and a row scale that takes the scores past float32's range.
func TestSoftmaxU8RowsTwin(t *testing.T) {
	if !eltwiseAVX512() {
		t.Skipf("%s: the one-call row loop is AVX-512 only and this CPU (or build) runs without it: SoftmaxU8's row steps run instead", t.Name())
	}
	r := rand.New(rand.NewPCG(4, 4))
	for _, n := range []int{1, 15, 16, 17, 64, 100, 256} {
		for trial := 0; trial < 8; trial++ {
			const rows, ldd = 7, 300
			special, bad, poison := -1, -1, float32(0)
			switch trial {
			case 2:
				special = 3
			case 3:
				bad, poison = 4*n+r.IntN(n), float32(math.NaN())
			case 4:
				bad, poison = 2*n+r.IntN(n), float32(math.Inf(1))
			case 5:
				special, bad, poison = 0, 5*n, float32(math.NaN())
			}
			x := softmaxU8Rows(r, rows, n, special, bad, poison)
			var mask []float32
			if trial%2 == 1 {
				mask = make([]float32, n)
				for j := range mask {
					if r.IntN(4) == 0 {
						mask[j] = -10000
					}
				}
			}
			var xscale []float32
			if trial == 0 || trial == 3 || trial >= 6 {
				xscale = make([]float32, rows)
				for i := range xscale {
					xscale[i] = float32(0.01 + r.Float64())
				}
				if trial == 7 {
					xscale[1] = math.MaxFloat32 // s*log2e overflows
				}
			}
			gx, wx := slices.Clone(x), slices.Clone(x)
			gd, wd := make([]uint8, (rows-1)*ldd+n), make([]uint8, (rows-1)*ldd+n)
			gs, ws := make([]float32, rows), make([]float32, rows)
			gr, gb := eltSoftmaxU8Rows(gd, ldd, gs, gx, n, mask, xscale)
			wr, wb := eltSoftmaxU8RowsGeneric(wd, ldd, ws, wx, n, mask, xscale)
			if gr != wr || gb != wb {
				t.Fatalf("n=%d trial %d: asm stops at row %d bits %#x, twin at %d bits %#x", n, trial, gr, gb, wr, wb)
			}
			if !slices.Equal(gd, wd) || !slices.Equal(gs, ws) {
				t.Fatalf("n=%d trial %d: bytes or scales differ", n, trial)
			}
			for i := 0; i < min(gr+1, rows)*n; i++ { // the scores up to the row it stopped at
				if math.Float32bits(gx[i]) != math.Float32bits(wx[i]) {
					t.Fatalf("n=%d trial %d: score %d: asm %v, twin %v", n, trial, i, gx[i], wx[i])
				}
			}
			if want := map[int]int{2: 3, 3: 4, 4: 2, 5: 0, 6: rows, 7: 1}; trial >= 2 && gr != want[trial] {
				t.Fatalf("n=%d trial %d: stops at row %d, want %d", n, trial, gr, want[trial])
			}
		}
	}
}

// TestSoftmaxU8 checks SoftmaxU8 on every element-wise path against
// float64: each byte within one step of roundHalfEven(255*exp(s - max s)),
// with and without row scales, the row maximum 255, each scale 1 over the
// row's byte sum, an all -Inf row zero with scale 0, and a NaN or +Inf
// (or a row scale that overflows the scores) an ErrNonFinite naming its
// row and column.
func TestSoftmaxU8(t *testing.T) {
	eltPaths(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(8, 1))
		for _, n := range []int{1, 17, 64, 256} {
			for variant := 0; variant < 4; variant++ {
				masked := variant%2 == 1
				const rows, ldd = 9, 260
				x := softmaxU8Rows(r, rows, n, 5, -1, 0)
				var mask []float32
				if masked {
					mask = make([]float32, n)
					for j := range mask {
						if j%3 == 1 {
							mask[j] = -10000
						}
					}
				}
				var xscale []float32
				if variant >= 2 {
					xscale = make([]float32, rows)
					for i := range xscale {
						xscale[i] = float32(0.05 + 2*r.Float64())
					}
				}
				orig := slices.Clone(x)
				dst, sc := make([]uint8, (rows-1)*ldd+n), make([]float32, rows)
				if err := SoftmaxU8(dst, ldd, sc, x, rows, n, mask, xscale); err != nil {
					t.Fatal(err)
				}
				for i := 0; i < rows; i++ {
					q := dst[i*ldd : i*ldd+n]
					if i == 5 {
						if sc[i] != 0 || slices.ContainsFunc(q, func(b uint8) bool { return b != 0 }) {
							t.Fatalf("n=%d: the -Inf row is not zero (scale %v)", n, sc[i])
						}
						continue
					}
					s := make([]float64, n)
					m := math.Inf(-1)
					for j := range s {
						s[j] = float64(orig[i*n+j])
						if mask != nil {
							s[j] += float64(mask[j])
						}
						if xscale != nil {
							s[j] *= float64(xscale[i])
						}
						m = max(m, s[j])
					}
					var sum int
					top := 0
					for j := range s {
						want := math.RoundToEven(255 * math.Exp(s[j]-m))
						if d := math.Abs(float64(q[j]) - want); d > 1 {
							t.Fatalf("n=%d row %d col %d: byte %d, want %v", n, i, j, q[j], want)
						}
						sum += int(q[j])
						top = max(top, int(q[j]))
					}
					if top != 255 || sc[i] != 1/float32(sum) {
						t.Fatalf("n=%d row %d: max byte %d, scale %v (want 1/%d)", n, i, top, sc[i], sum)
					}
				}
			}
		}
		for _, poison := range []float32{float32(math.NaN()), float32(math.Inf(1))} {
			x := softmaxU8Rows(r, 4, 33, -1, 2*33+7, poison)
			for _, xscale := range [][]float32{nil, {0.5, 1.5, 0.25, 2}} {
				err := SoftmaxU8(make([]uint8, 4*33), 33, make([]float32, 4), slices.Clone(x), 4, 33, nil, xscale)
				if !errors.Is(err, ErrNonFinite) || !strings.Contains(err.Error(), "row 2 col 7") {
					t.Fatalf("poison %v, xscale %v: %v, want ErrNonFinite at row 2 col 7", poison, xscale, err)
				}
			}
		}
		x := softmaxU8Rows(r, 4, 33, -1, -1, 0)
		err := SoftmaxU8(make([]uint8, 4*33), 33, make([]float32, 4), x, 4, 33, nil, []float32{1, 1, math.MaxFloat32, 1})
		if !errors.Is(err, ErrNonFinite) || !strings.Contains(err.Error(), "row 2 ") {
			t.Fatalf("a row scale past float32's range: %v, want ErrNonFinite in row 2", err)
		}
		for _, bad := range []float32{0, -1, float32(math.NaN()), float32(math.Inf(1))} {
			err := SoftmaxU8(make([]uint8, 4*33), 33, make([]float32, 4), x, 4, 33, nil, []float32{1, bad, 1, 1})
			if !errors.Is(err, ErrShape) {
				t.Fatalf("xscale %v: %v, want ErrShape", bad, err)
			}
		}
	})
}
