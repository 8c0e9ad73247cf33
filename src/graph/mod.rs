//! Graph algorithms over weighted undirected graphs given as edge lists: Louvain community detection,
//! PageRank, and stable community ids across recomputations. Pure functions, no storage.
//!
//! Nodes are `0..n`; edges are `(u, v, weight)` with `weight > 0`, each undirected edge listed once
//! (a repeated pair adds up; `u == v` is a self-loop).

use rustc_hash::FxHashMap;

/// A weighted undirected graph in compressed sparse row form.
#[derive(Debug, Clone)]
struct Csr {
    offsets: Vec<usize>,
    targets: Vec<u32>,
    weights: Vec<f64>,
    /// Self-loop weight of each node.
    loops: Vec<f64>,
    /// Weighted degree (a self-loop counts twice).
    degree: Vec<f64>,
    /// Sum of all degrees (2m).
    total: f64,
}

impl Csr {
    fn new(n: usize, edges: &[(u32, u32, f64)]) -> Self {
        let mut count = vec![0usize; n + 1];
        let mut loops = vec![0.0; n];
        let mut degree = vec![0.0; n];
        for &(u, v, w) in edges {
            let (u, v) = (u as usize, v as usize);
            if u == v {
                loops[u] += w;
                degree[u] += 2.0 * w;
            } else {
                count[u + 1] += 1;
                count[v + 1] += 1;
                degree[u] += w;
                degree[v] += w;
            }
        }
        for i in 0..n {
            count[i + 1] += count[i];
        }
        let offsets = count.clone();
        let mut fill = count;
        let mut targets = vec![0u32; offsets[n]];
        let mut weights = vec![0.0; offsets[n]];
        for &(u, v, w) in edges {
            if u == v {
                continue;
            }
            for (a, b) in [(u, v), (v, u)] {
                let slot = fill[a as usize];
                targets[slot] = b;
                weights[slot] = w;
                fill[a as usize] += 1;
            }
        }
        let total = degree.iter().sum();
        Csr { offsets, targets, weights, loops, degree, total }
    }

    fn n(&self) -> usize {
        self.degree.len()
    }

    fn neighbours(&self, i: usize) -> impl Iterator<Item = (usize, f64)> + '_ {
        let r = self.offsets[i]..self.offsets[i + 1];
        self.targets[r.clone()].iter().zip(&self.weights[r]).map(|(t, w)| (*t as usize, *w))
    }
}

/// Result of [`louvain`].
#[derive(Debug, Clone, PartialEq)]
pub struct Partition {
    /// Community of each node, numbered `0..communities` in order of each community's smallest node.
    pub community: Vec<u32>,
    /// Number of communities.
    pub communities: usize,
    /// Newman-Girvan modularity of the partition (resolution 1), in -0.5..1.
    pub modularity: f64,
    /// Aggregation levels run.
    pub levels: usize,
}

/// One local-moving phase: moves nodes (in index order, so the result is deterministic) to the neighbouring
/// community of best modularity gain until a pass moves nothing. Returns the community of each node and
/// whether anything moved.
fn local_moving(g: &Csr, resolution: f64) -> (Vec<usize>, bool) {
    let n = g.n();
    let mut com: Vec<usize> = (0..n).collect();
    let mut tot: Vec<f64> = g.degree.clone();
    let mut scratch = vec![0.0f64; n];
    let mut touched: Vec<usize> = Vec::new();
    let mut moved_any = false;
    if g.total <= 0.0 {
        return (com, false);
    }
    for _pass in 0..100 {
        let mut moved = 0usize;
        for i in 0..n {
            let ci = com[i];
            let ki = g.degree[i];
            for (j, w) in g.neighbours(i) {
                let cj = com[j];
                if scratch[cj] == 0.0 {
                    touched.push(cj);
                }
                scratch[cj] += w;
            }
            // Take i out of its community.
            tot[ci] -= ki;
            let ratio = resolution * ki / g.total;
            let mut best = ci;
            let mut best_gain = scratch[ci] - tot[ci] * ratio;
            touched.sort_unstable();
            for &c in &touched {
                let gain = scratch[c] - tot[c] * ratio;
                if gain > best_gain + 1e-12 {
                    best = c;
                    best_gain = gain;
                }
            }
            tot[best] += ki;
            if best != ci {
                com[i] = best;
                moved += 1;
            }
            for &c in &touched {
                scratch[c] = 0.0;
            }
            touched.clear();
        }
        if moved == 0 {
            break;
        }
        moved_any = true;
    }
    (com, moved_any)
}

