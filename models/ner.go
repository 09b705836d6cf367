package models

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/int8bert/int8bert/models/encoder"
	"github.com/int8bert/int8bert/tokenizer"
)

// AggregationStrategy is how TokenClassify fuses tokens into entities, as
// aggregation_strategy of Hugging Face's token-classification pipeline.
type AggregationStrategy int

// The strategies (docs/DESIGN.md section 2.8).
const (
	// AggregateNone gives every token that is not a special token, with
	// its best label (Entity.Entity) and index.
	AggregateNone AggregationStrategy = iota
	// AggregateSimple groups adjacent tokens of the same tag (B-/I- prefix
	// removed; a B- token starts a new group).
	AggregateSimple
	// AggregateFirst labels each word with its first token's best label,
	// then groups as AggregateSimple.
	AggregateFirst
	// AggregateAverage labels each word with the best of its tokens'
	// averaged scores, then groups.
	AggregateAverage
	// AggregateMax labels each word with its most confident token's best
	// label, then groups.
	AggregateMax
)

var aggregationNames = []string{"none", "simple", "first", "average", "max"}

// String is the strategy's name as the Hugging Face pipeline spells it.
func (a AggregationStrategy) String() string {
	if a < 0 || int(a) >= len(aggregationNames) {
		return fmt.Sprintf("AggregationStrategy(%d)", int(a))
	}
	return aggregationNames[a]
}

func (a AggregationStrategy) valid() error {
	if a < 0 || int(a) >= len(aggregationNames) {
		return fmt.Errorf("models: token classify: aggregation_strategy %d is not one of %s: %w", int(a), strings.Join(aggregationNames, ", "), ErrInput)
	}
	return nil
}

// ParseAggregationStrategy reads a strategy's name in any case ("" is
// AggregateNone, the pipeline's default); any other name is an error
// wrapping ErrInput.
func ParseAggregationStrategy(s string) (AggregationStrategy, error) {
	if s == "" {
		return AggregateNone, nil
	}
	for i, n := range aggregationNames {
		if strings.EqualFold(s, n) {
			return AggregationStrategy(i), nil
		}
	}
	return 0, fmt.Errorf("models: token classify: aggregation_strategy %q is not one of %s: %w", s, strings.Join(aggregationNames, ", "), ErrInput)
}

// MarshalText writes the strategy's name.
func (a AggregationStrategy) MarshalText() ([]byte, error) {
	if err := a.valid(); err != nil {
		return nil, err
	}
	return []byte(a.String()), nil
}

// UnmarshalText reads a name as ParseAggregationStrategy does.
func (a *AggregationStrategy) UnmarshalText(b []byte) error {
	v, err := ParseAggregationStrategy(string(b))
	if err != nil {
		return err
	}
	*a = v
	return nil
}

// TokenClassifyOptions control TokenClassify as aggregation_strategy and
// ignore_labels control Hugging Face's token-classification pipeline; the
// zero value is the pipeline's defaults.
type TokenClassifyOptions struct {
	AggregationStrategy AggregationStrategy
	// IgnoreLabels are the labels (entity groups, with a strategy other
	// than AggregateNone) left out of the result: nil is the pipeline's
	// default, ["O"]; an empty, non-nil slice leaves out nothing.
	IgnoreLabels []string
	// Stride, when set, runs the whole of a text longer than MaxLength
	// rather than its first MaxLength tokens, as the pipeline's stride:
	// overflowing windows of MaxLength tokens sharing *Stride tokens,
	// each aggregated and filtered, then the windows' entities merged
	// where they overlap (of entities starting inside the one before,
	// the longer is kept, on equal length the more confident). nil is the
	// pipeline's default (truncation); it needs a strategy other than
	// AggregateNone and 0 <= *Stride < MaxLength (ErrInput otherwise).
	Stride *int
}

