package checkpoint

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// pk builds pickles by hand, opcode by opcode, the way torch.save writes
// them (protocol 2).
type pk struct{ b []byte }

func (p *pk) op(b ...byte) *pk { p.b = append(p.b, b...); return p }
func (p *pk) proto() *pk       { return p.op(0x80, 2) }
func (p *pk) mark() *pk        { return p.op('(') }
func (p *pk) global(m, n string) *pk {
	p.op('c')
	p.b = append(p.b, m+"\n"+n+"\n"...)
	return p
}
func (p *pk) str(s string) *pk {
	p.op('X')
	p.b = binary.LittleEndian.AppendUint32(p.b, uint32(len(s)))
	p.b = append(p.b, s...)
	return p
}
func (p *pk) int(v int) *pk {
	p.op('J')
	p.b = binary.LittleEndian.AppendUint32(p.b, uint32(int32(v)))
	return p
}
func (p *pk) ints(vs ...int) *pk {
	p.mark()
	for _, v := range vs {
		p.int(v)
	}
	return p.op('t')
}

// tensor appends _rebuild_tensor_v2(('storage', storageType, key, 'cpu',
// numel), offset, size, stride, False, OrderedDict()).
func (p *pk) tensor(storageType, key string, numel, offset int, size, stride []int) *pk {
	p.global("torch._utils", "_rebuild_tensor_v2")
	p.mark()
	p.mark().str("storage").global("torch", storageType).str(key).str("cpu").int(numel).op('t', 'Q')
	p.int(offset).ints(size...).ints(stride...)
	p.op(0x89).global("collections", "OrderedDict").op(')', 'R')
	return p.op('t', 'R')
}

// torchZip writes a zip with <prefix>/data.pkl, <prefix>/version and the
// given storages.
func torchZip(t testing.TB, prefix string, pkl []byte, storages map[string][]byte) []byte {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	add := func(name string, data []byte) {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: prefix + "/" + name, Method: zip.Store})
		if err != nil {
			t.Fatal(err)
		}
		w.Write(data)
	}
	add("data.pkl", pkl)
	add("version", []byte("3\n"))
	for k, v := range storages {
		add("data/"+k, v)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func f32bytes(v ...float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

func TestTorchStridedAndDtypes(t *testing.T) {
	// Storage 0 holds 0..11; "t" is its transpose view [3,4] -> [4,3],
	// "off" a slice at offset 2, "param" a Parameter, "h" a half tensor.
	st0 := f32bytes(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11)
	half := []byte{0x00, 0x3c, 0x00, 0xc0} // 1, -2
	p := (&pk{}).proto().op('}').mark()
	p.str("t").tensor("FloatStorage", "0", 12, 0, []int{4, 3}, []int{1, 4})
	p.str("off").tensor("FloatStorage", "0", 12, 2, []int{2, 2}, []int{4, 1})
	p.str("param").global("torch._utils", "_rebuild_parameter").mark()
	p.tensor("FloatStorage", "0", 12, 0, []int{12}, []int{1}).op(0x88).global("collections", "OrderedDict").op(')', 'R', 't', 'R')
	p.str("h").tensor("HalfStorage", "1", 2, 0, []int{2}, []int{1})
	p.str("scalar").tensor("FloatStorage", "0", 12, 5, []int{}, []int{})
	p.str("meta").op('}') // non-tensor entries are skipped
	p.op('u', '.')
	zb := torchZip(t, "archive", p.b, map[string][]byte{"0": st0, "1": half})
	tf, err := ParseTorch(bytes.NewReader(zb), int64(len(zb)))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(tf.Names(), []string{"h", "off", "param", "scalar", "t"}) {
		t.Fatalf("names %v", tf.Names())
	}
	check := func(name string, want []float32, wantShape []int) {
		t.Helper()
		v, shape, err := tf.Float32(name)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(v, want) || !reflect.DeepEqual(shape, wantShape) {
			t.Errorf("%s: %v %v, want %v %v", name, v, shape, want, wantShape)
		}
	}
	check("t", []float32{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}, []int{4, 3})
	check("off", []float32{2, 3, 6, 7}, []int{2, 2})
	check("param", []float32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, []int{12})
	check("h", []float32{1, -2}, []int{2})
	check("scalar", []float32{5}, []int{})
	if _, _, err := tf.Float32("zz"); err == nil || !strings.Contains(err.Error(), `"zz"`) {
		t.Errorf("missing tensor: %v", err)
	}
}

func TestTorchRefusesGlobals(t *testing.T) {
	evil := []struct {
		name, want string
		pkl        []byte
	}{
		{"os.system", "os.system", (&pk{}).proto().global("os", "system").str("echo pwned").op(0x85, 'R', '.').b},
		{"builtins.eval", "builtins.eval", (&pk{}).proto().global("builtins", "eval").str("1+1").op(0x85, 'R', '.').b},
		{"stack global", "posix.system", (&pk{}).op(0x80, 4).str("posix").str("system").op(0x93).str("id").op(0x85, 'R', '.').b},
		{"inside a tensor", "subprocess.Popen", (&pk{}).proto().op('}').str("w").global("subprocess", "Popen").op(')', 'R', 's', '.').b},
		{"torch other", "torch.load", (&pk{}).proto().global("torch", "load").op('.').b},
		{"call storage type", "cannot be called", (&pk{}).proto().global("torch", "FloatStorage").op(')', 'R', '.').b},
	}
	for _, e := range evil {
		zb := torchZip(t, "archive", e.pkl, nil)
		_, err := ParseTorch(bytes.NewReader(zb), int64(len(zb)))
		if err == nil || !strings.Contains(err.Error(), e.want) {
			t.Errorf("%s: error %v, want one naming %q", e.name, err, e.want)
		}
	}
}

func TestTorchBad(t *testing.T) {
	good := (&pk{}).proto().op('}').str("w").tensor("FloatStorage", "0", 2, 0, []int{2}, []int{1}).op('s', '.').b
	cases := []struct {
		name, want string
		zip        []byte
		tensor     bool // the error comes when reading the tensor
	}{
		{"no pickle", "data.pkl", noPickleZip(t), false},
		{"storage missing", "missing", torchZip(t, "archive", good, nil), true},
		{"storage short", "holds 4 bytes", torchZip(t, "archive", good, map[string][]byte{"0": f32bytes(1)}), true},
		{"view past storage", "reaches element", torchZip(t, "archive",
			(&pk{}).proto().op('}').str("w").tensor("FloatStorage", "0", 2, 1, []int{2}, []int{1}).op('s', '.').b, nil), false},
		{"unknown storage", "refusing global torch.QInt8Storage", torchZip(t, "archive",
			(&pk{}).proto().op('}').str("w").tensor("QInt8Storage", "0", 2, 0, []int{2}, []int{1}).op('s', '.').b, nil), false},
		{"truncated pickle", "unexpected end", torchZip(t, "archive", good[:len(good)-5], nil), false},
		{"unknown opcode", "opcode", torchZip(t, "archive", []byte{0x80, 2, 'i', 'x', '.'}, nil), false},
		{"not a dict", "not a state dict", torchZip(t, "archive", []byte{0x80, 2, 'K', 1, '.'}, nil), false},
	}
	for _, c := range cases {
		tf, err := ParseTorch(bytes.NewReader(c.zip), int64(len(c.zip)))
		if c.tensor && err == nil {
			_, _, err = tf.Float32("w")
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one mentioning %q", c.name, err, c.want)
		}
	}
	// A truncated .bin on disk: the error names the file.
	src, err := os.ReadFile(filepath.Join(testdataDir(t), PytorchFile))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), PytorchFile)
	os.WriteFile(path, src[:len(src)/2], 0o644)
	if tf, err := OpenTorch(path); err == nil {
		tf.Close()
		t.Error("truncated zip accepted")
	} else if !strings.Contains(err.Error(), path) {
		t.Errorf("error %v does not name %s", err, path)
	}
	os.WriteFile(path, []byte("not a zip"), 0o644)
	if _, err := OpenFile(path); err == nil {
		t.Error("garbage accepted")
	}
}

