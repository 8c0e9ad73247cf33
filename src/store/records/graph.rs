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
    super::value_at(&entity_community(tx)?, (space, entity), |c| c)
}

/// The communities with an entity in `space`.
///
/// # Errors
/// Storage errors.
pub(crate) fn communities_in<X: Tx>(tx: &X, space: &str) -> Result<std::collections::BTreeSet<u64>> {
    let mut ids = std::collections::BTreeSet::new();
    for row in entity_community(tx)?.range((space, "")..)? {
        let (k, v) = row?;
        if k.value().0 != space {
            break;
        }
        ids.insert(v.value());
    }
    Ok(ids)
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

/// Calls `f(community, space, entity, scaled PageRank)` for every community member, in key order.
///
/// # Errors
/// Storage errors.
pub(crate) fn each_member<X: Tx>(tx: &X, mut f: impl FnMut(u64, &str, &str, f64)) -> Result<()> {
    for row in community_members(tx)?.iter()? {
        let (k, v) = row?;
        let (c, s, e) = k.value();
        f(c, s, e, v.value());
    }
    Ok(())
}

/// Every entity's community: `(space, entity id)` -> community id.
///
/// # Errors
/// Storage errors.
pub(crate) fn entity_communities<X: Tx>(tx: &X) -> Result<rustc_hash::FxHashMap<(String, String), u64>> {
    let mut out = rustc_hash::FxHashMap::default();
    for row in entity_community(tx)?.iter()? {
        let (k, v) = row?;
        let (s, e) = k.value();
        out.insert((s.to_string(), e.to_string()), v.value());
    }
    Ok(out)
}

/// Crystal sources by crystal: `(space, crystal id)` -> `(memory id, weight)` in key order.
pub(crate) type CrystalSources = std::collections::BTreeMap<(String, String), Vec<(String, f64)>>;

/// Every crystal's sources: `(space, crystal id)` -> `(memory id, weight)` in key order.
///
/// # Errors
/// Storage errors.
pub(crate) fn all_crystal_sources<X: Tx>(tx: &X) -> Result<CrystalSources> {
    let mut out = CrystalSources::default();
    for row in crystal_sources(tx)?.iter()? {
        let (k, v) = row?;
        let (s, c, m) = k.value();
        out.entry((s.to_string(), c.to_string())).or_default().push((m.to_string(), v.value()));
    }
    Ok(out)
}

/// Calls `f(space, memory id, scaled PageRank)` for every memory with a rank, in key order (by space).
///
/// # Errors
/// Storage errors.
pub(crate) fn each_rank<X: Tx>(tx: &X, mut f: impl FnMut(&str, &str, f64)) -> Result<()> {
    for row in memory_pagerank(tx)?.iter()? {
        let (k, v) = row?;
        let (s, id) = k.value();
        f(s, id, v.value());
    }
    Ok(())
}

/// The scaled PageRank of each of `keys` (`(space, memory id)`), in the order of `keys` (`None` without one):
/// one statement on PostgreSQL.
///
/// # Errors
/// Storage errors.
pub(crate) fn ranks_of<X: Tx>(tx: &X, keys: &[(&str, &str)]) -> Result<Vec<Option<f64>>> {
    Ok(memory_pagerank(tx)?.get_many(keys)?.into_iter().map(|v| v.map(|v| v.value())).collect())
}
