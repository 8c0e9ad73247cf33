//! Memory relations, relations by memory and where each relation lives: the only place these kinds are opened.

use super::{Bytes, K1, K2, K3, Opened, Records, Tx};
use crate::error::Result;
use crate::model::MemoryRelation;
use crate::storage::tables::{MEMORY_RELATIONS, RELATION_SPACE, RELATIONS};
use crate::storage::{Table, WriteTx};

/// `(space id, relation id)` -> [`MemoryRelation`].
///
/// # Errors
/// Storage errors.
pub(crate) fn relations<X: Tx>(tx: &X) -> Result<Records<X::Table<'_, K2, Bytes>, K2, MemoryRelation>> {
    super::records(tx, RELATIONS)
}

/// Relations by memory, both ends: `(space id, memory id, relation id)`.
///
/// # Errors
/// Storage errors.
pub(crate) fn memory_relations<X: Tx>(tx: &X) -> Result<X::Table<'_, K3, ()>> {
    tx.open(MEMORY_RELATIONS)
}

/// relation id -> space id.
///
/// # Errors
/// Storage errors.
pub(crate) fn relation_space<X: Tx>(tx: &X) -> Result<X::Table<'_, K1, &'static str>> {
    tx.open(RELATION_SPACE)
}

/// The space of relation `id`, if it exists.
///
/// # Errors
/// Storage errors.
pub(crate) fn space_of<X: Tx>(tx: &X, id: &str) -> Result<Option<String>> {
    super::value_at(&relation_space(tx)?, id, str::to_string)
}

/// The relation kinds of one write transaction (relations, relations by memory, where each lives), each
/// opened once.
pub(crate) struct Writer<'t> {
    records: Opened<'t, WriteTx, K2, MemoryRelation>,
    by_memory: Table<'t, K3, ()>,
    spaces: Table<'t, K1, &'static str>,
}

impl<'t> Writer<'t> {
    /// Opens the relation kinds in `txn`.
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn open(txn: &'t WriteTx) -> Result<Self> {
        Ok(Writer { records: relations(txn)?, by_memory: memory_relations(txn)?, spaces: relation_space(txn)? })
    }

    /// The space of relation `id`, if it exists (read through the open kind: the free [`space_of`] would open
    /// it a second time in this transaction).
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn space_of(&self, id: &str) -> Result<Option<String>> {
        super::value_at(&self.spaces, id, str::to_string)
    }

    /// Relation `id` of `space`.
    ///
    /// # Errors
    /// Storage errors; [`crate::ErrorKind::Corrupt`].
    pub(crate) fn get(&self, space: &str, id: &str) -> Result<Option<MemoryRelation>> {
        self.records.get((space, id))
    }

    /// The ids of the relations touching memory `memory` of `space` (either end), in order.
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn of_memory(&self, space: &str, memory: &str) -> Result<Vec<String>> {
        crate::storage::txn::range_prefix3(&self.by_memory, space, memory)
    }

    /// Stores relation `r` of `space` with its lookups (both ends, its space).
    ///
    /// # Errors
    /// Storage errors; [`crate::ErrorKind::Internal`] when the record does not encode.
    pub(crate) fn put(&mut self, space: &str, r: &MemoryRelation) -> Result<()> {
        self.records.put((space, r.id.as_str()), r)?;
        self.by_memory.put((space, r.source_memory_id.as_str(), r.id.as_str()), ())?;
        self.by_memory.put((space, r.target_memory_id.as_str(), r.id.as_str()), ())?;
        self.spaces.put(r.id.as_str(), space)
    }

    /// Deletes relation `r` of `space` with its lookups.
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn remove(&mut self, space: &str, r: &MemoryRelation) -> Result<()> {
        self.by_memory.remove((space, r.source_memory_id.as_str(), r.id.as_str()))?;
        self.by_memory.remove((space, r.target_memory_id.as_str(), r.id.as_str()))?;
        self.records.remove((space, r.id.as_str()))?;
        self.spaces.remove(r.id.as_str()).map(|_| ())
    }
}
