package checkpoint

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"unsafe"
)

// maxHeaderSize bounds a safetensors JSON header (the reference
// implementation uses 100 MB too).
const maxHeaderSize = 100 << 20

// TensorInfo describes one tensor of a safetensors file. Begin and End are
// byte offsets relative to the start of the data section.
type TensorInfo struct {
	Name  string
	Dtype Dtype
	Shape []int
	Begin int64
	End   int64
}

// Safetensors is an open safetensors file: its header is parsed and
// validated, its bytes memory-mapped read-only (or read into memory where
// mmap is unavailable). Methods are safe for concurrent use; Close must not
// race with them.
type Safetensors struct {
	path     string
	buf      []byte // the whole file
	data     []byte // the data section
	release  func() error
	tensors  map[string]*TensorInfo
	names    []string
	metadata map[string]string
}

// OpenSafetensors maps path and validates its header.
func OpenSafetensors(path string) (*Safetensors, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	defer f.Close()
	return OpenSafetensorsFile(f)
}

// OpenSafetensorsFile maps the open file f (named by f.Name() in errors)
// and validates its header; f may be closed (and its file removed) once
// it returns, as the mapping keeps the data.
func OpenSafetensorsFile(f *os.File) (*Safetensors, error) {
	path := f.Name()
	buf, release, err := mapFile(f)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %s: %w", path, err)
	}
	s, err := parseSafetensors(buf)
	if err != nil {
		release()
		return nil, fmt.Errorf("checkpoint: %s: %w", path, err)
	}
	s.path = path
	s.release = release
	return s, nil
}

// ParseSafetensors validates a safetensors file held in memory. The result
// aliases buf.
func ParseSafetensors(buf []byte) (*Safetensors, error) {
	s, err := parseSafetensors(buf)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: safetensors: %w", err)
	}
	s.path = "<memory>"
	s.release = func() error { return nil }
	return s, nil
}

// headerEntry is one tensor's entry in the JSON header.
type headerEntry struct {
	Dtype       Dtype   `json:"dtype"`
	Shape       []int   `json:"shape"`
	DataOffsets []int64 `json:"data_offsets"`
}

func parseSafetensors(buf []byte) (*Safetensors, error) {
	if len(buf) < 8 {
		return nil, fmt.Errorf("file of %d bytes is too short for the 8-byte header length", len(buf))
	}
	n := binary.LittleEndian.Uint64(buf)
	if n > uint64(len(buf)-8) {
		return nil, fmt.Errorf("header length %d runs past the end of the file (%d bytes)", n, len(buf))
	}
	if n > maxHeaderSize {
		return nil, fmt.Errorf("header length %d exceeds the %d-byte limit: %w", n, maxHeaderSize, ErrTooLarge)
	}
	hdr := buf[8 : 8+n]
	if len(hdr) == 0 || hdr[0] != '{' {
		return nil, errors.New("header does not start with '{'")
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(hdr, &raw); err != nil {
		return nil, fmt.Errorf("header: %w", err)
	}
	s := &Safetensors{
		buf:     buf,
		data:    buf[8+n:],
		tensors: make(map[string]*TensorInfo, len(raw)),
	}
	for name, msg := range raw {
		if name == "__metadata__" {
			if err := json.Unmarshal(msg, &s.metadata); err != nil {
				return nil, fmt.Errorf("header: __metadata__ must map strings to strings: %w", err)
			}
			continue
		}
		var e headerEntry
		dec := json.NewDecoder(bytes.NewReader(msg))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&e); err != nil {
			return nil, fmt.Errorf("tensor %q: %w", name, err)
		}
		info, err := checkEntry(name, e, int64(len(s.data)))
		if err != nil {
			return nil, fmt.Errorf("tensor %q: %w", name, err)
		}
		s.tensors[name] = info
		s.names = append(s.names, name)
	}
	sort.Strings(s.names)
	// The data section must be covered exactly: sorted by offset, each tensor
	// starts where the previous one ends, no overlap, no holes.
	order := make([]*TensorInfo, 0, len(s.tensors))
	for _, name := range s.names {
		order = append(order, s.tensors[name])
	}
	sort.SliceStable(order, func(i, j int) bool {
		if order[i].Begin != order[j].Begin {
			return order[i].Begin < order[j].Begin
		}
		return order[i].End < order[j].End
	})
	var pos int64
	for _, t := range order {
		switch {
		case t.Begin < pos:
			return nil, fmt.Errorf("tensor %q at [%d, %d) overlaps the previous tensor ending at %d", t.Name, t.Begin, t.End, pos)
		case t.Begin > pos:
			return nil, fmt.Errorf("tensor %q at [%d, %d) leaves a hole after offset %d", t.Name, t.Begin, t.End, pos)
		}
		pos = t.End
	}
	if pos != int64(len(s.data)) {
		return nil, fmt.Errorf("tensors cover %d bytes but the data section holds %d", pos, len(s.data))
	}
	return s, nil
}

