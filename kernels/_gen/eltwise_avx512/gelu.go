package main

// This file generates the erf GELU, with the exp (no FMA) of its tail.

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// expTails turns each reduced argument r[j] into exp(r[j])*2^n[j], in
// place, the vectors' instructions interleaved.
func expTails(r, n []reg.VecVirtual) {
	p, z := make([]reg.VecVirtual, len(r)), make([]reg.VecVirtual, len(r))
	for j := range r {
		p[j], z[j] = ZMM(), ZMM()
		VBROADCASTSS(c("e0"), p[j])
	}
	for _, e := range []string{"e1", "e2", "e3", "e4", "e5"} {
		for j := range r {
			VMULPS(r[j], p[j], p[j])
		}
		for j := range r {
			VADDPS_BCST(c(e), p[j], p[j])
		}
	}
	for j := range r {
		VMULPS(r[j], r[j], z[j])
	}
	for j := range r {
		VMULPS(z[j], p[j], p[j])
	}
	for j := range r {
		VADDPS(r[j], p[j], p[j])
	}
	for j := range r {
		VADDPS_BCST(c("one"), p[j], p[j])
	}
	for j := range r {
		VSCALEFPS(n[j], p[j], r[j])
	}
}

// geluVecs returns GELU(x) as eltGELU1 computes it for each of xs, the
// vectors' instructions interleaved so that their long dependency chains
// overlap.
func geluVecs(xs []reg.VecVirtual, ones, zero, m14 reg.VecVirtual) []reg.VecVirtual {
	u := len(xs)
	vs := func() []reg.VecVirtual {
		r := make([]reg.VecVirtual, u)
		for j := range r {
			r[j] = ZMM()
		}
		return r
	}
	each := func(f func(j int)) {
		for j := 0; j < u; j++ {
			f(j)
		}
	}
	ax, t, q, x2, lo, a, s, n, h, phi, y := vs(), vs(), vs(), vs(), vs(), vs(), vs(), vs(), vs(), vs(), vs()
	each(func(j int) { VPANDD_BCST(c("absmask"), xs[j], ax[j]) })
	each(func(j int) { VMINPS_BCST(c("geluabsmax"), ax[j], ax[j]) })
	each(func(j int) { VMULPS_BCST(c("invsqrt2"), ax[j], t[j]) }) // z
	each(func(j int) { VMULPS_BCST(c("half"), t[j], t[j]) })
	each(func(j int) { VADDPS(ones, t[j], t[j]) })
	each(func(j int) { VDIVPS(t[j], ones, t[j]) }) // t = 1/(z/2 + 1)
	each(func(j int) { VBROADCASTSS(c("p0"), q[j]) })
	for _, p := range []string{"p1", "p2", "p3", "p4", "p5", "p6", "p7", "p8"} {
		each(func(j int) { VMULPS(t[j], q[j], q[j]) })
		each(func(j int) { VADDPS_BCST(c(p), q[j], q[j]) })
	}
	each(func(j int) { VMULPS(t[j], q[j], q[j]) })
	each(func(j int) { VADDPS_BCST(c("erfck"), q[j], q[j]) })
	each(func(j int) { VMULPS(ax[j], ax[j], x2[j]) })
	each(func(j int) { VMOVAPS(x2[j], lo[j]) })
	each(func(j int) { VFMSUB231PS(ax[j], ax[j], lo[j]) }) // lo = ax*ax - x2, exact
	each(func(j int) { VMULPS_BCST(c("half"), lo[j], lo[j]) })
	each(func(j int) { VSUBPS(lo[j], q[j], q[j]) })              // b = q - lo
	each(func(j int) { VMULPS_BCST(c("half"), x2[j], a[j]) })    // hi
	each(func(j int) { VPXORD_BCST(c("signmask"), a[j], a[j]) }) // a = -hi
	// exp(a + b), as eltExp2.
	each(func(j int) { VADDPS(q[j], a[j], s[j]) })
	each(func(j int) { VMULPS_BCST(c("log2e"), s[j], n[j]) })
	each(func(j int) { VRNDSCALEPS(U8(0), n[j], n[j]) })
	each(func(j int) { VMULPS_BCST(c("ln2hi"), n[j], s[j]) })
	each(func(j int) { VSUBPS(s[j], a[j], a[j]) })
	each(func(j int) { VADDPS(q[j], a[j], a[j]) })
	each(func(j int) { VMULPS_BCST(c("ln2lo"), n[j], s[j]) })
	each(func(j int) { VSUBPS(s[j], a[j], a[j]) })
	expTails(a, n) // a = exp
	each(func(j int) { VMULPS(a[j], t[j], h[j]) })
	each(func(j int) { VMULPS_BCST(c("half"), h[j], h[j]) })
	each(func(j int) { VSUBPS(h[j], ones, phi[j]) })
	for j := 0; j < u; j++ {
		kneg := K()
		VCMPPS(U8(1), zero, xs[j], kneg) // x < 0
		VMOVAPS(h[j], kneg, phi[j])
		VMULPS(phi[j], xs[j], y[j])
		ksmall := K()
		VCMPPS(U8(1), m14, xs[j], ksmall) // x < -14
		VPXORD(y[j], y[j], ksmall, y[j])
	}
	return y
}

// geluUnroll is how many vectors the main GELU loop interleaves.
const geluUnroll = 4

func gelu() {
	kernel("eltGELU", "func(dst, x []float32)",
		"eltGELU stores dst[j] = eltGELU1(x[j]) for j < len(x): the erf GELU",
		"x*Phi(x) through a relative-accurate erfc (see eltGELU1).")
	n, d, xp := length("x"), base("dst"), base("x")
	ones, m14 := bcast("one"), bcast("geluzerolt")
	zero := zeroed(VXORPS)
	i := unrolledLoopAt(n, geluUnroll, "unrolled", "rest", func(i reg.GPVirtual) {
		storeVecs(geluVecs(loadVecs(xp, i, geluUnroll), ones, zero, m14), d, i)
	})
	rowLoopFrom(i, n, func(i reg.GPVirtual, k reg.Register) {
		store(geluVecs([]reg.VecVirtual{load(f32At(xp, i), k)}, ones, zero, m14)[0], f32At(d, i), k)
	})
	ret()
}
