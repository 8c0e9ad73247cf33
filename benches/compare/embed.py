"""Embeds the corpus once with all-MiniLM-L6-v2 (the ONNX model Engram's `fastembed` feature loads: mean pooling,
max 256 tokens, L2-normalised), and caches the vectors next to it.

Usage: python embed.py CORPUS.jsonl MODEL_DIR OUT.f32
OUT.f32: rows of 384 little-endian float32, in corpus order. Skipped when OUT.f32 exists with the right size.
"""
import json
import os
import sys
import time

import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer


def main():
    corpus, model_dir, out = sys.argv[1], sys.argv[2], sys.argv[3]
    texts = [json.loads(line)["text"] for line in open(corpus, encoding="utf-8")]
    dim = 384
    if os.path.exists(out) and os.path.getsize(out) == len(texts) * dim * 4:
        print(f"{out}: cached")
        return
    tok = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
    tok.enable_truncation(max_length=256)
    tok.enable_padding()
    opts = ort.SessionOptions()
    sess = ort.InferenceSession(os.path.join(model_dir, "model.onnx"), opts, providers=["CPUExecutionProvider"])
    names = {i.name for i in sess.get_inputs()}
    started = time.time()
    with open(out + ".tmp", "wb") as f:
        for at in range(0, len(texts), 256):
            enc = tok.encode_batch(texts[at : at + 256])
            ids = np.array([e.ids for e in enc], dtype=np.int64)
            mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
            feed = {"input_ids": ids, "attention_mask": mask}
            if "token_type_ids" in names:
                feed["token_type_ids"] = np.zeros_like(ids)
            hidden = sess.run(None, feed)[0]
            m = mask[:, :, None].astype(np.float32)
            pooled = (hidden * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1e-9)
            pooled /= np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
            f.write(pooled.astype("<f4").tobytes())
            if at % 10240 == 0:
                done = at + len(enc)
                print(f"{done}/{len(texts)} embedded, {done / (time.time() - started):.0f}/s", flush=True)
    os.replace(out + ".tmp", out)
    print(f"{len(texts)} vectors -> {out} in {time.time() - started:.0f} s")


if __name__ == "__main__":
    main()
