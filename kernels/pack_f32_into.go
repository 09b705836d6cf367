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
	// Sixteen columns (rows of w) at a time: each 16x16 block is
	// transposed in registers (packT16 on the AVX-512 path, its Go twin
	// otherwise; both only move data), the k%16 last features and the
	// n%16 last columns one by one.
	kb := k &^ 15
	tr := eltImpl().packT16
	j := 0
	for ; j+16 <= n; j += 16 {
		base := (j/nr)*nr*k + j%nr
		if kb > 0 {
			// Bounds the assembly relies on (see packT16).
			src := w[j*ldw : j*ldw+15*ldw+kb]
			out := data[base : base+(kb-1)*nr+16]
			tr(out, src, kb/16, ldw, nr)
		}
		for jj := 0; jj < 16; jj++ {
			for q, x := range w[(j+jj)*ldw+kb : (j+jj)*ldw+k] {
				data[base+(kb+q)*nr+jj] = x
			}
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
