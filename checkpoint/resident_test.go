package checkpoint

import (
	"path/filepath"
	"slices"
	"testing"
)

// TestDropResident checks that dropping a mapped file's pages leaves the
// slices read before valid, with the same values, and that a file held
// in memory is left alone.
func TestDropResident(t *testing.T) {
	v := make([]float32, 5000) // more than a page
	for i := range v {
		v[i] = float32(i) * 0.5
	}
	path := filepath.Join(t.TempDir(), "m.safetensors")
	tensors := map[string]Tensor{"w": Float32Tensor([]int{len(v)}, v), "b": Int8Tensor([]int{3}, []int8{1, -2, 3})}
	if err := Save(path, tensors, nil); err != nil {
		t.Fatal(err)
	}
	c, err := OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	got, _, err := c.Float32("w")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.DropResident(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, v) {
		t.Error("a slice read before DropResident reads other values after it")
	}
	b, err := EncodeSafetensors(tensors, nil)
	if err != nil {
		t.Fatal(err)
	}
	m, err := ParseSafetensors(b)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.DropResident(); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := m.Float32("w"); !slices.Equal(got, v) {
		t.Error("DropResident changed a file held in memory")
	}
}
