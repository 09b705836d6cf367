package encoder

import (
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/int8bert/int8bert/cpu"
	"github.com/int8bert/int8bert/kernels"
	"github.com/int8bert/int8bert/selector"
	"github.com/stretchr/testify/require"
)

// attentionRef is softmax(Q K^T / sqrt(d) + mask) V in float64.
func attentionRef(qkv []float32, mask []int32, batch, seq, h, heads int) []float64 {
	d := h / heads
	ld := 3 * h
	ctx := make([]float64, batch*seq*h)
	p := make([]float64, seq)
	for b := 0; b < batch; b++ {
		rows := qkv[b*seq*ld:]
		for hd := 0; hd < heads; hd++ {
			for i := 0; i < seq; i++ {
				mx := math.Inf(-1)
				for j := 0; j < seq; j++ {
					var s float64
					for t := 0; t < d; t++ {
						s += float64(rows[i*ld+hd*d+t]) * float64(rows[j*ld+h+hd*d+t])
					}
					s /= math.Sqrt(float64(d))
					if mask[b*seq+j] == 0 {
						s += maskValue
					}
					p[j] = s
					mx = max(mx, s)
				}
				var sum float64
				for j := range p {
					p[j] = math.Exp(p[j] - mx)
					sum += p[j]
				}
				for t := 0; t < d; t++ {
					var c float64
					for j := range p {
						c += p[j] / sum * float64(rows[j*ld+2*h+hd*d+t])
					}
					ctx[(b*seq+i)*h+hd*d+t] = c
				}
			}
		}
	}
	return ctx
}

func TestAttention(t *testing.T) {
	for _, c := range []struct{ batch, seq, h, heads int }{
		{1, 1, 8, 2}, {2, 37, 192, 3}, {3, 20, 96, 2}, {1, 128, 768, 12}, {1, 300, 64, 2},
	} {
		r := rand.New(rand.NewPCG(uint64(c.seq), uint64(c.h)))
		rows := c.batch * c.seq
		qkv := make([]float32, rows*3*c.h)
		for i := range qkv {
			qkv[i] = float32(r.NormFloat64())
		}
		in := &Inputs{Batch: c.batch, Seq: c.seq, Mask: make([]int32, rows)}
		for i := range in.Mask {
			in.Mask[i] = 1
			if i%c.seq > 0 && r.IntN(4) == 0 {
				in.Mask[i] = 0 // padding (never a whole sequence)
			}
		}
		ref := attentionRef(qkv, in.Mask, c.batch, c.seq, c.h, c.heads)
		for _, kern := range kernels.F32Kernels() {
			if !kern.Available(cpu.X86) {
				t.Logf("%s: CPU lacks %s: skipped", kern.Name, kern.ISA)
				continue
			}
			// The selector forced to kern runs both products on it.
			sel, err := selector.New(selector.Options{CachePath: "off", Reps: 1, Force: kern.Name})
			require.NoError(t, err)
			t.Cleanup(func() { sel.Close() })
			var first []float32
			// Whole heads (or the default blocks past 256 tokens), then
			// query rows in blocks: bit for bit the same context.
			for _, run := range []struct{ threads, rows int }{{1, 0}, {3, 0}, {1, 7}, {3, 16}} {
				threads := run.threads
				m := &Model{cfg: Config{Hidden: c.h, Heads: c.heads}, threads: threads, sel: sel, pass: &floatPass{prec: PrecisionFP32}, attnRows: run.rows}
				s := &scratch{qkv: slices.Clone(qkv), ctx: make([]float32, rows*c.h)}
				if err := m.attention(in, s); err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(s.qkv, qkv) {
					t.Fatalf("%s %v: qkv changed", kern.Name, c)
				}
				for k, v := range s.ctx {
					if d := math.Abs(float64(v) - ref[k]); d > 1e-5*(1+math.Abs(ref[k])) {
						t.Fatalf("%s %v threads %d: ctx[%d] = %v, want %v", kern.Name, c, threads, k, v, ref[k])
					}
				}
				if first == nil {
					first = s.ctx
				} else if !slices.Equal(first, s.ctx) {
					t.Fatalf("%s %v: threads %d, row block %d differs from threads 1, whole", kern.Name, c, threads, run.rows)
				}
			}
		}
	}
}

