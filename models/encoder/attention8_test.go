package encoder

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/int8bert/int8bert/cpu"
	"github.com/int8bert/int8bert/kernels"
	"github.com/int8bert/int8bert/selector"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// attn8Case is one INT8 attention problem: padded (lens nil) or packed.
type attn8Case struct {
	lens       []int // packed lengths; nil: batch x seq padded
	batch, seq int
	h, heads   int
	masked     bool // some keys masked (never a sequence's first)
	static     bool // the context requantized to u8 (attnQuant)
	name       string
}

// attn8Ref is attentionRef over each sequence of c (padded or packed).
func attn8Ref(qkv []float32, mask []int32, c attn8Case) []float64 {
	if c.lens == nil {
		if mask == nil {
			mask = make([]int32, c.batch*c.seq)
			for i := range mask {
				mask[i] = 1
			}
		}
		return attentionRef(qkv, mask, c.batch, c.seq, c.h, c.heads)
	}
	var out []float64
	off := 0
	for _, n := range c.lens {
		mk := make([]int32, n)
		for i := range mk {
			mk[i] = 1
		}
		if mask != nil {
			copy(mk, mask[off:off+n])
		}
		out = append(out, attentionRef(qkv[off*3*c.h:(off+n)*3*c.h], mk, 1, n, c.h, c.heads)...)
		off += n
	}
	return out
}

// TestAttentionInt8 checks INT8 attention (attentionHead8) against the
// float64 reference on every u8s8 kernel this CPU runs, forced: seq 1, odd
// lengths, masks, packed spans of several lengths, and the static u8
// context. The error is INT8's (docs/DESIGN.md section 3.10): relative RMS
// under 4% (with the static u8 context, that and its u8 step's rounding)
// and every value within 2% of max|V|; threads do not change a bit
// (integer products, per-head work).
func TestAttentionInt8(t *testing.T) {
	cases := []attn8Case{
		{name: "seq1", batch: 1, seq: 1, h: 8, heads: 2},
		{name: "odd", batch: 2, seq: 37, h: 192, heads: 3, masked: true},
		{name: "base128", batch: 1, seq: 128, h: 768, heads: 12, masked: true},
		{name: "static", batch: 3, seq: 20, h: 96, heads: 2, masked: true, static: true},
		{name: "static-long", batch: 2, seq: 100, h: 128, heads: 2, masked: true, static: true},
		{name: "packed", lens: []int{33, 1, 7, 64, 7}, h: 128, heads: 2},
		{name: "packed-masked-static", lens: []int{5, 19, 19, 2}, h: 64, heads: 4, masked: true, static: true},
	}
	for _, kern := range kernels.U8S8Kernels() {
		if !kern.Available(cpu.X86) {
			t.Logf("%s: CPU lacks %s: skipped", kern.Name, kern.ISA)
			continue
		}
		sel, err := selector.New(selector.Options{CachePath: "off", Reps: 1, Force: kern.Name})
		require.NoError(t, err)
		t.Cleanup(func() { sel.Close() })
		for _, c := range cases {
			r := rand.New(rand.NewPCG(uint64(c.h), 8))
			in := &Inputs{Batch: c.batch, Seq: c.seq}
			rows := c.batch * c.seq
			if c.lens != nil {
				in = &Inputs{Batch: len(c.lens), Lens: c.lens}
				rows = 0
				for _, n := range c.lens {
					rows += n
				}
			}
			qkv := make([]float32, rows*3*c.h)
			for i := range qkv {
				qkv[i] = float32(r.NormFloat64() * (1 + float64(i%7/6)))
			}
			if c.masked {
				in.Mask = make([]int32, rows)
				for i := range in.Mask {
					in.Mask[i] = 1
					if i > 0 && r.IntN(4) == 0 {
						in.Mask[i] = 0
					}
				}
				// never a sequence's first key
				off := 0
				for b := 0; b < in.Batch; b++ {
					n := c.seq
					if c.lens != nil {
						n = c.lens[b]
					}
					in.Mask[off] = 1
					off += n
				}
			}
			ref := attn8Ref(qkv, in.Mask, c)
			var vmax float64
			for i := 0; i < rows; i++ {
				for _, v := range qkv[i*3*c.h+2*c.h : (i+1)*3*c.h] {
					vmax = max(vmax, math.Abs(float64(v)))
				}
			}
			prec := PrecisionInt8Dynamic
			if c.static {
				prec = PrecisionInt8Static
			}
			var first []float32
			var firstQ []uint8
			// Blocks of query rows (7: not a multiple of any MR) give the
			// unblocked result bit for bit.
			for _, run := range []struct{ threads, rows int }{{1, 0}, {3, 0}, {1, 7}, {3, 12}} {
				threads := run.threads
				m := &Model{cfg: Config{Hidden: c.h, Heads: c.heads}, threads: threads, sel: sel, pass: &int8Pass{mode: prec.Mode(), attn8: true}, attnRows: run.rows}
				require.Equal(t, AttentionInt8, m.Attention())
				s := &scratch{qkv: slices.Clone(qkv), ctx: make([]float32, rows*c.h)}
				var q *attnQuant
				if c.static {
					q = &attnQuant{dst: make([]uint8, rows*c.h), scale: float32(vmax / 100), zp: 128}
				}
				require.NoError(t, m.attentionQ(in, s, q))
				require.Equal(t, qkv, s.qkv, "%s %s: qkv changed", kern.Name, c.name)
				got := s.ctx
				if c.static {
					got = make([]float32, len(q.dst))
					for i, u := range q.dst {
						got[i] = (float32(u) - float32(q.zp)) * q.scale
					}
				}
				var se, sr, worst float64
				for k, v := range got {
					e := float64(v) - ref[k]
					se += e * e
					sr += ref[k] * ref[k]
					worst = max(worst, math.Abs(e))
				}
				rel := math.Sqrt(se / max(sr, 1e-30))
				// The static context adds its own u8 step (max|V|/100): its
				// rounding's RMS, step/sqrt(12), over the reference's RMS
				// (which falls as longer rows average more of V), added
				// in quadrature (independent errors).
				lim := 0.04
				if c.static {
					u := vmax / 100 / math.Sqrt(12) / math.Sqrt(sr/float64(len(ref)))
					lim = math.Hypot(lim, u)
				}
				t.Logf("%s %s threads %d: rel rms %.4f (limit %.4f), max err %.4f of max|V| %.2f", kern.Name, c.name, threads, rel, lim, worst, vmax)
				if rel > lim || worst > 0.02*vmax {
					t.Fatalf("%s %s threads %d: relative RMS error %.4f, max error %.4f (max|V| %.3f)", kern.Name, c.name, threads, rel, worst, vmax)
				}
				if first == nil {
					first, firstQ = slices.Clone(s.ctx), nil
					if q != nil {
						firstQ = slices.Clone(q.dst)
					}
				} else {
					require.Equal(t, first, s.ctx, "%s %s: threads %d, row block %d differs from 1, unblocked", kern.Name, c.name, threads, run.rows)
					if q != nil {
						require.Equal(t, firstQ, q.dst, "%s %s: threads %d, row block %d differs from 1, unblocked", kern.Name, c.name, threads, run.rows)
					}
				}
			}
		}
	}
}

