package models

import (
	"fmt"
	"math"
	"strings"
)

// Pooling is how Embed turns token states into one vector: one mode, or
// several (a set of bits) whose vectors are concatenated in
// sentence-transformers' order (cls, max, mean, mean_sqrt_len_tokens,
// weightedmean, lasttoken: the order of the bits), as a
// sentence-transformers Pooling module with several modes computes them.
// The zero value, PoolDefault, is the model's own pooling
// (Pipeline.Pooling).
type Pooling int

// Poolings. Each is computed as sentence-transformers' models/Pooling.py
// computes it over the sequence's tokens whose attention mask is 1.
const (
	// PoolDefault is the model's own pooling: its sentence-transformers
	// Pooling module (modules.json, or 1_Pooling/config.json), else
	// PoolCLS, TEI's default for BERT-type models (Pipeline.Pooling).
	PoolDefault Pooling = 0
	// PoolCLS takes the first token's last hidden state.
	PoolCLS Pooling = 1 << (iota - 1)
	// PoolMax takes each dimension's largest value over the tokens.
	PoolMax
	// PoolMean averages the tokens' last hidden states.
	PoolMean
	// PoolMeanSqrtLen sums the tokens' states and divides by the square
	// root of their number (mean_sqrt_len_tokens).
	PoolMeanSqrtLen
	// PoolWeightedMean averages the states weighted by position, 1 for
	// the first token (weightedmean, SGPT's).
	PoolWeightedMean
	// PoolLastToken takes the last token's state (lasttoken).
	PoolLastToken
	// PoolSplade is SPLADE's sparse pooling over a masked-LM head's
	// logits: Pipeline.EmbedSparse computes it; Embed refuses it with
	// ErrConfig.
	PoolSplade

	poolAll = PoolCLS | PoolMax | PoolMean | PoolMeanSqrtLen | PoolWeightedMean | PoolLastToken | PoolSplade
)

// poolNames are the modes in sentence-transformers' order with the names
// String gives: TEI's for its modes ("last_token" as its /info says
// it), sentence-transformers' for the others.
var poolNames = []struct {
	p    Pooling
	name string
}{
	{PoolCLS, "cls"}, {PoolMax, "max"}, {PoolMean, "mean"}, {PoolMeanSqrtLen, "mean_sqrt_len_tokens"},
	{PoolWeightedMean, "weightedmean"}, {PoolLastToken, "last_token"}, {PoolSplade, "splade"},
}

// String is the mode's name ("cls", "mean", "last_token", "splade" as
// TEI says them; "max", "weightedmean", "mean_sqrt_len_tokens" as
// sentence-transformers does), several joined by "+" ("cls+mean"),
// "default" for PoolDefault and "Pooling(N)" for a value with other bits.
func (p Pooling) String() string {
	switch {
	case p == PoolDefault:
		return "default"
	case p&^poolAll != 0:
		return fmt.Sprintf("Pooling(%d)", int(p))
	}
	var s []string
	for _, n := range poolNames {
		if p&n.p != 0 {
			s = append(s, n.name)
		}
	}
	return strings.Join(s, "+")
}

// MarshalText is String, so that JSON shows the name.
func (p Pooling) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

// UnmarshalText is ParsePooling.
func (p *Pooling) UnmarshalText(b []byte) error {
	v, err := ParsePooling(string(b))
	if err == nil {
		*p = v
	}
	return err
}

// ParsePooling reads a pooling as TEI's --pooling spells it (cls, mean,
// splade, last-token), as sentence-transformers' pooling_mode does (cls,
// lasttoken, max, mean, mean_sqrt_len_tokens, weightedmean), or as String
// writes it (last_token, several joined by "+"); "" and "default" are
// PoolDefault. Anything else is an error wrapping ErrConfig.
func ParsePooling(s string) (Pooling, error) {
	if s == "" || s == "default" {
		return PoolDefault, nil
	}
	var p Pooling
	for _, part := range strings.Split(strings.ToLower(s), "+") {
		m := PoolDefault
		switch part {
		case "last-token", "lasttoken":
			m = PoolLastToken
		default:
			for _, n := range poolNames {
				if part == n.name {
					m = n.p
				}
			}
		}
		if m == PoolDefault {
			return 0, fmt.Errorf("models: pooling %q: want cls, mean, last-token, splade (TEI's), max, weightedmean or mean_sqrt_len_tokens (sentence-transformers'), or several joined by +: %w", s, ErrConfig)
		}
		p |= m
	}
	return p, nil
}

