#!/usr/bin/python3
"""Train a small from-scratch HF sequence classifier on SST-2 (GLUE) and write a model folder
(config.json, model.safetensors, tokenizer files, golden.json, act_scales.json, README.md).

  /usr/bin/python3 sst2_train.py --arch bert|distilbert|xlmr|roberta --name sst2-bert-mini \
      [--epochs 2] [--budget-min 25] [--batch 32] [--lr 5e-4]
  /usr/bin/python3 sst2_train.py --arch ... --name ... --finalize-only   # from work/<name>/ckpt

Single-threaded torch (other jobs share the machine). Dynamic padding: batches are drawn from
length-sorted chunks of 50 batches, padded to the batch max; max_length 64.
--budget-min caps wall time: the linear-decay schedule is re-planned from the measured step
time so that the LR reaches 0 when the budget runs out (or after --epochs, if sooner)."""
import argparse
import json
import math
import os
import random
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ORACLE = os.path.dirname(HERE)
sys.path.insert(0, ORACLE)
import oracle_env  # noqa: E402,F401
import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import (BertConfig, BertForSequenceClassification, BertTokenizer,  # noqa: E402
                          DistilBertConfig, DistilBertForSequenceClassification, DistilBertTokenizer,
                          RobertaConfig, RobertaForSequenceClassification, RobertaTokenizer,
                          XLMRobertaConfig, XLMRobertaForSequenceClassification, XLMRobertaTokenizer)

import spm_tokjson  # noqa: E402  (oracle/spm_tokjson.py)

SHARED = os.environ.get("SHARED_DIR", os.path.join(ORACLE, "..", "shared"))
DATA = os.path.join(SHARED, "data", "sst2")
WORK = os.path.join(HERE, "work")
MAXLEN = 64
BPE_VOCAB = 8000  # roberta: <s> <pad> </s> <unk>, 256 byte symbols, merges, <mask> last
LABELS = {0: "negative", 1: "positive"}


def log(*a):
    print(time.strftime("%H:%M:%S"), *a, flush=True)


def read_tsv(path):
    rows = open(path, encoding="utf-8").read().splitlines()
    assert rows[0].startswith("sentence\tlabel")
    out = []
    for r in rows[1:]:
        s, y = r.rsplit("\t", 1)
        out.append((s.strip(), int(y)))
    return out


# ---------------------------------------------------------------- tokenizers
def bert_vocab_file(work):
    src = os.path.join(ORACLE, "vendor", "bert-base-uncased", "tokenizer.json")
    if not os.path.exists(src):
        sys.exit(f"missing {src}: run oracle/setup.sh")
    tj = json.load(open(src, encoding="utf-8"))
    inv = sorted((i, t) for t, i in tj["model"]["vocab"].items())
    assert [i for i, _ in inv] == list(range(len(inv))) and len(inv) == 30522
    vf = os.path.join(work, "vocab.txt")
    with open(vf, "w", encoding="utf-8") as fh:
        for _, t in inv:
            fh.write(t + "\n")
    return src, vf


