//! Opening and closing the store: the file (created, or checked against the format version), the embedder
//! check, the in-memory indexes read from the file, background re-embedding, and at close the saved graphs and
//! compaction.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use parking_lot::{Mutex, RwLock};

use super::*;
use crate::config::StoreConfig;
use crate::error::Result;
use crate::index::catalog::DocMeta;
use crate::model::{Space, SpaceUsage, Timestamp};
use crate::storage::crypt::{self, EncryptedDevice, EncryptionStatus, FileKind, SideFiles, Unlocked};
use crate::storage::{Db, Readable};
use crate::store::{label, memory, meta, space};

/// Moves aside a store file whose creation was cut short. redb writes its magic number (the first 9 bytes) last
/// when it creates a file, after the empty structure is on disk; a crash or I/O error before that leaves a file
/// that starts with zeros, never held a commit, and that redb refuses to open ("not a redb database") for ever.
/// Such a file is renamed to `engram.redb.incomplete-<unix ms>` (kept, never deleted) so that the store can be
/// created again. A file starting with anything else is left alone.
pub(crate) fn discard_unborn_file(path: &std::path::Path) -> Result<()> {
    use std::io::Read;
    let Ok(mut f) = std::fs::File::open(path) else { return Ok(()) };
    let mut head = [0u8; crate::storage::REDB_MAGIC_BYTES];
    let mut got = 0;
    while got < head.len() {
        let n = f.read(&mut head[got..])?;
        if n == 0 {
            break;
        }
        got += n;
    }
    if got == 0 || head[..got].iter().any(|b| *b != 0) {
        return Ok(());
    }
    drop(f);
    let aside = path.with_extension(format!("redb.incomplete-{}", Timestamp::now().0));
    tracing::warn!(
        path = %path.display(),
        moved_to = %aside.display(),
        "the store file was never initialised (its creation was cut short); moved aside, creating a new one"
    );
    std::fs::rename(path, aside)?;
    Ok(())
}

/// Files smaller than this are never compacted at close.
pub(crate) const COMPACT_MIN_BYTES: u64 = 16 << 20;

/// Compacts the file at close when more than a quarter of it is free pages (bulk loads and big deletes leave
/// them; redb reuses them, but the file only shrinks by compaction). Errors are logged: the store stays valid.
pub(crate) fn compact_if_sparse(db: &Db, path: &std::path::Path) {
    let before = std::fs::metadata(path).map_or(0, |m| m.len());
    if before < COMPACT_MIN_BYTES {
        return;
    }
    let Ok(Some(used)) = db.used_bytes() else { return };
    if used.saturating_mul(4) >= before.saturating_mul(3) {
        return;
    }
    let started = Instant::now();
    for _ in 0..8 {
        match db.compact_step() {
            Ok(true) => continue,
            Ok(false) => break,
            Err(e) => {
                tracing::warn!(error = %e, "compaction at close stopped; the file stays valid");
                break;
            }
        }
    }
    let after = std::fs::metadata(path).map_or(0, |m| m.len());
    tracing::info!(before, after, ms = started.elapsed().as_millis() as u64, "store file compacted at close");
}

impl Drop for KnowledgeStore {
    fn drop(&mut self) {
        drop(self.feed_worker.lock().take());
        // Reads still queued are counted before the store closes.
        if let Err(e) = self.flush_access() {
            tracing::warn!(error = %e, "counting the last reads failed");
        }
        drop(self.reembed.lock().take());
        self.builder.stop();
        // A clean close saves every graph that changed since its last save.
        {
            let state = self.index.read();
            for (space, si) in &state.spaces {
                self.graph_files.save(&self.db, space, si);
            }
        }
        self.graph_worker.stop();
        // No writer is left: the index snapshot reflects the committed state (on a shared database, the feed
        // position: the feed worker is stopped).
        if let Some(file) = self.snapshot_file.get() {
            let state = self.index.read();
            let saved = if self.db.shared() {
                super::snapshot::save_shared(file, &state, self.feed.position())
            } else {
                super::snapshot::save(&self.db, &self.writes, file, &state, &self.graph_files.side)
            };
            if let Err(e) = saved {
                tracing::warn!(error = %e, "index snapshot not saved; the next open loads the indexes from the store");
            }
        }
        // Every worker is stopped: no transaction is open (a compaction step would refuse otherwise).
        compact_if_sparse(&self.db, &self.config.db_path());
    }
}

