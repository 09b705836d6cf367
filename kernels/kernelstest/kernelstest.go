// Package kernelstest is the test suite every u8 x s8 GEMM kernel of package
// kernels runs (in the manner of gonum's blas/testblas): GEMM(t, kernel)
// checks shapes 0, 1 and tails, padded strides, guard bands around the
// output, unchanged inputs, and each epilogue against the generic kernel
// kernels.GenericU8S8 with fixed seeds; Run checks one case and serves fuzz
// targets.
//
// kernelstest imports only kernels, cpu and the standard library.
package kernelstest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/int8bert/int8bert/cpu"
	"github.com/int8bert/int8bert/kernels"
)

// Epilogues names the epilogue kinds Run knows, in a fixed order.
var Epilogues = []string{
	"s32",                 // raw accumulators
	"f32",                 // nil epilogue, float32 destination
	"scale",               // ActScale * ColScale
	"scale-bias-gelu",     // + Bias, GELU (erf)
	"scale-bias-residual", // + Bias, + Residual (padded stride)
	"zeropoint",           // ZeroPoint 128 with ColSum compensation
	"rowscale-bias-relu",  // per-row scales, + Bias, ReLU
	"gelu-tanh",           // an activation a kernel may leave to Go
	"requant-u8",          // zero point, row scales, bias, GELU -> u8
	"requant-s8",          // scale, bias, residual -> s8
	"gelu-precise",        // scale-bias-gelu with Epilogue.PreciseGELU
}

// Case is one GEMM to check. Lda and Ldc of 0 mean K and N.
type Case struct {
	M, N, K  int
	Lda, Ldc int
	Epilogue string
	Threads  int
	Seed     uint64
}

func (c Case) String() string {
	return fmt.Sprintf("m=%d n=%d k=%d lda=%d ldc=%d ep=%s threads=%d seed=%d",
		c.M, c.N, c.K, c.Lda, c.Ldc, c.Epilogue, c.Threads, c.Seed)
}

// Shapes returns the (m, n, k) triples GEMM checks for a kernel with the
// given register tile: empty, single, tails in every dimension, K%4 != 0,
// several N blocks.
func Shapes(mr, nr int) [][3]int {
	return [][3]int{
		{0, 0, 0}, {0, 5, 3}, {3, 0, 5}, {4, 7, 0},
		{1, 1, 1}, {1, 1, 4}, {1, 3, 2}, {2, 3, 5}, {7, 17, 13},
		{mr, nr, 64}, {mr - 1, nr - 1, 63}, {mr + 1, nr + 1, 67},
		{2*mr - 1, 3*nr - 5, 130}, {3*mr + 2, 2*nr + 15, 257},
		{37, 131, 300}, {5, 200, 4095},
	}
}

// shortMACs is the size (m*n*k) above which -short checks a shape in one
// layout only.
const shortMACs = 1 << 19

// GEMM runs the suite on k, skipping when this CPU cannot run it.
func GEMM(t *testing.T, k *kernels.Kernel) {
	t.Helper()
	if !k.Available(cpu.X86) {
		t.Skipf("%s (%s) is not available on this CPU: %s", k.Name, k.ISA, cpu.X86)
	}
	seed := uint64(1)
	for _, ep := range Epilogues {
		t.Run(ep, func(t *testing.T) {
			for _, s := range Shapes(k.MR, k.NR) {
				if s[2] > 1000 && ep != "s32" && ep != "requant-u8" && ep != "scale-bias-residual" {
					continue // long K: enough with these three
				}
				pads, threadss := [][2]int{{0, 0}, {5, 3}}, []int{1, 2}
				if testing.Short() && s[0]*s[1]*s[2] > shortMACs {
					// -short (the race stage): a large shape once,
					// padded and on two threads; the long stage runs
					// every combination.
					pads, threadss = pads[1:], threadss[1:]
				}
				for _, pad := range pads {
					for _, threads := range threadss {
						seed++
						c := Case{M: s[0], N: s[1], K: s[2], Epilogue: ep, Threads: threads, Seed: seed}
						if pad[0] > 0 {
							c.Lda, c.Ldc = s[2]+pad[0], s[1]+pad[1]
						}
						if !k.Accepts(c.M, c.N, c.K) {
							continue
						}
						if err := Run(k, c); err != nil {
							t.Fatalf("%s: %s: %v", k.Name, c, err)
						}
					}
				}
			}
		})
	}
}

// guard is the number of sentinel elements before and after the output.
const guard = 19

// inputs are the operands of one case.
type inputs struct {
	a   []uint8
	lda int
	b   *kernels.PackedS8
	ep  *kernels.Epilogue
}

