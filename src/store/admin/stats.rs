//! Store statistics (`/stats`): counters of one space or of the whole store.

use crate::storage::Readable;

use super::Admin;
use crate::error::Result;
use crate::model::MemoryState;
use crate::store::StoredMemory;
use crate::store::records::graph;
use crate::store::{entity, label, memory, relation, thread};

/// Store counters for `/stats`.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
pub struct StoreStats {
    /// Memories that are not forgotten.
    pub memory_count: u64,
    /// Threads.
    pub thread_count: u64,
    /// Messages.
    pub message_count: u64,
    /// Entities.
    pub entity_count: u64,
    /// Communities with a member in the space (all communities without a space).
    pub community_count: u64,
    /// Labels.
    pub label_count: u64,
    /// Crystals.
    pub crystal_count: u64,
    /// Memories, threads, messages, entities and labels.
    pub total_nodes: u64,
    /// HAS_LABEL, MENTIONS and RELATES_TO (each pair once) edges.
    pub total_relationships: u64,
}

impl Admin<'_> {
    /// Counters of one space, or of every space when `space` is None.
    ///
    /// # Errors
    /// [`crate::ErrorKind::NotFound`] (`space_not_found`); storage errors.
    pub fn stats(&self, space: Option<&str>) -> Result<StoreStats> {
        if let Some(sp) = space {
            self.store.spaces().require(sp)?;
        }
        let rtx = self.store.core.db.read()?;
        let mut s = StoreStats::default();
        // Counts the rows of a kind whose key starts with the space (all rows without a space): a record kind
        // (`rec`, keys only, nothing decoded) or an edge kind (`edge`).
        macro_rules! count {
            (rec $t:expr) => {{
                let t = $t(&rtx)?;
                match space {
                    None => t.len()?,
                    Some(sp) => t.count_keys(|k| k.0 == sp)?,
                }
            }};
            (edge $t:expr) => {{
                let t = $t(&rtx)?;
                match space {
                    None => t.len()?,
                    Some(sp) => crate::storage::txn::range_prefix1_count(&t, sp)?,
                }
            }};
        }
        let mut tally = |sm: StoredMemory| {
            if sm.memory.state != MemoryState::Forgotten {
                s.memory_count += 1;
                s.crystal_count += u64::from(sm.memory.is_crystal);
            }
        };
        let memories = memory::memories(&rtx)?;
        match space {
            Some(sp) => memories.each_in_space(sp, |_, sm| {
                tally(sm);
                true
            })?,
            None => {
                for row in memories.iter()? {
                    tally(row?.1);
                }
            }
        }
        s.thread_count = count!(rec thread::threads);
        s.message_count = count!(rec thread::messages);
        s.entity_count = count!(rec entity::entities);
        s.label_count = count!(rec label::labels);
        s.community_count = match space {
            None => graph::communities(&rtx)?.len()?,
            Some(sp) => graph::communities_in(&rtx, sp)?.len() as u64,
        };
        s.total_nodes = s.memory_count + s.thread_count + s.message_count + s.entity_count + s.label_count;
        s.total_relationships = count!(edge label::memory_labels)
            + count!(edge entity::mentions)
            + count!(edge entity::relates_to) / 2
            + count!(rec relation::relations);
        Ok(s)
    }
}
