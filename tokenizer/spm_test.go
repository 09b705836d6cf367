package tokenizer

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
)

// A protobuf writer for the tests' SentencePiece models.

func pbVarint(n uint64) []byte { return binary.AppendUvarint(nil, n) }

func pbField(num int, wire int, payload []byte) []byte {
	out := pbVarint(uint64(num<<3 | wire))
	if wire == 2 {
		out = append(out, pbVarint(uint64(len(payload)))...)
	}
	return append(out, payload...)
}

func pbInt(num int, v int64) []byte { return pbField(num, 0, pbVarint(uint64(v))) }

type testPiece struct {
	piece string
	score float32
	typ   int
}

// spmProto writes a Unigram ModelProto of pieces, with trainer_spec's
// unk_id and normalizer_spec's charsmap.
func spmProto(pieces []testPiece, unkID int64, charsmap []byte) []byte {
	var out []byte
	for _, p := range pieces {
		body := pbField(1, 2, []byte(p.piece))
		body = append(body, pbField(2, 5, binary.LittleEndian.AppendUint32(nil, math.Float32bits(p.score)))...)
		if p.typ != 0 {
			body = append(body, pbInt(3, int64(p.typ))...)
		}
		out = append(out, pbField(1, 2, body)...)
	}
	out = append(out, pbField(2, 2, append(pbInt(3, 1), pbInt(40, unkID)...))...)
	norm := pbField(1, 2, []byte("nmt_nfkc"))
	if charsmap != nil {
		norm = append(norm, pbField(2, 2, charsmap)...)
	}
	return append(out, pbField(3, 2, norm)...)
}

// canonJSON is v through JSON, with added_tokens sorted by id (the order
// tokenizer.json writes them), for comparing layouts.
func canonJSON(tb testing.TB, v any) map[string]any {
	tb.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		tb.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		tb.Fatal(err)
	}
	if a, ok := m["added_tokens"].([]any); ok {
		sort.Slice(a, func(i, j int) bool {
			return a[i].(map[string]any)["id"].(float64) < a[j].(map[string]any)["id"].(float64)
		})
	}
	for _, k := range []string{"version", "truncation", "padding"} {
		delete(m, k)
	}
	return m
}

// sameLayout fails unless the tokenizer.json converted from model equals want.
func sameLayout(t *testing.T, model []byte, conv string, cfg []byte, want map[string]any) {
	t.Helper()
	m, err := parseSPM(model)
	if err != nil {
		t.Fatal(err)
	}
	j, err := spmTokenizerJSON(m, conv, cfg)
	if err != nil {
		t.Fatal(err)
	}
	have, w := canonJSON(t, j), canonJSON(t, want)
	for _, k := range []string{"added_tokens", "normalizer", "pre_tokenizer", "post_processor", "decoder", "model"} {
		if !reflect.DeepEqual(have[k], w[k]) {
			hs, _ := json.Marshal(have[k])
			ws, _ := json.Marshal(w[k])
			t.Errorf("%s differs:\n have %.600s\n want %.600s", k, hs, ws)
		}
	}
	if len(have) != len(w) {
		t.Errorf("keys: have %d, want %d", len(have), len(w))
	}
}

