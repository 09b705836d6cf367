// Train a byte-level BPE with Hugging Face's Rust tokenizers (npm @anush008/tokenizers 0.6.0).
// The bindings expose only Tokenizer.train(files) with the model's default BpeTrainer
// (vocab_size 30000, min_frequency 0, no special tokens, alphabet = characters seen); the BPE
// trainer stops only on the vocabulary size, so a prefix of its merge list is exactly what a run
// with a smaller vocab_size would give: sst2_train.py keeps the first merges up to its target.
// usage: NODE_PATH=.../node_modules node bpe_train.js corpus.txt out-tokenizer.json
const { Tokenizer, BPE, byteLevelPreTokenizer } = require("@anush008/tokenizers");
const tok = new Tokenizer(BPE.empty());
tok.setPreTokenizer(byteLevelPreTokenizer(false, true)); // add_prefix_space false, GPT-2 regex
tok.train([process.argv[2]]);
tok.save(process.argv[3], true);
