//! The derived graph: communities, their members, each entity's community, memory PageRank and crystal sources: the only place these kinds are opened.

use super::{Bytes, K2, K3, Records, Tx};
use crate::error::Result;
use crate::model::Community;
use crate::storage::Readable;
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

/// The community of entity `entity` of `space`, if it belongs to one.
///
/// # Errors
/// Storage errors.
pub(crate) fn community_of<X: Tx>(tx: &X, space: &str, entity: &str) -> Result<Option<u64>> {
    Ok(entity_community(tx)?.get((space, entity))?.map(|v| v.value()))
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

/// The source memories of crystal `crystal` in `space`, with their contribution weights, in id order.
///
/// # Errors
/// Storage errors.
pub(crate) fn crystal_sources_of<X: Tx>(tx: &X, space: &str, crystal: &str) -> Result<Vec<(String, f64)>> {
    crate::storage::txn::range_prefix3_with(&crystal_sources(tx)?, space, crystal, |w| w)
}

/// The members of community `id`: (space id, entity id, scaled PageRank), in key order.
///
/// # Errors
/// Storage errors.
pub(crate) fn members_of(
    t: &impl Readable<(u64, &'static str, &'static str), f64>,
    id: u64,
) -> Result<Vec<(String, String, f64)>> {
    let mut out = Vec::new();
    for row in t.range((id, "", "")..)? {
        let (k, v) = row?;
        let (c, s, e) = k.value();
        if c != id {
            break;
        }
        out.push((s.to_string(), e.to_string(), v.value()));
    }
    Ok(out)
}

/// Calls `f` with each stored memory PageRank of `space` (memory id, rank), in id order.
///
/// # Errors
/// Storage errors.
pub(crate) fn each_rank_in<X: Tx>(tx: &X, space: &str, mut f: impl FnMut(&str, f64)) -> Result<()> {
    for row in memory_pagerank(tx)?.range((space, "")..)? {
        let (k, v) = row?;
        let (s, id) = k.value();
        if s != space {
            break;
        }
        f(id, v.value());
    }
    Ok(())
}
