package models_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/int8bert/int8bert/models"
	"github.com/int8bert/int8bert/models/encoder"
	"github.com/int8bert/int8bert/models/encoder/encodertest"
	"github.com/stretchr/testify/require"
)

// packedSeqs are the token ids of a few SST-2 sentences and of random
// sequences of every length 1 to most (the padding id among them, which
// XLM-R's positions skip), for packed passes.
func packedSeqs(t *testing.T, p *models.Pipeline, most int) [][]int32 {
	var seqs [][]int32
	for _, text := range sst2(t, "dev.tsv", 6) {
		s, err := p.Encode(text, nil, models.EncodeOptions{Truncate: true})
		require.NoError(t, err)
		seqs = append(seqs, s.IDs())
	}
	r := rand.New(rand.NewPCG(5, 6))
	vocab := p.Config().Vocab
	// -short takes every fifth length (1, 6, ..., 36): each new length is
	// a new kernel key to verify and time, the bulk of the test under
	// -race; the full form (every length) runs without -race.
	step := 1
	if testing.Short() {
		step = 5
	}
	for l := 1; l <= most; l += step {
		ids := make([]int32, l)
		for j := range ids {
			ids[j] = int32(r.IntN(vocab))
		}
		if l > 3 {
			ids[l/2] = int32(p.Config().PaddingIdx)
		}
		seqs = append(seqs, ids)
	}
	r.Shuffle(len(seqs), func(i, j int) { seqs[i], seqs[j] = seqs[j], seqs[i] })
	return seqs
}

// checkPackedMatchesAlone runs seqs as one packed pass and each alone
// (padded layout, batch 1) and requires every sequence's hidden states
// and head outputs to agree within tol relative to the largest value:
// a packed sequence sees only its own tokens.
func checkPackedMatchesAlone(t *testing.T, m *encoder.TaskModel, seqs [][]int32, what string, tol float64) {
	t.Helper()
	in := &encoder.Inputs{Batch: len(seqs)}
	for _, s := range seqs {
		in.IDs = append(in.IDs, s...)
		in.Lens = append(in.Lens, len(s))
	}
	packed, err := m.Forward(in, false)
	require.NoError(t, err, what)
	h := packed.Hidden
	require.Len(t, packed.Last, len(in.IDs)*h, "%s: no padding computed", what)
	nl := len(m.Labels)
	for b, s := range seqs {
		alone, err := m.Forward(&encoder.Inputs{Batch: 1, Seq: len(s), IDs: s, Mask: slices.Repeat([]int32{1}, len(s))}, false)
		require.NoError(t, err)
		start, end := packed.Rows(b)
		require.Equal(t, len(s), end-start, "%s: sequence %d rows", what, b)
		require.LessOrEqual(t, relDiff(alone.Last, packed.Last[start*h:end*h]), tol, "%s: sequence %d (%d tokens) hidden states", what, b, len(s))
		if alone.Logits != nil {
			require.LessOrEqual(t, relDiff(alone.Logits, packed.Logits[b*nl:(b+1)*nl]), tol, "%s: sequence %d logits", what, b)
		}
		if alone.PoolerOutput != nil {
			require.LessOrEqual(t, relDiff(alone.PoolerOutput, packed.PoolerOutput[b*h:(b+1)*h]), tol, "%s: sequence %d pooler", what, b)
		}
		if alone.StartLogits != nil {
			require.LessOrEqual(t, relDiff(alone.StartLogits, packed.StartLogits[start:end]), tol, "%s: sequence %d start logits", what, b)
			require.LessOrEqual(t, relDiff(alone.EndLogits, packed.EndLogits[start:end]), tol, "%s: sequence %d end logits", what, b)
		}
	}
}

