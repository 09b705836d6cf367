package models

import (
	"context"
	"fmt"
	"time"

	"github.com/int8bert/int8bert/checkpoint"
	"github.com/int8bert/int8bert/models/encoder"
)

// Task is what the loaded model's head computes.
type Task int

// The heads a checkpoint can carry.
const (
	// TaskBase: last hidden state, and the pooler output where the model
	// has a pooler (Embed).
	TaskBase = Task(encoder.TaskBase)
	// TaskSequenceClassification: logits per sequence (Classify).
	TaskSequenceClassification = Task(encoder.TaskSequenceClassification)
	// TaskQuestionAnswering: start and end logits per token (Answer).
	TaskQuestionAnswering = Task(encoder.TaskQuestionAnswering)
	// TaskMaskedLM: logits over the vocabulary per token (FillMask,
	// EmbedSparse).
	TaskMaskedLM = Task(encoder.TaskMaskedLM)
	// TaskTokenClassification: logits per token (TokenClassify).
	TaskTokenClassification = Task(encoder.TaskTokenClassification)
	// TaskReplacedTokenDetection: one logit per token, an ELECTRA
	// discriminator's (ElectraForPreTraining; Forward's Logits, positive
	// where a token looks replaced). The pipeline embeds as a base
	// model's does.
	TaskReplacedTokenDetection = Task(encoder.TaskReplacedTokenDetection)
)

// String names the task as Hugging Face's class suffix does ("Model",
// "ForSequenceClassification", "ForQuestionAnswering").
func (t Task) String() string { return encoder.Task(t).String() }

// Head names the task's head in words for messages ("a sequence
// classification head", "no head").
func (t Task) Head() string { return encoder.Task(t).Head() }

// Inputs are a batch of token ids as the model reads them (Forward,
// Options.CalibInputs). Padded: Batch sequences of Seq tokens each, IDs,
// TypeIDs (nil: all 0) and Mask (nil: all 1) [Batch][Seq]. Packed (Lens
// set): the sequences back to back, sequence b's from sum(Lens[:b]) on;
// Batch must be len(Lens), and Seq 0 or the longest of Lens; no padding
// is computed (docs/DESIGN.md section 2.2).
type Inputs struct {
	Batch, Seq int
	IDs        []int32
	TypeIDs    []int32
	Mask       []int32
	Lens       []int
}

// engine is in as the encoder reads it (the same arrays).
func (in *Inputs) engine() *encoder.Inputs {
	return &encoder.Inputs{Batch: in.Batch, Seq: in.Seq, IDs: in.IDs, TypeIDs: in.TypeIDs, Mask: in.Mask, Lens: in.Lens}
}

// Output holds a forward pass's outputs under Hugging Face's names, in
// the layout of the inputs: Last is [Batch][Seq][Hidden] for padded
// inputs, [sum(Lens)][Hidden] for packed ones (Offsets then says where
// each sequence's rows start).
type Output struct {
	Batch, Seq, Hidden int
	// Last is the last hidden state.
	Last []float32
	// HiddenStates are, when asked for, the embeddings' and every layer's
	// output (HiddenStates[0] is the embeddings).
	HiddenStates [][]float32
	// Offsets are, for packed inputs, the first row of every sequence and
	// the end of the last ([Batch+1]); nil for padded inputs.
	Offsets []int
	// PoolerOutput is [Batch][Hidden] where the model has a pooler.
	PoolerOutput []float32
	// Logits is [Batch][labels] (TaskSequenceClassification), one row
	// of labels per row of Last (TaskTokenClassification), one row of
	// Vocab values per row of Last (TaskMaskedLM), or one value per row
	// of Last (TaskReplacedTokenDetection).
	Logits []float32
	// StartLogits and EndLogits are one per row of Last
	// (TaskQuestionAnswering).
	StartLogits, EndLogits []float32
}

// Rows returns the rows [start, end) of Last (and of the per-token head
// outputs) that hold sequence b: its Seq rows, padding included, in the
// padded layout; its own tokens in the packed one.
func (o *Output) Rows(b int) (start, end int) { return o.engine().Rows(b) }

