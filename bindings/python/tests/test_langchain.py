"""LangChain: the standard VectorStore tests of langchain-tests (written by the LangChain project), run against
EngramVectorStore, and a few of our own."""

from __future__ import annotations

import tempfile
from typing import Generator

import pytest

pytest.importorskip("langchain_core")
pytest.importorskip("langchain_tests")

from langchain_core.documents import Document  # noqa: E402
from langchain_core.embeddings import DeterministicFakeEmbedding  # noqa: E402
from langchain_core.vectorstores import VectorStore  # noqa: E402
from langchain_tests.integration_tests.vectorstores import VectorStoreIntegrationTests  # noqa: E402

import engram  # noqa: E402
from engram.langchain import EngramVectorStore  # noqa: E402


class TestEngramVectorStoreStandard(VectorStoreIntegrationTests):
    @pytest.fixture()
    def vectorstore(self) -> Generator[VectorStore, None, None]:
        with tempfile.TemporaryDirectory() as d:
            with engram.Store.open(d, "external:6") as store:
                yield EngramVectorStore(store, self.get_embeddings())


def test_from_texts_and_retriever(tmp_path: object) -> None:
    emb = DeterministicFakeEmbedding(size=16)
    vs = EngramVectorStore.from_texts(
        ["the ferry leaves at nine", "the kettle needs descaling", "lighthouse tours on Sunday"],
        emb,
        metadatas=[{"n": 1}, {"n": 2}, {"n": 3}],
        ids=["a", "b", "c"],
    )
    try:
        assert vs.store.dim == 16
        docs = vs.as_retriever(search_kwargs={"k": 1}).invoke("the kettle needs descaling")
        assert docs == [Document(page_content="the kettle needs descaling", metadata={"n": 2}, id="b")]
        scored = vs.similarity_search_with_score("lighthouse tours on Sunday", k=3)
        assert scored[0][0].id == "c" and scored[0][1] == pytest.approx(1.0, abs=2e-3)
        assert scored[0][1] >= scored[1][1] >= scored[2][1]
        rel = vs.similarity_search_with_relevance_scores("lighthouse tours on Sunday", k=1)
        assert rel[0][1] == pytest.approx(1.0, abs=2e-3)
    finally:
        vs.store.close()


def test_engram_embeds_when_no_embeddings_given(store: engram.Store) -> None:
    vs = EngramVectorStore(store)
    ids = vs.add_texts(["Prefers dark roast coffee", "Plans to visit Lisbon in May"], [{"k": "coffee"}, {"k": "trip"}])
    found = vs.similarity_search("coffee", k=1)
    assert found == [Document(page_content="Prefers dark roast coffee", metadata={"k": "coffee"}, id=ids[0])]
    with pytest.raises(ValueError):
        vs.add_texts(["  "])
