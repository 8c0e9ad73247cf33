//! The storage backend the conformance tests run on: the store-level behaviour tests (the proptest model in
//! `store_model.rs`, round trips in `store_memories.rs`, lifecycle, labels, threads, spaces isolation, working
//! memory, reviews, search filters, and the storage port's primitives in `storage_port.rs`) open every store
//! through [`open`] or [`config`], so that one suite runs against each backend, as basic-memory's `conftest.py`
//! does with its database switch.
//!
//! `ENGRAM_TEST_BACKEND` picks the backend: `redb` (the default: a real redb file in the test's temp dir).
//! The PostgreSQL backend (issue 19) adds `postgres`, with the database from `ENGRAM_TEST_DATABASE_URL`.
//! Run the suite on one backend with
//! `ENGRAM_TEST_BACKEND=redb cargo test --test store_model --test store_memories --test lifecycle --test labels
//! --test threads --test spaces --test working_memory --test reviews --test storage_port`.
#![allow(dead_code)]

use std::path::Path;

use engram::{KnowledgeStore, StoreConfig};

/// A storage backend of the conformance suite.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// One redb file in the data directory.
    Redb,
}

impl Backend {
    /// The backend `ENGRAM_TEST_BACKEND` names (default `redb`). An unknown name fails the test: a suite that
    /// was asked for a backend must not quietly run on another.
    pub fn current() -> Backend {
        match std::env::var("ENGRAM_TEST_BACKEND").as_deref() {
            Err(_) | Ok("") | Ok("redb") => Backend::Redb,
            Ok(other) => panic!("ENGRAM_TEST_BACKEND={other}: this build has the redb backend only"),
        }
    }

    /// A store configuration on this backend with its data (and, for redb, its file) in `dir`; the built-in
    /// embedder.
    pub fn config(self, dir: &Path) -> StoreConfig {
        match self {
            Backend::Redb => StoreConfig::new(dir),
        }
    }
}

/// [`Backend::config`] of the current backend.
pub fn config(dir: &Path) -> StoreConfig {
    Backend::current().config(dir)
}

/// Opens (or reopens) the store of `dir` on the current backend.
pub fn open(dir: &Path) -> KnowledgeStore {
    KnowledgeStore::open(config(dir)).unwrap_or_else(|e| panic!("open a store on {:?}: {e}", Backend::current()))
}