// MeanPool averages each sequence's hidden states over its unmasked
// tokens: [Batch][Hidden]. mask is the inputs' (one value per row of
// Last); nil counts every row of a sequence. A sequence with no token
// gives zeros.
func (o *Output) MeanPool(mask []int32) []float32 { return o.engine().MeanPool(mask) }

// CLSRows gathers the first token of every sequence: [Batch][Hidden].
func (o *Output) CLSRows() []float32 { return o.engine().CLSRows() }

// engine is o's encoder part as the encoder reads it (the same arrays).
func (o *Output) engine() *encoder.Output {
	return &encoder.Output{Batch: o.Batch, Seq: o.Seq, Hidden: o.Hidden, Last: o.Last, HiddenStates: o.HiddenStates, Offsets: o.Offsets}
}

// Forward runs the encoder and the head on token ids; keepHidden also
// returns every layer's output. It stops between layers once ctx is done,
// returning ctx.Err().
func (p *Pipeline) Forward(ctx context.Context, in *Inputs, keepHidden bool) (*Output, error) {
	if err := p.refuseClosed("Forward"); err != nil {
		return nil, err
	}
	r, err := p.m.ForwardContext(ctx, in.engine(), keepHidden)
	if err != nil {
		return nil, err
	}
	o := r.Output
	return &Output{Batch: o.Batch, Seq: o.Seq, Hidden: o.Hidden, Last: o.Last, HiddenStates: o.HiddenStates, Offsets: o.Offsets,
		PoolerOutput: r.PoolerOutput, Logits: r.Logits, StartLogits: r.StartLogits, EndLogits: r.EndLogits}, nil
}

// Config is the shape of a model's encoder (Pipeline.Config).
type Config struct {
	Vocab, Hidden, Layers, Heads, Intermediate int
	// MaxPositions is the size of the position embedding table, TypeVocab
	// the number of token types (0: none, DistilBERT) and PaddingIdx the
	// padding token's id (XLM-R numbers positions from it).
	MaxPositions, TypeVocab, PaddingIdx int
	// maxSeq is the longest sequence the position table allows.
	maxSeq int
}

// configOf is the encoder's c.
func configOf(c encoder.Config) Config {
	return Config{Vocab: c.Vocab, Hidden: c.Hidden, Layers: c.Layers, Heads: c.Heads, Intermediate: c.Intermediate,
		MaxPositions: c.MaxPositions, TypeVocab: c.TypeVocab, PaddingIdx: c.PaddingIdx, maxSeq: c.MaxSeq()}
}

// MaxSeq is the longest sequence the position table allows.
func (c Config) MaxSeq() int { return c.maxSeq }

// Profile is where a model's forward passes spent their time
// (Options.Profile, Pipeline.Profile).
type Profile struct {
	Embeddings, Linear, Attention, LayerNorm time.Duration
	// LinearFLOPs counts 2*M*K*N of every linear layer run.
	LinearFLOPs float64
	// Passes is the number of forward passes.
	Passes int
	// AttentionHeads is attention's per-head work summed over the
	// goroutines that ran it (not wall time, which Attention is);
	// AttentionC2P and AttentionP2C are the parts of it DeBERTa's
	// content-to-position and position-to-content terms took (zero for
	// the other families), the rest being the content term, softmax and
	// context.
	AttentionHeads, AttentionC2P, AttentionP2C time.Duration
}

// ConfigOf is the shape of the encoder of a config.json, as Load reads it
// (the family from its model_type or architectures).
func ConfigOf(cfg *checkpoint.Config) (Config, error) {
	fam, err := familyOf(cfg)
	if err != nil {
		return Config{}, fmt.Errorf("models: %w", err)
	}
	c, err := fam.Config(cfg)
	if err != nil {
		return Config{}, err
	}
	return configOf(c), nil
}

// ArchitectureOf is the Hugging Face class name of task in the family of
// a config.json ("DistilBertForSequenceClassification").
func ArchitectureOf(cfg *checkpoint.Config, task Task) (string, error) {
	fam, err := familyOf(cfg)
	if err != nil {
		return "", fmt.Errorf("models: %w", err)
	}
	return fam.Classes[0] + task.String(), nil
}