// TestPackedMatchesOneByOne: a packed pass mixing lengths 1 to 40 (and
// real sentences) gives every sequence what it gets alone, for BERT,
// DistilBERT and XLM-R at FP32, INT8-static and INT8-dynamic.
func TestPackedMatchesOneByOne(t *testing.T) {
	calib := sst2(t, "train.tsv", 64)
	for _, name := range []string{"sst2-bert-mini", "sst2-distilbert-mini", "sst2-xlmr-mini"} {
		for _, prec := range []models.Precision{models.PrecisionFP32, models.PrecisionInt8Static, models.PrecisionInt8Dynamic} {
			o := models.Options{Precision: prec}
			if prec != models.PrecisionFP32 {
				o.Calib = calib
			}
			p := sst2Model(t, name, o)
			// FP32: the parity tolerance of TestMicroBatchesMatchOneByOne.
			// INT8: the pass and the lone sequence have different M, so the
			// selector may choose kernels that sum in another order (which
			// depends on timing: -race changes it); an FP32 value at a
			// rounding boundary then takes the neighbouring u8 code, one
			// quantization step (~0.4% of a tensor's range), measured up to
			// 2.8e-3 here. A layout fault (positions, attention across
			// sequences) shows at FP32's 1e-5.
			tol := 1e-5
			if prec != models.PrecisionFP32 {
				tol = 2e-2
			}
			checkPackedMatchesAlone(t, models.Engine(p), packedSeqs(t, p, 40), name+" "+prec.String(), tol)
		}
	}
}

// TestPackedQA: question answering's start and end logits of a packed
// pass are per token, each sequence's at its rows (the golden QA
// checkpoints, FP32).
func TestPackedQA(t *testing.T) {
	for _, name := range []string{"bert-qa", "distilbert-qa", "xlm-roberta-qa"} {
		dir := filepath.Join(sharedDir(), "golden", "models", name)
		if _, err := os.Stat(filepath.Join(dir, "config.json")); err != nil {
			t.Skipf("%s not found: %v", dir, err)
		}
		p, err := models.Load(context.Background(), dir, models.Options{Threads: 1, Selector: encodertest.Selector(t)})
		require.NoError(t, err)
		r := rand.New(rand.NewPCG(9, 9))
		var seqs [][]int32
		for _, l := range []int{1, 17, 5, 2, 33, 9} {
			ids := make([]int32, l)
			for j := range ids {
				ids[j] = int32(5 + r.IntN(1000))
			}
			seqs = append(seqs, ids)
		}
		checkPackedMatchesAlone(t, models.Engine(p), seqs, name, 1e-5)
		p.Close()
	}
}

// TestPackedInputsErrors: bad packed lengths are ErrInput errors, never
// a panic.
func TestPackedInputsErrors(t *testing.T) {
	p := sst2Model(t, "sst2-bert-mini", models.Options{})
	most := p.Config().MaxSeq()
	ids := func(n int) []int32 { return slices.Repeat([]int32{101}, n) }
	for name, in := range map[string]*models.Inputs{
		"negative":        {Batch: 2, IDs: ids(3), Lens: []int{5, -2}},
		"zero":            {Batch: 2, IDs: ids(3), Lens: []int{3, 0}},
		"sum over":        {Batch: 2, IDs: ids(4), Lens: []int{3, 2}},
		"sum under":       {Batch: 2, IDs: ids(6), Lens: []int{3, 2}},
		"too long":        {Batch: 1, IDs: ids(most + 1), Lens: []int{most + 1}},
		"batch mismatch":  {Batch: 3, IDs: ids(5), Lens: []int{3, 2}},
		"no sequences":    {Batch: 0, Lens: []int{}},
		"seq not longest": {Batch: 2, Seq: 2, IDs: ids(5), Lens: []int{3, 2}},
		"mask length":     {Batch: 2, IDs: ids(5), Mask: []int32{1, 1}, Lens: []int{3, 2}},
		"types length":    {Batch: 2, IDs: ids(5), TypeIDs: []int32{0}, Lens: []int{3, 2}},
		"id out of vocab": {Batch: 2, IDs: []int32{101, 102, 1 << 30, 4, 5}, Lens: []int{3, 2}},
	} {
		_, err := p.Forward(context.Background(), in, false)
		require.Error(t, err, name)
		require.True(t, errors.Is(err, models.ErrInput), "%s: %v", name, err)
	}
	// The longest allowed and Seq given as the longest are fine.
	_, err := p.Forward(context.Background(), &models.Inputs{Batch: 2, Seq: most, IDs: ids(most + 1), Lens: []int{most, 1}}, false)
	require.NoError(t, err)
}

