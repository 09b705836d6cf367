#!/usr/bin/python3
"""Makes the sentence-transformers fixtures of models/sentence_test.go.

Each case folder holds the sentence-transformers files of a model folder
(modules.json, 1_Pooling/config.json, 2_Dense*/ with config.json and
weights, sentence_bert_config.json) for one of the golden tiny models of
the project's shared folder (golden/models/<model>: config.json and
model.safetensors, which the test copies next to them), and expected.json:
the embeddings sentence-transformers' own modules compute from the golden
folder's last_hidden_state.npy and attention_mask.npy (Hugging Face
transformers 4.31's outputs on its input_ids.npy, made by
../shared/oracle/make_golden.py).

The modules are sentence-transformers' own code, run unmodified from a git
mirror of github.com/UKPLab/sentence-transformers (Apache License 2.0,
Copyright the UKPLab authors): models/Pooling.py, Dense.py and
Normalize.py of tag v2.2.2, and Pooling.py of tag v2.7.0 for the two modes
2.2.2 lacks (weightedmean, lasttoken; its code for the other modes is
2.2.2's) and for include_prompt. Nothing of it is copied here. Dense.py's import of ..util (used
only to save and load configs) gets a two-function stand-in, since the
real util.py needs packages that Debian's python3-torch setup lacks.

Run with Debian's python3 and python3-torch (1.13; numpy):
    /usr/bin/python3 make_fixture.py ST_GIT_DIR GOLDEN_MODELS_DIR
e.g. ST_GIT_DIR=/work/.mirror/UKPLab+sentence-transformers/repo and
GOLDEN_MODELS_DIR=../../../shared/golden/models; it rewrites the case
folders next to this script.
"""
import importlib.util
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import types

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))


def st_module(git, tag, name, pkg):
    """Loads sentence_transformers/models/<name>.py of tag as pkg.models.<name>."""
    src = subprocess.check_output(["git", "-C", git, "show", f"{tag}:sentence_transformers/models/{name}.py"])
    d = tempfile.mkdtemp()
    path = os.path.join(d, name + ".py")
    with open(path, "wb") as f:
        f.write(src)
    spec = importlib.util.spec_from_file_location(f"{pkg}.models.{name}", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def stand_in_packages():
    for pkg in ("st222", "st270"):
        p = types.ModuleType(pkg)
        p.__path__ = []
        sys.modules[pkg] = p
        m = types.ModuleType(pkg + ".models")
        m.__path__ = []
        sys.modules[pkg + ".models"] = m
        util = types.ModuleType(pkg + ".util")

        def fullname(o):
            return o.__class__.__module__ + "." + o.__class__.__name__

        def import_from_string(path):
            mod, cls = path.rsplit(".", 1)
            return getattr(importlib.import_module(mod), cls)

        util.fullname, util.import_from_string = fullname, import_from_string
        sys.modules[pkg + ".util"] = util


def write_safetensors(path, tensors):
    header, data = {}, b""
    for name, t in tensors.items():
        b = t.detach().contiguous().numpy().astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [len(data), len(data) + len(b)]}
        data += b
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + data)


# Each case: the model, the Pooling config's modes, the Dense modules
# (out_features, activation class, bias, weight file), whether a
# Normalize module ends it, and sentence_bert_config.json (or None); a
# name ending in _prompt3 pools with include_prompt false and a
# prompt_length of 3, as sentence-transformers' encode does with a prompt
# of 2 tokens.
ACT = {"tanh": torch.nn.Tanh, "identity": torch.nn.Identity, "relu": torch.nn.ReLU, "gelu": torch.nn.GELU}
CASES = [
    ("bert-base", "cls", ["cls"], [], True, None),
    ("bert-base", "mean", ["mean"], [], True, None),
    ("bert-base", "max", ["max"], [], False, None),
    ("bert-base", "mean_sqrt_len", ["mean_sqrt_len_tokens"], [], False, None),
    ("bert-base", "weightedmean", ["weightedmean"], [], False, None),
    ("bert-base", "lasttoken", ["lasttoken"], [], False, None),
    ("bert-base", "cls_max_mean_dense", ["cls", "max", "mean"], [(32, "tanh", True, "bin")], True,
     {"max_seq_length": 64, "do_lower_case": False}),
    ("bert-base", "mean_two_dense", ["mean"], [(48, "identity", False, "safetensors"), (16, "relu", True, "bin")], False, None),
    ("distilbert-base", "mean_dense", ["mean"], [(24, "tanh", True, "safetensors")], True, None),
    ("xlm-roberta-base", "weightedmean_dense", ["weightedmean", "lasttoken"], [(40, "gelu", True, "bin")], True, None),
    # Not cls with max: Pooling.py's cls vector is a view of the token
    # embeddings that max then overwrites with -1e9 where the prompt is.
    ("bert-base", "cls_means_last_prompt3", ["cls", "mean", "mean_sqrt_len_tokens", "weightedmean", "lasttoken"], [], False, None),
    ("bert-base", "max_mean_prompt3", ["max", "mean"], [], False, None),
]
KEYS = {"cls": "pooling_mode_cls_token", "mean": "pooling_mode_mean_tokens", "max": "pooling_mode_max_tokens",
        "mean_sqrt_len_tokens": "pooling_mode_mean_sqrt_len_tokens",
        "weightedmean": "pooling_mode_weightedmean_tokens", "lasttoken": "pooling_mode_lasttoken"}


