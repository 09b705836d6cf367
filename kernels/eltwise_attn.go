package kernels

import (
	"fmt"
	"math"
	"sync"
	"unsafe"
)

// The element-wise steps of INT8 attention (docs/DESIGN.md section 3.10):
// the dynamic quantization of one head's Q rows, K and V packed straight
// into the s8 "weights" layout of the u8 x s8 kernels (PackedS8), and the
// softmax whose output is P quantized to u8 with one scale per row. They
// run on the element-wise path of eltwise.go (AVX-512, AVX2 or the Go
// twins), one row at a time, on the calling goroutine.

// QuantizeRowsU8Block is QuantizeRowsU8 of a block: rows x cols of x
// (row stride ldx) into dst (row stride ldd), one scale per row,
//
//	scales[i] = max_j |x[i][j]| / 127   (1 for an all-zero row)
//	dst[i][j] = clamp(roundHalfEven(x[i][j]*(1/scales[i])), -128, 127) + 128
//
// (attention's Q, a head's columns of the fused QKV rows). Errors as
// QuantizeRowsU8.
func QuantizeRowsU8Block(dst []uint8, ldd int, scales []float32, x []float32, ldx, rows, cols int) error {
	const op = "quantize rows u8 block"
	if err := checkBlock(op, rows, cols, len(dst), ldd, len(x), ldx); err != nil {
		return err
	}
	if len(scales) < rows {
		return eltShape(op, rows, cols, "len(scales)=%d < rows", len(scales))
	}
	if cols == 0 {
		return nil
	}
	f := eltImpl()
	for i := 0; i < rows; i++ {
		xr := x[i*ldx : i*ldx+cols]
		b := f.absMax(xr)
		if b >= absMaxBitsLimit {
			return blockNonFinite(op, rows, cols, i, xr)
		}
		s := math.Float32frombits(b) / 127
		if s == 0 {
			s = 1
		}
		scales[i] = s
		f.qRow(dst[i*ldd:i*ldd+cols], xr, 1/s)
	}
	return nil
}

// checkBlock checks a rows x cols block of dst (stride ldd) and x (ldx).
func checkBlock(op string, rows, cols, nd, ldd, nx, ldx int) error {
	if rows < 0 || cols < 0 || ldd < cols || ldx < cols {
		return eltShape(op, rows, cols, "ldd=%d ldx=%d", ldd, ldx)
	}
	if rows > 0 && cols > 0 && (nd < (rows-1)*ldd+cols || nx < (rows-1)*ldx+cols) {
		return eltShape(op, rows, cols, "len(dst)=%d len(x)=%d too short for ldd=%d ldx=%d", nd, nx, ldd, ldx)
	}
	return nil
}

func blockNonFinite(op string, rows, cols, i int, xr []float32) error {
	j := max(findNonFinite(xr), 0)
	return fmt.Errorf("kernels: %s rows=%d cols=%d: row %d col %d: %v: %w", op, rows, cols, i, j, xr[j], ErrNonFinite)
}

// reserveS8 sets p's shape for n x k with panel width nr and returns
// p.Data sized for it, reusing its storage when the capacity allows. The
// last panel's padding columns are zeroed (the layout's promise).
func (p *PackedS8) reserveS8(n, k, nr int) []int8 {
	p.N, p.K, p.NR = n, k, nr
	p.Kp, p.Np = (k+3)&^3, (n+nr-1)/nr*nr
	size := p.Np * p.Kp
	if cap(p.Data) < size {
		p.Data = make([]int8, size)
	}
	p.Data = p.Data[:size]
	if n%nr != 0 {
		clear(p.Data[(p.Np-nr)*p.Kp:])
	}
	return p.Data
}

// attnTmp is the stack scratch of the packers: one row (or four) of s8.
const attnTmp = 1024

