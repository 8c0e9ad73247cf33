//! Memory relations, relations by memory and where each relation lives: the only place these kinds are opened.

use super::{Bytes, K1, K2, K3, Records, Tx};
use crate::error::Result;
use crate::storage::tables::{MEMORY_RELATIONS, RELATION_SPACE, RELATIONS};
use crate::store::MemoryRelation;

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
