package checkpoint

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"github.com/int8bert/int8bert/internal/atomicfile"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"unsafe"
)

// Tensor is a tensor to write: its dtype, shape and little-endian bytes.
type Tensor struct {
	Dtype Dtype
	Shape []int
	Data  []byte
}

// Float32Tensor returns a F32 Tensor holding a little-endian copy of v.
func Float32Tensor(shape []int, v []float32) Tensor {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return Tensor{Dtype: F32, Shape: append([]int(nil), shape...), Data: b}
}

// Float32TensorView is Float32Tensor without the copy where the host is
// little-endian: the tensor's bytes are v's, so v must not change until
// the tensor is written (EncodeSafetensors copies it; WriteSafetensors
// and Save write it out). Elsewhere it is
// Float32Tensor.
func Float32TensorView(shape []int, v []float32) Tensor {
	if !littleEndian || len(v) == 0 {
		return Float32Tensor(shape, v)
	}
	b := unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 4*len(v))
	return Tensor{Dtype: F32, Shape: append([]int(nil), shape...), Data: b}
}

// Int8Tensor returns an I8 Tensor holding a copy of v.
func Int8Tensor(shape []int, v []int8) Tensor {
	b := make([]byte, len(v))
	for i, x := range v {
		b[i] = byte(x)
	}
	return Tensor{Dtype: I8, Shape: append([]int(nil), shape...), Data: b}
}

// EncodeSafetensors returns the bytes of a safetensors file holding tensors
// and metadata, laid out as WriteSafetensors writes them.
func EncodeSafetensors(tensors map[string]Tensor, metadata map[string]string) ([]byte, error) {
	l, err := layoutSafetensors(tensors, metadata)
	if err != nil {
		return nil, err
	}
	buf := bytes.NewBuffer(make([]byte, 0, l.size()))
	if _, err := l.writeTo(buf, tensors); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// WriteSafetensors writes a safetensors file holding tensors and metadata
// to w, a tensor at a time, and returns the bytes written: the file is
// never held whole in memory. Tensors are laid out by decreasing element
// size, then name, and the header is padded with spaces to a multiple of
// 8 bytes, so every tensor is aligned to its element size in the file.
// The bytes are EncodeSafetensors's.
func WriteSafetensors(w io.Writer, tensors map[string]Tensor, metadata map[string]string) (int64, error) {
	l, err := layoutSafetensors(tensors, metadata)
	if err != nil {
		return 0, err
	}
	return l.writeTo(w, tensors)
}

// safetensorsLayout is a file's header and the order of its tensors.
type safetensorsLayout struct {
	header []byte // the length prefix and the padded JSON header
	names  []string
	data   int64 // the data section's size
}

func (l *safetensorsLayout) size() int64 { return int64(len(l.header)) + l.data }

func (l *safetensorsLayout) writeTo(w io.Writer, tensors map[string]Tensor) (int64, error) {
	n, err := w.Write(l.header)
	total := int64(n)
	if err != nil {
		return total, fmt.Errorf("checkpoint: safetensors: %w", err)
	}
	for _, name := range l.names {
		n, err := w.Write(tensors[name].Data)
		total += int64(n)
		if err != nil {
			return total, fmt.Errorf("checkpoint: safetensors: tensor %q: %w", name, err)
		}
	}
	return total, nil
}

// layoutSafetensors checks tensors and lays them out (see WriteSafetensors).
func layoutSafetensors(tensors map[string]Tensor, metadata map[string]string) (*safetensorsLayout, error) {
	names := make([]string, 0, len(tensors))
	for name, t := range tensors {
		if name == "__metadata__" || name == "" {
			return nil, fmt.Errorf("checkpoint: safetensors: invalid tensor name %q", name)
		}
		if !t.Dtype.Known() {
			return nil, fmt.Errorf("checkpoint: safetensors: tensor %q: unknown dtype %q", name, string(t.Dtype))
		}
		n, err := numel(t.Shape)
		if err != nil {
			return nil, fmt.Errorf("checkpoint: safetensors: tensor %q: %w", name, err)
		}
		if mulSat(n, int64(t.Dtype.Size())) != int64(len(t.Data)) {
			return nil, fmt.Errorf("checkpoint: safetensors: tensor %q: shape %v of %s needs %d bytes, got %d", name, t.Shape, t.Dtype, mulSat(n, int64(t.Dtype.Size())), len(t.Data))
		}
		names = append(names, name)
	}
	sort.Slice(names, func(i, j int) bool {
		si, sj := tensors[names[i]].Dtype.Size(), tensors[names[j]].Dtype.Size()
		if si != sj {
			return si > sj
		}
		return names[i] < names[j]
	})
	hdr := make(map[string]any, len(names)+1)
	if metadata != nil {
		hdr["__metadata__"] = metadata
	}
	var off int64
	for _, name := range names {
		t := tensors[name]
		shape := t.Shape
		if shape == nil {
			shape = []int{}
		}
		end := off + int64(len(t.Data))
		hdr[name] = headerEntry{Dtype: t.Dtype, Shape: shape, DataOffsets: []int64{off, end}}
		off = end
	}
	js, err := json.Marshal(hdr)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: safetensors: header: %w", err)
	}
	for len(js)%8 != 0 {
		js = append(js, ' ')
	}
	head := make([]byte, 8, 8+len(js))
	binary.LittleEndian.PutUint64(head, uint64(len(js)))
	return &safetensorsLayout{header: append(head, js...), names: names, data: off}, nil
}

// Save writes tensors and metadata as a safetensors file at path (see
// WriteSafetensors for the layout), a tensor at a time. It writes a
// temporary file in the same folder, synced, and renames it, so readers
// never see a partial file.
func Save(path string, tensors map[string]Tensor, metadata map[string]string) (err error) {
	l, err := layoutSafetensors(tensors, metadata)
	if err != nil {
		return fmt.Errorf("%w (writing %s)", err, path)
	}
	// A killed writer's temporary files go first (DESIGN 6.1).
	atomicfile.Sweep(filepath.Dir(path), "."+filepath.Base(path)+".tmp", atomicfile.Stale)
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	w := bufio.NewWriterSize(f, 1<<20)
	if _, err = l.writeTo(w, tensors); err != nil {
		return fmt.Errorf("%w (writing %s)", err, path)
	}
	if err = w.Flush(); err != nil {
		return fmt.Errorf("checkpoint: %s: %w", path, err)
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("checkpoint: %s: %w", path, err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("checkpoint: %s: %w", path, err)
	}
	if err = os.Chmod(f.Name(), 0o644); err != nil {
		return fmt.Errorf("checkpoint: %s: %w", path, err)
	}
	if err = os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return nil
}