/// The store's database: the PostgreSQL database of `config.database_url`, or the redb file in the data
/// directory (on an [`EncryptedDevice`] when the file is encrypted or `config.encryption` makes a new one), with
/// what an encrypted file's key unlocked.
///
/// # Errors
/// As [`KnowledgeStore::open`]; [`crate::ErrorKind::WrongKey`] (`key_required`) for an encrypted file without a
/// key, [`crate::ErrorKind::Conflict`] (`store_not_encrypted`) for a key and a plaintext file.
pub(crate) fn open_db(config: &StoreConfig) -> Result<(Db, Option<Unlocked>)> {
    if let Some(url) = &config.database_url {
        if config.encryption.is_some() {
            return Err(crate::Error::new(
                crate::ErrorKind::InvalidInput,
                "encryption at rest covers the redb file; a PostgreSQL store is encrypted by its server (disk or \
                 tablespace encryption, pg_tde: docs/deploy.md)",
            ));
        }
        #[cfg(feature = "postgres")]
        return Ok((Db::connect(url, config.database_pool_size)?, None));
        #[cfg(not(feature = "postgres"))]
        {
            let _ = url;
            return Err(crate::error::Error::new(
                crate::error::ErrorKind::Unavailable,
                "a database URL was given, but this build has no PostgreSQL backend (cargo feature `postgres`)",
            ));
        }
    }
    let path = config.db_path();
    discard_unborn_file(&path)?;
    let kind = crypt::file_kind(&path)?;
    let device = |path: &std::path::Path| -> Result<Box<dyn crate::storage::Device>> {
        Ok(match &config.storage {
            Some(open) => open(path)?,
            None => Box::new(crate::storage::FileDevice::open(path)?),
        })
    };
    match (kind, &config.encryption) {
        // Held by another process (the daemon): that comes first, so that `engram mcp` forwards to it.
        (FileKind::Encrypted, None)
            if crypt::lock_file(&path, false).is_err_and(|e| e.kind() == crate::ErrorKind::Locked) =>
        {
            Err(crate::Error::new(
                crate::ErrorKind::Locked,
                "the store is open in another process (the daemon or another program); close it first",
            ))
        }
        (FileKind::Encrypted, None) => Err(crate::Error::new(
            crate::ErrorKind::WrongKey,
            format!(
                "the store {} is encrypted: give its key (engram serve --encrypted with a passphrase on the \
                 terminal or in ENGRAM_PASSPHRASE_FILE, --key-file FILE or --keychain; StoreConfig::encrypted)",
                path.display()
            ),
        )
        .with_code(crate::ErrorCode::KeyRequired)),
        (FileKind::Plain, Some(_)) => Err(crate::Error::new(
            crate::ErrorKind::Conflict,
            format!(
                "the store {} is not encrypted, but a key was given; encrypt it first with `engram encrypt`",
                path.display()
            ),
        )
        .with_code(crate::ErrorCode::StoreNotEncrypted)),
        (FileKind::Missing | FileKind::Encrypted, Some(enc)) => {
            let lock = crypt::lock_file(&path, true)?;
            let (dev, unlocked) = if kind == FileKind::Missing {
                let (dev, unlocked) = EncryptedDevice::create(device(&path)?, enc)?;
                (Box::new(dev), unlocked)
            } else {
                match EncryptedDevice::open_with(device(&path)?, enc, false)? {
                    crypt::Opened::Ready(dev, unlocked) => (dev, unlocked),
                    crypt::Opened::Unborn => {
                        drop(lock);
                        let aside = path.with_extension(format!("redb.incomplete-{}", Timestamp::now().0));
                        tracing::warn!(
                            path = %path.display(),
                            moved_to = %aside.display(),
                            "the encrypted store file was never initialised (its creation was cut short); moved \
                             aside, creating a new one"
                        );
                        std::fs::rename(&path, aside)?;
                        return open_db(config);
                    }
                }
            };
            let dev = Box::new(dev.with_lock(lock));
            Ok((Db::open(&path, config.cache_size_bytes, Some(dev))?, Some(unlocked)))
        }
        (FileKind::Missing | FileKind::Plain, None) => {
            let dev = match &config.storage {
                Some(open) => Some(open(&path)?),
                None => None,
            };
            Ok((Db::open(&path, config.cache_size_bytes, dev)?, None))
        }
    }
}

