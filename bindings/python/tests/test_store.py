"""The Python API against a real store: every group, with values read back from the store."""

from __future__ import annotations

import datetime
import json
from pathlib import Path

import pytest

import engram


def test_memories_round_trip(store: engram.Store) -> None:
    m = store.add(
        "Prefers dark roast coffee, no sugar",
        title="Coffee",
        labels=["preferences", "food"],
        importance=0.8,
        unit_type="preference",
        metadata={"origin": "chat", "n": [1, 2.5, None, True]},
        event_start="2025-05",
    )
    assert m.content == "Prefers dark roast coffee, no sugar"
    assert m.title == "Coffee"
    assert m.labels == ["food", "preferences"]
    assert m.importance == pytest.approx(0.8)
    assert m.unit_type == "preference"
    assert m.metadata == {"origin": "chat", "n": [1, 2.5, None, True]}
    assert m.event_start == "2025-05"
    assert m.state == "active" and m.version == 1 and m.space_id == "default"
    assert isinstance(m.created_at, datetime.datetime) and m.created_at.tzinfo is not None
    assert abs((datetime.datetime.now(datetime.timezone.utc) - m.created_at).total_seconds()) < 60

    got = store.get(m.id)
    assert got == m and got.to_dict()["labels"] == ["food", "preferences"]

    changed = store.update(m.id, content="Prefers light roast coffee", labels=["preferences"], importance=0.3)
    assert changed.content == "Prefers light roast coffee"
    assert changed.labels == ["preferences"] and changed.version == 2
    assert store.get(m.id).importance == pytest.approx(0.3)

    store.delete(m.id)
    with pytest.raises(engram.NotFound):
        store.get(m.id)


def test_upsert_by_id_and_add_many(store: engram.Store) -> None:
    first = store.add("The build server runs Debian 12", id="fact-1")
    again = store.add("The build server runs Debian 13", id="fact-1")
    assert first.id == again.id == "fact-1"
    assert store.get("fact-1").content == "The build server runs Debian 13"

    many = store.add_many(
        ["Plans to visit Lisbon in May", {"content": "Sister lives in Lyon", "labels": ["family"], "id": "fam-1"}]
    )
    assert [m.content for m in many] == ["Plans to visit Lisbon in May", "Sister lives in Lyon"]
    assert many[1].id == "fam-1" and store.get("fam-1").labels == ["family"]


def test_expiry(store: engram.Store) -> None:
    past = datetime.datetime(2020, 1, 1, tzinfo=datetime.timezone.utc)
    old = store.add("The spare key is under the blue flowerpot", expires_at=past)
    soon = store.add_many([{"content": "The spare key moves to the shed in spring", "expires_at": "2999-01-01"}])[0]
    assert old.expires_at == past and old.expired
    assert soon.expires_at is not None and soon.expires_at.year == 2999 and not soon.expired
    # Out of search and listings, readable by id.
    assert [h.memory.id for h in store.search("spare key flowerpot shed")] == [soon.id]
    assert store.get(old.id).expired
    listed = store.request("GET", "/memories?include_expired=true").json()
    assert {m["id"]: m["expired"] for m in listed["memories"]} == {old.id: True, soon.id: False}
    # Cleared, then set again; a naive datetime and a bad string are refused with the field named.
    assert store.update(old.id, clear_expiry=True).expires_at is None
    assert {h.memory.id for h in store.search("spare key flowerpot shed")} == {old.id, soon.id}
    assert store.update(old.id, expires_at="2021-03-04T05:06:07Z").expired
    with pytest.raises(engram.InvalidInput) as e:
        store.add("never stored", expires_at=datetime.datetime(2030, 1, 1))
    assert e.value.field == "expires_at"
    with pytest.raises(engram.InvalidInput) as e:
        store.update(soon.id, expires_at="next week")
    assert e.value.field == "expires_at"
    health = store.request("GET", "/health").json()
    assert health["expiry"]["expired"] == 1 and health["store_format"]["version"] == 2


