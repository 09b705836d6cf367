package smoothquant

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
)

func TestObserverStats(t *testing.T) {
	o := NewObserver(3, 0, 1)
	// ld 4: the fourth column must be ignored.
	x := []float32{
		1, -2, 0, 99,
		-3, 5, 0, -99,
	}
	if err := o.Observe(x, 2, 4); err != nil {
		t.Fatal(err)
	}
	if err := o.Observe([]float32{0.5, 7, 0}, 1, 3); err != nil {
		t.Fatal(err)
	}
	if o.Rows() != 3 {
		t.Errorf("rows %d, want 3", o.Rows())
	}
	if got, want := o.ChannelMin(), []float32{-3, -2, 0}; !slices.Equal(got, want) {
		t.Errorf("min %v, want %v", got, want)
	}
	if got, want := o.ChannelMax(), []float32{1, 7, 0}; !slices.Equal(got, want) {
		t.Errorf("max %v, want %v", got, want)
	}
	if got, want := o.AbsMax(), []float32{3, 7, 0}; !slices.Equal(got, want) {
		t.Errorf("absmax %v, want %v", got, want)
	}
	s, rows := o.Sample()
	if want := []float32{1, -2, 0, -3, 5, 0, 0.5, 7, 0}; rows != 3 || !slices.Equal(s, want) {
		t.Errorf("sample %v (%d rows), want %v", s, rows, want)
	}
	// copies: modifying them must not change the observer
	o.ChannelMin()[0] = 100
	s[0] = 100
	if o.ChannelMin()[0] != -3 {
		t.Error("ChannelMin returned its internal slice")
	}
	if s2, _ := o.Sample(); s2[0] != 1 {
		t.Error("Sample returned its internal slice")
	}
	if NewObserver(3, 0, 1).ChannelMin()[0] != 0 {
		t.Error("empty observer min not 0")
	}
}

func TestObserverErrors(t *testing.T) {
	for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))} {
		o := NewObserver(3, 4, 1)
		if err := o.Observe([]float32{1, 2, 3}, 1, 3); err != nil {
			t.Fatal(err)
		}
		x := []float32{1, 2, 3, 4, 5, 6, 7, 8, 9}
		x[7] = bad // row 2, column 1
		err := o.Observe(x, 3, 3)
		if !errors.Is(err, ErrCalibration) {
			t.Fatalf("%v: err %v, want ErrCalibration", bad, err)
		}
		if !strings.Contains(err.Error(), "row 2") || !strings.Contains(err.Error(), "column 1") {
			t.Errorf("error %q does not name row 2 column 1", err)
		}
		if o.Rows() != 1 || !slices.Equal(o.ChannelMax(), []float32{1, 2, 3}) {
			t.Errorf("%v: the failed call was recorded: rows %d max %v", bad, o.Rows(), o.ChannelMax())
		}
		if _, rows := o.Sample(); rows != 1 {
			t.Errorf("sample rows %d after failed call", rows)
		}
	}
	o := NewObserver(3, 4, 1)
	for _, c := range []struct{ n, rows, ld int }{{5, 2, 3}, {9, 2, 2}, {9, -1, 3}} {
		if err := o.Observe(make([]float32, c.n), c.rows, c.ld); !errors.Is(err, ErrInvalid) {
			t.Errorf("len %d rows %d ld %d: err %v, want ErrInvalid", c.n, c.rows, c.ld, err)
		}
	}
	if err := NewObserver(0, 4, 1).Observe([]float32{1}, 1, 1); !errors.Is(err, ErrInvalid) {
		t.Errorf("k=0: err %v", err)
	}
}

func TestObserverReservoir(t *testing.T) {
	const k, total, keep = 2, 1000, 50
	x := make([]float32, total*k)
	for i := 0; i < total; i++ {
		x[i*k], x[i*k+1] = float32(i), float32(-i)
	}
	run := func(seed uint64) []float32 {
		o := NewObserver(k, keep, seed)
		for i := 0; i < total; i += 37 { // uneven chunks
			r := min(37, total-i)
			if err := o.Observe(x[i*k:], r, k); err != nil {
				t.Fatal(err)
			}
		}
		s, rows := o.Sample()
		if rows != keep || o.Rows() != total {
			t.Fatalf("rows %d kept %d, want %d and %d", o.Rows(), rows, total, keep)
		}
		return s
	}
	a, b, c := run(7), run(7), run(8)
	if !slices.Equal(a, b) {
		t.Error("same seed, different samples")
	}
	if slices.Equal(a, c) {
		t.Error("different seeds, same sample")
	}
	// every kept row is a real, distinct row, and the sample reaches past
	// the first keep rows (it is not just the head of the stream)
	seen := map[float32]bool{}
	late := 0
	for i := 0; i < keep; i++ {
		v := a[i*k]
		if a[i*k+1] != -v || seen[v] {
			t.Fatalf("row %d of the sample is %v, %v", i, v, a[i*k+1])
		}
		seen[v] = true
		if v >= keep {
			late++
		}
	}
	if late < keep/2 {
		t.Errorf("only %d of %d kept rows come after the first %d", late, keep, keep)
	}
}

func TestObserverConcurrent(t *testing.T) {
	const k, workers, per = 8, 8, 40
	o := NewObserver(k, 64, 3)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 2))
			for i := 0; i < per; i++ {
				x := randMatrix(r, 3, k, 1)
				x[0] = float32(w*per + i) // channel 0 max is known
				if err := o.Observe(x, 3, k); err != nil {
					t.Error(err)
				}
				_ = o.AbsMax()
				_, _ = o.Sample()
			}
		}(w)
	}
	wg.Wait()
	if o.Rows() != workers*per*3 {
		t.Errorf("rows %d, want %d", o.Rows(), workers*per*3)
	}
	if m := o.ChannelMax()[0]; m != workers*per-1 {
		t.Errorf("channel 0 max %v, want %d", m, workers*per-1)
	}
	if _, rows := o.Sample(); rows != 64 {
		t.Errorf("sample rows %d", rows)
	}
}