// poolDrops reports whether sync.Pool drops what it is given (it does so at
// random under the race detector).
func poolDrops() bool {
	var p sync.Pool
	for i := 0; i < 64; i++ {
		p.Put(new(int))
		if p.Get() == nil {
			return true
		}
	}
	return false
}

// TestAttentionAllocs checks that attention allocates nothing per head of
// its own (the packed K and V^T and the scores are reused): the
// allocations of a pass may grow with the heads only by those of the GEMM
// kernel's two calls per head.
func TestAttentionAllocs(t *testing.T) {
	if poolDrops() {
		t.Skip("sync.Pool drops items in this build (-race): allocations are not steady")
	}
	const seq, d = 64, 64
	sel := testSelector(t)
	kern, err := sel.KernelF32(seq, d, seq, 1)
	require.NoError(t, err)
	allocs := func(heads int) float64 {
		h := heads * d
		m := &Model{cfg: Config{Hidden: h, Heads: heads}, threads: 1, sel: sel, pass: &floatPass{prec: PrecisionFP32}}
		s := &scratch{qkv: make([]float32, seq*3*h), ctx: make([]float32, seq*h)}
		in := &Inputs{Batch: 1, Seq: seq, Mask: make([]int32, seq)}
		for i := range in.Mask {
			in.Mask[i] = 1
		}
		return testing.AllocsPerRun(20, func() {
			if err := m.attention(in, s); err != nil {
				t.Fatal(err)
			}
		})
	}
	b, err := kernels.PackF32(seq, d, make([]float32, seq*d), d, kern.NR)
	if err != nil {
		t.Fatal(err)
	}
	g := &kernels.GEMMF32{M: seq, N: seq, K: d, A: make([]float32, seq*d), Lda: d, B: b, C: make([]float32, seq*seq), Ldc: seq}
	perRun := testing.AllocsPerRun(20, func() {
		if err := kern.Run(g); err != nil {
			t.Fatal(err)
		}
	})
	a2, a12 := allocs(2), allocs(12)
	t.Logf("allocations per pass: %v with 2 heads, %v with 12; %s allocates %v per call", a2, a12, kern.Name, perRun)
	if a12-a2 > 10*2*perRun {
		t.Errorf("attention allocates per head: %v with 2 heads, %v with 12 (GEMM: %v per call)", a2, a12, perRun)
	}
}

// TestAttentionInt8Allocs checks that INT8 attention's steady state, on
// the tiers where it is the default and on AVX2 (whose u8s8 drivers take
// their scratch from pools too), allocates nothing per head: its buffers
// (the token pass's, the heads' and the blocks') are reused from pass to
// pass, so a pass with 12 heads and 200 tokens allocates what one with 2
// heads and 40 tokens does.
func TestAttentionInt8Allocs(t *testing.T) {
	if poolDrops() {
		t.Skip("sync.Pool drops items in this build (-race): allocations are not steady")
	}
	if !int8AttentionPays(cpu.X86) && cpu.X86.Int8Path() != cpu.ISAAVX2 {
		t.Skipf("%s: INT8 attention is not the default on this CPU's INT8 tier (%s), whose Go u8s8 kernels are not held to this", t.Name(), cpu.X86.Int8Path())
	}
	sel := testSelector(t)
	allocs := func(heads, seq int) float64 {
		const d = 64
		h := heads * d
		m := &Model{cfg: Config{Hidden: h, Heads: heads}, threads: 1, sel: sel, pass: &int8Pass{mode: PrecisionInt8Dynamic.Mode(), attn8: true}}
		qkv := make([]float32, seq*3*h)
		for i := range qkv {
			qkv[i] = float32(i%7) - 3
		}
		s := &scratch{qkv: qkv, ctx: make([]float32, seq*h)}
		in := &Inputs{Batch: 1, Seq: seq, Mask: make([]int32, seq)}
		for i := range in.Mask {
			in.Mask[i] = 1
		}
		return testing.AllocsPerRun(10, func() {
			if err := m.attention(in, s); err != nil {
				t.Fatal(err)
			}
		})
	}
	small, big := allocs(2, 40), allocs(12, 200)
	t.Logf("allocations per pass: %v with 2 heads of 40 tokens, %v with 12 heads of 200", small, big)
	if big > small {
		t.Errorf("INT8 attention allocates per head or block: %v with 2 heads of 40 tokens, %v with 12 of 200", small, big)
	}
}