def make_tokenizer(arch, out_dir, train_sents):
    """Build the tokenizer, save it (slow-tokenizer files + tokenizer.json) into out_dir."""
    os.makedirs(out_dir, exist_ok=True)
    work = os.path.join(WORK, "tok_" + arch)
    os.makedirs(work, exist_ok=True)
    if arch in ("bert", "distilbert"):
        src, vf = bert_vocab_file(work)
        cls = BertTokenizer if arch == "bert" else DistilBertTokenizer
        tok = cls(vf, do_lower_case=True, tokenize_chinese_chars=True, strip_accents=None, model_max_length=MAXLEN)
        tok.save_pretrained(out_dir)
        tj = json.load(open(src, encoding="utf-8"))
        tj["truncation"] = {"direction": "Right", "max_length": MAXLEN, "strategy": "LongestFirst", "stride": 0}
        tj["padding"] = None
        with open(os.path.join(out_dir, "tokenizer.json"), "w", encoding="utf-8") as fh:
            json.dump(tj, fh, ensure_ascii=False, indent=2)
        return cls.from_pretrained(out_dir), {"vocab": "bert-base-uncased WordPiece (30522)"}
    corpus = os.path.join(work, "corpus.txt")
    seen, lines = set(), []
    for s in train_sents:
        if s not in seen:
            seen.add(s)
            lines.append(s)
    open(corpus, "w", encoding="utf-8").write("\n".join(lines) + "\n")
    if arch == "roberta":
        return make_bpe_tokenizer(out_dir, work, corpus, len(lines))
    # xlmr: sentencepiece Unigram trained here on the SST-2 train text
    cmd = ["spm_train", "--input=corpus.txt", "--model_prefix=spm", "--model_type=unigram", "--vocab_size=8000",
           "--character_coverage=1.0", "--num_threads=1", "--input_sentence_size=0",
           "--shuffle_input_sentence=false", "--seed_sentencepiece_size=200000"]
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=work)
    if r.returncode != 0:
        sys.exit("spm_train failed:\n" + r.stderr[-3000:])
    tok = XLMRobertaTokenizer(os.path.join(work, "spm.model"), model_max_length=MAXLEN)
    tok.save_pretrained(out_dir)  # sentencepiece.bpe.model + configs
    spm_tokjson.write(os.path.join(out_dir, "sentencepiece.bpe.model"), os.path.join(out_dir, "tokenizer.json"))
    tj = json.load(open(os.path.join(out_dir, "tokenizer.json"), encoding="utf-8"))
    tj["truncation"] = {"direction": "Right", "max_length": MAXLEN, "strategy": "LongestFirst", "stride": 0}
    with open(os.path.join(out_dir, "tokenizer.json"), "w", encoding="utf-8") as fh:
        json.dump(tj, fh, ensure_ascii=False)
    tok = XLMRobertaTokenizer.from_pretrained(out_dir)
    return tok, {"vocab": f"sentencepiece Unigram, spm_train on the {len(lines)} distinct SST-2 train sentences "
                          f"({len(tok)} ids incl. specials)", "spm_train_args": cmd[2:]}


def bytes_to_unicode():
    """GPT-2's byte -> printable character map (as transformers' RobertaTokenizer and the Rust ByteLevel)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\u00a1"), ord("\u00ac") + 1)) + \
        list(range(ord("\u00ae"), ord("\u00ff") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def node_env():
    node_dir = os.path.join(ORACLE, "vendor", "npm")
    if not os.path.isdir(os.path.join(node_dir, "node_modules", "@anush008", "tokenizers")) or not shutil.which("node"):
        sys.exit(f"roberta needs node and npm @anush008/tokenizers under {node_dir} (npm install @anush008/tokenizers@0.6.0)")
    return node_dir, {**os.environ, "NODE_PATH": os.path.join(node_dir, "node_modules")}


def make_bpe_tokenizer(out_dir, work, corpus, nsent):
    """Byte-level BPE trained by HF's Rust BpeTrainer (bpe_train.js) on the SST-2 train text, cut to
    BPE_VOCAB ids in RoBERTa's layout; written as vocab.json + merges.txt (slow RobertaTokenizer, used
    for training and the goldens) and tokenizer.json (RoBERTa's fast-tokenizer layout)."""
    node_dir, env = node_env()
    full = os.path.join(work, "rust_bpe_full.json")
    r = subprocess.run(["node", os.path.join(HERE, "bpe_train.js"), corpus, full], cwd=node_dir, env=env,
                       capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("bpe_train.js failed:\n" + r.stderr[-3000:])
    trained = json.load(open(full, encoding="utf-8"))["model"]
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in trained["merges"]]
    specials = ["<s>", "<pad>", "</s>", "<unk>"]
    vocab = {t: i for i, t in enumerate(specials)}
    for ch in bytes_to_unicode().values():  # the full byte alphabet: no byte is ever unknown
        vocab.setdefault(ch, len(vocab))
    kept = []
    for a_, b_ in merges:  # the Rust trainer's merges in order: a prefix is a smaller-vocab run
        if len(vocab) >= BPE_VOCAB - 1:
            break
        assert a_ in vocab and b_ in vocab, (a_, b_)
        kept.append((a_, b_))
        vocab.setdefault(a_ + b_, len(vocab))
    vocab["<mask>"] = len(vocab)
    assert len(vocab) == BPE_VOCAB and sorted(vocab.values()) == list(range(BPE_VOCAB))
    vf, mf = os.path.join(work, "vocab.json"), os.path.join(work, "merges.txt")
    json.dump(vocab, open(vf, "w", encoding="utf-8"), ensure_ascii=False)
    with open(mf, "w", encoding="utf-8") as fh:
        fh.write("#version: 0.2\n" + "".join(f"{a_} {b_}\n" for a_, b_ in kept))
    tok = RobertaTokenizer(vf, mf, model_max_length=MAXLEN)
    tok.save_pretrained(out_dir)  # vocab.json, merges.txt, tokenizer_config.json, special_tokens_map.json
    added = [{"id": vocab[t], "content": t, "single_word": False, "lstrip": t == "<mask>", "rstrip": False,
              "normalized": t != "<mask>", "special": True} for t in specials + ["<mask>"]]
    tj = {
        "version": "1.0",
        "truncation": {"direction": "Right", "max_length": MAXLEN, "strategy": "LongestFirst", "stride": 0},
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "post_processor": {"type": "RobertaProcessing", "sep": ["</s>", 2], "cls": ["<s>", 0],
                           "trim_offsets": True, "add_prefix_space": False},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False,
                  "vocab": vocab, "merges": [f"{a_} {b_}" for a_, b_ in kept]},
    }
    with open(os.path.join(out_dir, "tokenizer.json"), "w", encoding="utf-8") as fh:
        json.dump(tj, fh, ensure_ascii=False)
    tok = RobertaTokenizer.from_pretrained(out_dir)
    assert len(tok) == BPE_VOCAB, len(tok)
    return tok, {"vocab": f"byte-level BPE (GPT-2 byte map and pre-tokenization regex, add_prefix_space false) trained "
                          f"by Hugging Face's Rust BpeTrainer (npm @anush008/tokenizers 0.6.0, oracle/train/bpe_train.js) "
                          f"on the {nsent} distinct SST-2 train sentences, its first {len(kept)} merges kept: "
                          f"{BPE_VOCAB} ids (<s> <pad> </s> <unk> = 0..3, the 256 byte symbols, merges, <mask> = "
                          f"{BPE_VOCAB - 1})", "merges": len(kept)}


