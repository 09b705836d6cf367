package models

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/int8bert/int8bert/models/encoder"
	"github.com/int8bert/int8bert/tokenizer"
)

// DefaultFillMaskTopK is how many candidates FillMask gives per mask when
// FillMaskOptions.TopK is 0, as Hugging Face's fill-mask pipeline does.
const DefaultFillMaskTopK = 5

// FillMaskOptions control FillMask as top_k and targets control Hugging
// Face's fill-mask pipeline (transformers 4.31); the zero value is its
// defaults.
type FillMaskOptions struct {
	// TopK is how many candidates each mask gets, best first: 0 is
	// DefaultFillMaskTopK, more than the vocabulary (or the targets) gives
	// them all; negative is an error wrapping ErrInput.
	TopK int
	// Targets, when set, are the only words scored (ResolveTargets: a word
	// of the vocabulary, else the first token of its tokenization).
	Targets []string
}

// FillMaskToken is one candidate for a mask, as the pipeline gives it.
type FillMaskToken struct {
	// Score is the candidate's probability (softmax over the whole
	// vocabulary, targets or not).
	Score float32 `json:"score"`
	// Token is its id and TokenStr its decoded text.
	Token    int32  `json:"token"`
	TokenStr string `json:"token_str"`
	// Sequence is the input decoded with the candidate in the mask's place
	// (padding left out; special tokens too where the input has one mask).
	Sequence string `json:"sequence"`
}

// FillMaskResult is one text's candidates: Masks[i] are the candidates of
// the text's i-th mask token, best first.
type FillMaskResult struct {
	Masks [][]FillMaskToken
}

// HF is the result in the shape Hugging Face's pipeline returns for one
// text: the list of candidates where the text has one mask, a list of
// such lists (one per mask, in order) where it has several.
func (r FillMaskResult) HF() any {
	if len(r.Masks) == 1 {
		return r.Masks[0]
	}
	return r.Masks
}

// ResolveTargets maps fill-mask targets to token ids as Hugging Face's
// pipeline does: a target that is a token of the vocabulary is its id;
// another is tokenized (no special tokens) and its first token taken,
// with a warning saying so; one that gives no token is left out with a
// warning. Duplicate ids count once. No id left is an error wrapping
// ErrInput.
func (p *Pipeline) ResolveTargets(targets []string) (ids []int32, warnings []string, err error) {
	if err := p.refuseClosed("ResolveTargets"); err != nil {
		return nil, nil, err
	}
	tok, err := p.tokenizer("fill-mask")
	if err != nil {
		return nil, nil, err
	}
	return resolveTargets(tok, targets)
}

func resolveTargets(tok *tokenizer.Tokenizer, targets []string) ([]int32, []string, error) {
	var ids []int32
	var warnings []string
	for _, t := range targets {
		id, ok := tok.ID(t)
		if !ok {
			e, err := tok.Encode(t, tokenizer.Options{SkipSpecialTokens: true})
			if err != nil {
				return nil, nil, fmt.Errorf("models: fill-mask: target %q: %w: %w", t, err, ErrInput)
			}
			if len(e.IDs) == 0 {
				warnings = append(warnings, fmt.Sprintf("The specified target token `%s` does not exist in the model vocabulary. We cannot replace it with anything meaningful, ignoring it", t))
				continue
			}
			id = e.IDs[0]
			warnings = append(warnings, fmt.Sprintf("The specified target token `%s` does not exist in the model vocabulary. Replacing with `%s`.", t, tok.Token(id)))
		}
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return nil, warnings, fmt.Errorf("models: fill-mask: at least one target must be provided when passed: %w", ErrInput)
	}
	return ids, warnings, nil
}