/// Renumbers community labels `0..k` in order of first appearance; returns the new labels and k.
fn renumber(com: &[usize]) -> (Vec<u32>, usize) {
    let mut map: FxHashMap<usize, u32> = FxHashMap::default();
    let out = com
        .iter()
        .map(|c| {
            let next = map.len() as u32;
            *map.entry(*c).or_insert(next)
        })
        .collect();
    (out, map.len())
}

/// Newman-Girvan modularity of `community` on `g` with the given resolution.
fn modularity(g: &Csr, community: &[u32], k: usize, resolution: f64) -> f64 {
    if g.total <= 0.0 {
        return 0.0;
    }
    let mut inside = vec![0.0; k];
    let mut tot = vec![0.0; k];
    for i in 0..g.n() {
        let c = community[i] as usize;
        tot[c] += g.degree[i];
        inside[c] += 2.0 * g.loops[i];
        for (j, w) in g.neighbours(i) {
            if community[j] as usize == c {
                inside[c] += w;
            }
        }
    }
    (0..k).map(|c| inside[c] / g.total - resolution * (tot[c] / g.total).powi(2)).sum()
}

/// Louvain community detection (Blondel, Guillaume, Lambiotte and Lefebvre, "Fast unfolding of communities in
/// large networks", J. Stat. Mech. 2008): local moving of nodes by modularity gain, then aggregation of each
/// community into one node, repeated until nothing moves. Deterministic: nodes are visited in index order and
/// ties go to the smallest community label. `resolution` 1.0 is classic modularity; larger values give more,
/// smaller communities. Isolated nodes are communities of their own. O(edges) per pass.
pub fn louvain(n: usize, edges: &[(u32, u32, f64)], resolution: f64) -> Partition {
    let base = Csr::new(n, edges);
    let mut membership: Vec<u32> = (0..n as u32).collect();
    let mut g = base.clone();
    let mut levels = 0;
    loop {
        let (com, moved) = local_moving(&g, resolution);
        if !moved {
            break;
        }
        levels += 1;
        let (labels, k) = renumber(&com);
        for m in membership.iter_mut() {
            *m = labels[*m as usize];
        }
        // Aggregate: one node per community, summed edge weights, internal weight as self-loops.
        let mut agg: FxHashMap<(u32, u32), f64> = FxHashMap::default();
        for i in 0..g.n() {
            let ci = labels[i];
            if g.loops[i] > 0.0 {
                *agg.entry((ci, ci)).or_default() += g.loops[i];
            }
            for (j, w) in g.neighbours(i) {
                if j < i {
                    continue; // each undirected edge once
                }
                let cj = labels[j];
                *agg.entry((ci.min(cj), ci.max(cj))).or_default() += w;
            }
        }
        let mut next: Vec<(u32, u32, f64)> = agg.into_iter().map(|((a, b), w)| (a, b, w)).collect();
        next.sort_unstable_by_key(|x| (x.0, x.1));
        g = Csr::new(k, &next);
        if k == 1 || levels >= 32 {
            break;
        }
    }
    // Number communities by their smallest node.
    let as_usize: Vec<usize> = membership.iter().map(|c| *c as usize).collect();
    let (community, communities) = renumber(&as_usize);
    let modularity = modularity(&base, &community, communities, resolution);
    Partition { community, communities, modularity, levels }
}