def encode(tok, sents):
    return tok(sents, truncation=True, max_length=MAXLEN)["input_ids"]


# ---------------------------------------------------------------- model
def make_model(arch, vocab_size):
    common = dict(num_labels=2, id2label=LABELS, label2id={v: k for k, v in LABELS.items()})
    if arch == "bert":
        cfg = BertConfig(vocab_size=vocab_size, hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
                         intermediate_size=1024, max_position_embeddings=512, **common)
        return BertForSequenceClassification(cfg)
    if arch == "distilbert":
        cfg = DistilBertConfig(vocab_size=vocab_size, dim=256, n_layers=4, n_heads=4, hidden_dim=1024,
                               max_position_embeddings=512, **common)
        return DistilBertForSequenceClassification(cfg)
    if arch == "roberta":
        cfg = RobertaConfig(vocab_size=vocab_size, hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
                            intermediate_size=1024, max_position_embeddings=514, type_vocab_size=1,
                            layer_norm_eps=1e-5, pad_token_id=1, bos_token_id=0, eos_token_id=2, **common)
        return RobertaForSequenceClassification(cfg)
    cfg = XLMRobertaConfig(vocab_size=vocab_size, hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
                           intermediate_size=1024, max_position_embeddings=514, type_vocab_size=1,
                           layer_norm_eps=1e-5, pad_token_id=1, bos_token_id=0, eos_token_id=2, **common)
    return XLMRobertaForSequenceClassification(cfg)


def collate(ids, idx, pad_id, labels=None):
    L = max(len(ids[j]) for j in idx)
    x = torch.full((len(idx), L), pad_id, dtype=torch.long)
    m = torch.zeros((len(idx), L), dtype=torch.long)
    for r, j in enumerate(idx):
        x[r, :len(ids[j])] = torch.tensor(ids[j])
        m[r, :len(ids[j])] = 1
    y = None if labels is None else torch.tensor([labels[j] for j in idx])
    return x, m, y


def epoch_batches(ids, bs, rng):
    idx = list(range(len(ids)))
    rng.shuffle(idx)
    out = []
    chunk = bs * 50
    for i in range(0, len(idx), chunk):
        c = sorted(idx[i:i + chunk], key=lambda j: len(ids[j]))
        out += [c[k:k + bs] for k in range(0, len(c), bs)]
    rng.shuffle(out)
    return out


@torch.no_grad()
def predict(model, ids, pad_id, bs=64):
    model.eval()
    order = sorted(range(len(ids)), key=lambda j: len(ids[j]))
    logits = [None] * len(ids)
    for k in range(0, len(order), bs):
        b = order[k:k + bs]
        x, m, _ = collate(ids, b, pad_id)
        out = model(input_ids=x, attention_mask=m).logits
        for r, j in enumerate(b):
            logits[j] = out[r]
    return torch.stack(logits)