// spmFolder copies files into a new folder: name to contents.
func spmFolder(t *testing.T, files map[string][]byte) string {
	t.Helper()
	dir := t.TempDir()
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

var debertaConfigs = map[string]string{
	"base":  `{"do_lower_case": false, "vocab_type": "spm"}`,
	"lower": `{"do_lower_case": true}`,
	"punct": `{"split_by_punct": true, "tokenizer_class": "DebertaV2Tokenizer"}`,
}

// TestSPMDebertaLayout: testdata/deberta-v3-spm/spm.model (written by
// _gen/gen_spm.py from that folder's tokenizer.json) converts to exactly
// that tokenizer.json, and to its do_lower_case and split_by_punct forms.
func TestSPMDebertaLayout(t *testing.T) {
	model, err := os.ReadFile(filepath.Join("testdata", "deberta-v3-spm", "spm.model"))
	if err != nil {
		t.Fatal(err)
	}
	for name, cfg := range debertaConfigs {
		t.Run(name, func(t *testing.T) {
			sameLayout(t, model, SPMDebertaV2, []byte(cfg), debertaVariant(t, name))
		})
	}
}

// TestSPMDebertaGolden: a folder with only spm.model and
// tokenizer_config.json loads, and its tokenizer gives the Rust
// tokenizers' ids, type ids, tokens, offsets and special-tokens mask of
// the equivalent tokenizer.json (TestDeBERTaGolden's goldens), and its
// decodes.
func TestSPMDebertaGolden(t *testing.T) {
	model, err := os.ReadFile(filepath.Join("testdata", "deberta-v3-spm", "spm.model"))
	if err != nil {
		t.Fatal(err)
	}
	golden := debertaGolden(t)
	for _, name := range []string{"base", "lower", "punct"} {
		t.Run(name, func(t *testing.T) {
			dir := spmFolder(t, map[string][]byte{"spm.model": model, "tokenizer_config.json": []byte(debertaConfigs[name])})
			if f, ok := Find(dir); !ok || filepath.Base(f) != "spm.model" {
				t.Fatalf("Find: %q %v", f, ok)
			}
			tk, err := Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			if tk.Model() != "Unigram" || tk.VocabSize() != 2903 {
				t.Fatalf("model %q, vocabulary %d", tk.Model(), tk.VocabSize())
			}
			cases := golden[name]
			if len(cases) < 250 {
				t.Fatalf("%d golden cases", len(cases))
			}
			checkBPECases(t, tk, cases)
			if name != "base" {
				return
			}
			n := 0
			for i, c := range cases {
				if c.DecodeSkip == nil {
					continue
				}
				have, err := tk.Decode(c.IDs, true)
				if err != nil || have != *c.DecodeSkip {
					t.Errorf("case %d: decode %q, %v; want %q", i, have, err, *c.DecodeSkip)
				}
				n++
			}
			if n < 200 {
				t.Fatalf("only %d decodes checked", n)
			}
		})
	}
}

// TestSPMXLMRShared: the shared XLM-R-layout tokenizer's
// sentencepiece.bpe.model (trained by SentencePiece itself), given with
// its tokenizer_config.json alone, converts to exactly its tokenizer.json
// and gives the golden ids.
func TestSPMXLMRShared(t *testing.T) {
	dir := os.Getenv("INT8BERT_SHARED")
	if dir == "" {
		dir = filepath.Join("..", "..", "shared")
	}
	src := filepath.Join(dir, "golden", "tokenizers", "xlmr-spm-unigram")
	model, err := os.ReadFile(filepath.Join(src, "sentencepiece.bpe.model"))
	if err != nil {
		t.Skipf("the shared XLM-R SentencePiece model is absent (the project's shared folder; set INT8BERT_SHARED): %v", err)
	}
	cfg, err := os.ReadFile(filepath.Join(src, "tokenizer_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]any
	data, err := os.ReadFile(filepath.Join(src, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &want); err != nil {
		t.Fatal(err)
	}
	sameLayout(t, model, SPMXLMRoberta, cfg, want)
	// Its tokenizer_config.json holds XLMRobertaTokenizerFast's defaults
	// (mask_token lstrip, normalized), so without it the layout is the same.
	sameLayout(t, model, SPMXLMRoberta, nil, want)
	// Without tokenizer_class, config.json's model_type picks the converter.
	noClass := strings.Replace(string(cfg), `"tokenizer_class"`, `"tokenizer_class_"`, 1)
	folder := spmFolder(t, map[string][]byte{"sentencepiece.bpe.model": model, "tokenizer_config.json": []byte(noClass),
		"config.json": []byte(`{"model_type": "xlm-roberta"}`)})
	tk, err := Load(folder)
	if err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "xlmr-spm-unigram", tk)
}

// TestSPMCamembertLayout follows CamembertConverter on a small model
// laid out as CamemBERT's sentencepiece.bpe.model (<unk>, <s>, </s>
// first): five fairseq tokens first, pieces from index 1 shifted by 4,
// <mask> last, <s> and </s> at their shifted piece ids, the NOTUSED
// tokens special.
func TestSPMCamembertLayout(t *testing.T) {
	pieces := []testPiece{{"<unk>", 0, spmUnknown}, {"<s>", 0, spmControl}, {"</s>", 0, spmControl},
		{"▁", -2, 0}, {"▁le", -3, 0}, {"▁chat", -4, 0}, {"l", -5, 0}, {"e", -5, 0}, {"c", -5, 0}, {"h", -5, 0}, {"a", -5, 0}, {"t", -5, 0}}
	model := spmProto(pieces, 0, nil)
	dir := spmFolder(t, map[string][]byte{"sentencepiece.bpe.model": model, "config.json": []byte(`{"model_type": "camembert"}`)})
	tk, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	wantVocab := []string{"<s>NOTUSED", "<pad>", "</s>NOTUSED", "<unk>", "<unk>NOTUSED", "<s>", "</s>", "▁", "▁le", "▁chat", "l", "e", "c", "h", "a", "t", "<mask>"}
	if tk.VocabSize() != len(wantVocab) {
		t.Fatalf("vocabulary %d, want %d", tk.VocabSize(), len(wantVocab))
	}
	for i, s := range wantVocab {
		if tk.Token(int32(i)) != s {
			t.Errorf("id %d: %q, want %q", i, tk.Token(int32(i)), s)
		}
	}
	enc, err := tk.EncodePair("le chat", "chat <mask>")
	if err != nil {
		t.Fatal(err)
	}
	wantIDs := []int32{5, 8, 9, 6, 6, 9, 16, 6}
	if !slices.Equal(enc.IDs, wantIDs) {
		t.Errorf("ids %v (%q), want %v", enc.IDs, enc.Tokens, wantIDs)
	}
	for _, s := range []string{"<s>NOTUSED", "</s>NOTUSED", "<mask>", "<pad>"} {
		if _, ok := tk.special[s]; !ok {
			t.Errorf("%q is not a special token", s)
		}
	}
	for _, a := range tk.added {
		if mask := a.Content == "<mask>"; a.LStrip != mask || a.Normalized != mask || !a.Special {
			t.Errorf("added token %+v: only <mask> is lstrip and normalized (CamembertTokenizerFast)", a)
		}
	}
	// Unknown text is <unk> (3), not the piece <unk>NOTUSED.
	enc, err = tk.Encode("x")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(enc.IDs, []int32{5, 7, 3, 6}) {
		t.Errorf("unknown: ids %v (%q)", enc.IDs, enc.Tokens)
	}
}

// TestSPMBPE follows SpmConverter's BPE branch on a small BPE model:
// the merges SentencePieceExtractor derives (every split into two
// pieces, by the merged piece's id, then the halves' ids), XLM-R's
// vocabulary, the unknown piece.
func TestSPMBPE(t *testing.T) {
	pieces := []testPiece{{"<unk>", 0, spmUnknown}, {"<s>", 0, spmControl}, {"</s>", 0, spmControl},
		{"▁", 0, 0}, {"a", 0, 0}, {"b", 0, 0}, {"c", 0, 0}, {"▁a", 0, 0}, {"ab", 0, 0}, {"▁ab", 0, 0}, {"bc", 0, 0}, {"abc", 0, 0}}
	model := spmProto(pieces, 0, nil)
	model = append(model, pbField(2, 2, pbInt(3, 2))...) // a later trainer_spec merges into the first
	m, err := parseSPM(model)
	if err != nil {
		t.Fatal(err)
	}
	if m.modelType != 2 || m.unkPiece != "<unk>" {
		t.Fatalf("model_type %d, unk_piece %q", m.modelType, m.unkPiece)
	}
	want := [][2]string{{"▁", "a"}, {"a", "b"}, {"▁", "ab"}, {"▁a", "b"}, {"b", "c"}, {"a", "bc"}, {"ab", "c"}}
	if have := spmMerges(m.pieces); !reflect.DeepEqual(have, want) {
		t.Fatalf("merges %q, want %q", have, want)
	}
	tk, err := FromSentencePiece(model, SPMXLMRoberta, nil)
	if err != nil {
		t.Fatal(err)
	}
	if tk.Model() != "BPE" || tk.VocabSize() != 14 || tk.Token(10) != "▁ab" || tk.Token(13) != "<mask>" {
		t.Fatalf("model %q, vocabulary %d, 10 %q, 13 %q", tk.Model(), tk.VocabSize(), tk.Token(10), tk.Token(13))
	}
	for text, ids := range map[string][]int32{"ab abc": {0, 10, 10, 7, 2}, "x": {0, 4, 3, 2}} {
		enc, err := tk.Encode(text)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(enc.IDs, ids) {
			t.Errorf("%q: ids %v (%q), want %v", text, enc.IDs, enc.Tokens, ids)
		}
	}
}

// TestSPMConverterChoice: the converter comes from tokenizer_class, then
// model_type, then the spm.model name; otherwise a clear error.
func TestSPMConverterChoice(t *testing.T) {
	for _, c := range []struct {
		name, cfg, config, want, err string
	}{
		{"spm.model", "", "", SPMDebertaV2, ""},
		{"sentencepiece.bpe.model", `{"tokenizer_class": "XLMRobertaTokenizerFast"}`, "", SPMXLMRoberta, ""},
		{"sentencepiece.bpe.model", `{"tokenizer_class": "CamembertTokenizer"}`, `{"model_type": "xlm-roberta"}`, SPMCamembert, ""},
		{"sentencepiece.bpe.model", "", `{"model_type": "camembert"}`, SPMCamembert, ""},
		{"sentencepiece.bpe.model", "", "", "", "cannot tell"},
		{"spm.model", `{"tokenizer_class": "AlbertTokenizer"}`, "", "", "AlbertTokenizer"},
		{"spm.model", "", `{"model_type": "t5"}`, "", `"t5"`},
	} {
		files := map[string][]byte{}
		if c.config != "" {
			files["config.json"] = []byte(c.config)
		}
		dir := spmFolder(t, files)
		have, err := spmConverterOf(dir, filepath.Join(dir, c.name), []byte(c.cfg))
		if c.err != "" {
			if err == nil || !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s %s %s: err %v, want ErrFormat naming %q", c.name, c.cfg, c.config, err, c.err)
			}
			continue
		}
		if err != nil || have != c.want {
			t.Errorf("%s %s %s: %q %v, want %q", c.name, c.cfg, c.config, have, err, c.want)
		}
	}
}

// TestSPMMalformed: bad models are errors wrapping ErrFormat (and
// ErrTooLarge where a size is over its limit), never panics.
func TestSPMMalformed(t *testing.T) {
	good := spmProto([]testPiece{{"<unk>", 0, spmUnknown}, {"▁a", -1, 0}}, 0, nil)
	if _, err := FromSentencePiece(good, SPMDebertaV2, nil); err != nil {
		t.Fatal(err)
	}
	nan := pbField(1, 2, append(pbField(1, 2, []byte("a")), pbField(2, 5, binary.LittleEndian.AppendUint32(nil, math.Float32bits(float32(math.NaN()))))...))
	for _, c := range []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "no pieces"},
		{"truncated", good[:len(good)-3], "past the end"},
		{"bad varint", []byte{0x80}, "truncated"},
		{"group wire type", []byte{0x0b}, "wire type 3"},
		{"field zero", []byte{0x00}, "field number 0"},
		{"pieces as varint", pbInt(1, 5), "wire type 0"},
		{"empty piece", pbField(1, 2, pbField(2, 5, []byte{0, 0, 0, 0})), "piece: missing"},
		{"bad utf-8", pbField(1, 2, pbField(1, 2, []byte{0xff})), "UTF-8"},
		{"bad type", pbField(1, 2, append(pbField(1, 2, []byte("a")), pbInt(3, 9)...)), "type 9"},
		{"nan score", nan, "not finite"},
		{"word model", append(slices.Clone(good), pbField(2, 2, pbInt(3, 3))...), "model_type 3"},
		{"bpe without unk", append(slices.Clone(good), pbField(2, 2, append(pbInt(3, 2), pbField(45, 2, []byte("<zz>"))...))...), "unk_piece"},
		{"unk out of range", append(slices.Clone(good), pbField(2, 2, pbInt(40, 7))...), "unk_id 7"},
		{"negative unk", append(slices.Clone(good), pbField(2, 2, pbInt(40, -1))...), "unk_id -1"},
		{"unk_id overflow", append(slices.Clone(good), pbField(2, 2, pbInt(40, 1<<40))...), "int32"},
		{"bad charsmap", spmProto([]testPiece{{"<unk>", 0, spmUnknown}}, 0, []byte{1, 2, 3}), "precompiled_charsmap"},
		{"huge piece", pbField(1, 2, pbField(1, 2, make([]byte, maxSPMPieceSize+1))), "over the"},
	} {
		_, err := FromSentencePiece(c.data, SPMDebertaV2, nil)
		if err == nil || !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want ErrFormat naming %q", c.name, err, c.want)
		}
		if c.name == "huge piece" && !errors.Is(err, ErrTooLarge) {
			t.Errorf("%s: err %v does not wrap ErrTooLarge", c.name, err)
		}
	}
	if _, err := FromSentencePiece(good, SPMXLMRoberta, nil); err == nil || !errors.Is(err, ErrFormat) {
		t.Errorf("XLM-R layout with 2 pieces: err %v", err)
	}
	if _, err := FromSentencePiece(good, "albert", nil); err == nil || !errors.Is(err, ErrFormat) {
		t.Errorf("unknown converter: err %v", err)
	}
	if _, err := FromSentencePiece(good, SPMDebertaV2, []byte(`{"do_lower_case": "yes"}`)); err == nil || !errors.Is(err, ErrFormat) {
		t.Errorf("do_lower_case a string: err %v", err)
	}
	if _, err := FromSentencePiece(good, SPMDebertaV2, []byte(`{"mask_token": 5}`)); err == nil || !errors.Is(err, ErrFormat) {
		t.Errorf("mask_token a number: err %v", err)
	}
}

