package encoder

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/int8bert/int8bert/smoothquant"
	"github.com/int8bert/int8bert/tokenizer"
)

// Pipeline is a model with its tokenizer: text in, predictions out. It is
// safe for concurrent use. A model folder without a tokenizer loads as a
// pipeline whose Tok is nil: its Model runs token ids (Forward), and the
// text methods say that the tokenizer is missing.
//
// Every text method tokenizes its inputs, sorts them by length and runs
// them in packed passes of at most MaxBatchTokens real tokens (no padding
// computed, docs/DESIGN.md section 2.2), streaming: the memory of a call is bounded by that budget, not
// by the number of inputs, and results come back in the caller's order.
// A done context stops a call between micro-batches and between layers
// with ctx.Err(). Close waits for the calls in flight; any call after it
// returns ErrClosed.
type Pipeline struct {
	Model *TaskModel
	Tok   *tokenizer.Tokenizer
	// maxLength bounds every encoding (Options.MaxLength).
	maxLength int
	// maxBatchTokens bounds every forward pass (Options.MaxBatchTokens).
	maxBatchTokens int
}

// loadPipeline loads the model in dir and the tokenizer next to it
// (tokenizer.json, or vocab.txt with tokenizer_config.json), if any.
func loadPipeline(dir string, fam *Family, o Options) (*Pipeline, error) {
	tok, err := loadTokenizer(dir)
	if err != nil {
		return nil, err
	}
	m, err := loadTask(dir, fam, o)
	if err != nil {
		return nil, err
	}
	p, err := newPipeline(m, tok, o.MaxLength, o.MaxBatchTokens)
	if err != nil {
		m.Close()
		return nil, err
	}
	return p, nil
}

// loadTokenizer loads dir's tokenizer; nil without tokenizer files.
func loadTokenizer(dir string) (*tokenizer.Tokenizer, error) {
	for _, f := range []string{"tokenizer.json", "vocab.txt"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			tok, err := tokenizer.Load(dir)
			if err != nil {
				return nil, fmt.Errorf("encoder: %w: %w", err, ErrConfig)
			}
			return tok, nil
		}
	}
	return nil, nil
}

// newPipeline pairs a loaded model and tokenizer (nil: none); maxLength 0
// is the model's longest sequence, at most 512; maxBatchTokens 0 is
// DefaultMaxBatchTokens. The tokenizer must not produce an id outside the
// model's embedding table, and maxLength must leave room for text after
// the tokenizer's special tokens.
func newPipeline(m *TaskModel, tok *tokenizer.Tokenizer, maxLength, maxBatchTokens int) (*Pipeline, error) {
	cfg := m.Encoder.Config()
	most := cfg.MaxSeq()
	switch {
	case maxBatchTokens < 0:
		return nil, fmt.Errorf("encoder: max batch tokens %d is negative (0 means the default, %d): %w", maxBatchTokens, DefaultMaxBatchTokens, ErrConfig)
	case maxBatchTokens == 0:
		maxBatchTokens = DefaultMaxBatchTokens
	}
	switch {
	case maxLength < 0:
		return nil, fmt.Errorf("encoder: options: MaxLength %d: want 0 (the model's longest sequence, at most 512) or 1 to %d: %w",
			maxLength, most, ErrConfig)
	case maxLength > most:
		return nil, fmt.Errorf("encoder: options: MaxLength %d: the model takes at most %d tokens (want 0 or up to %d): %w",
			maxLength, most, most, ErrConfig)
	case maxLength == 0:
		maxLength = min(most, 512)
	}
	if tok != nil {
		if n := tok.VocabSize(); n > cfg.Vocab {
			return nil, fmt.Errorf("encoder: the tokenizer has ids 0 to %d, and the model's embedding table has %d rows (vocab_size %d): they do not belong together: %w",
				n-1, cfg.Vocab, cfg.Vocab, ErrConfig)
		}
		if e, err := tok.Encode(""); err == nil && maxLength <= e.Len() {
			return nil, fmt.Errorf("encoder: options: MaxLength %d leaves no room for text: the tokenizer adds %d special tokens (want more than %d, up to %d): %w",
				maxLength, e.Len(), e.Len(), most, ErrConfig)
		}
	}
	return &Pipeline{Model: m, Tok: tok, maxLength: maxLength, maxBatchTokens: maxBatchTokens}, nil
}

