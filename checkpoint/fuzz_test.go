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

// configSeeds are the config.json files of the repository's testdata and,
// where present, of the project's shared folder.
func configSeeds() [][]byte {
	var out [][]byte
	paths := []string{filepath.Join("testdata", "distilbert-tiny", ConfigFile)}
	shared := filepath.Join("..", "..", "shared")
	if d := os.Getenv("INT8BERT_SHARED"); d != "" {
		shared = d
	}
	for _, pat := range []string{"golden/models/*/config.json", "golden/heads/*/config.json", "models/*/config.json"} {
		m, _ := filepath.Glob(filepath.Join(shared, pat))
		paths = append(paths, m...)
	}
	for _, p := range paths {
		if b, err := os.ReadFile(p); err == nil {
			out = append(out, b)
		}
	}
	return out
}

// FuzzConfig feeds arbitrary bytes to ParseConfig and Validate, the reader
// of config.json: an error or a config, never a panic; a config that
// validates has positive, consistent sizes.
func FuzzConfig(f *testing.F) {
	for _, b := range configSeeds() {
		f.Add(b)
	}
	f.Add([]byte(`{"model_type":"distilbert","dim":64,"n_layers":2,"n_heads":4,"hidden_dim":128,"activation":"gelu","vocab_size":10,"max_position_embeddings":8}`))
	f.Add([]byte(`{"model_type":"bert","hidden_size":64,"num_attention_heads":0,"id2label":{"0":"a","1":"b"},"pad_token_id":-1}`))
	f.Add([]byte(`{"hidden_size":"64"}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"layer_norm_eps":-1e309,"num_labels":-3,"label2id":{"a":1e30}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseConfig(data)
		if err != nil {
			return
		}
		_ = c.IsDistilBERT()
		hs := c.HeadSize()
		eps := c.LayerNormEpsilon()
		if c.Validate() != nil {
			return
		}
		if c.HiddenSize <= 0 || c.NumHiddenLayers <= 0 || c.NumAttentionHeads <= 0 || c.IntermediateSize <= 0 ||
			c.VocabSize <= 0 || c.MaxPositionEmbeddings <= 0 || c.TypeVocabSize < 0 || c.NumLabels < 0 {
			t.Fatalf("valid config with a bad size: %+v", c)
		}
		if hs*c.NumAttentionHeads != c.HiddenSize || !(eps > 0) {
			t.Fatalf("valid config: head size %d x %d heads != hidden %d, or epsilon %v", hs, c.NumAttentionHeads, c.HiddenSize, eps)
		}
		if c.PadTokenID != nil && (*c.PadTokenID < 0 || *c.PadTokenID >= c.VocabSize) {
			t.Fatalf("valid config: pad_token_id %d outside the vocabulary of %d", *c.PadTokenID, c.VocabSize)
		}
	})
}

// FuzzShardIndex: any index either fails to parse or names only shards
// that are plain file names of the index's folder.
func FuzzShardIndex(f *testing.F) {
	f.Add([]byte(`{"metadata":{"total_size":8},"weight_map":{"a":"model-00001-of-00002.safetensors","b":"model-00002-of-00002.safetensors"}}`))
	f.Add([]byte(`{"weight_map":{"a":"../x.safetensors"}}`))
	f.Add([]byte(`{"weight_map":{"a":".."}}`))
	f.Add([]byte(`{"weight_map":{}}`))
	f.Add([]byte(`{"weight_map":{"a":"C:\\x"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		idx, err := parseShardIndex("index.json", data)
		if err != nil {
			return
		}
		for name, file := range idx.WeightMap {
			if !localName(file) || file != filepath.Base(file) || filepath.IsAbs(file) || file == ".." || file == "." {
				t.Fatalf("tensor %q: shard %q accepted", name, file)
			}
		}
	})
}
