package checkpoint

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// The file names Open looks for, in order of preference.
const (
	SafetensorsFile      = "model.safetensors"
	SafetensorsIndexFile = "model.safetensors.index.json"
	PytorchFile          = "pytorch_model.bin"
	ConfigFile           = "config.json"
)

// Format says which kind of weight file a Checkpoint reads.
type Format string

// The formats Open understands.
const (
	FormatSafetensors        Format = "safetensors"
	FormatShardedSafetensors Format = "sharded-safetensors"
	FormatPytorch            Format = "pytorch"
)

// source is one weight file.
type source interface {
	Path() string
	Names() []string
	Info(name string) (TensorInfo, bool)
	Raw(name string) (TensorInfo, []byte, error)
	Float32(name string) ([]float32, []int, error)
	Close() error
}

var (
	_ source = (*Safetensors)(nil)
	_ source = (*TorchFile)(nil)
)

// Checkpoint is the weights of one model folder, whatever their format.
type Checkpoint struct {
	// Dir is the model folder.
	Dir string
	// Format is the kind of file the weights come from.
	Format Format
	// Metadata is the safetensors __metadata__ (or the index's metadata,
	// stringified), nil for pytorch_model.bin.
	Metadata map[string]string

	files  []source
	byName map[string]source
	names  []string
}

// Open reads the weights of a model folder, preferring model.safetensors,
// then sharded safetensors (model.safetensors.index.json), then
// pytorch_model.bin. It does not read config.json; see LoadConfig.
func Open(dir string) (*Checkpoint, error) {
	c := &Checkpoint{Dir: dir, byName: map[string]source{}}
	switch {
	case exists(filepath.Join(dir, SafetensorsFile)):
		s, err := OpenSafetensors(filepath.Join(dir, SafetensorsFile))
		if err != nil {
			return nil, err
		}
		c.Format, c.Metadata = FormatSafetensors, s.Metadata()
		c.add(s)
	case exists(filepath.Join(dir, SafetensorsIndexFile)):
		c.Format = FormatShardedSafetensors
		if err := c.openShards(filepath.Join(dir, SafetensorsIndexFile)); err != nil {
			c.Close()
			return nil, err
		}
	case exists(filepath.Join(dir, PytorchFile)):
		t, err := OpenTorch(filepath.Join(dir, PytorchFile))
		if err != nil {
			return nil, err
		}
		c.Format = FormatPytorch
		c.add(t)
	default:
		return nil, fmt.Errorf("checkpoint: %s: no %s, %s or %s (%w)", dir, SafetensorsFile, SafetensorsIndexFile, PytorchFile, fs.ErrNotExist)
	}
	return c, nil
}

// OpenFile reads one weight file: safetensors, a safetensors index, or a
// torch zip checkpoint, chosen by content.
func OpenFile(path string) (*Checkpoint, error) {
	c := &Checkpoint{Dir: filepath.Dir(path), byName: map[string]source{}}
	if filepath.Ext(path) == ".json" {
		c.Format = FormatShardedSafetensors
		if err := c.openShards(path); err != nil {
			c.Close()
			return nil, err
		}
		return c, nil
	}
	if isZip(path) {
		t, err := OpenTorch(path)
		if err != nil {
			return nil, err
		}
		c.Format = FormatPytorch
		c.add(t)
		return c, nil
	}
	s, err := OpenSafetensors(path)
	if err != nil {
		return nil, err
	}
	c.Format, c.Metadata = FormatSafetensors, s.Metadata()
	c.add(s)
	return c, nil
}

