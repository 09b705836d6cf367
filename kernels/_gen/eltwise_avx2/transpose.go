package main

// This file generates packT16A, the 16x16 transpose of the f32 packers
// (PackF32Into: FP32 attention's K per head) on ymm: four 8x8 transposes.

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

func transpose16() {
	kernel("packT16A", "func(dst, w *float32, nblk, ldw, ldd int)",
		"packT16A stores the transpose of the 16 x 16*nblk block of w (rows",
		"ldw apart) into dst (rows ldd apart), as four 8x8 transposes in",
		"registers a 16x16 block:",
		"",
		"	dst[q*ldd+r] = w[r*ldw+q]   for r < 16, q < 16*nblk",
		"",
		"It only moves bits. The caller checks len(w) >= 15*ldw+16*nblk and",
		"len(dst) >= (16*nblk-1)*ldd+16 and nblk > 0 (see packT16Generic). AVX.")
	d, wp := arg("dst"), arg("w")
	nblk, ldw, ldd := arg("nblk"), arg("ldw"), arg("ldd")
	SHLQ(U8(2), ldw) // bytes
	SHLQ(U8(2), ldd)
	w3, d3 := GP64(), GP64()
	LEAQ(Mem{Base: ldw, Index: ldw, Scale: 2}, w3)
	LEAQ(Mem{Base: ldd, Index: ldd, Scale: 2}, d3)
	// rows returns the 8 addresses of rows base, base+step, ...,
	// base+7*step (step, 3*step in registers; b4 = base+4*step).
	rows := func(base, step, step3, b4 reg.Register, disp int) []Mem {
		return []Mem{
			{Base: base, Disp: disp}, {Base: base, Index: step, Scale: 1, Disp: disp},
			{Base: base, Index: step, Scale: 2, Disp: disp}, {Base: base, Index: step3, Scale: 1, Disp: disp},
			{Base: b4, Disp: disp}, {Base: b4, Index: step, Scale: 1, Disp: disp},
			{Base: b4, Index: step, Scale: 2, Disp: disp}, {Base: b4, Index: step3, Scale: 1, Disp: disp},
		}
	}
	Label("t16a_blk")
	for rb := 0; rb < 2; rb++ {
		for cb := 0; cb < 2; cb++ {
			// Rows 8rb..8rb+7 of w, columns 8cb..8cb+7 of the block.
			src, src4 := GP64(), GP64()
			if rb == 0 {
				MOVQ(wp, src)
			} else {
				LEAQ(Mem{Base: wp, Index: ldw, Scale: 8}, src)
			}
			LEAQ(Mem{Base: src, Index: ldw, Scale: 4}, src4)
			r := make([]reg.VecVirtual, 8)
			for i, m := range rows(src, ldw, w3, src4, 32*cb) {
				r[i] = YMM()
				VMOVUPS(m, r[i])
			}
			// t: pairs of rows interleaved; s: four rows' columns c and
			// c+4 in the two lanes; o: whole columns.
			t := make([]reg.VecVirtual, 8)
			for i := 0; i < 8; i += 2 {
				t[i], t[i+1] = YMM(), YMM()
				VUNPCKLPS(r[i+1], r[i], t[i])
				VUNPCKHPS(r[i+1], r[i], t[i+1])
			}
			s := make([]reg.VecVirtual, 8)
			for g := 0; g < 2; g++ { // rows 4g..4g+3
				for h := 0; h < 2; h++ { // t[4g+h] and t[4g+h+2]
					a, b := t[4*g+h], t[4*g+h+2]
					lo, hi := YMM(), YMM()
					VSHUFPS(U8(0x44), b, a, lo)
					VSHUFPS(U8(0xee), b, a, hi)
					s[4*g+2*h], s[4*g+2*h+1] = lo, hi // columns 2h, 2h+1 (and +4)
				}
			}
			// dst rows q = 8cb..8cb+7 of the block, at column 8rb.
			dq, dq4 := GP64(), GP64()
			if cb == 0 {
				MOVQ(d, dq)
			} else {
				LEAQ(Mem{Base: d, Index: ldd, Scale: 8}, dq)
			}
			LEAQ(Mem{Base: dq, Index: ldd, Scale: 4}, dq4)
			out := rows(dq, ldd, d3, dq4, 32*rb)
			for c := 0; c < 4; c++ {
				o0, o4 := YMM(), YMM()
				VPERM2F128(U8(0x20), s[4+c], s[c], o0)
				VPERM2F128(U8(0x31), s[4+c], s[c], o4)
				VMOVUPS(o0, out[c])
				VMOVUPS(o4, out[c+4])
			}
		}
	}
	ADDQ(U8(64), wp)
	// d += 16*ldd bytes.
	LEAQ(Mem{Base: d, Index: ldd, Scale: 8}, d)
	LEAQ(Mem{Base: d, Index: ldd, Scale: 8}, d)
	DECQ(nblk)
	JNZ(LabelRef("t16a_blk"))
	ret()
}