// MaxLength is the longest encoding in tokens (Options.MaxLength).
func (p *Pipeline) MaxLength() int { return p.maxLength }

// MaxBatchTokens is the token budget of one forward pass of a call
// (Options.MaxBatchTokens, DefaultMaxBatchTokens when that is 0).
func (p *Pipeline) MaxBatchTokens() int { return p.maxBatchTokens }

// tokenizer is p.Tok, or an error naming what needs it when the model
// folder had none.
func (p *Pipeline) tokenizer(what string) (*tokenizer.Tokenizer, error) {
	if p.Tok == nil {
		dir := p.Model.dir
		if dir == "" {
			dir = "the model"
		}
		return nil, fmt.Errorf("encoder: %s: %s has no tokenizer (tokenizer.json, or vocab.txt with tokenizer_config.json); run token ids with Model.Forward: %w",
			what, dir, ErrConfig)
	}
	return p.Tok, nil
}

// Close waits for the calls in flight, then releases the model (see
// TaskModel.Close); every call after it returns ErrClosed.
func (p *Pipeline) Close() error { return p.Model.Close() }

// encodeTexts tokenizes texts for what (a method's name in errors),
// truncated to MaxLength, keeping their tokens only (encodeAll).
func (p *Pipeline) encodeTexts(ctx context.Context, what string, texts []string) ([]tokens, error) {
	tok, err := p.tokenizer(what)
	if err != nil {
		return nil, err
	}
	o := tokenizer.Options{MaxLength: p.maxLength, Truncation: tokenizer.LongestFirst, InputsOnly: true}
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
	return fmt.Errorf("encoder: %s: %w: %w", what, err, ErrInput)
}

// Classification is one text's prediction, as the Hugging Face
// text-classification pipeline gives it (see ClassifyOptions).
type Classification struct {
	// Label, Index and Score are the best label (the first of equal
	// scores) and its score: the pipeline's result without top_k.
	Label string  `json:"label"`
	Index int     `json:"index"`
	Score float32 `json:"score"`
	// Scores are every label's score by index, after Function.
	Scores []float32 `json:"scores"`
	// Logits are the head's raw outputs by label index.
	Logits []float32 `json:"logits"`
	// Top are the ClassifyOptions.TopK best labels, best first (the
	// pipeline's result with top_k); nil when TopK is 0.
	Top []LabelScore `json:"top,omitempty"`
	// Function is the function the scores come from (FunctionDefault
	// resolved to the model's own).
	Function ClassificationFunction `json:"function"`
}

// Classify predicts labels for each text (texts longer than MaxLength are
// truncated), scored as o says (the zero value: as Hugging Face's
// text-classification pipeline does by default, see ClassifyOptions and
// TaskModel.DefaultFunction). The model must have a sequence
// classification head; bad options are errors wrapping ErrInput.
func (p *Pipeline) Classify(ctx context.Context, texts []string, o ClassifyOptions) ([]Classification, error) {
	if err := p.Model.enter(); err != nil {
		return nil, err
	}
	defer p.Model.leave()
	if err := p.needClassifier(o); err != nil {
		return nil, err
	}
	encs, err := p.encodeTexts(ctx, "classify", texts)
	if err != nil {
		return nil, err
	}
	return p.classify(ctx, encs, o)
}

