package electra_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/int8bert/int8bert/models"
	"github.com/int8bert/int8bert/models/electra"
	"github.com/int8bert/int8bert/models/encoder"
	"github.com/int8bert/int8bert/models/encoder/encodertest"
)

const goldenDisc = "../testdata/golden/electra-discriminator"

// discGolden is the discriminator golden's inputs and float32 outputs.
type discGolden struct {
	Inputs  map[string][][]int32 `json:"inputs"`
	Outputs struct {
		Last   [][][]float64 `json:"last_hidden_state"`
		Logits [][]float64   `json:"logits"`
	} `json:"outputs"`
}

func readDiscGolden(t *testing.T) *discGolden {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(goldenDisc, "golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g discGolden
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatal(err)
	}
	return &g
}

// TestDiscriminatorLoad: models.Load opens an ElectraForPreTraining folder
// without a family named, as a replaced-token detection model whose
// Forward gives one logit per token (padded and packed alike) equal to
// Hugging Face's, and whose pipeline embeds as the encoder's does.
func TestDiscriminatorLoad(t *testing.T) {
	sel := encodertest.Selector(t)
	p, err := encodertest.LoadAs(encodertest.WordFolder(t, goldenDisc, false), electra.Family, models.Options{Selector: sel, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if p.Task() != models.TaskReplacedTokenDetection || p.Architecture() != "ElectraForPreTraining" {
		t.Fatalf("task %v (%s), want replaced-token detection (ElectraForPreTraining)", p.Task(), p.Architecture())
	}
	if !strings.Contains(p.Describe(), "replaced-token detection") {
		t.Errorf("Describe %q does not name the head", p.Describe())
	}
	g := readDiscGolden(t)
	ids, mask, types := g.Inputs["input_ids"], g.Inputs["attention_mask"], g.Inputs["token_type_ids"]
	packed := &models.Inputs{Batch: len(ids)}
	var want []float64
	for b := range ids {
		n := 0
		for _, v := range mask[b] {
			n += int(v)
		}
		packed.Lens = append(packed.Lens, n)
		packed.IDs, packed.TypeIDs = append(packed.IDs, ids[b][:n]...), append(packed.TypeIDs, types[b][:n]...)
		want = append(want, g.Outputs.Logits[b][:n]...)
	}
	out, err := p.Forward(context.Background(), packed, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Logits) != len(want) {
		t.Fatalf("%d logits for %d tokens", len(out.Logits), len(want))
	}
	maxRef, maxDiff := 0.0, 0.0
	for i, w := range want {
		maxRef, maxDiff = math.Max(maxRef, math.Abs(w)), math.Max(maxDiff, math.Abs(float64(out.Logits[i])-w))
	}
	t.Logf("packed logits: max |diff| %.3g, relative %.3g", maxDiff, maxDiff/maxRef)
	if !(maxDiff/maxRef <= 1e-5) {
		t.Errorf("packed logits: relative error %.3g > 1e-5", maxDiff/maxRef)
	}

	// The shortest golden row is [CLS] w [SEP] with token types 0: the
	// text "wN" of the word tokenizer; its CLS embedding is the golden
	// last hidden state's first row.
	last := len(ids) - 1
	if mask[last][3] != 0 || ids[last][0] != 101 || ids[last][2] != 102 {
		t.Fatalf("golden row %d is not [CLS] w [SEP]: %v", last, ids[last])
	}
	emb, err := p.Embed(context.Background(), []string{fmt.Sprintf("w%d", ids[last][1])}, models.EmbedOptions{Pool: models.PoolCLS})
	if err != nil {
		t.Fatal(err)
	}
	wantEmb := g.Outputs.Last[last][0]
	if len(emb) != 1 || len(emb[0]) != len(wantEmb) {
		t.Fatalf("embedding of %d x %d values, want 1 x %d", len(emb), len(emb[0]), len(wantEmb))
	}
	maxRef, maxDiff = 0, 0
	for i, w := range wantEmb {
		maxRef, maxDiff = math.Max(maxRef, math.Abs(w)), math.Max(maxDiff, math.Abs(float64(emb[0][i])-w))
	}
	if !(maxDiff/maxRef <= 1e-5) {
		t.Errorf("CLS embedding: relative error %.3g > 1e-5", maxDiff/maxRef)
	}
}

// TestPreTrainingHeads: an ElectraForPreTraining config over weights
// without the discriminator head is the encoder, as AutoModel opens it;
// a config naming another head over the discriminator's weights is
// refused, naming the tensors.
func TestPreTrainingHeads(t *testing.T) {
	sel := encodertest.Selector(t)
	o := encoder.Options{Selector: sel, Threads: 1}
	m, err := encoder.LoadTask(edited(t, goldenBase, "architectures", []string{"ElectraForPreTraining"}), electra.Family, o)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.Task != encoder.TaskBase {
		t.Errorf("ElectraForPreTraining without its head: task %v, want the base model", m.Task)
	}
	ref, err := encoder.LoadTask(goldenBase, electra.Family, o)
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	in := &encoder.Inputs{Batch: 1, Seq: 4, IDs: []int32{101, 7, 8, 102}, Mask: []int32{1, 1, 1, 1}, TypeIDs: []int32{0, 0, 1, 1}}
	a, err := m.Forward(in, false)
	if err != nil {
		t.Fatal(err)
	}
	b, err := ref.Forward(in, false)
	if err != nil {
		t.Fatal(err)
	}
	for i := range a.Last {
		if a.Last[i] != b.Last[i] {
			t.Fatalf("hidden state %d: %v, ElectraModel's %v", i, a.Last[i], b.Last[i])
		}
	}
	if a.Logits != nil {
		t.Errorf("a base model gave %d logits", len(a.Logits))
	}

	for _, arch := range []string{"ElectraModel", "ElectraForTokenClassification"} {
		m, err := encoder.LoadTask(edited(t, goldenDisc, "architectures", []string{arch}), electra.Family, o)
		if err == nil {
			m.Close()
			t.Errorf("%s over the discriminator's weights loaded", arch)
			continue
		}
		t.Log(err)
		if !errors.Is(err, encoder.ErrConfig) || !strings.Contains(err.Error(), "discriminator_predictions") && !strings.Contains(err.Error(), "ForPreTraining") {
			t.Errorf("%s: %v: want ErrConfig naming the discriminator", arch, err)
		}
	}
}
