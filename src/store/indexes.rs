//! The derived in-memory state: per space the catalog, the BM25 lexicon and the vectors; the operations a
//! commit applies to them; and the HNSW builder thread.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Instant;

use parking_lot::{Mutex, RwLock};

use super::*;
use crate::index::catalog::SpaceCatalog;
use crate::index::context::{ExpandedIndex, Pending, put_doc_batched, remove_doc_batched};
use crate::index::lexicon::Lexicon;
use crate::index::vector::{Graph, GraphWork, SpaceVectors};

/// Indexes of one space.
pub(crate) struct SpaceIndex {
    pub catalog: SpaceCatalog,
    pub lexicon: Lexicon,
    pub vectors: SpaceVectors,
    /// Total length of the context-expanded collection for a window ([`crate::index::context`]), computed on
    /// the first search after a change (for a window other than the materialised one).
    pub expanded_len: Mutex<Option<(usize, u64)>>,
    /// The materialised context-expanded postings for the store's window, while the space has sequences.
    pub expanded: Option<ExpandedIndex>,
    /// That window.
    pub context_window: usize,
    /// Whether the whole space has sequences, when this index holds only part of it (the part one search
    /// reads in the database index mode, `search_db.rs`); None: ask the catalog.
    pub sequences: Option<bool>,
}

impl SpaceIndex {
    /// An empty index with vectors of `dim` dimensions.
    pub(crate) fn empty(dim: usize, vector: crate::index::vector::VectorParams, context_window: usize) -> Self {
        SpaceIndex {
            catalog: SpaceCatalog::default(),
            lexicon: Lexicon::default(),
            vectors: SpaceVectors::new(dim, vector),
            expanded_len: Mutex::new(None),
            expanded: None,
            context_window,
            sequences: None,
        }
    }

    /// True when some memory of the space has a position in a thread or source.
    pub(crate) fn has_sequences(&self) -> bool {
        self.sequences.unwrap_or_else(|| self.catalog.has_sequences())
    }

    /// Builds the expanded postings when the space has sequences and none are held (or the held ones are
    /// damaged, [`ExpandedIndex::is_damaged`]); drops them when it has none any more.
    pub(crate) fn refresh_expanded(&mut self) {
        let wanted = self.context_window > 0 && self.catalog.has_sequences();
        if self.expanded.as_ref().is_some_and(ExpandedIndex::is_damaged) {
            tracing::warn!(
                "rebuilding context-expanded postings: their own texts in the index snapshot did not decode"
            );
            self.expanded = None;
        }
        if wanted && self.expanded.is_none() {
            let started = Instant::now();
            let x = ExpandedIndex::build(&self.catalog, &self.lexicon, self.context_window);
            tracing::info!(
                postings = x.postings(),
                ms = started.elapsed().as_secs_f64() * 1000.0,
                "context-expanded postings built"
            );
            self.expanded = Some(x);
        } else if !wanted {
            self.expanded = None;
        }
    }

