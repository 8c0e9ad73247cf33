"""Checks POST /v1/embeddings with the official `openai` Python client against a running Engram daemon.

    pip install openai
    python3 tools/openai_client_check.py http://127.0.0.1:14242/v1 "$(cat <data_dir>/api-key)" [MODEL] [DIM]

Asks for the same inputs as floats (explicitly), as base64 (decoded here to little-endian f32), and with the
client's default (which requests base64 and decodes it itself), and checks that all agree and have DIM dimensions.
"""
import base64
import struct
import sys
import time

from openai import OpenAI

base_url, key = sys.argv[1], sys.argv[2]
model = sys.argv[3] if len(sys.argv) > 3 else "all-MiniLM-L6-v2"
dim = int(sys.argv[4]) if len(sys.argv) > 4 else 384
client = OpenAI(base_url=base_url, api_key=key)
texts = ["Engram keeps memories on your machine.", "Where did Caroline go last weekend?", "ok"]

floats = client.embeddings.create(model=model, input=texts, encoding_format="float")
assert floats.model == model, floats.model
assert [d.index for d in floats.data] == [0, 1, 2]
assert all(len(d.embedding) == dim for d in floats.data), [len(d.embedding) for d in floats.data]
assert floats.usage.prompt_tokens == floats.usage.total_tokens > 0

raw = client.embeddings.with_raw_response.create(model=model, input=texts, encoding_format="base64").http_response.json()
for d, f in zip(raw["data"], floats.data):
    b = base64.b64decode(d["embedding"])
    decoded = list(struct.unpack(f"<{len(b) // 4}f", b))
    assert len(decoded) == dim
    assert decoded == [struct.unpack("<f", struct.pack("<f", x))[0] for x in f.embedding], "base64 != float"

default = client.embeddings.create(model=model, input=texts)
for d, f in zip(default.data, floats.data):
    assert max(abs(a - b) for a, b in zip(d.embedding, f.embedding)) < 1e-6

single = client.embeddings.create(model=model, input="hello world")
assert len(single.data) == 1 and len(single.data[0].embedding) == dim

try:
    client.embeddings.create(model="text-embedding-3-small", input="x")
    raise AssertionError("an unknown model must be refused")
except Exception as e:  # openai.UnprocessableEntityError
    assert getattr(e, "status_code", None) == 422, e

lat = []
for _ in range(50):
    t = time.perf_counter()
    client.embeddings.create(model=model, input="Where did Caroline go last weekend?")
    lat.append((time.perf_counter() - t) * 1000)
lat.sort()
print(
    f"openai client OK: {len(texts)} inputs x {dim} dims; float, base64 and default encodings agree; "
    f"usage {floats.usage.total_tokens} tokens; one short input p50 {lat[len(lat) // 2]:.1f} ms through the client"
)
