"""LangChain integration: :class:`EngramVectorStore`, a ``langchain_core.vectorstores.VectorStore`` over an
Engram store (``pip install langchain-core``).

Two ways to embed:

* With a LangChain ``Embeddings`` object, open the store with ``embedder="external:DIM"`` (``from_texts`` does
  it): the vectors are the model's, searches rank by cosine similarity alone (Engram's HNSW), and scores are
  cosine similarities in -1..=1.
* Without one (``embedding=None``), Engram embeds the texts itself (its built-in static model or the store's
  ONNX model) and searches are its hybrid ranking (BM25 and vectors fused); scores are fused scores in 0..=1.

Document ``metadata`` is stored as the memory's metadata (JSON values only); document ids are memory ids.
"""

from __future__ import annotations

import os
import tempfile
import uuid
from typing import Any, Callable, Iterable, List, Optional, Sequence, Tuple, Type, TypeVar

import numpy as np

try:
    from langchain_core.documents import Document
    from langchain_core.embeddings import Embeddings
    from langchain_core.vectorstores import VectorStore
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError("engram.langchain needs langchain-core: pip install 'engram[langchain]'") from e

from . import Hit, NotFound, Store

__all__ = ["EngramVectorStore"]

V = TypeVar("V", bound="EngramVectorStore")

#: Engram returns at most this many hits per search.
MAX_K = 100


class EngramVectorStore(VectorStore):
    """A LangChain vector store over an open :class:`engram.Store` (one space of it).

    ``embedding``: a LangChain ``Embeddings`` whose dimension is the store's (``Store.open(path,
    "external:DIM")``), or None to let Engram embed. ``space``: the Engram space the documents live in.
    """

    def __init__(self, store: Store, embedding: Optional[Embeddings] = None, *, space: str = "default") -> None:
        self.store = store
        self._embedding = embedding
        self.space = space

    @property
    def embeddings(self) -> Optional[Embeddings]:
        return self._embedding

    def add_texts(
        self,
        texts: Iterable[str],
        metadatas: Optional[List[dict[str, Any]]] = None,
        *,
        ids: Optional[List[str]] = None,
        **kwargs: Any,
    ) -> List[str]:
        """Stores the texts (an existing id is replaced) in one transaction; returns their ids (new UUIDs where
        none was given). Raises ``engram.InvalidInput`` (a ``ValueError``) for an empty text or metadata that is
        not JSON, and stores nothing."""
        texts = list(texts)
        if not texts:
            return []
        given: List[Optional[str]] = list(ids) if ids is not None else [None] * len(texts)
        if len(given) != len(texts) or (metadatas is not None and len(metadatas) != len(texts)):
            raise ValueError("texts, metadatas and ids must have the same length")
        out_ids = [i if i else str(uuid.uuid4()) for i in given]
        items = [
            {"content": t, "id": i, "metadata": dict(metadatas[n]) if metadatas else {}}
            for n, (t, i) in enumerate(zip(texts, out_ids))
        ]
        vectors = None
        if self._embedding is not None:
            vectors = np.asarray(self._embedding.embed_documents(texts), dtype=np.float32)
        self.store.add_many(items, embeddings=vectors, space=self.space)
        return out_ids

    def delete(self, ids: Optional[List[str]] = None, **kwargs: Any) -> Optional[bool]:
        """Deletes the documents with these ids; ids that do not exist are ignored. Returns True."""
        for i in ids or []:
            try:
                self.store.delete(i, space=self.space)
            except NotFound:
                pass
        return True

    def get_by_ids(self, ids: Sequence[str], /) -> List[Document]:
        """The documents with these ids, in order, skipping ids that do not exist."""
        out = []
        for i in ids:
            try:
                m = self.store.get(i, space=self.space)
            except NotFound:
                continue
            out.append(Document(page_content=m.content, metadata=m.metadata, id=m.id))
        return out

    def _hits(self, query: str, k: int, vector: Optional[Sequence[float]], filter: Optional[dict[str, Any]]) -> List[Hit]:
        k = max(1, min(int(k), MAX_K))
        if vector is not None:
            # Cosine similarity alone, as LangChain's vector stores rank: no entity, PageRank or decay priors.
            return self.store.search(
                query,
                limit=k,
                mode="vector",
                query_embedding=np.asarray(vector, dtype=np.float32),
                filters=filter,
                space=self.space,
                priors=False,
            )
        return self.store.search(query, limit=k, filters=filter, space=self.space)

    @staticmethod
    def _scored(hits: List[Hit], vector: bool) -> List[Tuple[Document, float]]:
        return [
            (
                Document(page_content=h.memory.content, metadata=h.memory.metadata, id=h.memory.id),
                float(h.vector_score if vector and h.vector_score is not None else h.score),
            )
            for h in hits
        ]

    def similarity_search_with_score(
        self, query: str, k: int = 4, filter: Optional[dict[str, Any]] = None, **kwargs: Any
    ) -> List[Tuple[Document, float]]:
        """The ``k`` (1..=100) closest documents with their scores, best first. ``filter``: Engram's search
        filters (``labels``, ``unit_type``, ``recorded_from``, ...; see ``Store.search``)."""
        vector = self._embedding.embed_query(query) if self._embedding is not None else None
        return self._scored(self._hits(query, k, vector, filter), vector is not None)

    def similarity_search(
        self, query: str, k: int = 4, filter: Optional[dict[str, Any]] = None, **kwargs: Any
    ) -> List[Document]:
        return [d for d, _ in self.similarity_search_with_score(query, k, filter, **kwargs)]

    def similarity_search_by_vector(
        self, embedding: List[float], k: int = 4, filter: Optional[dict[str, Any]] = None, **kwargs: Any
    ) -> List[Document]:
        return [d for d, _ in self._scored(self._hits("", k, embedding, filter), True)]

    def _select_relevance_score_fn(self) -> Callable[[float], float]:
        if self._embedding is not None:
            return lambda cosine: (cosine + 1.0) / 2.0
        return lambda fused: fused

    @classmethod
    def from_texts(
        cls: Type[V],
        texts: List[str],
        embedding: Embeddings,
        metadatas: Optional[List[dict[str, Any]]] = None,
        *,
        ids: Optional[List[str]] = None,
        path: Optional[str] = None,
        space: str = "default",
        **kwargs: Any,
    ) -> V:
        """Opens (or creates) an Engram store at ``path`` (default: a new temporary directory) for vectors of
        ``embedding``'s dimension, and adds the texts."""
        dim = len(embedding.embed_query("dimension probe"))
        where = path or tempfile.mkdtemp(prefix="engram-langchain-")
        store = Store.open(os.fspath(where), f"external:{dim}")
        vs = cls(store, embedding, space=space)
        vs.add_texts(texts, metadatas, ids=list(ids) if ids is not None else None)
        return vs
