package models

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/int8bert/int8bert/models/encoder"
	"github.com/int8bert/int8bert/selector"
	"github.com/int8bert/int8bert/smoothquant"
	"github.com/int8bert/int8bert/tokenizer"
)

// Pipeline is a model with its tokenizer: text in, predictions out. It is
// safe for concurrent use. A model folder without a tokenizer loads as a
// pipeline whose Tok is nil: Forward runs token ids, and the text methods
// say that the tokenizer is missing.
//
// Every text method (one file of this package per task: classify.go,
// embed.go, answer.go) tokenizes its inputs, sorts them by length and
// runs them in packed passes of at most MaxBatchTokens real tokens (no
// padding computed, docs/DESIGN.md section 2.2), streaming: the memory of
// a call is bounded by that budget, not by the number of inputs, and
// results come back in the caller's order. A done context stops a call
// between micro-batches and between layers with ctx.Err(). Close waits
// for the calls in flight; any call after it returns ErrClosed.
type Pipeline struct {
	// Tok is the model folder's tokenizer; nil when it has none.
	Tok *tokenizer.Tokenizer
	m   *encoder.TaskModel
	// maxLength bounds every encoding (Options.MaxLength).
	maxLength int
	// maxBatchTokens bounds every forward pass (Options.MaxBatchTokens).
	maxBatchTokens int
	// prof is the model's profile (Options.Profile), or nil.
	prof *encoder.Profile
	// prompts are the folder's named prompts (PromptsFile).
	prompts prompts
	// st is what the folder's sentence-transformers files say (sentence.go).
	st *sentence
}

// DefaultMaxBatchTokens is the token budget of one forward pass of a
// Pipeline call (the real tokens of a packed pass, docs/DESIGN.md section
// 2.3) when Options.MaxBatchTokens is 0.
// Its buffers take about 20 MB on a 4-layer, 256-wide model and 60 MB
// (FP32) to 95 MB (INT8) on BERT-base; 2048 rows is past the size where
// the GEMMs stop getting faster per row.
const DefaultMaxBatchTokens = 2048

// encodeChunk is how many inputs a call tokenizes at a time: the
// tokenizer's Encodings of one chunk (Options.InputsOnly: ids, types and
// mask, 12 bytes a token) are garbage once its tokens are kept.
const encodeChunk = 1024

// loadPipeline loads the model in dir and the tokenizer next to it
// (tokenizer.json, or vocab.txt with tokenizer_config.json), if any.
func loadPipeline(dir string, fam *encoder.Family, o Options, eo encoder.Options) (*Pipeline, error) {
	tok, err := loadTokenizer(dir)
	if err != nil {
		return nil, err
	}
	pr, err := readPrompts(dir)
	if err != nil {
		return nil, err
	}
	m, err := encoder.LoadTask(dir, fam, eo)
	if err != nil {
		return nil, err
	}
	st, err := readSentence(dir, fam, m.Encoder.Config().Hidden)
	if err != nil {
		m.Close()
		return nil, err
	}
	p, err := newPipeline(m, tok, st.maxLength(o.MaxLength, m.Encoder.Config().MaxSeq()), o.MaxBatchTokens)
	if err != nil {
		m.Close()
		return nil, err
	}
	p.prof, p.prompts, p.st = eo.Profile, pr, st
	return p, nil
}

// loadTokenizer loads dir's tokenizer; nil without tokenizer files
// (tokenizer.json, vocab.txt, vocab.json with merges.txt, or a
// SentencePiece spm.model or sentencepiece.bpe.model: tokenizer.Find).
func loadTokenizer(dir string) (*tokenizer.Tokenizer, error) {
	if _, ok := tokenizer.Find(dir); !ok {
		return nil, nil
	}
	tok, err := tokenizer.Load(dir)
	if err != nil {
		return nil, encoder.Errorf(ErrConfig, "models: %w; the tokenizer files must be the model's own: download them again from its repository", err)
	}
	return tok, nil
}

// newPipeline pairs a loaded model and tokenizer (nil: none); maxLength 0
// is the model's longest sequence, at most 512; maxBatchTokens 0 is
// DefaultMaxBatchTokens. The tokenizer must not produce an id outside the
// model's embedding table, and maxLength must leave room for text after
// the tokenizer's special tokens.
func newPipeline(m *encoder.TaskModel, tok *tokenizer.Tokenizer, maxLength, maxBatchTokens int) (*Pipeline, error) {
	cfg := m.Encoder.Config()
	most := cfg.MaxSeq()
	switch {
	case maxBatchTokens < 0:
		return nil, fmt.Errorf("models: max batch tokens %d is negative (0 means the default, %d): %w", maxBatchTokens, DefaultMaxBatchTokens, ErrConfig)
	case maxBatchTokens == 0:
		maxBatchTokens = DefaultMaxBatchTokens
	}
	switch {
	case maxLength < 0:
		return nil, fmt.Errorf("models: options: MaxLength %d: want 0 (the model's longest sequence, at most 512) or 1 to %d: %w",
			maxLength, most, ErrConfig)
	case maxLength > most:
		return nil, fmt.Errorf("models: options: MaxLength %d: the model takes at most %d tokens (want 0 or up to %d): %w",
			maxLength, most, most, ErrConfig)
	case maxLength == 0:
		maxLength = min(most, 512)
	}
	if tok != nil {
		if n := tok.VocabSize(); n > cfg.Vocab {
			return nil, fmt.Errorf("models: the tokenizer has ids 0 to %d, and the model's embedding table has %d rows (vocab_size %d): they do not belong together: %w",
				n-1, cfg.Vocab, cfg.Vocab, ErrConfig)
		}
		if e, err := tok.Encode(""); err == nil && maxLength <= e.Len() {
			return nil, fmt.Errorf("models: options: MaxLength %d leaves no room for text: the tokenizer adds %d special tokens (want more than %d, up to %d): %w",
				maxLength, e.Len(), e.Len(), most, ErrConfig)
		}
	}
	return &Pipeline{m: m, Tok: tok, maxLength: maxLength, maxBatchTokens: maxBatchTokens}, nil
}

