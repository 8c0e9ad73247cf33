//! The derived in-memory state: per space the catalog, the BM25 lexicon and the vectors; and the operations a
//! commit applies to them. The HNSW builder thread that completes the vectors' graphs is [`super::builder`].

use std::collections::{BTreeSet, HashMap};
use std::time::Instant;

use parking_lot::{Mutex, RwLock};

use crate::index::catalog::SpaceCatalog;
use crate::index::context::{ExpandedIndex, Pending, put_doc_batched, remove_doc_batched};
use crate::index::lexicon::Lexicon;
use crate::index::ops::IndexOp;
use crate::index::vector::SpaceVectors;

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
