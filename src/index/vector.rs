//! Vector index of one space: vectors waiting for the graph in an arena ([`VectorBlocks`]), and, once the space
//! holds [`VectorParams::hnsw_min_points`] vectors, an HNSW graph ([`crate::index::hnsw`]) that holds the vectors
//! of its points. Each vector is kept once, at half precision as the store keeps it: in the arena until the
//! builder puts it in the graph, then in the graph. Queries stay `f32` ([`cosine_half`]).
//!
//! * Writes only touch the arena: a new vector is *pending* until a background builder puts it in the graph.
//! * A search walks the graph and scans the pending vectors exactly, then merges: fresh writes are found at once,
//!   and the graph's maintenance never sits on the write path.
//! * Below the threshold, and when a filter leaves few candidates, search is an exact scan (faster and exact at
//!   that size, the idea of qdrant's `indexing_threshold`).
//! * HNSW graphs cannot delete points: removed documents stay in the graph as tombstones (walks pass through
//!   them, results skip them), and the graph is rebuilt when they pass a quarter of its points.
//! * Full builds run on a fresh graph no search can see, in parallel on every core; catch-up inserts run in
//!   chunks under the graph's gate (searches wait for at most one chunk).
//! * The graph can be saved ([`SpaceVectors::graph_bytes`]) and attached again at the next open
//!   ([`SpaceVectors::stage_attach`], [`SpaceVectors::insert_loaded`], [`SpaceVectors::finish_attach`]), which
//!   validates it fully and catches up from the saved generation.
//!
//! Ids are the store's document numbers (`docno`), which change whenever a memory's text or vector changes, so a
//! graph point never stands for two versions of a memory.

use rustc_hash::FxHashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use half::f16;
use half::slice::HalfFloatSliceExt;
use parking_lot::RwLock;

pub use crate::index::hnsw::VectorBlocks;
use crate::index::hnsw::{Hnsw, HnswParams};

mod dot;
#[cfg(test)]
use dot::dot_portable;
pub use dot::{cosine, cosine_half, cosine_halves};

/// HNSW and exact-search parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct VectorParams {
    /// `M`: links per point on layers above 0, `2M` on layer 0 (clamped to 2..=64).
    pub m: usize,
    /// `ef_construction`: candidate list size while building.
    pub ef_construction: usize,
    /// `ef_search`: candidate list size while searching (raised to `k` when smaller).
    pub ef_search: usize,
    /// Vectors in a space before a graph is built; below it search is an exact scan.
    pub hnsw_min_points: usize,
    /// Filtered searches whose candidate set is at most this size scan exactly instead of walking the graph.
    pub exact_max_candidates: usize,
}

impl Default for VectorParams {
    fn default() -> Self {
        VectorParams { m: 16, ef_construction: 100, ef_search: 96, hnsw_min_points: 4096, exact_max_candidates: 4096 }
    }
}

/// One hit: document number and cosine similarity (-1..=1).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct VectorHit {
    /// Document number.
    pub docno: u64,
    /// Cosine similarity.
    pub score: f32,
}

/// An HNSW graph with the gate that keeps catch-up inserts and searches apart.
pub struct Graph {
    inner: RwLock<Hnsw>,
}

impl Graph {
    /// Builds a graph of `snapshot` on every core, taking its vectors as the graph's own (no copy);
    /// `cancel` is checked between chunks of 1,024 points (None when cancelled).
    pub fn build(params: VectorParams, snapshot: Snapshot, cancel: &dyn Fn() -> bool) -> Option<Self> {
        let hp = HnswParams { m: params.m, ef_construction: params.ef_construction };
        let g = Hnsw::build(snapshot.dim, hp, &snapshot.docnos, snapshot.vectors, cancel)?;
        Some(Graph { inner: RwLock::new(g) })
    }

