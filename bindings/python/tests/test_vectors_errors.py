"""numpy vectors in and out, and the exception hierarchy with its fields."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest

import engram


def unit(v: "np.typing.ArrayLike") -> "np.ndarray":
    a = np.asarray(v, dtype=np.float32)
    return a / np.linalg.norm(a)


def stored(store: engram.Store, memory_id: str) -> "np.ndarray":
    v = store.embedding(memory_id)
    assert v is not None
    return v


def test_vectors_in_and_out(ext_store: engram.Store) -> None:
    rng = np.random.default_rng(7)
    vecs = rng.normal(size=(50, 8)).astype(np.float32)
    ms = ext_store.add_many([f"item {i}" for i in range(50)], embeddings=vecs)
    assert ext_store.dim == 8 and len(ms) == 50
    back = ext_store.embedding(ms[3].id)
    assert back is not None and back.dtype == np.float32 and back.shape == (8,)
    assert np.allclose(back, unit(vecs[3]), atol=2e-3)  # stored L2-normalised, as float16

    # A 1-D list and a float64 array are accepted too.
    one = ext_store.add("from a list", embedding=[float(x) for x in vecs[0]])
    two = ext_store.add("from float64", embedding=vecs[1].astype(np.float64))
    assert np.allclose(stored(ext_store, one.id), unit(vecs[0]), atol=2e-3)
    assert np.allclose(stored(ext_store, two.id), unit(vecs[1]), atol=2e-3)

    hits = ext_store.search("", query_embedding=vecs[17], mode="vector", limit=3)
    assert hits[0].memory.id == ms[17].id and hits[0].vector_score == pytest.approx(1.0, abs=2e-3)
    # A strided float32 view (a row of a Fortran-ordered matrix) is read by its strides, not its memory order.
    row = np.asfortranarray(vecs)[21]
    assert row.strides == (4 * 50,)
    hits = ext_store.search("", query_embedding=row, mode="vector", limit=1)
    assert hits[0].memory.id == ms[21].id

    changed = ext_store.update(ms[5].id, embedding=vecs[6])
    assert changed.id == ms[5].id
    assert np.allclose(stored(ext_store, ms[5].id), unit(vecs[6]), atol=2e-3)

    # Without a query vector, an external store cannot embed the query: vector mode falls back to lexical.
    r = ext_store.search_results("item 4", mode="vector", limit=3)
    assert r.mode == "lexical" and r.fallback is not None and r.hits[0].memory.content == "item 4"

    # Memories without a vector in an external store are found lexically and have no embedding.
    plain = ext_store.add("no vector given")
    assert ext_store.embedding(plain.id) is None


def test_builtin_store_returns_its_own_vectors(store: engram.Store) -> None:
    m = store.add("Prefers dark roast coffee")
    v = store.embedding(m.id)
    assert v is not None and v.shape == (store.dim,) and abs(float(np.linalg.norm(v)) - 1) < 1e-2


@pytest.mark.parametrize(
    "bad, field",
    [
        (np.zeros((2, 8), dtype=np.float32), "embedding"),  # wrong shape
        (np.array([np.nan] + [1.0] * 7, dtype=np.float32), "embedding"),  # NaN
        (np.ones(5, dtype=np.float32), "embedding"),  # wrong dimension
        ("not a vector", "embedding"),
    ],
)
def test_bad_vectors_raise_value_error_and_store_nothing(ext_store: engram.Store, bad: object, field: str) -> None:
    with pytest.raises(ValueError) as e:
        ext_store.add("never stored", embedding=bad)  # type: ignore[arg-type]
    assert isinstance(e.value, engram.InvalidInput) and e.value.field == field
    assert e.value.status == 422
    assert ext_store.search("never stored", mode="lexical") == []


def test_bad_batch_stores_nothing(ext_store: engram.Store) -> None:
    vecs = np.ones((3, 8), dtype=np.float32)
    vecs[2, 4] = np.inf
    with pytest.raises(engram.InvalidInput) as e:
        ext_store.add_many(["a kettle", "a lantern", "a violin"], embeddings=vecs)
    assert e.value.field == "embeddings"
    with pytest.raises(engram.InvalidInput) as e:
        ext_store.add_many(["a kettle", "a lantern"], embeddings=np.ones((3, 8), dtype=np.float32))
    assert e.value.field == "embeddings" and "3 vectors for 2 items" in str(e.value)
    with pytest.raises(engram.InvalidInput) as e:
        ext_store.add_many(["a kettle", "a lantern"], embeddings=np.ones((2, 5), dtype=np.float32))
    assert e.value.field is not None and e.value.field.endswith("embedding")
    with pytest.raises(engram.InvalidInput):
        ext_store.search("x", query_embedding=np.ones((1, 8), dtype=np.float32))
    assert ext_store.search("kettle", mode="lexical") == []


def test_error_classes_and_fields(store: engram.Store, tmp_path: Path) -> None:
    with pytest.raises(engram.NotFound) as nf:
        store.get("missing")
    assert isinstance(nf.value, LookupError) and nf.value.code == "memory_not_found" and nf.value.status == 404

    with pytest.raises(engram.InvalidInput) as inv:
        store.add("x", importance=2.0)
    assert inv.value.field == "importance" and inv.value.errors[0]["type"]

    with pytest.raises(engram.InvalidInput) as lim:
        store.search("coffee", limit=0)
    assert lim.value.field == "limit"

    with pytest.raises(engram.InvalidInput) as mode:
        store.search("coffee", mode="psychic")
    assert mode.value.field == "mode"

    with pytest.raises(engram.InvalidInput) as flt:
        store.search("coffee", filters={"colour": "red"})
    assert flt.value.field == "filters.colour"

    with pytest.raises(engram.InvalidInput) as meta:
        store.add("x", metadata={"bad": float("nan")})
    assert meta.value.field == "metadata"

    with pytest.raises(engram.NotFound) as space:
        store.add("x", space="no-such-space")
    assert space.value.code == "space_not_found"

    store.add("exists", id="dup")
    store.export(Path(store.path) / "e.zip")
    with pytest.raises(engram.Conflict) as c:
        store.export(Path(store.path) / "e.zip")
    assert c.value.code == "export_exists"
    with pytest.raises(engram.Forbidden) as f:
        store.export(tmp_path / "elsewhere.zip")
    assert isinstance(f.value, PermissionError) and f.value.code == "path_not_allowed"

    with pytest.raises(engram.Unavailable):
        engram.Store.open(tmp_path / "m", str(tmp_path / "no-model-here"))
    with pytest.raises(engram.InvalidInput):
        engram.Store.open(tmp_path / "x", "external:0")

    # Exceptions survive pickling (multiprocessing) with their fields.
    again = pickle.loads(pickle.dumps(inv.value))
    assert type(again) is engram.InvalidInput and again.field == "importance" and again.code == inv.value.code
    assert issubclass(engram.StorageFull, engram.StorageError) and issubclass(engram.StorageError, OSError)
