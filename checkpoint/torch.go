package checkpoint

import (
	"archive/zip"
	"fmt"
	"io"
	"path"
	"slices"
	"sort"
	"strings"
)

// TorchFile is an open pytorch_model.bin in torch's zip format (torch.save
// since PyTorch 1.6): <prefix>/data.pkl holds the pickled state dict and
// <prefix>/data/<key> the raw little-endian storages. The prefix is the
// archive's top-level folder ("archive" in older files, the file's base name
// in newer ones). Only tensors are rebuilt; see the package doc for the
// globals accepted.
type TorchFile struct {
	path    string
	zr      *zip.Reader
	closer  io.Closer
	prefix  string
	tensors map[string]*torchTensor
	names   []string
	files   map[string]*zip.File
}

// OpenTorch opens a torch zip checkpoint and parses its pickle. Storages are
// read lazily by Float32 and Raw.
func OpenTorch(p string) (*TorchFile, error) {
	zr, err := zip.OpenReader(p)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %s: not a torch zip checkpoint: %w", p, err)
	}
	t, err := newTorchFile(&zr.Reader)
	if err != nil {
		zr.Close()
		return nil, fmt.Errorf("checkpoint: %s: %w", p, err)
	}
	t.path, t.closer = p, zr
	return t, nil
}

// ParseTorch reads a torch zip checkpoint from r (size bytes long).
func ParseTorch(r io.ReaderAt, size int64) (*TorchFile, error) {
	zr, err := zip.NewReader(r, size)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: torch: not a zip archive: %w", err)
	}
	t, err := newTorchFile(zr)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: torch: %w", err)
	}
	t.path = "<memory>"
	return t, nil
}

// maxPickleSize bounds data.pkl (a state dict's pickle is a few hundred KB
// even for large models).
const maxPickleSize = 256 << 20

// maxStorageRatio bounds how much a compressed storage entry may expand
// (float weights deflate by well under 2x).
const maxStorageRatio = 16

func newTorchFile(zr *zip.Reader) (*TorchFile, error) {
	t := &TorchFile{zr: zr, files: map[string]*zip.File{}}
	var pkl *zip.File
	for _, f := range zr.File {
		t.files[f.Name] = f
		dir, base := path.Split(f.Name)
		if base == "data.pkl" && strings.Count(f.Name, "/") == 1 {
			if pkl != nil {
				return nil, fmt.Errorf("two data.pkl entries (%s, %s)", pkl.Name, f.Name)
			}
			pkl = f
			t.prefix = dir
		}
	}
	if pkl == nil {
		return nil, fmt.Errorf("no <folder>/data.pkl in the archive (legacy non-zip torch files are not supported)")
	}
	// PyTorch 2.1+ records the byte order of the storages; older files are
	// little-endian.
	if bo, ok := t.files[t.prefix+"byteorder"]; ok {
		rc, err := bo.Open()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", bo.Name, err)
		}
		b, err := io.ReadAll(io.LimitReader(rc, 16))
		rc.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", bo.Name, err)
		}
		if order := strings.TrimSpace(string(b)); order != "little" {
			return nil, fmt.Errorf("%s: storages are %q-endian; only little-endian files are supported", bo.Name, order)
		}
	}
	if pkl.UncompressedSize64 > maxPickleSize {
		return nil, fmt.Errorf("%s: %d bytes, over the %d-byte limit of a pickle: %w", pkl.Name, pkl.UncompressedSize64, maxPickleSize, ErrTooLarge)
	}
	rc, err := pkl.Open()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", pkl.Name, err)
	}
	data, err := io.ReadAll(io.LimitReader(rc, maxPickleSize))
	rc.Close()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", pkl.Name, err)
	}
	obj, err := unpickle(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", pkl.Name, err)
	}
	d, ok := obj.(*pyDict)
	if !ok {
		return nil, fmt.Errorf("%s: top-level object is %s, not a state dict", pkl.Name, describe(obj))
	}
	t.tensors = map[string]*torchTensor{}
	for _, k := range d.keys {
		tt, ok := d.vals[k].(*torchTensor)
		if !ok {
			continue // e.g. nested metadata; only tensors are kept
		}
		name, ok := k.(string)
		if !ok {
			return nil, fmt.Errorf("%s: tensor key %v is not a string", pkl.Name, describe(k))
		}
		t.tensors[name] = tt
		t.names = append(t.names, name)
	}
	sort.Strings(t.names)
	return t, nil
}

// Path returns the file's path ("<memory>" for ParseTorch).
func (t *TorchFile) Path() string { return t.path }

// Names returns the tensor names, sorted.
func (t *TorchFile) Names() []string { return append([]string(nil), t.names...) }

