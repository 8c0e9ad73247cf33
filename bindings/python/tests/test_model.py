"""The sentence-embedding model path (feature `fastembed`): ONNX Runtime named by ORT_DYLIB_PATH and the model
directory by ENGRAM_TEST_MODEL_DIR (.ci/run sets both whenever ../shared/models is beside the clone)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import engram


def test_model_directory_embeds_and_searches(tmp_path: Path) -> None:
    model = os.environ.get("ENGRAM_TEST_MODEL_DIR")
    if not model or not os.environ.get("ORT_DYLIB_PATH"):
        pytest.skip("no model (set ENGRAM_TEST_MODEL_DIR and ORT_DYLIB_PATH)")
    with engram.Store.open(tmp_path / "m", model) as store:
        assert store.dim == 384 and store.embedder.startswith("onnx:")
        store.add_many(["The cat sat on the mat", "Quarterly revenue grew by ten percent", "My dog loves the park"])
        hits = store.search("a puppy playing outside", mode="vector", limit=3)
        assert hits[0].memory.content == "My dog loves the park"
        v = store.embedding(hits[0].memory.id)
        assert v is not None and v.shape == (384,)
