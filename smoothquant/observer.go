package smoothquant

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
)

// DefaultSampleRows is the reservoir size of NewObserver(k, 0, seed).
const DefaultSampleRows = 256

// Observer accumulates the statistics of one linear layer's input (K
// channels): per-channel signed minimum and maximum over every observed row,
// the number of rows, and a uniform reservoir sample of rows (Algorithm R,
// with a PCG generator seeded by the seed given to NewObserver, so the sample
// is a deterministic function of the seed and the order of the rows).
// Its methods are safe for concurrent use.
type Observer struct {
	K int

	mu     sync.Mutex
	cap    int
	rng    *rand.Rand
	rows   int
	min    []float32
	max    []float32
	sample []float32 // [len/K][K], at most cap rows
}

// NewObserver returns an observer of k channels that keeps sampleRows input
// rows (0 or negative: DefaultSampleRows) for percentile ranges and the alpha
// search.
func NewObserver(k, sampleRows int, seed uint64) *Observer {
	if sampleRows <= 0 {
		sampleRows = DefaultSampleRows
	}
	o := &Observer{K: k, cap: sampleRows, rng: rand.New(rand.NewPCG(seed, 0x5e0f_9a3c_17d2_b481))}
	if k > 0 {
		o.min = make([]float32, k)
		o.max = make([]float32, k)
		for j := range o.min {
			o.min[j] = float32(math.Inf(1))
			o.max[j] = float32(math.Inf(-1))
		}
	}
	return o
}

// Observe records rows x ([rows][ld], the first K columns of each row).
// A NaN or infinite value is an error wrapping ErrCalibration that names its
// row and column; nothing of that call is recorded then. Bad sizes wrap
// ErrInvalid.
func (o *Observer) Observe(x []float32, rows, ld int) error {
	if o == nil || o.K <= 0 || len(o.min) != o.K {
		return fmt.Errorf("smoothquant: observe: observer without channels: %w", ErrInvalid)
	}
	k := o.K
	if rows < 0 || ld < k {
		return fmt.Errorf("smoothquant: observe rows=%d ld=%d k=%d: %w", rows, ld, k, ErrInvalid)
	}
	if rows == 0 {
		return nil
	}
	if len(x) < (rows-1)*ld+k {
		return fmt.Errorf("smoothquant: observe rows=%d ld=%d k=%d: len(x)=%d too short: %w", rows, ld, k, len(x), ErrInvalid)
	}
	for i := 0; i < rows; i++ {
		for j, v := range x[i*ld : i*ld+k] {
			if f := float64(v); math.IsNaN(f) || math.IsInf(f, 0) {
				return fmt.Errorf("smoothquant: observe: row %d column %d is %v: %w", i, j, v, ErrCalibration)
			}
		}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for i := 0; i < rows; i++ {
		r := x[i*ld : i*ld+k]
		for j, v := range r {
			if v < o.min[j] {
				o.min[j] = v
			}
			if v > o.max[j] {
				o.max[j] = v
			}
		}
		// Algorithm R: row number t (0-based) replaces a uniform slot
		// with probability cap/(t+1).
		t := o.rows
		o.rows++
		if t < o.cap {
			o.sample = append(o.sample, r...)
			continue
		}
		if s := int(o.rng.Uint64N(uint64(t) + 1)); s < o.cap {
			copy(o.sample[s*k:(s+1)*k], r)
		}
	}
	return nil
}

// Rows returns the number of rows observed.
func (o *Observer) Rows() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.rows
}

// ChannelMin returns a copy of the per-channel signed minimum (zeros before
// any row).
func (o *Observer) ChannelMin() []float32 { return o.stat(o.min) }

// ChannelMax returns a copy of the per-channel signed maximum (zeros before
// any row).
func (o *Observer) ChannelMax() []float32 { return o.stat(o.max) }

func (o *Observer) stat(s []float32) []float32 {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make([]float32, len(s))
	if o.rows > 0 {
		copy(out, s)
	}
	return out
}

// AbsMax returns, per channel, max(|min|, |max|) (zeros before any row).
func (o *Observer) AbsMax() []float32 {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make([]float32, len(o.min))
	if o.rows == 0 {
		return out
	}
	for j := range out {
		out[j] = max(abs32(o.min[j]), abs32(o.max[j]))
	}
	return out
}

// Sample returns a copy of the kept rows ([rows][K]): every row while fewer
// than the reservoir size were observed, else a uniform sample of them.
func (o *Observer) Sample() (x []float32, rows int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.K <= 0 {
		return nil, 0
	}
	return append([]float32(nil), o.sample...), len(o.sample) / o.K
}

func abs32(v float32) float32 {
	return math.Float32frombits(math.Float32bits(v) &^ (1 << 31))
}
