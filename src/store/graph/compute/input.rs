//! The graph a recompute reads ([`read_graph`]), held compactly: it is read whole, once per recompute, beside
//! everything the store keeps in memory, so its size is part of the store's peak. At 1,000,000 memories each
//! memory node costs its id once (about 56 bytes with its row and table slot) where maps keyed by
//! `(String, String)` held every key three times (about 600 MiB at 1M, measured as a spike of peak RSS).

use hashbrown::HashTable;

use super::*;

/// No memory node (a memory read but not live).
const NONE: u32 = u32::MAX;

/// The memories a recompute saw, each key once: spaces by index, ids as boxed strings. Memory node `i` (node
/// `E + i` of the graph) is the live memory `seen[nodes[i]]`.
#[derive(Default)]
pub(super) struct MemoryNodes {
    spaces: Vec<String>,
    /// Space index and id of every memory read, live or not.
    seen: Vec<(u32, Box<str>)>,
    /// Per seen memory: its node, or [`NONE`].
    node: Vec<u32>,
    /// Per node: its row in `seen`.
    nodes: Vec<u32>,
    /// `seen` rows by `(space, id)`, hashed with a random key (ids are user input).
    index: HashTable<u32>,
    hasher: std::hash::RandomState,
}

impl MemoryNodes {
    /// Memory nodes.
    pub(super) fn len(&self) -> usize {
        self.nodes.len()
    }

    /// `(space, id)` of memory node `i`. Panics when `i >= len()` (node numbers come from this graph).
    pub(super) fn key(&self, i: u32) -> (&str, &str) {
        let (s, id) = &self.seen[self.nodes[i as usize] as usize];
        (self.spaces[*s as usize].as_str(), id)
    }

    /// Every memory node's `(space, id)`, in node order.
    pub(super) fn iter(&self) -> impl Iterator<Item = (&str, &str)> + '_ {
        (0..self.nodes.len() as u32).map(|i| self.key(i))
    }

    fn hash(&self, space: &str, id: &str) -> u64 {
        use std::hash::BuildHasher;
        self.hasher.hash_one((space, id))
    }

    /// The `seen` row of `(space, id)`, if it was read.
    fn find(&self, space: &str, id: &str) -> Option<u32> {
        let h = self.hash(space, id);
        self.index
            .find(h, |&r| {
                let (s, i) = &self.seen[r as usize];
                &**i == id && self.spaces[*s as usize] == space
            })
            .copied()
    }

    /// Records a memory read (its liveness decides whether it can become a node); returns its row.
    fn add(&mut self, space: &str, id: &str, live: bool) -> u32 {
        if let Some(r) = self.find(space, id) {
            return r;
        }
        let s = match self.spaces.iter().position(|x| x == space) {
            Some(s) => s as u32,
            None => {
                self.spaces.push(space.to_string());
                (self.spaces.len() - 1) as u32
            }
        };
        let row = self.seen.len() as u32;
        self.seen.push((s, id.into()));
        self.node.push(if live { NONE - 1 } else { NONE });
        let h = self.hash(space, id);
        let (seen, spaces, hasher) = (&self.seen, &self.spaces, &self.hasher);
        self.index.insert_unique(h, row, |&r| {
            use std::hash::BuildHasher;
            let (s, i) = &seen[r as usize];
            hasher.hash_one((spaces[*s as usize].as_str(), &**i))
        });
        row
    }

    /// The node of seen row `row`, made on its first mention; None for a memory that is not live.
    fn node_of(&mut self, row: u32) -> Option<u32> {
        match self.node[row as usize] {
            NONE => None,
            n if n == NONE - 1 => {
                let n = self.nodes.len() as u32;
                self.nodes.push(row);
                self.node[row as usize] = n;
                Some(n)
            }
            n => Some(n),
        }
    }

    /// Gives back the lookup table and the rows of memories that are not nodes' room (after reading).
    fn done(&mut self) {
        self.index = HashTable::new();
        self.node = Vec::new();
        self.seen.shrink_to_fit();
        self.nodes.shrink_to_fit();
    }
}

/// Per memory node, the entities it mentions, in one flat list (compressed sparse rows): node `i`'s are
/// `entities[offsets[i]..offsets[i + 1]]`, in the order the mentions were read.
#[derive(Default)]
pub(super) struct EntitiesOf {
    offsets: Vec<u32>,
    entities: Vec<u32>,
}

impl EntitiesOf {
    /// From `(memory node, entity)` pairs, for `nodes` nodes (a stable counting sort).
    fn of(nodes: usize, pairs: &[(u32, u32)]) -> Self {
        let mut offsets = vec![0u32; nodes + 1];
        for (m, _) in pairs {
            offsets[*m as usize + 1] += 1;
        }
        for i in 0..nodes {
            offsets[i + 1] += offsets[i];
        }
        let mut at = offsets.clone();
        let mut entities = vec![0u32; pairs.len()];
        for (m, e) in pairs {
            entities[at[*m as usize] as usize] = *e;
            at[*m as usize] += 1;
        }
        EntitiesOf { offsets, entities }
    }

    /// The entities memory node `i` mentions (empty for a node out of range).
    pub(super) fn get(&self, i: u32) -> &[u32] {
        let i = i as usize;
        match (self.offsets.get(i), self.offsets.get(i + 1)) {
            (Some(a), Some(b)) => &self.entities[*a as usize..*b as usize],
            _ => &[],
        }
    }
}

