package checkpoint

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"unsafe"
)

// rawSafetensors assembles a file from a header string and a data section,
// without any validation.
func rawSafetensors(header string, data []byte) []byte {
	b := make([]byte, 8, 8+len(header)+len(data))
	binary.LittleEndian.PutUint64(b, uint64(len(header)))
	b = append(b, header...)
	return append(b, data...)
}

func TestSafetensorsRoundTrip(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "w.safetensors")
	f32 := []float32{1, -2.5, 3e-7, float32(math.Inf(1)), 0, 7}
	i8 := []int8{-128, -1, 0, 1, 127}
	tensors := map[string]Tensor{
		"a.weight": Float32Tensor([]int{2, 3}, f32),
		"q.int8":   Int8Tensor([]int{5}, i8),
		"scalar":   Float32Tensor([]int{}, []float32{42}),
		"empty":    Float32Tensor([]int{0, 4}, nil),
	}
	meta := map[string]string{"format": "pt", "int8bert": "w8a8"}
	if err := Save(path, tensors, meta); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(path)
	if n := binary.LittleEndian.Uint64(raw); n%8 != 0 {
		t.Errorf("header length %d not a multiple of 8", n)
	}
	s, err := OpenSafetensors(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !reflect.DeepEqual(s.Metadata(), meta) {
		t.Errorf("metadata %v", s.Metadata())
	}
	if !reflect.DeepEqual(s.Names(), []string{"a.weight", "empty", "q.int8", "scalar"}) {
		t.Errorf("names %v", s.Names())
	}
	v, shape, err := s.Float32("a.weight")
	if err != nil || !reflect.DeepEqual(v, f32) || !reflect.DeepEqual(shape, []int{2, 3}) {
		t.Fatalf("a.weight: %v %v %v", v, shape, err)
	}
	// Aligned F32 data is a view of the mapping.
	_, rb, _ := s.Raw("a.weight")
	if unsafe.Pointer(&v[0]) != unsafe.Pointer(&rb[0]) && littleEndian {
		t.Errorf("aligned F32 tensor was copied")
	}
	q, shape, err := s.Int8("q.int8")
	if err != nil || !reflect.DeepEqual(q, i8) || !reflect.DeepEqual(shape, []int{5}) {
		t.Fatalf("q.int8: %v %v %v", q, shape, err)
	}
	if _, _, err := s.Int8("a.weight"); err == nil {
		t.Error("Int8 of an F32 tensor: no error")
	}
	if v, shape, err := s.Float32("scalar"); err != nil || len(v) != 1 || v[0] != 42 || len(shape) != 0 {
		t.Errorf("scalar: %v %v %v", v, shape, err)
	}
	if v, _, err := s.Float32("empty"); err != nil || len(v) != 0 {
		t.Errorf("empty: %v %v", v, err)
	}
	if _, _, err := s.Float32("nope"); err == nil || !strings.Contains(err.Error(), `"nope"`) || !strings.Contains(err.Error(), path) {
		t.Errorf("missing tensor error %v should name file and tensor", err)
	}
	if _, _, err := s.Float32("q.int8"); err == nil {
		t.Error("Float32 of I8: no error")
	}
	// Checkpoint over a single file.
	c, err := OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if sh, err := c.Shape("a.weight"); err != nil || !reflect.DeepEqual(sh, []int{2, 3}) {
		t.Errorf("Shape: %v %v", sh, err)
	}
	if _, err := c.Shape("zzz"); err == nil {
		t.Error("Shape of a missing tensor: no error")
	}
}