/// PageRank (Page, Brin, Motwani and Winograd, "The PageRank Citation Ranking", 1999) on a weighted
/// undirected graph: each node passes `damping` of its score to its neighbours in proportion to edge weight,
/// the rest (and the score of nodes without edges) is spread evenly. Power iteration until the L1 change is
/// below `1e-9` or 100 iterations. Scores sum to 1.
pub fn pagerank(n: usize, edges: &[(u32, u32, f64)], damping: f64) -> Vec<f64> {
    if n == 0 {
        return Vec::new();
    }
    let g = Csr::new(n, edges);
    let out_weight: Vec<f64> = (0..n).map(|i| g.neighbours(i).map(|(_, w)| w).sum()).collect();
    let uniform = 1.0 / n as f64;
    let mut rank = vec![uniform; n];
    let mut next = vec![0.0; n];
    for _ in 0..100 {
        let dangling: f64 = (0..n).filter(|i| out_weight[*i] <= 0.0).map(|i| rank[i]).sum();
        let base = (1.0 - damping) * uniform + damping * dangling * uniform;
        next.iter_mut().for_each(|x| *x = base);
        for i in 0..n {
            if out_weight[i] <= 0.0 {
                continue;
            }
            let share = damping * rank[i] / out_weight[i];
            for (j, w) in g.neighbours(i) {
                next[j] += share * w;
            }
        }
        let delta: f64 = rank.iter().zip(&next).map(|(a, b)| (a - b).abs()).sum();
        std::mem::swap(&mut rank, &mut next);
        if delta < 1e-9 {
            break;
        }
    }
    rank
}

