package kernels

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

func TestGemmU8S8KnownValues(t *testing.T) {
	// [1 2 3; 255 0 7] x [[1 -1 2]; [-128 127 0]]^T
	a := []uint8{1, 2, 3, 255, 0, 7}
	b := []int8{1, -1, 2, -128, 127, 0}
	c := make([]int32, 4)
	if err := GemmU8S8S32Ref(2, 2, 3, a, 3, b, 3, c, 2); err != nil {
		t.Fatal(err)
	}
	want := []int32{1 - 2 + 6, -128 + 254, 255 + 14, 255 * -128}
	for i := range want {
		if c[i] != want[i] {
			t.Fatalf("c[%d]=%d want %d", i, c[i], want[i])
		}
	}
}

func TestGemmS8S8MatchesU8WithCompensation(t *testing.T) {
	// s8 data shifted by +128 into u8, then the compensation 128*colsum
	// recovers the s8 product exactly: the identity VNNI kernels rely on.
	r := rand.New(rand.NewPCG(1, 2))
	m, n, k := 7, 9, 13
	a := make([]int8, m*k)
	au := make([]uint8, m*k)
	for i := range a {
		a[i] = int8(r.IntN(256) - 128)
		au[i] = uint8(int(a[i]) + 128)
	}
	b := make([]int8, n*k)
	for i := range b {
		b[i] = int8(r.IntN(255) - 127)
	}
	cs := make([]int32, m*n)
	cu := make([]int32, m*n)
	if err := GemmS8S8S32Ref(m, n, k, a, k, b, k, cs, n); err != nil {
		t.Fatal(err)
	}
	if err := GemmU8S8S32Ref(m, n, k, au, k, b, k, cu, n); err != nil {
		t.Fatal(err)
	}
	out := make([]float32, m*n)
	ep := &Epilogue{ZeroPoint: 128, ColSum: ColSums(n, k, b, k)}
	if err := DequantRef(m, n, cu, n, ep, out, n); err != nil {
		t.Fatal(err)
	}
	for i := range cs {
		if float32(cs[i]) != out[i] {
			t.Fatalf("at %d: s8 %d, u8 compensated %v", i, cs[i], out[i])
		}
	}
}

func TestEpilogueOrder(t *testing.T) {
	acc := []int32{100, -50}
	ep := &Epilogue{ActScale: 0.5, ColScale: []float32{2, 4}, Bias: []float32{1, 1},
		Act: ActReLU, Residual: []float32{10, 20}}
	out := make([]float32, 2)
	if err := DequantRef(1, 2, acc, 2, ep, out, 2); err != nil {
		t.Fatal(err)
	}
	// 100*0.5*2+1 = 101 -> relu 101 -> +10; -50*0.5*4+1 = -99 -> relu 0 -> +20
	if out[0] != 111 || out[1] != 20 {
		t.Fatalf("got %v", out)
	}
	ep.OutScale, ep.OutZeroPoint = 2, 3
	q := make([]uint8, 2)
	if err := RequantU8Ref(1, 2, acc, 2, ep, q, 2); err != nil {
		t.Fatal(err)
	}
	// 111/2 + 3 = 58.5 -> 58 (half to even); 20/2 + 3 = 13
	if q[0] != 58 || q[1] != 13 {
		t.Fatalf("requant got %v", q)
	}
	ep.OutScale = 0.01
	if err := RequantU8Ref(1, 2, acc, 2, ep, q, 2); err != nil || q[0] != 255 {
		t.Fatalf("saturation: %v %v", q, err)
	}
}

func TestGELUKnownValues(t *testing.T) {
	// Values of x*Phi(x).
	for _, c := range []struct{ x, want float64 }{
		{0, 0}, {1, 0.8413447460685429}, {-1, -0.15865525393145707}, {3, 2.99595030590511},
	} {
		if got := GELU(c.x); math.Abs(got-c.want) > 1e-15 {
			t.Errorf("GELU(%v)=%v want %v", c.x, got, c.want)
		}
	}
	if d := math.Abs(GELUTanh(1) - GELU(1)); d > 1e-3 || d == 0 {
		t.Errorf("tanh GELU(1) differs from erf GELU by %v", d)
	}
}

func TestShapeErrors(t *testing.T) {
	c := make([]int32, 4)
	cases := []error{
		GemmU8S8S32Ref(2, 2, 3, make([]uint8, 5), 3, make([]int8, 6), 3, c, 2),
		GemmU8S8S32Ref(2, 2, 3, make([]uint8, 6), 2, make([]int8, 6), 3, c, 2),
		GemmU8S8S32Ref(-1, 2, 3, nil, 3, nil, 3, nil, 2),
		GemmS8S8S32Ref(2, 2, 3, make([]int8, 6), 3, make([]int8, 6), 3, c[:3], 2),
		GemmF32Ref(1, 2, 1, []float32{1}, 1, []float32{1, 2}, 1, make([]float32, 2), 2, &Epilogue{Bias: []float32{1}}),
		DequantRef(1, 2, []int32{1, 2}, 2, &Epilogue{ZeroPoint: 1}, make([]float32, 2), 2),
		RequantS8Ref(1, 2, []int32{1, 2}, 2, &Epilogue{}, make([]int8, 2), 2),
	}
	for i, err := range cases {
		if !errors.Is(err, ErrShape) {
			t.Errorf("case %d: got %v, want ErrShape", i, err)
		}
	}
	// Empty shapes are valid and do nothing.
	if err := GemmU8S8S32Ref(0, 0, 0, nil, 1, nil, 1, nil, 1); err != nil {
		t.Errorf("empty gemm: %v", err)
	}
}

func TestGemmF32Strided(t *testing.T) {
	// a is 2x2 inside a 2x3 buffer, c inside 2x4.
	a := []float32{1, 2, 99, 3, 4, 99}
	b := []float32{1, 0, 0, 1, 1, 1}
	c := []float32{-1, -1, -1, -1, -1, -1, -1, -1}
	if err := GemmF32Ref(2, 3, 2, a, 3, b, 2, c, 4, &Epilogue{Act: ActGELU}); err != nil {
		t.Fatal(err)
	}
	want := []float32{float32(GELU(1)), float32(GELU(2)), float32(GELU(3)), -1, float32(GELU(3)), float32(GELU(4)), float32(GELU(7)), -1}
	for i := range want {
		if c[i] != want[i] {
			t.Fatalf("c=%v want %v", c, want)
		}
	}
}

func TestBF16(t *testing.T) {
	for _, c := range []struct {
		x    float32
		want uint16
	}{{1, 0x3f80}, {-2, 0xc000}, {1.00390625, 0x3f80}, {1.01171875, 0x3f82}, {float32(math.Inf(1)), 0x7f80}} {
		if got := ToBF16(c.x); got != c.want {
			t.Errorf("ToBF16(%v)=%#x want %#x", c.x, got, c.want)
		}
	}
	if v := FromBF16(ToBF16(float32(math.NaN()))); !math.IsNaN(float64(v)) {
		t.Errorf("NaN became %v", v)
	}
	if FromBF16(0x3f80) != 1 {
		t.Error("FromBF16(0x3f80) != 1")
	}
}