// Info returns a tensor's dtype and shape (Begin and End are zero: torch
// tensors are views into storages).
func (t *TorchFile) Info(name string) (TensorInfo, bool) {
	tt, ok := t.tensors[name]
	if !ok {
		return TensorInfo{}, false
	}
	return TensorInfo{Name: name, Dtype: tt.storage.dtype, Shape: slices.Clone(tt.size)}, true
}

// storage reads one storage's bytes, checking its size.
func (t *TorchFile) storage(s *storageRef) ([]byte, error) {
	name := t.prefix + "data/" + s.key
	f, ok := t.files[name]
	if !ok {
		return nil, fmt.Errorf("storage %s missing from the archive", name)
	}
	want := mulSat(s.numel, int64(s.dtype.Size()))
	if f.UncompressedSize64 != uint64(want) {
		return nil, fmt.Errorf("storage %s holds %d bytes, want %d (%d x %s)", name, f.UncompressedSize64, want, s.numel, s.dtype)
	}
	if f.Method != zip.Store && f.UncompressedSize64 > maxStorageRatio*f.CompressedSize64+4096 {
		// torch.save stores entries uncompressed; a compressed one that
		// would expand this much is a zip bomb, not a tensor.
		return nil, fmt.Errorf("storage %s expands %d compressed bytes to %d, over %dx: %w",
			name, f.CompressedSize64, f.UncompressedSize64, maxStorageRatio, ErrTooLarge)
	}
	rc, err := f.Open()
	if err != nil {
		return nil, fmt.Errorf("storage %s: %w", name, err)
	}
	defer rc.Close()
	// Read without trusting the declared size for the allocation.
	b, err := io.ReadAll(io.LimitReader(rc, want+1))
	if err != nil {
		return nil, fmt.Errorf("storage %s: %w", name, err)
	}
	if int64(len(b)) != want {
		return nil, fmt.Errorf("storage %s: read %d bytes, want %d", name, len(b), want)
	}
	return b, nil
}

// Raw returns a tensor's info and its elements as contiguous little-endian
// bytes in row-major order (strided tensors are copied into place).
func (t *TorchFile) Raw(name string) (TensorInfo, []byte, error) {
	tt, ok := t.tensors[name]
	if !ok {
		return TensorInfo{}, nil, fmt.Errorf("checkpoint: %s: no tensor %q", t.path, name)
	}
	info, _ := t.Info(name)
	st, err := t.storage(tt.storage)
	if err != nil {
		return TensorInfo{}, nil, fmt.Errorf("checkpoint: %s: tensor %q: %w", t.path, name, err)
	}
	return info, gather(st, tt, tt.storage.dtype.Size()), nil
}

// gather copies the elements a (bounds-checked) strided view selects into a
// contiguous row-major buffer.
func gather(st []byte, tt *torchTensor, es int) []byte {
	n, _ := numel(tt.size)
	out := make([]byte, int(n)*es)
	if n == 0 {
		return out
	}
	if isContiguous(tt.size, tt.stride) {
		copy(out, st[int(tt.offset)*es:])
		return out
	}
	rank := len(tt.size)
	idx := make([]int, rank)
	src := tt.offset
	for o := 0; o < int(n); o++ {
		copy(out[o*es:(o+1)*es], st[int(src)*es:])
		for d := rank - 1; d >= 0; d-- {
			idx[d]++
			src += tt.stride[d]
			if idx[d] < tt.size[d] {
				break
			}
			src -= int64(idx[d]) * tt.stride[d]
			idx[d] = 0
		}
	}
	return out
}

// isContiguous reports whether stride is row-major for size (dimensions of
// size 1 may have any stride).
func isContiguous(size []int, stride []int64) bool {
	want := int64(1)
	for d := len(size) - 1; d >= 0; d-- {
		if size[d] != 1 && stride[d] != want {
			return false
		}
		want *= int64(size[d])
	}
	return true
}

// Float32 returns a tensor converted to a new float32 slice, and its shape.
func (t *TorchFile) Float32(name string) ([]float32, []int, error) {
	info, b, err := t.Raw(name)
	if err != nil {
		return nil, nil, err
	}
	v, err := toFloat32(info.Dtype, b, false)
	if err != nil {
		return nil, nil, fmt.Errorf("checkpoint: %s: tensor %q: %w", t.path, name, err)
	}
	return v, info.Shape, nil
}

// Close closes the archive.
func (t *TorchFile) Close() error {
	if t.closer == nil {
		return nil
	}
	err := t.closer.Close()
	t.closer = nil
	if err != nil {
		return fmt.Errorf("checkpoint: %s: %w", t.path, err)
	}
	return nil
}
