// Package encodertest checks a model family against the golden outputs of
// the Hugging Face reference implementation (../shared/golden/models).
package encodertest

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/int8bert/int8bert/models"
	"github.com/int8bert/int8bert/models/encoder"
	"github.com/int8bert/int8bert/selector"
	"github.com/int8bert/int8bert/tokenizer"
)

// SharedDir is the project's shared folder: $INT8BERT_SHARED when set,
// else "shared" next to the repository (the module root found from the
// working directory, so that a test of any package finds it).
var SharedDir = func() string {
	if d := os.Getenv("INT8BERT_SHARED"); d != "" {
		return d
	}
	dir, err := os.Getwd()
	if err != nil {
		return filepath.Join("..", "shared")
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return filepath.Join(d, "..", "shared")
		}
		if filepath.Dir(d) == d {
			return filepath.Join(dir, "..", "shared")
		}
	}
}()

// GoldenDir is where the shared golden models live (SharedDir/golden/models).
var GoldenDir = filepath.Join(SharedDir, "golden", "models")

type golden struct {
	ModelClass string                     `json:"model_class"`
	Inputs     map[string][][]int32       `json:"inputs"`
	Outputs    map[string]json.RawMessage `json:"outputs"`
	Params     map[string][]int           `json:"params"`
}

// RepoGoldenDir is where the golden models committed into the repository
// live (models/testdata/golden), relative to a package folder of this
// module (models/<family>).
const RepoGoldenDir = "../testdata/golden"

// Repo names the committed golden folder name (RepoGoldenDir) for the
// golden checks, which otherwise read name from GoldenDir.
func Repo(name string) string { return filepath.Join(RepoGoldenDir, name) }

// goldenPath is the folder of golden name: a path (holding a separator,
// as Repo makes) as it is, else name inside GoldenDir; shared says the
// latter, which a test skips where it is absent.
func goldenPath(name string) (dir string, shared bool) {
	if strings.ContainsRune(name, filepath.Separator) || strings.ContainsRune(name, '/') {
		return name, false
	}
	return filepath.Join(GoldenDir, name), true
}

