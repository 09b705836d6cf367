package distilbert_test

import "github.com/int8bert/int8bert/tokenizer"

func tokenizerFromVocab(v string) (*tokenizer.Tokenizer, error) {
	return tokenizer.FromVocab([]byte(v), nil)
}
