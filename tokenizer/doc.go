// Package tokenizer owns tokenization for int8bert: it loads a Hugging Face
// tokenizer.json (WordPiece, Unigram or byte-level BPE models with their
// normalizers, pre-tokenizers, post-processors, decoders and added tokens), a
// bare BERT vocab.txt, a RoBERTa/GPT-2 vocab.json with merges.txt, or a
// SentencePiece spm.model / sentencepiece.bpe.model converted as
// transformers' DeBERTa-v2, XLM-R and CamemBERT converters do
// (FromSentencePiece; each with tokenizer_config.json when present) and
// turns text into the ids,
// type ids, attention masks and offsets that the encoders consume.
//
// Supported components: the WordPiece, Unigram and BPE models (Unigram with
// unknown-run fusing and byte fallback; BPE with merges in either form,
// continuing_subword_prefix, end_of_word_suffix, unk_token, fuse_unk,
// byte_fallback and ignore_merges, but not dropout); the normalizers BertNormalizer,
// Precompiled (SentencePiece's charsmap), Replace, Strip, Lowercase,
// StripAccents, NFD, NFKD, NFC, NFKC and Sequence; the pre-tokenizers
// BertPreTokenizer, Metaspace, WhitespaceSplit, Whitespace, ByteLevel and
// Sequence; the post-processors TemplateProcessing, BertProcessing,
// RobertaProcessing and ByteLevel (with trim_offsets);
// added tokens with their single_word, lstrip, rstrip and normalized flags;
// truncation (longest_first, only_first, only_second, stride, overflowing
// windows, either side) and padding (longest, fixed, multiple of, either side).
// Anything else in a tokenizer.json is refused with an error naming the field.
// tokenizer.json's own truncation and padding are reported by FileOptions but
// not applied unless passed to Encode.
//
// The behaviour follows Hugging Face's Rust tokenizers (the "fast" tokenizers):
// where they and transformers' slow Python tokenizers disagree, the Rust
// behaviour on tokenizer.json is the one reproduced. The implementation is our
// own; only rules and constants carry over.
//
// # Offsets
//
// Encoding.Offsets are [start, end) positions counted in Unicode code points
// (runes) of the original input text, as Hugging Face's Python API reports
// them; tokens of the second text of a pair index into that second text.
// Tokens inserted by the post-processor (such as [CLS] and [SEP]) and padding
// have the offsets {0, 0}. Characters produced by a normalizer map back to the
// whole original character (or grapheme, for SentencePiece's precompiled
// charsmap) that produced them.
//
// # Invalid input
//
// Input must be valid UTF-8: where Hugging Face would silently replace bad
// bytes, Encode refuses them with an *InvalidUTF8Error that gives the byte
// offset, unless Options.Lenient asks for replacement by U+FFFD.
//
// # Memory
//
// Encoding works in memory that is reused from one input to the next (each
// worker of EncodeBatch and EncodePairBatch keeps its own; Encode and
// EncodePair take it from a pool), so what an input allocates is what its
// Encoding holds: one array for the int32 fields, and one each for Tokens,
// Offsets and SequenceIDs. The fields never share memory with each other,
// with another Encoding or with the tokenizer: appending to one changes no
// other. Options.InputsOnly leaves out what a model does not read, for a
// caller that keeps only the ids.
//
// Package tokenizer must not import any other int8bert package.
package tokenizer