def test_search_hits_and_filters(store: engram.Store) -> None:
    store.add_many(
        [
            {"content": "Prefers dark roast coffee, no sugar", "labels": ["food"], "unit_type": "preference"},
            {"content": "Coffee machine in the office is broken", "labels": ["work"]},
            {"content": "Plans to visit Lisbon in May", "labels": ["travel"]},
        ]
    )
    hits = store.search("coffee", limit=5)
    assert len(hits) >= 2
    contents = [h.memory.content for h in hits]
    assert "coffee" in contents[0].lower() and "coffee" in contents[1].lower()
    assert hits[0].score >= hits[1].score
    assert "coffe" in hits[0].matched_terms and "keyword match" in hits[0].reason
    assert hits[0].lexical_score is not None and hits[0].lexical_score > 0

    only_work = store.search("coffee", filters={"labels": ["work"]})
    assert [h.memory.content for h in only_work] == ["Coffee machine in the office is broken"]
    prefs = store.search("coffee", filters={"unit_type": "preference"})
    assert [h.memory.content for h in prefs] == ["Prefers dark roast coffee, no sugar"]
    lexical = store.search("Lisbon", mode="lexical")
    assert [h.memory.content for h in lexical] == ["Plans to visit Lisbon in May"]
    assert store.search("coffee", limit=1)[0].memory.content == contents[0]

    # search_results: the same hits, with the mode that ran, the candidates and the engine's own time.
    r = store.search_results("coffee", limit=5)
    assert isinstance(r, engram.SearchResults) and len(r) == len(hits)
    assert [h.memory.id for h in r.hits] == [h.memory.id for h in hits]
    assert r.mode == "hybrid" and r.candidates >= 2 and r.fallback is None and 0 < r.elapsed_ms < 60_000


def test_search_context_around_a_thread_hit(store: engram.Store) -> None:
    t = store.create_thread(
        [
            ("user", "We adopted a dog last week"),
            ("assistant", "Congratulations! What breed?"),
            ("user", "A border collie named Pixel"),
        ],
        title="dog",
    )
    hits = store.search("border collie Pixel", include_context=True)
    assert hits, "the extracted memory is found"
    ctx = hits[0].context
    assert any(c.is_hit and "border collie" in c.content for c in ctx)
    assert all(c.kind == "message" for c in ctx) and hits[0].memory.source_thread_id == t.id


def test_threads(store: engram.Store) -> None:
    t = store.create_thread(
        [engram.Message("user", "I moved to Porto last year"), {"role": "assistant", "content": "Nice!"}],
        title="move",
        thread_id="t-1",
    )
    assert t.id == "t-1" and t.title == "move" and t.message_count == 2
    assert [(m.role, m.content, m.index) for m in t.messages] == [
        ("user", "I moved to Porto last year", 0),
        ("assistant", "Nice!", 1),
    ]
    r = store.append("t-1", [("user", "My sister lives in Lyon")], idempotency_key="batch-1")
    assert (r.added, r.skipped, r.message_count) == (1, 0, 3)
    retried = store.append("t-1", [("user", "My sister lives in Lyon")], idempotency_key="batch-1")
    assert (retried.added, retried.skipped, retried.message_count) == (0, 1, 3)
    assert len(r.memory_ids) == 1 and "Lyon" in store.get(r.memory_ids[0]).content
    got = store.get_thread("t-1")
    assert [m.content for m in got.messages][-1] == "My sister lives in Lyon"
    assert [x.id for x in store.threads()] == ["t-1"]
    with pytest.raises(engram.Conflict):
        store.create_thread([("user", "again")], thread_id="t-1")
    store.delete_thread("t-1")
    assert store.threads() == []
    with pytest.raises(engram.NotFound):
        store.get_thread("t-1")


def test_labels_and_spaces(store: engram.Store) -> None:
    label = store.create_label("work", description="job things")
    assert (label.id, label.name, label.description) == ("label_work", "work", "job things")
    store.add("Quarterly report due Friday", labels=["work"])
    assert [(x.name, x.memory_count) for x in store.labels()] == [("work", 1)]
    with pytest.raises(engram.Conflict):
        store.create_label("work")

    space = store.create_space("Side Project", description="weekend code")
    assert (space.id, space.name) == ("side-project", "Side Project")
    m = store.add("Uses Rust for the side project", space="side-project")
    assert m.space_id == "side-project"
    assert store.search("Rust", space="side-project")[0].memory.id == m.id
    assert store.search("Rust") == [] or all(h.memory.space_id == "default" for h in store.search("Rust"))
    with pytest.raises(engram.NotFound):
        store.get(m.id, space="default")
    with pytest.raises(engram.Conflict):
        store.delete_space("side-project")
    store.delete_space("side-project", cascade=True)
    assert [s.id for s in store.spaces()] == ["default"]

    store.delete_label("work")
    assert store.labels() == []


