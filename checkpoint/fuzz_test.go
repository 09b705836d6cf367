package checkpoint

import (
	"archive/zip"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// FuzzSafetensors checks that any input either parses into tensors that can
// all be read, or gives an error, never a panic.
func FuzzSafetensors(f *testing.F) {
	enc, err := EncodeSafetensors(map[string]Tensor{
		"a": Float32Tensor([]int{2, 2}, []float32{1, 2, 3, 4}),
		"b": Int8Tensor([]int{3}, []int8{-1, 0, 1}),
		"c": {Dtype: F16, Shape: []int{1}, Data: []byte{0, 0x3c}},
		"d": {Dtype: BF16, Shape: []int{1}, Data: []byte{0x80, 0x3f}},
	}, map[string]string{"format": "pt"})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(enc)
	f.Add(rawSafetensors(`{"a":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}}`, make([]byte, 8)))
	f.Add(rawSafetensors(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}`, make([]byte, 12)))
	f.Add([]byte{})
	if hdr, err := os.ReadFile(filepath.Join("testdata", "distilbert-tiny", "model.safetensors.header")); err == nil {
		f.Add(hdr)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseSafetensors(data)
		if err != nil {
			return
		}
		for _, name := range s.Names() {
			info, raw, err := s.Raw(name)
			if err != nil {
				t.Fatalf("listed tensor %q unreadable: %v", name, err)
			}
			if int64(len(raw)) != info.End-info.Begin {
				t.Fatalf("tensor %q: %d bytes for [%d, %d)", name, len(raw), info.Begin, info.End)
			}
			v, _, err := s.Float32(name)
			if err == nil && int64(len(v))*int64(info.Dtype.Size()) != int64(len(raw)) {
				t.Fatalf("tensor %q: %d values from %d bytes", name, len(v), len(raw))
			}
		}
	})
}

// FuzzPickle runs the restricted unpickler, and the torch reader around it,
// on arbitrary pickles: errors only, never a panic or a call to anything.
func FuzzPickle(f *testing.F) {
	f.Add((&pk{}).proto().op('}').str("w").tensor("FloatStorage", "0", 2, 0, []int{2}, []int{1}).op('s', '.').b)
	f.Add((&pk{}).proto().global("os", "system").str("id").op(0x85, 'R', '.').b)
	f.Add([]byte{0x80, 4, 0x95, 0, 0, 0, 0, 0, 0, 0, 0, '}', 0x94, '.'})
	f.Add([]byte{0x80, 2, ']', '(', 'K', 1, 'M', 2, 0, 0x8a, 2, 0xff, 0xff, 'N', 0x88, 'G', 0x3f, 0xf0, 0, 0, 0, 0, 0, 0, 'e', '.'})
	if zr, err := zip.OpenReader(filepath.Join("testdata", "distilbert-tiny", "pytorch_model.bin")); err == nil {
		for _, zf := range zr.File {
			if filepath.Base(zf.Name) == "data.pkl" {
				rc, err := zf.Open()
				if err == nil {
					b, _ := io.ReadAll(rc)
					rc.Close()
					f.Add(b)
				}
			}
		}
		zr.Close()
	}
	storage := f32bytes(1, 2, 3, 4, 5, 6)
	f.Fuzz(func(t *testing.T, data []byte) {
		if _, err := unpickle(data); err != nil {
			return
		}
		zb := torchZip(t, "archive", data, map[string][]byte{"0": storage})
		tf, err := ParseTorch(bytes.NewReader(zb), int64(len(zb)))
		if err != nil {
			return
		}
		for _, name := range tf.Names() {
			tf.Float32(name)
		}
	})
}
