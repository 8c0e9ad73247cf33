//! Working memory (one markdown document per space and day: today's is the one being edited, earlier days
//! are its history), the context bundle, and store statistics.
use crate::storage::Readable;

use super::{KnowledgeStore, StoredMemory};
use crate::error::{Error, Result};
pub use crate::model::WorkingMemory;
use crate::model::{MemoryState, Timestamp};
use crate::store::{entity, graph, label, memory, relation, thread, working_memory};

/// Largest working-memory document in bytes.
pub const MAX_WORKING_MEMORY_BYTES: usize = 262_144;

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

/// Today's date, `YYYY-MM-DD` (UTC).
pub fn today() -> String {
    Timestamp::now().to_rfc3339()[..10].to_string()
}

impl KnowledgeStore {
    /// The working memory of `space` on `date` (default: the most recent day that has one).
    ///
    /// # Errors
    /// [`crate::ErrorKind::NotFound`] (`space_not_found`); [`crate::ErrorKind::InvalidInput`] for a date that
    /// is not `YYYY-MM-DD`.
    pub fn working_memory(&self, space: &str, date: Option<&str>) -> Result<Option<WorkingMemory>> {
        self.require_space(space)?;
        let rtx = self.core.db.read()?;
        match date {
            Some(d) => {
                if Timestamp::parse(d).is_none() || d.len() != 10 {
                    return Err(Error::invalid_value(&["date"], "date_parsing", "date is YYYY-MM-DD", d.into()));
                }
                working_memory::days(&rtx)?.get((space, d))
            }
            None => working_memory::latest(&rtx, space),
        }
    }

    /// Replaces today's working memory of `space`.
    ///
    /// # Errors
    /// [`crate::ErrorKind::NotFound`] (`space_not_found`); [`crate::ErrorKind::InvalidInput`] over 262,144 bytes.
    pub fn set_working_memory(&self, space: &str, content: &str) -> Result<WorkingMemory> {
        if content.len() > MAX_WORKING_MEMORY_BYTES {
            return Err(Error::invalid_value(
                &["content"],
                "string_too_long",
                "working memory is at most 262144 bytes",
                content.len().into(),
            ));
        }
        self.require_space(space)?;
        let wm = WorkingMemory {
            space_id: space.to_string(),
            date: today(),
            content: content.to_string(),
            updated_at: Timestamp::now(),
        };
        self.core.write(|txn, _| {
            working_memory::days(txn)?.put((space, wm.date.as_str()), &wm)?;
            Ok(())
        })?;
        Ok(wm)
    }

    /// Days of `space` with a working memory, newest first.
    ///
    /// # Errors
    /// [`crate::ErrorKind::NotFound`] (`space_not_found`).
    pub fn working_memory_history(&self, space: &str, limit: usize) -> Result<Vec<WorkingMemory>> {
        self.require_space(space)?;
        working_memory::recent(&self.core.db.read()?, space, limit)
    }

    /// Counters of one space, or of every space when `space` is None.
    ///
    /// # Errors
    /// [`crate::ErrorKind::NotFound`] (`space_not_found`); storage errors.
    pub fn stats(&self, space: Option<&str>) -> Result<StoreStats> {
        if let Some(sp) = space {
            self.require_space(sp)?;
        }
        let rtx = self.core.db.read()?;
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
                    Some(sp) => {
                        let mut n = 0u64;
                        for row in t.iter()? {
                            if row?.0.value().0 == sp {
                                n += 1;
                            }
                        }
                        n
                    }
                }
            }};
        }
        for row in memory::memories(&rtx)?.iter()? {
            let (k, v) = row?;
            if space.is_some_and(|sp| k.value().0 != sp) {
                continue;
            }
            let sm: StoredMemory = v;
            if sm.memory.state != MemoryState::Forgotten {
                s.memory_count += 1;
                s.crystal_count += u64::from(sm.memory.is_crystal);
            }
        }
        s.thread_count = count!(rec thread::threads);
        s.message_count = count!(rec thread::messages);
        s.entity_count = count!(rec entity::entities);
        s.label_count = count!(rec label::labels);
        s.community_count = match space {
            None => graph::communities(&rtx)?.len()?,
            Some(sp) => {
                let mut ids = std::collections::BTreeSet::new();
                for row in graph::entity_community(&rtx)?.iter()? {
                    let (k, v) = row?;
                    if k.value().0 == sp {
                        ids.insert(v.value());
                    }
                }
                ids.len() as u64
            }
        };
        s.total_nodes = s.memory_count + s.thread_count + s.message_count + s.entity_count + s.label_count;
        s.total_relationships = count!(edge label::memory_labels)
            + count!(edge entity::mentions)
            + count!(edge entity::relates_to) / 2
            + count!(rec relation::relations);
        Ok(s)
    }
}