// BenchmarkAttentionHead times BERT-large attention (hidden 1024, 16 heads
// of 64, one sequence of 256 tokens, 30 of them padding) on one goroutine
// and reports the time per head, whole and split into its steps (pack K,
// Q K^T, softmax, pack V^T, P V) measured by repeating each step alone on
// the same data. Pin it: taskset -c 1 go test -run '^$' -bench
// AttentionHead ./models/encoder
func BenchmarkAttentionHead(b *testing.B) {
	const batch, seq, h, heads = 1, 256, 1024, 16
	sel, err := selector.New(selector.Options{CachePath: "off"})
	require.NoError(b, err)
	b.Cleanup(func() { sel.Close() })
	r := rand.New(rand.NewPCG(3, 4))
	qkv := make([]float32, batch*seq*3*h)
	for i := range qkv {
		qkv[i] = float32(r.NormFloat64())
	}
	in := &Inputs{Batch: batch, Seq: seq, Mask: make([]int32, batch*seq)}
	for i := range in.Mask {
		in.Mask[i] = 1
		if i%seq >= seq-30 {
			in.Mask[i] = 0
		}
	}
	m := &Model{cfg: Config{Hidden: h, Heads: heads}, threads: 1, sel: sel, pass: &floatPass{prec: PrecisionFP32}}
	s := &scratch{qkv: qkv, ctx: make([]float32, batch*seq*h)}
	perHead := func(b *testing.B, f func()) {
		for b.Loop() {
			f()
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/1e3/float64(b.N), "us/op")
	}
	b.Run("whole", func(b *testing.B) {
		for b.Loop() {
			if err := m.attention(in, s); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/1e3/float64(b.N*batch*heads), "us/head")
	})
	// The steps of head 5, as attentionHead runs them.
	const d, ld, hd = h / heads, 3 * h, 5
	kr, err := m.attnKernels(seq)
	require.NoError(b, err)
	qk, pv := kr.qk, kr.pv
	bf := new(attnBuf)
	bf.scores = make([]float32, seq*seq)
	bf.mask = make([]float32, seq)
	for j, mk := range in.Mask[:seq] {
		if mk == 0 {
			bf.mask[j] = maskValue
		}
	}
	scale := float32(1 / math.Sqrt(float64(d)))
	packK := func() {
		if err := kernels.PackF32Into(&bf.k, seq, d, qkv[h+hd*d:], ld, qk.NR); err != nil {
			b.Fatal(err)
		}
	}
	packK()
	gqk := kernels.GEMMF32{M: seq, N: seq, K: d, A: qkv[hd*d:], Lda: ld, B: &bf.k, C: bf.scores, Ldc: seq}
	runQK := func() {
		if err := qk.Run(&gqk); err != nil {
			b.Fatal(err)
		}
	}
	runQK()
	raw := slices.Clone(bf.scores)
	soft := func() {
		copy(bf.scores, raw)
		if err := kernels.SoftmaxScaled(bf.scores, bf.scores, seq, seq, scale, bf.mask); err != nil {
			b.Fatal(err)
		}
	}
	packV := func() {
		if err := kernels.PackF32TInto(&bf.vt, d, seq, qkv[2*h+hd*d:], ld, pv.NR); err != nil {
			b.Fatal(err)
		}
	}
	soft()
	packV()
	gpv := kernels.GEMMF32{M: seq, N: d, K: seq, A: bf.scores, Lda: seq, B: &bf.vt, C: s.ctx[hd*d:], Ldc: h}
	b.Run("packK", func(b *testing.B) { perHead(b, packK) })
	b.Run("QK", func(b *testing.B) { perHead(b, runQK) })
	b.Run("copy", func(b *testing.B) { perHead(b, func() { copy(bf.scores, raw) }) })
	b.Run("softmax+copy", func(b *testing.B) { perHead(b, soft) })
	b.Run("packV", func(b *testing.B) { perHead(b, packV) })
	b.Run("PV", func(b *testing.B) {
		perHead(b, func() {
			if err := pv.Run(&gpv); err != nil {
				b.Fatal(err)
			}
		})
	})
}