// PackQuantS8Into quantizes each row of w ([n][ldw], k used: attention's
// K, one row per key) to symmetric s8 with a scale of its own,
//
//	scales[j] = max_q |w[j][q]| / 127   (1 for an all-zero row)
//	W[j][q] = clamp(roundHalfEven(w[j][q]*(1/scales[j])), -128, 127)
//
// and packs W into dst in the layout of PackedS8 for panel width nr,
// with its column sums (ColSum[j], for a u8 source's zero point), reusing
// dst's storage. k must be at most 1024. A NaN or infinite value is an
// error wrapping ErrNonFinite.
func PackQuantS8Into(dst *PackedS8, scales []float32, n, k int, w []float32, ldw, nr int) error {
	const op = "pack quant s8"
	if n < 0 || k < 0 || k > attnTmp || ldw < max(k, 1) || nr <= 0 || nr%16 != 0 {
		return fmt.Errorf("kernels: %s n=%d k=%d ldw=%d nr=%d: %w", op, n, k, ldw, nr, ErrShape)
	}
	if n > 0 && k > 0 && len(w) < (n-1)*ldw+k {
		return fmt.Errorf("kernels: %s n=%d k=%d: len(w)=%d too short: %w", op, n, k, len(w), ErrShape)
	}
	if len(scales) < n {
		return fmt.Errorf("kernels: %s n=%d: len(scales)=%d: %w", op, n, len(scales), ErrShape)
	}
	dst.reserveS8(n, k, nr)
	if cap(dst.ColSum) < n {
		dst.ColSum = make([]int32, n)
	}
	dst.ColSum = dst.ColSum[:n]
	if k == 0 {
		clear(dst.ColSum)
		return nil
	}
	f := eltImpl()
	var tmp [attnTmp]int8 // packKey's, zero past k
	for j := 0; j < n; j++ {
		row := w[j*ldw : j*ldw+k]
		s, cs, b := packKey(f, dst, j, row, &tmp)
		if b >= absMaxBitsLimit {
			return blockNonFinite(op, n, k, j, row)
		}
		scales[j], dst.ColSum[j] = s, cs
	}
	return nil
}

// eltPackQuantKRowGeneric is eltPackQuantKRow's twin: PackQuantS8Into's
// steps for one key, its words stored at dst[g*stride:].
func eltPackQuantKRowGeneric(dst []int8, x []float32, stride int) (scale float32, colsum int32, bits uint32) {
	k := len(x)
	b := eltAbsMaxGeneric(x)
	if b >= absMaxBitsLimit {
		return 0, 0, b
	}
	s := math.Float32frombits(b) / 127
	if s == 0 {
		s = 1
	}
	var tmp [attnTmp]int8
	kp := (k + 3) &^ 3
	t := tmp[:k]
	eltQuantS8Generic(t, x, 1/s, 0)
	for g := 0; g < kp/4; g++ {
		copy(dst[g*stride:g*stride+4], tmp[g*4:g*4+4])
	}
	return s, sumS8(t), b
}

// attnTmpPool holds packQuantTRows's scratch.
var attnTmpPool = sync.Pool{New: func() any { return new([attnTmp]int8) }}

// attnZeros is the zero row of a last group of keys past k.
var attnZeros [attnTmp / 4]float32

// eltPackQuantVT4Generic is eltPackQuantVT4's twin: PackQuantS8TInto's
// loop for one group of four keys.
func eltPackQuantVT4Generic(dst []int8, r0, r1, r2, r3 []float32, inv float32, nr, panel int) {
	n := len(r0)
	var tmp [attnTmp]int8
	for r, row := range [4][]float32{r0, r1, r2, r3} {
		eltQuantS8Generic(tmp[r*n:r*n+n], row[:n], inv, 0)
	}
	for j := 0; j < n; j++ {
		o := (j/nr)*panel + (j%nr)*4
		dst[o], dst[o+1], dst[o+2], dst[o+3] = tmp[j], tmp[n+j], tmp[2*n+j], tmp[3*n+j]
	}
}

// PackQuantS8TInto quantizes W ([n][k]), given as its transpose wt ([k][ldwt],
// n used: attention's V, one row per key, whose transpose is the "weights" of
// P V), to symmetric s8 with one scale for the whole matrix,
//
//	scale = max |W| / 127   (1 for an all-zero matrix)
//	W[j][q] = clamp(roundHalfEven(wt[q][j]*(1/scale)), -128, 127)
//
// and packs it into dst in the layout of PackedS8 for panel width nr,
// reusing dst's storage. ColSum is left empty: P's u8 source has zero
// point 0 and needs no compensation. n must be at most 256. A NaN or
// infinite value is an error wrapping ErrNonFinite.
func PackQuantS8TInto(dst *PackedS8, n, k int, wt []float32, ldwt, nr int) (float32, error) {
	const op = "pack quant s8 transposed"
	if err := checkPackT(op, n, k, wt, ldwt, nr); err != nil {
		return 0, err
	}
	f := eltImpl()
	var b uint32
	for q := 0; q < k && n > 0; q++ {
		row := wt[q*ldwt : q*ldwt+n]
		if v := f.absMax(row); v > b {
			b = v
			if b >= absMaxBitsLimit {
				return 0, blockNonFinite(op, k, n, q, row)
			}
		}
	}
	s := math.Float32frombits(b) / 127
	if s == 0 {
		s = 1
	}
	packQuantT(f, dst, n, k, wt, ldwt, nr, 1/s)
	return s, nil
}