def test_sources(store: engram.Store, tmp_path: Path) -> None:
    src = store.ingest(b"# Lighthouses\n\nThe harbour lighthouse was built in 1890.", file_name="notes.md")
    assert src.title == "notes.md" and src.chunk_count >= 1 and src.byte_size == 56
    assert store.source_text(src.id) == "# Lighthouses\n\nThe harbour lighthouse was built in 1890."
    csv = store.ingest("city,country\nLisbon,Portugal\nLyon,France\n", file_name="cities.csv")
    assert "Lyon" in store.source_text(csv.id)
    assert {s.id for s in store.sources()} == {src.id, csv.id}

    inside = Path(store.path) / "inbox" / "doc.md"
    inside.parent.mkdir()
    inside.write_text("# Kettle\n\nThe kettle is descaled monthly.")
    assert "descaled" in store.source_text(store.ingest_path(inside).id)
    outside = tmp_path / "outside.md"
    outside.write_text("secret")
    with pytest.raises(engram.Forbidden):
        store.ingest_path(outside)

    store.delete_source(src.id)
    with pytest.raises(engram.NotFound):
        store.get_source(src.id)


def test_export_and_import(store: engram.Store, tmp_path: Path) -> None:
    store.add("Prefers dark roast coffee", id="m-1", labels=["food"])
    store.create_thread([("user", "hello there")], thread_id="t-1")
    report = store.export()
    assert Path(report.path).is_file() and report.bytes == Path(report.path).stat().st_size
    assert report.counts["memories"] >= 1 and report.counts["threads"] == 1 and len(report.sha256) == 64

    with engram.Store.open(tmp_path / "other", allowed_paths=[Path(report.path).parent]) as other:
        got = other.import_archive(report.path)
        assert got.records > 0 and got.counts["memories"]["inserted"] >= 1
        assert other.get("m-1").content == "Prefers dark roast coffee" and other.get("m-1").labels == ["food"]
        assert other.get_thread("t-1").messages[0].content == "hello there"


def test_request_reaches_every_route(store: engram.Store) -> None:
    m = store.add("Prefers dark roast coffee")
    r = store.request("GET", f"/memories/{m.id}")
    assert r.status == 200 and r.ok and r.json()["content"] == "Prefers dark roast coffee"
    r = store.request("POST", "/memories/search", json.dumps({"query": "coffee", "limit": 1}))
    assert r.status == 200 and r.json()[0]["memory"]["id"] == m.id
    missing = store.request("GET", "/memories/nope")
    assert missing.status == 404 and not missing.ok
    with pytest.raises(engram.NotFound) as e:
        missing.raise_for_status()
    assert e.value.code == "memory_not_found" and e.value.status == 404
    bad = store.request("GET", "/memories?limit=0")
    assert bad.status == 422
    with pytest.raises(engram.InvalidInput) as v:
        bad.raise_for_status()
    assert v.value.field == "limit"
    assert store.request("GET", "/health").json()["status"] in ("ok", "healthy")


def test_memories_are_listed_page_by_page_with_filters_and_counted(store: engram.Store) -> None:
    store.add_many(
        [
            {"content": f"note {i} about the garden", "labels": ["even"] if i % 2 == 0 else [], "importance": i / 250}
            for i in range(250)
        ]
    )
    assert store.count() == 250
    assert store.count(filters={"labels": ["even"]}) == 125
    assert store.count(filters={"importance_min": 0.5}) == 125

    paged = list(store.memories(page_size=7))
    whole = [m.id for m in store.memories(page_size=1000)]
    assert [m.id for m in paged] == whole and len(set(whole)) == 250
    stamps = [m.created_at for m in paged]
    assert stamps == sorted(stamps, reverse=True), "newest first"

    even = list(store.memories(filters={"labels": ["even"]}, page_size=50))
    assert len(even) == 125 and all(m.labels == ["even"] for m in even)
    ranked = [m.importance for m in store.memories(order="importance", page_size=33)]
    assert ranked == sorted(ranked, reverse=True) and ranked[0] == pytest.approx(249 / 250)

    it = store.memories(page_size=100)
    first = next(it)
    assert first.id == whole[0] and isinstance(it, engram.MemoryIterator)
    assert sum(1 for _ in it) == 249, "the iterator goes on where it stopped"

    for kwargs, field in [
        ({"page_size": 0}, "page_size"),
        ({"page_size": 1001}, "page_size"),
        ({"order": "alphabetical"}, "order"),
        ({"filters": {"colour": "red"}}, "filters.colour"),
    ]:
        with pytest.raises(engram.InvalidInput) as e:
            store.memories(**kwargs)  # type: ignore[arg-type]
        assert e.value.field == field
    with pytest.raises(engram.NotFound):
        store.count(space="nowhere")
    with pytest.raises(engram.NotFound):
        next(store.memories(space="nowhere"))


