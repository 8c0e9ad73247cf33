"""Engram in-process: a local-first memory store with hybrid search (BM25 and HNSW vectors, fused) over one
redb file, for AI assistants and the programs around them.

>>> import engram
>>> with engram.Store.open("/tmp/engram-demo") as store:
...     store.add("Prefers dark roast coffee, no sugar", labels=["preferences"])
...     hits = store.search("coffee", limit=3)

The store is the same one the daemon (``engram serve``) and the C API open: a store written by one can be
opened by the others once it is closed (a redb file is open in one process at a time; a second open raises
:class:`Locked`). Calls release the GIL while they work, so several threads can share one store.
"""

from __future__ import annotations

import base64
import json
import os
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Union
from urllib.parse import quote, urlencode

from . import errors
from ._engram import (
    ContextItem,
    ExportReport,
    Hit,
    ImportReport,
    Memory,
    MemoryIterator,
    Response,
    SearchResults,
    version,
)
from ._engram import Store as _NativeStore
from .errors import (
    Conflict,
    Corrupt,
    Error,
    Forbidden,
    InternalError,
    InvalidInput,
    Locked,
    NotFound,
    StorageError,
    StorageFull,
    Timeout,
    Unavailable,
    Unreachable,
    Unsupported,
    WrongKey,
)

__version__ = version()

__all__ = [
    "Store",
    "Memory",
    "MemoryIterator",
    "Hit",
    "SearchResults",
    "ContextItem",
    "Response",
    "ExportReport",
    "ImportReport",
    "Thread",
    "Message",
    "AppendResult",
    "Label",
    "Space",
    "Source",
    "errors",
    "Error",
    "InvalidInput",
    "NotFound",
    "Conflict",
    "Forbidden",
    "Locked",
    "StorageError",
    "StorageFull",
    "Corrupt",
    "WrongKey",
    "Unavailable",
    "Unsupported",
    "Timeout",
    "Unreachable",
    "InternalError",
]

MessageLike = Union["Message", Mapping[str, Any], "tuple[str, str]"]


@dataclass(frozen=True)
class Message:
    """One message of a thread. ``role``: ``user``, ``assistant``, ``system`` or ``tool``; ``timestamp``: RFC
    3339 or None; ``index``: its position in the thread (from 0), None before it is stored."""

    role: str
    content: str
    timestamp: Optional[str] = None
    index: Optional[int] = None
    id: Optional[str] = None
    metadata: Dict[str, Any] = field(default_factory=dict)

    @staticmethod
    def _from(d: Mapping[str, Any], i: int) -> "Message":
        return Message(
            role=str(d.get("role", "")),
            content=str(d.get("content", "")),
            timestamp=d.get("timestamp") or None,
            index=int(d.get("order_index", d.get("index", i))),
            id=d.get("id"),
            metadata=dict(d.get("metadata") or {}),
        )


@dataclass(frozen=True)
class Thread:
    """A conversation. ``messages`` holds what ``get_thread`` read (a page of them), empty in listings."""

    id: str
    title: str
    space_id: str
    message_count: int
    source: str = ""
    messages: List[Message] = field(default_factory=list)
    metadata: Dict[str, Any] = field(default_factory=dict)

    @staticmethod
    def _from(d: Mapping[str, Any], messages: Sequence[Mapping[str, Any]] = ()) -> "Thread":
        return Thread(
            id=str(d.get("thread_id") or d.get("id")),
            title=str(d.get("title") or ""),
            space_id=str(d.get("space_id") or "default"),
            message_count=int(d.get("message_count") or len(messages)),
            source=str(d.get("source") or ""),
            messages=[Message._from(m, i) for i, m in enumerate(messages)],
            metadata=dict(d.get("metadata") or {}),
        )


@dataclass(frozen=True)
class AppendResult:
    """What ``append`` stored: messages added, skipped as duplicates, and memories extracted."""

    thread_id: str
    added: int
    skipped: int
    message_count: int
    memory_ids: List[str] = field(default_factory=list)


@dataclass(frozen=True)
class Label:
    """A label: ``id`` is ``label_<name>``; ``memory_count`` counts the memories carrying it."""

    id: str
    name: str
    space_id: str
    memory_count: int = 0
    color: Optional[str] = None
    description: Optional[str] = None

    @staticmethod
    def _from(d: Mapping[str, Any]) -> "Label":
        return Label(
            id=str(d["id"]),
            name=str(d.get("name", "")),
            space_id=str(d.get("space_id") or "default"),
            memory_count=int(d.get("usage_count") or d.get("memory_count") or 0),
            color=d.get("color"),
            description=d.get("description"),
        )