// PackQuantS8TScaledInto is PackQuantS8TInto with the scale given
// (QKVQuant.VScale: V's absolute maximum found while its rows were read
// for Q and K): W = clamp(roundHalfEven(wt[q][j]*(1/scale)), -128, 127),
// packed the same. The values must be finite (they are not checked); a
// scale under max |W| / 127 saturates. scale must be positive and finite.
func PackQuantS8TScaledInto(dst *PackedS8, n, k int, wt []float32, ldwt, nr int, scale float32) error {
	const op = "pack quant s8 transposed"
	if err := checkPackT(op, n, k, wt, ldwt, nr); err != nil {
		return err
	}
	if !(scale > 0) || math.IsInf(float64(scale), 1) {
		return fmt.Errorf("kernels: %s n=%d k=%d: scale %v: want positive and finite: %w", op, n, k, scale, ErrShape)
	}
	packQuantT(eltImpl(), dst, n, k, wt, ldwt, nr, 1/scale)
	return nil
}

// checkPackT checks the arguments of PackQuantS8TInto.
func checkPackT(op string, n, k int, wt []float32, ldwt, nr int) error {
	if n < 0 || k < 0 || n > attnTmp/4 || ldwt < max(n, 1) || nr <= 0 || nr%16 != 0 {
		return fmt.Errorf("kernels: %s n=%d k=%d ldwt=%d nr=%d: %w", op, n, k, ldwt, nr, ErrShape)
	}
	if n > 0 && k > 0 && len(wt) < (k-1)*ldwt+n {
		return fmt.Errorf("kernels: %s n=%d k=%d: len(wt)=%d too short: %w", op, n, k, len(wt), ErrShape)
	}
	return nil
}

// ReserveT sizes p (reusing its storage) for the transposed pack of a k x
// n matrix, panel width nr, that PackQuantS8TScaledRows then fills range
// by range: what PackQuantS8TScaledInto packs in one call.
func (p *PackedS8) ReserveT(n, k, nr int) error {
	if n < 0 || k < 0 || n > attnTmp/4 || nr <= 0 || nr%16 != 0 {
		return fmt.Errorf("kernels: reserve transposed n=%d k=%d nr=%d: %w", n, k, nr, ErrShape)
	}
	p.reserveS8(n, k, nr)
	p.ColSum = p.ColSum[:0]
	return nil
}

// PackQuantS8TScaledRows is PackQuantS8TScaledInto for rows q0 <= q < q1
// of wt (row q at wt[q*ldwt:], dst.N values) into dst as ReserveT sized
// it: q0 a multiple of 4, q1 one too or dst.K. Disjoint ranges may run at
// once; together they pack what PackQuantS8TScaledInto does, bit for bit.
// INT8 attention packs V this way token-major, every head of a chunk of
// tokens in turn (docs/DESIGN.md section 3.10).
func PackQuantS8TScaledRows(dst *PackedS8, q0, q1 int, wt []float32, ldwt int, scale float32) error {
	const op = "pack quant s8 transposed rows"
	n, k := dst.N, dst.K
	if q0 < 0 || q0%4 != 0 || q1 < q0 || q1 > k || q1 < k && q1%4 != 0 || dst.NR <= 0 || len(dst.Data) < dst.Np*dst.Kp {
		return fmt.Errorf("kernels: %s [%d,%d) of k=%d nr=%d: %w", op, q0, q1, k, dst.NR, ErrShape)
	}
	if n > 0 && q1 > q0 && (ldwt < n || len(wt) < (q1-1)*ldwt+n) {
		return fmt.Errorf("kernels: %s n=%d [%d,%d) ldwt=%d: len(wt)=%d too short: %w", op, n, q0, q1, ldwt, len(wt), ErrShape)
	}
	if !(scale > 0) || math.IsInf(float64(scale), 1) {
		return fmt.Errorf("kernels: %s n=%d k=%d: scale %v: want positive and finite: %w", op, n, k, scale, ErrShape)
	}
	if q1 == k {
		q1 = dst.Kp // the zero rows of the last group
	}
	packQuantTRows(eltImpl(), dst, q0, q1, wt, ldwt, 1/scale)
	return nil
}

// packQuantT reserves dst and quantizes wt into it with 1/scale inv.
func packQuantT(f *eltFuncs, dst *PackedS8, n, k int, wt []float32, ldwt, nr int, inv float32) {
	dst.reserveS8(n, k, nr)
	dst.ColSum = dst.ColSum[:0]
	packQuantTRows(f, dst, 0, dst.Kp, wt, ldwt, inv)
}

