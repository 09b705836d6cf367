package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/int8bert/int8bert/checkpoint"
	"github.com/int8bert/int8bert/models"
	"github.com/int8bert/int8bert/models/encoder"
	"github.com/int8bert/int8bert/models/encoder/encodertest"
	"github.com/stretchr/testify/require"
)

var archTasks = []encoder.Task{encoder.TaskBase, encoder.TaskSequenceClassification, encoder.TaskQuestionAnswering}

func mustArch(t *testing.T, name string) *Arch {
	t.Helper()
	a, err := LookupArch(name)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestArchs(t *testing.T) {
	want := []string{"bert-base", "bert-large", "deberta-v3-base", "distilbert", "electra-base", "electra-small", "mpnet-base", "roberta-base", "xlmr-base"}
	if got := Archs(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Archs() = %v, want %v", got, want)
	}
	type shape struct {
		typ                               string
		vocab, hidden, layers, heads, ffn int
		pos, types                        int
		eps                               float64
	}
	shapes := map[string]shape{
		"bert-base":       {"bert", 30522, 768, 12, 12, 3072, 512, 2, 1e-12},
		"bert-large":      {"bert", 30522, 1024, 24, 16, 4096, 512, 2, 1e-12},
		"distilbert":      {"distilbert", 30522, 768, 6, 12, 3072, 512, 0, 1e-12},
		"xlmr-base":       {"xlm-roberta", 250002, 768, 12, 12, 3072, 514, 1, 1e-5},
		"roberta-base":    {"roberta", 50265, 768, 12, 12, 3072, 514, 1, 1e-5},
		"electra-base":    {"electra", 30522, 768, 12, 12, 3072, 512, 2, 1e-12},
		"electra-small":   {"electra", 30522, 256, 12, 4, 1024, 512, 2, 1e-12},
		"mpnet-base":      {"mpnet", 30527, 768, 12, 12, 3072, 514, 0, 1e-5},
		"deberta-v3-base": {"deberta-v2", 128100, 768, 12, 12, 3072, 512, 0, 1e-7},
	}
	for _, name := range want {
		a := mustArch(t, name)
		c, s := a.Config, shapes[name]
		got := shape{c.ModelType, c.VocabSize, c.HiddenSize, c.NumHiddenLayers, c.NumAttentionHeads, c.IntermediateSize,
			c.MaxPositionEmbeddings, c.TypeVocabSize, c.LayerNormEpsilon()}
		if got != s {
			t.Errorf("%s: config %+v, want %+v", name, got, s)
		}
		if a.Name != name || c.HiddenAct != "gelu" || c.PositionEmbeddingType != "absolute" {
			t.Errorf("%s: name %q, hidden_act %q, position_embedding_type %q", name, a.Name, c.HiddenAct, c.PositionEmbeddingType)
		}
		if err := c.Validate(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if !slices.Contains(archFamily(a).ModelTypes, c.ModelType) {
			t.Errorf("%s: family %s does not accept model_type %q", name, archFamily(a).Name, c.ModelType)
		}
		ec, err := encoderConfig(a)
		if err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if ec.Hidden != s.hidden || ec.Layers != s.layers || ec.Vocab != s.vocab {
			t.Errorf("%s: encoder config %+v", name, ec)
		}
		// Fresh copies: modifying one does not change the next.
		a.Config.HiddenSize = 1
		if mustArch(t, name).Config.HiddenSize != s.hidden {
			t.Errorf("%s: LookupArch shares its config between calls", name)
		}
	}
	if c := mustArch(t, "xlmr-base").Config; c.PadTokenID == nil || *c.PadTokenID != 1 {
		t.Errorf("xlmr-base: pad_token_id %v, want 1", c.PadTokenID)
	}
	if ec, _ := encoderConfig(mustArch(t, "xlmr-base")); !ec.PositionsFromPadding || ec.PaddingIdx != 1 {
		t.Errorf("xlmr-base: positions from padding %v, padding idx %d", ec.PositionsFromPadding, ec.PaddingIdx)
	}
	for name, want := range map[string][2]int{"electra-base": {768, 768}, "electra-small": {128, 256}} {
		if ec, _ := encoderConfig(mustArch(t, name)); ec.EmbeddingWidth() != want[0] || ec.Hidden != want[1] {
			t.Errorf("%s: embeddings %d wide, hidden %d; want %v", name, ec.EmbeddingWidth(), ec.Hidden, want)
		}
	}
	if c := mustArch(t, "distilbert").Config; string(c.Raw["dim"]) != "768" || string(c.Raw["n_layers"]) != "6" {
		t.Errorf("distilbert: raw dim %s, n_layers %s", c.Raw["dim"], c.Raw["n_layers"])
	}
}

func TestLookupArchUnknown(t *testing.T) {
	for _, name := range []string{"", "bert", "BERT-base", "gpt2"} {
		a, err := LookupArch(name)
		if err == nil || a != nil {
			t.Fatalf("LookupArch(%q) = %v, %v; want an error", name, a, err)
		}
		for _, known := range Archs() {
			if !strings.Contains(err.Error(), known) {
				t.Errorf("LookupArch(%q): error %q does not list %s", name, err, known)
			}
		}
	}
}

// familyTensors builds a checkpoint's names and shapes from the family's
// own description (Names, Pooler, Classifier, QA), independently of
// RandomWeights.
func familyTensors(t *testing.T, a *Arch, task encoder.Task) map[string][]int {
	ec, err := encoderConfig(a)
	if err != nil {
		t.Fatal(err)
	}
	fam, h := archFamily(a), ec.Hidden
	prefix := ""
	if task != encoder.TaskBase {
		prefix = fam.Prefix
	}
	want := map[string][]int{}
	n := fam.Names(prefix)
	// The embeddings are e wide (ELECTRA's embedding_size), projected
	// onto h where the two differ.
	e := ec.EmbeddingWidth()
	want[n.WordEmb] = []int{ec.Vocab, e}
	if !ec.NoPositions { // DeBERTa's position_biased_input false: none
		want[n.PosEmb] = []int{ec.MaxPositions, e}
	}
	if n.TypeEmb != "" && ec.TypeVocab > 0 {
		want[n.TypeEmb] = []int{ec.TypeVocab, e}
	}
	want[n.EmbLN], want[n.EmbLNBias] = []int{e}, []int{e}
	if e != h {
		want[n.EmbProj], want[n.EmbProjBias] = []int{h, e}, []int{h}
	}
	if n.RelBias != "" {
		want[n.RelBias] = []int{ec.RelTable, ec.Heads}
	}
	if ec.Dis.Span > 0 {
		// DebertaV2Encoder's rel_embeddings (position_buckets, else
		// max_relative_positions, times 2) and their LayerNorm.
		want[n.RelEmb] = []int{2 * ec.Dis.Span, h}
		if ec.Dis.NormLN {
			want[n.RelLN], want[n.RelLNBias] = []int{h}, []int{h}
		}
	}
	for i := 0; i < ec.Layers; i++ {
		l := n.Layer(i)
		for _, w := range []string{l.Q, l.K, l.V, l.O} {
			want[w] = []int{h, h}
		}
		if ec.Dis.Span > 0 && !ec.Dis.Shared {
			if ec.Dis.C2P {
				want[l.PosK], want[l.PosKBias] = []int{h, h}, []int{h}
			}
			if ec.Dis.P2C {
				want[l.PosQ], want[l.PosQBias] = []int{h, h}, []int{h}
			}
		}
		for _, b := range []string{l.QBias, l.KBias, l.VBias, l.OBias, l.AttnLN, l.AttnLNBias, l.FFN2Bias, l.OutLN, l.OutLNBias} {
			want[b] = []int{h}
		}
		want[l.FFN1], want[l.FFN1Bias] = []int{ec.Intermediate, h}, []int{ec.Intermediate}
		want[l.FFN2] = []int{h, ec.Intermediate}
	}
	dense := func(s encoder.DenseSpec, pre string, out int) {
		want[pre+s.Weight], want[pre+s.Bias] = []int{out, h}, []int{out}
	}
	switch task {
	case encoder.TaskBase:
		if fam.Pooler != nil {
			dense(*fam.Pooler, "", h)
		}
	case encoder.TaskSequenceClassification:
		if fam.PoolerForClassification {
			dense(*fam.Pooler, prefix, h)
		}
		for i, s := range fam.Classifier {
			out := h
			if i == len(fam.Classifier)-1 {
				out = 2
			}
			dense(s, "", out)
		}
	case encoder.TaskQuestionAnswering:
		dense(fam.QA, "", 2)
	}
	return want
}

func TestRandomWeightsNamesAndShapes(t *testing.T) {
	for _, name := range Archs() {
		a := mustArch(t, name)
		for _, task := range archTasks {
			r := RandomWeights(a, models.Task(task), 1)
			if err := r.Err(); err != nil {
				t.Fatalf("%s %s: %v", name, task, err)
			}
			want := familyTensors(t, a, task)
			names := r.Names()
			if len(names) != len(want) {
				t.Errorf("%s %s: %d tensors, want %d", name, task, len(names), len(want))
			}
			seen := map[string]bool{}
			for _, n := range names {
				if seen[n] {
					t.Errorf("%s %s: %s listed twice", name, task, n)
				}
				seen[n] = true
				s, err := r.Shape(n)
				if err != nil {
					t.Errorf("%s %s: %v", name, task, err)
				}
				if w, ok := want[n]; !ok {
					t.Errorf("%s %s: unexpected tensor %s", name, task, n)
				} else if !slices.Equal(s, w) {
					t.Errorf("%s %s: %s has shape %v, want %v", name, task, n, s, w)
				}
			}
			for n := range want {
				if !seen[n] {
					t.Errorf("%s %s: missing tensor %s", name, task, n)
				}
			}
			// The head's output shapes as the loader reads them.
			if task == encoder.TaskQuestionAnswering {
				v, s, err := r.Float32(archFamily(a).QA.Weight)
				if err != nil || !slices.Equal(s, []int{2, a.Config.HiddenSize}) || len(v) != 2*a.Config.HiddenSize {
					t.Errorf("%s: qa weight shape %v, %d values, %v", name, s, len(v), err)
				}
			}
		}
	}
	if got := len(RandomWeights(mustArch(t, "bert-base"), models.TaskBase, 0).Names()); got != 5+12*16+2 {
		t.Errorf("bert-base: %d tensors, want %d", got, 5+12*16+2)
	}
}

// sharedFolder is the project's shared folder: $INT8BERT_SHARED, else next to
// the repository (this package is one level below its root).
func sharedFolder() string {
	if d := os.Getenv("INT8BERT_SHARED"); d != "" {
		return d
	}
	return filepath.Join("..", "..", "shared")
}

// TestRandomWeightsMatchHuggingFace compares the names and shapes with the
// real checkpoints Hugging Face saved for the golden models (tiny configs of
// each family and task).
func TestRandomWeightsMatchHuggingFace(t *testing.T) {
	root := filepath.Join(sharedFolder(), "golden", "models")
	if _, err := os.Stat(root); err != nil {
		t.Skipf("golden models not found at %s (the project's shared folder): %v", root, err)
	}
	cases := []struct {
		dir  string
		arch string
		task encoder.Task
	}{
		{"bert-base", "bert-base", encoder.TaskBase},
		{"bert-seqcls", "bert-base", encoder.TaskSequenceClassification},
		{"bert-qa", "bert-base", encoder.TaskQuestionAnswering},
		{"distilbert-base", "distilbert", encoder.TaskBase},
		{"distilbert-seqcls", "distilbert", encoder.TaskSequenceClassification},
		{"distilbert-qa", "distilbert", encoder.TaskQuestionAnswering},
		{"xlm-roberta-base", "xlmr-base", encoder.TaskBase},
		{"xlm-roberta-seqcls", "xlmr-base", encoder.TaskSequenceClassification},
		{"xlm-roberta-qa", "xlmr-base", encoder.TaskQuestionAnswering},
		// Committed with the repository (models/testdata).
		{"../models/testdata/golden/mpnet-base", "mpnet-base", encoder.TaskBase},
		{"../models/testdata/golden/mpnet-seqcls", "mpnet-base", encoder.TaskSequenceClassification},
		{"../models/testdata/golden/deberta-v3-base", "deberta-v3-base", encoder.TaskBase},
		{"../models/testdata/golden/deberta-v3-seqcls", "deberta-v3-base", encoder.TaskSequenceClassification},
		{"../models/testdata/golden/deberta-v2-base", "deberta-v3-base", encoder.TaskBase},
		{"../models/testdata/golden/deberta-v2-qa", "deberta-v3-base", encoder.TaskQuestionAnswering},
	}
	for _, c := range cases {
		t.Run(c.dir, func(t *testing.T) {
			dir := filepath.Join(root, c.dir)
			if strings.HasPrefix(c.dir, "../") {
				dir = c.dir
			}
			cfg, err := checkpoint.LoadConfig(dir)
			if err != nil {
				t.Skipf("%v", err)
			}
			ck, err := checkpoint.Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer ck.Close()
			a := &Arch{Name: c.dir, Config: cfg}
			r := RandomWeights(a, models.Task(c.task), 7)
			if err := r.Err(); err != nil {
				t.Fatal(err)
			}
			prefix := ""
			if c.task != encoder.TaskBase {
				prefix = archFamily(a).Prefix
			}
			var hf []string
			for _, n := range ck.Names() {
				buffer := false
				for _, ig := range archFamily(a).Ignored {
					buffer = buffer || n == prefix+ig
				}
				if !buffer {
					hf = append(hf, n)
				}
			}
			ours := r.Names()
			sort.Strings(hf)
			sort.Strings(ours)
			if !slices.Equal(ours, hf) {
				t.Fatalf("names differ from Hugging Face's:\n ours %v\n   hf %v", ours, hf)
			}
			for _, n := range hf {
				want, _ := ck.Shape(n)
				got, _ := r.Shape(n)
				if !slices.Equal(got, want) {
					t.Errorf("%s: shape %v, Hugging Face %v", n, got, want)
				}
			}
		})
	}
}

// tinyArchOf is a small configuration of a registered architecture.
func tinyArchOf(t *testing.T, name string) *Arch {
	a := mustArch(t, name)
	c := a.Config
	c.HiddenSize, c.NumHiddenLayers, c.NumAttentionHeads, c.IntermediateSize = 32, 2, 4, 64
	c.VocabSize, c.MaxPositionEmbeddings = 100, 40
	if _, ok := c.Raw["position_buckets"]; ok {
		// DeBERTa-v3's 256 buckets need positions beyond 129; 16
		// log-spaced buckets fit the 40 positions.
		c.Raw["position_buckets"] = json.RawMessage("16")
	}
	return a
}

// TestRandomWeightsLoad saves random weights of a tiny configuration of
// every family and task as a checkpoint and loads it with the family's
// loader, which rejects missing, misshapen and unexpected tensors.
func TestRandomWeightsLoad(t *testing.T) {
	sel := encodertest.Selector(t)
	for _, name := range Archs() {
		a := tinyArchOf(t, name)
		for _, task := range archTasks {
			t.Run(name+"/"+task.String(), func(t *testing.T) {
				dir := t.TempDir()
				// The config names the task's class, as a saved
				// checkpoint's does (the registered ones say ForMaskedLM).
				c := *a.Config
				c.Architectures = []string{archFamily(a).Classes[0] + task.String()}
				cj, err := c.JSON()
				require.NoError(t, err)
				require.NoError(t, os.WriteFile(filepath.Join(dir, "config.json"), cj, 0o644))
				r := RandomWeights(a, models.Task(task), 3)
				tensors := map[string]checkpoint.Tensor{}
				for _, n := range r.Names() {
					v, s, err := r.Float32(n)
					if err != nil {
						t.Fatal(err)
					}
					tensors[n] = checkpoint.Float32Tensor(s, v)
				}
				if err := checkpoint.Save(filepath.Join(dir, checkpoint.SafetensorsFile), tensors, nil); err != nil {
					t.Fatal(err)
				}
				p, err := models.Load(context.Background(), dir, models.Options{Selector: sel, Threads: 1})
				require.NoError(t, err)
				defer p.Close()
				require.Equal(t, archFamily(a).Name, p.Family(), "family picked from config.json")
				require.Equal(t, models.Task(task), p.Task(), "task picked from config.json")
				in := &models.Inputs{Batch: 1, Seq: 5, IDs: []int32{2, 10, 11, 12, 3}, Mask: []int32{1, 1, 1, 1, 1}}
				out, err := p.Forward(context.Background(), in, false)
				if err != nil {
					t.Fatal(err)
				}
				switch task {
				case encoder.TaskSequenceClassification:
					if len(out.Logits) != 2 {
						t.Errorf("%d logits, want 2", len(out.Logits))
					}
				case encoder.TaskQuestionAnswering:
					if len(out.StartLogits) != 5 || len(out.EndLogits) != 5 {
						t.Errorf("%d start and %d end logits, want 5", len(out.StartLogits), len(out.EndLogits))
					}
				}
				for _, x := range out.Last {
					if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
						t.Fatalf("non-finite hidden state %v", x)
					}
				}
			})
		}
	}
}

func TestRandomWeightsDeterministic(t *testing.T) {
	a := mustArch(t, "bert-base")
	r1, r2 := RandomWeights(a, models.TaskSequenceClassification, 42), RandomWeights(a, models.TaskSequenceClassification, 42)
	names := r1.Names()
	probe := []string{names[0], names[10], names[len(names)-1], "bert.encoder.layer.11.intermediate.dense.weight", "classifier.bias"}
	// r2 reads them in the opposite order, and concurrently.
	got2 := make([][]float32, len(probe))
	var wg sync.WaitGroup
	for i := len(probe) - 1; i >= 0; i-- {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, _, err := r2.Float32(probe[i])
			if err != nil {
				t.Error(err)
			}
			got2[i] = v
		}()
	}
	wg.Wait()
	for i, n := range probe {
		v1, _, err := r1.Float32(n)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(v1, got2[i]) {
			t.Errorf("%s differs between two sources of the same seed", n)
		}
		again, _, _ := r1.Float32(n)
		if !slices.Equal(v1, again) {
			t.Errorf("%s differs between two reads", n)
		}
	}
	// Another seed, another tensor; two tensors of one source differ.
	w := "bert.encoder.layer.0.attention.self.query.weight"
	v1, _, _ := r1.Float32(w)
	v3, _, _ := RandomWeights(a, models.TaskSequenceClassification, 43).Float32(w)
	k1, _, _ := r1.Float32("bert.encoder.layer.0.attention.self.key.weight")
	if slices.Equal(v1, v3) || slices.Equal(v1, k1) {
		t.Error("different seeds or tensors give the same values")
	}
}

