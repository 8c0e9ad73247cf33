//! Vector index of one space: a dense arena of L2-normalised vectors plus, once the space holds
//! [`VectorParams::hnsw_min_points`] vectors, an HNSW graph (Malkov and Yashunin, "Efficient and robust approximate
//! nearest neighbor search using Hierarchical Navigable Small World graphs", IEEE TPAMI 2018) from `hnsw_rs`.
//!
//! Below the threshold, and whenever a filter leaves few candidates, search is exact (a scan of the arena), which
//! is both faster and exact at that size (the same idea as qdrant's `indexing_threshold`). `hnsw_rs` cannot delete
//! or update points, so removed documents stay in the graph as tombstones, skipped by the search filter, and the
//! graph is rebuilt when tombstones pass a quarter of its points.
//!
//! Ids are the store's document numbers (`docno`, u64), which change whenever a memory's text changes, so a graph
//! point never stands for two versions of a text.

use std::collections::HashMap;

use hnsw_rs::prelude::{Distance, Hnsw};

use crate::embed::cosine;

/// HNSW and exact-search parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct VectorParams {
    /// `M`: links per node and layer (2..=64; `hnsw_rs` allows at most 256).
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
        VectorParams { m: 16, ef_construction: 128, ef_search: 96, hnsw_min_points: 4096, exact_max_candidates: 4096 }
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

/// The vectors of one space.
pub struct SpaceVectors {
    dim: usize,
    params: VectorParams,
    arena: Vec<f32>,
    slot_docno: Vec<u64>,
    slot_of: HashMap<u64, usize>,
    hnsw: Option<Hnsw<'static, f32, ClampedDot>>,
    /// Points in the graph that are no longer live.
    graph_dead: usize,
    graph_points: usize,
}

impl SpaceVectors {
    /// An empty index for vectors of `dim` floats.
    pub fn new(dim: usize, params: VectorParams) -> Self {
        SpaceVectors {
            dim,
            params,
            arena: Vec::new(),
            slot_docno: Vec::new(),
            slot_of: HashMap::new(),
            hnsw: None,
            graph_dead: 0,
            graph_points: 0,
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

    /// Whether an HNSW graph serves unfiltered searches.
    pub fn has_graph(&self) -> bool {
        self.hnsw.is_some()
    }

    /// The vector of `docno`, if live.
    pub fn get(&self, docno: u64) -> Option<&[f32]> {
        self.slot_of.get(&docno).map(|&s| &self.arena[s * self.dim..(s + 1) * self.dim])
    }

    /// Adds vectors (each of `dim` floats; others are ignored). Builds the graph when the space crosses the
    /// threshold, inserts into it (in parallel for large batches) when it exists.
    pub fn insert_batch(&mut self, items: &[(u64, Vec<f32>)]) {
        let mut added: Vec<(u64, usize)> = Vec::with_capacity(items.len());
        for (docno, v) in items {
            if v.len() != self.dim {
                continue;
            }
            if self.slot_of.contains_key(docno) {
                self.remove(*docno);
            }
            let slot = self.slot_docno.len();
            self.arena.extend_from_slice(v);
            self.slot_docno.push(*docno);
            self.slot_of.insert(*docno, slot);
            added.push((*docno, slot));
        }
        if self.hnsw.is_none() {
            if self.len() >= self.params.hnsw_min_points {
                self.rebuild_graph();
            }
            return;
        }
        let data: Vec<(&[f32], usize)> =
            added.iter().filter_map(|(d, _)| self.get(*d).map(|v| (v, *d as usize))).collect();
        if let Some(h) = &self.hnsw {
            if data.len() >= 64 {
                h.parallel_insert_slice(&data);
            } else {
                for (v, id) in &data {
                    h.insert_slice((v, *id));
                }
            }
            self.graph_points += data.len();
        }
    }

    /// Removes a vector. Its graph point becomes a tombstone; many tombstones trigger a rebuild.
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
        if self.hnsw.is_some() {
            self.graph_dead += 1;
            if self.len() < self.params.hnsw_min_points / 2 {
                self.hnsw = None;
                self.graph_dead = 0;
                self.graph_points = 0;
            } else if self.graph_dead * 4 > self.graph_points {
                self.rebuild_graph();
            }
        }
    }

    /// Builds the graph from the live vectors (parallel insert).
    pub fn rebuild_graph(&mut self) {
        let n = self.len();
        let max_layer = 16;
        let h = Hnsw::<f32, ClampedDot>::new(
            self.params.m.clamp(2, 64),
            n.max(1024),
            max_layer,
            self.params.ef_construction.max(self.params.m),
            ClampedDot,
        );
        let data: Vec<(&[f32], usize)> =
            (0..n).map(|s| (&self.arena[s * self.dim..(s + 1) * self.dim], self.slot_docno[s] as usize)).collect();
        h.parallel_insert_slice(&data);
        self.hnsw = Some(h);
        self.graph_points = n;
        self.graph_dead = 0;
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
        if let (Some(h), false) = (&self.hnsw, small) {
            let ef = self.params.ef_search.max(k);
            let filter = |id: &usize| self.slot_of.contains_key(&(*id as u64)) && allowed(*id as u64);
            let found = h.search_filter(query, k, ef, Some(&filter));
            let hits: Vec<VectorHit> =
                found.iter().map(|n| VectorHit { docno: n.d_id as u64, score: 1.0 - n.distance }).collect();
            let enough = hits.len() >= k || candidates.is_some_and(|c| hits.len() >= c);
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
    fn graph_and_exact_agree_and_removed_points_never_return() {
        let params = VectorParams { hnsw_min_points: 200, ..VectorParams::default() };
        let mut idx = SpaceVectors::new(32, params);
        let items: Vec<(u64, Vec<f32>)> = (0..600).map(|i| (i, unit(i, 32))).collect();
        idx.insert_batch(&items);
        assert!(idx.has_graph());
        for d in 0..100 {
            idx.remove(d);
        }
        let all = |_: u64| true;
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
        let only_even = |d: u64| d % 2 == 0;
        let hits = idx.search(&unit(7, 32), 10, &only_even, Some(250));
        assert_eq!(hits.len(), 10);
        assert!(hits.iter().all(|h| h.docno % 2 == 0));
        let one = |d: u64| d == 333;
        assert_eq!(idx.search(&unit(9, 32), 10, &one, None).len(), 1);
    }
}