/// An encrypted redb store opened for reading only (nothing is written, not even its header; a wrong key changes
/// nothing): `None` for a plaintext or missing file, or one that needs redb's crash repair.
///
/// # Errors
/// As [`open_db`].
pub(crate) fn open_db_read_only(config: &StoreConfig) -> Result<Option<Db>> {
    let path = config.db_path();
    if config.database_url.is_some() || crypt::file_kind(&path)? != FileKind::Encrypted {
        return Ok(None);
    }
    let Some(enc) = &config.encryption else {
        return open_db(config).map(|_| None);
    };
    let lock = crypt::lock_file(&path, false)?;
    match EncryptedDevice::open_with(Box::new(crate::storage::FileDevice::open(&path)?), enc, true)? {
        crypt::Opened::Ready(dev, _) => {
            Db::open_read_only_on(&path, config.cache_size_bytes, Box::new(dev.with_lock(lock)))
        }
        crypt::Opened::Unborn => Ok(None),
    }
}

impl KnowledgeStore {
    /// Opens (or creates) the store in `config.data_dir`, checks the format version, builds the in-memory
    /// indexes from the file, and starts re-embedding in the background when memories lack a vector from
    /// the configured embedder: after a change of embedder or dimension (the old vectors are dropped and
    /// every memory is marked `reindex_needed`), or after a run cut short by a crash. Progress shows in
    /// [`KnowledgeStore::health`] (and as a progress bar when stderr is a terminal, logged otherwise);
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
        let (db, unlocked) = open_db(&config)?;
        let db = Arc::new(db);
        let (side_files, encryption) = match unlocked {
            Some(u) => (SideFiles::new(Some(u.side)), u.status),
            None => (SideFiles::default(), EncryptionStatus::plaintext()),
        };
        lap("database");
        let index = Arc::new(RwLock::new(IndexState { spaces: HashMap::new() }));
        let graph_files = graph_files::GraphFiles::new(&config.data_dir, config.embedder.name(), side_files);
        let batch_writes = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let bulk_loads = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let builder = start_graph_builder(
            index.clone(),
            config.vector,
            db.clone(),
            graph_files.clone(),
            batch_writes.clone(),
            bulk_loads.clone(),
        );
        let graph = Arc::new(RwLock::new(communities::GraphState::default()));
        let chunk_index = Arc::new(RwLock::new(HashMap::new()));
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
            config.index_mode == crate::IndexMode::Memory,
        ));
        let writes = write::Writes::new(db.clone(), config.durability, feed.clone());
        let graph_worker = communities::start_worker(communities::Ctx {
            db: db.clone(),
            writes: writes.clone(),
            graph: graph.clone(),
            embedder: config.embedder.clone(),
            feed: feed.clone(),
            bulk_loads: bulk_loads.clone(),
            recompute: config.index_mode == crate::IndexMode::Memory,
        });
        let store = KnowledgeStore {
            bulk_loads,
            batch_writes,
            db,
            config,
            writes,
            index,
            started: Instant::now(),
            reembed_progress: Arc::default(),
            own_texts_decode: Mutex::new(None),
            label_vector_cache: Mutex::default(),
            chunk_index,
            jobs: transfer::Jobs::default(),
            durable_generation: Default::default(),
            expired_forgotten: Default::default(),
            pending_access: Default::default(),
            access_queue: Default::default(),
            graph,
            feed_worker: Mutex::new(None),
            feed,
            graph_worker,
            reembed: Mutex::new(None),
            builder,
            graph_files,
            snapshot_file: Default::default(),
            encryption,
        };
        store.init_schema(backup)?;
        {
            let rtx = store.db.read()?;
            let g = meta::meta(&rtx)?.u64("generation")?.unwrap_or(0);
            store.durable_generation.store(g, std::sync::atomic::Ordering::Release);
        }
        store.check_embedder()?;
        lap("schema");
        if store.config.index_mode == crate::IndexMode::Database {
            // No per-memory index: searches read theirs from the database, the feed only moves the position.
            store.feed.loaded_at(store.db.read()?.change_head()?);
            *store.graph.write() = communities::load_graph_state(&store.db, false)?;
        } else {
            // Set once, here.
            let _ = store.snapshot_file.set(store.load_indexes()?);
        }
        lap("indexes and graph state");
        if store.db.shared() {
            // From a snapshot, the indexes are at its position: the entries since are applied before the first
            // search (the worker retries a failure within its poll).
            if let Err(e) = store.feed.catch_up() {
                tracing::warn!(error = %e.chain(), "reading the change feed at open failed; retrying shortly");
            }
            *store.feed_worker.lock() =
                Some(feed::start_worker(store.feed.clone(), store.snapshot_file.get().cloned()));
        }
        store.builder.wake();
        store.graph_worker.wake();
        store.start_reembedding();
        store.decode_own_texts();
        lap("re-embedding checked");
        if let Err(e) = store.forget_expired() {
            tracing::warn!(error = %e, "the expiry sweep at open failed; it runs again at the next open or sweep");
        }
        lap("expiry sweep");
        Ok(store)
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
    /// format ([`super::upgrade`]); refuses a newer one.
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
        super::records::create_all(&txn)?;
        if self.db.shared() && meta::meta(&txn)?.u64(super::records::catalog::FILLED_KEY)?.is_none() {
            // A database written before the search catalog existed (or a new one): filled once, under the writers'
            // lock this transaction holds.
            let started = Instant::now();
            let entries = super::records::catalog::fill(&txn)?;
            tracing::info!(entries, secs = started.elapsed().as_secs_f64(), "search catalog filled");
        }
        {
            let mut meta = meta::meta(&txn)?;
            match upgrade::stored_format(&meta)? {
                Some(found) if found > crate::storage::codec::FORMAT_VERSION => return Err(upgrade::newer(found)),
                Some(_) => {}
                None => {
                    meta.put_u32("format_version", crate::storage::codec::FORMAT_VERSION)?;
                }
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
    /// mixes vectors of two models; the background run started by [`KnowledgeStore::open`] re-embeds them.
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
            let mut mems = memory::memories(txn)?;
            let mut marked = 0u64;
            // In chunks, so that a large store is not held in memory at once.
            let mut after: Option<(String, String)> = None;
            loop {
                let mut chunk: Vec<((String, String), StoredMemory)> = Vec::with_capacity(1024);
                {
                    let from = after.as_ref().map_or(("", ""), |(s, i)| (s.as_str(), i.as_str()));
                    let range = mems.range(from..)?;
                    for row in range {
                        let (k, v) = row?;
                        let (space, id) = k.value();
                        if after.as_ref().is_some_and(|(s, i)| s == space && i == id) {
                            continue;
                        }
                        let mut sm: StoredMemory = v;
                        sm.memory.reindex_needed = true;
                        chunk.push(((space.to_string(), id.to_string()), sm));
                        if chunk.len() == 1024 {
                            break;
                        }
                    }
                }
                let Some(last) = chunk.last().map(|c| c.0.clone()) else { break };
                for ((space, id), sm) in &chunk {
                    mems.put((space.as_str(), id.as_str()), sm)?;
                }
                marked += chunk.len() as u64;
                after = Some(last);
            }
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
    /// and the memory PageRank table beside them (0.8 s of a 1M-memory open, [`with_graph_state`]), and sets the
    /// change-feed position to the state they were read at. Returns the snapshot file, which the close writes.
    pub(crate) fn load_indexes(&self) -> Result<std::path::PathBuf> {
        let file = if self.db.shared() {
            let file = super::snapshot::shared_path(&self.config.data_dir, self.store_id()?);
            // Without a snapshot of its own that the feed covers, a daemon takes the published one.
            let own = match super::snapshot::position_of(&file, &SideFiles::default()) {
                Some(p) => p >= self.db.changes_since(u64::MAX, 0)?.pruned,
                None => false,
            };
            if !own {
                super::publish::take(&self.db, &file, &self.graph_files);
            }
            file
        } else {
            super::snapshot::path(&self.config.data_dir)
        };
        let ((state, head), graph) = with_graph_state(&self.db, |extra| {
            load_index_state(
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
        let key = super::snapshot::STORE_ID_KEY;
        if let Some(id) = meta::meta(&self.db.read()?)?.u64(key)? {
            return Ok(id);
        }
        let commit = super::write::Commit { durability: None, bump: false };
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

/// Builds the catalog and BM25 lexicon of every space from the memory records, labels and postings.
fn load_lexical(
    rtx: &crate::storage::ReadTx,
    state: &mut IndexState,
    new_space_index: &dyn Fn() -> SpaceIndex,
) -> Result<()> {
    let started = Instant::now();
    let lap = |phase: &str| tracing::debug!(phase, ms = started.elapsed().as_secs_f64() * 1000.0, "index load");
    let mut labels = label::labels_by_memory(rtx)?;
    for row in memory::memories(rtx)?.iter()? {
        let (k, v) = row?;
        let (space, id) = k.value();
        let sm: StoredMemory = v;
        let l = labels.remove(&(space.to_string(), id.to_string())).unwrap_or_default();
        let si = state.spaces.entry(space.to_string()).or_insert_with(new_space_index);
        si.catalog.insert(sm.docno, DocMeta::of(&sm.memory, l));
    }
    lap("catalog");
    for row in memory::postings(rtx)?.iter()? {
        let (k, v) = row?;
        let (space, term, docno) = k.value();
        if let Some(si) = state.spaces.get_mut(space) {
            si.lexicon.load(term, crate::index::bm25::Posting::unpack(docno, v.value()));
        }
    }
    for row in memory::lex_stats(rtx)?.iter()? {
        let (k, v) = row?;
        if let Some(si) = state.spaces.get_mut(k.value()) {
            (si.lexicon.docs, si.lexicon.total_len) = v.value();
        }
    }
    lap("postings");
    for si in state.spaces.values_mut() {
        si.lexicon.finish_load();
    }
    lap("lexicon sorted");
    Ok(())
}

/// Runs `load` with, as its `extra` work ([`load_index_state`]), the read of the memory PageRank table
/// ([`communities::load_graph_state`]), and returns both: the table is read beside the load, or after it when
/// the load did not run it.
///
/// # Errors
/// `load`'s errors; storage errors reading the table.
pub(crate) fn with_graph_state<T>(
    db: &Db,
    load: impl FnOnce(&(dyn Fn() + Sync)) -> Result<T>,
) -> Result<(T, communities::GraphState)> {
    let graph = Mutex::new(None);
    let out = load(&|| *graph.lock() = Some(communities::load_graph_state(db, true)))?;
    let graph = graph.into_inner().unwrap_or_else(|| communities::load_graph_state(db, true))?;
    Ok((out, graph))
}

/// The catalog, BM25 and vector indexes of every space, read in one database snapshot (the catalog and lexicon
/// from the index snapshot file `snapshot` when it matches, [`super::snapshot`]), and the change-feed `seq` of
/// that database snapshot (0 on a redb file).
///
/// The load has two sides that run at once: the graphs and vectors, and the catalog and lexicon. `extra` (the
/// caller's other work: the PageRank table) runs once, on whichever side finishes first, so that on two cores
/// the largest two jobs start at once and the smallest follows the one that ends first (longest processing
/// time first, Graham 1969). Neither fixed order balances every store: at 1,000,000 memories the vectors take
/// about 3 s, the catalog and lexicon 1.3 s for plain memories but about 4 s in threads, whose expanded
/// postings are three times the lexicon. It does not run when the load fails before either side ends.
#[allow(clippy::too_many_arguments)]
pub(crate) fn load_index_state(
    db: &Db,
    dim: usize,
    vector: crate::index::vector::VectorParams,
    context_window: usize,
    graph_files: &graph_files::GraphFiles,
    snapshot: Option<&std::path::Path>,
    extra: &(dyn Fn() + Sync),
) -> Result<(IndexState, u64)> {
    let new_space_index = || SpaceIndex::empty(dim, vector, context_window);
    let started = Instant::now();
    let lap = |phase: &str| tracing::debug!(phase, ms = started.elapsed().as_secs_f64() * 1000.0, "index load");
    let rtx = db.read()?;
    let head = rtx.change_head()?;
    // A daemon's own snapshot on a shared database is used when the feed still holds every entry after it.
    let pruned = if db.shared() && snapshot.is_some_and(std::path::Path::exists) {
        db.changes_since(head, 0)?.pruned
    } else {
        0
    };
    let mut names = Vec::new();
    for row in space::spaces(&rtx)?.iter()? {
        names.push(row?.0.value().to_string());
    }
    let fresh = || -> HashMap<String, SpaceIndex> { names.iter().map(|n| (n.clone(), new_space_index())).collect() };
    // The catalog and lexicon on one side, the graphs and vectors on the other: independent until the
    // vectors are checked against the catalog below (on PostgreSQL both sides read one snapshot, in turn).
    let started_extra = std::sync::atomic::AtomicBool::new(false);
    let then_extra = || {
        if !started_extra.swap(true, std::sync::atomic::Ordering::AcqRel) {
            extra();
            lap("extra");
        }
    };
    let (vectors, lexical) = rayon::join(
        || {
            let vectors = load_vectors(db, &rtx, fresh(), dim, graph_files, &new_space_index, &lap);
            then_extra();
            vectors
        },
        || -> Result<(HashMap<String, SpaceIndex>, Option<u64>)> {
            let mut state = IndexState { spaces: fresh() };
            let (saved, position) = match snapshot {
                Some(file) if !db.shared() => {
                    let token = meta::meta(&rtx)?.u64(super::snapshot::TOKEN_KEY)?;
                    (super::snapshot::load(file, token, &graph_files.side), None)
                }
                Some(file) => match super::snapshot::load_shared(file, pruned, head) {
                    Some((spaces, position)) => (Some(spaces), Some(position)),
                    None => (None, None),
                },
                None => (None, None),
            };
            if let Some(spaces) = saved {
                for s in spaces {
                    let si = state.spaces.entry(s.name).or_insert_with(new_space_index);
                    (si.catalog, si.lexicon) = (s.catalog, s.lexicon);
                    // Kept only for the window this store is opened with; otherwise built below.
                    si.expanded = s.expanded.filter(|x| x.window() == context_window);
                }
                lap("snapshot");
            } else {
                load_lexical(&rtx, &mut state, &new_space_index)?;
            }
            for si in state.spaces.values_mut() {
                si.refresh_expanded();
            }
            lap("expanded postings");
            then_extra();
            Ok((state.spaces, position))
        },
    );
    let (spaces, position) = lexical?;
    let mut state = IndexState { spaces };
    for (name, (vsi, loaded)) in vectors? {
        let Some(si) = state.spaces.get_mut(&name) else { continue };
        si.vectors = vsi.vectors;
        for docno in loaded.into_iter().filter(|d| si.catalog.get(*d).is_none()) {
            si.vectors.remove(docno);
        }
    }
    lap("joined");
    // From a daemon's snapshot, the catalog and lexicon are at its position: the caller catches up from there
    // (the vectors, read at `head`, take the same entries again: each sets or removes one vector, so applying
    // them to a later state ends in the same one).
    Ok((state, position.unwrap_or(head)))
}

/// The vectors of every space (`spaces`, more if the table holds others), with their saved graphs attached, and
/// the document numbers loaded per space.
fn load_vectors(
    db: &Db,
    rtx: &crate::storage::ReadTx,
    mut spaces: HashMap<String, SpaceIndex>,
    dim: usize,
    graph_files: &graph_files::GraphFiles,
    new_space_index: &dyn Fn() -> SpaceIndex,
    lap: &dyn Fn(&str),
) -> Result<HashMap<String, (SpaceIndex, Vec<u64>)>> {
    // Saved graphs first, so that each vector is read straight into its graph or the arena: one copy.
    graph_files.stage_all(db, &mut spaces);
    lap("graphs staged");
    let mut loaded: HashMap<String, Vec<u64>> = HashMap::new();
    // On an encrypted store, a read-ahead of the rows the scan reads next (their pages decrypted into the page
    // cache) waits for a free core: the catalog side's, once it is done.
    let scan = memory::VectorScan::default();
    let read_ahead = graph_files.side.sealed().then(|| db.read().ok()).flatten();
    let mut scanned = Ok(());
    rayon::in_place_scope(|s| {
        if let Some(ahead) = &read_ahead {
            let scan = &scan;
            s.spawn(move |_| {
                memory::read_vectors_ahead(ahead, scan, READ_AHEAD_ROWS);
            });
        }
        // The scan reports its position only when a read-ahead follows it.
        let follow = read_ahead.is_some().then_some(&scan);
        scanned = scan_vectors(rtx, follow, dim, new_space_index, &mut spaces, &mut loaded);
        scan.finish();
    });
    scanned?;
    lap("vectors");
    graph_files.finish_all(&mut spaces);
    lap("graphs attached");
    Ok(spaces
        .into_iter()
        .map(|(n, si)| {
            let l = loaded.remove(&n).unwrap_or_default();
            (n, (si, l))
        })
        .collect())
}

/// How far (in vector records, about 770 bytes each at 256 dimensions) the read-ahead of an encrypted store's
/// vectors runs ahead of the scan: 8,192 rows, about 6 MB of pages, well inside the page cache.
const READ_AHEAD_ROWS: u64 = 8192;

/// Reads every stored vector into its space's index (`spaces`, a new one for a space not in it), straight into
/// its graph slot or the arena (no allocation per vector), recording each document number read in `loaded`
/// and each row in `scan` (when a read-ahead follows it).
///
/// # Errors
/// Storage errors.
fn scan_vectors(
    rtx: &crate::storage::ReadTx,
    scan: Option<&memory::VectorScan>,
    dim: usize,
    new_space_index: &dyn Fn() -> SpaceIndex,
    spaces: &mut HashMap<String, SpaceIndex>,
    loaded: &mut HashMap<String, Vec<u64>>,
) -> Result<()> {
    let mut current: Option<(String, SpaceIndex, Vec<u64>)> = None;
    memory::each_vector(rtx, |space, docno, v| {
        if let Some(scan) = scan {
            scan.passed(space, docno);
        }
        if current.as_ref().is_none_or(|(s, _, _)| s != space) {
            if let Some((s, si, l)) = current.take() {
                spaces.insert(s.clone(), si);
                loaded.insert(s, l);
            }
            let si = spaces.remove(space).unwrap_or_else(new_space_index);
            let l = loaded.remove(space).unwrap_or_default();
            current = Some((space.to_string(), si, l));
        }
        let Some((_, si, l)) = current.as_mut() else { return };
        let mut read = false;
        si.vectors.insert_loaded(docno, |slot| {
            read = slot.len() == dim && v.decode_into(slot);
            read
        });
        if read {
            l.push(docno);
        }
    })?;
    if let Some((s, si, l)) = current.take() {
        spaces.insert(s.clone(), si);
        loaded.insert(s, l);
    }
    Ok(())
}

impl KnowledgeStore {
    /// Allocates `n` consecutive document numbers inside `txn`.
    pub(crate) fn alloc_docnos(txn: &crate::storage::WriteTx, n: u64) -> Result<u64> {
        let mut meta = meta::meta(txn)?;
        let next = meta.u64("next_docno")?.unwrap_or(1);
        meta.put_u64("next_docno", next + n)?;
        Ok(next)
    }
}

#[cfg(test)]
mod tests {
    use crate::{KnowledgeStore, NewMemory, StoreConfig};

    /// The read-ahead of the vector scan runs up to its window ahead of the scan, no further, and ends with
    /// it. No timing is asserted: the scan waits (for as long as it takes) until the read-ahead reports that
    /// it reached its window.
    #[test]
    fn the_vector_read_ahead_keeps_to_its_window_and_ends_with_the_scan() {
        use crate::store::records::memory;
        let dir = tempfile::tempdir().unwrap();
        let store = KnowledgeStore::open(StoreConfig::new(dir.path())).unwrap();
        let items: Vec<NewMemory> = (0..3000)
            .map(|k| NewMemory { content: format!("note {k} about pears and apples"), ..Default::default() })
            .collect();
        store.create_memories(items).unwrap();
        let rtx = store.db.read().unwrap();
        let scan = memory::VectorScan::default();
        let (rows, farthest) = std::thread::scope(|s| {
            let ahead = s.spawn(|| memory::read_vectors_ahead(&rtx, &scan, 512));
            let mut rows = 0u64;
            memory::each_vector(&rtx, |space, docno, _| {
                scan.passed(space, docno);
                rows += 1;
                // At rows 256 and 1,024, wait until the read-ahead stands 448 or more rows ahead (it checks
                // its lead every 64 rows, so it stops between 448 and 576 ahead).
                if rows == 256 || rows == 1024 {
                    while scan.ahead() < rows + 448 {
                        std::thread::yield_now();
                    }
                }
            })
            .unwrap();
            scan.finish();
            (rows, ahead.join().unwrap())
        });
        assert_eq!(rows, 3000);
        assert!((448..=512 + 64).contains(&farthest), "ran {farthest} rows ahead");
    }

    /// A reopened store of threads reads its expanded postings from the index snapshot with the own texts
    /// encoded; [`KnowledgeStore::wait_for_indexes`] returns only once the background thread decoded them.
    #[test]
    fn waiting_for_the_indexes_waits_for_the_own_texts_an_open_decodes() {
        let dir = tempfile::tempdir().unwrap();
        let items: Vec<NewMemory> = (0..300)
            .map(|k| {
                let at = (k % 10) as f64;
                NewMemory {
                    id: Some(format!("m{k}")),
                    content: format!("message {k} of thread {} about apples and pears", k / 10),
                    source_thread_id: Some(format!("t{}", k / 10)),
                    source_range: Some([("start_index".to_string(), at), ("end_index".to_string(), at)].into()),
                    ..Default::default()
                }
            })
            .collect();
        {
            let store = KnowledgeStore::open(StoreConfig::new(dir.path())).unwrap();
            store.create_memories(items).unwrap();
        }
        let store = KnowledgeStore::open(StoreConfig::new(dir.path())).unwrap();
        assert!(store.wait_for_indexes(std::time::Duration::from_secs(60)));
        assert!(store.own_texts_decode.lock().as_ref().is_some_and(|t| t.is_finished()), "the thread ran");
        let state = store.index.read();
        let x = state.spaces["default"].expanded.as_ref().expect("a space of threads has expanded postings");
        assert!(x.encoded_own().is_none(), "decoded");
        assert!(!x.is_damaged());
        assert!(x.postings() > 300);
    }
}