/// The graph as read in one snapshot: entities are nodes `0..E`, the live memories that mention them (active,
/// latest, not crystals) nodes `E..`; RELATES_TO edges between entities, MENTIONS edges from entity to memory.
pub(super) struct GraphInput {
    pub(super) entities: Vec<Entity>,
    pub(super) edges: Vec<(u32, u32, f64)>,
    pub(super) memory_nodes: MemoryNodes,
    pub(super) mention_edges: Vec<(u32, u32, f64)>,
    /// Per entity: the memory nodes (minus E) that mention it.
    pub(super) mentions_of: Vec<Vec<u32>>,
    /// Per memory node (minus E): the entities it mentions.
    pub(super) entities_of: EntitiesOf,
}

/// MENTIONS edges read per batch of memory reads in [`read_graph`].
const MENTION_CHUNK: usize = 2048;

/// Reads the entities, their RELATES_TO edges and every MENTIONS edge of a live memory in one snapshot.
pub(super) fn read_graph(rtx: &crate::storage::ReadTx) -> Result<GraphInput> {
    // Nodes: entities first (0..E), then memories.
    let mut entities: Vec<Entity> = Vec::new();
    let mut entity_index: FxHashMap<(String, String), u32> = FxHashMap::default();
    entity::entities(&rtx)?.each(|s, id, v| {
        entity_index.insert((s.to_string(), id.to_string()), entities.len() as u32);
        entities.push(v);
        true
    })?;
    let e_count = entities.len();
    let mut edges: Vec<(u32, u32, f64)> = Vec::new();
    rtx.relates_edges(|e| {
        if let (Some(x), Some(y)) = (entity_index.get(&(e.space.clone(), e.a)), entity_index.get(&(e.space, e.b))) {
            edges.push((*x, *y, e.weight as f64));
        }
    })?;
    // Memories that are not forgotten, and their mentions.
    let mems = memory::memories(&rtx)?;
    let mut memory_nodes = MemoryNodes::default();
    let mut mention_edges: Vec<(u32, u32, f64)> = Vec::new();
    let mut mentions_of: Vec<Vec<u32>> = vec![Vec::new(); e_count];
    let mut pairs: Vec<(u32, u32)> = Vec::new();
    // The mentions a chunk at a time; the memories they name that were not seen yet are read in one batch per
    // chunk (one statement on PostgreSQL, instead of one per memory).
    let mut chunk: Vec<(String, String, String)> = Vec::with_capacity(MENTION_CHUNK);
    let mentions = entity::mentions(&rtx)?;
    let mut rows =
        crate::storage::txn::map_rows(mentions.iter()?, |(s, m, e), ()| (s.to_string(), m.to_string(), e.to_string()));
    loop {
        chunk.clear();
        for row in rows.by_ref().take(MENTION_CHUNK) {
            chunk.push(row?);
        }
        if chunk.is_empty() {
            break;
        }
        let mut unseen: Vec<(&str, &str)> = chunk
            .iter()
            .filter(|(s, m, _)| memory_nodes.find(s, m).is_none())
            .map(|(s, m, _)| (s.as_str(), m.as_str()))
            .collect();
        unseen.sort_unstable();
        unseen.dedup();
        for (key, sm) in unseen.iter().zip(mems.get_many(&unseen)?) {
            // Sources of the graph: active, latest, not derived.
            let live = sm.is_some_and(|sm| {
                sm.memory.state == MemoryState::Active && sm.memory.is_latest && !sm.memory.is_crystal
            });
            memory_nodes.add(key.0, key.1, live);
        }
        for (s, m, e) in chunk.drain(..) {
            let Some(row) = memory_nodes.find(&s, &m) else { continue };
            let Some(ei) = entity_index.get(&(s, e)) else { continue };
            let Some(mi) = memory_nodes.node_of(row) else { continue };
            mention_edges.push((*ei, e_count as u32 + mi, 1.0));
            mentions_of[*ei as usize].push(mi);
            pairs.push((mi, *ei));
        }
    }
    memory_nodes.done();
    let entities_of = EntitiesOf::of(memory_nodes.len(), &pairs);
    Ok(GraphInput { entities, edges, memory_nodes, mention_edges, mentions_of, entities_of })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_nodes_keep_each_key_once_and_number_live_ones_on_first_mention() {
        let mut m = MemoryNodes::default();
        let a = m.add("s1", "a", true);
        let b = m.add("s1", "b", false);
        let c = m.add("s2", "a", true);
        assert_eq!(m.add("s1", "a", false), a, "a key is recorded once; its first liveness stands");
        assert_eq!((m.find("s1", "b"), m.find("s2", "b")), (Some(b), None));
        assert_eq!(m.node_of(c), Some(0));
        assert_eq!(m.node_of(b), None);
        assert_eq!(m.node_of(a), Some(1));
        assert_eq!(m.node_of(c), Some(0));
        m.done();
        assert_eq!(m.len(), 2);
        assert_eq!(m.iter().collect::<Vec<_>>(), vec![("s2", "a"), ("s1", "a")]);
    }

    #[test]
    fn entities_of_lists_each_nodes_mentions_in_reading_order() {
        let e = EntitiesOf::of(4, &[(2, 7), (0, 1), (2, 3), (0, 9), (3, 5)]);
        assert_eq!(
            (e.get(0), e.get(1), e.get(2), e.get(3), e.get(4)),
            (&[1, 9][..], &[][..], &[7, 3][..], &[5][..], &[][..])
        );
    }
}
