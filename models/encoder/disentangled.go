package encoder

import (
	"fmt"
	"math"
	"time"

	"github.com/int8bert/int8bert/kernels"
	"github.com/int8bert/int8bert/selector"
)

// DeBERTa-v2's disentangled attention (Config.Dis; docs/DESIGN.md section
// 3.11). The score of query i and key j of head h is
//
//	(Q_i.K_j + Q_i.PK[r] + K_j.PQ[r]) / sqrt(d (1 + C2P + P2C)),
//	r = clamp(bucket(i - j) + Span, 0, 2 Span - 1),
//
// PK and PQ being the layer's key and query projections of the shared
// relative embeddings. They depend on the weights only, so they are made
// once per layer when the model is built (an INT8 artifact carries them,
// made from the FP32 weights), not per pass as Hugging Face does. r
// depends on i - j only, and is monotonic in it: a sequence of n tokens
// uses the rows r(-(n-1)) .. r(n-1) of PK and PQ, a window of at most 2n -
// 1 rows; each head computes Q . PK^T and K . PQ^T over that window only,
// then gathers them into the scores. Packed and padded sequences alike
// count positions from their own first token.

// logBucket is Hugging Face's make_log_bucket_position of the relative
// position rel (query - key) in float32 as torch computes it: exact up to
// half the buckets, then log-spaced up to maxPos.
func logBucket(rel, buckets, maxPos int) int {
	mid := buckets / 2
	if rel < mid && rel > -mid {
		return rel
	}
	abs := rel
	if abs < 0 {
		abs = -abs
	}
	if abs <= mid {
		return rel
	}
	l := float32(math.Log(float64(float32(abs)/float32(mid)))) / float32(math.Log(float64(float32(float64(maxPos-1)/float64(mid))))) *
		float32(mid-1)
	v := int(math.Ceil(float64(l))) + mid
	if rel < 0 {
		return -v
	}
	return v
}

// RelIndex is the row of the relative embeddings (and of PK and PQ) that
// query - key rel reads.
func (d Disentangled) RelIndex(rel int) int {
	if d.Buckets > 0 {
		rel = logBucket(rel, d.Buckets, d.MaxPos)
	}
	return min(max(rel+d.Span, 0), 2*d.Span-1)
}

// disentangled is a model's relative attention: the per-layer position
// projections and the row index of every relative position.
type disentangled struct {
	cfg Disentangled
	// idx[l-1+rel] is RelIndex(rel) for |rel| < l, l the longest sequence.
	idx []int32
	l   int
	// pk and pq are each layer's [2 Span][Hidden] position keys and
	// queries (nil where the term is off).
	pk, pq [][]float32
	scale  float32
	// projected says the projections were made at load (on the
	// selector's FP32 linear of 2 Span rows), not read from an artifact.
	projected bool
}

// disKeys are the selector keys of the relative terms of sequences up to
// maxLen tokens (the FP32 products over each length's window), and the
// key of the projection made at load, which the tuning record then
// carries for the next load (none without disentangled attention).
func (m *Model) disKeys(maxLen int) []linKey {
	d := m.dis
	if d == nil {
		return nil
	}
	var keys []linKey
	if d.projected {
		h := m.cfg.Hidden
		ep := &kernels.Epilogue{Bias: make([]float32, h)}
		keys = append(keys, linKey{key: selector.F32Key(2*d.cfg.Span, h, h, ep, m.threads)})
	}
	dh := m.cfg.Hidden / m.cfg.Heads
	for s := 1; s <= min(maxLen, d.l); s++ {
		_, w := d.window(s)
		keys = append(keys, linKey{key: selector.F32KernelKey(s, dh, w, 1)})
	}
	return keys
}

// Names of the position projections in an INT8 artifact (made from the
// FP32 weights at Quantize).
func posKeyName(li int) string   { return fmt.Sprintf("int8.layer.%d.pos_key", li) }
func posQueryName(li int) string { return fmt.Sprintf("int8.layer.%d.pos_query", li) }