@dataclass(frozen=True)
class Space:
    """A space: a separate set of memories, threads and labels. ``id`` is the slug of ``name``."""

    id: str
    name: str
    description: str = ""
    memory_count: int = 0

    @staticmethod
    def _from(d: Mapping[str, Any]) -> "Space":
        usage = d.get("usage") or {}
        return Space(
            id=str(d["id"]),
            name=str(d.get("name", d["id"])),
            description=str(d.get("description") or ""),
            memory_count=int(d.get("memory_count") or usage.get("memories") or 0),
        )


@dataclass(frozen=True)
class Source:
    """An ingested document (markdown, HTML, PDF, DOCX, CSV, a web page): its text is split into chunks that
    search can return, and ``memory_ids`` are the memories extracted from it (when asked for)."""

    id: str
    title: str
    source_type: str
    space_id: str
    chunk_count: int = 0
    byte_size: int = 0
    memory_ids: List[str] = field(default_factory=list)
    raw: Dict[str, Any] = field(default_factory=dict)

    @staticmethod
    def _from(d: Mapping[str, Any]) -> "Source":
        return Source(
            id=str(d.get("id") or d.get("source_id")),
            title=str(d.get("title") or d.get("original_name") or ""),
            source_type=str(d.get("source_type") or ""),
            space_id=str(d.get("space_id") or "default"),
            chunk_count=int(d.get("chunk_count") or 0),
            byte_size=int(d.get("byte_size") or d.get("size_bytes") or 0),
            memory_ids=[str(m) for m in d.get("memory_ids") or []],
            raw=dict(d),
        )


def _message(m: MessageLike) -> Dict[str, Any]:
    if isinstance(m, Message):
        out: Dict[str, Any] = {"role": m.role, "content": m.content}
        if m.timestamp:
            out["timestamp"] = m.timestamp
        if m.metadata:
            out["metadata"] = m.metadata
        return out
    if isinstance(m, tuple):
        role, content = m
        return {"role": role, "content": content}
    return dict(m)


def _q(params: Mapping[str, Any]) -> str:
    kept = {k: ("true" if v is True else "false" if v is False else v) for k, v in params.items() if v is not None}
    return ("?" + urlencode(kept, doseq=True)) if kept else ""