func checkEntry(name string, e headerEntry, dataLen int64) (*TensorInfo, error) {
	if e.Dtype == "" {
		return nil, errors.New("missing dtype")
	}
	if !e.Dtype.Known() {
		return nil, fmt.Errorf("unknown dtype %q", string(e.Dtype))
	}
	if e.Shape == nil {
		return nil, errors.New("missing shape")
	}
	if len(e.DataOffsets) != 2 {
		return nil, fmt.Errorf("data_offsets must hold 2 values, got %d", len(e.DataOffsets))
	}
	begin, end := e.DataOffsets[0], e.DataOffsets[1]
	if begin < 0 || end < begin {
		return nil, fmt.Errorf("invalid data_offsets [%d, %d]", begin, end)
	}
	if end > dataLen {
		return nil, fmt.Errorf("data_offsets [%d, %d] past the end of the %d-byte data section", begin, end, dataLen)
	}
	n, err := numel(e.Shape)
	if err != nil {
		return nil, err
	}
	size := int64(e.Dtype.Size())
	if n > (end-begin)/size+1 || n*size != end-begin {
		return nil, fmt.Errorf("shape %v of %s needs %d bytes but data_offsets [%d, %d] hold %d", e.Shape, e.Dtype, mulSat(n, size), begin, end, end-begin)
	}
	return &TensorInfo{Name: name, Dtype: e.Dtype, Shape: e.Shape, Begin: begin, End: end}, nil
}

// mulSat multiplies non-negative values, saturating instead of overflowing.
func mulSat(a, b int64) int64 {
	if b != 0 && a > (1<<63-1)/b {
		return 1<<63 - 1
	}
	return a * b
}

// Path returns the file's path ("<memory>" for ParseSafetensors).
func (s *Safetensors) Path() string { return s.path }

// Names returns the tensor names, sorted.
func (s *Safetensors) Names() []string { return append([]string(nil), s.names...) }

// Metadata returns the header's __metadata__ map (nil when absent).
func (s *Safetensors) Metadata() map[string]string { return s.metadata }

// Info returns a tensor's header entry.
func (s *Safetensors) Info(name string) (TensorInfo, bool) {
	t, ok := s.tensors[name]
	if !ok {
		return TensorInfo{}, false
	}
	c := *t
	c.Shape = slices.Clone(t.Shape)
	return c, true
}

// Raw returns a tensor's info and its little-endian bytes. The bytes alias the
// read-only mapping: do not modify them, and do not use them after Close.
func (s *Safetensors) Raw(name string) (TensorInfo, []byte, error) {
	t, ok := s.tensors[name]
	if !ok {
		return TensorInfo{}, nil, fmt.Errorf("checkpoint: %s: no tensor %q", s.path, name)
	}
	if s.data == nil {
		return TensorInfo{}, nil, fmt.Errorf("checkpoint: %s: tensor %q: file is closed", s.path, name)
	}
	info, _ := s.Info(name)
	return info, s.data[t.Begin:t.End:t.End], nil
}

// Float32 returns a tensor converted to float32 and its shape. F32 tensors
// that are 4-byte aligned in the mapping are returned without a copy: the
// slice is then read-only (writing to it faults) and valid until Close. F16,
// BF16 and F64 tensors are converted into a new slice.
func (s *Safetensors) Float32(name string) ([]float32, []int, error) {
	info, b, err := s.Raw(name)
	if err != nil {
		return nil, nil, err
	}
	v, err := toFloat32(info.Dtype, b, true)
	if err != nil {
		return nil, nil, fmt.Errorf("checkpoint: %s: tensor %q: %w", s.path, name, err)
	}
	return v, info.Shape, nil
}

// Int8 returns an I8 tensor's values without a copy, and its shape. The slice
// is read-only and valid until Close.
func (s *Safetensors) Int8(name string) ([]int8, []int, error) {
	info, b, err := s.Raw(name)
	if err != nil {
		return nil, nil, err
	}
	if info.Dtype != I8 {
		return nil, nil, fmt.Errorf("checkpoint: %s: tensor %q: dtype is %s, not I8", s.path, name, info.Dtype)
	}
	if len(b) == 0 {
		return []int8{}, info.Shape, nil
	}
	return unsafe.Slice((*int8)(unsafe.Pointer(&b[0])), len(b)), info.Shape, nil
}

// DropResident releases the file's pages from the process's resident set
// (madvise MADV_DONTNEED on the mapping): they stay in the page cache, and
// slices returned earlier stay valid, their pages read in again from the
// file on their next use. A caller that has copied what it needs (packed
// weights) calls it so that the copies are not held twice. A file read
// into memory (no mmap) or held in memory (ParseSafetensors) is left as
// it is.
func (s *Safetensors) DropResident() error {
	if s.data == nil || s.path == "<memory>" {
		return nil
	}
	if err := dropResident(s.buf, s.buf); err != nil {
		return fmt.Errorf("checkpoint: %s: drop resident pages: %w", s.path, err)
	}
	return nil
}

// WriteTo writes the whole file's bytes to w (a copy of the file it was
// opened from, or the buffer it was parsed from), in chunks; where the
// file is mapped, each chunk's pages leave the resident set once written
// (DropResident), so that a copy does not make the whole file resident.
func (s *Safetensors) WriteTo(w io.Writer) (int64, error) {
	if s.buf == nil {
		return 0, fmt.Errorf("checkpoint: %s: file is closed", s.path)
	}
	const chunk = 8 << 20
	var total int64
	for off := 0; off < len(s.buf); off += chunk {
		b := s.buf[off:min(off+chunk, len(s.buf))]
		n, err := w.Write(b)
		total += int64(n)
		if err != nil {
			return total, fmt.Errorf("checkpoint: %s: %w", s.path, err)
		}
		if s.path != "<memory>" {
			_ = dropResident(s.buf, b) // advice only
		}
	}
	return total, nil
}

// Close unmaps the file. Slices returned earlier must not be used afterwards.
func (s *Safetensors) Close() error {
	if s.release == nil {
		return nil
	}
	err := s.release()
	s.release = nil
	s.data, s.buf = nil, nil
	if err != nil {
		return fmt.Errorf("checkpoint: %s: %w", s.path, err)
	}
	return nil
}