// MaxLength is the longest encoding in tokens (Options.MaxLength).
func (p *Pipeline) MaxLength() int { return p.maxLength }

// MaxBatchTokens is the token budget of one forward pass of a call
// (Options.MaxBatchTokens, DefaultMaxBatchTokens when that is 0).
func (p *Pipeline) MaxBatchTokens() int { return p.maxBatchTokens }

// SetMaxBatchTokens sets the token budget of the pipeline's later passes
// (n >= 1; it does not change the longest input, MaxLength): a server
// bounds it this way when a memory limit leaves too little for each
// instance's scratch at the budget it loaded with (docs/DESIGN.md section
// 9.10). Call it before the pipeline's calls start: it is not safe
// beside them.
func (p *Pipeline) SetMaxBatchTokens(n int) error {
	if err := p.refuseClosed("SetMaxBatchTokens"); err != nil {
		return err
	}
	if n < 1 {
		return fmt.Errorf("models: max batch tokens %d: want 1 or more: %w", n, ErrConfig)
	}
	p.maxBatchTokens = n
	return nil
}

// ScratchBytes is the memory of the buffers one forward pass of up to
// tokens tokens takes (it grows linearly with tokens): what each instance
// running a pass of the token budget holds beside the shared weights.
func (p *Pipeline) ScratchBytes(tokens int) int64 { return int64(p.m.Encoder.ScratchBytes(tokens)) }

// Task is what the model's head computes.
func (p *Pipeline) Task() Task { return Task(p.m.Task) }

// Labels are the class names by index of a sequence classifier
// (config.json's id2label, LABEL_i where it names none); nil otherwise.
func (p *Pipeline) Labels() []string { return p.m.Labels }

// ProblemType is config.json's problem_type ("", "regression",
// "single_label_classification" or "multi_label_classification"); with
// the number of labels it picks the scores' function (DefaultFunction).
func (p *Pipeline) ProblemType() string { return p.m.ProblemType }

// Family is the model's family as the INT8 artifact's recipe records it
// ("bert", "distilbert", "xlm-roberta").
func (p *Pipeline) Family() string { return p.m.Family.Name }

// FamilyDisplay is the family's name in messages ("BERT", "DistilBERT",
// "XLM-RoBERTa").
func (p *Pipeline) FamilyDisplay() string { return p.m.Family.Display() }

// Describe names the model for a user: "XLM-RoBERTa with a sequence
// classification head (XLMRobertaForSequenceClassification)".
func (p *Pipeline) Describe() string { return p.m.Family.Describe(p.m.Task) }

// Architecture is the model's Hugging Face class name
// ("BertForSequenceClassification").
func (p *Pipeline) Architecture() string { return p.m.Family.Classes[0] + p.m.Task.String() }

// Precision is the precision the model runs at (never PrecisionAsStored).
func (p *Pipeline) Precision() Precision { return Precision(p.m.Encoder.Precision()) }

// Attention returns the arithmetic the model's attention runs in:
// AttentionF32, AttentionInt8 or AttentionBF16 (never AttentionAuto).
func (p *Pipeline) Attention() AttentionMode { return AttentionMode(p.m.Encoder.Attention()) }

// Config is the encoder's shape and numerics.
func (p *Pipeline) Config() Config { return configOf(p.m.Encoder.Config()) }

// Selector is the selector that runs the model's linears.
func (p *Pipeline) Selector() *selector.Selector { return p.m.Encoder.Selector() }

// Threads is the number of threads per linear layer.
func (p *Pipeline) Threads() int { return p.m.Encoder.Threads() }

// Recipe is how an INT8 model was quantized (nil for FP32 and BF16).
func (p *Pipeline) Recipe() *smoothquant.Recipe { return p.m.Encoder.Recipe() }

// WeightBytes is the size of the weights the model runs on.
func (p *Pipeline) WeightBytes() int { return p.m.WeightBytes() }