class Store(_NativeStore):
    """An open Engram store in a data directory (``<path>/engram.redb`` plus local files).

    Open with :meth:`Store.open`; use as a context manager or call :meth:`close`. Memory calls (``add``,
    ``add_many``, ``get``, ``update``, ``delete``, ``search``, ``embedding``) run in the native module; the
    thread, label, space and source calls below go through :meth:`request`, the same routes the daemon serves
    (``docs/api.md``), and raise the typed exceptions of :mod:`engram.errors`.
    """

    @classmethod
    def open(
        cls,
        path: Union[str, "os.PathLike[str]"],
        embedder: str = "builtin",
        *,
        allowed_paths: Iterable[Union[str, "os.PathLike[str]"]] = (),
        passphrase: Optional[str] = None,
        key_file: Union[str, "os.PathLike[str]", None] = None,
        keychain: bool = False,
    ) -> "Store":
        """Opens (or creates) the store in directory ``path``.

        ``embedder``: ``"builtin"`` (no model files; 384 dimensions), the directory of a sentence-embedding ONNX
        model (needs ``ORT_DYLIB_PATH`` naming ONNX Runtime), or ``"external:DIM"`` when the caller supplies
        every vector (``DIM`` floats, 1..=4096). ``allowed_paths``: directories besides ``path`` that
        :meth:`export`, :meth:`import_archive` and :meth:`ingest_path` may touch.

        A store encrypted at rest (``docs/security.md``) opens with one of ``passphrase``, ``key_file`` (a file
        of 32 bytes to 64 KiB of random data, as ``engram keygen`` writes) or ``keychain=True`` (the key in the
        OS keychain); a new store is created encrypted with it.

        Raises :class:`Locked` (another process has it open), :class:`Unavailable` (model or ONNX Runtime
        missing), :class:`WrongKey` (the key does not open the store, or none was given for an encrypted one),
        :class:`Corrupt`, :class:`StorageError`.
        """
        return cls(
            os.fspath(path),
            embedder,
            allowed_paths=[os.fspath(p) for p in allowed_paths],
            passphrase=passphrase,
            key_file=None if key_file is None else os.fspath(key_file),
            keychain=keychain,
        )

    def __enter__(self) -> "Store":
        return self

    def _call(self, method: str, target: str, body: Any = None) -> Any:
        payload = None if body is None else json.dumps(body)
        return self.request(method, target, payload).raise_for_status().json()

    # Threads ---------------------------------------------------------------------------------------------

    def create_thread(
        self,
        messages: Iterable[MessageLike] = (),
        *,
        thread_id: Optional[str] = None,
        title: Optional[str] = None,
        source: Optional[str] = None,
        space: Optional[str] = None,
        metadata: Optional[Mapping[str, Any]] = None,
    ) -> Thread:
        """Stores a conversation; memories are extracted from its messages (offline, deterministic).
        ``messages``: :class:`Message` objects, ``{"role", "content"}`` dicts or ``(role, content)`` tuples.
        Raises :class:`Conflict` when ``thread_id`` exists."""
        body: Dict[str, Any] = {"messages": [_message(m) for m in messages]}
        for k, v in (("thread_id", thread_id), ("title", title), ("source", source), ("metadata", metadata)):
            if v is not None:
                body[k] = v
        if space is not None:
            body["space_id"] = space
        out = self._call("POST", "/threads", body)
        return Thread._from(out.get("thread") or {}, out.get("messages") or [])

    def append(
        self,
        thread_id: str,
        messages: Iterable[MessageLike],
        *,
        idempotency_key: Optional[str] = None,
        space: Optional[str] = None,
    ) -> AppendResult:
        """Appends messages to a thread and extracts memories from them. A message whose
        ``metadata["external_id"]`` the thread holds already is skipped; so is a message sent again under the
        same ``idempotency_key`` at the same position (a retried batch). Raises :class:`NotFound`."""
        body: Dict[str, Any] = {"messages": [_message(m) for m in messages]}
        if idempotency_key is not None:
            body["idempotency_key"] = idempotency_key
        if space is not None:
            body["space_id"] = space
        out = self._call("POST", f"/threads/{quote(thread_id, safe='')}/append", body)
        return AppendResult(
            thread_id=thread_id,
            added=int(out.get("messages_added") or out.get("added") or 0),
            skipped=int(out.get("messages_skipped") or out.get("skipped") or 0),
            message_count=int(out.get("total_messages") or out.get("message_count") or 0),
            memory_ids=[str(m["id"]) for m in out.get("extracted_memories") or []],
        )

    def get_thread(self, thread_id: str, *, limit: int = 1000, offset: int = 0, space: Optional[str] = None) -> Thread:
        """A thread with a page of its messages (``limit`` 1..=1000 from ``offset``). Raises :class:`NotFound`."""
        out = self._call(
            "GET", f"/threads/{quote(thread_id, safe='')}" + _q({"limit": limit, "offset": offset, "space_id": space})
        )
        meta = out.get("thread") or out
        return Thread._from({**meta, "thread_id": meta.get("thread_id") or thread_id}, out.get("messages") or [])

    def threads(self, *, limit: int = 50, offset: int = 0, space: Optional[str] = None) -> List[Thread]:
        """A page of threads, newest first (``limit`` 1..=100)."""
        out = self._call("GET", "/threads" + _q({"limit": limit, "offset": offset, "space_id": space}))
        return [Thread._from(t) for t in out.get("threads") or []]

    def delete_thread(self, thread_id: str, *, delete_memories: bool = False, space: Optional[str] = None) -> None:
        """Deletes a thread and its messages (and the memories extracted from it when ``delete_memories``)."""
        self._call(
            "DELETE",
            f"/threads/{quote(thread_id, safe='')}"
            + _q({"cascade_delete_memories": delete_memories, "space_id": space}),
        )

    # Labels ----------------------------------------------------------------------------------------------

    def labels(self, *, space: Optional[str] = None, limit: int = 100, offset: int = 0) -> List[Label]:
        """The labels of a space, most used first."""
        out = self._call("GET", "/labels" + _q({"space_id": space, "limit": limit, "offset": offset}))
        items = out if isinstance(out, list) else out.get("labels") or []
        return [Label._from(x) for x in items]

    def create_label(
        self, name: str, *, color: Optional[str] = None, description: Optional[str] = None, space: Optional[str] = None
    ) -> Label:
        """Creates a label. Raises :class:`Conflict` when one with that name exists."""
        q = _q({"name": name, "color": color, "description": description, "space_id": space})
        return Label._from(self._call("POST", "/labels" + q))

    def delete_label(self, label: str, *, space: Optional[str] = None) -> None:
        """Deletes a label (its id ``label_<name>`` or its name) and removes it from its memories."""
        label_id = label if label.startswith("label_") else f"label_{label}"
        self._call("DELETE", f"/labels/{quote(label_id, safe='')}" + _q({"space_id": space}))

    # Spaces ----------------------------------------------------------------------------------------------

    def spaces(self) -> List[Space]:
        """Every space, the default one first."""
        out = self._call("GET", "/spaces")
        return [Space._from(s) for s in out.get("spaces") or []]

    def create_space(self, name: str, *, description: Optional[str] = None) -> Space:
        """Creates a space; its id is the slug of ``name``. Raises :class:`Conflict` when it exists."""
        body: Dict[str, Any] = {"name": name}
        if description is not None:
            body["description"] = description
        out = self._call("POST", "/spaces", body)
        return Space._from(out.get("space") or out)

    def delete_space(self, space_id: str, *, cascade: bool = False) -> None:
        """Deletes a space; with ``cascade`` also its memories, threads and labels (otherwise a non-empty space
        raises :class:`Conflict`)."""
        self._call("DELETE", f"/spaces/{quote(space_id, safe='')}" + _q({"cascade": cascade}))

    # Sources ---------------------------------------------------------------------------------------------

    def ingest(
        self,
        data: Union[bytes, str],
        *,
        file_name: str,
        mime_type: Optional[str] = None,
        labels: Optional[Sequence[str]] = None,
        metadata: Optional[Mapping[str, Any]] = None,
        space: Optional[str] = None,
        extract_memories: bool = False,
    ) -> Source:
        """Ingests a document given as bytes (PDF, DOCX, CSV, HTML, markdown, text; the type comes from
        ``file_name``'s extension or ``mime_type``). Its text is chunked and indexed; with ``extract_memories``
        memories are extracted too. Raises :class:`InvalidInput` for an unreadable or unsupported document."""
        body: Dict[str, Any] = {"file_name": file_name}
        if isinstance(data, str):
            body["content"] = data
        else:
            body["content_base64"] = base64.b64encode(bytes(data)).decode("ascii")
        for k, v in (("mime_type", mime_type), ("labels", labels), ("metadata", metadata), ("space_id", space)):
            if v is not None:
                body[k] = list(v) if k == "labels" and v is not None else v
        q = _q({"extract_memories": extract_memories})
        return Source._from(self._call("POST", "/sources/ingest/file" + q, body))

    def ingest_path(
        self, path: Union[str, "os.PathLike[str]"], *, space: Optional[str] = None, extract_memories: bool = False
    ) -> Source:
        """Ingests a file inside the data directory or ``allowed_paths`` (:class:`Forbidden` otherwise)."""
        body: Dict[str, Any] = {"path": os.fspath(path)}
        if space is not None:
            body["space_id"] = space
        q = _q({"extract_memories": extract_memories})
        return Source._from(self._call("POST", "/sources/ingest/path" + q, body))

    def sources(self, *, limit: int = 50, offset: int = 0, space: Optional[str] = None) -> List[Source]:
        """A page of sources, newest first."""
        out = self._call("GET", "/sources" + _q({"limit": limit, "offset": offset, "space_id": space}))
        return [Source._from(s) for s in out.get("sources") or []]

    def get_source(self, source_id: str, *, space: Optional[str] = None) -> Source:
        """A source's record. Raises :class:`NotFound`."""
        return Source._from(self._call("GET", f"/sources/{quote(source_id, safe='')}" + _q({"space_id": space})))

    def source_text(self, source_id: str, *, space: Optional[str] = None) -> str:
        """A source's whole extracted text. Raises :class:`NotFound`."""
        parts: List[str] = []
        offset = 0
        while True:
            out = self._call(
                "GET",
                f"/sources/{quote(source_id, safe='')}/content" + _q({"offset": offset, "space_id": space}),
            )
            text = str(out.get("content") or "")
            parts.append(text)
            nxt = out.get("next_offset")
            if not out.get("has_more") or nxt is None or not text:
                return "".join(parts)
            offset = int(nxt)

    def delete_source(self, source_id: str, *, space: Optional[str] = None) -> None:
        """Deletes a source, its chunks and the memories extracted from it. Raises :class:`NotFound`."""
        self._call("DELETE", f"/sources/{quote(source_id, safe='')}" + _q({"space_id": space}))