    /// Inserts the vectors of `batch`; returns their point numbers, in the order of `batch.docnos`. Only the
    /// allocation of their points holds searches off (a copy of the vectors); the linking, most of the work,
    /// runs beside them, with `pause` between chunks of 1,024 points ([`Hnsw::link_from`]).
    pub fn insert(&self, batch: &Snapshot, pause: &dyn Fn()) -> Vec<u32> {
        let first = self.inner.write().allocate_for(&batch.docnos, &batch.vectors);
        self.inner.read().link_from(first, pause).collect()
    }

    /// Points in the graph (live and tombstones).
    pub fn len(&self) -> usize {
        self.inner.read().len()
    }

    /// True without points.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A copy of vectors for the builder: `docnos.len()` vectors of `dim` components. For a full build, a space's
/// live vectors in docno order; for an insert, a chunk of its pending vectors.
pub struct Snapshot {
    /// Vector dimension.
    pub dim: usize,
    /// Document numbers; point `first + i` of the graph stands for `docnos[i]`.
    pub docnos: Vec<u64>,
    /// The vectors, one per document, in the order of `docnos` (a built graph takes them as its own).
    pub vectors: VectorBlocks,
}

impl Snapshot {
    /// The vectors of `items` (`(docno, vector)`; a vector of another length than `dim` is zero-padded or cut).
    pub fn of(dim: usize, items: &[(u64, Vec<f32>)]) -> Self {
        let mut vectors = VectorBlocks::new(dim);
        for (_, v) in items {
            vectors.push(v);
        }
        Snapshot { dim, docnos: items.iter().map(|x| x.0).collect(), vectors }
    }
}

/// Background work a space needs.
pub enum GraphWork {
    /// Build a graph (the first, of at most 65,536 vectors, or a rebuild of all live vectors when
    /// tombstones pass a quarter of the graph). The graph takes the snapshot's vectors: while it is built, the
    /// process holds those vectors twice (the serving copy and this).
    Build(Snapshot),
    /// Put pending vectors (at most 4,096) into the current graph.
    Insert(Arc<Graph>, Snapshot),
}

/// The vectors of one space.
pub struct SpaceVectors {
    dim: usize,
    params: VectorParams,
    /// Vectors not in the graph (pending), one slot each.
    arena: VectorBlocks,
    slot_docno: Vec<u64>,
    slot_of: FxHashMap<u64, usize>,
    graph: Option<Arc<Graph>>,
    /// Live documents in the graph and their point.
    point_of: LivePoints,
    /// Points in the current graph (live or tombstone).
    graph_points: usize,
    /// Work was handed out and has not come back yet.
    busy: AtomicBool,
    /// Changes to the graph or its live set, and the count the last save reflected.
    changes: AtomicU64,
    saved: AtomicU64,
    /// A saved graph being attached at open ([`SpaceVectors::stage_attach`]).
    staged: Option<Staged>,
}

/// The live documents of a graph by point: docno -> point, and one bit per point set when a live document
/// holds it, so that a graph search tells a live point from a tombstone without a hash lookup (the map misses
/// the cache at 1M points, the bits take 125 KiB).
#[derive(Default)]
struct LivePoints {
    map: FxHashMap<u64, u32>,
    bits: Vec<u64>,
}

impl LivePoints {
    fn set(&mut self, p: u32, on: bool) {
        let (w, b) = (p as usize / 64, 1u64 << (p % 64));
        if on {
            if self.bits.len() <= w {
                self.bits.resize(w + 1, 0);
            }
            self.bits[w] |= b;
        } else if let Some(x) = self.bits.get_mut(w) {
            *x &= !b;
        }
    }

    fn insert(&mut self, d: u64, p: u32) {
        if let Some(old) = self.map.insert(d, p) {
            self.set(old, false);
        }
        self.set(p, true);
    }

    fn remove(&mut self, d: &u64) -> Option<u32> {
        let p = self.map.remove(d)?;
        self.set(p, false);
        Some(p)
    }