// loadGolden reads the golden folder name (skipping the test when the
// shared folder is absent) and opens its model with fam.
func loadGolden(t *testing.T, sel *selector.Selector, name string, fam *encoder.Family) (*golden, *encoder.TaskModel, *encoder.Inputs) {
	t.Helper()
	dir, shared := goldenPath(name)
	g, err := readGolden(dir)
	if os.IsNotExist(err) && shared {
		t.Skipf("golden models not found at %s (they live in the project's shared folder): %v", dir, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	m, err := loadModel(dir, fam, sel)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return g, m, g.inputs()
}

// loadModel opens the model folder dir with fam on one thread, for token
// ids (no tokenizer needed).
func loadModel(dir string, fam *encoder.Family, sel *selector.Selector) (*encoder.TaskModel, error) {
	return encoder.LoadTask(dir, fam, encoder.Options{Selector: sel, Threads: 1})
}

func readGolden(dir string) (*golden, error) {
	raw, err := os.ReadFile(filepath.Join(dir, "golden.json"))
	if err != nil {
		return nil, err
	}
	var g golden
	if err := json.Unmarshal(raw, &g); err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	return &g, nil
}

// inputs are the golden inputs as one padded batch.
func (g *golden) inputs() *encoder.Inputs {
	ids := g.Inputs["input_ids"]
	in := &encoder.Inputs{Batch: len(ids), Seq: len(ids[0])}
	flat := func(x [][]int32) []int32 {
		var out []int32
		for _, r := range x {
			out = append(out, r...)
		}
		return out
	}
	in.IDs, in.Mask = flat(ids), flat(g.Inputs["attention_mask"])
	if tt, ok := g.Inputs["token_type_ids"]; ok {
		in.TypeIDs = flat(tt)
	}
	return in
}

// Selector returns the test binary's selector for the CPU features the
// environment leaves on (INT8BERT_CPU_DISABLE, DNNL_MAX_CPU_ISA): no cache
// file, short timings, made on first use and never closed, as
// selector.Default is. Sharing it tunes each GEMM key once per test binary
// rather than once per test: the verification of every candidate against
// the reference (docs/DESIGN.md section 4.5) is most of what a models test
// costs under the race detector. A test that checks tuning itself makes
// its own selector.
func Selector(t testing.TB) *selector.Selector {
	t.Helper()
	env := os.Getenv("INT8BERT_CPU_DISABLE") + "|" + os.Getenv("DNNL_MAX_CPU_ISA")
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if sel, ok := shared.byEnv[env]; ok {
		return sel
	}
	sel, err := selector.New(selector.Options{CachePath: "off", Reps: 1, RepTime: 100 * 1000})
	if err != nil {
		t.Fatal(err)
	}
	if shared.byEnv == nil {
		shared.byEnv = map[string]*selector.Selector{}
	}
	shared.byEnv[env] = sel
	return sel
}

// shared holds Selector's selectors.
var shared struct {
	mu    sync.Mutex
	byEnv map[string]*selector.Selector
}

// Golden loads the golden model folder name with fam and compares every
// output with the reference: the largest difference over the largest
// reference magnitude must be at most tol, compared where attention_mask
// is 1. It returns the worst relative error seen.
func Golden(t *testing.T, sel *selector.Selector, name string, fam *encoder.Family, tol float64) float64 {
	t.Helper()
	g, m, in := loadGolden(t, sel, name, fam)
	defer m.Close()
	out, err := m.Forward(in, false)
	if err != nil {
		t.Fatalf("%s: forward: %v", name, err)
	}
	worst := 0.0
	for key, rawOut := range g.Outputs {
		var got []float32
		perToken := false
		switch key {
		case "last_hidden_state":
			got, perToken = out.Last, true
		case "pooler_output":
			got = out.PoolerOutput
		case "logits":
			// Token classification's are per token: Hugging Face's at
			// padding are whatever its attention leaves there.
			got, perToken = out.Logits, PerTokenLogits(m.Task)
		case "start_logits":
			got, perToken = out.StartLogits, true
		case "end_logits":
			got, perToken = out.EndLogits, true
		default:
			t.Errorf("%s: unknown golden output %q", name, key)
			continue
		}
		want, err := flatten(rawOut)
		if err != nil {
			t.Fatalf("%s %s: %v", name, key, err)
		}
		if len(got) != len(want) {
			t.Errorf("%s %s: %d values, want %d", name, key, len(got), len(want))
			continue
		}
		per := len(want) / (in.Batch * in.Seq)
		maxRef, maxDiff := 0.0, 0.0
		for i, w := range want {
			if perToken && in.Mask[i/max(per, 1)] == 0 {
				continue
			}
			maxRef = math.Max(maxRef, math.Abs(w))
			maxDiff = math.Max(maxDiff, math.Abs(float64(got[i])-w))
		}
		rel := maxDiff / maxRef
		worst = math.Max(worst, rel)
		t.Logf("%s %s: max |diff| %.3g, relative %.3g", name, key, maxDiff, rel)
		if !(rel <= tol) {
			t.Errorf("%s %s: relative error %.3g > %.3g", name, key, rel, tol)
		}
	}
	return worst
}

// PerTokenLogits reports whether task t's logits are one row per token
// (token classification, replaced-token detection) rather than one per
// sequence: compared where attention_mask is 1.
func PerTokenLogits(t encoder.Task) bool {
	return t == encoder.TaskTokenClassification || t == encoder.TaskReplacedTokenDetection
}

// flatten reads a nested JSON array of numbers.
func flatten(raw json.RawMessage) ([]float64, error) {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, err
	}
	var out []float64
	var walk func(any) error
	walk = func(x any) error {
		switch y := x.(type) {
		case float64:
			out = append(out, y)
		case []any:
			for _, e := range y {
				if err := walk(e); err != nil {
					return err
				}
			}
		default:
			return fmt.Errorf("unexpected %T in output", x)
		}
		return nil
	}
	return out, walk(v)
}

// ModelsDir is where the shared SST-2 models live (see GoldenDir).
var ModelsDir = filepath.Join(SharedDir, "models")

// sst2Path is the folder of the trained SST-2 model name: a path (holding
// a separator, as for the models committed under assets/) as it is, else
// name inside ModelsDir; shared says the latter, which a test skips where
// it is absent.
func sst2Path(name string) (dir string, shared bool) {
	if strings.ContainsRune(name, filepath.Separator) || strings.ContainsRune(name, '/') {
		return name, false
	}
	return filepath.Join(ModelsDir, name), true
}

// sst2Golden returns the folder of the trained SST-2 model name and its
// golden.json, or skips the test, naming why, where the shared folder
// that holds it is absent.
func sst2Golden(t *testing.T, name string) (string, []byte) {
	t.Helper()
	dir, shared := sst2Path(name)
	raw, err := os.ReadFile(filepath.Join(dir, "golden.json"))
	if os.IsNotExist(err) && shared {
		t.Skipf("trained SST-2 models not found at %s (they live in the project's shared folder): %v", dir, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return dir, raw
}

// SST2Logits runs the trained SST-2 model name (a folder of ModelsDir, or
// a path) on the 64 dev sentences of its golden.json (its own token ids,
// one padded batch) and compares the logits with the reference within tol
// relative, and the predictions exactly.
func SST2Logits(t *testing.T, sel *selector.Selector, name string, fam *encoder.Family, tol float64) {
	t.Helper()
	dir, raw := sst2Golden(t, name)
	var g struct {
		InputIDs      [][]int32   `json:"input_ids"`
		AttentionMask [][]int32   `json:"attention_mask"`
		TokenTypeIDs  [][]int32   `json:"token_type_ids"`
		Logits        [][]float64 `json:"logits"`
		Predictions   []int       `json:"predictions"`
	}
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatal(err)
	}
	m, err := loadModel(dir, fam, sel)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	defer m.Close()
	in := &encoder.Inputs{Batch: len(g.InputIDs), Seq: len(g.InputIDs[0])}
	for b := range g.InputIDs {
		in.IDs = append(in.IDs, g.InputIDs[b]...)
		in.Mask = append(in.Mask, g.AttentionMask[b]...)
		if g.TokenTypeIDs != nil {
			in.TypeIDs = append(in.TypeIDs, g.TokenTypeIDs[b]...)
		}
	}
	out, err := m.Forward(in, false)
	if err != nil {
		t.Fatal(err)
	}
	labels := len(g.Logits[0])
	maxRef, maxDiff, agree := 0.0, 0.0, 0
	for b, row := range g.Logits {
		best := 0
		for j, w := range row {
			got := float64(out.Logits[b*labels+j])
			maxRef = math.Max(maxRef, math.Abs(w))
			maxDiff = math.Max(maxDiff, math.Abs(got-w))
			if out.Logits[b*labels+j] > out.Logits[b*labels+best] {
				best = j
			}
		}
		if g.Predictions == nil || best == g.Predictions[b] {
			agree++
		}
	}
	rel := maxDiff / maxRef
	t.Logf("%s: %d sentences, logits max |diff| %.3g (relative %.3g), predictions agree %d/%d", name, len(g.Logits), maxDiff, rel, agree, len(g.Logits))
	if !(rel <= tol) {
		t.Errorf("%s: logits relative error %.3g > %.3g", name, rel, tol)
	}
	if agree != len(g.Logits) {
		t.Errorf("%s: %d predictions differ from the reference", name, len(g.Logits)-agree)
	}
}

// DataDir is where the shared SST-2 data live (see GoldenDir).
var DataDir = filepath.Join(SharedDir, "data")

// ReadSST2 reads a GLUE SST-2 TSV (header, sentence<TAB>label); sentences
// are stripped as the training scripts did.
func ReadSST2(path string) (texts []string, labels []int, err error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	for i, line := range strings.Split(strings.TrimRight(string(raw), "\n"), "\n") {
		if i == 0 {
			continue
		}
		tab := strings.LastIndexByte(line, '\t')
		if tab < 0 {
			return nil, nil, fmt.Errorf("%s:%d: no tab", path, i+1)
		}
		l, err := strconv.Atoi(strings.TrimSpace(line[tab+1:]))
		if err != nil {
			return nil, nil, fmt.Errorf("%s:%d: label: %w", path, i+1, err)
		}
		texts = append(texts, strings.TrimSpace(line[:tab]))
		labels = append(labels, l)
	}
	return texts, labels, nil
}

// sst2Dev returns the folder of the trained SST-2 model name and the SST-2
// dev sentences and labels, skipping the test when the data or a shared
// model is absent (a model named by its path must be there).
func sst2Dev(t *testing.T, name string) (dir string, texts []string, labels []int) {
	t.Helper()
	dir, shared := sst2Path(name)
	texts, labels, err := ReadSST2(filepath.Join(DataDir, "sst2", "dev.tsv"))
	if os.IsNotExist(err) {
		t.Skipf("SST-2 dev data not found in %s (the project's shared folder): %v", DataDir, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); err != nil {
		if !shared {
			t.Fatal(err)
		}
		t.Skipf("trained SST-2 model not found at %s: %v", dir, err)
	}
	return dir, texts, labels
}

// SST2Accuracy classifies SST-2 dev with the trained model name and checks
// the accuracy against want (a fraction, from the model's README) within
// 0.001 (one sentence of 872).
func SST2Accuracy(t *testing.T, sel *selector.Selector, name string, fam *encoder.Family, want float64) {
	t.Helper()
	if testing.Short() {
		t.Skip("SST-2 dev accuracy (872 sentences) is skipped in -short mode; run without -short")
	}
	dir, texts, labels := sst2Dev(t, name)
	// MaxLength 64: as trained.
	p, err := LoadAs(dir, fam, models.Options{Selector: sel, Threads: 2, MaxLength: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	correct := 0
	for i := 0; i < len(texts); i += 32 {
		j := min(i+32, len(texts))
		res, err := p.Classify(context.Background(), texts[i:j], models.ClassifyOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for k, r := range res {
			if r.Index == labels[i+k] {
				correct++
			}
		}
	}
	acc := float64(correct) / float64(len(texts))
	t.Logf("%s: SST-2 dev accuracy %.4f (%d/%d), reference %.4f", name, acc, correct, len(texts), want)
	if math.Abs(acc-want) > 0.001 {
		t.Errorf("%s: accuracy %.4f, want %.4f", name, acc, want)
	}
}

// SST2Tokens encodes the sentences of the trained SST-2 model name's
// golden.json with the tokenizer of its folder (tokenizer.json, as
// models.Load reads it, and each further tokenizer file the folder holds:
// vocab.json with merges.txt, vocab.txt), truncated to 64 tokens as
// trained, and checks the ids and the attention mask against the
// reference's unpadded rows.
func SST2Tokens(t *testing.T, name string) {
	t.Helper()
	dir, raw := sst2Golden(t, name)
	var g struct {
		Sentences     []string  `json:"sentences"`
		InputIDs      [][]int32 `json:"input_ids"`
		AttentionMask [][]int32 `json:"attention_mask"`
	}
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatal(err)
	}
	if len(g.Sentences) == 0 || len(g.Sentences) != len(g.InputIDs) || len(g.InputIDs) != len(g.AttentionMask) {
		t.Fatalf("%s: golden.json holds %d sentences, %d id rows, %d mask rows", name, len(g.Sentences), len(g.InputIDs), len(g.AttentionMask))
	}
	files := []string{"tokenizer.json"}
	for _, f := range []string{"vocab.json", "vocab.txt"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			files = append(files, f)
		}
	}
	for _, f := range files {
		tok, err := tokenizer.LoadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		bad := 0
		for i, s := range g.Sentences {
			enc, err := tok.Encode(s, tokenizer.Options{MaxLength: 64, Truncation: tokenizer.LongestFirst})
			if err != nil {
				t.Fatalf("%s %s: sentence %d: %v", name, f, i, err)
			}
			n := 0
			for _, m := range g.AttentionMask[i] {
				n += int(m)
			}
			want := g.InputIDs[i][:n]
			if !slices.Equal(enc.IDs, want) || !slices.Equal(enc.AttentionMask, g.AttentionMask[i][:n]) {
				bad++
				if bad <= 3 {
					t.Errorf("%s %s: sentence %d %q: ids %v, want %v", name, f, i, s, enc.IDs, want)
				}
			}
		}
		t.Logf("%s %s: %d/%d sentences tokenized as the reference", name, f, len(g.Sentences)-bad, len(g.Sentences))
		if bad > 0 {
			t.Errorf("%s %s: %d of %d sentences differ from the reference's ids", name, f, bad, len(g.Sentences))
		}
	}
}