// TestAttentionAuto: AttentionAuto runs INT8 attention on the AVX-512 VNNI
// tier and FP32 attention on the tiers where INT8's is slower, and bf16
// attention in a bf16 model, unless INT8BERT_ATTENTION says otherwise; a
// set mode is kept, a bad one or one the precision cannot run refused.
func TestAttentionAuto(t *testing.T) {
	vnni := cpu.Features{AVX2: true, FMA: true, AVX512F: true, AVX512BW: true, AVX512VL: true, AVX512VNNI: true}
	avx2 := cpu.Features{AVX2: true, FMA: true}
	if vnni.Int8Path() != cpu.ISAAVX512VNNI || avx2.Int8Path() != cpu.ISAAVX2 {
		t.Fatalf("test features: int8 paths %s and %s", vnni.Int8Path(), avx2.Int8Path())
	}
	const st, bf, fp = PrecisionInt8Static, PrecisionBF16, PrecisionFP32
	t.Setenv(EnvAttention, "")
	for _, c := range []struct {
		f    cpu.Features
		prec Precision
		env  string
		in   AttentionMode
		want AttentionMode
	}{
		{vnni, st, "", AttentionAuto, AttentionInt8},
		{avx2, st, "", AttentionAuto, AttentionF32},
		{avx2, st, "int8", AttentionAuto, AttentionInt8},
		{vnni, st, "f32", AttentionAuto, AttentionF32},
		{avx2, st, "f32", AttentionInt8, AttentionInt8},
		{avx2, st, "bf16", AttentionAuto, AttentionF32}, // bf16 is for bf16 models
		{vnni, fp, "", AttentionAuto, AttentionInt8},    // what its INT8 twin inherits
		{vnni, bf, "", AttentionAuto, AttentionBF16},
		{avx2, bf, "", AttentionAuto, AttentionBF16},
		{vnni, bf, "int8", AttentionAuto, AttentionBF16}, // int8 is for INT8 models
		{vnni, bf, "f32", AttentionAuto, AttentionF32},
		{vnni, bf, "bf16", AttentionAuto, AttentionBF16},
		{vnni, bf, "f32", AttentionBF16, AttentionBF16},
		{vnni, bf, "", AttentionF32, AttentionF32},
	} {
		t.Setenv(EnvAttention, c.env)
		got, err := c.in.resolve(c.f, c.prec)
		require.NoError(t, err)
		assert.Equal(t, c.want, got, "%s=%q, %v of a %s model on int8 path %s", EnvAttention, c.env, c.in, c.prec, c.f.Int8Path())
	}
	t.Setenv(EnvAttention, "fp16")
	_, err := AttentionAuto.resolve(vnni, st)
	assert.ErrorIs(t, err, ErrConfig)
	t.Setenv(EnvAttention, "")
	_, err = AttentionMode(9).resolve(vnni, st)
	assert.ErrorIs(t, err, ErrConfig)
	for _, p := range []Precision{st, PrecisionInt8Dynamic, fp} {
		_, err = AttentionBF16.resolve(vnni, p)
		assert.ErrorIs(t, err, ErrConfig, "bf16 attention for %s", p)
	}
	_, err = AttentionInt8.resolve(vnni, bf)
	assert.ErrorIs(t, err, ErrConfig, "int8 attention for bf16")
}

