package encoder

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"

	"github.com/int8bert/int8bert/kernels"
	"github.com/int8bert/int8bert/selector"
)

// mapSource is an in-memory checkpoint.
type mapSource map[string]struct {
	v     []float32
	shape []int
}

func (m mapSource) Names() []string {
	var n []string
	for k := range m {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}

func (m mapSource) Float32(name string) ([]float32, []int, error) {
	t, ok := m[name]
	if !ok {
		return nil, nil, fmt.Errorf("no tensor %s", name)
	}
	return t.v, t.shape, nil
}

func tinyConfig() Config {
	return Config{Vocab: 11, Hidden: 8, Layers: 1, Heads: 2, Intermediate: 12, MaxPositions: 6, TypeVocab: 2,
		LayerNormEps: 1e-12, Activation: kernels.ActGELU}
}

// randomSource holds every tensor of tinyConfig under BERT names; LayerNorm
// weights use the old gamma/beta names when old is set.
func randomSource(c Config, old bool) mapSource {
	r := rand.New(rand.NewPCG(1, 2))
	src := mapSource{}
	add := func(name string, shape ...int) {
		n := 1
		for _, d := range shape {
			n *= d
		}
		v := make([]float32, n)
		for i := range v {
			v[i] = r.Float32() - 0.5
		}
		if old {
			name = strings.Replace(name, "LayerNorm.weight", "LayerNorm.gamma", 1)
			name = strings.Replace(name, "LayerNorm.bias", "LayerNorm.beta", 1)
		}
		src[name] = struct {
			v     []float32
			shape []int
		}{v, shape}
	}
	n := BERTNames("")
	h, in := c.Hidden, c.Intermediate
	add(n.WordEmb, c.Vocab, h)
	add(n.PosEmb, c.MaxPositions, h)
	add(n.TypeEmb, c.TypeVocab, h)
	add(n.EmbLN, h)
	add(n.EmbLNBias, h)
	for i := 0; i < c.Layers; i++ {
		l := n.Layer(i)
		for _, x := range []string{l.Q, l.K, l.V, l.O} {
			add(x, h, h)
		}
		for _, x := range []string{l.QBias, l.KBias, l.VBias, l.OBias, l.AttnLN, l.AttnLNBias, l.FFN2Bias, l.OutLN, l.OutLNBias} {
			add(x, h)
		}
		add(l.FFN1, in, h)
		add(l.FFN1Bias, in)
		add(l.FFN2, h, in)
	}
	return src
}

func testSelector(t *testing.T) *selector.Selector {
	sel, err := selector.New(selector.Options{CachePath: "off", Reps: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sel.Close() })
	return sel
}

func TestLoadErrors(t *testing.T) {
	sel := testSelector(t)
	c := tinyConfig()
	src := randomSource(c, false)
	delete(src, "encoder.layer.0.output.dense.weight")
	if _, err := newModel(c, NewLoader(src), BERTNames(""), sel, Options{}); err == nil || !strings.Contains(err.Error(), "encoder.layer.0.output.dense.weight") {
		t.Errorf("missing tensor: %v", err)
	}
	src = randomSource(c, false)
	src["encoder.layer.0.intermediate.dense.weight"] = struct {
		v     []float32
		shape []int
	}{make([]float32, 12*9), []int{12, 9}}
	if _, err := newModel(c, NewLoader(src), BERTNames(""), sel, Options{}); !errors.Is(err, ErrConfig) {
		t.Errorf("wrong shape: %v", err)
	}
	bad := c
	bad.Heads = 3
	if _, err := newModel(bad, NewLoader(randomSource(c, false)), BERTNames(""), sel, Options{}); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "divisible") {
		t.Errorf("hidden not divisible by heads: %v", err)
	}
}

// TestOldNamesAndInputs: gamma/beta names load the same model; bad inputs
// are errors.
func TestOldNamesAndInputs(t *testing.T) {
	sel := testSelector(t)
	c := tinyConfig()
	a, err := newModel(c, NewLoader(randomSource(c, false)), BERTNames(""), sel, Options{})
	if err != nil {
		t.Fatal(err)
	}
	l := NewLoader(randomSource(c, true))
	b, err := newModel(c, l, BERTNames(""), sel, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if u := l.Unexpected(); len(u) != 0 {
		t.Errorf("unexpected after loading old names: %v", u)
	}
	in := &Inputs{Batch: 2, Seq: 3, IDs: []int32{1, 2, 3, 4, 5, 0}, Mask: []int32{1, 1, 1, 1, 1, 0}, TypeIDs: []int32{0, 0, 1, 0, 1, 0}}
	oa, err := a.Forward(in, true)
	if err != nil {
		t.Fatal(err)
	}
	ob, err := b.Forward(in, false)
	if err != nil {
		t.Fatal(err)
	}
	for i := range oa.Last {
		if oa.Last[i] != ob.Last[i] {
			t.Fatal("gamma/beta names give another model")
		}
	}
	if len(oa.HiddenStates) != c.Layers+1 {
		t.Errorf("%d hidden states, want %d", len(oa.HiddenStates), c.Layers+1)
	}
	for name, bad := range map[string]*Inputs{
		"id out of range": {Batch: 1, Seq: 2, IDs: []int32{1, 11}, Mask: []int32{1, 1}},
		"negative id":     {Batch: 1, Seq: 2, IDs: []int32{1, -1}, Mask: []int32{1, 1}},
		"too long":        {Batch: 1, Seq: 7, IDs: make([]int32, 7), Mask: make([]int32, 7)},
		"short mask":      {Batch: 1, Seq: 2, IDs: []int32{1, 2}, Mask: []int32{1}},
		"type id":         {Batch: 1, Seq: 2, IDs: []int32{1, 2}, Mask: []int32{1, 1}, TypeIDs: []int32{0, 2}},
		"empty":           {Batch: 0, Seq: 2},
	} {
		if _, err := a.Forward(bad, false); !errors.Is(err, ErrInput) {
			t.Errorf("%s: got %v, want ErrInput", name, err)
		}
	}
	// Padding does not change the unpadded tokens' outputs.
	one := &Inputs{Batch: 1, Seq: 2, IDs: []int32{4, 5}, Mask: []int32{1, 1}, TypeIDs: []int32{0, 1}}
	o1, err := a.Forward(one, false)
	if err != nil {
		t.Fatal(err)
	}
	for j := 0; j < 2*c.Hidden; j++ {
		if d := o1.Last[j] - oa.Last[3*c.Hidden+j]; d > 1e-5 || d < -1e-5 {
			t.Fatalf("padding changed the output at %d by %v", j, d)
		}
	}
}
