//! The runtime core of a store ([`Core`]): the database, the one write path, the derived in-memory indexes, the
//! change feed, the index snapshot, the saved HNSW graphs, the background workers, and the loaders that fill
//! each index (each beside the state it fills). The services of `store/` (memories, threads, sources, the
//! graph, search, ...) borrow it; nothing here imports them (docs/design.md, "Floors").
//!
//! | module | owns |
//! |---|---|
//! | [`db`] | opening the database (redb file, encrypted device, PostgreSQL); compaction at close |
//! | [`write`] | the one write path: writer lock, generation, feed publication, commit |
//! | [`indexes`], [`builder`] | per space the catalog, BM25 lexicon and vectors; the operations a commit applies; the HNSW builder |
//! | [`load`] | filling the indexes from the database or the index snapshot at open and after a feed gap |
//! | [`ranks`] | the memory PageRank table and the last graph report, as searches read them |
//! | [`chunks`] | the BM25 indexes over source chunks (built by the sources service) |
//! | [`feed`] | other processes' commits on a shared database |
//! | [`snapshot`], [`publish`], [`graph_files`] | the side files: index snapshot, its publication, saved graphs |
//! | [`reembed`], [`worker`] | background re-embedding; the one worker type |
//! | [`upgrade`], [`encryption`] | format upgrades; encrypting, decrypting and rekeying the file |

pub mod backup;
pub(crate) mod builder;
pub(crate) mod changes;
pub(crate) mod chunks;
pub(crate) mod db;
pub mod encryption;
pub(crate) mod feed;
pub(crate) mod graph_files;
pub(crate) mod indexes;
pub(crate) mod load;
pub(crate) mod modes;
pub(crate) mod publish;
pub(crate) mod ranks;
pub(crate) mod reembed;
pub(crate) mod search_db;
pub(crate) mod snapshot;
pub(crate) mod trim;
pub mod upgrade;
pub(crate) mod worker;
pub(crate) mod write;

#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use parking_lot::{Mutex, RwLock};

use self::builder::start_graph_builder;
use self::chunks::ChunkIndexes;
use self::graph_files::GraphFiles;
use self::indexes::{IndexState, SpaceIndex};
use self::modes::{Commits, IndexReads};
use self::ranks::GraphState;
use self::worker::Worker;
use crate::config::StoreConfig;
use crate::error::Result;
use crate::index::ops::IndexOp;
use crate::model::{Space, SpaceUsage, Timestamp};
use crate::storage::Db;
use crate::storage::crypt::{EncryptionStatus, SideFiles};
use crate::store::records::{self, memory, meta, space};

/// The id of the space that always exists.
pub const DEFAULT_SPACE: &str = "default";

/// META key of the store's sync device id (32 hex digits, `sync::DeviceId::to_hex`).
pub(crate) const DEVICE_ID_KEY: &str = "device_id";

