//! Entities, their lookup keys, the MENTIONS edges both ways and the RELATES_TO edges: the only place these kinds are opened.

use super::{Bytes, K2, K3, Opened, Records, Tx};
use crate::error::Result;
use crate::model::Entity;
use crate::storage::tables::{ENTITIES, ENTITY_KEYS, ENTITY_MEMORIES, MENTIONS, RELATES_TO};
use crate::storage::{Readable, Table, WriteTx};

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

/// The entity kinds of one write transaction (entities, their keys, MENTIONS both ways, RELATES_TO), each
/// opened once.
pub(crate) struct Writer<'t> {
    records: Opened<'t, WriteTx, K2, Entity>,
    keys: Table<'t, K2, &'static str>,
    mentions: Table<'t, K3, ()>,
    by_entity: Table<'t, K3, ()>,
    relates: Table<'t, K3, u64>,
}

impl<'t> Writer<'t> {
    /// Opens the entity kinds in `txn`.
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn open(txn: &'t WriteTx) -> Result<Self> {
        Ok(Writer {
            records: entities(txn)?,
            keys: entity_keys(txn)?,
            mentions: mentions(txn)?,
            by_entity: entity_memories(txn)?,
            relates: relates_to(txn)?,
        })
    }

    /// Entity `id` of `space`.
    ///
    /// # Errors
    /// Storage errors; [`crate::ErrorKind::Corrupt`].
    pub(crate) fn get(&self, space: &str, id: &str) -> Result<Option<Entity>> {
        self.records.get((space, id))
    }

    /// Entities `ids` of `space`, in their order (one batched read: [`crate::storage::Readable::get_many`]).
    ///
    /// # Errors
    /// Storage errors; [`crate::ErrorKind::Corrupt`].
    pub(crate) fn get_many(&self, space: &str, ids: &[&str]) -> Result<Vec<Option<Entity>>> {
        let keys: Vec<(&str, &str)> = ids.iter().map(|id| (space, *id)).collect();
        self.records.get_many(&keys)
    }

    /// Stores entity `e` under id `id` of `space`.
    ///
    /// # Errors
    /// Storage errors; [`crate::ErrorKind::Internal`] when the record does not encode.
    pub(crate) fn put(&mut self, space: &str, id: &str, e: &Entity) -> Result<()> {
        self.records.put((space, id), e)
    }

    /// Deletes entity `id` of `space` (its keys and edges are the caller's).
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn remove(&mut self, space: &str, id: &str) -> Result<()> {
        self.records.remove((space, id)).map(|_| ())
    }

    /// The entity ids under lookup keys `keys` (`<kind>:<lowercased name or alias>`) of `space`, in their order
    /// (one batched read).
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn by_keys(&self, space: &str, keys: &[String]) -> Result<Vec<Option<String>>> {
        let keys: Vec<(&str, &str)> = keys.iter().map(|k| (space, k.as_str())).collect();
        Ok(self.keys.get_many(&keys)?.into_iter().map(|v| v.map(|v| v.value().to_string())).collect())
    }

    /// Points lookup key `key` of `space` at entity `id`.
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn put_key(&mut self, space: &str, key: &str, id: &str) -> Result<()> {
        self.keys.put((space, key), id)
    }

    /// Deletes lookup key `key` of `space`.
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn remove_key(&mut self, space: &str, key: &str) -> Result<()> {
        self.keys.remove((space, key)).map(|_| ())
    }

    /// The entity ids memory `memory` of `space` mentions, in order.
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn mentioned_by(&self, space: &str, memory: &str) -> Result<Vec<String>> {
        crate::storage::txn::range_prefix3(&self.mentions, space, memory)
    }

    /// Records that memory `memory` mentions entity `entity` (the edge both ways).
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn mention(&mut self, space: &str, memory: &str, entity: &str) -> Result<()> {
        self.mentions.put((space, memory, entity), ())?;
        self.by_entity.put((space, entity, memory), ())
    }

    /// Records that memory `memory` mentions each of `entities` (the edges both ways), written kind by kind so
    /// that PostgreSQL sends each kind's rows in one statement.
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn mention_many(&mut self, space: &str, memory: &str, entities: &[&str]) -> Result<()> {
        crate::storage::txn::put_edges_both_ways(&mut self.mentions, &mut self.by_entity, space, memory, entities)
    }

    /// Removes the mention of entity `entity` by memory `memory` (the edge both ways).
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn unmention(&mut self, space: &str, memory: &str, entity: &str) -> Result<()> {
        self.mentions.remove((space, memory, entity))?;
        self.by_entity.remove((space, entity, memory)).map(|_| ())
    }

    /// The RELATES_TO weights of the entity pairs `pairs` of `space`, in their order (0 where there is no edge;
    /// one batched read).
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn relates_many(&self, space: &str, pairs: &[(&str, &str)]) -> Result<Vec<u64>> {
        let keys: Vec<(&str, &str, &str)> = pairs.iter().map(|(a, b)| (space, *a, *b)).collect();
        Ok(self.relates.get_many(&keys)?.into_iter().map(|v| v.map_or(0, |v| v.value())).collect())
    }

    /// Sets the RELATES_TO weight from entity `a` to `b` of `space`; 0 deletes the edge.
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn set_relates(&mut self, space: &str, a: &str, b: &str, weight: u64) -> Result<()> {
        if weight == 0 {
            self.relates.remove((space, a, b)).map(|_| ())
        } else {
            self.relates.put((space, a, b), weight)
        }
    }
}

/// The RELATES_TO neighbours of entity `id` in `space`, with their weights (memories mentioning both), in id
/// order.
///
/// # Errors
/// Storage errors.
pub(crate) fn relates_of(t: &impl Readable<K3, u64>, space: &str, id: &str) -> Result<Vec<(String, u64)>> {
    crate::storage::txn::range_prefix3_with(t, space, id, |w| w)
}

/// Calls `f` with each MENTIONS edge of `space` (memory id, entity id), in key order (a memory's edges
/// together).
///
/// # Errors
/// Storage errors.
pub(crate) fn each_mention_in(t: &impl Readable<K3, ()>, space: &str, mut f: impl FnMut(&str, &str)) -> Result<()> {
    for row in t.range((space, "", "")..)? {
        let (k, _) = row?;
        let (s, m, e) = k.value();
        if s != space {
            break;
        }
        f(m, e);
    }
    Ok(())
}

/// The entity id under each of `keys` (`(space, lookup key)`), in the order of `keys` (`None` where none is
/// stored): one statement on PostgreSQL.
///
/// # Errors
/// Storage errors.
pub(crate) fn ids_by_keys<X: Tx>(tx: &X, keys: &[(&str, &str)]) -> Result<Vec<Option<String>>> {
    Ok(entity_keys(tx)?.get_many(keys)?.into_iter().map(|v| v.map(|v| v.value().to_string())).collect())
}

/// The ids of the entities each of `memory_ids` of `space` mentions (its MENTIONS edges, in key order), in the
/// order of `memory_ids`: one statement on PostgreSQL.
///
/// # Errors
/// Storage errors.
pub(crate) fn mentioned_by_each<X: Tx>(tx: &X, space: &str, memory_ids: &[&str]) -> Result<Vec<Vec<String>>> {
    let keys: Vec<(&str, &str, &str)> = memory_ids.iter().map(|m| (space, *m, "")).collect();
    Ok(mentions(tx)?
        .prefix_many(&keys, 2)?
        .iter()
        .map(|rows| rows.iter().map(|(k, _)| k.value().2.to_string()).collect())
        .collect())
}
