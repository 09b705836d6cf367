package kernels

import (
	"fmt"
	"math"
	"sync"
	"unsafe"
)

// QKVQuant quantizes the fused QKV rows of one sequence for INT8
// attention, every head at once, token by token (docs/DESIGN.md section
// 3.10): a token's row (Q, K and V of all heads, 3·Heads·D floats) is read
// once, front to back, instead of one head's 64-float slice of every row
// per head. Per token t and head h, with c = h·D:
//
//	Q:  QScale[h·Lds+t] = s·QMul, Q[t·Ldq+c+i] = clamp(roundHalfEven(q[i]/s), -128, 127) + 128
//	    (s = max_i |q[i]| / 127, 1 for an all-zero slice), as QuantizeRowsU8Block
//	K:  key t of K[h], quantized and packed as PackQuantS8Into does it,
//	    its scale at KScale[h·Lds+t]
//	V:  VBits[h·Lds+t] = the bits of max_i |v[i]| (as math.Float32bits),
//	    for PackQuantS8TScaledInto's one scale per head (VScale)
//
// so that every figure is bit for bit what the per-head functions give.
type QKVQuant struct {
	Heads, D int
	// QMul multiplies Q's scales (attention's 1/sqrt(D)).
	QMul float32
	// Q holds the u8 rows: token t, head h at Q[t·Ldq+h·D:].
	Q   []uint8
	Ldq int
	// QScale, KScale and VBits are [Heads][Lds]: head h's at h·Lds+t.
	QScale, KScale []float32
	VBits          []uint32
	Lds            int
	// K holds one pack per head, each reserved for the sequence's keys
	// (N >= every t quantized, K = D): by QKVQuant.ReserveKeys, which
	// puts them on one array and lets Rows quantize a token's heads in
	// one call where the CPU allows, or by PackedS8.ReserveKeys each.
	K []PackedS8

	// kData and kSum are ReserveKeys's storage: head h's pack (kSize
	// bytes) at h*kStride, its column sums at h*kN.
	kData                   []int8
	kSum                    []int32
	kStride, kSize, kN, kNR int
}

// ReserveKeys sizes K (len Heads) for n keys of D features in panels of
// nr, every head's pack on one array, reusing a's storage; Rows then
// quantizes the heads of a token in one call on AVX-512 when D is 64 and
// Heads at most 16 (docs/DESIGN.md section 3.10).
func (a *QKVQuant) ReserveKeys(n, nr int) error {
	if a.Heads <= 0 || a.D <= 0 || a.D > attnTmp || n < 0 || nr <= 0 || nr%16 != 0 {
		return fmt.Errorf("kernels: quantize qkv: reserve keys heads=%d d=%d n=%d nr=%d: %w", a.Heads, a.D, n, nr, ErrShape)
	}
	kp, np := (a.D+3)&^3, (n+nr-1)/nr*nr
	size := kp * np
	// The packs are 5 cache lines apart past their size: at a multiple
	// of 4 KB (16 KB for 256 keys of 64), a token's words in every head
	// fall in the same L1 sets, more of them than the cache has ways.
	stride := size + 5*64
	if cap(a.kData) < a.Heads*stride {
		a.kData = make([]int8, a.Heads*stride)
	}
	a.kData = a.kData[:a.Heads*stride]
	if cap(a.kSum) < a.Heads*n {
		a.kSum = make([]int32, a.Heads*n)
	}
	a.kSum = a.kSum[:a.Heads*n]
	if cap(a.K) < a.Heads {
		a.K = make([]PackedS8, a.Heads)
	}
	a.K = a.K[:a.Heads]
	for i := range a.K {
		p := &a.K[i]
		p.Data = a.kData[i*stride : i*stride+size : i*stride+size]
		p.ColSum = a.kSum[i*n : (i+1)*n : (i+1)*n]
		p.reserveS8(n, a.D, nr)
	}
	a.kStride, a.kSize, a.kN, a.kNR = stride, size, n, nr
	return nil
}

// joint reports whether K is still as ReserveKeys left it (so that head
// h's pack starts at h*kStride of kData).
func (a *QKVQuant) joint() bool {
	if a.kStride == 0 || len(a.K) < a.Heads || len(a.kData) < a.Heads*a.kStride {
		return false
	}
	for i := range a.K[:a.Heads] {
		p := &a.K[i]
		if p.NR != a.kNR || p.K != a.D || len(p.Data) != a.kSize || &p.Data[0] != &a.kData[i*a.kStride] ||
			len(p.ColSum) < a.kN || &p.ColSum[0] != &a.kSum[i*a.kN] {
			return false
		}
	}
	return true
}