/// The runtime of one open store, shared by its services. Built by [`Core::open`]; closed by [`Core::close`]
/// (the store's drop), which stops the workers and saves the side files.
pub(crate) struct Core {
    pub db: Arc<Db>,
    pub config: StoreConfig,
    /// How other writers' commits arrive (a redb file or a shared database), chosen at open.
    pub commits: Commits,
    /// Where the per-memory indexes are read (in memory or from the database), chosen at open.
    pub reads: IndexReads,
    /// The one write path: the writer lock, the generation, the change feed, the commit.
    pub writes: Arc<write::Writes>,
    /// Per space: the catalog, BM25 lexicon, context-expanded postings and vectors.
    pub index: Arc<RwLock<IndexState>>,
    /// The memory PageRank table and the last graph report.
    pub graph: Arc<RwLock<GraphState>>,
    /// BM25 over source chunks, per space, built on the first search and dropped when the space's sources change.
    pub chunk_index: ChunkIndexes,
    /// The change feed: keeps the in-memory state current when other processes write the database.
    pub feed: Arc<feed::Feed>,
    /// Saved HNSW graphs, and how the store's side files are sealed (`graph_files.side`).
    pub graph_files: GraphFiles,
    /// Bulk loads running ([`Admin::bulk_load`](crate::store::Admin::bulk_load)); the graph worker waits for them to end.
    pub bulk_loads: Arc<AtomicUsize>,
    /// Batches of memories being written; the HNSW builder waits for them between chunks.
    pub batch_writes: Arc<AtomicUsize>,
    pub started: Instant,
    /// Whether the store file is encrypted, with which cipher and key source (`/health`).
    pub encryption: EncryptionStatus,
    /// Write generation at the last checkpoint.
    pub durable_generation: AtomicU64,
    /// Access-count commits (without fsync) since the last checkpoint.
    pub pending_access: AtomicU64,
    /// The state of background re-embedding.
    pub reembed_progress: Arc<reembed::Progress>,
    /// The index snapshot file a close writes ([`snapshot`]), set once the indexes were loaded: only then may a
    /// close write it (an open that failed earlier, such as a store from a newer release, holds empty indexes
    /// and must not save them).
    snapshot_file: OnceLock<PathBuf>,
    /// The background thread an open started to decode the own texts of context-expanded postings, if any
    /// ([`Core::indexes_done`] is false until it has finished, whether it ended or panicked).
    pub own_texts_decode: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// Reads the feed on a shared database. Stopped first at close.
    feed_worker: Mutex<Option<Worker>>,
    /// The graph service's recompute (communities, PageRank), set by the store once the core is open; woken
    /// after every write.
    graph_worker: OnceLock<Worker>,
    reembed: Mutex<Option<Worker>>,
    /// The HNSW builder.
    builder: Worker,
}

