package selector

import (
	"sync"
	"testing"

	"github.com/int8bert/int8bert/kernels"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTrialRowStrideU8: a u8s8 key's trial A has rows
// kernels.RowStrideU8(K) apart, as the encoder lays out FFN2's input: at K
// 4096 the kernels are verified and timed on rows 4160 bytes apart (a
// kernel that reads A packed, ignoring Lda, then differs from the
// reference), elsewhere on rows K apart.
func TestTrialRowStrideU8(t *testing.T) {
	require.Equal(t, 4096+64, kernels.RowStrideU8(4096))
	require.Equal(t, 2*4096+64, kernels.RowStrideU8(2*4096))
	require.Equal(t, 1024, kernels.RowStrideU8(1024))
	require.Equal(t, 3072, kernels.RowStrideU8(3072))
	require.Equal(t, 0, kernels.RowStrideU8(0))

	for _, k := range []int{4096, 1024} {
		var mu sync.Mutex
		ldas := map[int]int{}
		recording := &kernels.Kernel{Name: "gemmLda_1x32", ISA: "test-isa", MR: 1, NR: 32, KB: 4,
			Available: kernels.GenericU8S8.Available, Accepts: kernels.GenericU8S8.Accepts,
			RunU8S8: func(g *kernels.GEMMU8S8) error {
				mu.Lock()
				ldas[g.Lda]++
				mu.Unlock()
				return kernels.GenericU8S8.RunU8S8(g)
			}}
		// blind reads A as if its rows were K apart.
		blind := &kernels.Kernel{Name: "gemmBlind_1x32", ISA: "test-isa", MR: 1, NR: 32, KB: 4,
			Available: kernels.GenericU8S8.Available, Accepts: kernels.GenericU8S8.Accepts,
			RunU8S8: func(g *kernels.GEMMU8S8) error {
				p := *g
				p.Lda = p.K
				return kernels.GenericU8S8.RunU8S8(&p)
			}}
		key := mustKey(t, 5, k, 32, "zp+scale+colscale+bias+residual/f32", 1)
		var w warnings
		o := testOptions(t, &w)
		o.Force = recording.Name
		ch, err := newSelectorWith(t, o, withKernels(t, recording)).Choose(key)
		require.NoError(t, err, "k=%d", k)
		assert.Equal(t, recording.Name, ch.Kernel, "k=%d", k)
		mu.Lock()
		assert.Equal(t, []int{kernels.RowStrideU8(k)}, keys(ldas), "k=%d: the Lda of the trial's calls", k)
		mu.Unlock()
		// The stride of A as the selector lays it out for a Linear's form.
		assert.Equal(t, kernels.RowStrideU8(k), u8s8Form(key, 32).Lda, "k=%d", k)

		o = testOptions(t, &w)
		o.Force = blind.Name
		_, err = newSelectorWith(t, o, withKernels(t, blind)).Choose(key)
		if k%4096 == 0 {
			require.ErrorIs(t, err, ErrForced, "k=%d: a kernel blind to Lda passed the trial", k)
			assert.Contains(t, err.Error(), "differs")
		} else {
			require.NoError(t, err, "k=%d", k)
		}
	}
}

func keys(m map[int]int) []int {
	var ks []int
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}