// ReserveKeys shapes p for n keys of k features in panels of nr (the
// layout of PackedS8), reusing its storage, for QKVQuant.Rows to fill.
func (p *PackedS8) ReserveKeys(n, k, nr int) error {
	if n < 0 || k < 0 || k > attnTmp || nr <= 0 || nr%16 != 0 {
		return fmt.Errorf("kernels: reserve keys n=%d k=%d nr=%d: %w", n, k, nr, ErrShape)
	}
	p.reserveS8(n, k, nr)
	if cap(p.ColSum) < n {
		p.ColSum = make([]int32, n)
	}
	p.ColSum = p.ColSum[:n]
	return nil
}

// Rows quantizes tokens t0 <= t < t1 of x (row t at x[t·ldx:], its Q
// columns first, then K's, then V's). Rows over disjoint ranges may run
// at once. A NaN or infinite value is an error wrapping ErrNonFinite that
// names the token, the head and Q, K or V; the figures of that token are
// then partly written.
func (a *QKVQuant) Rows(x []float32, ldx, t0, t1 int) error {
	const op = "quantize qkv"
	hd, d := a.Heads, a.D
	h := hd * d
	if hd <= 0 || d <= 0 || d > attnTmp || t0 < 0 || t1 < t0 || ldx < 3*h || a.Ldq < h || a.Lds < t1 || len(a.K) < hd {
		return fmt.Errorf("kernels: %s heads=%d d=%d rows [%d,%d) ldx=%d ldq=%d lds=%d packs=%d: %w",
			op, hd, d, t0, t1, ldx, a.Ldq, a.Lds, len(a.K), ErrShape)
	}
	if t1 == t0 {
		return nil
	}
	if len(x) < (t1-1)*ldx+3*h || len(a.Q) < (t1-1)*a.Ldq+h {
		return fmt.Errorf("kernels: %s rows [%d,%d): len(x)=%d len(q)=%d too short: %w", op, t0, t1, len(x), len(a.Q), ErrShape)
	}
	ns := (hd-1)*a.Lds + t1
	if len(a.QScale) < ns || len(a.KScale) < ns || len(a.VBits) < ns {
		return fmt.Errorf("kernels: %s rows [%d,%d): scales need %d, have q %d k %d v %d: %w",
			op, t0, t1, ns, len(a.QScale), len(a.KScale), len(a.VBits), ErrShape)
	}
	for i := range a.K[:hd] {
		if p := &a.K[i]; p.K != d || p.N < t1 || len(p.ColSum) < t1 || len(p.Data) < p.Np*p.Kp {
			return fmt.Errorf("kernels: %s head %d: pack n=%d k=%d (want k=%d, n>=%d): %w", op, i, p.N, p.K, d, t1, ErrShape)
		}
	}
	f := eltImpl()
	if f.qkvTok != nil && d == 64 && hd <= 16 && a.kStride > 0 && a.joint() {
		// Up to a token with a NaN or an infinity, which the loop below names.
		if t0 = a.rowsOneCall(f, x, ldx, t0, t1); t0 == t1 {
			return nil
		}
	}
	// packKey's, zero past d; from a pool, since f.qS8 is a function
	// value and tmp would escape (allocated per call, one per chunk).
	tmp := attnTmpPool.Get().(*[attnTmp]int8)
	defer attnTmpPool.Put(tmp)
	clear(tmp[d : (d+3)&^3]) // the pool's last user may have written there
	bad := func(t, head int, what string, xr []float32) error {
		j := max(findNonFinite(xr), 0)
		return fmt.Errorf("kernels: %s: token %d head %d %s col %d: %v: %w", op, t, head, what, j, xr[j], ErrNonFinite)
	}
	for t := t0; t < t1; t++ {
		row := x[t*ldx : t*ldx+3*h]
		for i := 0; i < hd; i++ {
			c, o := i*d, i*a.Lds+t
			q := row[c : c+d]
			b := f.absMax(q)
			if b >= absMaxBitsLimit {
				return bad(t, i, "q", q)
			}
			s := math.Float32frombits(b) / 127
			if s == 0 {
				s = 1
			}
			f.qRow(a.Q[t*a.Ldq+c:t*a.Ldq+c+d], q, 1/s)
			a.QScale[o] = s * a.QMul
			k := row[h+c : h+c+d]
			ks, cs, kb := packKey(f, &a.K[i], t, k, tmp)
			if kb >= absMaxBitsLimit {
				return bad(t, i, "k", k)
			}
			a.KScale[o], a.K[i].ColSum[t] = ks, cs
			v := row[2*h+c : 2*h+c+d]
			vb := f.absMax(v)
			if vb >= absMaxBitsLimit {
				return bad(t, i, "v", v)
			}
			a.VBits[o] = vb
		}
	}
	return nil
}