// TestAttentionBF16 holds the bf16 head (attentionHeadBF16) on every BF16
// kernel this CPU runs to the float64 reference of its rounded operands:
// Q, K and V rounded to bfloat16 as the kernels round them, so that what
// is left is the rounding of P to bf16 (2^-9 of each probability, so at
// most 2^-9 of the largest |V| a context value mixes) and float32 sums. Whole
// heads, blocks of rows and two threads give the same bits.
func TestAttentionBF16(t *testing.T) {
	for _, c := range []struct{ batch, seq, h, heads int }{
		{1, 1, 32, 2}, {2, 37, 192, 3}, {1, 128, 256, 4}, {1, 300, 64, 1},
	} {
		r := rand.New(rand.NewPCG(uint64(c.seq), 7))
		rows := c.batch * c.seq
		qkv := make([]float32, rows*3*c.h)
		for i := range qkv {
			qkv[i] = float32(r.NormFloat64())
		}
		rounded := make([]float32, len(qkv))
		vmax := 0.0
		for i, x := range qkv {
			rounded[i] = kernels.FromBF16(kernels.ToBF16(x))
			if i%(3*c.h) >= 2*c.h {
				vmax = max(vmax, math.Abs(float64(rounded[i])))
			}
		}
		in := &Inputs{Batch: c.batch, Seq: c.seq, Mask: make([]int32, rows)}
		for i := range in.Mask {
			in.Mask[i] = 1
			if i%c.seq > 0 && r.IntN(4) == 0 {
				in.Mask[i] = 0
			}
		}
		ref := attentionRef(rounded, in.Mask, c.batch, c.seq, c.h, c.heads)
		tol := math.Ldexp(vmax, -9) + 1e-5
		for _, kern := range kernels.BF16Kernels() {
			if !kern.Available(cpu.X86) {
				t.Logf("%s: CPU lacks %s: skipped", kern.Name, kern.ISA)
				continue
			}
			sel, err := selector.New(selector.Options{CachePath: "off", Reps: 1, Force: kern.Name})
			require.NoError(t, err)
			t.Cleanup(func() { sel.Close() })
			var first []float32
			for _, run := range []struct{ threads, rows int }{{1, 0}, {2, 0}, {1, 7}, {2, 16}} {
				m := &Model{cfg: Config{Hidden: c.h, Heads: c.heads}, threads: run.threads, sel: sel, pass: &floatPass{prec: PrecisionBF16, attnBF16: true}, attnRows: run.rows}
				require.Equal(t, AttentionBF16, m.Attention())
				s := &scratch{qkv: slices.Clone(qkv), ctx: make([]float32, rows*c.h)}
				require.NoError(t, m.attention(in, s))
				for k, v := range s.ctx {
					if d := math.Abs(float64(v) - ref[k]); d > tol {
						t.Fatalf("%s %v threads %d rows %d: ctx[%d] = %v, want %v within %.3g", kern.Name, c, run.threads, run.rows, k, v, ref[k], tol)
					}
				}
				if first == nil {
					first = s.ctx
				} else if !slices.Equal(first, s.ctx) {
					t.Fatalf("%s %v: threads %d, row block %d differs from threads 1, whole", kern.Name, c, run.threads, run.rows)
				}
			}
		}
	}
}
