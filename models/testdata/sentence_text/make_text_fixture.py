#!/usr/bin/python3
"""Makes the end-to-end sentence-transformers fixtures of models/sentence_text_test.go.

Where ../sentence/make_fixture.py checks sentence-transformers' modules on
stored hidden states, these fixtures start from TEXT: for each case folder
here, a golden tiny model of the project's shared folder
(golden/models/<model>: config.json and model.safetensors, which the test
copies next to the case's files) with the tokenizer of vocab.txt, is run
the way sentence-transformers' SentenceTransformer.encode runs it, and
expected.json holds the texts, the calls (prompt_name or prompt,
truncate_dim, normalize_embeddings), the token ids of each prompted text
and the embeddings (float32 results written as float64).

The reference:
- Hugging Face transformers 4.31.0 (its slow BertTokenizer / DistilBertTokenizer
  on vocab.txt and its BertModel / DistilBertModel) from the project's
  offline oracle (../../../../shared/oracle, README.md there: its setup.sh
  builds vendor/site from git mirrors), on Debian's python3-torch 1.13.
- sentence-transformers' own modules, run unmodified from a git mirror of
  github.com/UKPLab/sentence-transformers (Apache License 2.0, Copyright
  the UKPLab authors), tag v2.7.0: models/Transformer.py (which loads the
  folder's model and tokenizer, strips the texts, lowercases them when
  do_lower_case and tokenizes with truncation at max_seq_length),
  Pooling.py, Dense.py and Normalize.py. Nothing of it is copied here.
- What SentenceTransformer.encode (v2.7.0, the same in 2.4 to 3.x) does
  around the modules, restated (the class itself needs packages Debian's
  setup lacks): a prompt (given, or prompts[prompt_name] of
  config_sentence_transformers.json) is prefixed to every text; its
  prompt_length is the length of tokenize([prompt])'s input_ids less one;
  the modules run on the batch; the vector is cut to its first
  truncate_dim values (util.truncate_embeddings), then L2-normalised when
  normalize_embeddings. Not used here: an empty prompt with include_prompt
  false, where encode before v5 still sets prompt_length (1, the CLS
  token) and v5 does not; int8bert does as v5.

vocab.txt is a 1,000-entry WordPiece vocabulary (the golden models' vocab
size) drawn from the real bert-base-uncased vocabulary of
golden/tokenizers/bert-base-uncased (Apache-2.0): BERT's special tokens
at their ids (0, 100-103), then its single ASCII characters, ## and a
letter or digit, and its most frequent words, in its order; texts with
accents, CJK characters (unknown: [UNK]) and words split into pieces
exercise the whole BasicTokenizer + WordPiece path.

Run with Debian's python3 and python3-torch (1.13; numpy):
    /usr/bin/python3 make_text_fixture.py ORACLE_DIR ST_GIT_DIR SHARED_DIR
e.g. ORACLE_DIR=/tmp/oracle (a copy of shared/oracle after its setup.sh),
ST_GIT_DIR=/work/.mirror/UKPLab+sentence-transformers/repo and
SHARED_DIR=../../../../shared; it rewrites the case folders and vocab.txt
next to this script.
"""
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import types

HERE = os.path.dirname(os.path.abspath(__file__))
ST_TAG = "v2.7.0"
MAX_SEQ_LENGTH = 48

TEXTS = [
    "A short one.",
    # longer than max_seq_length tokens: truncated (after the prompt)
    "The quick brown fox jumps over the lazy dog while the committee reviews "
    "the quarterly report, and nobody in the building notices that the coffee "
    "machine has been broken since Tuesday afternoon.",
    # accents (stripped by the uncased tokenizer), punctuation, a dash
    "Crème brûlée at the Café Noël \u2014 naïve façade, São Paulo!",
    # CJK characters are split one by one and are [UNK] here; runs of spaces
    "  The 東京 office   said:\thello (again)  ",
]