// FuzzSentencePiece: no input panics the reader or the conversion, and
// what loads encodes.
func FuzzSentencePiece(f *testing.F) {
	f.Add(spmProto([]testPiece{{"<unk>", 0, spmUnknown}, {"<s>", 0, spmControl}, {"</s>", 0, spmControl}, {"▁a", -1, 0}, {"b", -2, 0}}, 0, nil))
	f.Add([]byte{0x0a, 0x05, 0x0a, 0x01, 'a', 0x10, 0x01})
	f.Add(append(spmProto([]testPiece{{"<unk>", 0, spmUnknown}, {"<s>", 0, spmControl}, {"</s>", 0, spmControl},
		{"▁", 0, 0}, {"a", 0, 0}, {"▁a", 0, 0}, {"aa", 0, 0}}, 0, nil), pbField(2, 2, pbInt(3, 2))...))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, conv := range []string{SPMDebertaV2, SPMXLMRoberta, SPMCamembert} {
			tk, err := FromSentencePiece(data, conv, nil)
			if err != nil {
				if !errors.Is(err, ErrFormat) {
					t.Fatalf("%s: error %v does not wrap ErrFormat", conv, err)
				}
				continue
			}
			if _, err := tk.EncodePair("ab  a <mask> [MASK]", "b"); err != nil {
				t.Fatalf("%s: %v", conv, err)
			}
		}
	})
}