// packQuantTRows quantizes the groups of four rows from q0 up to q1 (both
// multiples of 4, q1 <= dst.Kp; rows from dst.K on are zero) of wt into
// dst's data with 1/scale inv.
func packQuantTRows(f *eltFuncs, dst *PackedS8, q0, q1 int, wt []float32, ldwt int, inv float32) {
	n, k, nr, kp, data := dst.N, dst.K, dst.NR, dst.Kp, dst.Data
	if n == 0 || k == 0 {
		return
	}
	if f.packVT4 != nil {
		// One call per four keys: quantized and interleaved in registers.
		zero := attnZeros[:n]
		for q0 := q0; q0 < q1; q0 += 4 {
			var r [4][]float32
			for i := range r {
				r[i] = zero
				if q0+i < k {
					r[i] = wt[(q0+i)*ldwt : (q0+i)*ldwt+n]
				}
			}
			f.packVT4(data[q0/4*nr*4:], r[0], r[1], r[2], r[3], inv, nr, nr*kp)
		}
		return
	}
	// From a pool: f.qS8 is a function value, so tmp would escape and
	// be allocated on every call (one per head block of V).
	tp := attnTmpPool.Get().(*[attnTmp]int8)
	defer attnTmpPool.Put(tp)
	tmp := tp[:]
	for q0 := q0; q0 < q1; q0 += 4 {
		// Four keys' rows quantized, then interleaved: column j's four
		// values are one word at g*nr*4 + (j%nr)*4 of its panel.
		for r := 0; r < 4; r++ {
			t := tmp[r*n : r*n+n]
			if q0+r < k {
				f.qS8(t, wt[(q0+r)*ldwt:(q0+r)*ldwt+n], inv, 0)
			} else {
				clear(t)
			}
		}
		t0, t1, t2, t3 := tmp[:n], tmp[n:2*n], tmp[2*n:3*n], tmp[3*n:4*n]
		g := q0 / 4
		for p := 0; p*nr < n; p++ {
			out := unsafe.Pointer(&data[p*nr*kp+g*nr*4])
			for jj := 0; jj < min(nr, n-p*nr); jj++ {
				j := p*nr + jj
				v := uint32(uint8(t0[j])) | uint32(uint8(t1[j]))<<8 | uint32(uint8(t2[j]))<<16 | uint32(uint8(t3[j]))<<24
				*(*uint32)(unsafe.Add(out, jj*4)) = v
			}
		}
	}
}

