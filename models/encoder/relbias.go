package encoder

import (
	"math"

	"github.com/int8bert/int8bert/kernels"
)

// The relative position bias (MPNet; docs/DESIGN.md section 3.10): every
// layer adds, to the score of query i and key j of head h, the table's
// entry [bucket(j-i)][h]. It depends on j-i only, so each head's bias is
// one vector over the relative positions -(L-1) .. L-1 (L the longest
// sequence), made once when the model is built: row i of a sequence of n
// tokens is the n values from index L-1-i on, a slice, with no matrix per
// sequence length, per pass or per layer. Padded and packed sequences get
// the same rows (positions count from each sequence's first token, as
// Hugging Face's arange(qlen)).

// relBucket is Hugging Face's MPNetEncoder.relative_position_bucket
// (T5's bidirectional buckets) of the relative position rel = key -
// query: half the buckets for keys after the query; in each half, the
// distances below a quarter of the buckets exactly, the rest log-spaced
// up to maxDist, in float32 as torch computes it (the golden's bucket
// list holds Hugging Face's for every rel the tests use).
func relBucket(rel, buckets, maxDist int) int {
	half := buckets / 2
	ret, n := 0, -rel
	if n < 0 {
		ret, n = half, -n
	}
	exact := half / 2
	if n < exact {
		return ret + n
	}
	v := float32(math.Log(float64(float32(n)/float32(exact)))) / float32(math.Log(float64(maxDist)/float64(exact))) *
		float32(half-exact)
	return ret + min(exact+int(v), half-1)
}

// relBiasVectors lays the table ([RelTable][Heads]) out as each head's
// vector over the relative positions of sequences up to c.MaxSeq() tokens:
// [Heads][2L-1], entry L-1+rel for rel = key - query.
func relBiasVectors(c Config, table []float32) []float32 {
	l := c.MaxSeq()
	w := 2*l - 1
	v := make([]float32, c.Heads*w)
	for k := range w {
		b := relBucket(k-(l-1), c.RelBuckets, c.RelMaxDistance)
		for h := range c.Heads {
			v[h*w+k] = table[b*c.Heads+h]
		}
	}
	return v
}

// relBiasRow is the bias of query row i of a sequence of n tokens, head
// hd: key j's at index j.
func (m *Model) relBiasRow(hd, i, n int) []float32 {
	l := m.cfg.MaxSeq()
	o := hd*(2*l-1) + l - 1 - i
	return m.relBias[o : o+n]
}

// biasMask is the additive vector of row i of head hd's softmax: the
// relative bias row, plus the key mask when there is one (into buf).
func (m *Model) biasMask(buf *[]float32, hd, i, n int, mask []float32) []float32 {
	bias := m.relBiasRow(hd, i, n)
	if mask == nil {
		return bias
	}
	*buf = growF32(*buf, n)
	out := *buf
	for j := range out {
		out[j] = bias[j] + mask[j]
	}
	return out
}

// softmaxBiased is FP32 attention's softmax of r query rows from i0 (in
// place on scores, row stride n) with the relative bias: row by row, the
// row's bias (and the key mask) as the additive vector of SoftmaxScaled,
// so s*scale + bias + mask costs no pass of its own.
func (m *Model) softmaxBiased(b *attnBuf, hd, i0, r, n int, scale float32, mask []float32) error {
	for i := range r {
		row := b.scores[i*n : (i+1)*n]
		if err := kernels.SoftmaxScaled(row, row, 1, n, scale, m.biasMask(&b.bias, hd, i0+i, n, mask)); err != nil {
			return err
		}
	}
	return nil
}

// softmaxU8Biased is softmaxBiased for INT8 attention (kernels.SoftmaxU8;
// the scores are scaled already): P's rows into p (stride n) and their
// scales into ps.
func (m *Model) softmaxU8Biased(b *attnBuf, p []uint8, ps []float32, hd, i0, r, n int, mask []float32) error {
	for i := range r {
		if err := kernels.SoftmaxU8(p[i*n:], n, ps[i:i+1], b.scores[i*n:(i+1)*n], 1, n, m.biasMask(&b.bias, hd, i0+i, n, mask), nil); err != nil {
			return err
		}
	}
	return nil
}