    /// True when a live document holds point `p`.
    #[inline]
    fn is_live(&self, p: u32) -> bool {
        self.bits.get(p as usize / 64).is_some_and(|w| w & (1u64 << (p % 64)) != 0)
    }

    fn get(&self, d: &u64) -> Option<&u32> {
        self.map.get(d)
    }

    fn contains_key(&self, d: &u64) -> bool {
        self.map.contains_key(d)
    }

    fn len(&self) -> usize {
        self.map.len()
    }

    fn capacity(&self) -> usize {
        self.map.capacity()
    }

    fn iter(&self) -> impl Iterator<Item = (&u64, &u32)> {
        self.map.iter()
    }
}

/// A saved graph whose live points get their vectors as the store's vectors are read.
struct Staged {
    graph: Hnsw,
    /// (docno, point) of the live points, by docno.
    live_points: Vec<(u64, u32)>,
    /// Where the last match was in `live_points`: the store's vectors come in docno order, so the next is
    /// found by walking forward (no hash lookup: 0.2 s of a 1,000,000-vector open went to one).
    cursor: usize,
    filled: Vec<bool>,
}

impl Staged {
    /// The point standing for `docno`, if it is a live point: a forward walk from the last match, a binary
    /// search when `docno` comes out of order.
    fn point(&mut self, docno: u64) -> Option<u32> {
        let live = &self.live_points;
        while live.get(self.cursor).is_some_and(|e| e.0 < docno) {
            self.cursor += 1;
        }
        match live.get(self.cursor) {
            Some(&(d, p)) if d == docno => Some(p),
            _ if self.cursor > 0 && live[self.cursor - 1].0 >= docno => {
                live.binary_search_by_key(&docno, |e| e.0).ok().map(|i| live[i].1)
            }
            _ => None,
        }
    }
}

/// Pending vectors per catch-up insert. The gate is held only while their points are allocated (a copy of
/// 4 to 6 MiB); they are linked beside searches. A bulk load is caught up by inserts into the graph, not by
/// rebuilds at each doubling: a rebuild copied every vector once more while the old graph and the pending
/// vectors were still held (2 GiB of 1M vectors of 256 dimensions at once), and built the old points again.
const INSERT_CHUNK: usize = 4096;

/// Most vectors of a space's first graph: the rest are inserted into it in chunks of [`INSERT_CHUNK`], so that
/// a store opened without a saved graph (after a restore) never copies all its vectors at once.
const FIRST_BUILD: usize = 65_536;

impl SpaceVectors {
    /// An empty index for vectors of `dim` floats.
    pub fn new(dim: usize, params: VectorParams) -> Self {
        SpaceVectors {
            dim,
            params,
            arena: VectorBlocks::new(dim),
            slot_docno: Vec::new(),
            slot_of: FxHashMap::default(),
            graph: None,
            point_of: LivePoints::default(),
            graph_points: 0,
            busy: AtomicBool::new(false),
            changes: AtomicU64::new(0),
            saved: AtomicU64::new(0),
            staged: None,
        }
    }

    /// Changes `ef_search` (searches only; the graph stays).
    pub fn set_ef_search(&mut self, ef_search: usize) {
        self.params.ef_search = ef_search;
    }