// SoftmaxU8 is the masked softmax of x ([rows][n]) quantized to u8 with one
// scale per row (docs/DESIGN.md section 3.10): for each row, with s_i =
// xscale[i] (xscale nil: 1; each must be positive),
//
//	s[j] = (x[i][j] + mask[j]) * s_i             (mask nil: 0)
//	e[j] = exp(s[j] - max_j s[j])
//	dst[i][j] = roundHalfEven(e[j]*255)           (e in [0, 1], the max 1)
//	rowScale[i] = 1 / sum_j dst[i][j]
//
// so that dst[i][j]*rowScale[i] is the softmax with the largest
// probability of every row on the whole u8 range, and every row's
// dequantized probabilities sum to 1 (the rounding's bias does not scale
// the context). xscale lets INT8 attention leave Q's row scales out of
// the scores kernel's epilogue: s_i is folded into the exponent's one FMA.
// On AVX-512, 255*exp is one pass with a degree-4 polynomial (eltExpU8:
// relative error under 3e-6, a byte at most one step from the correctly
// rounded one, very rarely); elsewhere it is Softmax's exp, then the
// scaling. x is overwritten (dst has row stride ldd). A row whose maximum
// is -Inf (all -Inf) is zero, with scale 0; a NaN or +Inf score (or one
// that s_i takes past float32's range) is an error wrapping ErrNonFinite
// naming the row and column.
func SoftmaxU8(dst []uint8, ldd int, rowScale []float32, x []float32, rows, n int, mask, xscale []float32) error {
	const op = "softmax u8"
	if err := checkBlock(op, rows, n, len(dst), ldd, len(x), n); err != nil {
		return err
	}
	if len(rowScale) < rows {
		return eltShape(op, rows, n, "len(row scale)=%d < rows", len(rowScale))
	}
	if mask != nil && len(mask) < n {
		return eltShape(op, rows, n, "len(mask)=%d < n", len(mask))
	}
	if xscale != nil && len(xscale) < rows {
		return eltShape(op, rows, n, "len(xscale)=%d < rows", len(xscale))
	}
	for i := range min(rows, len(xscale)) {
		if s := xscale[i]; !(s > 0) || math.IsInf(float64(s), 1) {
			return eltShape(op, rows, n, "xscale[%d]=%v: want positive and finite", i, s)
		}
	}
	if rows == 0 || n == 0 {
		return nil
	}
	f := eltImpl()
	var mk []float32
	if mask != nil {
		mk = mask[:n]
	}
	for i := 0; i < rows; i++ {
		add := mk // the mask, while row i does not hold it yet
		if f.smU8 != nil {
			// One call for the rows up to one with no finite maximum or
			// with a non-finite value, which the steps below take again
			// (its scores hold the mask by then).
			var xs []float32
			if xscale != nil {
				xs = xscale[i:rows]
			}
			r, _ := f.smU8(dst[i*ldd:], ldd, rowScale[i:rows], x[i*n:rows*n], n, mk, xs)
			if i += r; i == rows {
				break
			}
			add = nil
		}
		d := x[i*n : i*n+n]
		var m float32
		if add != nil {
			m = f.maxMask(d, d, add)
		} else {
			m = f.max(d)
		}
		q := dst[i*ldd : i*ldd+n]
		if math.IsInf(float64(m), -1) {
			if j := findNaN(d); j >= 0 {
				return fmt.Errorf("kernels: %s rows=%d n=%d: row %d col %d: %v: %w", op, rows, n, i, j, d[j], ErrNonFinite)
			}
			clear(q)
			rowScale[i] = 0
			continue
		}
		s := float32(1)
		if xscale != nil {
			s = xscale[i]
		}
		nonFinite := func() error {
			j := max(findNaNOrPosInf(d), 0)
			return fmt.Errorf("kernels: %s rows=%d n=%d: row %d col %d: %v (scaled by %v): %w", op, rows, n, i, j, d[j], s, ErrNonFinite)
		}
		if f.expQU8 != nil {
			// One pass: exp, u8 and the row sum (docs/DESIGN.md 3.10).
			a, c, ok := eltExpU8Args(m, s)
			if !ok {
				return nonFinite()
			}
			sum, bits := f.expQU8(q, d, a, c)
			if bits >= absMaxBitsLimit {
				return nonFinite()
			}
			rowScale[i] = 1 / float32(sum)
			continue
		}
		if s != 1 {
			f.scale(d, s)
			m = float32(m * s)
			if math.IsInf(float64(m), 0) {
				return nonFinite()
			}
		}
		sm := f.expSum(d, d, m)
		if math.IsNaN(float64(sm)) || math.IsInf(float64(sm), 0) {
			return nonFinite()
		}
		f.qU8(q, d, 255, 0)
		rowScale[i] = 1 / float32(sumU8(q))
	}
	return nil
}

// sumS8 returns the sum of x, eight bytes at a time: each byte biased to
// unsigned (x+128), pairs added into 16-bit lanes (at most 510 a word, 64
// words a batch: no lane overflows), the lanes then summed in 32 bits.
func sumS8(x []int8) int32 {
	const lo = 0x00ff00ff00ff00ff
	var sum int32
	w := len(x) / 8
	p := unsafe.Pointer(unsafe.SliceData(x))
	for b := 0; b < w; b += 64 {
		var acc uint64
		for i := b; i < min(w, b+64); i++ {
			u := *(*uint64)(unsafe.Add(p, 8*i)) ^ 0x8080808080808080
			acc += u&lo + (u>>8)&lo
		}
		acc = acc&0x0000ffff0000ffff + (acc>>16)&0x0000ffff0000ffff
		sum += int32(acc&0xffffffff+acc>>32) - 128*8*int32(min(w, b+64)-b)
	}
	for _, v := range x[8*w:] {
		sum += int32(v)
	}
	return sum
}

// sumU8 returns the sum of x, eight bytes at a time as sumS8.
func sumU8(x []uint8) int32 {
	const lo = 0x00ff00ff00ff00ff
	var sum int32
	w := len(x) / 8
	p := unsafe.Pointer(unsafe.SliceData(x))
	for b := 0; b < w; b += 64 {
		var acc uint64
		for i := b; i < min(w, b+64); i++ {
			u := *(*uint64)(unsafe.Add(p, 8*i))
			acc += u&lo + (u>>8)&lo
		}
		acc = acc&0x0000ffff0000ffff + (acc>>16)&0x0000ffff0000ffff
		sum += int32(acc&0xffffffff + acc>>32)
	}
	for _, v := range x[8*w:] {
		sum += int32(v)
	}
	return sum
}