func makeInputs(k *kernels.Kernel, c Case) (*inputs, error) {
	r := rand.New(rand.NewPCG(c.Seed, uint64(c.M)<<40^uint64(c.N)<<20^uint64(c.K)))
	lda := c.Lda
	if lda == 0 {
		lda = max(c.K, 1)
	}
	a := make([]uint8, max(0, (c.M-1)*lda+c.K))
	for i := range a {
		a[i] = uint8(r.IntN(256))
	}
	ldb := c.K + 2
	w := make([]int8, max(1, c.N*ldb))
	for i := range w {
		w[i] = int8(r.IntN(256) - 128)
	}
	b, err := kernels.PackS8(c.N, c.K, w, max(ldb, 1), k.NR)
	if err != nil {
		return nil, err
	}
	in := &inputs{a: a, lda: lda, b: b}
	vec := func(n int, lo, hi float64) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(lo + (hi-lo)*r.Float64())
		}
		return v
	}
	// Scales that bring the accumulators (std ~ 74*128*sqrt(K) for a
	// centred source) to values of a few units, so GELU and the
	// requantization see both signs, ties and saturation.
	cs := 3 / (74 * math.Sqrt(float64(max(c.K, 1))))
	ldr := c.N + 2
	switch c.Epilogue {
	case "s32", "f32":
	case "scale":
		in.ep = &kernels.Epilogue{ActScale: 1.0 / 128, ColScale: vec(c.N, cs/2, 1.5*cs)}
	case "scale-bias-gelu":
		in.ep = &kernels.Epilogue{ZeroPoint: 128, ColSum: b.ColSum, ActScale: 1.0 / 128, ColScale: vec(c.N, cs/2, 1.5*cs), Bias: vec(c.N, -1, 1), Act: kernels.ActGELU}
	case "gelu-precise":
		in.ep = &kernels.Epilogue{ZeroPoint: 128, ColSum: b.ColSum, ActScale: 1.0 / 128, ColScale: vec(c.N, cs/2, 1.5*cs), Bias: vec(c.N, -1, 1), Act: kernels.ActGELU, PreciseGELU: true}
	case "scale-bias-residual":
		in.ep = &kernels.Epilogue{ActScale: 1.0 / 128, ColScale: vec(c.N, cs/2, 1.5*cs), Bias: vec(c.N, -1, 1),
			Residual: vec(max(0, (c.M-1)*ldr+c.N), -4, 4), LdResidual: ldr}
	case "zeropoint":
		in.ep = &kernels.Epilogue{ZeroPoint: 128, ColSum: b.ColSum, ActScale: 1.0 / 128, ColScale: vec(c.N, cs/2, 1.5*cs)}
	case "rowscale-bias-relu":
		in.ep = &kernels.Epilogue{ZeroPoint: 128, ColSum: b.ColSum, RowScale: vec(c.M, 0.5/128, 1.5/128), ColScale: vec(c.N, cs/2, 1.5*cs), Bias: vec(c.N, -1, 1), Act: kernels.ActReLU}
	case "gelu-tanh":
		in.ep = &kernels.Epilogue{ZeroPoint: 128, ColSum: b.ColSum, ActScale: 1.0 / 128, ColScale: vec(c.N, cs/2, 1.5*cs), Act: kernels.ActGELUTanh}
	case "requant-u8":
		in.ep = &kernels.Epilogue{ZeroPoint: 128, ColSum: b.ColSum, RowScale: vec(c.M, 0.5/128, 1.5/128), ColScale: vec(c.N, cs/2, 1.5*cs),
			Bias: vec(c.N, -1, 1), Act: kernels.ActGELU, OutScale: 0.02, OutZeroPoint: 3}
	case "requant-s8":
		in.ep = &kernels.Epilogue{ZeroPoint: 128, ColSum: b.ColSum, ActScale: 1.0 / 128, ColScale: vec(c.N, cs/2, 1.5*cs), Bias: vec(c.N, -1, 1),
			Residual: vec(max(0, c.M*c.N), -2, 2), OutScale: 0.03, OutZeroPoint: -2}
	default:
		return nil, fmt.Errorf("unknown epilogue %q", c.Epilogue)
	}
	return in, nil
}

// out is a destination of the case's kind with guard bands: every element
// of buf outside the m x n window must keep its sentinel.
type out struct {
	kind string // s32, f32, u8, s8
	s32  []int32
	f32  []float32
	u8   []uint8
	s8   []int8
	ldc  int
}

func outKind(ep string) string {
	switch ep {
	case "s32":
		return "s32"
	case "requant-u8":
		return "u8"
	case "requant-s8":
		return "s8"
	}
	return "f32"
}