# Each case: model folder name, golden model, Pooling modes, include_prompt,
# Dense modules (out_features, activation), Normalize module, prompts of
# config_sentence_transformers.json, calls: (prompt_name, prompt,
# truncate_dim, normalize_embeddings).
PROMPTS = {"query": "query: ", "passage": "passage: ", "none": ""}
RAW = "Represent this sentence for searching relevant passages: "
FULL_CALLS = [
    (None, None, None, False),
    ("query", None, None, False),
    ("passage", None, None, True),
    ("none", None, None, False),
    (None, RAW, None, False),
    (None, "search_query:", None, False),  # no space: the prompt's ':' and the text are split apart anyway
    ("query", None, 16, False),
    ("query", None, 16, True),
    (None, None, 16, True),
]
PROMPT_CALLS = [
    (None, None, None, False),
    ("query", None, None, False),
    (None, RAW, None, True),
    ("query", None, 16, False),
    ("query", None, 16, True),
]
CASES = [
    ("bert-base-mean_normalize", "bert-base", ["mean"], True, [], True, FULL_CALLS),
    ("bert-base-cls", "bert-base", ["cls"], True, [], False, FULL_CALLS),
    ("bert-base-max", "bert-base", ["max"], True, [], False, PROMPT_CALLS),
    ("bert-base-lasttoken", "bert-base", ["lasttoken"], True, [], False, PROMPT_CALLS),
    ("bert-base-weightedmean", "bert-base", ["weightedmean"], True, [], False, PROMPT_CALLS),
    ("bert-base-mean_sqrt_len", "bert-base", ["mean_sqrt_len_tokens"], True, [], False, PROMPT_CALLS),
    # include_prompt false: the prompt's tokens (and CLS) are left out of the pooling
    ("bert-base-mean_noprompt", "bert-base", ["mean"], False, [], True,
     [c for c in FULL_CALLS if c[0] != "none"]),
    ("bert-base-cls_max_mean_dense", "bert-base", ["cls", "max", "mean"], True, [(32, "Tanh")], True, PROMPT_CALLS),
    ("distilbert-base-mean_dense", "distilbert-base", ["mean"], True, [(24, "Identity")], False, PROMPT_CALLS),
]
KEYS = {"cls": "pooling_mode_cls_token", "mean": "pooling_mode_mean_tokens", "max": "pooling_mode_max_tokens",
        "mean_sqrt_len_tokens": "pooling_mode_mean_sqrt_len_tokens",
        "weightedmean": "pooling_mode_weightedmean_tokens", "lasttoken": "pooling_mode_lasttoken"}


