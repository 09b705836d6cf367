#!/usr/bin/env python3
"""Write testdata/deberta-v3-spm/spm.model: the SentencePiece ModelProto
that testdata/deberta-v3-spm/tokenizer.json was converted from.

Python's sentencepiece is not needed: the protobuf is written by hand
from the tokenizer.json's Unigram pieces and scores (float32, as the
proto stores them) and its Precompiled charsmap. Piece types: [PAD],
[CLS], [SEP] control, [UNK] unknown, the others normal; trainer_spec as
microsoft/deberta-v3-base's spm.model (unigram, pad 0, bos 1 = [CLS],
eos 2 = [SEP], unk 3); normalizer_spec nmt_nfkc with its defaults.
[MASK] is not a piece: DeBERTa-v2's tokenizer adds it.

    python3 gen_spm.py ../testdata/deberta-v3-spm   # remakes spm.model byte for byte

With two more arguments, OUT and N, it writes OUT instead: the first N
pieces only and no charsmap (an identity normalizer), a model small
enough for the 500-row embedding table of the DeBERTa golden models:

    python3 gen_spm.py ../testdata/deberta-v3-spm ../../models/testdata/spm/spm.model 499
"""
import base64, json, os, struct, sys


def varint(n):
    if n < 0:
        n += 1 << 64
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field(num, wire, payload):
    key = varint(num << 3 | wire)
    if wire == 2:
        return key + varint(len(payload)) + payload
    return key + payload


def main(folder, out_path=None, keep=None):
    with open(os.path.join(folder, "tokenizer.json"), encoding="utf-8") as f:
        tj = json.load(f)
    model = tj["model"]
    assert model["type"] == "Unigram" and model["unk_id"] == 3
    types = {"[PAD]": 3, "[CLS]": 3, "[SEP]": 3, "[UNK]": 2}
    vocab = model["vocab"] if keep is None else model["vocab"][:keep]
    out = bytearray()
    for piece, score in vocab:
        assert struct.unpack("<f", struct.pack("<f", score))[0] == score, piece
        p = field(1, 2, piece.encode("utf-8")) + field(2, 5, struct.pack("<f", score))
        t = types.get(piece, 1)
        if t != 1:
            p += field(3, 0, varint(t))
        out += field(1, 2, p)
    trainer = (field(3, 0, varint(1)) + field(4, 0, varint(len(vocab)))
               + field(35, 0, varint(0)) + field(40, 0, varint(3)) + field(41, 0, varint(1))
               + field(42, 0, varint(2)) + field(43, 0, varint(0))
               + field(45, 2, b"[UNK]") + field(46, 2, b"[CLS]") + field(47, 2, b"[SEP]") + field(48, 2, b"[PAD]"))
    out += field(2, 2, trainer)
    charsmap = [n for n in tj["normalizer"]["normalizers"] if n["type"] == "Precompiled"][0]["precompiled_charsmap"]
    norm = field(1, 2, b"nmt_nfkc")
    if keep is None:
        norm += field(2, 2, base64.b64decode(charsmap))
    else:
        norm = field(1, 2, b"identity")
    norm += field(3, 0, varint(1)) + field(4, 0, varint(1)) + field(5, 0, varint(1))
    out += field(3, 2, norm)
    with open(out_path or os.path.join(folder, "spm.model"), "wb") as f:
        f.write(out)


if __name__ == "__main__":
    if len(sys.argv) == 4:
        main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
    else:
        main(sys.argv[1])
