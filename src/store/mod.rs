//! [`KnowledgeStore`]: the facade over one redb file. The only module that touches redb.
//!
//! Every public mutating call is one write transaction. The in-memory indexes (catalog and vectors) are
//! updated after the commit succeeds, under the index write lock, so a failed commit leaves them untouched
//! and a search never sees a document that is not committed.

mod communities;
mod entities;
mod export;
mod graph_files;
mod label_maint;
mod labels;
mod lifecycle;
mod memories;
mod reembed;
mod relations;
mod reviews;
pub(crate) mod schema;
mod search;
mod sources;
mod spaces;
pub(crate) mod tables;
mod threads;
mod transfer;
mod types;
mod wiki;
mod worker;
mod working;

pub use communities::{Community, CommunityEntity, CommunityMemory, GraphReport, crystal_id};
pub use entities::{MentionReport, entity_id};
pub use export::{ExportCounts, ExportKind, ExportParams};
pub use label_maint::{
    AffectedCounts, ConsolidationGroup, ConsolidationPreview, ConsolidationReport, JudgedPair, LabelDeleteReport,
    LabelHealth, LabelMerge, LabelPatch, LabelPlan, MergeCandidate, canonical_label,
};
pub use lifecycle::{StateChange, Transition};
pub use reembed::ReembedStatus;
pub use relations::{MemoryRelation, RELATION_STATUSES, RelationInput, RelationQuery, RelationView};
pub use reviews::{ACTIONS as REVIEW_ACTIONS, Resolution, ReviewEvent};
pub use sources::{
    ChunkHit, IngestReport, MAX_SOURCE_BYTES, NewSource, SourceChunks, SourceContent, SourceHit, SourceQuery,
};
pub use spaces::{MAX_BULK_MOVE, space_slug};
pub use threads::{
    AppendMessages, AppendReport, CreatedThread, Extraction, NewMessage, NewThread, PER_MESSAGE, ThreadDeleteReport,
    ThreadMatch, thread_memory_prefix,
};
pub use transfer::{
    EXPORT_FORMAT, EXPORT_VERSION, ExportOptions, ExportReport, ImportJob, ImportMode, ImportProgress, ImportReport,
    Include, KindCounts, Manifest, ManifestEntry,
};
pub use types::{
    CheckpointReport, ContextItem, CreatedMemory, DeleteReport, LabelOrder, Labels, LexicalIndexStats, ListQuery,
    MAX_CONTEXT_WINDOW, MemoryPatch, MemoryView, MoveFailure, MoveReport, MoveSelection, NewMemory, NewSpace, Page,
    SearchHit, SearchMode, SearchOptions, SearchQuery, SearchResults, SpacePatch, StorageStats, StoreHealth, TableSize,
    VectorIndexStats, WriteAction,
};
pub use wiki::{Linker, RouteLinker, encode_segment, link, md_label, memory_line, sentence_with, yaml_str};
pub use working::{StoreStats, WorkingMemory, today as working_today};

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Instant;

use parking_lot::{Mutex, RwLock};
use redb::{ReadableDatabase, ReadableTable, ReadableTableMetadata};

use crate::config::{Durability, StoreConfig};
use crate::error::{Error, ErrorKind, Result};
use crate::index::catalog::{DocMeta, SpaceCatalog};
use crate::index::lexicon::Lexicon;
use crate::index::vector::{Graph, GraphWork, SpaceVectors};
use crate::model::{Memory, Space, SpaceUsage, Timestamp};
use tables::*;

/// The id of the space that always exists.
pub const DEFAULT_SPACE: &str = "default";

/// A stored memory: its document number (the id of its current text in the indexes) and the record.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(crate) struct StoredMemory {
    pub docno: u64,
    pub memory: Memory,
}