def st_module(git, name):
    """Loads sentence_transformers/models/<name>.py of ST_TAG as st.models.<name>."""
    src = subprocess.check_output(["git", "-C", git, "show", f"{ST_TAG}:sentence_transformers/models/{name}.py"])
    d = tempfile.mkdtemp()
    path = os.path.join(d, name + ".py")
    with open(path, "wb") as f:
        f.write(src)
    spec = importlib.util.spec_from_file_location(f"st.models.{name}", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def stand_in_package():
    """st, st.models and st.util: Dense.py imports ..util's fullname and
    import_from_string (to save and load its config); the real util.py
    needs packages Debian's setup lacks."""
    p = types.ModuleType("st")
    p.__path__ = []
    sys.modules["st"] = p
    m = types.ModuleType("st.models")
    m.__path__ = []
    sys.modules["st.models"] = m
    util = types.ModuleType("st.util")
    util.fullname = lambda o: o.__class__.__module__ + "." + o.__class__.__name__

    def import_from_string(path):
        mod, cls = path.rsplit(".", 1)
        return getattr(importlib.import_module(mod), cls)

    util.import_from_string = import_from_string
    sys.modules["st.util"] = util


def make_vocab(bert_vocab):
    with open(bert_vocab, encoding="utf-8") as f:
        full = [line.rstrip("\n") for line in f]
    special = {0: "[PAD]", 100: "[UNK]", 101: "[CLS]", 102: "[SEP]", 103: "[MASK]"}
    for i, s in special.items():
        assert full[i] == s, (i, full[i])
    chars = [t for t in full if len(t) == 1 and 33 <= ord(t) < 127]
    pieces = [t for t in full if len(t) == 3 and t.startswith("##") and t[2].isascii() and t[2].isalnum()]
    words = [t for t in full[1996:] if t.isascii() and t.isalpha() and t.islower()]
    order = []
    for t in chars + pieces + words:
        if t not in order and t not in special.values():
            order.append(t)
    vocab, it = [], iter(order)
    for i in range(1000):
        vocab.append(special.get(i) or next(it))
    return vocab


def main(oracle, git, shared):
    sys.path.insert(0, oracle)
    import oracle_env  # noqa: F401  (vendor/site on sys.path, offline)
    import numpy as np
    import torch
    import transformers

    torch.manual_seed(0)
    stand_in_package()
    st = {n: st_module(git, n) for n in ("Transformer", "Pooling", "Dense", "Normalize")}
    vocab = make_vocab(os.path.join(shared, "golden", "tokenizers", "bert-base-uncased", "vocab.txt"))
    with open(os.path.join(HERE, "vocab.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(vocab) + "\n")

    for name, model, modes, include_prompt, denses, normalize, calls in CASES:
        out = os.path.join(HERE, name)
        shutil.rmtree(out, ignore_errors=True)
        os.makedirs(os.path.join(out, "1_Pooling"))
        hidden = json.load(open(os.path.join(shared, "golden", "models", model, "config.json")))
        hidden = hidden.get("hidden_size") or hidden["dim"]
        files = {
            "tokenizer_config.json": {"do_lower_case": True,
                                      "tokenizer_class": "DistilBertTokenizer" if model.startswith("distil") else "BertTokenizer"},
            "sentence_bert_config.json": {"max_seq_length": MAX_SEQ_LENGTH, "do_lower_case": False},
            "config_sentence_transformers.json": {"prompts": PROMPTS, "default_prompt_name": None},
            "1_Pooling/config.json": dict({"word_embedding_dimension": hidden},
                                          **{k: m in modes for m, k in KEYS.items()}, include_prompt=include_prompt),
        }
        modules = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
                   {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]
        for f, v in files.items():
            with open(os.path.join(out, f), "w") as fh:
                json.dump(v, fh, indent=2)
        width = hidden * len(modes)
        for i, (n_out, act) in enumerate(denses):
            path = f"{2 + i}_Dense"
            d = st["Dense"].Dense(width, n_out, bias=True, activation_function=getattr(torch.nn, act)())
            with torch.no_grad():
                d.linear.weight.copy_(torch.randn(n_out, width) / width ** 0.5)
                d.linear.bias.copy_(torch.randn(n_out) * 0.1)
            os.makedirs(os.path.join(out, path))
            d.save(os.path.join(out, path))
            modules.append({"idx": len(modules), "name": str(len(modules)), "path": path,
                            "type": "sentence_transformers.models.Dense"})
            width = n_out
        if normalize:
            modules.append({"idx": len(modules), "name": str(len(modules)), "path": f"{len(modules)}_Normalize",
                            "type": "sentence_transformers.models.Normalize"})
        with open(os.path.join(out, "modules.json"), "w") as fh:
            json.dump(modules, fh, indent=2)

        # The full model folder the reference loads: the case's files, the
        # vocabulary and the golden model.
        folder = tempfile.mkdtemp()
        shutil.copytree(out, folder, dirs_exist_ok=True)
        shutil.copy(os.path.join(HERE, "vocab.txt"), folder)
        for f in ("config.json", "model.safetensors"):
            shutil.copy(os.path.join(shared, "golden", "models", model, f), folder)
        # Transformer.load with the slow tokenizer (no Rust tokenizers here)
        stcfg = files["sentence_bert_config.json"]
        seq = [st["Transformer"].Transformer(folder, **stcfg, tokenizer_args={"use_fast": False})]
        assert seq[0].max_seq_length == MAX_SEQ_LENGTH and not seq[0].tokenizer.is_fast
        seq.append(st["Pooling"].Pooling.load(os.path.join(folder, "1_Pooling")))
        for m in modules[2:]:
            kind = m["type"].rsplit(".", 1)[1]
            seq.append(getattr(st[kind], kind).load(os.path.join(folder, m["path"])))
        model_st = torch.nn.Sequential(*seq).eval()
        prompts = json.load(open(os.path.join(folder, "config_sentence_transformers.json")))["prompts"]

        results = []
        for prompt_name, prompt, dim, norm in calls:
            # SentenceTransformer.encode: the prompt, its prompt_length, the
            # modules, truncate_dim, normalize_embeddings.
            p = prompts[prompt_name] if prompt_name is not None else prompt
            texts = list(TEXTS)
            feats = {}
            if p is not None:
                texts = [p + t for t in texts]
                feats["prompt_length"] = seq[0].tokenize([p])["input_ids"].shape[-1] - 1
            tok = seq[0].tokenize(texts)
            ids = [[int(x) for x, m in zip(row, mask) if m] for row, mask in zip(tok["input_ids"], tok["attention_mask"])]
            tok.update(feats)
            with torch.no_grad():
                emb = model_st(tok)["sentence_embedding"]
                emb = emb[..., :dim]
                if norm:
                    emb = torch.nn.functional.normalize(emb, p=2, dim=1)
            emb = emb.numpy().astype(np.float64)
            results.append({"prompt_name": prompt_name or "", "prompt": prompt or "", "dimensions": dim or 0,
                            "normalize": norm, "prompt_length": feats.get("prompt_length", 0), "input_ids": ids,
                            "embeddings": [[float(f"{x:.9g}") for x in row] for row in emb]})
        with open(os.path.join(out, "expected.json"), "w") as fh:
            json.dump({"model": model, "pooling": "+".join(modes), "include_prompt": include_prompt,
                       "normalize": normalize, "max_seq_length": MAX_SEQ_LENGTH,
                       "reference": f"sentence-transformers {ST_TAG} modules, transformers {transformers.__version__} "
                                    f"slow tokenizer and model, torch {torch.__version__}",
                       "texts": TEXTS, "calls": results}, fh)
        shutil.rmtree(folder)
        print(out, len(results), "calls", emb.shape)


if __name__ == "__main__":
    main(*sys.argv[1:4])
