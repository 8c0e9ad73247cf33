"""Fixtures: real stores in temporary directories, and the daemon binary for the cross-process tests."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Iterator, Tuple

import pytest

import engram


@pytest.fixture
def store(tmp_path: Path) -> Iterator[engram.Store]:
    with engram.Store.open(tmp_path / "store") as s:
        yield s


@pytest.fixture
def ext_store(tmp_path: Path) -> Iterator[engram.Store]:
    """A store whose vectors come from the caller: 8 dimensions."""
    with engram.Store.open(tmp_path / "ext", "external:8") as s:
        yield s


def engram_bin() -> str:
    """The daemon binary: ENGRAM_BIN, or target/debug/engram of this checkout. Under CI=true a missing
    binary fails the test instead of skipping it."""
    given = os.environ.get("ENGRAM_BIN")
    here = Path(__file__).resolve().parents[3] / "target" / "debug" / "engram"
    path = given or (str(here) if here.exists() else shutil.which("engram"))
    if not path or not Path(path).exists():
        if os.environ.get("CI") == "true":
            pytest.fail("ENGRAM_BIN is not set and target/debug/engram does not exist")
        pytest.skip("no engram binary (set ENGRAM_BIN)")
    return str(path)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[Tuple[subprocess.Popen[bytes], str, Path]]:
    """A real `engram serve` on a loopback port over tmp_path/daemon: (process, base URL, data dir)."""
    data = tmp_path / "daemon"
    port = free_port()
    proc = subprocess.Popen(
        [engram_bin(), "serve", "--addr", f"127.0.0.1:{port}", "--data-dir", str(data), "--no-console"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            urllib.request.urlopen(url + "/livez", timeout=1).read()
            break
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError("daemon exited: " + (proc.stderr.read() if proc.stderr else b"").decode())
            time.sleep(0.1)
    try:
        yield proc, url, data
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(30)
