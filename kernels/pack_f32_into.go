package kernels

import (
	"fmt"
	"unsafe"
)

// PackF32Into is PackF32 into dst: it packs w ([n][ldw], ldw >= k) with
// panel width nr, reusing the storage of dst.Data when it is large enough
// (and allocating otherwise), so a caller that packs per call (attention's
// K per head) allocates nothing in the steady state. dst.Data keeps its
// 64-byte alignment; padding columns are zeroed.
func PackF32Into(dst *PackedF32, n, k int, w []float32, ldw, nr int) error {
	if n < 0 || k < 0 || ldw < max(k, 1) || nr <= 0 || nr%16 != 0 {
		return fmt.Errorf("kernels: pack f32 into n=%d k=%d ldw=%d nr=%d: %w", n, k, ldw, nr, ErrShape)
	}
	if n > 0 && k > 0 && len(w) < (n-1)*ldw+k {
		return fmt.Errorf("kernels: pack f32 into n=%d k=%d: len(w)=%d too short: %w", n, k, len(w), ErrShape)
	}
	data := dst.reserve(n, k, nr)
	panels := (n + nr - 1) / nr
	if n%nr != 0 {
		clear(data[(panels-1)*nr*k:])
	}
	// Eight columns at a time: each source row is read once and the eight
	// stores per q land in one cache line of the panel.
	j := 0
	for ; j+8 <= n && (j%nr)+8 <= nr; j += 8 {
		base := (j/nr)*nr*k + j%nr
		r0 := w[j*ldw : j*ldw+k]
		r1 := w[(j+1)*ldw : (j+1)*ldw+k]
		r2 := w[(j+2)*ldw : (j+2)*ldw+k]
		r3 := w[(j+3)*ldw : (j+3)*ldw+k]
		r4 := w[(j+4)*ldw : (j+4)*ldw+k]
		r5 := w[(j+5)*ldw : (j+5)*ldw+k]
		r6 := w[(j+6)*ldw : (j+6)*ldw+k]
		r7 := w[(j+7)*ldw : (j+7)*ldw+k]
		for q := range r0 {
			o := data[base+q*nr : base+q*nr+8]
			o[0], o[1], o[2], o[3] = r0[q], r1[q], r2[q], r3[q]
			o[4], o[5], o[6], o[7] = r4[q], r5[q], r6[q], r7[q]
		}
	}
	for ; j < n; j++ {
		base := (j/nr)*nr*k + j%nr
		for q, x := range w[j*ldw : j*ldw+k] {
			data[base+q*nr] = x
		}
	}
	return nil
}

// PackF32TInto packs into dst the same matrix as PackF32Into, W ([n][k]),
// given as its transpose: wt is [k][ldwt] (ldwt >= n) with wt[q*ldwt+j] =
// W[j][q]. Each panel row is then a contiguous copy (attention's V, whose
// transpose is the "weights" of P V). Storage as PackF32Into.
func PackF32TInto(dst *PackedF32, n, k int, wt []float32, ldwt, nr int) error {
	if n < 0 || k < 0 || ldwt < max(n, 1) || nr <= 0 || nr%16 != 0 {
		return fmt.Errorf("kernels: pack f32 transposed n=%d k=%d ldwt=%d nr=%d: %w", n, k, ldwt, nr, ErrShape)
	}
	if n > 0 && k > 0 && len(wt) < (k-1)*ldwt+n {
		return fmt.Errorf("kernels: pack f32 transposed n=%d k=%d: len(wt)=%d too short: %w", n, k, len(wt), ErrShape)
	}
	data := dst.reserve(n, k, nr)
	for p := 0; p*nr < n; p++ {
		j := p * nr
		nv := min(nr, n-j)
		panel := data[p*nr*k : (p+1)*nr*k]
		for q := 0; q < k; q++ {
			row := panel[q*nr : q*nr+nr]
			copy(row, wt[q*ldwt+j:q*ldwt+j+nv])
			clear(row[nv:])
		}
	}
	return nil
}

// reserve sets p's shape and returns p.Data sized for it, reusing the
// existing storage when its capacity allows (Data starts 64-byte aligned
// either way).
func (p *PackedF32) reserve(n, k, nr int) []float32 {
	size := (n + nr - 1) / nr * nr * k
	p.N, p.K, p.NR = n, k, nr
	if cap(p.Data) >= size && (cap(p.Data) == 0 || uintptr(unsafe.Pointer(unsafe.SliceData(p.Data)))%64 == 0) {
		p.Data = p.Data[:size]
		return p.Data
	}
	buf := make([]float32, size+16)
	off := 0
	if a := uintptr(unsafe.Pointer(unsafe.SliceData(buf))) % 64; a != 0 {
		off = int(64-a) / 4
	}
	p.Data = buf[off : off+size]
	return p.Data
}