/// Moves aside a store file whose creation was cut short. redb writes its magic number (the first 9 bytes) last
/// when it creates a file, after the empty structure is on disk; a crash or I/O error before that leaves a file
/// that starts with zeros, never held a commit, and that redb refuses to open ("not a redb database") for ever.
/// Such a file is renamed to `engram.redb.incomplete-<unix ms>` (kept, never deleted) so that the store can be
/// created again. A file starting with anything else is left alone.
fn discard_unborn_file(path: &std::path::Path) -> Result<()> {
    use std::io::Read;
    let Ok(mut f) = std::fs::File::open(path) else { return Ok(()) };
    let mut head = [0u8; 9];
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

/// A storage backend chosen at run time ([`crate::config::StoreConfig::storage`]).
#[derive(Debug)]
struct BoxedBackend(Box<dyn redb::StorageBackend>);

impl redb::StorageBackend for BoxedBackend {
    fn len(&self) -> std::io::Result<u64> {
        self.0.len()
    }
    fn read(&self, offset: u64, out: &mut [u8]) -> std::io::Result<()> {
        self.0.read(offset, out)
    }
    fn set_len(&self, len: u64) -> std::io::Result<()> {
        self.0.set_len(len)
    }
    fn sync_data(&self) -> std::io::Result<()> {
        self.0.sync_data()
    }
    fn write(&self, offset: u64, data: &[u8]) -> std::io::Result<()> {
        self.0.write(offset, data)
    }
    fn close(&self) -> std::io::Result<()> {
        self.0.close()
    }
    fn try_lock_range(
        &self,
        start: std::ops::Bound<u64>,
        end: std::ops::Bound<u64>,
    ) -> std::result::Result<bool, redb::BackendError> {
        self.0.try_lock_range(start, end)
    }
    fn try_lock_shared_range(
        &self,
        start: std::ops::Bound<u64>,
        end: std::ops::Bound<u64>,
    ) -> std::result::Result<bool, redb::BackendError> {
        self.0.try_lock_shared_range(start, end)
    }
    fn lock_range(
        &self,
        start: std::ops::Bound<u64>,
        end: std::ops::Bound<u64>,
    ) -> std::result::Result<(), redb::BackendError> {
        self.0.lock_range(start, end)
    }
    fn lock_shared_range(
        &self,
        start: std::ops::Bound<u64>,
        end: std::ops::Bound<u64>,
    ) -> std::result::Result<(), redb::BackendError> {
        self.0.lock_shared_range(start, end)
    }
}

/// Indexes of one space.
pub(crate) struct SpaceIndex {
    pub catalog: SpaceCatalog,
    pub lexicon: Lexicon,
    pub vectors: SpaceVectors,
    /// Total length of the context-expanded collection for a window ([`crate::index::context`]), computed on
    /// the first search after a change.
    pub expanded_len: Mutex<Option<(usize, u64)>>,
}

impl SpaceIndex {
    /// An empty index with vectors of `dim` dimensions.
    pub(crate) fn empty(dim: usize, vector: crate::index::vector::VectorParams) -> Self {
        SpaceIndex {
            catalog: SpaceCatalog::default(),
            lexicon: Lexicon::default(),
            vectors: SpaceVectors::new(dim, vector),
            expanded_len: Mutex::new(None),
        }
    }

    /// Average length of the context-expanded collection with `window` neighbours on each side.
    pub(crate) fn expanded_avg_len(&self, window: usize) -> f32 {
        let mut cache = self.expanded_len.lock();
        let total = match *cache {
            Some((w, t)) if w == window => t,
            _ => {
                let t = crate::index::context::expanded_total_len(&self.catalog, &self.lexicon, window);
                *cache = Some((window, t));
                t
            }
        };
        if self.lexicon.docs == 0 { 1.0 } else { total as f32 / self.lexicon.docs as f32 }
    }
}

/// The analysed text of a document: distinct terms with frequencies, and its length in terms.
pub(crate) struct LexEntry {
    pub terms: Vec<(String, u32)>,
    pub len: u32,
}

/// All derived in-memory state.
pub(crate) struct IndexState {
    pub spaces: HashMap<String, SpaceIndex>,
}

/// A change to apply to the in-memory indexes once its transaction has committed. `lex` is Some when the
/// document's postings changed; `vector` is Some when its vector did.
pub(crate) enum IndexOp {
    Remove { space: String, docno: u64, lex: Option<LexEntry> },
    Put { space: String, docno: u64, meta: DocMeta, vector: Option<Vec<f32>>, lex: Option<LexEntry> },
}

impl IndexOp {
    /// The catalog entry of a stored memory changed (state, labels, counters); its text and vector did not.
    pub(crate) fn meta(space: &str, sm: &StoredMemory, labels: BTreeSet<String>) -> Self {
        IndexOp::Put {
            space: space.to_string(),
            docno: sm.docno,
            meta: DocMeta::of(&sm.memory, labels),
            vector: None,
            lex: None,
        }
    }
}

/// A knowledge store over `<data_dir>/engram.redb`.
///
/// May be used from several threads at once (`Send + Sync`): reads run in parallel, writes are serialised.
/// redb locks the file for one process: a second open, by the daemon or another program, fails with
/// [`ErrorKind::Locked`].
pub struct KnowledgeStore {
    pub(crate) db: Arc<redb::Database>,
    pub(crate) config: StoreConfig,
    pub(crate) writer: Arc<Mutex<()>>,
    pub(crate) index: Arc<RwLock<IndexState>>,
    pub(crate) started: Instant,
    reembed_progress: Arc<reembed::Progress>,
    /// Write generation at the last checkpoint.
    durable_generation: std::sync::atomic::AtomicU64,
    /// Access-count commits (without fsync) since the last checkpoint.
    pub(crate) pending_access: std::sync::atomic::AtomicU64,
    /// Reads by id not yet counted in the file: memory id -> (reads, latest read). Counted by the next read that
    /// finds the writer free, a checkpoint, or closing the store.
    pub(crate) access_queue: Mutex<HashMap<String, (i64, Timestamp)>>,
    /// Label name -> embedding, for merge candidates (cleared past 20,000 names).
    label_vector_cache: Mutex<HashMap<String, Vec<f32>>>,
    /// BM25 over source chunks, per space, built on the first search and dropped when the space's sources change.
    pub(crate) chunk_index: RwLock<HashMap<String, Arc<sources::ChunkIndex>>>,
    /// Data import jobs.
    pub(crate) jobs: transfer::Jobs,
    /// Communities and PageRank results.
    pub(crate) graph: Arc<RwLock<communities::GraphState>>,
    /// Recomputes them once writes pause. Declared first among the workers: dropped (stopped) first.
    graph_worker: worker::Worker,
    // Declared before `builder`: dropped (stopped and joined) first, as it wakes the builder.
    reembed: Mutex<Option<worker::Worker>>,
    builder: worker::Worker,
    /// Saved HNSW graphs.
    graph_files: graph_files::GraphFiles,
}

/// Starts the background thread that builds and catches up HNSW graphs, off the write and search paths.
fn start_graph_builder(
    index: Arc<RwLock<IndexState>>,
    vector: crate::index::vector::VectorParams,
    db: Arc<redb::Database>,
    files: graph_files::GraphFiles,
) -> worker::Worker {
    worker::Worker::spawn("engram-graph", move |c| {
        while !c.stopped() {
            let work: Vec<(String, GraphWork)> = {
                let state = index.read();
                state.spaces.iter().filter_map(|(n, si)| si.vectors.plan().map(|w| (n.clone(), w))).collect()
            };
            if work.is_empty() {
                c.wait(std::time::Duration::from_millis(500));
                continue;
            }
            for (space, w) in work {
                match w {
                    GraphWork::Build(snapshot) => {
                        let started = Instant::now();
                        let ids = snapshot.docnos.clone();
                        let built = Graph::build(vector, snapshot, &|| c.stopped());
                        let mut state = index.write();
                        let Some(si) = state.spaces.get_mut(&space) else { continue };
                        match built {
                            Some(g) => {
                                si.vectors.install(g, &ids);
                                tracing::info!(
                                    space,
                                    points = ids.len(),
                                    secs = started.elapsed().as_secs_f64(),
                                    "HNSW graph built"
                                );
                            }
                            None => {
                                si.vectors.abandon();
                                continue;
                            }
                        }
                        // Saved after every full build, under a read lock (searches go on).
                        let state = parking_lot::RwLockWriteGuard::downgrade(state);
                        if let Some(si) = state.spaces.get(&space) {
                            files.save(&db, &space, si);
                        }
                    }
                    GraphWork::Insert(g, items) => {
                        let points = g.insert(&items);
                        let ids: Vec<(u64, u32)> = items.iter().map(|x| x.0).zip(points).collect();
                        if let Some(si) = index.write().spaces.get_mut(&space) {
                            si.vectors.mark_inserted(&g, &ids);
                        }
                    }
                }
            }
        }
    })
}

/// Files smaller than this are never compacted at close.
const COMPACT_MIN_BYTES: u64 = 16 << 20;

/// Compacts the file at close when more than a quarter of it is free pages (bulk loads and big deletes leave
/// them; redb reuses them, but the file only shrinks by compaction). Errors are logged: the store stays valid.
fn compact_if_sparse(db: &mut redb::Database, path: &std::path::Path) {
    let before = std::fs::metadata(path).map_or(0, |m| m.len());
    if before < COMPACT_MIN_BYTES {
        return;
    }
    let used = (|| -> Result<u64> {
        let w = db.begin_write()?;
        let st = w.stats()?;
        w.abort()?;
        Ok(st.allocated_pages() * st.page_size() as u64)
    })();
    let Ok(used) = used else { return };
    if used.saturating_mul(4) >= before.saturating_mul(3) {
        return;
    }
    let started = Instant::now();
    for _ in 0..8 {
        match db.compact() {
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
        // Reads still queued are counted before the store closes.
        {
            let _w = self.writer.lock();
            if let Err(e) = self.flush_access() {
                tracing::warn!(error = %e, "counting the last reads failed");
            }
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
        if let Some(db) = Arc::get_mut(&mut self.db) {
            compact_if_sparse(db, &self.config.db_path());
        }
    }
}

impl std::fmt::Debug for KnowledgeStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KnowledgeStore").field("config", &self.config).finish()
    }
}

pub(crate) fn meta_u64(t: &impl ReadableTable<&'static str, &'static [u8]>, key: &str) -> Result<Option<u64>> {
    Ok(t.get(key)?.and_then(|v| v.value().try_into().ok().map(u64::from_le_bytes)))
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
    /// * [`ErrorKind::Locked`]: another process has the store open.
    /// * [`ErrorKind::Corrupt`]: the file is from a newer format or damaged.
    /// * [`ErrorKind::Io`]: the directory or file cannot be created or read.
    pub fn open(config: StoreConfig) -> Result<Self> {
        std::fs::create_dir_all(&config.data_dir)?;
        discard_unborn_file(&config.db_path())?;
        let mut builder = redb::Builder::new();
        builder.set_cache_size(config.cache_size_bytes);
        let db = Arc::new(match &config.storage {
            Some(open) => builder.create_with_backend(BoxedBackend(open(&config.db_path())?))?,
            None => builder.create(config.db_path())?,
        });
        let index = Arc::new(RwLock::new(IndexState { spaces: HashMap::new() }));
        let graph_files = graph_files::GraphFiles::new(&config.data_dir, config.embedder.name());
        let builder = start_graph_builder(index.clone(), config.vector, db.clone(), graph_files.clone());
        let writer = Arc::new(Mutex::new(()));
        let graph = Arc::new(RwLock::new(communities::GraphState::default()));
        let hnsw = builder.control();
        let graph_worker = communities::start_worker(communities::Ctx {
            db: db.clone(),
            writer: writer.clone(),
            graph: graph.clone(),
            embedder: config.embedder.clone(),
            index: index.clone(),
            vector: config.vector,
            durability: config.durability,
            wake_hnsw: Arc::new(move || hnsw.wake()),
        });
        let store = KnowledgeStore {
            db,
            config,
            writer,
            index,
            started: Instant::now(),
            reembed_progress: Arc::default(),
            label_vector_cache: Mutex::default(),
            chunk_index: RwLock::default(),
            jobs: transfer::Jobs::default(),
            durable_generation: Default::default(),
            pending_access: Default::default(),
            access_queue: Default::default(),
            graph,
            graph_worker,
            reembed: Mutex::new(None),
            builder,
            graph_files,
        };
        store.init_schema()?;
        {
            let rtx = store.db.begin_read()?;
            let g = meta_u64(&rtx.open_table(META)?, "generation")?.unwrap_or(0);
            store.durable_generation.store(g, std::sync::atomic::Ordering::Release);
        }
        store.check_embedder()?;
        store.load_indexes()?;
        store.graph.write().memory_rank = communities::load_ranks(&store.db)?;
        store.builder.wake();
        store.graph_worker.wake();
        store.start_reembedding();
        Ok(store)
    }

    /// Starts the background re-embedding of memories without a vector, if there are any.
    fn start_reembedding(&self) {
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
            writer: self.writer.clone(),
            index: self.index.clone(),
            embedder: self.config.embedder.clone(),
            durability: self.config.durability,
            wake_graphs: Arc::new(move || hnsw.wake()),
        };
        *self.reembed.lock() = Some(reembed::start(ctx, work, self.reembed_progress.clone()));
    }

    /// The state of background re-embedding.
    pub fn reembed_status(&self) -> ReembedStatus {
        self.reembed_progress.status()
    }

    /// The configuration the store was opened with.
    pub fn config(&self) -> &StoreConfig {
        &self.config
    }

    /// Seconds since the store was opened.
    pub fn uptime_s(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }

    fn init_schema(&self) -> Result<()> {
        let txn = self.db.begin_write()?;
        {
            let mut meta = txn.open_table(META)?;
            let found = meta.get("format_version")?.map(|v| v.value().to_vec());
            match found {
                Some(v) => {
                    let found = v.try_into().map(u32::from_le_bytes).unwrap_or(u32::MAX);
                    if found > schema::FORMAT_VERSION {
                        return Err(Error::new(
                            ErrorKind::Corrupt,
                            format!(
                                "store format {found} is newer than this release supports ({})",
                                schema::FORMAT_VERSION
                            ),
                        ));
                    }
                }
                None => {
                    meta.insert("format_version", schema::FORMAT_VERSION.to_le_bytes().as_slice())?;
                }
            }
            // Creating every table up front lets readers open them without a write.
            txn.open_table(MEMORIES)?;
            txn.open_table(MEMORY_SPACE)?;
            txn.open_table(VECTORS)?;
            txn.open_table(POSTINGS)?;
            txn.open_table(LEX_STATS)?;
            txn.open_table(LABELS)?;
            txn.open_table(MEMORY_LABELS)?;
            txn.open_table(LABEL_MEMORIES)?;
            txn.open_table(THREADS)?;
            txn.open_table(THREAD_SPACES)?;
            txn.open_table(MESSAGES)?;
            txn.open_table(MESSAGE_KEYS)?;
            txn.open_table(ENTITIES)?;
            txn.open_table(ENTITY_KEYS)?;
            txn.open_table(MENTIONS)?;
            txn.open_table(ENTITY_MEMORIES)?;
            txn.open_table(RELATES_TO)?;
            txn.open_table(WORKING_MEMORY)?;
            txn.open_table(REVIEWS)?;
            txn.open_table(RELATIONS)?;
            txn.open_table(MEMORY_RELATIONS)?;
            txn.open_table(RELATION_SPACE)?;
            txn.open_table(LABEL_MERGES)?;
            txn.open_table(COMMUNITIES)?;
            txn.open_table(COMMUNITY_MEMBERS)?;
            txn.open_table(ENTITY_COMMUNITY)?;
            txn.open_table(MEMORY_PAGERANK)?;
            txn.open_table(CRYSTAL_SOURCES)?;
            txn.open_table(SOURCES)?;
            txn.open_table(SOURCE_SPACE)?;
            txn.open_table(SOURCE_SHA)?;
            txn.open_table(SOURCE_TEXT)?;
            txn.open_table(SOURCE_FILES)?;
            txn.open_table(SOURCE_CHUNKS)?;
            let mut spaces = txn.open_table(SPACES)?;
            if spaces.get(DEFAULT_SPACE)?.is_none() {
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
                spaces.insert(DEFAULT_SPACE, schema::encode(&s)?.as_slice())?;
            }
        }
        txn.commit()?;
        Ok(())
    }

    /// Records the configured embedder. When the stored vectors came from another embedder or dimension,
    /// drops them and marks every memory `reindex_needed` in the same transaction, so that one index never
    /// mixes vectors of two models; the background run started by [`KnowledgeStore::open`] re-embeds them.
    fn check_embedder(&self) -> Result<()> {
        let emb = &self.config.embedder;
        let want = format!("{}:{}", emb.name(), emb.dim());
        let rtx = self.db.begin_read()?;
        let have = rtx.open_table(META)?.get("embedder")?.map(|v| String::from_utf8_lossy(v.value()).into_owned());
        drop(rtx);
        if have.as_deref() == Some(want.as_str()) {
            return Ok(());
        }
        let _w = self.writer.lock();
        let marked = self.write_txn(|txn| {
            txn.open_table(VECTORS)?.retain(|_, _| false)?;
            let mut mems = txn.open_table(MEMORIES)?;
            let mut marked = 0u64;
            // In chunks, so that a large store is not held in memory at once.
            let mut after: Option<(String, String)> = None;
            loop {
                let mut chunk: Vec<((String, String), Vec<u8>)> = Vec::with_capacity(1024);
                {
                    let range = match &after {
                        Some((s, i)) => mems.range((s.as_str(), i.as_str())..)?,
                        None => mems.iter()?,
                    };
                    for row in range {
                        let (k, v) = row?;
                        let (space, id) = k.value();
                        if after.as_ref().is_some_and(|(s, i)| s == space && i == id) {
                            continue;
                        }
                        let mut sm: StoredMemory = schema::decode(v.value())?;
                        sm.memory.reindex_needed = true;
                        chunk.push(((space.to_string(), id.to_string()), schema::encode(&sm)?));
                        if chunk.len() == 1024 {
                            break;
                        }
                    }
                }
                let Some(last) = chunk.last().map(|c| c.0.clone()) else { break };
                for ((space, id), bytes) in &chunk {
                    mems.insert((space.as_str(), id.as_str()), bytes.as_slice())?;
                }
                marked += chunk.len() as u64;
                after = Some(last);
            }
            txn.open_table(META)?.insert("embedder", want.as_bytes())?;
            Ok(marked)
        })?;
        if marked > 0 {
            tracing::info!(from = ?have, to = %want, memories = marked, "embedder changed: old vectors dropped");
            *self.reembed_progress.from.lock() = have;
        }
        Ok(())
    }

    /// Builds the catalog and vector indexes of every space from the file.
    fn load_indexes(&self) -> Result<()> {
        let rtx = self.db.begin_read()?;
        let mut state = IndexState { spaces: HashMap::new() };
        let dim = self.config.embedder.dim();
        for row in rtx.open_table(SPACES)?.iter()? {
            let (k, _) = row?;
            state.spaces.insert(k.value().to_string(), self.new_space_index());
        }
        let mut labels: HashMap<(String, String), BTreeSet<String>> = HashMap::new();
        for row in rtx.open_table(MEMORY_LABELS)?.iter()? {
            let (k, _) = row?;
            let (s, m, l) = k.value();
            labels.entry((s.to_string(), m.to_string())).or_default().insert(l.to_string());
        }
        for row in rtx.open_table(MEMORIES)?.iter()? {
            let (k, v) = row?;
            let (space, id) = k.value();
            let sm: StoredMemory = schema::decode(v.value())?;
            let l = labels.remove(&(space.to_string(), id.to_string())).unwrap_or_default();
            let si = state.spaces.entry(space.to_string()).or_insert_with(|| self.new_space_index());
            si.catalog.insert(sm.docno, DocMeta::of(&sm.memory, l));
        }
        for row in rtx.open_table(POSTINGS)?.iter()? {
            let (k, v) = row?;
            let (space, term, docno) = k.value();
            if let Some(si) = state.spaces.get_mut(space) {
                si.lexicon.load(term, crate::index::bm25::Posting::unpack(docno, v.value()));
            }
        }
        for row in rtx.open_table(LEX_STATS)?.iter()? {
            let (k, v) = row?;
            if let Some(si) = state.spaces.get_mut(k.value()) {
                (si.lexicon.docs, si.lexicon.total_len) = v.value();
            }
        }
        for si in state.spaces.values_mut() {
            si.lexicon.finish_load();
        }
        // Saved graphs first, so that each vector is read straight into its graph or the arena: one copy.
        self.graph_files.stage_all(&self.db, &mut state.spaces);
        let mut current: Option<(String, &mut SpaceIndex)> = None;
        let mut others = state.spaces.iter_mut().map(|(k, v)| (k.clone(), v)).collect::<HashMap<_, _>>();
        for row in rtx.open_table(VECTORS)?.iter()? {
            let (k, v) = row?;
            let (space, docno) = k.value();
            if current.as_ref().is_none_or(|(s, _)| s != space) {
                if let Some((s, si)) = current.take() {
                    others.insert(s, si);
                }
                current = others.remove(space).map(|si| (space.to_string(), si));
            }
            let Some((_, si)) = current.as_mut() else { continue };
            if si.catalog.get(docno).is_some() {
                let vec = schema::vector_from_bytes(v.value());
                if vec.len() == dim {
                    si.vectors.insert_loaded(docno, &vec);
                }
            }
        }
        drop(current);
        drop(others);
        drop(rtx);
        self.graph_files.finish_all(&mut state.spaces);
        *self.index.write() = state;
        Ok(())
    }

    pub(crate) fn new_space_index(&self) -> SpaceIndex {
        SpaceIndex::empty(self.config.embedder.dim(), self.config.vector)
    }

    /// Runs `f` in one write transaction and commits it with the configured durability, bumping the write
    /// generation. The caller holds the writer lock. Nothing is written if `f` fails.
    pub(crate) fn write_txn<T>(&self, f: impl FnOnce(&redb::WriteTransaction) -> Result<T>) -> Result<T> {
        write_txn_on(&self.db, self.config.durability, f)
    }

    /// Allocates `n` consecutive document numbers inside `txn`.
    pub(crate) fn alloc_docnos(txn: &redb::WriteTransaction, n: u64) -> Result<u64> {
        let mut meta = txn.open_table(META)?;
        let next = meta_u64(&meta, "next_docno")?.unwrap_or(1);
        meta.insert("next_docno", (next + n).to_le_bytes().as_slice())?;
        Ok(next)
    }

    /// Applies committed changes to the in-memory indexes.
    pub(crate) fn apply(&self, ops: Vec<IndexOp>) {
        apply_ops(&self.index, ops, &|| self.new_space_index());
        self.builder.wake();
        self.graph_worker.wake();
    }

    /// Blocks until every space's vector index is complete (background re-embedding finished, graphs built
    /// where a space is large enough, no vector pending) or `timeout` passes. Searches are exact and complete meanwhile; this only matters for
    /// benchmarks and tests that want the graph path. Returns whether the indexes are complete.
    pub fn wait_for_indexes(&self, timeout: std::time::Duration) -> bool {
        let until = Instant::now() + timeout;
        loop {
            let reembedding = self.reembed_progress.running.load(std::sync::atomic::Ordering::Acquire);
            if !reembedding && !self.index.read().spaces.values().any(|s| s.vectors.needs_work()) {
                return true;
            }
            if Instant::now() >= until {
                return false;
            }
            self.builder.wake();
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    /// Forces a durable commit of everything written so far (useful after [`Durability::Eventual`] writes).
    ///
    /// # Errors
    /// [`ErrorKind::Io`] when the commit fails.
    pub fn checkpoint(&self) -> Result<u64> {
        Ok(self.checkpoint_report()?.generation)
    }

    /// [`KnowledgeStore::checkpoint`] with what it flushed: write transactions committed without fsync since
    /// the last durable commit ([`Durability::Eventual`] only; 0 with the default durability) and access-count
    /// updates (reads by id are always committed without fsync).
    ///
    /// # Errors
    /// [`ErrorKind::Io`] when the commit fails; nothing is lost then, the next checkpoint retries.
    pub fn checkpoint_report(&self) -> Result<CheckpointReport> {
        let started = Instant::now();
        let _w = self.writer.lock();
        self.flush_access()?;
        let txn = self.db.begin_write()?;
        let g = meta_u64(&txn.open_table(META)?, "generation")?.unwrap_or(0);
        txn.commit()?;
        let before = self.durable_generation.swap(g, std::sync::atomic::Ordering::AcqRel);
        let writes = if self.config.durability == Durability::Eventual { g.saturating_sub(before) } else { 0 };
        let reads = self.pending_access.swap(0, std::sync::atomic::Ordering::AcqRel);
        Ok(CheckpointReport {
            generation: g,
            flushed_write_transactions: writes,
            flushed_access_updates: reads,
            elapsed_ms: started.elapsed().as_secs_f64() * 1000.0,
            file_bytes: std::fs::metadata(self.config.db_path()).map(|m| m.len()).unwrap_or(0),
        })
    }

    /// Size of the lexical index: documents, distinct terms and postings over all spaces, and how many memories
    /// have a position in a thread or source.
    pub fn lexical_index_stats(&self) -> LexicalIndexStats {
        let state = self.index.read();
        let mut out = LexicalIndexStats::default();
        for si in state.spaces.values() {
            let (terms, postings) = si.lexicon.size();
            out.documents += si.lexicon.docs;
            out.terms += terms;
            out.postings += postings;
            out.positioned += si.catalog.positioned() as u64;
        }
        out
    }

    /// The vector index of every space, sorted by space name: vectors, graph points, tombstones, pending
    /// vectors and memory held.
    pub fn vector_index_stats(&self) -> Vec<VectorIndexStats> {
        let state = self.index.read();
        let mut out: Vec<VectorIndexStats> = state
            .spaces
            .iter()
            .map(|(name, si)| VectorIndexStats {
                space: name.clone(),
                vectors: si.vectors.len(),
                graph_points: si.vectors.graph_points(),
                tombstones: si.vectors.tombstones(),
                pending: si.vectors.pending(),
                heap_bytes: si.vectors.heap_bytes(),
            })
            .collect();
        out.sort_by(|a, b| a.space.cmp(&b.space));
        out
    }

    /// Bytes on disk by table: what keys and values hold, B-tree metadata and fragmentation (redb's table
    /// statistics), sorted by stored bytes, largest first, plus the file size.
    ///
    /// # Errors
    /// Storage errors.
    pub fn storage_stats(&self) -> Result<StorageStats> {
        use redb::ReadableTableMetadata;
        let rtx = self.db.begin_read()?;
        let mut tables = Vec::new();
        macro_rules! table {
            ($($t:ident),*) => {$({
                let st = rtx.open_table($t)?.stats()?;
                tables.push(TableSize {
                    table: $t.to_string(),
                    stored_bytes: st.stored_bytes(),
                    metadata_bytes: st.metadata_bytes(),
                    fragmented_bytes: st.fragmented_bytes(),
                });
            })*};
        }
        table!(META, SPACES, MEMORIES, MEMORY_SPACE, VECTORS, POSTINGS, LEX_STATS, LABELS, MEMORY_LABELS);
        table!(LABEL_MEMORIES, THREADS, THREAD_SPACES, MESSAGES, MESSAGE_KEYS, ENTITIES, ENTITY_KEYS, MENTIONS);
        table!(ENTITY_MEMORIES, RELATES_TO, WORKING_MEMORY, RELATIONS, MEMORY_RELATIONS, RELATION_SPACE);
        table!(LABEL_MERGES, COMMUNITIES, COMMUNITY_MEMBERS, ENTITY_COMMUNITY, MEMORY_PAGERANK, CRYSTAL_SOURCES);
        table!(SOURCES, SOURCE_SPACE, SOURCE_SHA, SOURCE_TEXT, SOURCE_FILES, SOURCE_CHUNKS, REVIEWS);
        tables.sort_by_key(|t| std::cmp::Reverse(t.stored_bytes));
        let file_bytes = std::fs::metadata(self.config.db_path()).map_or(0, |m| m.len());
        Ok(StorageStats { file_bytes, tables })
    }

    /// Counters for `/health`.
    pub fn health(&self) -> Result<StoreHealth> {
        let rtx = self.db.begin_read()?;
        let meta = rtx.open_table(META)?;
        let generation = meta_u64(&meta, "generation")?.unwrap_or(0);
        let labels = rtx.open_table(LABELS)?.len()? as usize;
        let state = self.index.read();
        let memories = state.spaces.values().map(|s| s.catalog.len()).sum();
        let reindex_pending = if self.config.embedder.external() {
            0
        } else {
            state.spaces.values().map(|s| s.catalog.len().saturating_sub(s.vectors.len())).sum()
        };
        Ok(StoreHealth {
            embedder: self.config.embedder.name().to_string(),
            dim: self.config.embedder.dim(),
            generation,
            memories,
            spaces: state.spaces.len(),
            reindex_pending,
            labels,
            reembed: self.reembed_progress.status(),
        })
    }
}

/// Applies committed changes to the in-memory indexes; `new_index` makes the index of a space seen first.
pub(crate) fn apply_ops(index: &RwLock<IndexState>, ops: Vec<IndexOp>, new_index: &dyn Fn() -> SpaceIndex) {
    let mut state = index.write();
    let mut vec_batches: HashMap<String, Vec<(u64, Vec<f32>)>> = HashMap::new();
    for op in ops {
        match op {
            IndexOp::Remove { space, docno, lex } => {
                if let Some(batch) = vec_batches.get_mut(&space) {
                    batch.retain(|(d, _)| *d != docno);
                }
                if let Some(si) = state.spaces.get_mut(&space) {
                    *si.expanded_len.get_mut() = None;
                    si.catalog.remove(docno);
                    si.vectors.remove(docno);
                    if let Some(l) = lex {
                        let terms: Vec<String> = l.terms.into_iter().map(|t| t.0).collect();
                        si.lexicon.remove(docno, &terms, l.len);
                    }
                }
            }
            IndexOp::Put { space, docno, meta, vector, lex } => {
                let si = state.spaces.entry(space.clone()).or_insert_with(new_index);
                *si.expanded_len.get_mut() = None;
                si.catalog.insert(docno, meta);
                if let Some(l) = lex {
                    si.lexicon.add(docno, &l.terms, l.len);
                }
                if let Some(v) = vector {
                    vec_batches.entry(space).or_default().push((docno, v));
                }
            }
        }
    }
    for (space, batch) in vec_batches {
        if let Some(si) = state.spaces.get_mut(&space) {
            si.vectors.insert_batch(&batch);
        }
    }
}

/// [`KnowledgeStore::write_txn`] on a database handle (for background workers).
pub(crate) fn write_txn_on<T>(
    db: &redb::Database,
    durability: Durability,
    f: impl FnOnce(&redb::WriteTransaction) -> Result<T>,
) -> Result<T> {
    let mut txn = db.begin_write()?;
    if durability == Durability::Eventual {
        txn.set_durability(redb::Durability::None)
            .map_err(|e| Error::new(ErrorKind::Internal, "setting durability failed").with_source(e))?;
    }
    let out = f(&txn)?;
    {
        let mut meta = txn.open_table(META)?;
        let g = meta_u64(&meta, "generation")?.unwrap_or(0) + 1;
        meta.insert("generation", g.to_le_bytes().as_slice())?;
    }
    txn.commit()?;
    Ok(out)
}

/// Iterates the keys of a table with a 2-tuple key whose first part equals `first`.
pub(crate) fn range_prefix2<'a, V: redb::Value + 'static>(
    t: &'a impl ReadableTable<(&'static str, &'static str), V>,
    first: &str,
) -> Result<Vec<(String, redb::AccessGuard<'a, V>)>> {
    let mut out = Vec::new();
    for row in t.range((first, "")..)? {
        let (k, v) = row?;
        let (a, b) = k.value();
        if a != first {
            break;
        }
        out.push((b.to_string(), v));
    }
    Ok(out)
}

/// The third parts of the 3-tuple keys whose first two parts are `(a, b)`.
pub(crate) fn range_prefix3(
    t: &impl ReadableTable<(&'static str, &'static str, &'static str), ()>,
    a: &str,
    b: &str,
) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for row in t.range((a, b, "")..)? {
        let (k, _) = row?;
        let (x, y, z) = k.value();
        if x != a || y != b {
            break;
        }
        out.push(z.to_string());
    }
    Ok(out)
}

/// How many 3-tuple keys have `(a, b)` as their first two parts.
pub(crate) fn range_prefix2_count(
    t: &impl ReadableTable<(&'static str, &'static str, &'static str), ()>,
    a: &str,
    b: &str,
) -> Result<u64> {
    let mut n = 0;
    for row in t.range((a, b, "")..)? {
        let (k, _) = row?;
        let (x, y, _) = k.value();
        if x != a || y != b {
            break;
        }
        n += 1;
    }
    Ok(n)
}

/// Decodes the record stored under `key`, if any.
pub(crate) fn get_record<K: redb::Key + 'static, T: serde::de::DeserializeOwned>(
    t: &impl ReadableTable<K, &'static [u8]>,
    key: K::SelfType<'_>,
) -> Result<Option<T>> {
    match t.get(key)? {
        Some(v) => Ok(Some(schema::decode(v.value())?)),
        None => Ok(None),
    }
}

#[allow(dead_code)]
const _ASSERT_SEND_SYNC: fn() = || {
    fn is<T: Send + Sync>() {}
    is::<KnowledgeStore>();
    is::<Arc<KnowledgeStore>>();
};