func TestRandomWeightsValues(t *testing.T) {
	a := mustArch(t, "bert-base")
	r := RandomWeights(a, models.TaskBase, 5)
	v, _, err := r.Float32("embeddings.word_embeddings.weight")
	if err != nil {
		t.Fatal(err)
	}
	var sum, sq float64
	for _, x := range v {
		sum += float64(x)
		sq += float64(x) * float64(x)
	}
	n := float64(len(v))
	mean, std := sum/n, math.Sqrt(sq/n-(sum/n)*(sum/n))
	t.Logf("word embeddings: mean %.3g, std %.5f", mean, std)
	if math.Abs(mean) > 1e-4 || math.Abs(std-0.02) > 2e-4 {
		t.Errorf("word embeddings mean %g, std %g; want N(0, 0.02)", mean, std)
	}
	if !slices.Equal(v[:768], make([]float32, 768)) {
		t.Error("padding row (pad_token_id 0) is not zero")
	}
	for name, want := range map[string]float32{
		"embeddings.LayerNorm.weight": 1, "embeddings.LayerNorm.bias": 0,
		"encoder.layer.3.attention.output.LayerNorm.weight": 1, "encoder.layer.3.output.LayerNorm.bias": 0,
	} {
		v, _, err := r.Float32(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range v {
			if x != want {
				t.Fatalf("%s holds %v, want all %v", name, x, want)
			}
		}
	}
	bias, _, _ := r.Float32("encoder.layer.0.intermediate.dense.bias")
	if slices.Equal(bias, make([]float32, len(bias))) {
		t.Error("linear bias is all zero, want small random values")
	}
}

func TestRandomWeightsSet(t *testing.T) {
	r := RandomWeights(mustArch(t, "distilbert"), models.TaskSequenceClassification, 9)
	name := "pre_classifier.bias"
	v := make([]float32, 768)
	v[3] = 1e4
	if err := r.Set(name, v); err != nil {
		t.Fatal(err)
	}
	v[3] = 0 // Set copied it
	got, shape, err := r.Float32(name)
	if err != nil || got[3] != 1e4 || !slices.Equal(shape, []int{768}) {
		t.Fatalf("after Set: %v (shape %v, %v)", got[3], shape, err)
	}
	got[3] = 5 // Float32 returns a copy
	if again, _, _ := r.Float32(name); again[3] != 1e4 {
		t.Error("modifying a returned tensor changed the source")
	}
	if err := r.Set(name, make([]float32, 767)); err == nil {
		t.Error("Set with the wrong number of values: no error")
	}
	if err := r.Set("no.such.tensor", v); !errors.Is(err, checkpoint.ErrNoTensor) {
		t.Errorf("Set of an unknown tensor: %v, want ErrNoTensor", err)
	}
	// Other tensors are unchanged.
	fresh := RandomWeights(mustArch(t, "distilbert"), models.TaskSequenceClassification, 9)
	w1, _, _ := r.Float32("classifier.weight")
	w2, _, _ := fresh.Float32("classifier.weight")
	if !slices.Equal(w1, w2) {
		t.Error("Set changed another tensor")
	}
}

func TestRandomWeightsErrors(t *testing.T) {
	r := RandomWeights(mustArch(t, "bert-base"), models.TaskBase, 1)
	if _, _, err := r.Float32("bert.embeddings.word_embeddings.weight"); !errors.Is(err, checkpoint.ErrNoTensor) {
		t.Errorf("prefixed name in a base model: %v, want ErrNoTensor", err)
	}
	if _, err := r.Shape("nope"); !errors.Is(err, checkpoint.ErrNoTensor) {
		t.Errorf("Shape of an unknown tensor: %v", err)
	}
	bad := []*Arch{nil, {Name: "empty"}, {Name: "no config"}}
	broken := mustArch(t, "bert-base")
	broken.Config.HiddenSize = 0
	bad = append(bad, broken)
	for _, a := range bad {
		r := RandomWeights(a, models.TaskBase, 1)
		if r.Err() == nil || len(r.Names()) != 0 {
			t.Errorf("%v: no error", a)
		}
		if _, _, err := r.Float32("embeddings.word_embeddings.weight"); err == nil {
			t.Errorf("%v: Float32 without error", a)
		}
		if err := r.Set("embeddings.word_embeddings.weight", nil); err == nil {
			t.Errorf("%v: Set without error", a)
		}
	}
	huge := mustArch(t, "bert-base")
	huge.Config.VocabSize = 1 << 40
	if r := RandomWeights(huge, models.TaskBase, 1); r.Err() == nil {
		t.Error("a 2^40-row embedding: no error")
	}
	if r := RandomWeights(mustArch(t, "bert-base"), models.Task(9), 1); r.Err() == nil {
		t.Error("unknown task: no error")
	}
}

// TestRandomWeightsXLMREmbedding generates XLM-R base's 250002x768 word
// embeddings (768 MB, a fresh allocation: its page faults cost more than the
// values in some sandboxes).
func TestRandomWeightsXLMREmbedding(t *testing.T) {
	if testing.Short() {
		t.Skip("generates 768 MB; skipped in -short mode")
	}
	r := RandomWeights(mustArch(t, "xlmr-base"), models.TaskBase, 1)
	start := time.Now()
	v, s, err := r.Float32("embeddings.word_embeddings.weight")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("xlmr-base word embeddings %v: %v", s, time.Since(start))
	if len(v) != 250002*768 || v[len(v)-1] == 0 {
		t.Errorf("%d values, last %v", len(v), v[len(v)-1])
	}
	if !slices.Equal(v[768:2*768], make([]float32, 768)) {
		t.Error("padding row (pad_token_id 1) is not zero")
	}
	if slices.Equal(v[:768], make([]float32, 768)) {
		t.Error("row 0 is zero")
	}
}

func ExampleLookupArch() {
	a, err := LookupArch("distilbert")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(a.Config.ModelType, a.Config.HiddenSize, a.Config.NumHiddenLayers, len(RandomWeights(a, models.TaskQuestionAnswering, 1).Names()))
	// Output: distilbert 768 6 102
}

// TestRandomWeightsDeBERTaUnshared: with share_att_key false each layer
// has its own pos_key_proj and pos_query_proj (none of the registered
// architectures or goldens has them), and the folder loads and runs.
func TestRandomWeightsDeBERTaUnshared(t *testing.T) {
	a := tinyArchOf(t, "deberta-v3-base")
	a.Config.Raw["share_att_key"] = json.RawMessage("false")
	a.Config.Architectures = []string{"DebertaV2Model"}
	r := RandomWeights(a, models.TaskBase, 5)
	require.NoError(t, r.Err())
	want := familyTensors(t, a, encoder.TaskBase)
	names := r.Names()
	require.Len(t, names, len(want))
	for _, n := range names {
		s, err := r.Shape(n)
		require.NoError(t, err)
		require.Equal(t, want[n], s, n)
	}
	for _, n := range []string{"encoder.layer.1.attention.self.pos_key_proj.weight", "encoder.layer.0.attention.self.pos_query_proj.bias",
		"encoder.rel_embeddings.weight", "encoder.LayerNorm.weight"} {
		require.Contains(t, names, n)
	}
	require.NotContains(t, names, "embeddings.position_embeddings.weight")
	dir := t.TempDir()
	cj, err := a.Config.JSON()
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.json"), cj, 0o644))
	tensors := map[string]checkpoint.Tensor{}
	for _, n := range names {
		v, s, err := r.Float32(n)
		require.NoError(t, err)
		tensors[n] = checkpoint.Float32Tensor(s, v)
	}
	require.NoError(t, checkpoint.Save(filepath.Join(dir, checkpoint.SafetensorsFile), tensors, nil))
	p, err := models.Load(context.Background(), dir, models.Options{Selector: encodertest.Selector(t), Threads: 1})
	require.NoError(t, err)
	defer p.Close()
	in := &models.Inputs{Batch: 1, Seq: 4, IDs: []int32{1, 10, 11, 2}, Mask: []int32{1, 1, 1, 1}}
	out, err := p.Forward(context.Background(), in, false)
	require.NoError(t, err)
	require.Len(t, out.Last, 4*32)
}
