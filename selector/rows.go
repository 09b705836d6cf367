package selector

// This file is the row classes' cost model (docs/DESIGN.md section 4.4):
// a key is tuned at its class's M (BucketM, a power of two), and a call of
// fewer rows runs the measured candidate predicted fastest at its exact M
// from the times measured at the class's M and each candidate's register
// tile.

// pickMaxM is the largest class whose calls pick by the model: above it a
// row tile's waste is a few percent of the rows, and the class's winner
// runs every M.
const pickMaxM = 64

// tileRows is the cost model's work of m rows on a kernel of mr-row
// tiles, in full tiles: every full tile costs one, and a partial tile of
// r rows half a tile (streaming its panel of the weights, as a full one
// does) plus its share of the tile's arithmetic, r/mr of the other half. A
// candidate without a tile (oneDNN) costs m/1 rows, linear in M.
func tileRows(m, mr int) float64 {
	if mr <= 0 {
		return float64(m)
	}
	full, r := m/mr, m%mr
	w := float64(full)
	if r > 0 {
		w += 0.5 + 0.5*float64(r)/float64(mr)
	}
	return w
}

// predictAt is the model's time of a candidate of tile mr, measured at
// keyM rows in median nanoseconds, for a call of m rows.
func predictAt(median float64, mr, m, keyM int) float64 {
	return median * tileRows(m, mr) / tileRows(keyM, mr)
}

// setPicks fills ch.picks for its key (ch.Key parsed as key): for every M
// of the class below the key's own, the index in ch.Measured of the
// candidate the model predicts fastest there. A class of at most two rows,
// one above pickMaxM, a choice with fewer than two measured candidates or
// a forced one keeps its Kernel for every M.
func (s *Selector) setPicks(ch *Choice, key Key) {
	ch.picks = nil
	if key.M <= 2 || key.M > pickMaxM || len(ch.Measured) < 2 {
		return
	}
	o := s.byOp[key.Op]
	if o == nil {
		return
	}
	mrs := make([]int, len(ch.Measured))
	for i, m := range ch.Measured {
		c := o.lookup(m.Kernel)
		if c == nil {
			mrs[i] = -1 // not runnable here: never picked
			continue
		}
		mrs[i], _ = tileOf(c)
	}
	lo := key.M/2 + 1
	picks := make([]uint8, key.M-lo)
	for m := lo; m < key.M; m++ {
		best, bestT := 0, -1.0
		for i, meas := range ch.Measured {
			if mrs[i] < 0 || i > 255 {
				continue
			}
			t := predictAt(float64(meas.Median), mrs[i], m, key.M)
			if bestT < 0 || t < bestT {
				best, bestT = i, t
			}
		}
		picks[m-lo] = uint8(best)
	}
	ch.picks = picks
}

// pickAt is the name of the candidate the row model picks for a call of m
// rows of the choice's class, or "" when the class's Kernel runs it.
func (c *Choice) pickAt(m, keyM int) string {
	i := m - (keyM/2 + 1)
	if c.picks == nil || i < 0 || i >= len(c.picks) {
		return ""
	}
	return c.Measured[c.picks[i]].Kernel
}
