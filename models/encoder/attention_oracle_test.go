package encoder

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
	"gonum.org/v1/gonum/mat"

	"github.com/int8bert/int8bert/cpu"
	"github.com/int8bert/int8bert/kernels"
	"github.com/int8bert/int8bert/selector"
)

// Unit roundoffs of float32 and float64.
const (
	oracleU32 = 0x1p-24
	oracleU64 = 0x1p-53
)

// oracleGamma is k*u/(1-k*u), the forward error bound of a length-k dot
// product relative to sum |a||b| (Higham, section 3.1), in any order, with
// or without fused multiply-adds.
func oracleGamma(k int, u float64) float64 { return float64(k) * u / (1 - float64(k)*u) }

// softmaxExpErr is the documented relative error of kernels.Softmax's
// vectorised exp (< 2e-7).
const softmaxExpErr = 2e-7

// headOracle is gonum's computation of one (sequence, head) pair of
// attention in float64, with the matrices the error bound needs.
type headOracle struct {
	ctx   *mat.Dense // P V, [seq][d]
	bound *mat.Dense // per element: how far float32 attention may be
}

// view copies rows x d of x starting at off with row stride ld.
func view(x []float32, off, rows, d, ld int) *mat.Dense {
	m := mat.NewDense(rows, d, nil)
	for i := 0; i < rows; i++ {
		for t := 0; t < d; t++ {
			m.Set(i, t, float64(x[off+i*ld+t]))
		}
	}
	return m
}

func absDense(a *mat.Dense) *mat.Dense {
	var b mat.Dense
	b.Apply(func(_, _ int, v float64) float64 { return math.Abs(v) }, a)
	return &b
}

// oracleHead computes softmax(Q K^T / sqrt(d) + mask) V for head hd of
// sequence bi of the fused QKV rows with gonum, and the bound on the
// float32 pipeline's error, element by element:
//
//   - scores: the FP32 GEMM is within gamma32(d)*(|Q||K|^T)_ij of q_i.k_j;
//     times the scale it is off by scale times that, plus u32|s_ij| for the
//     float32 scale 1/sqrt(d) and u32|s_ij| for rounding the product: a_ij.
//   - softmax's exp argument s_ij - max_j s_ij is then off by
//     delta_ij <= a_ij + max_j a_ij + u32|s_ij - m_i| (its own rounding),
//     so e_ij = exp(.) is within eta_ij = (1+2e-7)*exp(delta_ij) - 1
//     relatively (the vectorised exp's documented error).
//   - the float32 sum of the e_ij is within max_j eta_ij + gamma32(seq)
//     relatively, and the reciprocal and the product round twice more: the
//     probabilities are within rho_i = (1+eta)^2 (1+gamma32(seq)) (1+u32)^2 - 1
//     of theirs, eta = max_j eta_ij over the unmasked keys (masked ones are
//     exactly 0 on both sides).
//   - the context P V, an FP32 GEMM of length seq, is then within
//     (rho_i + gamma32(seq)(1+rho_i)) (|P||V|)_it.
//
// gonum's own float64 error (a few gamma64(seq+d) of the same sums) is
// added for completeness.
func oracleHead(qkv []float32, mask []int32, bi, hd, seq, h, heads int) headOracle {
	d := h / heads
	ld := 3 * h
	base := bi * seq * ld
	q := view(qkv, base+hd*d, seq, d, ld)
	k := view(qkv, base+h+hd*d, seq, d, ld)
	v := view(qkv, base+2*h+hd*d, seq, d, ld)
	var s, sAbs mat.Dense
	s.Mul(q, k.T())
	sAbs.Mul(absDense(q), absDense(k).T())
	scale := 1 / math.Sqrt(float64(d))
	s.Scale(scale, &s)
	keep := func(j int) bool { return mask[bi*seq+j] != 0 }
	p := mat.NewDense(seq, seq, nil)
	rho := make([]float64, seq)
	for i := 0; i < seq; i++ {
		mx, amax := math.Inf(-1), 0.0
		a := make([]float64, seq)
		for j := 0; j < seq; j++ {
			if !keep(j) {
				continue
			}
			sij := s.At(i, j)
			mx = max(mx, sij)
			a[j] = scale*oracleGamma(d, oracleU32)*sAbs.At(i, j) + 2*oracleU32*math.Abs(sij)
			amax = max(amax, a[j])
		}
		var sum, eta float64
		for j := 0; j < seq; j++ {
			if !keep(j) {
				continue // exp(-MaxFloat32 - max) is 0 in float32 as here
			}
			e := math.Exp(s.At(i, j) - mx)
			p.Set(i, j, e)
			sum += e
			delta := a[j] + amax + oracleU32*math.Abs(s.At(i, j)-mx)
			eta = max(eta, (1+softmaxExpErr)*math.Exp(delta)-1)
		}
		for j := 0; j < seq; j++ {
			p.Set(i, j, p.At(i, j)/sum)
		}
		g := oracleGamma(seq, oracleU32)
		rho[i] = (1+eta)*(1+eta)*(1+g)*(1+oracleU32)*(1+oracleU32) - 1
	}
	var ctx, pv mat.Dense
	ctx.Mul(p, v)
	pv.Mul(absDense(p), absDense(v))
	g, g64 := oracleGamma(seq, oracleU32), oracleGamma(seq+d, oracleU64)
	bound := mat.NewDense(seq, d, nil)
	for i := 0; i < seq; i++ {
		for t := 0; t < d; t++ {
			bound.Set(i, t, (rho[i]+g*(1+rho[i])+4*g64)*pv.At(i, t))
		}
	}
	return headOracle{ctx: &ctx, bound: bound}
}