// newDisentangled reads the relative embeddings and makes every layer's
// position projections: from an artifact's tables where l holds them,
// else by projecting the (normalized) embeddings with the layers' FP32
// query and key linears (or pos_query_proj / pos_key_proj).
func (m *Model) newDisentangled(l *Loader, names Names) error {
	c := m.cfg
	dc, h, w := c.Dis, c.Hidden, 2*c.Dis.Span
	d := &disentangled{cfg: dc, l: c.MaxSeq()}
	sf := 1
	if dc.C2P {
		sf++
	}
	if dc.P2C {
		sf++
	}
	d.scale = float32(1 / math.Sqrt(float64(h/c.Heads*sf)))
	d.idx = make([]int32, 2*d.l-1)
	for k := range d.idx {
		d.idx[k] = int32(dc.RelIndex(k - (d.l - 1)))
	}
	d.pk, d.pq = make([][]float32, c.Layers), make([][]float32, c.Layers)
	if l.Has(posKeyName(0)) || l.Has(posQueryName(0)) {
		l.MarkUsed(names.RelEmb, names.RelLN, names.RelLNBias)
		for li := range c.Layers {
			var err error
			if dc.C2P {
				if d.pk[li], err = l.Get(posKeyName(li), w, h); err != nil {
					return err
				}
			}
			if dc.P2C {
				if d.pq[li], err = l.Get(posQueryName(li), w, h); err != nil {
					return err
				}
			}
		}
		m.dis = d
		return nil
	}
	rel, err := l.Get(names.RelEmb, w, h)
	if err != nil {
		return err
	}
	if dc.NormLN {
		g, err := l.Get(names.RelLN, h)
		if err != nil {
			return err
		}
		b, err := l.Get(names.RelLNBias, h)
		if err != nil {
			return err
		}
		n := make([]float32, len(rel))
		if err := kernels.LayerNorm(n, nil, rel, nil, w, h, g, b, c.LayerNormEps, nil); err != nil {
			return fmt.Errorf("encoder: relative embeddings' layer norm: %w", err)
		}
		rel = n
	}
	project := func(wname, bname string) ([]float32, error) {
		dn, err := NewDense(l, m.sel, wname, bname, h, h, HeadNone)
		if err != nil {
			return nil, err
		}
		defer dn.Close()
		out := make([]float32, w*h)
		if _, err := dn.ApplyTo(out, w, rel, h, m.threads); err != nil {
			return nil, err
		}
		return out, nil
	}
	d.projected = true
	for li := range c.Layers {
		n := names.Layer(li)
		qn, qb, kn, kb := n.Q, n.QBias, n.K, n.KBias
		if !dc.Shared {
			qn, qb, kn, kb = n.PosQ, n.PosQBias, n.PosK, n.PosKBias
		}
		var err error
		if dc.C2P {
			if d.pk[li], err = project(kn, kb); err != nil {
				return fmt.Errorf("encoder: layer %d: position keys: %w", li, err)
			}
		}
		if dc.P2C {
			if d.pq[li], err = project(qn, qb); err != nil {
				return fmt.Errorf("encoder: layer %d: position queries: %w", li, err)
			}
		}
	}
	m.dis = d
	return nil
}

// tables are the projections to write into an INT8 artifact, by name.
func (d *disentangled) tables() map[string][]float32 {
	out := map[string][]float32{}
	for li := range d.pk {
		if d.pk[li] != nil {
			out[posKeyName(li)] = d.pk[li]
		}
		if d.pq[li] != nil {
			out[posQueryName(li)] = d.pq[li]
		}
	}
	return out
}

// bytes is the memory of the projections.
func (d *disentangled) bytes() int {
	if d == nil {
		return 0
	}
	n := 4 * len(d.idx)
	for li := range d.pk {
		n += floatBytes(d.pk[li], d.pq[li])
	}
	return n
}

// window is the rows [lo, lo+w) of PK and PQ a sequence of n tokens
// reads.
func (d *disentangled) window(n int) (lo, w int) {
	lo = int(d.idx[d.l-1-(n-1)])
	return lo, int(d.idx[d.l-1+n-1]) - lo + 1
}

// disBuf is a head's scratch for the relative terms.
type disBuf struct {
	c2p, p2c []float32
	pk, pq   kernels.PackedF32
	g        kernels.GEMMF32
	// c2pTime and p2cTime are the head's time in each term when the
	// model profiles (Profile.AttentionC2P, AttentionP2C).
	c2pTime, p2cTime time.Duration
}