// Profile is a copy of where the model's forward passes spent their time
// so far, when it was loaded with Options.Profile (zero otherwise).
func (p *Pipeline) Profile() Profile {
	if p.prof == nil {
		return Profile{}
	}
	s := p.prof.Snapshot()
	return Profile{Embeddings: s.Embeddings, Linear: s.Linear, Attention: s.Attention, LayerNorm: s.LayerNorm,
		LinearFLOPs: s.LinearFLOPs, Passes: s.Passes,
		AttentionHeads: s.AttentionHeads, AttentionC2P: s.AttentionC2P, AttentionP2C: s.AttentionP2C}
}

// tokenizer is p.Tok, or an error naming what needs it when the model
// folder had none.
func (p *Pipeline) tokenizer(what string) (*tokenizer.Tokenizer, error) {
	if p.Tok == nil {
		dir := p.m.Dir()
		if dir == "" {
			dir = "the model"
		}
		return nil, encoder.Errorf(ErrConfig, "models: %s: %s has no tokenizer; copy the model's tokenizer.json (or vocab.txt, spm.model or sentencepiece.bpe.model, with tokenizer_config.json) into it, or run token ids with Forward",
			what, dir)
	}
	return p.Tok, nil
}

// Dir is the folder the model was loaded from (a hub id's snapshot
// folder in the cache), or "" for a model built in memory.
func (p *Pipeline) Dir() string { return p.m.Dir() }

// Close waits for the calls in flight, then releases the model and
// unmaps its weights; every call after it (or racing with it) returns
// ErrClosed, and a second Close returns nil. It must not be called from
// inside a call on the pipeline (a Progress callback, say): it would wait
// for itself.
func (p *Pipeline) Close() error { return p.m.Close() }

// compact keeps what the model reads of e.
func compact(e *tokenizer.Encoding) encoder.Tokens {
	t := encoder.Tokens{IDs: slices.Clone(e.IDs)}
	if slices.ContainsFunc(e.TypeIDs, func(v int32) bool { return v != 0 }) {
		t.Types = slices.Clone(e.TypeIDs)
	}
	if slices.ContainsFunc(e.AttentionMask, func(v int32) bool { return v != 1 }) {
		t.Mask = slices.Clone(e.AttentionMask)
	}
	return t
}

// encodeAll tokenizes n inputs encodeChunk at a time (chunk encodes the
// inputs [lo, hi), one encodes input i alone) and keeps their tokens. ctx
// is checked between chunks, and by the tokenizer's workers within one.
func encodeAll(ctx context.Context, n int, chunk func(lo, hi int) ([]tokenizer.Encoding, error), one func(i int) error) ([]encoder.Tokens, error) {
	out := make([]encoder.Tokens, 0, n)
	for lo := 0; lo < n; lo += encodeChunk {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		hi := min(lo+encodeChunk, n)
		encs, err := chunk(lo, hi)
		if err != nil {
			if cerr := ctx.Err(); cerr != nil {
				return nil, cerr
			}
			// The tokenizer numbers the items of its batch, the chunk:
			// name the input of the call instead.
			for i := lo; i < hi && lo > 0; i++ {
				if ierr := one(i); ierr != nil {
					return nil, fmt.Errorf("batch item %d: %w", i, ierr)
				}
			}
			return nil, err
		}
		for i := range encs {
			out = append(out, compact(&encs[i]))
		}
	}
	return out, nil
}

// encodeTexts tokenizes texts for what (a method's name in errors),
// truncated to MaxLength, keeping their tokens only (encodeAll).
func (p *Pipeline) encodeTexts(ctx context.Context, what string, texts []string) ([]encoder.Tokens, error) {
	return p.encodeTextsWith(ctx, what, texts, "", TruncateRight)
}

// encodeTextsWith is encodeTexts with prompt prefixed to every text,
// truncated from the side dir says.
func (p *Pipeline) encodeTextsWith(ctx context.Context, what string, texts []string, prompt string, dir TruncationDirection) ([]encoder.Tokens, error) {
	tok, err := p.tokenizer(what)
	if err != nil {
		return nil, err
	}
	o, err := p.tokenizerOptions(EncodeOptions{Truncate: true, Direction: dir})
	if err != nil {
		return nil, err
	}
	texts = p.st.lowerAll(withPrompt(prompt, texts))
	encs, err := encodeAll(ctx, len(texts),
		func(lo, hi int) ([]tokenizer.Encoding, error) { return tok.EncodeBatch(ctx, texts[lo:hi], o) },
		func(i int) error { _, err := tok.Encode(texts[i], o); return err })
	return encs, inputError(ctx, what, err)
}

// inputError marks a tokenizer's error about the texts of a call as bad
// input (ErrInput); a cancelled context's error is returned as it is.
func inputError(ctx context.Context, what string, err error) error {
	if err == nil || (ctx.Err() != nil && errors.Is(err, ctx.Err())) {
		return err
	}
	return fmt.Errorf("models: %s: %w: %w", what, err, ErrInput)
}

// stream runs seqs through the model in packed passes under the
// pipeline's token budget (encoder.TaskModel.Stream). The caller has
// entered p.m.
func (p *Pipeline) stream(ctx context.Context, seqs []encoder.Tokens, each func(idx []int, in *encoder.Inputs, out *encoder.TaskOutput) error) error {
	return p.m.Stream(ctx, seqs, p.maxBatchTokens, each)
}