func isZip(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	var b [4]byte
	n, _ := f.Read(b[:])
	return n == 4 && string(b[:]) == "PK\x03\x04"
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func (c *Checkpoint) add(s source) {
	c.files = append(c.files, s)
	for _, n := range s.Names() {
		if _, dup := c.byName[n]; !dup {
			c.names = append(c.names, n)
		}
		c.byName[n] = s
	}
	sort.Strings(c.names)
}

// shardIndex is model.safetensors.index.json.
type shardIndex struct {
	Metadata  map[string]any    `json:"metadata"`
	WeightMap map[string]string `json:"weight_map"`
}

// ReadShardIndex parses a model.safetensors.index.json and returns its
// weight map (tensor name to shard file name).
func ReadShardIndex(path string) (map[string]string, error) {
	idx, err := readShardIndex(path)
	if err != nil {
		return nil, err
	}
	return idx.WeightMap, nil
}

func readShardIndex(path string) (*shardIndex, error) {
	data, err := ReadFileLimited(path, MaxIndexSize, "safetensors index")
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	return parseShardIndex(path, data)
}

// parseShardIndex parses the index at path (named in errors) from data.
func parseShardIndex(path string, data []byte) (*shardIndex, error) {
	var idx shardIndex
	if err := json.Unmarshal(data, &idx); err != nil {
		return nil, fmt.Errorf("checkpoint: %s: %w", path, err)
	}
	if len(idx.WeightMap) == 0 {
		return nil, fmt.Errorf("checkpoint: %s: empty weight_map", path)
	}
	for name, file := range idx.WeightMap {
		if !localName(file) || strings.ContainsAny(file, `/\`) {
			return nil, fmt.Errorf("checkpoint: %s: tensor %q: shard %q must be a file name in the same folder: %w", path, name, file, ErrUnsafePath)
		}
	}
	return &idx, nil
}

func (c *Checkpoint) openShards(indexPath string) error {
	idx, err := readShardIndex(indexPath)
	if err != nil {
		return err
	}
	if len(idx.Metadata) > 0 {
		c.Metadata = map[string]string{}
		for k, v := range idx.Metadata {
			c.Metadata[k] = fmt.Sprint(v)
		}
	}
	shards := map[string]bool{}
	for _, f := range idx.WeightMap {
		shards[f] = true
	}
	files := make([]string, 0, len(shards))
	for f := range shards {
		files = append(files, f)
	}
	sort.Strings(files)
	dir := filepath.Dir(indexPath)
	for _, f := range files {
		s, err := OpenSafetensors(filepath.Join(dir, f))
		if err != nil {
			return fmt.Errorf("%w (shard listed in %s)", err, indexPath)
		}
		c.files = append(c.files, s)
	}
	// Only the tensors the index assigns to a shard, from that shard.
	for name, f := range idx.WeightMap {
		var src source
		for _, s := range c.files {
			if filepath.Base(s.Path()) == f {
				src = s
			}
		}
		if _, ok := src.Info(name); !ok {
			return fmt.Errorf("checkpoint: %s: tensor %q listed in %s is missing", src.Path(), name, indexPath)
		}
		c.byName[name] = src
		c.names = append(c.names, name)
	}
	sort.Strings(c.names)
	return nil
}

// Names returns every tensor name, sorted.
func (c *Checkpoint) Names() []string { return append([]string(nil), c.names...) }

// Has reports whether the checkpoint holds a tensor.
func (c *Checkpoint) Has(name string) bool { _, ok := c.byName[name]; return ok }

// ErrNoTensor is returned (wrapped) for a name the checkpoint does not hold.
var ErrNoTensor = errors.New("no such tensor")

func (c *Checkpoint) lookup(name string) (source, error) {
	s, ok := c.byName[name]
	if !ok {
		return nil, fmt.Errorf("checkpoint: %s: tensor %q: %w", c.Dir, name, ErrNoTensor)
	}
	return s, nil
}

// Info returns a tensor's dtype and shape.
func (c *Checkpoint) Info(name string) (TensorInfo, error) {
	s, err := c.lookup(name)
	if err != nil {
		return TensorInfo{}, err
	}
	info, _ := s.Info(name)
	return info, nil
}

// Shape returns a tensor's shape.
func (c *Checkpoint) Shape(name string) ([]int, error) {
	info, err := c.Info(name)
	if err != nil {
		return nil, err
	}
	return info.Shape, nil
}

// Float32 returns a tensor as float32 with its shape. For safetensors F32
// data the slice may alias the read-only mapping (see Safetensors.Float32):
// treat it as read-only and do not use it after Close; copy it to modify.
func (c *Checkpoint) Float32(name string) ([]float32, []int, error) {
	s, err := c.lookup(name)
	if err != nil {
		return nil, nil, err
	}
	return s.Float32(name)
}

// Raw returns a tensor's info and contiguous little-endian bytes (for I8 and
// other non-float data). For safetensors the bytes alias the read-only
// mapping.
func (c *Checkpoint) Raw(name string) (TensorInfo, []byte, error) {
	s, err := c.lookup(name)
	if err != nil {
		return TensorInfo{}, nil, err
	}
	return s.Raw(name)
}

// Files returns the paths of the weight files read.
func (c *Checkpoint) Files() []string {
	out := make([]string, len(c.files))
	for i, s := range c.files {
		out[i] = s.Path()
	}
	return out
}

// DropResident is Safetensors.DropResident for every safetensors file of
// the checkpoint (a torch zip is left as it is).
func (c *Checkpoint) DropResident() error {
	for _, f := range c.files {
		if s, ok := f.(*Safetensors); ok {
			if err := s.DropResident(); err != nil {
				return err
			}
		}
	}
	return nil
}

// Close releases every file. Slices returned earlier must not be used
// afterwards.
func (c *Checkpoint) Close() error {
	var errs []error
	for _, s := range c.files {
		if err := s.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	c.files = nil
	return errors.Join(errs...)
}