impl Core {
    /// Opens (or creates) the database of `config`, brings it to this release's format, checks the embedder,
    /// loads the indexes and starts the core's workers (HNSW builder, feed reader, re-embedding). The graph
    /// worker is the store's to start ([`Core::set_graph_worker`]).
    ///
    /// # Errors
    /// As [`crate::KnowledgeStore::open`].
    pub(crate) fn open(config: StoreConfig) -> Result<Core> {
        let started = Instant::now();
        let lap = |step: &str| tracing::debug!(step, ms = started.elapsed().as_secs_f64() * 1000.0, "open");
        if config.index_mode == crate::IndexMode::Database && config.database_url.is_none() {
            return Err(crate::Error::new(
                crate::ErrorKind::InvalidInput,
                "the database index mode needs a PostgreSQL database (database_url, --database-url)",
            ));
        }
        std::fs::create_dir_all(&config.data_dir)?;
        let backup = upgrade::backup_before_open(&config)?;
        let (db, unlocked) = db::open_db(&config)?;
        let db = Arc::new(db);
        let (side_files, encryption) = match unlocked {
            Some(u) => (SideFiles::new(Some(u.side)), u.status),
            None => (SideFiles::default(), EncryptionStatus::plaintext()),
        };
        lap("database");
        let index = Arc::new(RwLock::new(IndexState { spaces: HashMap::new() }));
        let graph_files = GraphFiles::new(&config.data_dir, config.embedder.name(), side_files);
        let batch_writes = Arc::new(AtomicUsize::new(0));
        let bulk_loads = Arc::new(AtomicUsize::new(0));
        let builder = start_graph_builder(
            index.clone(),
            config.vector,
            db.clone(),
            graph_files.clone(),
            batch_writes.clone(),
            bulk_loads.clone(),
        );
        let graph = Arc::new(RwLock::new(GraphState::default()));
        let chunk_index: ChunkIndexes = Arc::new(RwLock::new(HashMap::new()));
        let hnsw = builder.control();
        let feed = Arc::new(feed::Feed::new(
            db.clone(),
            index.clone(),
            graph.clone(),
            chunk_index.clone(),
            graph_files.clone(),
            config.embedder.dim(),
            config.vector,
            config.context.window,
            Arc::new(move || hnsw.wake()),
            IndexReads::of(&config).in_memory(),
        ));
        let writes = write::Writes::new(db.clone(), config.durability, feed.clone());
        let core = Core {
            commits: Commits::of(&db),
            reads: IndexReads::of(&config),
            db,
            config,
            writes,
            index,
            graph,
            chunk_index,
            feed,
            graph_files,
            bulk_loads,
            batch_writes,
            started: Instant::now(),
            encryption,
            durable_generation: AtomicU64::new(0),
            pending_access: AtomicU64::new(0),
            reembed_progress: Arc::default(),
            snapshot_file: OnceLock::new(),
            own_texts_decode: Mutex::new(None),
            feed_worker: Mutex::new(None),
            graph_worker: OnceLock::new(),
            reembed: Mutex::new(None),
            builder,
        };
        core.init_schema(backup)?;
        {
            let rtx = core.db.read()?;
            let m = meta::meta(&rtx)?;
            let g = m.u64("generation")?.unwrap_or(0);
            core.durable_generation.store(g, Ordering::Release);
            // A store in a sync group captures its replicated changes from its first write (docs/sync.md).
            if m.contains(changes::ENABLED_KEY)? {
                let device =
                    m.text(DEVICE_ID_KEY)?.and_then(|t| crate::sync::DeviceId::parse(&t)).ok_or_else(|| {
                        crate::error::Error::new(crate::ErrorKind::Corrupt, "META.device_id is missing or malformed")
                    })?;
                core.writes.sync.start(device, m.json(changes::HLC_KEY)?.unwrap_or_default());
            }
        }
        core.check_embedder()?;
        lap("schema");
        if core.reads == IndexReads::Database {
            // No per-memory index: searches read theirs from the database, the feed only moves the position.
            core.feed.loaded_at(core.db.read()?.change_head()?);
            *core.graph.write() = ranks::load_graph_state(&core.db, false)?;
        } else {
            // Set once, here.
            let _ = core.snapshot_file.set(core.load_indexes()?);
        }
        lap("indexes and graph state");
        if core.commits == Commits::Feed {
            // From a snapshot, the indexes are at its position: the entries since are applied before the first
            // search (the worker retries a failure within its poll).
            if let Err(e) = core.feed.catch_up() {
                tracing::warn!(error = %e.chain(), "reading the change feed at open failed; retrying shortly");
            }
            *core.feed_worker.lock() = Some(feed::start_worker(core.feed.clone(), core.snapshot_file.get().cloned()));
        }
        core.builder.wake();
        core.start_reembedding();
        core.decode_own_texts();
        lap("re-embedding checked");
        Ok(core)
    }

    /// Sets the graph service's worker (once; a second call is ignored) and wakes it.
    pub(crate) fn set_graph_worker(&self, worker: Worker) {
        if self.graph_worker.set(worker).is_err() {
            tracing::warn!("the graph worker was already started");
        }
        self.wake_graph();
    }

    /// Fills the search catalog of a shared database anew in `txn` (after records were written without index
    /// operations, as by an import); nothing on a local file, whose catalog lives in memory.
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn refill_catalog(&self, txn: &crate::storage::WriteTx) -> Result<()> {
        if self.commits == Commits::Feed {
            records::catalog::fill(txn)?;
        }
        Ok(())
    }

    /// Wakes the HNSW builder (after the indexes were replaced, as by an import).
    pub(crate) fn wake_builder(&self) {
        self.builder.wake();
    }

    /// Wakes the graph service's worker, if it runs.
    pub(crate) fn wake_graph(&self) {
        if let Some(w) = self.graph_worker.get() {
            w.wake();
        }
    }

    /// Stops the change-feed reader: the first step of a close, before the store's last writes.
    pub(crate) fn stop_feed(&self) {
        drop(self.feed_worker.lock().take());
    }

