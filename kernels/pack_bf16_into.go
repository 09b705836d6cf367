package kernels

import (
	"fmt"
	"sync"
	"unsafe"
)

// bf16RowPool holds the packers' row scratch.
var bf16RowPool sync.Pool

// bf16Row returns a scratch row of n bf16 values and its pool handle.
func bf16Row(n int) (*[]uint16, []uint16) {
	p, _ := bf16RowPool.Get().(*[]uint16)
	if p == nil || cap(*p) < n {
		b := make([]uint16, max(n, 64))
		p = &b
	}
	return p, (*p)[:n]
}

// bf16Rows rounds src to bf16 into dst[:len(src)] (bf16DAZ, bit for bit):
// packBF16Row's loop in Go, the AVX-512 row packer where the CPU has it
// (set in gemm_bf16_amd64.go's init).
var bf16Rows = func(dst []uint16, src []float32) {
	for i, x := range src {
		dst[i] = bf16DAZ(x)
	}
}

// PackBF16Into is PackBF16 into dst, reusing its storage when large
// enough: w ([n][ldw], ldw >= k) rounded to bfloat16 and packed for
// kernels of panel width nr. Attention's Q K^T packs K, an activation,
// this way once per head (docs/DESIGN.md section 3.10).
func PackBF16Into(dst *PackedBF16, n, k int, w []float32, ldw, nr int) error {
	if n < 0 || k < 0 || ldw < max(k, 1) || nr <= 0 || nr%16 != 0 {
		return fmt.Errorf("kernels: pack bf16 into n=%d k=%d ldw=%d nr=%d: %w", n, k, ldw, nr, ErrShape)
	}
	if n > 0 && k > 0 && len(w) < (n-1)*ldw+k {
		return fmt.Errorf("kernels: pack bf16 into n=%d k=%d: len(w)=%d too short: %w", n, k, len(w), ErrShape)
	}
	data := dst.reserve(n, k, nr)
	if n%nr != 0 || k%2 != 0 {
		clear(data) // the columns past n, the odd K's last halves
	}
	if n == 0 || k == 0 {
		return nil
	}
	kp := dst.KP()
	// A column's pairs are consecutive in its row of w: rounded as a row,
	// each pair is one 32-bit word of the panel, nr words apart.
	h, row := bf16Row(kp)
	defer bf16RowPool.Put(h)
	row[kp-1] = 0 // an odd K's last half
	words := unsafe.Slice((*uint32)(unsafe.Pointer(&data[0])), len(data)/2)
	pairs := unsafe.Slice((*uint32)(unsafe.Pointer(&row[0])), kp/2)
	for j := range n {
		bf16Rows(row, w[j*ldw:j*ldw+k])
		base := (j/nr)*nr*kp/2 + j%nr
		for q, x := range pairs {
			words[base+q*nr] = x
		}
	}
	return nil
}

// PackBF16TInto is PackBF16Into of W given transposed: W[j][q] is
// wt[q*ldwt+j] (wt [k][ldwt], ldwt >= n). Attention's P V packs V^T, whose
// columns are V's rows, this way (docs/DESIGN.md section 3.10).
func PackBF16TInto(dst *PackedBF16, n, k int, wt []float32, ldwt, nr int) error {
	if n < 0 || k < 0 || ldwt < max(n, 1) || nr <= 0 || nr%16 != 0 {
		return fmt.Errorf("kernels: pack bf16 transposed n=%d k=%d ldwt=%d nr=%d: %w", n, k, ldwt, nr, ErrShape)
	}
	if n > 0 && k > 0 && len(wt) < (k-1)*ldwt+n {
		return fmt.Errorf("kernels: pack bf16 transposed n=%d k=%d: len(wt)=%d too short: %w", n, k, len(wt), ErrShape)
	}
	data := dst.reserve(n, k, nr)
	if n%nr != 0 || k%2 != 0 {
		clear(data)
	}
	if n == 0 || k == 0 {
		return nil
	}
	kp := dst.KP()
	// Features 2q and 2q+1 of a column are one 32-bit word of pair q: two
	// rows of wt rounded, then each column's word written, a panel's
	// columns contiguous.
	h0, r0 := bf16Row(n)
	defer bf16RowPool.Put(h0)
	h1, r1 := bf16Row(n)
	defer bf16RowPool.Put(h1)
	words := unsafe.Slice((*uint32)(unsafe.Pointer(&data[0])), len(data)/2)
	for q := 0; q < k; q += 2 {
		bf16Rows(r0, wt[q*ldwt:q*ldwt+n])
		if q+1 < k {
			bf16Rows(r1, wt[(q+1)*ldwt:(q+1)*ldwt+n])
		} else {
			clear(r1) // an odd K's last half
		}
		for j0 := 0; j0 < n; j0 += nr {
			out := words[j0*kp/2+q/2*nr:]
			a, b := r0[j0:min(j0+nr, n)], r1[j0:min(j0+nr, n)]
			out = out[:len(a)]
			for jj, x := range a {
				out[jj] = uint32(x) | uint32(b[jj])<<16
			}
		}
	}
	return nil
}

// reserve sets p's shape and returns p.Data sized for it, reusing the
// existing storage when its capacity allows (Data starts 64-byte aligned
// either way).
func (p *PackedBF16) reserve(n, k, nr int) []uint16 {
	p.N, p.K, p.NR = n, k, nr
	size := (n + nr - 1) / nr * nr * p.KP()
	if cap(p.Data) >= size && (cap(p.Data) == 0 || uintptr(unsafe.Pointer(unsafe.SliceData(p.Data)))%64 == 0) {
		p.Data = p.Data[:size]
		return p.Data
	}
	buf := make([]uint16, size+32)
	off := 0
	if a := uintptr(unsafe.Pointer(unsafe.SliceData(buf))) % 64; a != 0 {
		off = int(64-a) / 2
	}
	p.Data = buf[off : off+size]
	return p.Data
}
