package selector

import (
	"math/rand/v2"
	"testing"

	"github.com/int8bert/int8bert/kernels"
	"github.com/stretchr/testify/require"
)

// TestRunAsKeepsTheStartingRowsKey: RunAs of a call of 5 rows as 100
// chooses under the key of 100 rows (M bucket 128), not its own (8), and
// gives each of its rows the bits the 100-row call gives them.
func TestRunAsKeepsTheStartingRowsKey(t *testing.T) {
	var w warnings
	s := newSelector(t, testOptions(t, &w))
	const n, k, big, small = 24, 40, 100, 5
	r := rand.New(rand.NewPCG(1, 2))
	wt, a := make([]float32, n*k), make([]float32, big*k)
	for i := range wt {
		wt[i] = r.Float32() - 0.5
	}
	for i := range a {
		a[i] = r.Float32() - 0.5
	}
	l, err := s.NewLinearF32(n, k, wt, k)
	require.NoError(t, err)
	defer l.Close()
	ep := &kernels.Epilogue{Bias: make([]float32, n)}
	full := make([]float32, big*n)
	require.NoError(t, l.Run(&kernels.GEMMF32{M: big, A: a, Lda: k, Ep: ep, C: full, Ldc: n, Threads: 1}))
	// Rows 40 to 44 of the big call, run alone as the big one.
	part := make([]float32, small*n)
	require.NoError(t, l.RunAs(&kernels.GEMMF32{M: small, A: a[40*k:], Lda: k, Ep: ep, C: part, Ldc: n, Threads: 1}, big))
	require.Equal(t, full[40*n:45*n], part)
	keys := s.KnownKeys()
	require.Contains(t, keys, F32Key(big, k, n, ep, 1).String())
	require.NotContains(t, keys, F32Key(small, k, n, ep, 1).String(), "RunAs chose under its own rows' key")
	// asRows 0 is Run.
	require.NoError(t, l.RunAs(&kernels.GEMMF32{M: small, A: a, Lda: k, Ep: ep, C: part, Ldc: n, Threads: 1}, 0))
	require.Contains(t, s.KnownKeys(), F32Key(small, k, n, ep, 1).String())
}
