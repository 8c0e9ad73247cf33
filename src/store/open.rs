//! Opening and closing the store: the runtime core ([`Core::open`]), the graph service's worker, the expiry
//! sweep at open; at close, the last reads counted and the core closed.

use super::core::Core;
use super::*;
use crate::config::StoreConfig;
use crate::error::Result;

impl Drop for KnowledgeStore {
    fn drop(&mut self) {
        self.core.stop_feed();
        // Reads still queued are counted before the store closes.
        if let Err(e) = self.memories().flush_access() {
            tracing::warn!(error = %e, "counting the last reads failed");
        }
        self.core.close();
    }
}

impl KnowledgeStore {
    /// Opens (or creates) the store in `config.data_dir`, checks the format version, builds the in-memory
    /// indexes from the file, and starts re-embedding in the background when memories lack a vector from
    /// the configured embedder: after a change of embedder or dimension (the old vectors are dropped and
    /// every memory is marked `reindex_needed`), or after a run cut short by a crash. Progress shows in
    /// [`Admin::health`](crate::store::Admin::health) (and as a progress bar when stderr is a terminal, logged otherwise);
    /// searches of a space answer from BM25 until its vectors are complete.
    ///
    /// # Errors
    /// * [`crate::ErrorKind::Locked`]: another process has the store open.
    /// * [`crate::ErrorKind::Corrupt`]: the file is from a newer format or damaged.
    /// * [`crate::ErrorKind::Io`]: the directory or file cannot be created or read.
    /// * [`crate::ErrorKind::Unreachable`]: the PostgreSQL database of [`StoreConfig::database_url`] cannot be
    ///   reached or refuses the login (the message names what failed).
    /// * [`crate::ErrorKind::InvalidInput`]: the database URL does not parse.
    /// * [`crate::ErrorKind::Unavailable`]: a database URL in a build without the `postgres` feature.
    pub fn open(config: StoreConfig) -> Result<Self> {
        let core = Core::open(config)?;
        let graph_worker = graph::start_worker(graph::Ctx::of(&core));
        let store = KnowledgeStore {
            core,
            label_vector_cache: Mutex::default(),
            jobs: transfer::Jobs::default(),
            expired_forgotten: Default::default(),
            access_queue: Default::default(),
        };
        store.core.set_graph_worker(graph_worker);
        if let Err(e) = store.memories().forget_expired() {
            tracing::warn!(error = %e, "the expiry sweep at open failed; it runs again at the next open or sweep");
        }
        Ok(store)
    }
}