const (
	sentS32 = int32(-0x3c3c3c3d)
	sentU8  = uint8(0xa5)
)

var sentF32 = float32(math.Float32frombits(0x7fc0dead)) // a NaN payload

func newOut(kind string, m, n, ldc int) *out {
	size := guard + max(0, (m-1)*ldc+n) + guard
	o := &out{kind: kind, ldc: ldc}
	switch kind {
	case "s32":
		o.s32 = make([]int32, size)
		for i := range o.s32 {
			o.s32[i] = sentS32
		}
	case "f32":
		o.f32 = make([]float32, size)
		for i := range o.f32 {
			o.f32[i] = sentF32
		}
	case "u8":
		o.u8 = make([]uint8, size)
		for i := range o.u8 {
			o.u8[i] = sentU8
		}
	case "s8":
		o.s8 = make([]int8, size)
		for i := range o.s8 {
			o.s8[i] = -0x5b // the bits of sentU8
		}
	}
	return o
}

// dest returns the kernels.Out window (full capacity, so a kernel writing
// past it is caught by the guard check, not by a panic).
func (o *out) dest(m, n int) kernels.Out {
	end := guard + max(0, (m-1)*o.ldc+n)
	d := kernels.Out{Ldc: o.ldc}
	switch o.kind {
	case "s32":
		d.S32 = o.s32[guard:end:len(o.s32)]
	case "f32":
		d.F32 = o.f32[guard:end:len(o.f32)]
	case "u8":
		d.U8 = o.u8[guard:end:len(o.u8)]
	case "s8":
		d.S8 = o.s8[guard:end:len(o.s8)]
	}
	return d
}

// inWindow reports whether buffer index p is element (i, j) of the output.
func (o *out) inWindow(p, m, n int) bool {
	p -= guard
	if p < 0 || m == 0 || n == 0 {
		return false
	}
	i, j := p/o.ldc, p%o.ldc
	return i < m && j < n
}

// checkGuards reports the first changed sentinel.
func (o *out) checkGuards(m, n int) error {
	bad := func(p int, v any) error {
		return fmt.Errorf("guard element %d (window offset %d) overwritten with %v", p, p-guard, v)
	}
	switch o.kind {
	case "s32":
		for p, v := range o.s32 {
			if !o.inWindow(p, m, n) && v != sentS32 {
				return bad(p, v)
			}
		}
	case "f32":
		for p, v := range o.f32 {
			if !o.inWindow(p, m, n) && math.Float32bits(v) != 0x7fc0dead {
				return bad(p, v)
			}
		}
	case "u8":
		for p, v := range o.u8 {
			if !o.inWindow(p, m, n) && v != sentU8 {
				return bad(p, v)
			}
		}
	case "s8":
		for p, v := range o.s8 {
			if !o.inWindow(p, m, n) && uint8(v) != sentU8 {
				return bad(p, v)
			}
		}
	}
	return nil
}

