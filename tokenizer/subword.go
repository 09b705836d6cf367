package tokenizer

import "strings"

// ContinuingSubwordPrefix is the model's continuing_subword_prefix (a
// WordPiece model's "##"; a BPE model's, "" for RoBERTa's byte-level
// one), or "" for a model without one (Unigram). Hugging
// Face's token-classification pipeline calls a tokenizer with one "word
// aware": a token is part of the word before it when its text differs in
// length from the span of the input its offsets cover.
func (t *Tokenizer) ContinuingSubwordPrefix() string {
	switch m := t.model.(type) {
	case *wordPiece:
		return m.prefix
	case *bpe:
		return m.prefix
	}
	return ""
}

// DecodeTokens joins token strings into text through tokenizer.json's
// decoder, as a Hugging Face fast tokenizer's convert_tokens_to_string
// does (joined by spaces when the file has none); Decode is the same on
// ids. A decoder of a kind this package does not implement is an error
// wrapping ErrDecoder.
func (t *Tokenizer) DecodeTokens(tokens []string) (string, error) {
	if t.dec == nil {
		return strings.Join(tokens, " "), nil
	}
	out, err := t.dec.chain(tokens)
	if err != nil {
		return "", err
	}
	return strings.Join(out, ""), nil
}