def accuracy(model, ids, labels, pad_id):
    lg = predict(model, ids, pad_id)
    return (lg.argmax(-1) == torch.tensor(labels)).float().mean().item()


# ---------------------------------------------------------------- training
def train(a, model, tr_ids, tr_y, dv_ids, dv_y, pad_id, ckpt_dir):
    torch.manual_seed(a.seed)
    rng = random.Random(a.seed)
    no_decay = ("bias", "LayerNorm.weight", "layer_norm.weight")
    groups = [{"params": [p for n, p in model.named_parameters() if not n.endswith(no_decay)], "weight_decay": a.wd},
              {"params": [p for n, p in model.named_parameters() if n.endswith(no_decay)], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=a.lr, betas=(0.9, 0.98), eps=1e-6)
    spe = math.ceil(len(tr_ids) / a.batch)
    plan = {"total": a.epochs * spe, "warmup": a.warmup}

    def lr_lambda(s):
        if s < plan["warmup"]:
            return (s + 1) / plan["warmup"]
        return max(0.0, (plan["total"] - s) / max(1, plan["total"] - plan["warmup"]))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda)
    budget = a.budget_min * 60
    t0 = last_ck = time.time()
    step, hist, ep_done = 0, [], 0
    loss_ema = None
    model.train()
    for ep in range(a.epochs):
        for b in epoch_batches(tr_ids, a.batch, rng):
            if step >= plan["total"]:
                break
            x, m, y = collate(tr_ids, b, pad_id, tr_y)
            loss = model(input_ids=x, attention_mask=m, labels=y).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            opt.zero_grad(set_to_none=True)
            step += 1
            loss_ema = loss.item() if loss_ema is None else 0.98 * loss_ema + 0.02 * loss.item()
            el = time.time() - t0
            if step in (30, 100) or step % 250 == 0:  # re-plan so the decay ends within the budget
                per = el / step
                fit = int(budget / per)
                new = min(a.epochs * spe, max(fit, step + 1))
                if new != plan["total"]:
                    plan["total"] = new
                    plan["warmup"] = min(a.warmup, max(1, new // 10))
            if step % 100 == 0:
                log(f"ep {ep} step {step}/{plan['total']} loss {loss_ema:.4f} lr {sched.get_last_lr()[0]:.2e} "
                    f"{el / step:.3f}s/step elapsed {el / 60:.1f}m")
            if time.time() - last_ck > a.ckpt_min * 60:
                model.save_pretrained(ckpt_dir)
                json.dump({"step": step, "epoch_float": step / spe}, open(os.path.join(ckpt_dir, "progress.json"), "w"))
                last_ck = time.time()
            if el > budget * 1.15:
                log("hard stop: budget exceeded")
                plan["total"] = step
                break
        else:
            ep_done += 1
            acc = accuracy(model, dv_ids, dv_y, pad_id)
            hist.append({"epoch": ep + 1, "step": step, "dev_acc": acc, "train_loss_ema": loss_ema})
            log(f"epoch {ep + 1} done: dev acc {acc:.4f}")
            model.train()
            continue
        break
    train_s = time.time() - t0
    if step % spe:
        acc = accuracy(model, dv_ids, dv_y, pad_id)
        hist.append({"epoch": step / spe, "step": step, "dev_acc": acc, "train_loss_ema": loss_ema})
        log(f"stopped at step {step} ({step / spe:.2f} epochs): dev acc {acc:.4f}")
    model.save_pretrained(ckpt_dir)
    info = {"steps": step, "steps_per_epoch": spe, "epochs": round(step / spe, 3), "train_seconds": round(train_s, 1),
            "batch_size": a.batch, "peak_lr": a.lr, "warmup_steps": plan["warmup"], "weight_decay": a.wd,
            "optimizer": "torch.optim.AdamW(betas=(0.9, 0.98), eps=1e-6), grad-norm clip 1.0",
            "schedule": "linear warmup then linear decay to 0", "seed": a.seed, "threads": 1,
            "dropout": "HF defaults (0.1)", "max_length": MAXLEN, "history": hist,
            "torch": torch.__version__, "transformers": transformers.__version__}
    json.dump(info, open(os.path.join(ckpt_dir, "train_info.json"), "w"), indent=1)
    return info


# ---------------------------------------------------------------- finalize
def linear_modules(model):
    return [(n, m) for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)]


@torch.no_grad()
def act_stats(model, ids, pad_id, bs=32):
    """Per-channel abs max of every nn.Linear input over the real (unpadded) tokens."""
    model.eval()
    stats, cur = {}, {}
    hooks = []
    for n, mod in linear_modules(model):
        def hook(m_, inp, out, n=n):
            x = inp[0].detach().abs()
            if x.dim() == 3:
                x = x[cur["mask"]]
            else:
                x = x.reshape(-1, x.shape[-1])
            v = x.max(0).values
            stats[n] = v if n not in stats else torch.maximum(stats[n], v)
        hooks.append(mod.register_forward_hook(hook))
    for k in range(0, len(ids), bs):
        b = list(range(k, min(k + bs, len(ids))))
        x, m, _ = collate(ids, b, pad_id)
        cur["mask"] = m.bool()
        model(input_ids=x, attention_mask=m)
    for h in hooks:
        h.remove()
    summary = {}
    for n, v in stats.items():
        med = v.median().item()
        top = torch.topk(v, min(3, v.numel()))
        summary[n] = {"channels": v.numel(), "max": v.max().item(), "median": med,
                      "max_over_median": v.max().item() / med if med > 0 else float("inf"),
                      "top_channels": top.indices.tolist(), "top_values": [round(t, 4) for t in top.values.tolist()]}
    return {n: v.tolist() for n, v in stats.items()}, summary


def rust_crosscheck(out_dir, sents, slow_ids):
    node_dir = os.path.join(ORACLE, "vendor", "npm")
    if not os.path.isdir(os.path.join(node_dir, "node_modules", "@anush008", "tokenizers")) or not shutil.which("node"):
        return "skipped (npm @anush008/tokenizers not installed)"
    req = os.path.join(WORK, "rust_req.json")
    json.dump([[s, None] for s in sents], open(req, "w", encoding="utf-8"), ensure_ascii=False)
    r = subprocess.run(["node", os.path.join(ORACLE, "rust_tok.js"), os.path.join(out_dir, "tokenizer.json"), req],
                       cwd=node_dir, capture_output=True, text=True,
                       env={**os.environ, "NODE_PATH": os.path.join(node_dir, "node_modules")})
    if r.returncode != 0:
        return "node failed: " + r.stderr[-300:]
    rust = json.loads(r.stdout)
    # rust_tok.js disables truncation; compare after truncating to MAXLEN the way HF does
    bad = 0
    for (ids, _), s in zip(rust, slow_ids):
        if len(ids) > MAXLEN:
            ids = ids[:MAXLEN - 1] + [ids[-1]]
        bad += ids != s
    return f"{len(sents) - bad}/{len(sents)} dev sentences identical (slow tokenizer vs Rust tokenizers on tokenizer.json)"


def finalize(a, tok, tok_info, out_dir, ckpt_dir, dv_sents, dv_y):
    cls = {"bert": BertForSequenceClassification, "distilbert": DistilBertForSequenceClassification,
           "xlmr": XLMRobertaForSequenceClassification, "roberta": RobertaForSequenceClassification}[a.arch]
    model = cls.from_pretrained(ckpt_dir)
    model.config._name_or_path = a.name  # not this machine's checkpoint path
    model.save_pretrained(out_dir, safe_serialization=True)
    for f in ("pytorch_model.bin",):
        if os.path.exists(os.path.join(out_dir, f)):
            os.remove(os.path.join(out_dir, f))
    # everything below runs on the model as reloaded from out_dir (model.safetensors)
    model = cls.from_pretrained(out_dir).eval()
    torch.manual_seed(0)
    pad_id = tok.pad_token_id
    dv_ids = encode(tok, dv_sents)
    lg = predict(model, dv_ids, pad_id)
    pred = lg.argmax(-1)
    acc = (pred == torch.tensor(dv_y)).float().mean().item()
    log(f"{a.name}: FP32 dev acc {acc:.4f} ({int((pred == torch.tensor(dv_y)).sum())}/{len(dv_y)})")
    # golden: first 64 dev sentences as one dynamically padded batch
    n = 64
    enc = tok(dv_sents[:n], truncation=True, max_length=MAXLEN, padding=True, return_tensors="pt")
    with torch.no_grad():
        out = model(**{k: v for k, v in enc.items()}, output_hidden_states=True)
    single = []
    with torch.no_grad():
        for i in range(n):
            e1 = tok(dv_sents[i], truncation=True, max_length=MAXLEN, return_tensors="pt")
            single.append(model(**e1).logits[0])
    single = torch.stack(single)
    golden = {
        "model": a.name, "class": type(model).__name__, "tokenizer_class": type(tok).__name__,
        "versions": {"transformers": transformers.__version__, "torch": torch.__version__},
        "dtype": "float32", "max_length": MAXLEN, "padding": "to the longest of these 64 (right, pad id %d)" % pad_id,
        "note": "logits from one padded batch; logits_unpadded: each sentence run alone (no padding). "
                "last_hidden_state_cls: final hidden state at position 0.",
        "sentences": dv_sents[:n], "labels": dv_y[:n],
        "input_ids": enc["input_ids"].tolist(), "attention_mask": enc["attention_mask"].tolist(),
    }
    if "token_type_ids" in enc:
        golden["token_type_ids"] = enc["token_type_ids"].tolist()
    golden["logits"] = out.logits.tolist()
    golden["logits_unpadded"] = single.tolist()
    golden["max_abs_diff_padded_vs_unpadded"] = (out.logits - single).abs().max().item()
    golden["last_hidden_state_cls"] = [[round(x, 6) for x in r] for r in out.hidden_states[-1][:, 0].tolist()]
    golden["predictions"] = out.logits.argmax(-1).tolist()
    golden["dev_accuracy_all_872"] = acc
    json.dump(golden, open(os.path.join(out_dir, "golden.json"), "w", encoding="utf-8"), ensure_ascii=False)
    # activation statistics over the first 256 dev sentences
    scales, summary = act_stats(model, dv_ids[:256], pad_id)
    json.dump({"what": "per-channel abs max of each nn.Linear input over the real tokens of the first 256 SST-2 dev "
                       "sentences (FP32, HF reference; pooler/classifier inputs are the [CLS]/first-token vectors)",
               "summary": summary, "act_scales": scales},
              open(os.path.join(out_dir, "act_scales.json"), "w"))
    xcheck = rust_crosscheck(out_dir, dv_sents, dv_ids)
    log("tokenizer cross-check:", xcheck)
    info = json.load(open(os.path.join(ckpt_dir, "train_info.json")))
    write_readme(a, model, tok_info, info, acc, summary, xcheck, out_dir, golden["max_abs_diff_padded_vs_unpadded"])
    return acc, summary


def write_readme(a, model, tok_info, info, acc, summary, xcheck, out_dir, pad_diff):
    cfg = model.config
    nparam = sum(p.numel() for p in model.parameters())
    arch_line = {
        "bert": "BertForSequenceClassification: 4 layers, hidden 256, 4 heads, intermediate 1024, GELU, "
                "post-LN, max_position_embeddings 512, type_vocab 2, pooler (tanh) + classifier",
        "distilbert": "DistilBertForSequenceClassification: n_layers 4, dim 256, n_heads 4, hidden_dim 1024, GELU, "
                      "max_position_embeddings 512 (no token types), pre_classifier (ReLU) + classifier",
        "roberta": "RobertaForSequenceClassification: 4 layers, hidden 256, 4 heads, intermediate 1024, GELU, "
                   "post-LN, layer_norm_eps 1e-5, pad id 1, positions start at 2 (max_position_embeddings 514), "
                   "type_vocab 1, classification head dense(tanh) + out_proj on <s>",
        "xlmr": "XLMRobertaForSequenceClassification: 4 layers, hidden 256, 4 heads, intermediate 1024, GELU, "
                "post-LN, layer_norm_eps 1e-5, pad id 1, positions start at 2 (max_position_embeddings 514), "
                "type_vocab 1, classification head dense(tanh) + out_proj on <s>",
    }[a.arch]
    files = sorted(os.listdir(out_dir)) + (["README.md"] if "README.md" not in os.listdir(out_dir) else [])
    size = sum(os.path.getsize(os.path.join(out_dir, f)) for f in os.listdir(out_dir) if f != "README.md")
    hist = "\n".join(f"| {h['epoch']:.2f} | {h['step']} | {h['dev_acc'] * 100:.2f}% | {h['train_loss_ema']:.4f} |"
                     for h in info["history"])
    # outlier table: one row per layer, columns = Linear inputs
    rows = {}
    for n, s in summary.items():
        parts = n.split(".")
        if "layer" in parts:
            li = parts[parts.index("layer") + 1]
            key, col = f"layer {li}", ".".join(parts[parts.index("layer") + 2:])
        else:
            key, col = "head", n
        rows.setdefault(key, []).append((col, s))
    lines = []
    for key, cols in rows.items():
        merged = []  # Q/K/V read the same tensor: show it once
        for c, s in cols:
            if merged and merged[-1][1] == s:
                merged[-1][0] += "/" + c.split(".")[-1]
            else:
                merged.append([c, s])
        cells = "; ".join(f"`{c}` **{s['max_over_median']:.1f}x** (max {s['max']:.2f}, med {s['median']:.3f}, "
                          f"ch {s['top_channels'][0]})" for c, s in merged)
        lines.append(f"| {key} | {cells} |")
    ratios = [s["max_over_median"] for s in summary.values()]
    tok_files = ("`vocab.txt`, `tokenizer_config.json`, `special_tokens_map.json` (slow "
                 f"{'BertTokenizer' if a.arch == 'bert' else 'DistilBertTokenizer'}, do_lower_case) and `tokenizer.json` "
                 "(HF fast-tokenizer file of bert-base-uncased, truncation set to 64, no padding)") \
        if a.arch != "xlmr" else ("`sentencepiece.bpe.model` (spm_train output), `tokenizer_config.json`, "
                                  "`special_tokens_map.json` (slow XLMRobertaTokenizer) and `tokenizer.json` "
                                  "(XLMRobertaConverter layout, written by oracle/spm_tokjson.py; truncation 64)")
    if a.arch == "roberta":
        tok_files = ("`vocab.json` + `merges.txt` (GPT-2/RoBERTa layout, merges header `#version: 0.2`), "
                     "`tokenizer_config.json`, `special_tokens_map.json` (slow RobertaTokenizer, used for training "
                     "and golden.json) and `tokenizer.json` (roberta-base's fast-tokenizer layout: BPE model, "
                     "ByteLevel pre-tokenizer add_prefix_space false, RobertaProcessing trim_offsets true, "
                     "ByteLevel decoder; written by sst2_train.py; truncation 64)")
    lic = ("The vocabulary is bert-base-uncased's WordPiece vocab (Google BERT, Apache-2.0), taken from the "
           "tokenizer.json of all-MiniLM-L6-v2 as shipped in the Go module github.com/clems4ever/all-minilm-l6-v2-go.") \
        if a.arch != "xlmr" else ("The sentencepiece model was trained here (spm_train, Debian's sentencepiece) on the "
                                  "SST-2 train sentences; no third-party vocabulary.")
    if a.arch == "roberta":
        lic = ("The byte-level BPE was trained here (Hugging Face's Rust tokenizers through npm "
               "@anush008/tokenizers 0.6.0, Apache-2.0) on the SST-2 train sentences; no third-party vocabulary.")
    txt = f"""# {a.name}

A small **real trained** text classifier (SST-2 binary sentiment, labels 0 = negative, 1 = positive),
trained **from scratch** (random init, no pretraining) on CPU, in Hugging Face format. It is a test
model for FP32 parity and INT8 (SmoothQuant) experiments, not a good sentiment model: accuracy is
far below pretrained BERT (~92-93%).

## Architecture
{arch_line}. Parameters: {nparam:,} ({nparam * 4 / 2**20:.1f} MiB FP32), vocab {cfg.vocab_size}.
Tokenizer: {tok_info['vocab']}.

## Training
- data: SST-2 (GLUE) train, 67,349 sentences/phrases (`shared/data/sst2/train.tsv`), sentences `.strip()`ed
- max_length {MAXLEN}, dynamic padding (length-sorted chunks of 50 batches, padded to the batch max)
- batch {info['batch_size']}, AdamW peak LR {info['peak_lr']}, weight decay {info['weight_decay']} (not on bias/LayerNorm),
  betas (0.9, 0.98), eps 1e-6, grad clip 1.0, linear warmup {info['warmup_steps']} steps then linear decay to 0,
  dropout HF default 0.1, seed {info['seed']}
- {info['steps']} steps = **{info['epochs']} epochs** ({info['steps_per_epoch']} steps/epoch)
- training time: **{info['train_seconds'] / 60:.1f} min** on 1 CPU thread (shared 2-core machine), torch {info['torch']} (Debian python3-torch 1.13.1),
  transformers {info['transformers']}
- script: `oracle/train/sst2_train.py --arch {a.arch} --name {a.name} --epochs {a.epochs} --budget-min {a.budget_min} --batch {a.batch} --lr {a.lr}`

| epochs | step | SST-2 dev acc | train loss (EMA) |
| --- | --- | --- | --- |
{hist}

## FP32 accuracy
**SST-2 dev (GLUE dev, 872 sentences): {acc * 100:.2f}%**, computed with the HF transformers
{transformers.__version__} reference code on this folder's `model.safetensors` (dynamic padding, batch 64).

## Files
{', '.join('`' + f + '`' for f in files)} ({size / 2**20:.1f} MiB without README).
- `config.json`, `model.safetensors`: `save_pretrained` (HF parameter names), FP32
- tokenizer: {tok_files}
- tokenizer check: {xcheck}
- `golden.json`: first 64 dev sentences as one right-padded batch: `input_ids`, `attention_mask`{', `token_type_ids`' if a.arch == 'bert' else ''},
  `logits` (FP32 HF reference), `logits_unpadded`
  (each run alone; max |diff| to padded {pad_diff:.2e}), `last_hidden_state_cls`, `predictions`
- `act_scales.json`: per-channel abs max of every `nn.Linear` input (SmoothQuant calibration style)
  over the real tokens of the first 256 dev sentences, plus a per-module summary

## Activation outliers (SmoothQuant)
Per Linear input: ratio max-channel / median-channel of the per-channel abs max over 256 dev
sentences (and the max, the median and the index of the largest channel). Q/K/V share one input,
so they show the same numbers. Over all Linear inputs: min {min(ratios):.1f}x, median
{sorted(ratios)[len(ratios) // 2]:.1f}x, max {max(ratios):.1f}x.

| layer | Linear input: max/median (max, median, argmax channel) |
| --- | --- |
{chr(10).join(lines)}

## Licence
Weights were trained here from random initialisation on SST-2 data (Stanford Sentiment Treebank,
Socher et al. 2013, via GLUE; distributed for research without a formal licence, cite the
dataset paper; see `shared/data/sst2/README.md`). {lic} The model code is Hugging Face
transformers (Apache-2.0). Use as test data for research/engineering.
"""
    open(os.path.join(out_dir, "README.md"), "w", encoding="utf-8").write(txt)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--arch", choices=["bert", "distilbert", "xlmr", "roberta"], required=True)
    ap.add_argument("--name", required=True)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--budget-min", type=float, default=25)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=5e-4)
    ap.add_argument("--wd", type=float, default=0.01)
    ap.add_argument("--warmup", type=int, default=300)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--ckpt-min", type=float, default=4)
    ap.add_argument("--limit", type=int, default=0, help="debug: use only N train rows")
    ap.add_argument("--finalize-only", action="store_true")
    ap.add_argument("--out", default=os.path.join(SHARED, "models"))
    a = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(a.seed)
    train_rows = read_tsv(os.path.join(DATA, "train.tsv"))
    dev_rows = read_tsv(os.path.join(DATA, "dev.tsv"))
    if a.limit:
        train_rows = train_rows[:a.limit]
    tr_s, tr_y = [s for s, _ in train_rows], [y for _, y in train_rows]
    dv_s, dv_y = [s for s, _ in dev_rows], [y for _, y in dev_rows]
    out_dir = os.path.abspath(os.path.join(a.out, a.name))
    ckpt_dir = os.path.join(WORK, a.name, "ckpt")
    os.makedirs(ckpt_dir, exist_ok=True)
    tok, tok_info = make_tokenizer(a.arch, out_dir, tr_s)
    if not a.finalize_only:
        t = time.time()
        cache = os.path.join(WORK, a.name, "train_ids.pt")
        if os.path.exists(cache) and not a.limit:
            tr_ids = torch.load(cache)
        else:
            tr_ids = encode(tok, tr_s)
            if not a.limit:
                torch.save(tr_ids, cache)
        dv_ids = encode(tok, dv_s)
        log(f"tokenized {len(tr_ids)} train ({sum(map(len, tr_ids)) / len(tr_ids):.1f} tok avg) in {time.time() - t:.0f}s")
        model = make_model(a.arch, len(tok))
        log(f"{a.name}: {sum(p.numel() for p in model.parameters()):,} params")
        train(a, model, tr_ids, tr_y, dv_ids, dv_y, tok.pad_token_id, ckpt_dir)
    finalize(a, tok, tok_info, out_dir, ckpt_dir, dv_s, dv_y)


if __name__ == "__main__":
    main()
