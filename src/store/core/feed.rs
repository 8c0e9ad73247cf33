//! Several processes on one database: each keeps its in-memory indexes (catalog, BM25 mirror, vectors and
//! HNSW graphs), the memory PageRank table and the source-chunk indexes current from the change feed.
//!
//! A write transaction that changes what those hold appends one [`ChangeOut`] to the feed in the same
//! transaction ([`crate::storage::WriteTx::publish`]). After its commit the writing process applies the feed
//! from its last position, its own change included, in feed order, so that index changes from several
//! processes are applied in commit order everywhere; a worker does the same every [`POLL`]. On a redb file
//! (one process) nothing is published and a commit's changes are applied directly.
//!
//! The database stays the only authoritative state: a process that falls behind the feed's retention
//! rebuilds its indexes from the tables, as at open.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Mutex, RwLock};
use serde::{Deserialize, Serialize};

use super::chunks::ChunkIndexes;
use super::graph_files;
use super::indexes::{IndexState, SpaceIndex, apply_ops};
use super::ranks::{GraphState, load_graph_state};
use crate::error::Result;
use crate::index::ops::IndexOp;
use crate::storage::{Db, WriteTx};

/// How often a process reads the feed when it writes nothing itself: the most a search on one daemon can lag a
/// write acknowledged by another.
pub(crate) const POLL: Duration = Duration::from_millis(200);

/// How often the feed's old entries are pruned.
const PRUNE_EVERY: Duration = Duration::from_secs(60);

/// Feed entries read per round trip.
const BATCH: usize = 512;