// Run checks kernel k on one case against kernels.GenericU8S8: int32
// results exactly, float32 results to 1e-5 relative plus a small absolute
// term scaled by the magnitudes the epilogue adds, u8/s8 results exactly
// or one off where the reference sits on a rounding tie within that
// tolerance. It also checks guard bands and that no input changed.
func Run(k *kernels.Kernel, c Case) error {
	if c.M < 0 || c.N < 0 || c.K < 0 {
		return fmt.Errorf("negative shape")
	}
	in, err := makeInputs(k, c)
	if err != nil {
		return err
	}
	ldc := c.Ldc
	if ldc == 0 {
		ldc = max(c.N, 1)
	}
	kind := outKind(c.Epilogue)
	got, want := newOut(kind, c.M, c.N, ldc), newOut(kind, c.M, c.N, ldc)

	aCopy := slices.Clone(in.a)
	bCopy := slices.Clone(in.b.Data)
	sumCopy := slices.Clone(in.b.ColSum)
	var epCopy kernels.Epilogue
	if in.ep != nil {
		epCopy = *in.ep
		epCopy.ColScale = slices.Clone(in.ep.ColScale)
		epCopy.RowScale = slices.Clone(in.ep.RowScale)
		epCopy.Bias = slices.Clone(in.ep.Bias)
		epCopy.Residual = slices.Clone(in.ep.Residual)
	}

	g := &kernels.GEMMU8S8{M: c.M, N: c.N, K: c.K, A: in.a, Lda: in.lda, B: in.b, Ep: in.ep, Out: got.dest(c.M, c.N), Threads: c.Threads}
	if err := k.RunU8S8(g); err != nil {
		return fmt.Errorf("%s: %w", k.Name, err)
	}
	// The reference on fresh pointers (its own copies of the inputs).
	var epRef *kernels.Epilogue
	if in.ep != nil {
		e := epCopy
		epRef = &e
	}
	bRef := *in.b
	bRef.Data, bRef.ColSum = slices.Clone(bCopy), slices.Clone(sumCopy)
	if epRef != nil && epRef.ColSum != nil {
		epRef.ColSum = bRef.ColSum
	}
	gr := &kernels.GEMMU8S8{M: c.M, N: c.N, K: c.K, A: slices.Clone(aCopy), Lda: in.lda, B: &bRef, Ep: epRef, Out: want.dest(c.M, c.N), Threads: 1}
	if err := kernels.GenericU8S8.RunU8S8(gr); err != nil {
		return fmt.Errorf("generic: %w", err)
	}

	if err := got.checkGuards(c.M, c.N); err != nil {
		return err
	}
	if !slices.Equal(in.a, aCopy) || !slices.Equal(in.b.Data, bCopy) || !slices.Equal(in.b.ColSum, sumCopy) {
		return fmt.Errorf("inputs A or B changed")
	}
	if in.ep != nil && (!slices.Equal(in.ep.ColScale, epCopy.ColScale) || !slices.Equal(in.ep.RowScale, epCopy.RowScale) ||
		!slices.Equal(in.ep.Bias, epCopy.Bias) || !slices.Equal(in.ep.Residual, epCopy.Residual)) {
		return fmt.Errorf("epilogue inputs changed")
	}

	// Accumulators of the reference, for the tolerances.
	var acc []int32
	if kind != "s32" && c.M > 0 && c.N > 0 {
		acc = make([]int32, c.M*c.N)
		gs := &kernels.GEMMU8S8{M: c.M, N: c.N, K: c.K, A: aCopy, Lda: in.lda, B: &bRef, Out: kernels.Out{S32: acc, Ldc: c.N}}
		if err := kernels.GenericU8S8.RunU8S8(gs); err != nil {
			return err
		}
	}
	for i := 0; i < c.M; i++ {
		for j := 0; j < c.N; j++ {
			p := guard + i*ldc + j
			switch kind {
			case "s32":
				if got.s32[p] != want.s32[p] {
					return fmt.Errorf("element C[%d][%d] = %d, want %d", i, j, got.s32[p], want.s32[p])
				}
			case "f32":
				g, w := float64(got.f32[p]), float64(want.f32[p])
				tol := 1e-5*math.Abs(w) + absTol(epRef, i, j, c.N, acc[i*c.N+j])
				if !(math.Abs(g-w) <= tol) {
					return fmt.Errorf("element C[%d][%d] = %v, want %v (tolerance %.3g)", i, j, g, w, tol)
				}
			case "u8", "s8":
				var g, w int
				if kind == "u8" {
					g, w = int(got.u8[p]), int(want.u8[p])
				} else {
					g, w = int(got.s8[p]), int(want.s8[p])
				}
				if g == w {
					continue
				}
				y := refValue(epRef, i, j, c.N, acc[i*c.N+j])
				q := float64(float32(y)*(1/epRef.OutScale) + float32(epRef.OutZeroPoint))
				dist := math.Abs(q - math.Floor(q) - 0.5)
				tie := (1e-5*math.Abs(y) + absTol(epRef, i, j, c.N, acc[i*c.N+j])) / float64(epRef.OutScale)
				if abs(g-w) > 1 || dist > tie+1e-6 {
					return fmt.Errorf("element C[%d][%d] = %d, want %d (reference %.9g before rounding)", i, j, g, w, q)
				}
			}
		}
	}
	return nil
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// absTol is the absolute float32 tolerance of element (i, j): a few units
// of float32 rounding of every term the epilogue adds.
func absTol(ep *kernels.Epilogue, i, j, n int, acc int32) float64 {
	if ep == nil {
		return 1e-6 * math.Abs(float64(acc))
	}
	mag := math.Abs(ep.Dequant(i, j, acc))
	if ep.Bias != nil {
		mag += math.Abs(float64(ep.Bias[j]))
	}
	if ep.Residual != nil {
		ld := ep.LdResidual
		if ld == 0 {
			ld = n
		}
		mag += math.Abs(float64(ep.Residual[i*ld+j]))
	}
	return 2e-6*mag + 1e-30
}

// refValue is the float64 epilogue value before requantization (as
// kernels.Epilogue documents it).
func refValue(ep *kernels.Epilogue, i, j, n int, acc int32) float64 {
	return float64(float32(ep.Value(i, j, n, acc)))
}
