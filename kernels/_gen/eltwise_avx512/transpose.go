package main

// This file generates packT16, the 16x16 transpose of the f32 packers.

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

func transpose16() {
	kernel("packT16", "func(dst, w []float32, nblk, ldw, ldd int)",
		"packT16 stores the transpose of the 16 x 16*nblk block of w (rows",
		"ldw apart) into dst (rows ldd apart), 16x16 blocks in registers:",
		"",
		"	dst[q*ldd+r] = w[r*ldw+q]   for r < 16, q < 16*nblk",
		"",
		"It only moves bits. The caller checks len(w) >= 15*ldw+16*nblk and",
		"len(dst) >= (16*nblk-1)*ldd+16 (see packT16Generic).")
	d, wp := base("dst"), base("w")
	nblk, ldw, ldd := arg("nblk"), arg("ldw"), arg("ldd")
	SHLQ(U8(2), ldw)
	SHLQ(U8(2), ldd)
	// w3 = 3*ldw bytes, for rows r = 4g+0..3 at base + g*4*ldw.
	w3 := GP64()
	LEAQ(Mem{Base: ldw, Index: ldw, Scale: 2}, w3)
	d3 := GP64()
	LEAQ(Mem{Base: ldd, Index: ldd, Scale: 2}, d3)
	TESTQ(nblk, nblk)
	JZ(LabelRef("t16_done"))
	Label("t16_blk")
	// Load the 16 rows (16 floats each) of this block.
	a := make([]reg.VecVirtual, 16)
	rp := GP64()
	MOVQ(wp, rp)
	for g := 0; g < 4; g++ {
		if g > 0 {
			LEAQ(Mem{Base: rp, Index: ldw, Scale: 4}, rp)
		}
		for r := 0; r < 4; r++ {
			a[4*g+r] = ZMM()
			VMOVUPS(strided(rp, ldw, w3, r), a[4*g+r])
		}
	}
	// Stage 1: per 128-bit lane l, t[2i] = [a0[4l] a1[4l] a0[4l+1] a1[4l+1]]
	// (rows 2i, 2i+1), t[2i+1] the same for columns 4l+2, 4l+3.
	t := make([]reg.VecVirtual, 16)
	for i := 0; i < 8; i++ {
		t[2*i], t[2*i+1] = ZMM(), ZMM()
		VUNPCKLPS(a[2*i+1], a[2*i], t[2*i])
		VUNPCKHPS(a[2*i+1], a[2*i], t[2*i+1])
	}
	// Stage 2: u[4g+c] lane l = rows 4g..4g+3 at column 4l+c.
	u := make([]reg.VecVirtual, 16)
	for g := 0; g < 4; g++ {
		for c := 0; c < 4; c++ {
			u[4*g+c] = ZMM()
		}
		VUNPCKLPD(t[4*g+2], t[4*g], u[4*g])
		VUNPCKHPD(t[4*g+2], t[4*g], u[4*g+1])
		VUNPCKLPD(t[4*g+3], t[4*g+1], u[4*g+2])
		VUNPCKHPD(t[4*g+3], t[4*g+1], u[4*g+3])
	}
	// Stage 3: v[c] = (g0 l0, g0 l2, g1 l0, g1 l2), v[c+4] = (g0 l1, g0 l3,
	// g1 l1, g1 l3), v[c+8], v[c+12] the same for groups 2, 3.
	v := make([]reg.VecVirtual, 16)
	for c := 0; c < 4; c++ {
		v[c], v[c+4], v[c+8], v[c+12] = ZMM(), ZMM(), ZMM(), ZMM()
		VSHUFF32X4(U8(0x88), u[4+c], u[c], v[c])
		VSHUFF32X4(U8(0xdd), u[4+c], u[c], v[c+4])
		VSHUFF32X4(U8(0x88), u[12+c], u[8+c], v[c+8])
		VSHUFF32X4(U8(0xdd), u[12+c], u[8+c], v[c+12])
	}
	// Stage 4: column 4l+c = groups 0..3 of lane l.
	o := make([]reg.VecVirtual, 16)
	for c := 0; c < 4; c++ {
		o[c], o[8+c], o[4+c], o[12+c] = ZMM(), ZMM(), ZMM(), ZMM()
		VSHUFF32X4(U8(0x88), v[c+8], v[c], o[c])
		VSHUFF32X4(U8(0xdd), v[c+8], v[c], o[8+c])
		VSHUFF32X4(U8(0x88), v[c+12], v[c+4], o[4+c])
		VSHUFF32X4(U8(0xdd), v[c+12], v[c+4], o[12+c])
	}
	for g := 0; g < 4; g++ {
		for r := 0; r < 4; r++ {
			VMOVUPS(o[4*g+r], strided(d, ldd, d3, r))
		}
		LEAQ(Mem{Base: d, Index: ldd, Scale: 4}, d)
	}
	ADDQ(U8(64), wp)
	DECQ(nblk)
	JNZ(LabelRef("t16_blk"))
	Label("t16_done")
	ret()
}