func TestTorchByteOrder(t *testing.T) {
	pkl := (&pk{}).proto().op('}').str("w").tensor("FloatStorage", "0", 1, 0, []int{1}, []int{1}).op('s', '.').b
	for order, ok := range map[string]bool{"little": true, "big": false} {
		var buf bytes.Buffer
		zw := zip.NewWriter(&buf)
		for name, data := range map[string][]byte{"archive/data.pkl": pkl, "archive/byteorder": []byte(order), "archive/data/0": f32bytes(2)} {
			w, _ := zw.Create(name)
			w.Write(data)
		}
		zw.Close()
		_, err := ParseTorch(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
		if (err == nil) != ok {
			t.Errorf("byteorder %s: %v", order, err)
		}
	}
}

func TestTorchPrefixes(t *testing.T) {
	pkl := (&pk{}).proto().op('}').str("w").tensor("FloatStorage", "0", 2, 0, []int{2}, []int{1}).op('s', '.').b
	for _, prefix := range []string{"archive", "pytorch_model", "whatever"} {
		zb := torchZip(t, prefix, pkl, map[string][]byte{"0": f32bytes(3, 4)})
		tf, err := ParseTorch(bytes.NewReader(zb), int64(len(zb)))
		if err != nil {
			t.Fatalf("%s: %v", prefix, err)
		}
		if v, _, err := tf.Float32("w"); err != nil || !reflect.DeepEqual(v, []float32{3, 4}) {
			t.Errorf("%s: %v %v", prefix, v, err)
		}
	}
}

func noPickleZip(t *testing.T) []byte {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	w, _ := zw.Create("archive/version")
	w.Write([]byte("3\n"))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