    /// Closes the core after [`Core::stop_feed`] and the store's last writes: stops re-embedding, the HNSW
    /// builder and the graph worker, saves every graph that changed since its last save and the index snapshot,
    /// and compacts a sparse file.
    pub(crate) fn close(&mut self) {
        drop(self.reembed.lock().take());
        self.builder.stop();
        // A clean close saves every graph that changed since its last save.
        {
            let state = self.index.read();
            for (space, si) in &state.spaces {
                self.graph_files.save(&self.db, space, si);
            }
        }
        if let Some(w) = self.graph_worker.get_mut() {
            w.stop();
        }
        // No writer is left: the index snapshot reflects the committed state (on a shared database, the feed
        // position: the feed worker is stopped).
        if let Some(file) = self.snapshot_file.get() {
            let state = self.index.read();
            let saved = if self.commits == Commits::Feed {
                snapshot::save_shared(file, &state, self.feed.position()).map(|_| ())
            } else {
                self.save_snapshot(file, &state)
            };
            if let Err(e) = saved {
                tracing::warn!(error = %e, "index snapshot not saved; the next open loads the indexes from the store");
            }
        }
        // Every worker is stopped: no transaction is open (a compaction step would refuse otherwise).
        db::compact_if_sparse(&self.db, &self.config.db_path());
    }

    /// Writes the index snapshot of `state` to `file` when the committed state has none, and records its token
    /// in a durable commit ([`snapshot::save`]).
    fn save_snapshot(&self, file: &std::path::Path, state: &IndexState) -> Result<()> {
        if let Some(token) = snapshot::save(&self.db, file, state, &self.graph_files.side)? {
            let commit =
                write::Commit { durability: Some(crate::config::Durability::Immediate), bump: false, capture: false };
            self.writes.write(commit, |txn, _| meta::meta(txn)?.put_u64(meta::INDEX_SNAPSHOT, token))?;
        }
        Ok(())
    }

    /// A new, empty index for a space, with this store's dimension, HNSW parameters and context window.
    pub(crate) fn new_space_index(&self) -> SpaceIndex {
        SpaceIndex::empty(self.config.embedder.dim(), self.config.vector, self.config.context.window)
    }

    /// Applies a commit's changes to the in-memory indexes (on a shared database: catches up with the change
    /// feed, which holds them; see [`feed`]).
    pub(crate) fn apply(&self, ops: Vec<IndexOp>) {
        self.feed.apply(ops);
        self.builder.wake();
        self.wake_graph();
    }

    /// A change of knowledge through the one write path ([`write::Writes::write`]): one write transaction under
    /// the writer lock, the generation bumped, `f`'s index operations published to the change feed and applied
    /// after the commit; then the background workers are woken. Nothing is written or applied if `f` fails.
    pub(crate) fn write<T>(
        &self,
        f: impl FnOnce(&crate::storage::WriteTx, &mut Vec<IndexOp>) -> Result<T>,
    ) -> Result<T> {
        let out = self.writes.write(write::Commit::KNOWLEDGE, f)?;
        self.builder.wake();
        self.wake_graph();
        Ok(out)
    }

    /// Whether the indexes' background work is done: re-embedding finished, the own texts an open read from the
    /// index snapshot decoded, no vector pending in a space's HNSW graph. Wakes the builder when it is not.
    pub(crate) fn indexes_done(&self) -> bool {
        let reembedding = self.reembed_progress.running.load(Ordering::Acquire);
        let decoding = self.own_texts_decode.lock().as_ref().is_some_and(|t| !t.is_finished());
        if !reembedding && !decoding && !self.index.read().spaces.values().any(|s| s.vectors.needs_work()) {
            return true;
        }
        self.builder.wake();
        false
    }

    /// The index snapshot file this store writes at close: set once the indexes were loaded.
    pub(crate) fn snapshot_file(&self) -> Option<&PathBuf> {
        self.snapshot_file.get()
    }

