//! The graph results a search reads, held in memory: the memory PageRank of every space and the last graph
//! report. The graph service (`store/graph/compute.rs`) computes and stores them; this is their loader, run at
//! open beside the index load ([`super::load::with_graph_state`]) and again when the change feed says that
//! another process recomputed them.

use std::collections::HashMap;

use crate::error::Result;
use crate::model::GraphReport;
use crate::storage::Readable;
use crate::store::records::{graph, meta};

/// Graph results held in memory: memory PageRank by space and id.
#[derive(Debug, Default)]
pub(crate) struct GraphState {
    pub memory_rank: HashMap<String, SpaceRanks>,
    pub last: Option<GraphReport>,
    /// Set by [`Graph::wait`](crate::store::Graph::wait): a caller waits, so the worker skips its rest.
    pub demanded: std::sync::atomic::AtomicBool,
}

/// The memory PageRank of one space: memory id -> rank (scaled so the graph's top memory is 1).
///
/// The ids lie end to end in one string and a hash table holds row numbers only, so `n` ranks are four
/// allocations of about `n x (id length + 21)` bytes plus the table's spare buckets (about 67 MB at 1,000,000
/// memories with 36-byte ids), where a `HashMap<String, f32>` made `n + 1` allocations and probed a table of
/// 32-byte entries instead of 8. Reading the
/// ranks is a step of every open (1,000,000 rows: about 0.8 s as a map of strings). The hasher is std's keyed
/// SipHash, as in `HashMap`: ids come from users.
#[derive(Debug, Default)]
pub(crate) struct SpaceRanks {
    /// Every id, end to end, in insertion order.
    ids: String,
    /// Where each row's id ends in `ids` (bytes); row `i` spans `ends[i - 1]..ends[i]`.
    ends: Vec<usize>,
    /// Each row's rank.
    ranks: Vec<f32>,
    /// Row numbers, hashed by their id.
    rows: hashbrown::HashTable<usize>,
    hasher: std::hash::RandomState,
}

impl SpaceRanks {
    /// An empty map with room for `n` ids of about `id_len` bytes each.
    pub(crate) fn with_capacity(n: usize, id_len: usize) -> Self {
        Self {
            ids: String::with_capacity(n.saturating_mul(id_len)),
            ends: Vec::with_capacity(n),
            ranks: Vec::with_capacity(n),
            rows: hashbrown::HashTable::with_capacity(n),
            hasher: std::hash::RandomState::new(),
        }
    }

    fn id<'a>(ids: &'a str, ends: &[usize], row: usize) -> &'a str {
        let start = if row == 0 { 0 } else { ends[row - 1] };
        &ids[start..ends[row]]
    }

    /// Sets the rank of `id`, replacing any earlier one.
    pub(crate) fn insert(&mut self, id: &str, rank: f32) {
        use std::hash::BuildHasher;
        let hash = self.hasher.hash_one(id);
        let Self { ids, ends, ranks, rows, hasher } = self;
        let entry =
            rows.entry(hash, |&row| Self::id(ids, ends, row) == id, |&row| hasher.hash_one(Self::id(ids, ends, row)));
        match entry {
            hashbrown::hash_table::Entry::Occupied(e) => ranks[*e.get()] = rank,
            hashbrown::hash_table::Entry::Vacant(e) => {
                e.insert(ranks.len());
                ids.push_str(id);
                ends.push(ids.len());
                ranks.push(rank);
            }
        }
    }

    /// The rank of `id`, if it has one.
    pub(crate) fn get(&self, id: &str) -> Option<f32> {
        use std::hash::BuildHasher;
        let hash = self.hasher.hash_one(id);
        self.rows.find(hash, |&row| Self::id(&self.ids, &self.ends, row) == id).map(|&row| self.ranks[row])
    }

    /// Ranked memories.
    pub(crate) fn len(&self) -> usize {
        self.ranks.len()
    }

    /// Estimated bytes held: the ids, their ends, the ranks and the row table.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.ids.capacity()
            + self.ends.capacity() * 8
            + self.ranks.capacity() * 4
            + crate::index::table_bytes(self.rows.capacity(), 8)
    }

    /// Gives back the room not used.
    fn shrink_to_fit(&mut self) {
        use std::hash::BuildHasher;
        let Self { ids, ends, ranks, rows, hasher } = self;
        ids.shrink_to_fit();
        ends.shrink_to_fit();
        ranks.shrink_to_fit();
        rows.shrink_to_fit(|&row| hasher.hash_one(Self::id(ids, ends, row)));
    }
}

/// The stored memory PageRank and the last graph report (at open, after an import, and when another process
/// sharing the database recomputed the graph).
///
/// # Errors
/// Storage errors.
pub(crate) fn load_graph_state(db: &crate::storage::Db, ranks: bool) -> Result<GraphState> {
    let memory_rank = if ranks { load_ranks(db)? } else { HashMap::new() };
    let rtx = db.read()?;
    let last = meta::meta(&rtx)?.json("graph_report")?;
    Ok(GraphState { memory_rank, last, ..Default::default() })
}

/// Loads stored memory PageRank into memory: space -> memory id -> rank.
///
/// The rows come in (space, id) order, so each space's map is filled without looking the space up again, and
/// the first is sized for every row (the table's length is kept by redb; one space is the common store) with
/// room for ids as long as the first: at 1,000,000 memories this read is the last step of an open
/// ([`super::load::with_graph_state`]).
///
/// # Errors
/// Storage errors.
pub(crate) fn load_ranks(db: &crate::storage::Db) -> Result<HashMap<String, SpaceRanks>> {
    let rtx = db.read()?;
    let rows = usize::try_from(graph::memory_pagerank(&rtx)?.len()?).unwrap_or(0);
    let mut out: HashMap<String, SpaceRanks> = HashMap::new();
    let mut current: Option<(String, SpaceRanks)> = None;
    graph::each_rank(&rtx, |s, m, rank| {
        if current.as_ref().is_none_or(|(c, _)| c != s) {
            if let Some((c, ranks)) = current.take() {
                out.insert(c, ranks);
            }
            let ranks = if out.is_empty() {
                SpaceRanks::with_capacity(rows, m.len())
            } else {
                out.remove(s).unwrap_or_default()
            };
            current = Some((s.to_string(), ranks));
        }
        if let Some((_, ranks)) = current.as_mut() {
            ranks.insert(m, rank as f32);
        }
    })?;
    if let Some((c, ranks)) = current {
        out.insert(c, ranks);
    }
    // The first space was sized for the whole table: give back what it does not use.
    for ranks in out.values_mut().filter(|r| r.len() * 2 < r.ranks.capacity()) {
        ranks.shrink_to_fit();
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
