#!/usr/bin/python3
"""Makes a sentence-transformers embedder for bench serve's soak
(docs/USAGE.md, "Soak") from a sequence classifier folder: the encoder's
weights without the classification head, config.json naming the bare
model, the tokenizer files, and modules.json with mean pooling and
normalisation. Python's standard library only (the safetensors file is
rewritten by its header).

    /usr/bin/python3 scripts/soak/make_embedder.py assets/sst2-xlmr-mini /tmp/soak/emb

The embedder is the classifier's fine-tuned encoder, not a trained
sentence embedder: it is for load, not for the quality of its vectors.
"""
import json
import os
import shutil
import struct
import sys

BARE = {"XLMRobertaForSequenceClassification": "XLMRobertaModel",
        "RobertaForSequenceClassification": "RobertaModel",
        "BertForSequenceClassification": "BertModel"}


def main(src, dst):
    cfg = json.load(open(os.path.join(src, "config.json")))
    arch = (cfg.get("architectures") or [""])[0]
    if arch not in BARE:
        sys.exit(f"{src}: architectures {arch!r}: want one of {sorted(BARE)}")
    os.makedirs(os.path.join(dst, "1_Pooling"), exist_ok=True)
    cfg["architectures"] = [BARE[arch]]
    for k in ("id2label", "label2id", "problem_type", "finetuning_task"):
        cfg.pop(k, None)
    with open(os.path.join(dst, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    with open(os.path.join(src, "model.safetensors"), "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    keep = {k: v for k, v in header.items() if k != "__metadata__" and not k.startswith("classifier.")}
    out, blob = {}, bytearray()
    for k in sorted(keep):
        a, b = keep[k]["data_offsets"]
        out[k] = dict(keep[k], data_offsets=[len(blob), len(blob) + b - a])
        blob += data[a:b]
    if "__metadata__" in header:
        out["__metadata__"] = header["__metadata__"]
    h = json.dumps(out, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(os.path.join(dst, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + bytes(blob))
    for name in os.listdir(src):
        if name.startswith(("tokenizer", "special_tokens", "vocab", "merges", "sentencepiece", "spm")):
            shutil.copy(os.path.join(src, name), os.path.join(dst, name))
    modules = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
               {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}]
    with open(os.path.join(dst, "modules.json"), "w") as f:
        json.dump(modules, f, indent=2)
    with open(os.path.join(dst, "1_Pooling", "config.json"), "w") as f:
        json.dump({"word_embedding_dimension": cfg["hidden_size"], "pooling_mode_cls_token": False,
                   "pooling_mode_mean_tokens": True}, f, indent=2)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
