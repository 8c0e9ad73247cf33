//! The derived graph: communities, their members, each entity's community, memory PageRank and crystal sources: the only place these kinds are opened.

use super::{Bytes, K2, K3, Records, Tx};
use crate::error::Result;
use crate::model::Community;
use crate::storage::tables::{COMMUNITIES, COMMUNITY_MEMBERS, CRYSTAL_SOURCES, ENTITY_COMMUNITY, MEMORY_PAGERANK};

/// community id -> [`Community`] (derived; replaced by every recomputation).
///
/// # Errors
/// Storage errors.
pub(crate) fn communities<X: Tx>(tx: &X) -> Result<Records<X::Table<'_, u64, Bytes>, u64, Community>> {
    super::records(tx, COMMUNITIES)
}

/// `(community id, space id, entity id)` -> the entity's scaled PageRank.
///
/// # Errors
/// Storage errors.
pub(crate) fn community_members<X: Tx>(tx: &X) -> Result<X::Table<'_, (u64, &'static str, &'static str), f64>> {
    tx.open(COMMUNITY_MEMBERS)
}

/// `(space id, entity id)` -> community id.
///
/// # Errors
/// Storage errors.
pub(crate) fn entity_community<X: Tx>(tx: &X) -> Result<X::Table<'_, K2, u64>> {
    tx.open(ENTITY_COMMUNITY)
}

/// `(space id, memory id)` -> PageRank scaled to 0..=1.
///
/// # Errors
/// Storage errors.
pub(crate) fn memory_pagerank<X: Tx>(tx: &X) -> Result<X::Table<'_, K2, f64>> {
    tx.open(MEMORY_PAGERANK)
}

/// CRYSTALLIZED_FROM edges: `(space id, crystal id, source memory id)` -> contribution weight.
///
/// # Errors
/// Storage errors.
pub(crate) fn crystal_sources<X: Tx>(tx: &X) -> Result<X::Table<'_, K3, f64>> {
    tx.open(CRYSTAL_SOURCES)
}