/// Stable ids for recomputed communities. `new` lists each new community's member keys; `old` maps a key to
/// the id of its previous community, with `old_sizes` the previous community sizes. A new community takes the
/// id of the previous community it overlaps most when the overlap is at least half of both (so a community
/// that persists, grows or shrinks a little keeps its id); each old id is used once, larger new communities
/// first; others get fresh ids from `next_id` on. Returns the ids and the next free id.
pub fn stable_ids<K: std::hash::Hash + Eq>(
    new: &[Vec<K>],
    old: &FxHashMap<K, u64>,
    old_sizes: &FxHashMap<u64, usize>,
    mut next_id: u64,
) -> (Vec<u64>, u64) {
    let mut order: Vec<usize> = (0..new.len()).collect();
    order.sort_by(|a, b| new[*b].len().cmp(&new[*a].len()).then(a.cmp(b)));
    let mut used: rustc_hash::FxHashSet<u64> = Default::default();
    let mut ids = vec![0u64; new.len()];
    for i in order {
        let mut overlap: FxHashMap<u64, usize> = FxHashMap::default();
        for k in &new[i] {
            if let Some(id) = old.get(k) {
                *overlap.entry(*id).or_default() += 1;
            }
        }
        let mut best: Option<(usize, u64)> = None;
        for (id, count) in overlap {
            if used.contains(&id) {
                continue;
            }
            let old_size = old_sizes.get(&id).copied().unwrap_or(usize::MAX);
            let fits = 2 * count >= new[i].len() && 2 * count >= old_size;
            if fits && best.is_none_or(|(c, bid)| count > c || (count == c && id < bid)) {
                best = Some((count, id));
            }
        }
        ids[i] = match best {
            Some((_, id)) => {
                used.insert(id);
                id
            }
            None => {
                while used.contains(&next_id) {
                    next_id += 1;
                }
                let id = next_id;
                next_id += 1;
                used.insert(id);
                id
            }
        };
    }
    (ids, next_id)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Zachary's karate club (34 members, 78 friendships), 0-based.
    const KARATE: [(u32, u32); 78] = [
        (0, 1),
        (0, 2),
        (0, 3),
        (0, 4),
        (0, 5),
        (0, 6),
        (0, 7),
        (0, 8),
        (0, 10),
        (0, 11),
        (0, 12),
        (0, 13),
        (0, 17),
        (0, 19),
        (0, 21),
        (0, 31),
        (1, 2),
        (1, 3),
        (1, 7),
        (1, 13),
        (1, 17),
        (1, 19),
        (1, 21),
        (1, 30),
        (2, 3),
        (2, 7),
        (2, 8),
        (2, 9),
        (2, 13),
        (2, 27),
        (2, 28),
        (2, 32),
        (3, 7),
        (3, 12),
        (3, 13),
        (4, 6),
        (4, 10),
        (5, 6),
        (5, 10),
        (5, 16),
        (6, 16),
        (8, 30),
        (8, 32),
        (8, 33),
        (9, 33),
        (13, 33),
        (14, 32),
        (14, 33),
        (15, 32),
        (15, 33),
        (18, 32),
        (18, 33),
        (19, 33),
        (20, 32),
        (20, 33),
        (22, 32),
        (22, 33),
        (23, 25),
        (23, 27),
        (23, 29),
        (23, 32),
        (23, 33),
        (24, 25),
        (24, 27),
        (24, 31),
        (25, 31),
        (26, 29),
        (26, 33),
        (27, 33),
        (28, 31),
        (28, 33),
        (29, 32),
        (29, 33),
        (30, 32),
        (30, 33),
        (31, 32),
        (31, 33),
        (32, 33),
    ];

    #[test]
    fn karate_club_reaches_known_modularity() {
        let edges: Vec<(u32, u32, f64)> = KARATE.iter().map(|(a, b)| (*a, *b, 1.0)).collect();
        let p = louvain(34, &edges, 1.0);
        // The best known partition has modularity 0.4198; Louvain finds 0.41-0.42.
        assert!(p.modularity > 0.40 && p.modularity < 0.42, "{}", p.modularity);
        assert!((3..=5).contains(&p.communities), "{}", p.communities);
        // The instructor (0) and the administrator (33) end up apart.
        assert_ne!(p.community[0], p.community[33]);
        assert_eq!(louvain(34, &edges, 1.0), p, "deterministic");
    }

    #[test]
    fn cliques_joined_by_a_bridge_split_and_isolated_nodes_stay_alone() {
        let mut edges = Vec::new();
        for base in [0u32, 5] {
            for a in 0..5 {
                for b in a + 1..5 {
                    edges.push((base + a, base + b, 1.0));
                }
            }
        }
        edges.push((4, 5, 1.0));
        let p = louvain(11, &edges, 1.0);
        assert_eq!(p.communities, 3);
        assert!(p.community[..5].iter().all(|c| *c == p.community[0]));
        assert!(p.community[5..10].iter().all(|c| *c == p.community[5]));
        assert_ne!(p.community[0], p.community[5]);
        assert_eq!(p.community[10], 2, "the isolated node is its own community, numbered last");
        assert_eq!(louvain(0, &[], 1.0).communities, 0);
    }

    #[test]
    fn pagerank_sums_to_one_and_favours_hubs() {
        let edges = [(0, 1, 1.0), (0, 2, 1.0), (0, 3, 1.0), (1, 2, 1.0)];
        let r = pagerank(5, &edges, 0.85);
        assert!((r.iter().sum::<f64>() - 1.0).abs() < 1e-9);
        assert!(r[0] > r[1] && r[1] > r[3] && r[3] > r[4]);
        assert!((r[1] - r[2]).abs() < 1e-12, "symmetric nodes score alike");
    }

    #[test]
    fn stable_ids_follow_persisting_communities() {
        let old: FxHashMap<&str, u64> = [("a", 7), ("b", 7), ("c", 7), ("x", 9), ("y", 9)].into_iter().collect();
        let sizes: FxHashMap<u64, usize> = [(7, 3), (9, 2)].into_iter().collect();
        let new = vec![vec!["x", "y", "z"], vec!["a", "b", "c", "d"], vec!["q"]];
        let (ids, next) = stable_ids(&new, &old, &sizes, 10);
        assert_eq!(ids, vec![9, 7, 10]);
        assert_eq!(next, 11);
    }
}
