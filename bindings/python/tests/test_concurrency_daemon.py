"""Several Python threads on one store; a store shared with the daemon across processes."""

from __future__ import annotations

import json
import subprocess
import threading
import urllib.request
from pathlib import Path
from typing import List, Tuple

import pytest

import engram


def test_eight_threads_search_and_write(store: engram.Store) -> None:
    store.add_many([f"seed note {i} about the harbour lighthouse" for i in range(200)])
    errors: List[BaseException] = []
    written: List[List[str]] = [[] for _ in range(8)]
    searched = [0] * 8

    def work(t: int) -> None:
        try:
            for i in range(40):
                if i % 2 == 0:
                    written[t].append(store.add(f"thread {t} note {i} about the ferry timetable").id)
                else:
                    hits = store.search("harbour lighthouse", limit=10)
                    assert len(hits) == 10
                    searched[t] += 1
            batch = store.add_many([f"thread {t} batch {k} kettle" for k in range(25)])
            written[t].extend(m.id for m in batch)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []
    assert searched == [20] * 8
    ids = [i for ws in written for i in ws]
    assert len(ids) == 8 * (20 + 25) and len(set(ids)) == len(ids)
    for t in range(8):
        for i in written[t][:20]:
            assert store.get(i).content.startswith(f"thread {t} note ")
    listing = store.request("GET", "/memories?limit=1").json()
    assert listing["pagination"]["total"] == 200 + 8 * 45


def _post(url: str, key: str, path: str, body: object) -> object:
    req = urllib.request.Request(
        url + path,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {key}"},
        method="POST",
    )
    return json.loads(urllib.request.urlopen(req, timeout=30).read())


def test_store_written_by_the_daemon_opens_in_python(daemon: Tuple[subprocess.Popen[bytes], str, Path]) -> None:
    proc, url, data = daemon
    key = (data / "api-key").read_text().strip()
    made = _post(url, key, "/memories", {"content": "Written by the daemon: the ferry leaves at 9", "labels": ["ferry"]})
    assert isinstance(made, dict)
    mid = str((made.get("memory") or made)["id"])

    # While the daemon holds the store, Python cannot open it.
    with pytest.raises(engram.Locked) as e:
        engram.Store.open(data)
    assert e.value.retryable and e.value.status == 503

    proc.terminate()
    proc.wait(30)
    with engram.Store.open(data) as store:
        m = store.get(mid)
        assert m.content == "Written by the daemon: the ferry leaves at 9" and m.labels == ["ferry"]
        assert store.search("ferry", limit=1)[0].memory.id == mid
