package smoothquant

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/int8bert/int8bert/checkpoint"
)

// roundTrip writes q's tensors (plus an unrelated one) to safetensors bytes
// and parses them back.
func roundTrip(t *testing.T, tensors map[string]checkpoint.Tensor) *checkpoint.Safetensors {
	t.Helper()
	tensors["other.weight"] = checkpoint.Float32Tensor([]int{2}, []float32{1, 2})
	buf, err := checkpoint.EncodeSafetensors(tensors, map[string]string{MetadataKey: "{}"})
	if err != nil {
		t.Fatal(err)
	}
	st, err := checkpoint.ParseSafetensors(buf)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// tensorFields are the fields Tensors/LoadQLinear carry (metadata aside).
func tensorFields(q *QLinear) QLinear {
	return QLinear{N: q.N, K: q.K, W: q.W, WScale: q.WScale, Bias: q.Bias, Smooth: q.Smooth,
		ActScale: q.ActScale, ActZeroPoint: q.ActZeroPoint, Fallback: q.Fallback, WF32: q.WF32}
}

func TestTensorsRoundTrip(t *testing.T) {
	spec, _ := outlierLayer(11, 24, 40, 30)
	noBias := spec
	noBias.Bias = nil
	noBias.NoSmooth = true
	cases := []struct {
		name string
		spec LinearSpec
		o    Options
	}{
		{"static", spec, Options{Mode: Static, Alpha: 0.5, Selector: testSel}},
		{"dynamic", spec, Options{Mode: Dynamic, Auto: true, Selector: testSel}},
		{"static-nosmooth-nobias", noBias, Options{Mode: Static, Selector: testSel}},
		{"fallback", spec, Options{Mode: Static, FallbackSQNR: 300, Selector: testSel}},
	}
	const prefix = "int8.layer.3.ffn1."
	for _, c := range cases {
		q, err := QuantizeLinear(c.spec, c.o)
		if err != nil {
			t.Fatal(err)
		}
		tensors := q.Tensors(prefix)
		for name := range tensors {
			if !strings.HasPrefix(name, prefix) {
				t.Errorf("%s: tensor %q outside the prefix", c.name, name)
			}
		}
		st := roundTrip(t, tensors)
		got, err := LoadQLinear(st, prefix, c.spec.N, c.spec.K, c.o.Mode)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if want := tensorFields(q); !reflect.DeepEqual(tensorFields(got), want) {
			t.Errorf("%s: loaded %+v\nwant %+v", c.name, tensorFields(got), want)
		}
		if got.Name != prefix {
			t.Errorf("%s: name %q", c.name, got.Name)
		}
		if _, ok := tensors[prefix+TensorWeightF32]; ok != q.Fallback {
			t.Errorf("%s: weight_f32 present=%v fallback=%v", c.name, ok, q.Fallback)
		}
		if _, ok := tensors[prefix+TensorWeight]; ok == q.Fallback {
			t.Errorf("%s: weight present=%v fallback=%v", c.name, ok, q.Fallback)
		}
		if _, ok := tensors[prefix+TensorActScale]; ok != (c.o.Mode == Static && !q.Fallback) {
			t.Errorf("%s: act_scale present=%v", c.name, ok)
		}
	}
}

func TestLoadQLinearErrors(t *testing.T) {
	spec, _ := outlierLayer(12, 8, 12, 10)
	q, err := QuantizeLinear(spec, Options{Mode: Static, Alpha: 0.5, Selector: testSel})
	if err != nil {
		t.Fatal(err)
	}
	const p = "l."
	f32 := checkpoint.Float32Tensor
	cases := []struct {
		name   string // the tensor the error must name
		mutate func(map[string]checkpoint.Tensor)
		n, k   int
	}{
		{"l.weight", func(m map[string]checkpoint.Tensor) { delete(m, "l.weight") }, 8, 12},
		{"l.weight_scale", func(m map[string]checkpoint.Tensor) { delete(m, "l.weight_scale") }, 8, 12},
		{"l.act_scale", func(m map[string]checkpoint.Tensor) { delete(m, "l.act_scale") }, 8, 12},
		{"l.act_zero_point", func(m map[string]checkpoint.Tensor) { delete(m, "l.act_zero_point") }, 8, 12},
		{"l.weight", func(map[string]checkpoint.Tensor) {}, 8, 13},
		{"l.bias", func(map[string]checkpoint.Tensor) {}, 9, 12}, // the first tensor read
		{"l.weight", func(m map[string]checkpoint.Tensor) {
			m["l.weight"] = checkpoint.Int8Tensor([]int{12, 8}, make([]int8, 96))
		}, 8, 12},
		{"l.weight", func(m map[string]checkpoint.Tensor) { m["l.weight"] = f32([]int{8, 12}, make([]float32, 96)) }, 8, 12},
		{"l.weight_scale", func(m map[string]checkpoint.Tensor) { m["l.weight_scale"] = f32([]int{8}, make([]float32, 8)) }, 8, 12},
		{"l.weight_scale", func(m map[string]checkpoint.Tensor) { m["l.weight_scale"] = f32([]int{1, 8}, q.WScale) }, 8, 12},
		{"l.bias", func(m map[string]checkpoint.Tensor) { m["l.bias"] = f32([]int{7}, q.Bias[:7]) }, 8, 12},
		{"l.bias", func(m map[string]checkpoint.Tensor) {
			b := append([]float32(nil), q.Bias...)
			b[2] = float32(math.NaN())
			m["l.bias"] = f32([]int{8}, b)
		}, 8, 12},
		{"l.smooth", func(m map[string]checkpoint.Tensor) {
			s := append([]float32(nil), q.Smooth...)
			s[4] = -1
			m["l.smooth"] = f32([]int{12}, s)
		}, 8, 12},
		{"l.smooth", func(m map[string]checkpoint.Tensor) {
			s := append([]float32(nil), q.Smooth...)
			s[4] = float32(math.Inf(1))
			m["l.smooth"] = f32([]int{12}, s)
		}, 8, 12},
		{"l.act_scale", func(m map[string]checkpoint.Tensor) { m["l.act_scale"] = f32([]int{1}, []float32{0}) }, 8, 12},
		{"l.act_scale", func(m map[string]checkpoint.Tensor) { m["l.act_scale"] = f32([]int{2}, []float32{1, 1}) }, 8, 12},
		{"l.act_zero_point", func(m map[string]checkpoint.Tensor) { m["l.act_zero_point"] = f32([]int{1}, []float32{256}) }, 8, 12},
		{"l.act_zero_point", func(m map[string]checkpoint.Tensor) { m["l.act_zero_point"] = f32([]int{1}, []float32{3.5}) }, 8, 12},
		{"l.weight_f32", func(m map[string]checkpoint.Tensor) { m["l.weight_f32"] = f32([]int{8, 12}, make([]float32, 96)) }, 8, 12},
	}
	for i, c := range cases {
		m := q.Tensors(p)
		c.mutate(m)
		_, err := LoadQLinear(roundTrip(t, m), p, c.n, c.k, Static)
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("case %d (%s): %v, want ErrInvalid", i, c.name, err)
			continue
		}
		if !strings.Contains(err.Error(), `"`+c.name+`"`) {
			t.Errorf("case %d: error %q does not name %s", i, err, c.name)
		}
	}
	// dynamic mode needs no activation parameters
	m := q.Tensors(p)
	delete(m, "l.act_scale")
	delete(m, "l.act_zero_point")
	if _, err := LoadQLinear(roundTrip(t, m), p, 8, 12, Dynamic); err != nil {
		t.Errorf("dynamic without act params: %v", err)
	}
	if _, err := LoadQLinear(nil, p, 8, 12, Static); !errors.Is(err, ErrInvalid) {
		t.Errorf("nil source: %v", err)
	}
}