// FillMask predicts the tokens behind each text's mask tokens ("[MASK]",
// "<mask>") as Hugging Face's fill-mask pipeline does: the masked-LM
// head's logits at every mask, softmax over the vocabulary, the TopK best
// (of the targets, when set; TopK is then at most their number). A text
// must hold at least one mask token (several give one list each, as the
// pipeline's experimental support does): one without is an error wrapping
// ErrInput. Texts longer than MaxLength are truncated. The model must
// have a masked language modeling head.
func (p *Pipeline) FillMask(ctx context.Context, texts []string, o FillMaskOptions) ([]FillMaskResult, error) {
	if err := p.refuseClosed("FillMask"); err != nil {
		return nil, err
	}
	if err := p.m.Enter(); err != nil {
		return nil, err
	}
	defer p.m.Leave()
	if err := p.needMaskedLM("fill-mask"); err != nil {
		return nil, err
	}
	tok, err := p.tokenizer("fill-mask")
	if err != nil {
		return nil, err
	}
	maskID := tok.Special().MASK
	if maskID < 0 {
		return nil, fmt.Errorf("models: fill-mask: the tokenizer does not define a mask token: %w", ErrConfig)
	}
	if o.TopK < 0 {
		return nil, fmt.Errorf("models: fill-mask: top_k %d is negative (0 for the default, %d): %w", o.TopK, DefaultFillMaskTopK, ErrInput)
	}
	topK := o.TopK
	if topK == 0 {
		topK = DefaultFillMaskTopK
	}
	var targets []int32
	if o.Targets != nil {
		if targets, _, err = resolveTargets(tok, o.Targets); err != nil {
			return nil, err
		}
		topK = min(topK, len(targets))
	}
	encs, err := p.encodeTexts(ctx, "fill-mask", texts)
	if err != nil {
		return nil, err
	}
	masks := make([][]int, len(encs))
	for i, e := range encs {
		for j, id := range e.IDs {
			if id == maskID {
				masks[i] = append(masks[i], j)
			}
		}
		if len(masks[i]) == 0 {
			return nil, fmt.Errorf("models: fill-mask: batch item %d: no mask token (%s) found on the input: %w", i, tok.Token(maskID), ErrInput)
		}
	}
	vocab := p.m.Vocab()
	pad := tok.Special().PAD
	res := make([]FillMaskResult, len(encs))
	err = p.stream(ctx, encs, func(idx []int, _ *encoder.Inputs, out *encoder.TaskOutput) error {
		var rows []int
		for r, i := range idx {
			start, _ := out.Rows(r)
			for _, j := range masks[i] {
				rows = append(rows, start+j)
			}
		}
		logits, err := p.m.MaskedLMLogits(out.Output, rows)
		if err != nil {
			return err
		}
		k := 0
		for _, i := range idx {
			ids := encs[i].IDs
			single := len(masks[i]) == 1
			res[i].Masks = make([][]FillMaskToken, len(masks[i]))
			for m, pos := range masks[i] {
				probs := softmax(logits[k*vocab : (k+1)*vocab])
				k++
				cands := targets
				if cands == nil {
					cands = make([]int32, vocab)
					for j := range cands {
						cands[j] = int32(j)
					}
				}
				best := topCandidates(probs, cands, topK)
				list := make([]FillMaskToken, len(best))
				for c, id := range best {
					seq := make([]int32, 0, len(ids))
					for j, t := range ids {
						if j == pos {
							t = id
						}
						if t != pad {
							seq = append(seq, t)
						}
					}
					s, err := decodeHF(tok, seq, single)
					if err != nil {
						return err
					}
					ts, err := decodeHF(tok, []int32{id}, false)
					if err != nil {
						return err
					}
					list[c] = FillMaskToken{Score: probs[id], Token: id, TokenStr: ts, Sequence: s}
				}
				res[i].Masks[m] = list
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// hfCleanupPairs are transformers' clean_up_tokenization, which its
// tokenizers' decode applies to the whole decoded string
// (clean_up_tokenization_spaces, true by default in 4.31) after the
// tokenizers library's own decoder.
var hfCleanupPairs = [][2]string{{" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"},
	{" n't", "n't"}, {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}}

// decodeHF decodes ids as a transformers tokenizer's decode does.
func decodeHF(tok *tokenizer.Tokenizer, ids []int32, skipSpecial bool) (string, error) {
	s, err := tok.Decode(ids, skipSpecial)
	if err != nil {
		return "", fmt.Errorf("models: fill-mask: %w", err)
	}
	return cleanupAll(s), nil
}

// cleanupAll applies hfCleanup's replacements one after the other, each
// on the whole string, as Python's chained str.replace does.
func cleanupAll(s string) string {
	for _, p := range hfCleanupPairs {
		s = strings.ReplaceAll(s, p[0], p[1])
	}
	return s
}

// topCandidates are the k ids of cands with the highest probs, best
// first (equal scores in the order of cands).
func topCandidates(probs []float32, cands []int32, k int) []int32 {
	c := slices.Clone(cands)
	sort.SliceStable(c, func(a, b int) bool { return probs[c[a]] > probs[c[b]] })
	return c[:min(k, len(c))]
}

// needMaskedLM reports, wrapping ErrConfig, a model without a masked
// language modeling head.
func (p *Pipeline) needMaskedLM(what string) error {
	if p.m.Task != encoder.TaskMaskedLM {
		return fmt.Errorf("models: %s: the model is %s, not a masked language model (%sForMaskedLM): %w",
			what, p.Describe(), p.m.Family.Classes[0], ErrConfig)
	}
	return nil
}
