//! Vector index of one space: a dense arena of L2-normalised vectors plus, once the space holds
//! [`VectorParams::hnsw_min_points`] vectors, an HNSW graph (Malkov and Yashunin, "Efficient and robust approximate
//! nearest neighbor search using Hierarchical Navigable Small World graphs", IEEE TPAMI 2018) from `hnsw_rs`.
//!
//! * Writes only touch the arena: a new vector is *pending* until a background builder puts it in the graph.
//! * A search walks the graph and scans the pending vectors exactly, then merges: fresh writes are found at once,
//!   and the graph's maintenance never sits on the write path.
//! * Below the threshold, and when a filter leaves few candidates, search is an exact scan (faster and exact at
//!   that size, the idea of qdrant's `indexing_threshold`).
//! * `hnsw_rs` can neither delete nor update points: removed documents stay in the graph as tombstones, skipped by
//!   the search filter, and the graph is rebuilt when they pass a quarter of its points.
//! * Full builds run on a fresh graph no search can see; catch-up inserts run in chunks under the graph's gate,
//!   because `hnsw_rs` does not allow inserting and searching at the same time.
//!
//! Ids are the store's document numbers (`docno`), which change whenever a memory's text changes, so a graph
//! point never stands for two versions of a text.

use rustc_hash::{FxHashMap, FxHashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use hnsw_rs::prelude::{Distance, Hnsw};
use parking_lot::RwLock;

use crate::embed::cosine;

/// HNSW and exact-search parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct VectorParams {
    /// `M`: links per node and layer (clamped to 2..=64; `hnsw_rs` allows at most 256).
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
        VectorParams { m: 32, ef_construction: 200, ef_search: 128, hnsw_min_points: 4096, exact_max_candidates: 4096 }
    }
}

/// `1 - dot(a, b)` clamped to 0..=2: the cosine distance of L2-normalised vectors. Plain `DistDot` of `hnsw_rs`
/// asserts on rounding when a query equals a stored vector (duplicate memories do that); this one clamps.
#[derive(Debug, Clone, Copy, Default)]
pub struct ClampedDot;