    /// The expanded postings, when `window` is the materialised one.
    pub(crate) fn expanded_for(&self, window: usize) -> Option<&ExpandedIndex> {
        self.expanded.as_ref().filter(|x| x.window() == window)
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

/// All derived in-memory state.
pub(crate) struct IndexState {
    pub spaces: HashMap<String, SpaceIndex>,
}

/// Starts the background thread that builds and catches up HNSW graphs, off the write and search paths.
///
/// Between chunks of 1,024 points the builder waits while a batch of memories is being written (`batches`, see
/// [`Running`]), at most [`BUILD_YIELD`] per chunk: a bulk ingest then has every core, and the graph catches
/// up in the pauses between batches and after the last one (searches meanwhile scan the vectors not yet in the
/// graph exactly). Under constant writes the build still goes on, a chunk per [`BUILD_YIELD`] at least. During
/// a bulk load ([`KnowledgeStore::bulk_load`], `bulk_loads`) it waits until the load ends, as pgvector's index
/// is built after the load: the load has the cores, and the graph is built once over all its vectors.
pub(crate) fn start_graph_builder(
    index: Arc<RwLock<IndexState>>,
    vector: crate::index::vector::VectorParams,
    db: Arc<crate::storage::Db>,
    files: graph_files::GraphFiles,
    batches: Arc<std::sync::atomic::AtomicUsize>,
    bulk_loads: Arc<std::sync::atomic::AtomicUsize>,
) -> worker::Worker {
    worker::Worker::spawn("engram-graph", move |c| {
        let loading = || bulk_loads.load(std::sync::atomic::Ordering::Acquire) > 0;
        // Checked between chunks: waits while a batch is written or a bulk load runs, and says whether to stop.
        let between_chunks = || {
            let since = Instant::now();
            while (loading() || batches.load(std::sync::atomic::Ordering::Acquire) > 0 && since.elapsed() < BUILD_YIELD)
                && !c.stopped()
            {
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            c.stopped()
        };
        while !c.stopped() {
            // Before planning: a plan marks its graphs as being built.
            if loading() {
                c.wait(std::time::Duration::from_millis(500));
                continue;
            }
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
                        let built = Graph::build(vector, snapshot, &between_chunks);
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
                        // Never inside the insert: it holds the graph's write lock, which searches wait for.
                        if between_chunks() {
                            break;
                        }
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

/// Longest wait of the HNSW builder for batch writes, per chunk of points ([`start_graph_builder`]).
pub(crate) const BUILD_YIELD: std::time::Duration = std::time::Duration::from_secs(1);

/// Counts itself in a counter of running operations while it lives (even when the operation fails): a batch
/// of memories being written, which the HNSW builder waits for ([`start_graph_builder`]), or a bulk load, which
/// the communities worker waits for.
pub(crate) struct Running<'a>(&'a std::sync::atomic::AtomicUsize);

impl<'a> Running<'a> {
    pub(crate) fn start(count: &'a std::sync::atomic::AtomicUsize) -> Self {
        count.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        Running(count)
    }
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
    }
}

/// Applies committed changes to the in-memory indexes; `new_index` makes the index of a space seen first.
pub(crate) fn apply_ops(index: &RwLock<IndexState>, ops: Vec<IndexOp>, new_index: &dyn Fn() -> SpaceIndex) {
    let mut state = index.write();
    let mut vec_batches: HashMap<String, Vec<(u64, Vec<f32>)>> = HashMap::new();
    let mut touched: BTreeSet<String> = BTreeSet::new();
    // Per space, the documents whose expanded postings the batch changes: written once, after its last change.
    let mut expanded: HashMap<String, Pending> = HashMap::new();
    for op in ops {
        match op {
            IndexOp::Remove { space, docno, lex } => {
                if let Some(batch) = vec_batches.get_mut(&space) {
                    batch.retain(|(d, _)| *d != docno);
                }
                if let Some(si) = state.spaces.get_mut(&space) {
                    *si.expanded_len.get_mut() = None;
                    si.vectors.remove(docno);
                    let terms: Option<(Vec<String>, u32)> =
                        lex.map(|l| (l.terms.into_iter().map(|t| t.0).collect(), l.len));
                    let text = terms.as_ref().map(|(t, len)| (t.as_slice(), *len));
                    let pending = expanded.entry(space.clone()).or_default();
                    remove_doc_batched(&mut si.catalog, &mut si.lexicon, si.expanded.as_mut(), pending, docno, text);
                    touched.insert(space);
                }
            }
            IndexOp::Put { space, docno, meta, vector, lex } => {
                let si = state.spaces.entry(space.clone()).or_insert_with(new_index);
                *si.expanded_len.get_mut() = None;
                let text = lex.as_ref().map(|l| (l.terms.as_slice(), l.len));
                let pending = expanded.entry(space.clone()).or_default();
                put_doc_batched(&mut si.catalog, &mut si.lexicon, si.expanded.as_mut(), pending, docno, meta, text);
                touched.insert(space.clone());
                if let Some(v) = vector {
                    vec_batches.entry(space).or_default().push((docno, v));
                }
            }
        }
    }
    for (space, pending) in expanded {
        if let Some(si) = state.spaces.get_mut(&space)
            && let Some(x) = si.expanded.as_mut()
        {
            x.finish(&si.catalog, pending);
        }
    }
    for space in touched {
        if let Some(si) = state.spaces.get_mut(&space) {
            si.refresh_expanded();
        }
    }
    for (space, batch) in vec_batches {
        if let Some(si) = state.spaces.get_mut(&space) {
            si.vectors.insert_batch(&batch);
        }
    }
}

impl KnowledgeStore {
    pub(crate) fn new_space_index(&self) -> SpaceIndex {
        SpaceIndex::empty(self.config.embedder.dim(), self.config.vector, self.config.context.window)
    }

    /// Applies a commit's changes to the in-memory indexes (on a shared database: catches up with the change
    /// feed, which holds them; see [`super::feed`]).
    pub(crate) fn apply(&self, ops: Vec<IndexOp>) {
        self.feed.apply(ops);
        self.builder.wake();
        self.graph_worker.wake();
    }

    /// A change of knowledge through the one write path ([`super::write::Writes::write`]): one write
    /// transaction under the writer lock, the generation bumped, `f`'s index operations published to the
    /// change feed and applied after the commit; then the background workers are woken. Nothing is written or
    /// applied if `f` fails.
    pub(crate) fn write<T>(
        &self,
        f: impl FnOnce(&crate::storage::WriteTx, &mut Vec<IndexOp>) -> crate::error::Result<T>,
    ) -> crate::error::Result<T> {
        let out = self.writes.write(super::write::Commit::KNOWLEDGE, f)?;
        self.builder.wake();
        self.graph_worker.wake();
        Ok(out)
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
            let reembedding = self.reembed_progress.running.load(std::sync::atomic::Ordering::Acquire);
            let decoding = self.own_texts_decode.lock().as_ref().is_some_and(|t| !t.is_finished());
            if !reembedding && !decoding && !self.index.read().spaces.values().any(|s| s.vectors.needs_work()) {
                return true;
            }
            if Instant::now() >= until {
                return false;
            }
            self.builder.wake();
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    /// Runs `load` (typically many [`KnowledgeStore::create_memories`] batches) as a bulk load: the background
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
        load: impl FnOnce(&Self) -> crate::error::Result<T>,
    ) -> crate::error::Result<(T, Option<crate::storage::VectorIndexBuild>)> {
        let out = {
            let _running = Running::start(&self.bulk_loads);
            // A failed start still ends below: the build resets the deferral and makes any dropped index.
            self.db.begin_bulk_load().and_then(|()| load(self))
        };
        let built = self.db.end_bulk_load();
        self.graph_worker.wake();
        let out = out?;
        Ok((out, built?))
    }
}