// TestAttentionInt8OnesMask: a mask that masks no key of a span (all
// ones) gives INT8 attention's context bit for bit as no mask does (the
// head then skips the mask), in a batch where another span is masked.
func TestAttentionInt8OnesMask(t *testing.T) {
	sel, err := selector.New(selector.Options{CachePath: "off", Reps: 1})
	require.NoError(t, err)
	defer sel.Close()
	const h, heads = 128, 2
	lens := []int{40, 23}
	rows := 63
	r := rand.New(rand.NewPCG(5, 6))
	qkv := make([]float32, rows*3*h)
	for i := range qkv {
		qkv[i] = float32(r.NormFloat64())
	}
	run := func(mask []int32) []float32 {
		m := &Model{cfg: Config{Hidden: h, Heads: heads}, threads: 1, sel: sel, pass: &int8Pass{mode: PrecisionInt8Dynamic.Mode(), attn8: true}}
		s := &scratch{qkv: slices.Clone(qkv), ctx: make([]float32, rows*h)}
		require.NoError(t, m.attentionQ(&Inputs{Batch: 2, Lens: lens, Mask: mask}, s, nil))
		return s.ctx
	}
	ones := make([]int32, rows)
	for i := range ones {
		ones[i] = 1
	}
	none := run(nil)
	require.Equal(t, none, run(ones), "an all-ones mask changed the context")
	// The second span masked at one key: the first span's rows stay as
	// they were, the second's change.
	one := slices.Clone(ones)
	one[lens[0]+5] = 0
	got := run(one)
	require.Equal(t, none[:lens[0]*h], got[:lens[0]*h], "masking span 2 changed span 1")
	require.NotEqual(t, none[lens[0]*h:], got[lens[0]*h:], "masking a key of span 2 changed nothing")
}