/// One feed entry as written (borrowing the writer's values). Same encoding as [`ChangeIn`].
#[derive(Serialize)]
pub(crate) enum ChangeOut<'a> {
    /// Index operations of one commit, in order.
    Index(&'a [IndexOp]),
    /// New vectors of existing memories (re-embedding): `(space, docno, vector)`.
    Vectors(&'a [(String, u64, Vec<f32>)]),
    /// The memory PageRank table was recomputed.
    Ranks,
    /// A space's sources changed (its chunk index is stale).
    Sources(&'a str),
}

#[derive(Deserialize)]
enum ChangeIn {
    Index(Vec<IndexOp>),
    Vectors(Vec<(String, u64, Vec<f32>)>),
    Ranks,
    Sources(String),
}

/// The derived state one process keeps, and its position in the feed.
pub(crate) struct Feed {
    pub db: Arc<Db>,
    pub index: Arc<RwLock<IndexState>>,
    pub graph: Arc<RwLock<GraphState>>,
    pub chunks: ChunkIndexes,
    pub graph_files: graph_files::GraphFiles,
    pub dim: usize,
    pub vector: crate::index::vector::VectorParams,
    /// Neighbours on each side of the materialised context-expanded postings ([`crate::index::context::ExpandedIndex`]).
    pub context_window: usize,
    /// Wakes the HNSW builder after vectors arrived.
    pub wake_hnsw: Arc<dyn Fn() + Send + Sync>,
    /// This process's mark on its entries (its own PageRank and chunk changes are applied before publishing).
    origin: u64,
    /// False in the database index mode ([`crate::IndexMode::Database`]): the process keeps no per-memory index,
    /// so the feed only moves its position (and reloads the graph report, not the memories' PageRank).
    keeps_indexes: bool,
    /// The last feed `seq` applied. Held while applying, so entries are applied once and in order.
    pub(super) position: Mutex<u64>,
}

impl Feed {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        db: Arc<Db>,
        index: Arc<RwLock<IndexState>>,
        graph: Arc<RwLock<GraphState>>,
        chunks: ChunkIndexes,
        graph_files: graph_files::GraphFiles,
        dim: usize,
        vector: crate::index::vector::VectorParams,
        context_window: usize,
        wake_hnsw: Arc<dyn Fn() + Send + Sync>,
        keeps_indexes: bool,
    ) -> Feed {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        let origin = (nanos as u64) ^ (u64::from(std::process::id()) << 32) ^ (&nanos as *const u128 as u64);
        Feed {
            db,
            index,
            graph,
            chunks,
            graph_files,
            dim,
            vector,
            context_window,
            wake_hnsw,
            origin,
            keeps_indexes,
            position: Mutex::new(0),
        }
    }

    /// Whether other processes share the database (the feed is in use).
    pub(crate) fn shared(&self) -> bool {
        self.db.shared()
    }

    /// Sets the position to `head`, the feed's last `seq` in the snapshot the indexes were loaded from.
    pub(crate) fn loaded_at(&self, head: u64) {
        *self.position.lock() = head;
    }

    /// The last feed `seq` applied to this process's indexes.
    pub(crate) fn position(&self) -> u64 {
        *self.position.lock()
    }

    /// Entries of the feed not applied here yet (head minus position); None on an unshared database or when
    /// the head cannot be read now.
    pub(crate) fn lag(&self) -> Option<u64> {
        if !self.shared() {
            return None;
        }
        let head = self.db.read().ok()?.change_head().ok()?;
        Some(head.saturating_sub(self.position()))
    }

    /// Appends `change` to the feed in `txn` (nothing on an unshared database).
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn publish(&self, txn: &WriteTx, change: ChangeOut<'_>) -> Result<()> {
        if !self.shared() {
            return Ok(());
        }
        if let ChangeOut::Index([]) | ChangeOut::Vectors([]) = change {
            return Ok(());
        }
        txn.publish(&crate::storage::codec::feed_entry(&(self.origin, change))?)
    }

    /// Applies a commit's index operations: directly on an unshared database, else by catching up with the
    /// feed (which holds them, after every earlier commit's). A failure to read the feed is logged; the worker
    /// retries within [`POLL`].
    pub(crate) fn apply(&self, ops: Vec<IndexOp>) {
        if self.shared() {
            if let Err(e) = self.catch_up() {
                tracing::warn!(error = %e.chain(), "reading the change feed failed; retrying shortly");
            }
        } else if !ops.is_empty() {
            self.apply_ops(ops);
        }
        (self.wake_hnsw)();
    }

    /// Applies the index operations of this process's own commit, which published them as the feed entries
    /// `published` (lowest and highest `seq`). When that is the one entry after this process's position, it
    /// applies them directly and moves the position past it: what [`Feed::catch_up`] would do, without reading
    /// the feed back (one statement less per write). Otherwise (entries of other processes in between, a gap a
    /// rolled-back transaction left in the sequence, or the position already past it) it catches up.
    pub(crate) fn apply_own(&self, ops: Vec<IndexOp>, published: Option<(u64, u64)>) {
        if let Some((lo, hi)) = published
            && lo == hi
            && self.shared()
        {
            let mut position = self.position.lock();
            if *position + 1 == lo {
                self.apply_ops(ops);
                *position = lo;
                drop(position);
                (self.wake_hnsw)();
                return;
            }
            if *position >= hi {
                return;
            }
        }
        self.apply(ops);
    }

    /// Applies every feed entry after this process's position, in order. A position older than the feed's
    /// retention, or an entry that does not decode (written by a newer build), rebuilds the indexes from the
    /// tables instead.
    ///
    /// # Errors
    /// Storage errors; the position stays at the last entry applied.
    pub(crate) fn catch_up(&self) -> Result<()> {
        let mut position = self.position.lock();
        loop {
            let crate::storage::Changes { pruned, entries: rows } = self.db.changes_since(*position, BATCH)?;
            if pruned > *position {
                tracing::warn!(position = *position, pruned, "fell behind the change feed; rebuilding the indexes");
                return self.reload(&mut position);
            }
            let n = rows.len();
            let mut ops = Vec::new();
            let mut vectors: Vec<(String, u64, Vec<f32>)> = Vec::new();
            let mut ranks = false;
            for (seq, body) in rows {
                let Some((origin, change)) = crate::storage::codec::from_feed_entry::<(u64, ChangeIn)>(&body) else {
                    tracing::warn!(seq, "a change feed entry does not decode; rebuilding the indexes");
                    return self.reload(&mut position);
                };
                match change {
                    ChangeIn::Index(o) => {
                        if !vectors.is_empty() {
                            self.apply_vectors(std::mem::take(&mut vectors));
                        }
                        ops.extend(o);
                    }
                    ChangeIn::Vectors(v) => {
                        if !ops.is_empty() {
                            self.apply_ops(std::mem::take(&mut ops));
                        }
                        vectors.extend(v);
                    }
                    ChangeIn::Ranks => ranks |= origin != self.origin,
                    ChangeIn::Sources(space) => {
                        if origin != self.origin {
                            self.chunks.write().remove(&space);
                        }
                    }
                }
                *position = seq;
            }
            if !ops.is_empty() {
                self.apply_ops(ops);
                (self.wake_hnsw)();
            }
            if !vectors.is_empty() {
                self.apply_vectors(vectors);
                (self.wake_hnsw)();
            }
            if ranks {
                *self.graph.write() = load_graph_state(&self.db, self.keeps_indexes)?;
            }
            if n < BATCH {
                return Ok(());
            }
        }
    }

    /// Applies index operations to this process's indexes (a new space gets this store's empty index).
    fn apply_ops(&self, ops: Vec<IndexOp>) {
        if !self.keeps_indexes {
            return;
        }
        let (dim, vector, window) = (self.dim, self.vector, self.context_window);
        apply_ops(&self.index, ops, &|| SpaceIndex::empty(dim, vector, window));
    }

    /// New vectors of memories still in the catalog and without one (a later delete wins).
    fn apply_vectors(&self, batch: Vec<(String, u64, Vec<f32>)>) {
        if !self.keeps_indexes {
            return;
        }
        let mut by_space: HashMap<String, Vec<(u64, Vec<f32>)>> = HashMap::new();
        for (space, docno, v) in batch {
            by_space.entry(space).or_default().push((docno, v));
        }
        let mut state = self.index.write();
        for (space, mut batch) in by_space {
            if let Some(si) = state.spaces.get_mut(&space) {
                batch.retain(|(d, v)| si.catalog.get(*d).is_some() && !si.vectors.contains(*d) && v.len() == self.dim);
                si.vectors.insert_batch(&batch);
            }
        }
    }

    /// Rebuilds the indexes, the PageRank table and the chunk indexes from the tables.
    fn reload(&self, position: &mut u64) -> Result<()> {
        if !self.keeps_indexes {
            *position = self.db.read()?.change_head()?;
            *self.graph.write() = load_graph_state(&self.db, false)?;
            return Ok(());
        }
        let started = Instant::now();
        let ((state, head), graph) = super::load::with_graph_state(&self.db, |extra| {
            super::load::load_index_state(
                &self.db,
                self.dim,
                self.vector,
                self.context_window,
                &self.graph_files,
                None,
                extra,
            )
        })?;
        *self.index.write() = state;
        *position = head;
        *self.graph.write() = graph;
        self.chunks.write().clear();
        (self.wake_hnsw)();
        tracing::info!(secs = started.elapsed().as_secs_f64(), "indexes rebuilt from the database");
        Ok(())
    }
}

/// Starts the worker that reads the feed every [`POLL`], and every minute publishes the indexes when due
/// ([`Feed::maybe_publish`], with the snapshot file `snapshot`) and prunes the feed. Only for a shared
/// database.
pub(crate) fn start_worker(feed: Arc<Feed>, snapshot: Option<std::path::PathBuf>) -> super::worker::Worker {
    super::worker::Worker::spawn("engram-feed", move |c| {
        let mut pruned = Instant::now();
        while !c.stopped() {
            c.wait(POLL);
            if c.stopped() {
                break;
            }
            if let Err(e) = feed.catch_up() {
                tracing::debug!(error = %e.chain(), "reading the change feed failed; retrying");
            }
            if pruned.elapsed() >= PRUNE_EVERY {
                pruned = Instant::now();
                if let Some(file) = &snapshot {
                    feed.maybe_publish(file);
                }
                match feed.db.prune_changes() {
                    Ok(n) if n > 0 => tracing::debug!(entries = n, "change feed pruned"),
                    Ok(_) => {}
                    Err(e) => tracing::debug!(error = %e.chain(), "pruning the change feed failed"),
                }
            }
        }
    })
}