// TestAttentionAgainstGonum drives the encoder's attention as
// TestAttention does, on one goroutine and on three, and compares every
// context value with gonum's float64 computation of the same heads within
// oracleHead's bound. The configurations: one token; BERT-base's 12 heads of
// 64 over 128 tokens; heads of 32 and 16 with padding; and queries scaled
// by 6 so that the softmax is peaked (scores of tens: the exp argument's
// error, not the sums', dominates).
func TestAttentionAgainstGonum(t *testing.T) {
	kern := kernels.GenericF32
	for _, k := range kernels.F32Kernels() {
		if k != kernels.GenericF32 && k.Available(cpu.X86) {
			kern = k
			break
		}
	}
	// The selector forced to kern runs both of attention's products on it.
	sel, err := selector.New(selector.Options{CachePath: "off", Reps: 1, Force: kern.Name})
	require.NoError(t, err)
	t.Cleanup(func() { sel.Close() })
	for _, c := range []struct {
		batch, seq, h, heads int
		qScale               float32
	}{
		{1, 1, 8, 2, 1}, {1, 128, 768, 12, 1}, {2, 37, 96, 3, 1}, {3, 20, 64, 4, 1}, {2, 45, 128, 2, 6},
	} {
		name := fmt.Sprintf("b%d_s%d_h%d_heads%d_q%g", c.batch, c.seq, c.h, c.heads, c.qScale)
		t.Run(name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(c.seq), uint64(c.h)+7))
			rows := c.batch * c.seq
			qkv := make([]float32, rows*3*c.h)
			for i := range qkv {
				qkv[i] = float32(r.NormFloat64())
				if i%(3*c.h) < c.h {
					qkv[i] *= c.qScale
				}
			}
			in := &Inputs{Batch: c.batch, Seq: c.seq, Mask: make([]int32, rows)}
			for i := range in.Mask {
				in.Mask[i] = 1
				if i%c.seq > 0 && r.IntN(4) == 0 {
					in.Mask[i] = 0 // padding, never a whole sequence
				}
			}
			d := c.h / c.heads
			oracles := make([]headOracle, c.batch*c.heads)
			for bi := 0; bi < c.batch; bi++ {
				for hd := 0; hd < c.heads; hd++ {
					oracles[bi*c.heads+hd] = oracleHead(qkv, in.Mask, bi, hd, c.seq, c.h, c.heads)
				}
			}
			for _, threads := range []int{1, 3} {
				m := &Model{cfg: Config{Hidden: c.h, Heads: c.heads}, threads: threads, sel: sel, pass: &floatPass{prec: PrecisionFP32}}
				s := &scratch{qkv: append([]float32(nil), qkv...), ctx: make([]float32, rows*c.h)}
				require.NoError(t, m.attention(in, s))
				worst, at := 0.0, ""
				for bi := 0; bi < c.batch; bi++ {
					for hd := 0; hd < c.heads; hd++ {
						o := oracles[bi*c.heads+hd]
						for i := 0; i < c.seq; i++ {
							for tt := 0; tt < d; tt++ {
								got := float64(s.ctx[(bi*c.seq+i)*c.h+hd*d+tt])
								want, tol := o.ctx.At(i, tt), o.bound.At(i, tt)
								diff := math.Abs(got - want)
								require.Falsef(t, math.IsNaN(got), "threads %d: sequence %d head %d ctx[%d][%d] is NaN", threads, bi, hd, i, tt)
								if diff > 0 && diff/tol > worst {
									worst = diff / tol
									at = fmt.Sprintf("sequence %d head %d ctx[%d][%d] = %v, want %v within %g", bi, hd, i, tt, got, want, tol)
								}
							}
						}
					}
				}
				require.LessOrEqualf(t, worst, 1.0, "threads %d: %s (%.3g of the bound)", threads, at, worst)
			}
		})
	}
}