// modes is the number of modes in p.
func (p Pooling) modes() int {
	n := 0
	for _, m := range poolNames {
		if p&m.p != 0 {
			n++
		}
	}
	return n
}

// check reports a pooling Embed cannot compute: bits that are no mode
// (ErrInput), or splade (ErrConfig: no masked-LM head).
func (p Pooling) check() error {
	switch {
	case p == PoolDefault || p&^poolAll != 0:
		return fmt.Errorf("models: pooling %v: want PoolDefault (0, the model's own) or a set of PoolCLS, PoolMax, PoolMean, PoolMeanSqrtLen, PoolWeightedMean, PoolLastToken: %w", p, ErrInput)
	case p&PoolSplade != 0:
		return errSplade
	}
	return nil
}

// errSplade refuses SPLADE pooling.
var errSplade = fmt.Errorf("models: splade pooling gives sparse vectors from a masked-LM head (ForMaskedLM): EmbedSparse computes them, not Embed or a sentence-transformers module: %w", ErrConfig)

// poolRows writes into v (p.modes() x h values) sequence b's pooled
// vector: for each mode of p, in sentence-transformers' order, h values
// computed over the rows [start, end) of last (h values each) whose mask
// is not 0 (mask nil: every row) as models/Pooling.py computes them:
// max puts -1e9 where the mask is 0, the means divide by the number of
// tokens clamped to 1e-9, weightedmean weighs row i by i-start+1, and
// lasttoken takes the last row whose mask is 1 (zeros when none).
// Sums are in float64. The first skip rows count as masked, as
// sentence-transformers masks a prompt's tokens (its first prompt_length
// tokens, the CLS token included) for a Pooling module whose
// include_prompt is false; cls still takes the first row.
func poolRows(v []float32, p Pooling, last []float32, h, start, end, skip int, mask []int32) {
	on := func(i int) bool { return i >= start+skip && (mask == nil || mask[i] != 0) }
	var sum, wsum []float64
	var n, wn float64
	if p&(PoolMean|PoolMeanSqrtLen) != 0 {
		sum = make([]float64, h)
		for i := start; i < end; i++ {
			if on(i) {
				n++
				for j, x := range last[i*h : (i+1)*h] {
					sum[j] += float64(x)
				}
			}
		}
		n = max(n, 1e-9)
	}
	if p&PoolWeightedMean != 0 {
		wsum = make([]float64, h)
		for i := start; i < end; i++ {
			if on(i) {
				w := float64(i - start + 1)
				wn += w
				for j, x := range last[i*h : (i+1)*h] {
					wsum[j] += w * float64(x)
				}
			}
		}
		wn = max(wn, 1e-9)
	}
	k := 0
	out := func() []float32 { o := v[k*h : (k+1)*h]; k++; return o }
	if p&PoolCLS != 0 {
		copy(out(), last[start*h:(start+1)*h])
	}
	if p&PoolMax != 0 {
		o := out()
		for j := range o {
			o[j] = -1e9
		}
		for i := start; i < end; i++ {
			if on(i) {
				for j, x := range last[i*h : (i+1)*h] {
					o[j] = max(o[j], x)
				}
			}
		}
	}
	if p&PoolMean != 0 {
		o := out()
		for j, s := range sum {
			o[j] = float32(s / n)
		}
	}
	if p&PoolMeanSqrtLen != 0 {
		o, r := out(), math.Sqrt(n)
		for j, s := range sum {
			o[j] = float32(s / r)
		}
	}
	if p&PoolWeightedMean != 0 {
		o := out()
		for j, s := range wsum {
			o[j] = float32(s / wn)
		}
	}
	if p&PoolLastToken != 0 {
		o := out()
		clear(o)
		for i := end - 1; i >= start; i-- {
			if on(i) {
				copy(o, last[i*h:(i+1)*h])
				break
			}
		}
	}
}

// ParseTEIPooling reads a pooling as TEI's --pooling takes it: cls,
// mean, splade or last-token ("" is PoolDefault, the model's own); other
// values, sentence-transformers' other modes included, are an error
// wrapping ErrConfig (they come only from a model's Pooling config).
func ParseTEIPooling(s string) (Pooling, error) {
	switch s {
	case "":
		return PoolDefault, nil
	case "cls":
		return PoolCLS, nil
	case "mean":
		return PoolMean, nil
	case "splade":
		return PoolSplade, nil
	case "last-token":
		return PoolLastToken, nil
	}
	return 0, fmt.Errorf("models: pooling %q: want cls, mean, splade or last-token (TEI's --pooling; the default is the model's own): %w", s, ErrConfig)
}
