//! Entities, their lookup keys, the MENTIONS edges both ways and the RELATES_TO edges: the only place these kinds are opened.

use super::{Bytes, K2, K3, Records, Tx};
use crate::error::Result;
use crate::model::Entity;
use crate::storage::tables::{ENTITIES, ENTITY_KEYS, ENTITY_MEMORIES, MENTIONS, RELATES_TO};

/// `(space id, entity id)` -> [`Entity`].
///
/// # Errors
/// Storage errors.
pub(crate) fn entities<X: Tx>(tx: &X) -> Result<Records<X::Table<'_, K2, Bytes>, K2, Entity>> {
    super::records(tx, ENTITIES)
}

/// `(space id, <kind>:<lowercased name or alias>)` -> entity id.
///
/// # Errors
/// Storage errors.
pub(crate) fn entity_keys<X: Tx>(tx: &X) -> Result<X::Table<'_, K2, &'static str>> {
    tx.open(ENTITY_KEYS)
}

/// MENTIONS edges: `(space id, memory id, entity id)`.
///
/// # Errors
/// Storage errors.
pub(crate) fn mentions<X: Tx>(tx: &X) -> Result<X::Table<'_, K3, ()>> {
    tx.open(MENTIONS)
}

/// MENTIONS edges reversed: `(space id, entity id, memory id)`.
///
/// # Errors
/// Storage errors.
pub(crate) fn entity_memories<X: Tx>(tx: &X) -> Result<X::Table<'_, K3, ()>> {
    tx.open(ENTITY_MEMORIES)
}

/// RELATES_TO edges, both directions: `(space id, entity, other entity)` -> weight (memories mentioning both).
///
/// # Errors
/// Storage errors.
pub(crate) fn relates_to<X: Tx>(tx: &X) -> Result<X::Table<'_, K3, u64>> {
    tx.open(RELATES_TO)
}
