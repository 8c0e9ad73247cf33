//! Indexes derived from the store: the in-memory catalog used by filters, BM25 scoring over the lexical
//! postings kept in redb, the per-space vector index (exact scan or HNSW), and rank fusion.
//! redb stays the source of truth: every structure here is rebuilt from it on open, or read from a saved copy
//! that is validated against it (HNSW graphs, the index snapshot of `docs/design.md`).

pub mod bm25;
pub(crate) mod bytes;
pub mod catalog;
pub mod context;
pub mod decay;

pub mod fusion;
pub mod hnsw;
pub mod lexicon;
pub mod vector;