func TestSafetensorsHalf(t *testing.T) {
	// F16: 1.0, -2.0, smallest subnormal, 65504, -0, +Inf; BF16: 1.0, -3.0.
	f16 := []uint16{0x3c00, 0xc000, 0x0001, 0x7bff, 0x8000, 0x7c00}
	want16 := []float32{1, -2, float32(math.Ldexp(1, -24)), 65504, float32(math.Copysign(0, -1)), float32(math.Inf(1))}
	bf16 := []uint16{0x3f80, 0xc040}
	b16 := make([]byte, 2*len(f16))
	for i, h := range f16 {
		binary.LittleEndian.PutUint16(b16[2*i:], h)
	}
	bb := make([]byte, 2*len(bf16))
	for i, h := range bf16 {
		binary.LittleEndian.PutUint16(bb[2*i:], h)
	}
	enc, err := EncodeSafetensors(map[string]Tensor{
		"h": {Dtype: F16, Shape: []int{6}, Data: b16},
		"b": {Dtype: BF16, Shape: []int{2}, Data: bb},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ParseSafetensors(enc)
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := s.Float32("h")
	if err != nil {
		t.Fatal(err)
	}
	for i := range want16 {
		if math.Float32bits(got[i]) != math.Float32bits(want16[i]) {
			t.Errorf("f16 %#04x: got %v want %v", f16[i], got[i], want16[i])
		}
	}
	if got, _, err := s.Float32("b"); err != nil || got[0] != 1 || got[1] != -3 {
		t.Errorf("bf16: %v %v", got, err)
	}
	// Every normal and subnormal half converts like the reference formula.
	for h := 0; h < 0x7c00; h++ {
		e, m := h>>10, h&0x3ff
		var want float64
		if e == 0 {
			want = math.Ldexp(float64(m), -24)
		} else {
			want = math.Ldexp(1+float64(m)/1024, e-15)
		}
		if got := HalfToFloat32(uint16(h)); float64(got) != want {
			t.Fatalf("HalfToFloat32(%#04x) = %v, want %v", h, got, want)
		}
	}
}

func TestSafetensorsBad(t *testing.T) {
	good := rawSafetensors(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, make([]byte, 8))
	if _, err := ParseSafetensors(good); err != nil {
		t.Fatalf("valid file rejected: %v", err)
	}
	huge := make([]byte, 16)
	binary.LittleEndian.PutUint64(huge, 1<<40)
	cases := []struct {
		name, want string
		file       []byte
	}{
		{"empty", "too short", nil},
		{"short", "too short", []byte{1, 2, 3}},
		{"truncated", "past the end", good[:len(good)-20]},
		{"header past file", "past the end", huge},
		{"data truncated", "past the end", good[:len(good)-4]},
		{"not json", "header", rawSafetensors(`{"a":`, nil)},
		{"not object", "'{'", rawSafetensors(`[1,2]`, nil)},
		{"unknown dtype", `unknown dtype "F31"`, rawSafetensors(`{"a":{"dtype":"F31","shape":[2],"data_offsets":[0,8]}}`, make([]byte, 8))},
		{"missing dtype", "missing dtype", rawSafetensors(`{"a":{"shape":[2],"data_offsets":[0,8]}}`, make([]byte, 8))},
		{"unknown field", "unknown field", rawSafetensors(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1}}`, make([]byte, 8))},
		{"shape mismatch", "needs 12 bytes", rawSafetensors(`{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}`, make([]byte, 8))},
		{"negative dim", "negative", rawSafetensors(`{"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}}`, make([]byte, 8))},
		{"shape overflow", "overflow", rawSafetensors(`{"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}}`, make([]byte, 8))},
		{"offset out of range", "past the end", rawSafetensors(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}}`, make([]byte, 8))},
		{"reversed offsets", "invalid data_offsets", rawSafetensors(`{"a":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}}`, make([]byte, 8))},
		{"bad offsets", "2 values", rawSafetensors(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0]}}`, make([]byte, 8))},
		{"overlap", "overlaps", rawSafetensors(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}`, make([]byte, 12))},
		{"hole", "hole", rawSafetensors(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}}`, make([]byte, 12))},
		{"trailing bytes", "data section holds", rawSafetensors(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, make([]byte, 8))},
		{"bad metadata", "__metadata__", rawSafetensors(`{"__metadata__":{"a":1}}`, nil)},
	}
	for _, c := range cases {
		_, err := ParseSafetensors(c.file)
		if err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %q does not mention %q", c.name, err, c.want)
		}
	}
	// From disk, errors name the file.
	path := filepath.Join(t.TempDir(), "bad.safetensors")
	os.WriteFile(path, good[:len(good)-4], 0o644)
	if _, err := OpenSafetensors(path); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("error %v does not name %s", err, path)
	}
	// The writer refuses inconsistent tensors.
	if _, err := EncodeSafetensors(map[string]Tensor{"a": {Dtype: F32, Shape: []int{3}, Data: make([]byte, 8)}}, nil); err == nil {
		t.Error("writer accepted a shape/size mismatch")
	}
	if _, err := EncodeSafetensors(map[string]Tensor{"a": {Dtype: "Q4", Shape: []int{1}, Data: make([]byte, 1)}}, nil); err == nil {
		t.Error("writer accepted an unknown dtype")
	}
}