    /// Decodes on a background thread the own texts of context-expanded postings that the index snapshot left
    /// encoded ([`crate::index::context::ExpandedIndex::encoded_own`]), so that the first write does not.
    fn decode_own_texts(&self) {
        let jobs: Vec<(String, crate::index::context::OwnTexts)> = self
            .index
            .read()
            .spaces
            .iter()
            .filter_map(|(name, si)| Some((name.clone(), si.expanded.as_ref()?.encoded_own()?)))
            .collect();
        if jobs.is_empty() {
            return;
        }
        let index = self.index.clone();
        let spawned = std::thread::Builder::new().name("engram-own-texts".into()).spawn(move || {
            for (space, job) in jobs {
                let job = job.decode();
                if let Some(x) = index.write().spaces.get_mut(&space).and_then(|si| si.expanded.as_mut()) {
                    x.take_own(job);
                }
            }
        });
        match spawned {
            Ok(thread) => *self.own_texts_decode.lock() = Some(thread),
            Err(e) => tracing::warn!(error = %e, "own texts left for the first write to decode"),
        }
    }

    /// Starts the background re-embedding of memories without a vector, if there are any.
    pub(crate) fn start_reembedding(&self) {
        // Caller-supplied vectors cannot be recomputed: memories without one stay lexical.
        if self.config.embedder.external() {
            return;
        }
        let work = reembed::missing(&self.index.read());
        if work.is_empty() {
            return;
        }
        let hnsw = self.builder.control();
        let ctx = reembed::Ctx {
            db: self.db.clone(),
            writes: self.writes.clone(),
            index: self.index.clone(),
            embedder: self.config.embedder.clone(),
            wake_graphs: Arc::new(move || hnsw.wake()),
            feed: self.feed.clone(),
        };
        *self.reembed.lock() = Some(reembed::start(ctx, work, self.reembed_progress.clone()));
    }

    /// Creates every table of a new store and its default space, or brings an older store to this release's
    /// format ([`upgrade`]); refuses a newer one.
    pub(crate) fn init_schema(&self, backup: Option<std::path::PathBuf>) -> Result<()> {
        {
            // A new store has no META table yet: creating it is the write below.
            let rtx = self.db.read()?;
            let has_meta = meta::meta(&rtx).is_ok_and(|t| t.contains("format_version").unwrap_or(false));
            drop(rtx);
            if has_meta {
                upgrade::upgrade_at_open(&self.db, backup)?;
            }
        }
        let txn = self.db.write(crate::config::Durability::Immediate)?;
        // Creating every kind up front lets readers open them without a write.
        records::create_all(&txn)?;
        if self.commits == Commits::Feed && meta::meta(&txn)?.u64(records::catalog::FILLED_KEY)?.is_none() {
            // A database written before the search catalog existed (or a new one): filled once, under the writers'
            // lock this transaction holds.
            let started = Instant::now();
            let entries = records::catalog::fill(&txn)?;
            tracing::info!(entries, secs = started.elapsed().as_secs_f64(), "search catalog filled");
        }
        {
            let mut meta = meta::meta(&txn)?;
            match upgrade::stored_format(&meta)? {
                Some(found) if found > crate::store::core::upgrade::FORMAT_VERSION => {
                    return Err(upgrade::newer(found));
                }
                Some(_) => {}
                None => {
                    meta.put_u32("format_version", crate::store::core::upgrade::FORMAT_VERSION)?;
                }
            }
            // The store's device id for sync (docs/sync.md): made once, at creation or at the first open of an
            // older store.
            if !meta.contains(DEVICE_ID_KEY)? {
                meta.put_text(DEVICE_ID_KEY, &crate::sync::DeviceId::random().to_hex())?;
            }
            let mut spaces = space::spaces(&txn)?;
            if !spaces.contains(DEFAULT_SPACE)? {
                let s = Space {
                    id: DEFAULT_SPACE.into(),
                    key: DEFAULT_SPACE.into(),
                    name: "Default".into(),
                    aliases: vec![],
                    description: "The default space".into(),
                    icon: String::new(),
                    instructions: String::new(),
                    shared_space_ids: vec![],
                    default_retrieval_mode: "strict".into(),
                    is_default: true,
                    usage: SpaceUsage::default(),
                    observed: false,
                    has_profile: false,
                    created_at: Timestamp::now(),
                };
                spaces.put(DEFAULT_SPACE, &s)?;
            }
        }
        txn.commit()?;
        Ok(())
    }

