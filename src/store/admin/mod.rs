//! The administration service ([`Admin`], `store.admin()`): health, statistics, index state and waiting for
//! it, checkpoints, bulk loads, publishing indexes for other daemons, and the store's encryption state.
//! `health.rs` has health, checkpoints and the index and storage figures; `stats.rs` the `/stats` counts.

mod health;
mod stats;
pub(crate) mod types;

pub use stats::StoreStats;

use std::time::Instant;

use super::KnowledgeStore;
use super::core::indexes::Running;
use super::{PublishedIndexes, ReembedStatus};

/// The administration of a store, borrowed from the store (`store.admin()`).
///
/// Owns: no records of its own; it reads the runtime core's state (indexes, workers, durability, encryption)
/// and the meta records (format version, last upgrade, checkpoints).
#[derive(Clone, Copy)]
pub struct Admin<'s> {
    pub(crate) store: &'s KnowledgeStore,
}

impl Admin<'_> {
    /// The state of background re-embedding.
    pub fn reembed_status(&self) -> ReembedStatus {
        self.store.core.reembed_progress.status()
    }

    /// Writes a consistent, verified copy of the store file to `dest` while the store serves: writes wait
    /// for the copy of the file (milliseconds per 100 MB on a local disk; the report says how long), reads go
    /// on; the copy is then repaired, checked and renamed into place away from the live store. An encrypted
    /// store's backup stays encrypted under the same key. Restore with [`crate::store::restore_backup`]
    /// (`engram restore`), check with [`crate::store::verify_backup`] (`engram restore --verify`).
    ///
    /// # Errors
    /// * [`crate::ErrorKind::Unavailable`]: a PostgreSQL store (use `pg_dump`; docs/deploy.md).
    /// * [`crate::ErrorKind::Conflict`]: `dest` exists.
    /// * [`crate::ErrorKind::Io`], [`crate::ErrorKind::Corrupt`]: the copy failed or did not verify; nothing is
    ///   left under `dest` and the store is untouched.
    pub fn backup(&self, dest: &std::path::Path) -> crate::error::Result<super::BackupReport> {
        super::core::backup::backup(&self.store.core, dest)
    }

    /// Seconds since the store was opened.
    pub fn uptime_s(&self) -> f64 {
        self.store.core.started.elapsed().as_secs_f64()
    }

    /// Blocks until the indexes' background work is done or `timeout` passes: every space's vector index is
    /// complete (re-embedding finished, graphs built where a space is large enough, no vector pending), and the
    /// own texts of context-expanded postings that an open read from the index snapshot are decoded (about
    /// 0.8 s of one core at 1,000,000 positioned memories, during which searches share the cores with it).
    /// Searches are exact and complete meanwhile; this only matters for benchmarks and tests that want the
    /// graph path or the steady state. Returns whether the work is done.
    pub fn wait_for_indexes(&self, timeout: std::time::Duration) -> bool {
        let until = Instant::now() + timeout;
        loop {
            if self.store.core.indexes_done() {
                return true;
            }
            if Instant::now() >= until {
                return false;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    /// Runs `load` (typically many [`Memories::create_many`](crate::store::Memories::create_many) batches) as a bulk load: the background
    /// graph recompute (communities, PageRank) and the in-memory HNSW graph builder wait until it ends instead
    /// of running between batches (the graph is then built once over every vector; searches meanwhile scan the
    /// vectors not in a graph exactly), and on
    /// PostgreSQL the pgvector HNSW indexes are dropped first and built once at the end (pgvector's advice:
    /// building after loading is much faster than inserting into the index; measured in docs/deploy.md,
    /// "Scale"). Searches stay correct meanwhile: the store's own in-memory indexes are kept as usual and only
    /// the database's vector candidates ([`crate::storage::ReadTx::vector_candidates`]) scan. The indexes are
    /// built again whether `load` succeeds or fails. Returns `load`'s value and the index build (`None` on redb
    /// or without pgvector). Other processes sharing the database keep writing as usual; their vectors are
    /// indexed by the build.
    ///
    /// # Errors
    /// A storage error of dropping the indexes (then `load` does not run) or `load`'s error, after the indexes
    /// are built again; else a storage error of building them.
    pub fn bulk_load<T>(
        &self,
        load: impl FnOnce(&KnowledgeStore) -> crate::error::Result<T>,
    ) -> crate::error::Result<(T, Option<crate::storage::VectorIndexBuild>)> {
        let out = {
            let _running = Running::start(&self.store.core.bulk_loads);
            // A failed start still ends below: the build resets the deferral and makes any dropped index.
            self.store.core.db.begin_bulk_load().and_then(|()| load(self.store))
        };
        let built = self.store.core.db.end_bulk_load();
        self.store.core.wake_graph();
        let out = out?;
        Ok((out, built?))
    }

    /// Publishes this daemon's indexes into its PostgreSQL database now, for daemons that start without a
    /// snapshot of their own (the feed worker also does it every ten minutes of writes, once the HNSW graphs are
    /// complete; see the module docs of `store/core/publish.rs` and `docs/deploy.md`). `Ok(None)` on a redb
    /// store and when another daemon is publishing at the moment.
    ///
    /// # Errors
    /// Storage errors and I/O errors writing the snapshot or graph files in the data directory; the publication
    /// before stays in the database.
    pub fn publish_indexes(&self) -> crate::error::Result<Option<PublishedIndexes>> {
        self.store.core.publish_indexes()
    }
}
