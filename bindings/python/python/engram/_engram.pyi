"""Type stubs of the native module (bindings/python/src/lib.rs)."""

import datetime
import os
import pathlib
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

import numpy as np
import numpy.typing as npt

VectorLike = Union[npt.NDArray[np.floating[Any]], Sequence[float]]
MatrixLike = Union[npt.NDArray[np.floating[Any]], Sequence[VectorLike]]

def version() -> str: ...

class MemoryIterator:
    """The memories of one listing (``Store.memories``), read a page at a time as the iteration goes."""

    def __iter__(self) -> MemoryIterator: ...
    def __next__(self) -> Memory: ...

class Memory:
    """A stored memory (read-only)."""

    @property
    def id(self) -> str: ...
    @property
    def content(self) -> str: ...
    @property
    def title(self) -> str: ...
    @property
    def labels(self) -> List[str]: ...
    @property
    def importance(self) -> float: ...
    @property
    def confidence(self) -> float: ...
    @property
    def unit_type(self) -> str: ...
    @property
    def state(self) -> str: ...
    @property
    def space_id(self) -> str: ...
    @property
    def source(self) -> str: ...
    @property
    def metadata(self) -> Dict[str, Any]: ...
    @property
    def event_start(self) -> Optional[str]: ...
    @property
    def event_end(self) -> Optional[str]: ...
    @property
    def temporal_context(self) -> str: ...
    @property
    def created_at(self) -> datetime.datetime: ...
    @property
    def updated_at(self) -> datetime.datetime: ...
    @property
    def expires_at(self) -> Optional[datetime.datetime]: ...
    @property
    def expired(self) -> bool: ...
    @property
    def version(self) -> int: ...
    @property
    def is_favorite(self) -> bool: ...
    @property
    def source_thread_id(self) -> Optional[str]: ...
    @property
    def source_message_id(self) -> Optional[str]: ...
    @property
    def pagerank(self) -> float: ...
    def to_dict(self) -> Dict[str, Any]: ...

class ContextItem:
    kind: str
    index: int
    role: str
    content: str
    is_hit: bool
    memory_id: Optional[str]

class Hit:
    @property
    def memory(self) -> Memory: ...
    @property
    def score(self) -> float: ...
    @property
    def lexical_score(self) -> Optional[float]: ...
    @property
    def vector_score(self) -> Optional[float]: ...
    @property
    def matched_terms(self) -> List[str]: ...
    @property
    def reason(self) -> str: ...
    @property
    def context(self) -> List[ContextItem]: ...

class SearchResults:
    hits: List[Hit]
    mode: str
    candidates: int
    elapsed_ms: float
    fallback: Optional[str]
    def __len__(self) -> int: ...

class Response:
    status: int
    content_type: str
    @property
    def body(self) -> bytes: ...
    @property
    def text(self) -> str: ...
    @property
    def ok(self) -> bool: ...
    def json(self) -> Any: ...
    def raise_for_status(self) -> "Response": ...

class ExportReport:
    path: str
    counts: Dict[str, int]
    bytes: int
    sha256: str
    elapsed_ms: float

class ImportReport:
    records: int
    counts: Dict[str, Dict[str, int]]
    elapsed_ms: float

class Store:
    def __init__(
        self,
        path: Union[str, "os.PathLike[str]"],
        embedder: str = "builtin",
        *,
        allowed_paths: Sequence[Union[str, "os.PathLike[str]"]] = ...,
        passphrase: Optional[str] = None,
        key_file: Union[str, "os.PathLike[str]", None] = None,
        keychain: bool = False,
    ) -> None: ...
    def close(self) -> None: ...
    @property
    def closed(self) -> bool: ...
    @property
    def path(self) -> pathlib.Path: ...
    @property
    def dim(self) -> int: ...
    @property
    def embedder(self) -> str: ...
    def __enter__(self) -> "Store": ...
    def __exit__(self, *args: object) -> bool: ...
    def add(
        self,
        content: str,
        *,
        id: Optional[str] = None,
        title: Optional[str] = None,
        labels: Optional[Sequence[str]] = None,
        importance: Optional[float] = None,
        confidence: Optional[float] = None,
        unit_type: Optional[str] = None,
        space: Optional[str] = None,
        metadata: Optional[Mapping[str, Any]] = None,
        source: Optional[str] = None,
        event_start: Optional[str] = None,
        event_end: Optional[str] = None,
        temporal_context: Optional[str] = None,
        source_thread_id: Optional[str] = None,
        source_message_id: Optional[str] = None,
        embedding: Optional[VectorLike] = None,
        expires_at: Union[datetime.datetime, str, None] = None,
    ) -> Memory: ...
    def add_many(
        self,
        items: Sequence[Union[str, Mapping[str, Any]]],
        *,
        embeddings: Optional[MatrixLike] = None,
        space: Optional[str] = None,
    ) -> List[Memory]: ...
    def get(self, id: str, *, space: Optional[str] = None) -> Memory: ...
    def embedding(self, id: str, *, space: Optional[str] = None) -> Optional[npt.NDArray[np.float32]]: ...
    def update(
        self,
        id: str,
        *,
        content: Optional[str] = None,
        title: Optional[str] = None,
        labels: Optional[Sequence[str]] = None,
        importance: Optional[float] = None,
        confidence: Optional[float] = None,
        unit_type: Optional[str] = None,
        metadata: Optional[Mapping[str, Any]] = None,
        source: Optional[str] = None,
        event_start: Optional[str] = None,
        event_end: Optional[str] = None,
        temporal_context: Optional[str] = None,
        move_to: Optional[str] = None,
        embedding: Optional[VectorLike] = None,
        space: Optional[str] = None,
        expires_at: Union[datetime.datetime, str, None] = None,
        clear_expiry: bool = False,
    ) -> Memory: ...
    def delete(self, id: str, *, space: Optional[str] = None) -> None: ...
    def search(
        self,
        query: str,
        *,
        limit: int = 10,
        mode: str = "hybrid",
        filters: Optional[Mapping[str, Any]] = None,
        query_embedding: Optional[VectorLike] = None,
        include_context: Union[bool, int, None] = None,
        space: str = "default",
        priors: bool = True,
    ) -> List[Hit]: ...
    def search_results(
        self,
        query: str,
        *,
        limit: int = 10,
        mode: str = "hybrid",
        filters: Optional[Mapping[str, Any]] = None,
        query_embedding: Optional[VectorLike] = None,
        include_context: Union[bool, int, None] = None,
        space: str = "default",
        priors: bool = True,
    ) -> SearchResults: ...
    def memories(
        self,
        *,
        filters: Optional[Mapping[str, Any]] = None,
        order: str = "recent",
        page_size: int = 100,
        space: str = "default",
    ) -> MemoryIterator: ...
    def count(self, *, filters: Optional[Mapping[str, Any]] = None, space: str = "default") -> int: ...
    def wait_until_idle(self, timeout: float = 60.0) -> bool: ...
    def request(self, method: str, target: str, body: Union[bytes, str, None] = None) -> Response: ...
    def export(
        self, path: Union[str, "os.PathLike[str]", None] = None, *, compress: bool = True, overwrite: bool = False
    ) -> ExportReport: ...
    def import_archive(self, path: Union[str, "os.PathLike[str]"], *, mode: str = "merge") -> ImportReport: ...
    def sync(
        self, folder: Union[str, "os.PathLike[str]", None] = None, *, code: Optional[str] = None
    ) -> Dict[str, Any]: ...