// ClassifyPairs predicts labels for each pair of texts (premise and
// hypothesis, query and passage for a cross-encoder), truncated longest
// first to MaxLength, scored as Classify's.
func (p *Pipeline) ClassifyPairs(ctx context.Context, pairs []tokenizer.Pair, o ClassifyOptions) ([]Classification, error) {
	if err := p.Model.enter(); err != nil {
		return nil, err
	}
	defer p.Model.leave()
	if err := p.needClassifier(o); err != nil {
		return nil, err
	}
	tok, err := p.tokenizer("classify pairs")
	if err != nil {
		return nil, err
	}
	to := tokenizer.Options{MaxLength: p.maxLength, Truncation: tokenizer.LongestFirst, InputsOnly: true}
	encs, err := encodeAll(ctx, len(pairs),
		func(lo, hi int) ([]tokenizer.Encoding, error) { return tok.EncodePairBatch(ctx, pairs[lo:hi], to) },
		func(i int) error { _, err := tok.EncodePair(pairs[i].A, pairs[i].B, to); return err })
	if err != nil {
		return nil, inputError(ctx, "classify pairs", err)
	}
	return p.classify(ctx, encs, o)
}

func (p *Pipeline) needClassifier(o ClassifyOptions) error {
	if p.Model.Task != TaskSequenceClassification {
		return fmt.Errorf("encoder: classify: the model is %s, not a sequence classifier: %w", p.Model.Family.Describe(p.Model.Task), ErrConfig)
	}
	return o.validate()
}

func (p *Pipeline) classify(ctx context.Context, encs []tokens, o ClassifyOptions) ([]Classification, error) {
	out, err := p.logits(ctx, encs)
	if err != nil {
		return nil, err
	}
	n := len(p.Model.Labels)
	res := make([]Classification, len(encs))
	for b := range res {
		res[b] = p.Model.postprocess(out.Logits[b*n:(b+1)*n], o)
	}
	return res, nil
}

// Pooling is how Embed turns token states into one vector.
type Pooling int

// Poolings.
const (
	// PoolMean averages the unmasked tokens' last hidden states.
	PoolMean Pooling = iota
	// PoolCLS takes the first token's last hidden state.
	PoolCLS
)

// String is "mean", "cls", or "Pooling(N)" for a value other than the two.
func (p Pooling) String() string {
	switch p {
	case PoolMean:
		return "mean"
	case PoolCLS:
		return "cls"
	}
	return fmt.Sprintf("Pooling(%d)", int(p))
}

// EmbedOptions control Embed.
type EmbedOptions struct {
	// Pool is how token states become one vector (PoolMean by default).
	Pool Pooling
	// Normalize scales every vector to unit L2 norm.
	Normalize bool
}