// TestAttentionInt8Scores: where the selector's choice for Q Kᵀ is the
// scores kernel (kernels.ScoresU8S8, here read from a tuning cache that
// says so), attention runs it, and the context, plain and requantized, is
// bit for bit what gemmVNNI_6x64 forced gives, blocked or not.
func TestAttentionInt8Scores(t *testing.T) {
	sk := kernels.ScoresU8S8
	if !slices.Contains(kernels.AttentionU8S8Kernels(), sk) || !sk.Available(cpu.X86) {
		t.Logf("%s not available here (%s): nothing to run", sk.Name, cpu.X86.Int8Path())
		return
	}
	ref, err := selector.New(selector.Options{CachePath: "off", Reps: 1, Force: "gemmVNNI_6x64"})
	require.NoError(t, err)
	defer ref.Close()
	cases := []struct {
		seq, h, heads, rows int
		static              bool
	}{{37, 128, 2, 0, false}, {100, 192, 3, 0, true}, {100, 128, 2, 12, false}}
	// A cache whose choice for each case's Q Kᵀ is the scores kernel and
	// for its P V gemmVNNI_6x64.
	path := t.TempDir() + "/tuning.json"
	probe, err := selector.New(selector.Options{CachePath: "off"})
	require.NoError(t, err)
	c := selector.Cache{Header: probe.Header(), Entries: map[string]selector.Choice{}}
	require.NoError(t, probe.Close())
	choose := func(key selector.Key, err error, kern string) {
		require.NoError(t, err)
		c.Entries[key.String()] = selector.Choice{Key: key.String(), Kernel: kern, Backend: selector.BackendNative,
			ISA: cpu.ISAAVX512VNNI, Measured: []selector.Measurement{{Kernel: kern, Backend: selector.BackendNative, Runs: 1}}}
	}
	for _, cs := range cases {
		p := &int8Pass{mode: PrecisionInt8Dynamic.Mode()}
		if cs.static {
			p.mode = PrecisionInt8Static.Mode()
		}
		m := &Model{cfg: Config{Hidden: cs.h, Heads: cs.heads}, pass: p}
		kinds, d := m.attnKinds(), cs.h/cs.heads
		key, err := selector.U8S8KernelKey(cs.seq, d, cs.seq, kinds[0], 1)
		choose(key, err, sk.Name)
		key, err = selector.U8S8KernelKey(cs.seq, cs.seq, d, kinds[1], 1)
		choose(key, err, "gemmVNNI_6x64")
	}
	f := &selector.CacheFile{Format: selector.CacheFormat}
	f.Put(c)
	require.NoError(t, f.Save(path))
	sel, err := selector.New(selector.Options{CachePath: path, Reps: 1})
	require.NoError(t, err)
	defer sel.Close()
	for _, cs := range cases {
		r := rand.New(rand.NewPCG(uint64(cs.seq), 9))
		rows := 2 * cs.seq
		qkv := make([]float32, rows*3*cs.h)
		for i := range qkv {
			qkv[i] = float32(r.NormFloat64())
		}
		in := &Inputs{Batch: 2, Seq: cs.seq, Mask: make([]int32, rows)}
		for i := range in.Mask {
			in.Mask[i] = int32(min(1, i%cs.seq%5))
		}
		in.Mask[0], in.Mask[cs.seq] = 1, 1
		prec := PrecisionInt8Dynamic
		if cs.static {
			prec = PrecisionInt8Static
		}
		run := func(sel *selector.Selector, wantQK *kernels.Kernel) ([]float32, []uint8) {
			m := &Model{cfg: Config{Hidden: cs.h, Heads: cs.heads}, threads: 2, sel: sel, pass: &int8Pass{mode: prec.Mode(), attn8: true}, attnRows: cs.rows}
			qk, _, err := m.attnKernels8(cs.seq)
			require.NoError(t, err)
			if wantQK != nil {
				require.Same(t, wantQK, qk, "seq %d: the scores kernel chosen", cs.seq)
			}
			s := &scratch{qkv: slices.Clone(qkv), ctx: make([]float32, rows*cs.h)}
			var q *attnQuant
			if cs.static {
				q = &attnQuant{dst: make([]uint8, rows*cs.h), scale: 0.02, zp: 128}
			}
			require.NoError(t, m.attentionQ(in, s, q))
			if q != nil {
				return s.ctx, q.dst
			}
			return s.ctx, nil
		}
		wantCtx, wantQ := run(ref, nil)
		gotCtx, gotQ := run(sel, sk)
		require.Equal(t, wantCtx, gotCtx, "seq %d: the scores kernel's context differs from gemmVNNI_6x64's", cs.seq)
		require.Equal(t, wantQ, gotQ, "seq %d: the scores kernel's u8 context differs from gemmVNNI_6x64's", cs.seq)
	}
	st := sel.Stats()
	require.Equal(t, len(c.Entries), st.FromCache, "choices read from the cache")
	require.Zero(t, st.Tuned, "keys tuned")
}