// qkvTmpPool holds rowsOneCall's scratch (it goes to assembly, so on the
// stack it would be allocated on every call).
var qkvTmpPool = sync.Pool{New: func() any { return new([128]uint32) }}

// rowsOneCall is Rows with one eltQKVToken call a token (D = 64, Heads
// <= 16, K from ReserveKeys). It stops at the first token holding a NaN or
// an infinity and returns its index (t1 when all are done).
func (a *QKVQuant) rowsOneCall(f *eltFuncs, x []float32, ldx, t0, t1 int) int {
	hd, h, nr := a.Heads, a.Heads*a.D, a.kNR
	kp := (a.D + 3) &^ 3
	buf := qkvTmpPool.Get().(*[128]uint32) // eltQKVToken's figures of a token
	defer qkvTmpPool.Put(buf)
	tmp := buf[:]
	for t := t0; t < t1; t++ {
		kd := a.kData[(t/nr)*nr*kp+(t%nr)*4:]
		if b := f.qkvTok(tmp, a.Q[t*a.Ldq:t*a.Ldq+h], kd, x[t*ldx:t*ldx+3*h], hd, a.kStride, nr*4, a.QMul); b >= absMaxBitsLimit {
			return t
		}
		for i := 0; i < hd; i++ {
			o := i*a.Lds + t
			a.QScale[o] = math.Float32frombits(tmp[48+i])
			a.KScale[o] = math.Float32frombits(tmp[64+i])
			a.VBits[o] = tmp[32+i]
			a.kSum[i*a.kN+t] = int32(tmp[112+i])
		}
	}
	return t1
}

// eltQKVTokenGeneric is eltQKVToken's twin: Rows's steps for one token.
func eltQKVTokenGeneric(tmp []uint32, q []uint8, kd []int8, x []float32, heads, kh, nr4 int, qmul float32) uint32 {
	const d = 64
	h := heads * d
	var top uint32
	for i := 0; i < heads; i++ {
		for p := 0; p < 3; p++ {
			b := eltAbsMaxGeneric(x[p*h+i*d : p*h+i*d+d])
			tmp[16*p+i] = b
			top = max(top, b)
		}
	}
	if top >= absMaxBitsLimit {
		return top
	}
	for i := 0; i < heads; i++ {
		sq := math.Float32frombits(tmp[i]) / 127
		if sq == 0 {
			sq = 1
		}
		tmp[48+i], tmp[80+i] = math.Float32bits(sq*qmul), math.Float32bits(1/sq)
		eltQuantRowGeneric(q[i*d:i*d+d], x[i*d:i*d+d], 1/sq)
		s, cs, _ := eltPackQuantKRowGeneric(kd[i*kh:], x[h+i*d:h+i*d+d], nr4)
		tmp[64+i], tmp[96+i], tmp[112+i] = math.Float32bits(s), math.Float32bits(1/s), uint32(cs)
	}
	return top
}

// VScale is the one scale of head h's V over tokens [t0, t1) from Rows'
// VBits: max |V| / 127, 1 where V is all zero.
func (a *QKVQuant) VScale(h, t0, t1 int) float32 {
	var b uint32
	for _, v := range a.VBits[h*a.Lds+t0 : h*a.Lds+t1] {
		b = max(b, v)
	}
	s := math.Float32frombits(b) / 127
	if s == 0 {
		s = 1
	}
	return s
}

// packKey quantizes key j (row, len k = p.K) into its words of p's panel
// and returns its scale, its sum and the bits of its absolute maximum
// (>= absMaxBitsLimit: a NaN or an infinity, nothing stored): one step of
// PackQuantS8Into.
// tmp is the caller's scratch, zero past len(row) up to p.Kp.
func packKey(f *eltFuncs, p *PackedS8, j int, row []float32, tmp *[attnTmp]int8) (float32, int32, uint32) {
	nr, kp := p.NR, p.Kp
	at := p.Data[(j/nr)*nr*kp+(j%nr)*4:]
	if f.packK != nil {
		return f.packK(at, row, nr*4)
	}
	b := f.absMax(row)
	if b >= absMaxBitsLimit {
		return 0, 0, b
	}
	s := math.Float32frombits(b) / 127
	if s == 0 {
		s = 1
	}
	t := tmp[:len(row)]
	f.qS8(t, row, 1/s, 0)
	// Each group of 4 features of key j is one 4-byte word of the panel:
	// g*nr*4 + (j%nr)*4 from the panel's start.
	base := unsafe.Pointer(unsafe.SliceData(at))
	src := unsafe.Pointer(&tmp[0])
	for g := 0; g < kp/4; g++ {
		*(*uint32)(unsafe.Add(base, g*nr*4)) = *(*uint32)(unsafe.Add(src, g*4))
	}
	return s, sumS8(t), b
}