def main(git, golden):
    stand_in_packages()
    pool222 = st_module(git, "v2.2.2", "Pooling", "st222")
    pool270 = st_module(git, "v2.7.0", "Pooling", "st270")
    dense = st_module(git, "v2.2.2", "Dense", "st222")
    norm = st_module(git, "v2.2.2", "Normalize", "st222")
    torch.manual_seed(0)
    for model, name, modes, denses, normalize, stcfg in CASES:
        src = os.path.join(golden, model)
        last = np.load(os.path.join(src, "last_hidden_state.npy"))
        mask = np.load(os.path.join(src, "attention_mask.npy"))
        hidden = last.shape[-1]
        out = os.path.join(HERE, f"{model}-{name}")
        shutil.rmtree(out, ignore_errors=True)
        os.makedirs(os.path.join(out, "1_Pooling"))
        modules = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"}]
        cfg = {"word_embedding_dimension": hidden}
        prompt = 3 if name.endswith("_prompt3") else 0
        # v2.7.0 for the modes and the include_prompt that 2.2.2 lacks
        new = prompt > 0 or any(m in ("weightedmean", "lasttoken") for m in modes)
        for m, k in KEYS.items():
            if new or m not in ("weightedmean", "lasttoken"):
                cfg[k] = m in modes
        if prompt:
            cfg["include_prompt"] = False
        with open(os.path.join(out, "1_Pooling", "config.json"), "w") as f:
            json.dump(cfg, f, indent=2)
        modules.append({"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"})
        pooling = (pool270 if new else pool222).Pooling.load(os.path.join(out, "1_Pooling"))
        feats = {"token_embeddings": torch.tensor(last), "attention_mask": torch.tensor(mask)}
        if prompt:
            feats["prompt_length"] = prompt
        feats = pooling(feats)
        width = pooling.get_sentence_embedding_dimension()
        for i, (n_out, act, bias, fmt) in enumerate(denses):
            path = "2_Dense" if i == 0 else f"{2 + i}_Dense"
            d = dense.Dense(width, n_out, bias=bias, activation_function=ACT[act]())
            with torch.no_grad():
                d.linear.weight.copy_(torch.randn(n_out, width) / width ** 0.5)
                if bias:
                    d.linear.bias.copy_(torch.randn(n_out) * 0.1)
            os.makedirs(os.path.join(out, path))
            d.save(os.path.join(out, path))
            if fmt == "safetensors":
                os.remove(os.path.join(out, path, "pytorch_model.bin"))
                write_safetensors(os.path.join(out, path, "model.safetensors"), d.state_dict())
                d = dense.Dense(width, n_out, bias=bias, activation_function=ACT[act](),
                                init_weight=d.linear.weight.detach().clone(),
                                init_bias=d.linear.bias.detach().clone() if bias else None)
            else:
                d = dense.Dense.load(os.path.join(out, path))
            feats = d(feats)
            width = n_out
            modules.append({"idx": len(modules), "name": str(len(modules)), "path": path,
                            "type": "sentence_transformers.models.Dense"})
        if normalize:
            feats = norm.Normalize.load(out)(feats)
            modules.append({"idx": len(modules), "name": str(len(modules)), "path": "2_Normalize",
                            "type": "sentence_transformers.models.Normalize"})
        with open(os.path.join(out, "modules.json"), "w") as f:
            json.dump(modules, f, indent=2)
        if stcfg is not None:
            with open(os.path.join(out, "sentence_bert_config.json"), "w") as f:
                json.dump(stcfg, f, indent=2)
        emb = feats["sentence_embedding"].detach().numpy().astype(np.float64)
        with open(os.path.join(out, "expected.json"), "w") as f:
            json.dump({"model": model, "pooling": "+".join(modes), "normalize": normalize, "prompt_length": prompt,
                       "sentence_transformers": "v2.7.0 Pooling.py" if new else "v2.2.2",
                       "embeddings": [[float(f"{x:.9g}") for x in row] for row in emb]}, f)
        print(out, emb.shape)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