// TestPipelinePassesArePacked: every pass of Run computes only real
// tokens, and its rows' embeddings are those Embed gives.
func TestPipelinePassesArePacked(t *testing.T) {
	ctx := context.Background()
	p := sst2Model(t, "sst2-xlmr-mini", models.Options{MaxBatchTokens: 100})
	texts := sst2(t, "dev.tsv", 30)
	var seqs []models.Sequence
	for _, text := range texts {
		s, err := p.Encode(text, nil, models.EncodeOptions{Truncate: true})
		require.NoError(t, err)
		seqs = append(seqs, s)
	}
	want, err := p.Embed(ctx, texts, models.EmbedOptions{Pool: models.PoolMean})
	require.NoError(t, err)
	passes := 0
	require.NoError(t, p.Run(ctx, seqs, func(b *models.Batch) error {
		passes++
		real, computed := b.Tokens()
		require.Equal(t, real, computed, "a pass computed padding")
		require.LessOrEqual(t, computed, 100)
		for r, i := range b.Rows() {
			e, err := b.Embedding(r, models.PoolMean, false)
			require.NoError(t, err)
			require.Equal(t, want[i], e, "sequence %d", i)
		}
		return nil
	}))
	require.Greater(t, passes, 2)
}

// TestPackedMPNet: a packed pass of the golden MPNet checkpoints (lengths
// 1 to 128, the relative bias's log-spaced buckets included) gives every
// sequence what it gets alone, at FP32 and at INT8-static and
// INT8-dynamic with INT8 attention on and off: each sequence's bias rows
// are its own length's.
func TestPackedMPNet(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 1))
	var seqs [][]int32
	for _, l := range []int{1, 2, 9, 23, 40, 71, 96, 128} {
		ids := make([]int32, l)
		for j := range ids {
			ids[j] = int32(5 + r.IntN(495))
		}
		ids[0], ids[l-1] = 0, 2
		seqs = append(seqs, ids)
	}
	sel := encodertest.Selector(t)
	for _, name := range []string{"mpnet-base", "mpnet-seqcls"} {
		dir := filepath.Join("testdata", "golden", name)
		calib, _ := readGolden(t, dir)
		for _, c := range []struct {
			prec models.Precision
			attn models.AttentionMode
		}{
			{models.PrecisionFP32, models.AttentionAuto},
			{models.PrecisionInt8Static, models.AttentionF32}, {models.PrecisionInt8Static, models.AttentionInt8},
			{models.PrecisionInt8Dynamic, models.AttentionF32}, {models.PrecisionInt8Dynamic, models.AttentionInt8},
		} {
			o := models.Options{Threads: 1, Selector: sel, Precision: c.prec, Attention: c.attn}
			if c.prec == models.PrecisionInt8Static {
				o.CalibInputs = []*models.Inputs{calib}
			}
			p, err := models.Load(context.Background(), dir, o)
			require.NoError(t, err)
			if c.prec != models.PrecisionFP32 {
				require.Equal(t, encoder.AttentionMode(c.attn), models.Engine(p).Encoder.Attention(), "attention mode")
			}
			// The tolerances of TestPackedMatchesOneByOne.
			tol := 1e-5
			if c.prec != models.PrecisionFP32 {
				tol = 2e-2
			}
			checkPackedMatchesAlone(t, models.Engine(p), seqs, name+" "+c.prec.String()+" attention "+c.attn.String(), tol)
			p.Close()
		}
	}
}