func TestShardedSafetensors(t *testing.T) {
	dir := t.TempDir()
	if err := Save(filepath.Join(dir, "model-00001-of-00002.safetensors"), map[string]Tensor{
		"a": Float32Tensor([]int{2}, []float32{1, 2}),
	}, map[string]string{"format": "pt"}); err != nil {
		t.Fatal(err)
	}
	if err := Save(filepath.Join(dir, "model-00002-of-00002.safetensors"), map[string]Tensor{
		"b": Float32Tensor([]int{1, 3}, []float32{3, 4, 5}),
	}, map[string]string{"format": "pt"}); err != nil {
		t.Fatal(err)
	}
	idx := map[string]any{
		"metadata":   map[string]any{"total_size": 20},
		"weight_map": map[string]string{"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"},
	}
	js, _ := json.Marshal(idx)
	os.WriteFile(filepath.Join(dir, SafetensorsIndexFile), js, 0o644)
	c, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Format != FormatShardedSafetensors || !reflect.DeepEqual(c.Names(), []string{"a", "b"}) || c.Metadata["total_size"] != "20" {
		t.Fatalf("format %s names %v metadata %v", c.Format, c.Names(), c.Metadata)
	}
	if v, shape, err := c.Float32("b"); err != nil || !reflect.DeepEqual(v, []float32{3, 4, 5}) || !reflect.DeepEqual(shape, []int{1, 3}) {
		t.Errorf("b: %v %v %v", v, shape, err)
	}
	if len(c.Files()) != 2 {
		t.Errorf("files %v", c.Files())
	}
	// A weight map naming a tensor its shard lacks, or a path outside the folder.
	for _, wm := range []map[string]string{
		{"a": "model-00002-of-00002.safetensors"},
		{"a": "../x.safetensors"},
		{"a": "missing.safetensors"},
	} {
		js, _ := json.Marshal(map[string]any{"weight_map": wm})
		os.WriteFile(filepath.Join(dir, SafetensorsIndexFile), js, 0o644)
		if c, err := Open(dir); err == nil {
			c.Close()
			t.Errorf("weight map %v accepted", wm)
		}
	}
	if _, err := Open(t.TempDir()); err == nil || !strings.Contains(err.Error(), "no model.safetensors") {
		t.Errorf("empty folder: %v", err)
	}
}

func TestSafetensorsUnaligned(t *testing.T) {
	// A 5-byte header puts the data at offset 13: F32 must be copied.
	hdr := `{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`
	hdr += strings.Repeat(" ", 5-(len(hdr)%8)+8)
	file := rawSafetensors(hdr, f32bytes(1.5, -2))
	if (8+len(hdr))%4 == 0 {
		t.Fatalf("test header is aligned (%d bytes)", len(hdr))
	}
	buf := make([]byte, len(file)+8)
	base := 0
	for uintptr(unsafe.Pointer(&buf[base]))%8 != 0 {
		base++
	}
	s, err := ParseSafetensors(append(buf[base:base], file...))
	if err != nil {
		t.Fatal(err)
	}
	v, _, err := s.Float32("a")
	if err != nil || !reflect.DeepEqual(v, []float32{1.5, -2}) {
		t.Fatalf("unaligned F32: %v %v", v, err)
	}
	_, raw, _ := s.Raw("a")
	if unsafe.Pointer(&v[0]) == unsafe.Pointer(&raw[0]) {
		t.Error("unaligned F32 returned as a view")
	}
}

// TestFloat32TensorView: a view writes the same file as a copy, and on a
// little-endian host it shares v's memory (no second copy of a large
// table while an artifact is encoded).
func TestFloat32TensorView(t *testing.T) {
	v := []float32{1, -2.5, float32(math.Inf(1)), 3e-38, 0}
	shape := []int{5}
	view, cp := Float32TensorView(shape, v), Float32Tensor(shape, v)
	a, err := EncodeSafetensors(map[string]Tensor{"x": view}, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := EncodeSafetensors(map[string]Tensor{"x": cp}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatal("a view encodes differently from a copy")
	}
	if littleEndian && unsafe.Pointer(&view.Data[0]) != unsafe.Pointer(&v[0]) {
		t.Fatal("little-endian host: the view copied v")
	}
	if e := Float32TensorView(shape, nil); e.Dtype != F32 || len(e.Data) != 0 {
		t.Fatalf("empty view: %+v", e)
	}
}