// Entity is one token (AggregateNone) or one group of tokens, as the
// Hugging Face token-classification pipeline gives it.
type Entity struct {
	// Entity is the token's label (AggregateNone); EntityGroup is the
	// group's tag, its label without the B-/I- prefix (the other
	// strategies). The other is "".
	Entity      string `json:"entity,omitempty"`
	EntityGroup string `json:"entity_group,omitempty"`
	// Score is the label's probability (a group's: the mean of its
	// tokens' or words').
	Score float32 `json:"score"`
	// Index is the token's position in the encoding (AggregateNone), nil
	// for groups.
	Index *int `json:"index,omitempty"`
	// Word is the token (AggregateNone: the vocabulary's string, the
	// text itself for an unknown token) or the group's tokens joined by
	// the tokenizer's decoder, as the pipeline gives it; Start and End are
	// [start, end) in runes of the text.
	Word  string `json:"word"`
	Start int    `json:"start"`
	End   int    `json:"end"`
}

// TokenClassify finds the entities of each text with a token
// classification (NER) head, as Hugging Face's token-classification
// pipeline (transformers 4.31) does with a fast tokenizer: texts longer
// than MaxLength are truncated (with o.Stride, run in overflowing
// windows whose entities are merged), every non-special token is scored by the
// softmax of its logits, and o says how tokens become entities. The model
// must have a token classification head; bad options are errors wrapping
// ErrInput.
func (p *Pipeline) TokenClassify(ctx context.Context, texts []string, o TokenClassifyOptions) ([][]Entity, error) {
	if err := p.refuseClosed("TokenClassify"); err != nil {
		return nil, err
	}
	if err := p.m.Enter(); err != nil {
		return nil, err
	}
	defer p.m.Leave()
	if p.m.Task != encoder.TaskTokenClassification {
		return nil, fmt.Errorf("models: token classify: the model is %s, not a token classifier: %w", p.Describe(), ErrConfig)
	}
	if err := o.AggregationStrategy.valid(); err != nil {
		return nil, err
	}
	tok, err := p.tokenizer("token classify")
	if err != nil {
		return nil, err
	}
	to, err := p.tokenizerOptions(EncodeOptions{Truncate: true})
	if err != nil {
		return nil, err
	}
	to.InputsOnly = false // offsets, tokens and the special tokens' mask
	if s := o.Stride; s != nil {
		// The pipeline's own checks (_sanitize_parameters).
		switch {
		case *s < 0 || *s >= to.MaxLength:
			return nil, fmt.Errorf("models: token classify: stride %d: want 0 to %d, less than the maximum length: %w", *s, to.MaxLength-1, ErrInput)
		case o.AggregationStrategy == AggregateNone:
			return nil, fmt.Errorf("models: token classify: a stride needs an aggregation strategy other than none (the pipeline's rule): %w", ErrInput)
		}
		to.Overflow, to.Stride = true, *s
	}
	// encs are the texts' windows (one per text without a stride), of
	// text owner[i].
	var encs []tokenizer.Encoding
	var owner []int
	for lo := 0; lo < len(texts); lo += encodeChunk {
		e, err := tok.EncodeBatch(ctx, texts[lo:min(lo+encodeChunk, len(texts))], to)
		if err != nil {
			return nil, inputError(ctx, "token classify", err)
		}
		for k := range e {
			more := e[k].Overflowing
			e[k].Overflowing = nil
			encs, owner = append(encs, e[k]), append(owner, lo+k)
			for _, w := range more {
				encs, owner = append(encs, w), append(owner, lo+k)
			}
		}
	}
	seqs := make([]encoder.Tokens, len(encs))
	for i := range encs {
		seqs[i] = compact(&encs[i])
	}
	n := len(p.m.Labels)
	logits := make([][]float32, len(encs))
	err = p.stream(ctx, seqs, func(idx []int, _ *encoder.Inputs, out *encoder.TaskOutput) error {
		for r, i := range idx {
			base, _ := out.Rows(r)
			logits[i] = slices.Clone(out.Logits[base*n : (base+encs[i].Len())*n])
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	ignore := o.IgnoreLabels
	if ignore == nil {
		ignore = []string{"O"}
	}
	nc := nerContext{tok: tok, labels: p.m.Labels, prefix: tok.ContinuingSubwordPrefix(), unk: tok.Special().UNK}
	res := make([][]Entity, len(texts))
	windows := make([]int, len(texts))
	for i := range encs {
		t := owner[i]
		ents, err := nc.entities(texts[t], &encs[i], logits[i], o.AggregationStrategy)
		if err != nil {
			return nil, err
		}
		if res[t] == nil {
			res[t] = []Entity{}
		}
		windows[t]++
		for _, e := range ents {
			if !slices.Contains(ignore, e.Entity+e.EntityGroup) {
				res[t] = append(res[t], e)
			}
		}
	}
	for t, n := range windows {
		if n > 1 {
			res[t] = mergeOverlapping(res[t])
		}
	}
	return res, nil
}

// mergeOverlapping is the pipeline's aggregate_overlapping_entities on
// the entities of a text's windows: sorted by start (stably), then of an
// entity that starts inside the one kept before it and that one, the
// longer is kept, on equal length the one with the higher score.
func mergeOverlapping(ents []Entity) []Entity {
	if len(ents) == 0 {
		return ents
	}
	slices.SortStableFunc(ents, func(a, b Entity) int { return cmp.Compare(a.Start, b.Start) })
	var out []Entity
	prev := ents[0]
	// As the pipeline's loop, from the first entity itself.
	for _, e := range ents {
		if prev.Start <= e.Start && e.Start < prev.End {
			cur, was := e.End-e.Start, prev.End-prev.Start
			if cur > was || cur == was && e.Score > prev.Score {
				prev = e
			}
			continue
		}
		out = append(out, prev)
		prev = e
	}
	return append(out, prev)
}

// nerContext is what the post-processing reads of the model and its
// tokenizer.
type nerContext struct {
	tok    *tokenizer.Tokenizer
	labels []string
	prefix string
	unk    int32
}

// preEntity is one token before aggregation (the pipeline's
// gather_pre_entities).
type preEntity struct {
	word       string
	scores     []float32
	start, end int
	index      int
	subword    bool
}

// entities is the pipeline's postprocess on one text, before ignore_labels.
func (c *nerContext) entities(text string, e *tokenizer.Encoding, logits []float32, a AggregationStrategy) ([]Entity, error) {
	runes := []rune(text)
	n := len(c.labels)
	var pre []preEntity
	for i := 0; i < e.Len(); i++ {
		if e.SpecialTokensMask[i] != 0 {
			continue
		}
		s, en := e.Offsets[i][0], e.Offsets[i][1]
		s, en = min(max(s, 0), len(runes)), min(max(en, 0), len(runes))
		en = max(en, s)
		word, ref := e.Tokens[i], string(runes[s:en])
		var sub bool
		if c.prefix != "" {
			// A word-aware tokenizer: a continuing piece's text is longer
			// or shorter than its span.
			sub = utf8.RuneCountInString(word) != en-s
		} else {
			// The pipeline's fallback heuristic: no space just before or
			// at the token's start.
			sub = s > 0 && !slices.Contains(runes[s-1:min(s+1, len(runes))], ' ')
		}
		if e.IDs[i] == c.unk {
			word, sub = ref, false
		}
		pre = append(pre, preEntity{word: word, scores: softmax(logits[i*n : (i+1)*n]), start: s, end: en, index: i, subword: sub})
	}
	var ents []Entity
	switch a {
	case AggregateNone, AggregateSimple:
		for _, p := range pre {
			best := argmax(p.scores)
			idx := p.index
			ents = append(ents, Entity{Entity: c.labels[best], Score: p.scores[best], Index: &idx, Word: p.word, Start: p.start, End: p.end})
		}
		if a == AggregateNone {
			return ents, nil
		}
	default:
		for lo := 0; lo < len(pre); {
			hi := lo + 1
			for hi < len(pre) && pre[hi].subword {
				hi++
			}
			w, err := c.word(pre[lo:hi], a)
			if err != nil {
				return nil, err
			}
			ents = append(ents, w)
			lo = hi
		}
	}
	return c.group(ents)
}

// word fuses one word's tokens (the pipeline's aggregate_word).
func (c *nerContext) word(toks []preEntity, a AggregationStrategy) (Entity, error) {
	words := make([]string, len(toks))
	for i, t := range toks {
		words[i] = t.word
	}
	w, err := c.decode(words)
	if err != nil {
		return Entity{}, err
	}
	var scores []float32
	switch a {
	case AggregateFirst:
		scores = toks[0].scores
	case AggregateMax:
		best := 0
		for i, t := range toks {
			if maxOf(t.scores) > maxOf(toks[best].scores) {
				best = i
			}
		}
		scores = toks[best].scores
	case AggregateAverage:
		scores = make([]float32, len(c.labels))
		for j := range scores {
			var s float64
			for _, t := range toks {
				s += float64(t.scores[j])
			}
			scores[j] = float32(s / float64(len(toks)))
		}
	}
	best := argmax(scores)
	return Entity{Entity: c.labels[best], Score: scores[best], Word: w, Start: toks[0].start, End: toks[len(toks)-1].end}, nil
}

// group joins adjacent entities of the same tag, a B- entity starting a
// new group (the pipeline's group_entities).
func (c *nerContext) group(ents []Entity) ([]Entity, error) {
	var out []Entity
	for lo := 0; lo < len(ents); {
		_, tag := nerTag(ents[lo].Entity)
		hi := lo + 1
		for hi < len(ents) {
			bi, t := nerTag(ents[hi].Entity)
			if t != tag || bi == "B" {
				break
			}
			// The pipeline compares with the last entity of the group,
			// whose tag is the group's.
			hi++
		}
		g, err := c.subGroup(ents[lo:hi])
		if err != nil {
			return nil, err
		}
		out = append(out, g)
		lo = hi
	}
	return out, nil
}

// subGroup is one group (the pipeline's group_sub_entities): the first
// label's last "-"-separated part, the mean score, the words decoded.
func (c *nerContext) subGroup(ents []Entity) (Entity, error) {
	label := ents[0].Entity
	if i := strings.LastIndex(label, "-"); i >= 0 {
		label = label[i+1:]
	}
	words := make([]string, len(ents))
	var s float64
	for i, e := range ents {
		words[i] = e.Word
		s += float64(e.Score)
	}
	w, err := c.decode(words)
	if err != nil {
		return Entity{}, err
	}
	return Entity{EntityGroup: label, Score: float32(s / float64(len(ents))), Word: w, Start: ents[0].Start, End: ents[len(ents)-1].End}, nil
}

func (c *nerContext) decode(tokens []string) (string, error) {
	s, err := c.tok.DecodeTokens(tokens)
	if err != nil {
		return "", fmt.Errorf("models: token classify: joining the words of an entity: %w: %w", err, ErrConfig)
	}
	return s, nil
}

// nerTag splits a label into its B-/I- prefix and its tag; a label
// without one is a continuation ("I") of its whole name (the pipeline's
// get_tag).
func nerTag(label string) (bi, tag string) {
	switch {
	case strings.HasPrefix(label, "B-"):
		return "B", label[2:]
	case strings.HasPrefix(label, "I-"):
		return "I", label[2:]
	}
	return "I", label
}

// argmax is the index of the first largest value.
func argmax(x []float32) int {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return best
}

func maxOf(x []float32) float32 {
	m := float32(math.Inf(-1))
	for _, v := range x {
		m = max(m, v)
	}
	return m
}