def test_closed_store(tmp_path: Path) -> None:
    s = engram.Store.open(tmp_path / "c")
    m = s.add("kept after close")
    pending = s.memories()
    s.close()
    s.close()
    with pytest.raises(engram.Error):
        next(pending)
    assert s.closed
    with pytest.raises(engram.Error):
        s.get(m.id)
    with pytest.raises(engram.Error):
        s.count()
    with engram.Store.open(tmp_path / "c") as again:
        assert again.get(m.id).content == "kept after close"


def test_an_encrypted_store_opens_only_with_its_key(tmp_path: Path) -> None:
    data = tmp_path / "secret"
    with engram.Store.open(data, passphrase="correct horse battery staple") as s:
        s.add("The safe code is quincunx-4711", id="safe")
        assert [h.memory.id for h in s.search("quincunx", mode="lexical")] == ["safe"]
    raw = (data / "engram.redb").read_bytes()
    assert b"quincunx" not in raw
    with pytest.raises(engram.WrongKey) as wrong:
        engram.Store.open(data, passphrase="wrong horse")
    assert wrong.value.code == "wrong_key" and isinstance(wrong.value, PermissionError)
    with pytest.raises(engram.WrongKey) as none:
        engram.Store.open(data)
    assert none.value.code == "key_required"
    assert (data / "engram.redb").read_bytes() == raw, "a wrong key changes nothing"
    with engram.Store.open(data, passphrase="correct horse battery staple") as s:
        assert s.get("safe").content == "The safe code is quincunx-4711"
        health = s.request("GET", "/health").json()
        assert health["encryption"]["encrypted"] is True
        assert health["encryption"]["key_source"] == "passphrase"
    key = tmp_path / "store.key"
    key.write_bytes(bytes(range(48)))
    with engram.Store.open(tmp_path / "by-file", key_file=key) as s:
        s.add("stored under a key file")
    with pytest.raises(engram.WrongKey):
        engram.Store.open(tmp_path / "by-file", passphrase="not a key file")
    with pytest.raises(engram.InvalidInput):
        engram.Store.open(tmp_path / "both", passphrase="x", key_file=key)


def test_two_stores_sync_through_a_folder(tmp_path: Path) -> None:
    folder = tmp_path / "shared"
    with engram.Store.open(tmp_path / "laptop") as a, engram.Store.open(tmp_path / "desktop") as b:
        a.add("The dentist is on Tuesday", id="dentist", labels=["health"])
        started = a.sync(folder)
        code = started["pairing_code"]
        assert code.startswith("engram-sync-1-") and started["written_segments"] == 1
        with pytest.raises(engram.InvalidInput):
            b.sync(folder, code="not a code")
        joined = b.sync(folder, code=code)
        assert joined["applied_segments"] == 1 and "pairing_code" not in joined
        assert b.get("dentist").content == "The dentist is on Tuesday"
        assert b.get("dentist").labels == ["health"]
        b.update("dentist", content="The dentist moved to Wednesday")
        b.sync()
        report = a.sync()
        assert report["applied"]["applied"] >= 1
        assert a.get("dentist").content == "The dentist moved to Wednesday"
        assert a.request("GET", "/health").json()["sync"]["enabled"] is True


def test_the_default_embedder_finds_a_paraphrase(store: engram.Store) -> None:
    """`Store.open(path)` runs the built-in static model: semantic search with no model files."""
    assert store.dim == 256 and store.embedder == "engram-static-minilm-l6-v1-256"
    store.add_many(
        [
            {"content": "She drinks a double espresso every morning before work."},
            {"content": "The roof needs new shingles before winter."},
            {"content": "Our neighbor's dog barks all night."},
        ]
    )
    hits = store.search("coffee habits", mode="vector", limit=3)
    assert hits[0].memory.content == "She drinks a double espresso every morning before work."