// Embed returns one vector per text (texts longer than MaxLength are
// truncated), pooled and normalised as o says.
func (p *Pipeline) Embed(ctx context.Context, texts []string, o EmbedOptions) ([][]float32, error) {
	if err := p.Model.enter(); err != nil {
		return nil, err
	}
	defer p.Model.leave()
	if o.Pool != PoolMean && o.Pool != PoolCLS {
		return nil, fmt.Errorf("encoder: embed: %v: want PoolMean (0, the default) or PoolCLS (1): %w", o.Pool, ErrInput)
	}
	encs, err := p.encodeTexts(ctx, "embed", texts)
	if err != nil {
		return nil, err
	}
	res := make([][]float32, len(texts))
	err = p.stream(ctx, encs, func(idx []int, in *Inputs, out *TaskOutput) error {
		var v []float32
		if o.Pool == PoolCLS {
			v = out.CLSRows()
		} else {
			v = out.MeanPool(in.Mask)
		}
		h := out.Hidden
		if o.Normalize {
			Normalize(v, len(idx), h)
		}
		for r, i := range idx {
			res[i] = v[r*h : (r+1)*h : (r+1)*h]
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// QAOptions control Answer.
type QAOptions struct {
	// NBest answers are returned, best first (default 1).
	NBest int
	// MaxAnswerLength bounds an answer in tokens (default 30).
	MaxAnswerLength int
	// DocStride is how many tokens consecutive windows over a long context
	// share (default 128, at most a quarter of the window).
	DocStride int
}

// Answer is a span of the context.
type Answer struct {
	Text string `json:"answer"`
	// Start and End are [start, end) in runes of the context.
	Start int `json:"start"`
	End   int `json:"end"`
	// Score is start_logit + end_logit.
	Score float32 `json:"score"`
}

// Answer finds the best spans of context that answer question. A context
// longer than one window is split into overlapping windows (DocStride
// tokens shared), and the best spans over all windows are returned. The
// model must have a question answering head.
func (p *Pipeline) Answer(ctx context.Context, question, contextText string, o QAOptions) ([]Answer, error) {
	if err := p.Model.enter(); err != nil {
		return nil, err
	}
	defer p.Model.leave()
	if p.Model.Task != TaskQuestionAnswering {
		return nil, fmt.Errorf("encoder: answer: the model is %s, not question answering: %w", p.Model.Family.Describe(p.Model.Task), ErrConfig)
	}
	if o.NBest <= 0 {
		o.NBest = 1
	}
	if o.MaxAnswerLength <= 0 {
		o.MaxAnswerLength = 30
	}
	if o.DocStride <= 0 {
		o.DocStride = 128
	}
	o.DocStride = min(o.DocStride, p.maxLength/4)
	tok, err := p.tokenizer("answer")
	if err != nil {
		return nil, err
	}
	first, err := tok.EncodePair(question, contextText, tokenizer.Options{
		MaxLength: p.maxLength, Truncation: tokenizer.OnlySecond, Stride: o.DocStride, Overflow: true})
	if err != nil {
		return nil, inputError(ctx, "answer", err)
	}
	windows := append([]tokenizer.Encoding{first}, first.Overflowing...)
	seqs := make([]tokens, len(windows))
	for w := range windows {
		seqs[w] = compact(&windows[w])
	}
	// Each window's start and end logits, its own tokens only.
	starts, ends := make([][]float32, len(windows)), make([][]float32, len(windows))
	err = p.stream(ctx, seqs, func(idx []int, in *Inputs, out *TaskOutput) error {
		for r, w := range idx {
			base, _ := out.Rows(r)
			starts[w] = slices.Clone(out.StartLogits[base : base+windows[w].Len()])
			ends[w] = slices.Clone(out.EndLogits[base : base+windows[w].Len()])
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	runes := []rune(contextText)
	type cand struct {
		start, end int
		score      float32
	}
	var cands []cand
	for w, e := range windows {
		for i := 0; i < e.Len(); i++ {
			if e.SequenceIDs[i] != 1 {
				continue
			}
			for j := i; j < e.Len() && j-i < o.MaxAnswerLength; j++ {
				if e.SequenceIDs[j] != 1 {
					break
				}
				s, en := e.Offsets[i][0], e.Offsets[j][1]
				if en <= s || en > len(runes) {
					continue
				}
				cands = append(cands, cand{s, en, starts[w][i] + ends[w][j]})
			}
		}
	}
	sort.SliceStable(cands, func(a, b int) bool { return cands[a].score > cands[b].score })
	var res []Answer
	seen := map[[2]int]bool{}
	for _, c := range cands {
		if len(res) == o.NBest {
			break
		}
		if seen[[2]int{c.start, c.end}] {
			continue
		}
		seen[[2]int{c.start, c.end}] = true
		res = append(res, Answer{Text: string(runes[c.start:c.end]), Start: c.start, End: c.end, Score: c.score})
	}
	if len(res) == 0 {
		return nil, fmt.Errorf("encoder: answer: the context has no tokens to answer from: %w", ErrInput)
	}
	return res, nil
}

// calibBatches tokenizes texts (truncated to MaxLength) into padded
// batches of batch texts, longest first so that padding stays small.
func (p *Pipeline) calibBatches(ctx context.Context, texts []string, batch int) ([]*Inputs, error) {
	if batch <= 0 {
		batch = 8
	}
	if len(texts) == 0 {
		return nil, nil
	}
	seqs, err := p.encodeTexts(ctx, "calibration texts", texts)
	if err != nil {
		return nil, err
	}
	order := make([]int, len(seqs))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return len(seqs[order[a]].ids) > len(seqs[order[b]].ids) })
	var out []*Inputs
	for i := 0; i < len(order); i += batch {
		idx := order[i:min(i+batch, len(order))]
		seq := len(seqs[idx[0]].ids)
		n := len(idx) * seq
		var types []int32
		if p.Model.Encoder.Config().TypeVocab > 0 {
			types = make([]int32, n)
		}
		out = append(out, p.padInputs(seqs, idx, seq, make([]int32, n), make([]int32, n), types))
	}
	return out, nil
}

// Quantize calibrates the FP32 pipeline's model on texts and returns an
// INT8 pipeline at precision prec with the same tokenizer and MaxLength
// (see TaskModel.Quantize). Empty or NaN-producing texts are errors.
// Options.Precision quantizes at load instead.
func (p *Pipeline) Quantize(ctx context.Context, texts []string, prec Precision, o QuantizeOptions) (*Pipeline, error) {
	return p.quantize(ctx, texts, nil, prec, o)
}

// quantize is Quantize on texts, then the token batches extra.
func (p *Pipeline) quantize(ctx context.Context, texts []string, extra []*Inputs, prec Precision, o QuantizeOptions) (*Pipeline, error) {
	if err := p.Model.enter(); err != nil {
		return nil, err
	}
	defer p.Model.leave()
	if err := o.check(); err != nil {
		return nil, err
	}
	for i, t := range texts {
		if strings.TrimSpace(t) == "" {
			return nil, fmt.Errorf("encoder: calibration text %d is empty: %w", i+1, ErrInput)
		}
	}
	batches, err := p.calibBatches(ctx, texts, o.BatchSize)
	if err != nil {
		return nil, err
	}
	batches = append(batches, extra...)
	o.CalibTexts = len(texts)
	if len(texts) > 0 {
		o.CalibHash = smoothquant.HashTexts(texts)
	}
	q, err := p.Model.Quantize(ctx, batches, prec, o)
	if err != nil {
		return nil, err
	}
	return &Pipeline{Model: q, Tok: p.Tok, maxLength: p.maxLength, maxBatchTokens: p.maxBatchTokens}, nil
}

// Save writes an INT8 pipeline to dir as a model folder that Load opens
// without recalibration (see TaskModel.Save).
func (p *Pipeline) Save(dir string) error { return p.Model.Save(dir) }

// Save writes an INT8 model to dir as a model folder that Load opens
// without recalibration: the artifact (ArtifactFile), config.json and the
// tokenizer files of the folder the FP32 model came from, and the tuning
// record of the model's keys (TuningRecordFile) that its selector has
// tuned, so that Load on this CPU and build starts warm.
func (m *TaskModel) Save(dir string) error {
	if err := m.enter(); err != nil {
		return err
	}
	defer m.leave()
	if !m.Encoder.prec.Int8() {
		return fmt.Errorf("encoder: save: the model is %s; only INT8 models are saved: %w", m.Encoder.prec, ErrConfig)
	}
	if m.dir == "" {
		return fmt.Errorf("encoder: save: the model was not loaded from a folder, so it has no config.json and tokenizer to copy: %w", ErrConfig)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := m.saveArtifact(filepath.Join(dir, ArtifactFile)); err != nil {
		return err
	}
	for _, f := range []string{"config.json", "tokenizer.json", "vocab.txt", "tokenizer_config.json", "special_tokens_map.json",
		"sentencepiece.bpe.model"} {
		src := filepath.Join(m.dir, f)
		if !fileExists(src) {
			continue
		}
		if same, _ := sameFile(src, filepath.Join(dir, f)); same {
			continue
		}
		if err := copyFile(src, filepath.Join(dir, f)); err != nil {
			return err
		}
	}
	return m.SaveTuningRecord(dir)
}
