//! The backend modes, chosen once at open ([`Core::open`](super::Core::open)): how other writers' commits reach
//! this process ([`Commits`]) and where searches, listings, counts and expiry read the per-memory indexes
//! ([`IndexReads`]). Every difference between a redb file, PostgreSQL with in-memory indexes and PostgreSQL in
//! the database index mode is decided by the core, on these two values; no service asks which backend it is on
//! (`tools/checks/architecture.py`).
//!
//! | backend | [`Commits`] | [`IndexReads`] |
//! |---|---|---|
//! | redb file | `Local` | `Memory` |
//! | PostgreSQL, `--index-mode memory` (the default) | `Feed` | `Memory` |
//! | PostgreSQL, `--index-mode database` | `Feed` | `Database` |

use crate::config::StoreConfig;
use crate::storage::Db;

/// How other writers' commits reach this process's derived state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Commits {
    /// One process on a redb file: a commit's index operations are applied directly; nothing is published.
    Local,
    /// A database shared by several processes (PostgreSQL): every commit is published to the change feed and
    /// each process applies the feed in order ([`super::feed`]).
    Feed,
}

impl Commits {
    /// The mode of `db`.
    pub(crate) fn of(db: &Db) -> Commits {
        if db.shared() { Commits::Feed } else { Commits::Local }
    }
}

/// Where the per-memory indexes (catalog, BM25 lexicon, vectors, PageRank) are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum IndexReads {
    /// In this process's memory, loaded at open and kept current after every commit.
    Memory,
    /// From the database, the part each call needs ([`crate::IndexMode::Database`]: no per-memory index is
    /// held; `core/search_db.rs`).
    Database,
}

impl IndexReads {
    /// The mode `config` asks for.
    pub(crate) fn of(config: &StoreConfig) -> IndexReads {
        match config.index_mode {
            crate::IndexMode::Memory => IndexReads::Memory,
            crate::IndexMode::Database => IndexReads::Database,
        }
    }

    /// Whether this process holds the per-memory indexes (and the PageRank table) in memory, and so also
    /// recomputes the graph in the background.
    pub(crate) fn in_memory(self) -> bool {
        self == IndexReads::Memory
    }
}
