package selector_test

import (
	"fmt"

	"github.com/int8bert/int8bert/kernels"
	"github.com/int8bert/int8bert/selector"
)

// A linear layer y = GELU(x W^T * scales + b) with s8 activations stored as
// u8+128, run through whichever kernel the selector finds fastest.
func Example() {
	sel, err := selector.New(selector.Options{CachePath: "off"})
	if err != nil {
		panic(err)
	}
	defer sel.Close()
	const m, k, n = 2, 8, 3
	w := make([]int8, n*k) // [N][K], as a PyTorch Linear stores it
	for i := range w {
		w[i] = int8(i%5 - 2)
	}
	lin, err := sel.NewLinear(n, k, w, k)
	if err != nil {
		panic(err)
	}
	defer lin.Close()
	x := make([]uint8, m*k) // s8 values + 128
	for i := range x {
		x[i] = uint8(128 + i%7 - 3)
	}
	y := make([]float32, m*n)
	err = lin.Run(&kernels.GEMMU8S8{M: m, A: x, Lda: k, Ep: &kernels.Epilogue{
		ZeroPoint: 128, ColSum: lin.ColSum(),
		ActScale: 0.5, ColScale: []float32{1, 1, 1}, Bias: []float32{0, 1, 2},
	}, Out: kernels.Out{F32: y, Ldc: n}, Threads: 1})
	if err != nil {
		panic(err)
	}
	fmt.Println(y)
	// Output: [1.5 5.5 -0.5 3.5 -1 -0.5]
}