impl Distance<f32> for ClampedDot {
    fn eval(&self, a: &[f32], b: &[f32]) -> f32 {
        (1.0 - cosine(a, b)).clamp(0.0, 2.0)
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

/// An HNSW graph with the gate that keeps inserts and searches apart.
pub struct Graph {
    hnsw: Hnsw<'static, f32, ClampedDot>,
    gate: RwLock<()>,
}

impl Graph {
    /// Builds a graph of `items` (parallel insert in chunks of 512; `cancel` is checked between chunks).
    pub fn build(params: VectorParams, items: &[(u64, Vec<f32>)], cancel: &dyn Fn() -> bool) -> Option<Self> {
        let hnsw = Hnsw::<f32, ClampedDot>::new(
            params.m.clamp(2, 64),
            items.len().max(1024),
            16,
            params.ef_construction.max(params.m),
            ClampedDot,
        );
        // Small chunks keep cancellation prompt: closing a store waits for the chunk in progress (about 1 s for
        // 512 points in a release build; a chunk of 4,096 held a closing store for about 10 s).
        for chunk in items.chunks(512) {
            if cancel() {
                return None;
            }
            let data: Vec<(&[f32], usize)> = chunk.iter().map(|(d, v)| (v.as_slice(), *d as usize)).collect();
            hnsw.parallel_insert_slice(&data);
        }
        Some(Graph { hnsw, gate: RwLock::new(()) })
    }

    /// Inserts `items` while no search runs on this graph.
    pub fn insert(&self, items: &[(u64, Vec<f32>)]) {
        let _exclusive = self.gate.write();
        let data: Vec<(&[f32], usize)> = items.iter().map(|(d, v)| (v.as_slice(), *d as usize)).collect();
        self.hnsw.parallel_insert_slice(&data);
    }
}

/// Background work a space needs.
pub enum GraphWork {
    /// Build a graph of all live vectors (first build, or too many tombstones).
    Build(Vec<(u64, Vec<f32>)>),
    /// Put pending vectors into the current graph.
    Insert(Arc<Graph>, Vec<(u64, Vec<f32>)>),
}

/// The vectors of one space.
pub struct SpaceVectors {
    dim: usize,
    params: VectorParams,
    arena: Vec<f32>,
    slot_docno: Vec<u64>,
    slot_of: FxHashMap<u64, usize>,
    graph: Option<Arc<Graph>>,
    /// Live documents in the graph.
    in_graph: FxHashSet<u64>,
    /// Points ever put in the current graph (live or tombstone).
    graph_points: usize,
    /// Live documents not yet in the graph (only tracked while a graph exists).
    pending: FxHashSet<u64>,
    /// Work was handed out and has not come back yet.
    busy: AtomicBool,
}

/// Catch-up inserts per round, so the gate is never held for long.
const INSERT_CHUNK: usize = 256;

impl SpaceVectors {
    /// An empty index for vectors of `dim` floats.
    pub fn new(dim: usize, params: VectorParams) -> Self {
        SpaceVectors {
            dim,
            params,
            arena: Vec::new(),
            slot_docno: Vec::new(),
            slot_of: FxHashMap::default(),
            graph: None,
            in_graph: FxHashSet::default(),
            graph_points: 0,
            pending: FxHashSet::default(),
            busy: AtomicBool::new(false),
        }
    }

    /// Live vectors.
    pub fn len(&self) -> usize {
        self.slot_docno.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.slot_docno.is_empty()
    }

    /// Whether an HNSW graph serves searches.
    pub fn has_graph(&self) -> bool {
        self.graph.is_some()
    }

    /// Live vectors not yet in the graph (0 without a graph).
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// The vector of `docno`, if live.
    pub fn get(&self, docno: u64) -> Option<&[f32]> {
        self.slot_of.get(&docno).map(|&s| &self.arena[s * self.dim..(s + 1) * self.dim])
    }

    /// Adds vectors (each of `dim` floats; others are ignored). They are pending until the builder inserts them.
    pub fn insert_batch(&mut self, items: &[(u64, Vec<f32>)]) {
        for (docno, v) in items {
            if v.len() != self.dim {
                continue;
            }
            if self.slot_of.contains_key(docno) {
                self.remove(*docno);
            }
            self.slot_of.insert(*docno, self.slot_docno.len());
            self.arena.extend_from_slice(v);
            self.slot_docno.push(*docno);
            if self.graph.is_some() {
                self.pending.insert(*docno);
            }
        }
    }

    /// Removes a vector; a graph point becomes a tombstone.
    pub fn remove(&mut self, docno: u64) {
        let Some(slot) = self.slot_of.remove(&docno) else { return };
        let last = self.slot_docno.len() - 1;
        if slot != last {
            let moved = self.slot_docno[last];
            self.arena.copy_within(last * self.dim..(last + 1) * self.dim, slot * self.dim);
            self.slot_docno[slot] = moved;
            self.slot_of.insert(moved, slot);
        }
        self.slot_docno.pop();
        self.arena.truncate(last * self.dim);
        self.in_graph.remove(&docno);
        self.pending.remove(&docno);
    }

    fn snapshot(&self, docnos: impl Iterator<Item = u64>) -> Vec<(u64, Vec<f32>)> {
        docnos.filter_map(|d| self.get(d).map(|v| (d, v.to_vec()))).collect()
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

    fn next_work_kind(&self) -> bool {
        match &self.graph {
            None => self.len() >= self.params.hnsw_min_points,
            Some(_) => {
                (self.graph_points - self.in_graph.len()) * 4 > self.graph_points.max(1) || !self.pending.is_empty()
            }
        }
    }

    fn next_work(&self) -> Option<GraphWork> {
        match &self.graph {
            None if self.len() >= self.params.hnsw_min_points => {
                Some(GraphWork::Build(self.snapshot(self.slot_docno.iter().copied())))
            }
            None => None,
            Some(_) if (self.graph_points - self.in_graph.len()) * 4 > self.graph_points.max(1) => {
                Some(GraphWork::Build(self.snapshot(self.slot_docno.iter().copied())))
            }
            Some(g) if !self.pending.is_empty() => {
                let mut ids: Vec<u64> = self.pending.iter().copied().collect();
                ids.sort_unstable();
                ids.truncate(INSERT_CHUNK);
                Some(GraphWork::Insert(g.clone(), self.snapshot(ids.into_iter())))
            }
            Some(_) => None,
        }
    }

    /// Installs a graph built from `built` (docno list of the snapshot); vectors added since stay pending,
    /// removed ones become tombstones.
    pub fn install(&mut self, graph: Graph, built: &[u64]) {
        self.in_graph = built.iter().copied().filter(|d| self.slot_of.contains_key(d)).collect();
        self.graph_points = built.len();
        self.pending = self.slot_docno.iter().copied().filter(|d| !self.in_graph.contains(d)).collect();
        self.graph = Some(Arc::new(graph));
        self.busy.store(false, Ordering::Release);
    }

    /// Records that `inserted` went into `graph` (ignored if another graph was installed meanwhile).
    pub fn mark_inserted(&mut self, graph: &Arc<Graph>, inserted: &[u64]) {
        self.busy.store(false, Ordering::Release);
        if !self.graph.as_ref().is_some_and(|g| Arc::ptr_eq(g, graph)) {
            return;
        }
        self.graph_points += inserted.len();
        for d in inserted {
            if self.pending.remove(d) {
                self.in_graph.insert(*d);
            }
        }
    }

    /// Builds the graph now, on this thread (for callers without a background builder).
    pub fn build_now(&mut self) {
        while let Some(work) = self.plan() {
            match work {
                GraphWork::Build(items) => match Graph::build(self.params, &items, &|| false) {
                    Some(g) => {
                        let ids: Vec<u64> = items.iter().map(|x| x.0).collect();
                        self.install(g, &ids);
                    }
                    None => self.abandon(),
                },
                GraphWork::Insert(g, items) => {
                    g.insert(&items);
                    let ids: Vec<u64> = items.iter().map(|x| x.0).collect();
                    self.mark_inserted(&g, &ids);
                }
            }
        }
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
            let live = |id: u64| self.in_graph.contains(&id) && allowed(id);
            let mut hits: Vec<VectorHit> = {
                let _shared = g.gate.read();
                // hnsw_rs's filtered walk costs about three times the plain one; with no filter and few
                // tombstones, walk plainly for a few extra candidates and drop the ones that do not pass.
                let mut found: Vec<VectorHit> = Vec::new();
                if candidates.is_none() && self.graph_points - self.in_graph.len() <= self.graph_points / 20 {
                    found = g
                        .hnsw
                        .search(query, k + 16, ef)
                        .iter()
                        .filter(|n| live(n.d_id as u64))
                        .map(|n| VectorHit { docno: n.d_id as u64, score: 1.0 - n.distance })
                        .collect();
                    found.truncate(k);
                }
                if found.len() < k {
                    let filter = |id: &usize| live(*id as u64);
                    found = g
                        .hnsw
                        .search_filter(query, k, ef, Some(&filter))
                        .iter()
                        .map(|n| VectorHit { docno: n.d_id as u64, score: 1.0 - n.distance })
                        .collect();
                }
                found
            };
            let graph_hits = hits.len();
            for &d in &self.pending {
                if allowed(d)
                    && let Some(v) = self.get(d)
                {
                    hits.push(VectorHit { docno: d, score: cosine(query, v) });
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
            if !allowed(docno) {
                continue;
            }
            let v = &self.arena[slot * self.dim..(slot + 1) * self.dim];
            hits.push(VectorHit { docno, score: cosine(query, v) });
        }
        top_k(&mut hits, k);
        hits
    }
}

/// Keeps the `k` best hits, sorted by descending score then ascending docno (deterministic ties).
pub fn top_k(hits: &mut Vec<VectorHit>, k: usize) {
    let cmp = |a: &VectorHit, b: &VectorHit| b.score.total_cmp(&a.score).then(a.docno.cmp(&b.docno));
    if hits.len() > k {
        hits.select_nth_unstable_by(k, cmp);
        hits.truncate(k);
    }
    hits.sort_by(cmp);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(seed: u64, dim: usize) -> Vec<f32> {
        let mut x = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let mut v: Vec<f32> = (0..dim)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x % 2000) as f32 / 1000.0 - 1.0
            })
            .collect();
        let n = v.iter().map(|a| a * a).sum::<f32>().sqrt();
        v.iter_mut().for_each(|a| *a /= n);
        v
    }

    #[test]
    fn graph_pending_and_exact_agree_and_removed_points_never_return() {
        let params = VectorParams { hnsw_min_points: 200, ..VectorParams::default() };
        let mut idx = SpaceVectors::new(32, params);
        let items: Vec<(u64, Vec<f32>)> = (0..600).map(|i| (i, unit(i, 32))).collect();
        idx.insert_batch(&items);
        assert!(!idx.has_graph(), "graphs are built by the builder, not on the write path");
        idx.build_now();
        assert!(idx.has_graph());
        // New vectors are pending, and found before the builder inserts them.
        let late: Vec<(u64, Vec<f32>)> = (600..650).map(|i| (i, unit(i, 32))).collect();
        idx.insert_batch(&late);
        assert_eq!(idx.pending(), 50);
        let all = |_: u64| true;
        assert_eq!(idx.search(&unit(625, 32), 1, &all, None)[0].docno, 625);
        for d in 0..100 {
            idx.remove(d);
        }
        let mut agree = 0;
        for q in 0..20u64 {
            let query = unit(1000 + q, 32);
            let approx = idx.search(&query, 10, &all, None);
            let exact = idx.exact(&query, 10, &all);
            assert_eq!(approx.len(), 10);
            assert!(approx.iter().all(|h| h.docno >= 100));
            agree += approx.iter().filter(|h| exact.iter().any(|e| e.docno == h.docno)).count();
        }
        assert!(agree >= 180, "recall too low: {agree}/200");
        idx.build_now();
        assert_eq!(idx.pending(), 0);
        let only_even = |d: u64| d.is_multiple_of(2);
        let hits = idx.search(&unit(7, 32), 10, &only_even, Some(275));
        assert_eq!(hits.len(), 10);
        assert!(hits.iter().all(|h| h.docno % 2 == 0));
        let one = |d: u64| d == 333;
        assert_eq!(idx.search(&unit(9, 32), 10, &one, None).len(), 1);
    }
}