// disClock times the relative terms when the model profiles: lap adds
// the time since the previous lap (or start) to *to.
type disClock struct {
	on bool
	t  time.Time
}

func (m *Model) disClock() disClock {
	if m.prof == nil {
		return disClock{}
	}
	return disClock{on: true, t: time.Now()}
}

func (c *disClock) lap(to *time.Duration) {
	if c.on {
		now := time.Now()
		*to += now.Sub(c.t)
		c.t = now
	}
}

// disPrepare computes, for head hd of layer li on a sequence of seq rows
// (rows: the sequence's fused QKV rows, stride ld), the position-to-content
// products of every key, K_j . PQ[lo+t], into b.dis.p2c ([seq][w]), and
// packs the head's PK window for disScores.
func (m *Model) disPrepare(b *attnBuf, li, hd, seq int, rows []float32, ld int) error {
	d, h := m.dis, m.cfg.Hidden
	dh := h / m.cfg.Heads
	lo, w := d.window(seq)
	e := &b.dis
	kr, err := m.sel.KernelF32(seq, dh, w, 1)
	if err != nil {
		return err
	}
	clk := m.disClock()
	if d.cfg.C2P {
		if err := kernels.PackF32Into(&e.pk, w, dh, d.pk[li][lo*h+hd*dh:], h, kr.NR); err != nil {
			return err
		}
		clk.lap(&e.c2pTime)
	}
	if d.cfg.P2C {
		if err := kernels.PackF32Into(&e.pq, w, dh, d.pq[li][lo*h+hd*dh:], h, kr.NR); err != nil {
			return err
		}
		e.p2c = growF32(e.p2c, seq*w)
		e.g = kernels.GEMMF32{M: seq, N: w, K: dh, A: rows[h+hd*dh:], Lda: ld, B: &e.pq, C: e.p2c, Ldc: w}
		if err := kr.Run(&e.g); err != nil {
			return err
		}
		clk.lap(&e.p2cTime)
	}
	return nil
}

// disScores adds the relative terms, times mul, to the r scores (stride
// seq) of the query rows i0.. of head hd (after disPrepare on the same
// head): mul is 1 where the scores are raw and scaled with the terms
// after (the float heads: 1*x is x, bit for bit), the attention's scale
// where they come scaled already (the INT8 head, whose Q carries it).
func (m *Model) disScores(b *attnBuf, hd, i0, r, seq int, rows []float32, ld int, scores []float32, mul float32) error {
	d, h := m.dis, m.cfg.Hidden
	dh := h / m.cfg.Heads
	lo, w := d.window(seq)
	e := &b.dis
	// idx of query i0+i and key j: d.idx[d.l-1 + i0+i - j] - lo. The
	// c2p term is added to every row before the p2c term, as the
	// interleaved order would (each score's two additions keep their
	// order), so that the profile can time the two apart.
	clk := m.disClock()
	if d.cfg.C2P {
		kr, err := m.sel.KernelF32(seq, dh, w, 1)
		if err != nil {
			return err
		}
		e.c2p = growF32(e.c2p, r*w)
		e.g = kernels.GEMMF32{M: r, N: w, K: dh, A: rows[i0*ld+hd*dh:], Lda: ld, B: &e.pk, C: e.c2p, Ldc: w}
		if err := kr.Run(&e.g); err != nil {
			return err
		}
		for i := range r {
			row := scores[i*seq : (i+1)*seq]
			ix := d.idx[d.l-1+i0+i-(seq-1) : d.l+i0+i]
			c := e.c2p[i*w : (i+1)*w]
			for j := range row {
				row[j] += mul * c[int(ix[seq-1-j])-lo]
			}
		}
		clk.lap(&e.c2pTime)
	}
	if d.cfg.P2C {
		for i := range r {
			row := scores[i*seq : (i+1)*seq]
			ix := d.idx[d.l-1+i0+i-(seq-1) : d.l+i0+i]
			for j := range row {
				row[j] += mul * e.p2c[j*w+int(ix[seq-1-j])-lo]
			}
		}
		clk.lap(&e.p2cTime)
	}
	return nil
}