    /// Live vectors.
    pub fn len(&self) -> usize {
        self.slot_docno.len() + self.point_of.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether an HNSW graph serves searches.
    pub fn has_graph(&self) -> bool {
        self.graph.is_some()
    }

    /// Live vectors not yet in the graph (0 without a graph).
    pub fn pending(&self) -> usize {
        if self.graph.is_some() { self.slot_docno.len() } else { 0 }
    }

    /// Points in the graph, live and tombstones (0 without a graph).
    pub fn graph_points(&self) -> usize {
        self.graph_points
    }

    /// Points in the graph that no longer stand for a live document.
    pub fn tombstones(&self) -> usize {
        self.graph_points.saturating_sub(self.point_of.len())
    }

    /// Whether `docno` has a vector.
    pub fn contains(&self, docno: u64) -> bool {
        self.slot_of.contains_key(&docno) || self.point_of.contains_key(&docno)
    }

    /// A copy of the vector of `docno` widened to `f32` (held at half precision), if live.
    pub fn get(&self, docno: u64) -> Option<Vec<f32>> {
        if let Some(v) = self.arena_get(docno) {
            return Some(v.to_f32_vec());
        }
        let (p, g) = (self.point_of.get(&docno)?, self.graph.as_ref()?);
        Some(g.inner.read().vector(*p).to_f32_vec())
    }

    fn arena_get(&self, docno: u64) -> Option<&[f16]> {
        self.slot_of.get(&docno).and_then(|&s| self.arena.get(s))
    }

    /// Cosine similarity of `query` with each of `docnos` (0.0 for a document without a vector).
    pub fn similarities(&self, query: &[f32], docnos: &[u64]) -> Vec<f32> {
        let g = self.graph.as_ref().map(|g| g.inner.read());
        docnos
            .iter()
            .map(|d| match (self.arena_get(*d), self.point_of.get(d), &g) {
                (Some(v), _, _) => cosine_half(query, v),
                (None, Some(p), Some(g)) => cosine_half(query, g.vector(*p)),
                _ => 0.0,
            })
            .collect()
    }

    /// Bytes held by the vectors alone (graph and pending), part of [`SpaceVectors::heap_bytes`].
    pub fn vector_bytes(&self) -> usize {
        self.arena.heap_bytes() + self.graph.as_ref().map_or(0, |g| g.inner.read().vector_bytes())
    }

    /// Bytes held by vectors, links and maps (an estimate for reports).
    pub fn heap_bytes(&self) -> usize {
        self.arena.heap_bytes()
            + self.slot_docno.capacity() * 8
            + self.slot_of.capacity() * 24
            + self.point_of.capacity() * 16
            + self.point_of.bits.capacity() * 8
            + self.graph.as_ref().map_or(0, |g| g.inner.read().heap_bytes())
    }

    /// Adds vectors (each of `dim` floats, held rounded to half precision as the store keeps them; other
    /// lengths are ignored). They are pending until the builder inserts them.
    pub fn insert_batch(&mut self, items: &[(u64, Vec<f32>)]) {
        for (docno, v) in items {
            if v.len() == self.dim {
                self.new_slot(*docno).convert_from_f32_slice(v);
            }
        }
    }

    /// [`SpaceVectors::insert_batch`] of vectors held already.
    fn insert_halves(&mut self, items: &[(u64, Vec<f16>)]) {
        for (docno, v) in items {
            if v.len() == self.dim {
                self.new_slot(*docno).copy_from_slice(v);
            }
        }
    }

    /// A pending slot for `docno` (its vector so far removed), zeroed, to write its `dim` components.
    fn new_slot(&mut self, docno: u64) -> &mut [f16] {
        if self.contains(docno) {
            self.remove(docno);
        }
        let slot = self.slot_docno.len();
        self.slot_of.insert(docno, slot);
        self.slot_docno.push(docno);
        self.arena.push_zero()
    }

    /// Removes a vector; a graph point becomes a tombstone.
    pub fn remove(&mut self, docno: u64) {
        if self.point_of.remove(&docno).is_some() {
            self.changes.fetch_add(1, Ordering::AcqRel);
            return;
        }
        let Some(slot) = self.slot_of.remove(&docno) else { return };
        let last = self.slot_docno.len() - 1;
        if slot != last {
            let moved = self.slot_docno[last];
            self.slot_docno[slot] = moved;
            self.slot_of.insert(moved, slot);
        }
        self.slot_docno.pop();
        self.arena.swap_remove(slot);
    }

    /// Drops the arena copy of vectors now held by the graph, and gives memory back when the arena emptied.
    fn move_to_graph(&mut self, docno: u64, point: u32, graph: &Hnsw) {
        if let Some(v) = self.arena_get(docno)
            && v == graph.vector(point)
        {
            self.remove(docno);
            self.point_of.insert(docno, point);
        }
    }

    /// Gives back the room of the pending slots' list and map once at most half of it is used (after the graph
    /// took the vectors of a bulk load: 32 MiB at 1M). The arena itself frees each chunk it empties, so it
    /// never holds more than one chunk of unused room; its last chunk is trimmed here too.
    fn shrink(&mut self) {
        if self.slot_docno.capacity() > 2 * self.slot_docno.len() + INSERT_CHUNK {
            self.arena.shrink_to_fit();
            self.slot_docno.shrink_to_fit();
            self.slot_of.shrink_to_fit();
        }
    }

    fn snapshot_all(&self) -> Snapshot {
        // Docno order first (deterministic builds), then one copy of each vector into fresh blocks.
        let graph = self.graph.as_ref().map(|g| g.inner.read());
        let mut order: Vec<(u64, Option<u32>)> = Vec::with_capacity(self.len());
        order.extend(self.point_of.iter().map(|(d, p)| (*d, Some(*p))));
        order.extend(self.slot_docno.iter().map(|d| (*d, None)));
        order.sort_unstable_by_key(|x| x.0);
        let mut docnos = Vec::with_capacity(order.len());
        let mut vectors = VectorBlocks::new(self.dim);
        for (d, point) in order {
            let v = match (point, &graph) {
                (Some(p), Some(g)) => Some(g.vector(p)),
                (None, _) => self.arena_get(d),
                (Some(_), None) => None,
            };
            if let Some(v) = v.filter(|v| v.len() == self.dim) {
                docnos.push(d);
                vectors.push_half(v);
            }
        }
        Snapshot { dim: self.dim, docnos, vectors }
    }

    /// The first graph's vectors: the [`FIRST_BUILD`] lowest pending document numbers (no graph yet).
    fn snapshot_first(&self) -> Snapshot {
        let mut docnos: Vec<u64> = self.slot_docno.clone();
        docnos.sort_unstable();
        docnos.truncate(FIRST_BUILD);
        let mut vectors = VectorBlocks::new(self.dim);
        docnos.retain(|&d| match self.arena_get(d).filter(|v| v.len() == self.dim) {
            Some(v) => {
                vectors.push_half(v);
                true
            }
            None => false,
        });
        Snapshot { dim: self.dim, docnos, vectors }
    }

    /// What the background builder should do for this space, if anything (copies the vectors it needs).
    /// Hands out one piece of work at a time: None until [`SpaceVectors::install`],
    /// [`SpaceVectors::mark_inserted`] or [`SpaceVectors::abandon`] returns it.
    pub fn plan(&self) -> Option<GraphWork> {
        if self.busy.load(Ordering::Acquire) {
            return None;
        }
        let work = self.next_work();
        if work.is_some() {
            self.busy.store(true, Ordering::Release);
        }
        work
    }

    /// Gives back work that could not be finished.
    pub fn abandon(&self) {
        self.busy.store(false, Ordering::Release);
    }

    /// True while there is work the builder has not done (a graph to build, or pending vectors).
    pub fn needs_work(&self) -> bool {
        self.busy.load(Ordering::Acquire) || self.next_work_kind()
    }

    /// A full build beats catch-up when tombstones pass a quarter of the graph. Pending vectors, however many,
    /// are inserted ([`INSERT_CHUNK`]).
    fn needs_rebuild(&self) -> bool {
        self.tombstones() * 4 > self.graph_points.max(1)
    }

    fn next_work_kind(&self) -> bool {
        match &self.graph {
            None => self.len() >= self.params.hnsw_min_points,
            Some(_) => self.needs_rebuild() || !self.slot_docno.is_empty(),
        }
    }

    fn next_work(&self) -> Option<GraphWork> {
        match &self.graph {
            None if self.len() >= self.params.hnsw_min_points => Some(GraphWork::Build(self.snapshot_first())),
            None => None,
            Some(_) if self.needs_rebuild() => Some(GraphWork::Build(self.snapshot_all())),
            Some(g) if !self.slot_docno.is_empty() => {
                // Any INSERT_CHUNK pending vectors (the arena's first slots): O(chunk), not a sort of all pending.
                let take = self.slot_docno.len().min(INSERT_CHUNK);
                let mut items =
                    Snapshot { dim: self.dim, docnos: Vec::with_capacity(take), vectors: VectorBlocks::new(self.dim) };
                for (slot, &d) in self.slot_docno[..take].iter().enumerate() {
                    if let Some(v) = self.arena.get(slot) {
                        items.docnos.push(d);
                        items.vectors.push_half(v);
                    }
                }
                Some(GraphWork::Insert(g.clone(), items))
            }
            Some(_) => None,
        }
    }

    /// Installs a graph built from `built` (docnos of its points, in point order); vectors added since stay
    /// pending, documents removed since become tombstones.
    pub fn install(&mut self, graph: Graph, built: &[u64]) {
        let new_point: FxHashMap<u64, u32> = built.iter().enumerate().map(|(p, d)| (*d, p as u32)).collect();
        {
            let g = graph.inner.read();
            // Live points of the old graph move to the new one when it holds the same vector; the others
            // (changed since the snapshot, which cannot happen while their newer vector waits in the arena, or
            // missing from it) go back to the arena as pending. No copy of the whole old graph is made.
            if let Some(old) = self.graph.take() {
                let old = old.inner.read();
                let live = std::mem::take(&mut self.point_of);
                let mut back: Vec<(u64, Vec<f16>)> = Vec::new();
                for (d, p_old) in live.map {
                    match new_point.get(&d) {
                        Some(&p) if g.vector(p) == old.vector(p_old) => {
                            self.point_of.insert(d, p);
                        }
                        _ => back.push((d, old.vector(p_old).to_vec())),
                    }
                }
                self.insert_halves(&back);
            }
            for (d, p) in &new_point {
                self.move_to_graph(*d, *p, &g);
            }
        }
        self.graph_points = built.len();
        self.graph = Some(Arc::new(graph));
        self.shrink();
        self.changes.fetch_add(1, Ordering::AcqRel);
        self.busy.store(false, Ordering::Release);
    }

    /// Records that `inserted` (`(docno, point)`) went into `graph` (ignored if another graph was installed
    /// meanwhile).
    pub fn mark_inserted(&mut self, graph: &Arc<Graph>, inserted: &[(u64, u32)]) {
        self.busy.store(false, Ordering::Release);
        let Some(current) = self.graph.clone().filter(|g| Arc::ptr_eq(g, graph)) else { return };
        let g = current.inner.read();
        self.graph_points = g.len();
        for (d, p) in inserted {
            self.move_to_graph(*d, *p, &g);
        }
        drop(g);
        self.shrink();
        self.changes.fetch_add(1, Ordering::AcqRel);
    }

    /// Builds the graph now, on this thread (for callers without a background builder).
    pub fn build_now(&mut self) {
        while let Some(work) = self.plan() {
            match work {
                GraphWork::Build(snapshot) => {
                    let ids = snapshot.docnos.clone();
                    match Graph::build(self.params, snapshot, &|| false) {
                        Some(g) => self.install(g, &ids),
                        None => self.abandon(),
                    }
                }
                GraphWork::Insert(g, items) => {
                    let points = g.insert(&items, &|| ());
                    let ids: Vec<(u64, u32)> = items.docnos.iter().copied().zip(points).collect();
                    self.mark_inserted(&g, &ids);
                }
            }
        }
    }

    /// The graph as bytes ([`Hnsw::to_bytes`]) with the change count it reflects, when it changed since the
    /// last [`SpaceVectors::mark_saved`]; None without a graph or without changes.
    pub fn graph_bytes(&self, generation: u64, embedder: &str) -> Option<(Vec<u8>, u64)> {
        let g = self.graph.as_ref()?;
        let changes = self.changes.load(Ordering::Acquire);
        if changes == self.saved.load(Ordering::Acquire) {
            return None;
        }
        let g = g.inner.read();
        let live = |p: u32| self.point_of.is_live(p);
        Some((g.to_bytes(generation, embedder, &live), changes))
    }

    /// Records that the graph as of change count `changes` is on disk.
    pub fn mark_saved(&self, changes: u64) {
        self.saved.fetch_max(changes, Ordering::AcqRel);
    }

    /// Stages a saved graph ([`Hnsw::from_bytes`]) before the store's vectors are loaded: the vectors of its
    /// live points are then written straight into the graph by [`SpaceVectors::insert_loaded`] (one copy in
    /// memory, never two), and [`SpaceVectors::finish_attach`] decides.
    ///
    /// Errors (nothing staged; the caller deletes the file and the builder rebuilds): any
    /// [`Hnsw::from_bytes`] error, another embedder, or a generation above `generation_now` (the file is newer
    /// than the store).
    pub fn stage_attach(&mut self, bytes: &[u8], embedder: &str, generation_now: u64) -> Result<(), String> {
        let (g, saved) = Hnsw::from_bytes(bytes, self.dim, None)?;
        if saved.embedder != embedder {
            return Err(format!("graph of embedder {}, store uses {embedder}", saved.embedder));
        }
        if saved.generation > generation_now {
            return Err(format!("graph of generation {}, store is at {generation_now}", saved.generation));
        }
        let mut live_points: Vec<(u64, u32)> =
            (0..g.len() as u32).filter(|p| saved.live[*p as usize]).map(|p| (g.docno(p), p)).collect();
        // A graph built in docno order is sorted already (a pass, no sort).
        if !live_points.is_sorted() {
            live_points.sort_unstable();
        }
        self.staged = Some(Staged { filled: vec![false; g.len()], graph: g, live_points, cursor: 0 });
        Ok(())
    }

    /// Adds one vector read from the store at open, `fill` writing its `dim` half-precision components into the
    /// slot it is given (false: the stored vector has another length, and it is skipped, replacing any vector
    /// `docno` had): straight into the staged graph when it stands for one of its live points, else into the
    /// arena (pending). No copy either way. Fastest in docno order.
    pub fn insert_loaded(&mut self, docno: u64, fill: impl FnOnce(&mut [f16]) -> bool) {
        if let Some(st) = &mut self.staged
            && let Some(p) = st.point(docno)
        {
            if let Some(slot) = st.graph.vector_mut(p)
                && fill(slot)
            {
                st.filled[p as usize] = true;
            }
            return;
        }
        if !fill(self.new_slot(docno)) {
            self.remove(docno);
        }
    }

    /// Installs the staged graph once the store's vectors are loaded: its live points whose vector was loaded
    /// are live, the others (memories deleted after the save) tombstones; vectors not in it are pending (the
    /// catch-up from the saved generation). Nothing staged: Ok with zero points.
    ///
    /// Errors (the staged vectors go to the arena, so nothing is lost; the caller deletes the file): more than
    /// a tenth of the saved live points are gone from the store.
    pub fn finish_attach(&mut self) -> Result<AttachStats, String> {
        let Some(st) = self.staged.take() else { return Ok(AttachStats { points: 0, live: 0, pending: 0 }) };
        let live = st.live_points.len();
        let gone = st.live_points.iter().filter(|(_, p)| !st.filled[*p as usize]).count();
        if gone * 10 > live.max(1) {
            let back: Vec<(u64, Vec<f16>)> = st
                .live_points
                .iter()
                .filter(|(_, p)| st.filled[*p as usize])
                .map(|(d, p)| (*d, st.graph.vector(*p).to_vec()))
                .collect();
            drop(st.graph);
            self.insert_halves(&back);
            return Err(format!("{gone} of {live} live points are gone from the store"));
        }
        for (d, p) in &st.live_points {
            if st.filled[*p as usize] {
                self.point_of.insert(*d, *p);
            }
        }
        self.graph_points = st.graph.len();
        self.graph = Some(Arc::new(Graph { inner: RwLock::new(st.graph) }));
        let c = self.changes.load(Ordering::Acquire);
        self.saved.store(if gone > 0 { c.wrapping_sub(1) } else { c }, Ordering::Release);
        Ok(AttachStats { points: self.graph_points, live: self.point_of.len(), pending: self.slot_docno.len() })
    }

    /// The `k` nearest live vectors to `query` among those `allowed` accepts, best first.
    ///
    /// `candidates`: the number of documents `allowed` accepts, when known; a small set is scanned exactly.
    /// Never returns fewer than `min(k, matching live vectors)` hits: if the graph walk comes back short,
    /// the search falls back to an exact scan.
    pub fn search(
        &self,
        query: &[f32],
        k: usize,
        allowed: &dyn Fn(u64) -> bool,
        candidates: Option<usize>,
    ) -> Vec<VectorHit> {
        if k == 0 || query.len() != self.dim || self.is_empty() {
            return Vec::new();
        }
        let small = candidates.is_some_and(|c| c <= self.params.exact_max_candidates);
        if let (Some(g), false) = (&self.graph, small) {
            let ef = self.params.ef_search.max(k);
            let mut hits: Vec<VectorHit> = {
                let g = g.inner.read();
                let live = |p: u32| self.point_of.is_live(p) && allowed(g.docno(p));
                g.search(query, k, ef, Some(&live))
                    .into_iter()
                    .map(|(p, dist)| VectorHit { docno: g.docno(p), score: 1.0 - dist })
                    .collect()
            };
            let graph_hits = hits.len();
            for (slot, &d) in self.slot_docno.iter().enumerate() {
                if allowed(d) {
                    hits.push(VectorHit { docno: d, score: cosine_half(query, self.arena.at(slot)) });
                }
            }
            top_k(&mut hits, k);
            let enough = graph_hits >= k || hits.len() >= k || candidates.is_some_and(|c| hits.len() >= c);
            if enough {
                return hits;
            }
        }
        self.exact(query, k, allowed)
    }

    /// Exact top-`k` by cosine over the live vectors `allowed` accepts.
    pub fn exact(&self, query: &[f32], k: usize, allowed: &dyn Fn(u64) -> bool) -> Vec<VectorHit> {
        let mut hits: Vec<VectorHit> = Vec::new();
        for (slot, &docno) in self.slot_docno.iter().enumerate() {
            if allowed(docno) {
                hits.push(VectorHit { docno, score: cosine_half(query, self.arena.at(slot)) });
            }
        }
        if let Some(g) = &self.graph {
            let g = g.inner.read();
            for (&docno, &p) in self.point_of.iter() {
                if allowed(docno) {
                    hits.push(VectorHit { docno, score: cosine_half(query, g.vector(p)) });
                }
            }
        }
        top_k(&mut hits, k);
        hits
    }
}

/// What [`SpaceVectors::finish_attach`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttachStats {
    /// Points in the saved graph.
    pub points: usize,
    /// Of them, live documents of the store.
    pub live: usize,
    /// Live vectors not in the graph (written after the save): the catch-up.
    pub pending: usize,
}

/// Keeps the `k` best hits, sorted by descending score then ascending docno (deterministic ties).
pub fn top_k(hits: &mut Vec<VectorHit>, k: usize) {
    let cmp = |a: &VectorHit, b: &VectorHit| b.score.total_cmp(&a.score).then(a.docno.cmp(&b.docno));
    *hits = super::first_in_order(std::mem::take(hits), k, cmp);
}

#[cfg(test)]
mod tests;