    /// Records the configured embedder. When the stored vectors came from another embedder or dimension,
    /// drops them and marks every memory `reindex_needed` in the same transaction, so that one index never
    /// mixes vectors of two models; the background run started by [`crate::KnowledgeStore::open`] re-embeds them.
    pub(crate) fn check_embedder(&self) -> Result<()> {
        let emb = &self.config.embedder;
        let want = format!("{}:{}", emb.name(), emb.dim());
        let rtx = self.db.read()?;
        let have = meta::meta(&rtx)?.text("embedder")?;
        drop(rtx);
        if have.as_deref() == Some(want.as_str()) {
            return Ok(());
        }
        let marked = self.write(|txn, _| {
            memory::vectors(txn)?.clear()?;
            let marked = memory::update_all(txn, 1024, |sm| sm.memory.reindex_needed = true)?;
            meta::meta(txn)?.put_text("embedder", &want)?;
            Ok(marked)
        })?;
        if marked > 0 {
            tracing::info!(from = ?have, to = %want, memories = marked, "embedder changed: old vectors dropped");
            *self.reembed_progress.from.lock() = have;
        }
        Ok(())
    }

    /// Builds the catalog and vector indexes of every space from the database (or this process's index snapshot),
    /// and the memory PageRank table beside them (0.8 s of a 1M-memory open, [`load::with_graph_state`]), and sets the
    /// change-feed position to the state they were read at. Returns the snapshot file, which the close writes.
    pub(crate) fn load_indexes(&self) -> Result<std::path::PathBuf> {
        let file = if self.commits == Commits::Feed {
            let file = snapshot::shared_path(&self.config.data_dir, self.store_id()?);
            // Without a snapshot of its own that the feed covers, a daemon takes the published one.
            let own = match snapshot::position_of(&file, &SideFiles::default()) {
                Some(p) => p >= self.db.changes_since(u64::MAX, 0)?.pruned,
                None => false,
            };
            if !own {
                publish::take(&self.db, &file, &self.graph_files);
            }
            file
        } else {
            snapshot::path(&self.config.data_dir)
        };
        let ((state, head), graph) = load::with_graph_state(&self.db, |extra| {
            load::load_index_state(
                &self.db,
                self.config.embedder.dim(),
                self.config.vector,
                self.config.context.window,
                &self.graph_files,
                Some(&file),
                extra,
            )
        })?;
        *self.index.write() = state;
        *self.graph.write() = graph;
        self.feed.loaded_at(head);
        Ok(file)
    }

    /// The random id of a shared (PostgreSQL) store, from META, set when it has none (the first daemon to open
    /// it does, in a write transaction: daemons opening at once agree on one).
    fn store_id(&self) -> Result<u64> {
        let key = meta::STORE_ID;
        if let Some(id) = meta::meta(&self.db.read()?)?.u64(key)? {
            return Ok(id);
        }
        let commit = write::Commit { durability: None, bump: false, capture: false };
        self.writes.write(commit, |txn, _| {
            let mut meta = meta::meta(txn)?;
            match meta.u64(key)? {
                Some(id) => Ok(id),
                None => {
                    let id = uuid::Uuid::new_v4().as_u64_pair().0;
                    meta.put_u64(key, id)?;
                    Ok(id)
                }
            }
        })
    }
}
