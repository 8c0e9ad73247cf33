//! Entities and their edges, kept in step with memory writes: every create or text change of a memory runs
//! [`crate::extract::entities::extract`] over its title and content, and replaces the memory's MENTIONS edges
//! and its share of RELATES_TO weights (co-occurrence counts) in the same transaction; a delete removes them.

use std::collections::{BTreeMap, HashMap};

use super::Graph;
use crate::error::ErrorCode;
use crate::error::Result;
use crate::extract::entities::{EntityType, Mention, extract};
use crate::model::{Entity, Metadata, Timestamp};
use crate::store::entity;
use crate::store::types::Page;

/// An entity's identity within a memory: kind and lowercased canonical name.
type Key = (EntityType, String);

/// Most entities of one memory that take part in RELATES_TO edges (pairs grow quadratically).
pub const MAX_RELATED_PER_MEMORY: usize = 20;

/// What a memory write did to the graph.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MentionReport {
    /// The entities the memory mentions now.
    pub entities: Vec<Entity>,
    /// Edges created: new MENTIONS edges plus new RELATES_TO edges (counted once per pair).
    pub created_relationships: u64,
}

/// The id of the entity of `kind` with canonical `name`: `ent_` + 16 hex digits of FNV-1a 64 of
/// `<kind>:<lowercased name>` (stable across stores and releases).
pub fn entity_id(kind: EntityType, name: &str) -> String {
    format!("ent_{:016x}", crate::embed::fnv1a(format!("{}:{}", kind.as_str(), name.to_lowercase()).as_bytes()))
}

fn key(kind: &str, name: &str) -> String {
    format!("{kind}:{}", name.to_lowercase())
}

/// The entity mentions of `text` as [`EntityWrite::set_mentions`] takes them (extraction, then parenthetical
/// aliases). Pure: a batch computes it for its memories in parallel before its transaction.
pub(crate) fn mentions_in(text: &str) -> Vec<Mention> {
    with_parenthetical_aliases(text, extract(text))
}

/// Names written together as `X (Y)` are one entity: Y takes X's kind and canonical name, and its spelling
/// becomes an alias ("Postgres (PostgreSQL)", "Kubernetes (k8s)"); later mentions of Y alone resolve to X.
fn with_parenthetical_aliases(text: &str, mut ms: Vec<Mention>) -> Vec<Mention> {
    let named = |t: EntityType| {
        matches!(t, EntityType::Person | EntityType::Organization | EntityType::Location | EntityType::Product)
    };
    for i in 1..ms.len() {
        let (a, b) = (&ms[i - 1], &ms[i]);
        // Mentions may overlap ("CPU 0" inside a longer match): then nothing lies between them.
        let Some(between) = text.get(a.end..b.start) else { continue };
        let closes = text.get(b.end..).is_some_and(|rest| rest.starts_with(')'));
        if named(a.entity_type) && named(b.entity_type) && between.trim() == "(" && closes {
            let (kind, canonical) = (a.entity_type, a.canonical.clone());
            ms[i].entity_type = kind;
            ms[i].canonical = canonical;
        }
    }
    ms
}

/// The distinct names of `mentions`, (kind, lowercased canonical), in text order, each with its first
/// position and the spellings seen (the canonical first).
fn distinct_names(mentions: Vec<Mention>) -> Vec<(Key, (usize, Vec<String>))> {
    let mut found: BTreeMap<Key, (usize, Vec<String>)> = BTreeMap::new();
    for (i, m) in mentions.into_iter().enumerate() {
        let e = found.entry((m.entity_type, m.canonical.to_lowercase())).or_insert((i, vec![m.canonical.clone()]));
        if !e.1.iter().any(|s| s.eq_ignore_ascii_case(&m.text)) {
            e.1.push(m.text);
        }
    }
    let mut ordered: Vec<(Key, (usize, Vec<String>))> = found.into_iter().collect();
    ordered.sort_by_key(|(_, (i, _))| *i);
    ordered
}

/// What [`EntityWrite::set_mentions`] reads for a memory that is new and mentions `mentions`, when each name
/// resolves to the id it would get as a new entity (the common case; [`super::records::ahead`] asks for these
/// ahead, and a guess that misses costs a statement, not a result): the lookup keys, the entity ids, and the
/// RELATES_TO pairs among the first [`MAX_RELATED_PER_MEMORY`] of them, both directions.
pub(crate) fn mention_reads(mentions: &[Mention]) -> (Vec<String>, Vec<String>, Vec<(String, String)>) {
    let ordered = distinct_names(mentions.to_vec());
    let lookups = ordered
        .iter()
        .flat_map(|((kind, _), (_, spellings))| EntityWrite::lookup_order(*kind, &spellings[0]))
        .map(|(_, k)| k)
        .collect();
    let ids: Vec<String> = ordered.iter().map(|((kind, _), (_, spellings))| entity_id(*kind, &spellings[0])).collect();
    let head = &ids[..ids.len().min(MAX_RELATED_PER_MEMORY)];
    let mut pairs = Vec::new();
    for (i, a) in head.iter().enumerate() {
        for b in &head[i + 1..] {
            pairs.push((a.clone(), b.clone()));
            pairs.push((b.clone(), a.clone()));
        }
    }
    (lookups, ids, pairs)
}

/// The entity side of a memory write: its transaction's entity record writer, with the rules that keep
/// entities, MENTIONS and RELATES_TO in step with the memory's text.
pub(crate) struct EntityWrite<'w, 't>(pub(crate) &'w mut entity::Writer<'t>);

impl EntityWrite<'_, '_> {
    fn mentioned(&self, space: &str, memory_id: &str) -> Result<Vec<String>> {
        self.0.mentioned_by(space, memory_id)
    }

    fn bump_relates(&mut self, space: &str, ids: &[String], delta: i64) -> Result<u64> {
        let ids: Vec<&String> = ids.iter().take(MAX_RELATED_PER_MEMORY).collect();
        let mut pairs: Vec<(&str, &str)> = Vec::new();
        for (i, a) in ids.iter().enumerate() {
            for b in &ids[i + 1..] {
                pairs.extend([(a.as_str(), b.as_str()), (b.as_str(), a.as_str())]);
            }
        }
        // Every pair's weight in one read, then the new weights (held back and sent together on PostgreSQL).
        let weights = self.0.relates_many(space, &pairs)?;
        let mut created = 0;
        for ((x, y), w) in pairs.into_iter().zip(weights) {
            let nw = (w as i64 + delta).max(0) as u64;
            self.0.set_relates(space, x, y, nw)?;
            if w == 0 && nw > 0 && x < y {
                created += 1;
            }
        }
        Ok(created)
    }

    /// The lookup keys a name of `kind` is resolved by, in order: of `kind` first, then of the other name kinds
    /// (person, organisation, location, product) when `kind` is one of them.
    fn lookup_order(kind: EntityType, name: &str) -> Vec<(EntityType, String)> {
        const NAMED: [EntityType; 4] =
            [EntityType::Person, EntityType::Organization, EntityType::Location, EntityType::Product];
        let kinds: Vec<EntityType> = if NAMED.contains(&kind) {
            std::iter::once(kind).chain(NAMED.into_iter().filter(|k| *k != kind)).collect()
        } else {
            vec![kind]
        };
        kinds.into_iter().map(|k| (k, key(k.as_str(), name))).collect()
    }

    /// The entities memory `memory_id` mentions now.
    pub(crate) fn current_entities(&self, space: &str, memory_id: &str) -> Result<Vec<Entity>> {
        let mut out = Vec::new();
        for id in self.mentioned(space, memory_id)? {
            if let Some(e) = self.0.get(space, id.as_str())? {
                out.push(e);
            }
        }
        Ok(out)
    }

    /// Replaces the entities mentioned by memory `memory_id` with `mentions` ([`mentions_in`] of its text).
    /// `created`: the memory is new in this transaction, so it mentions nothing yet (not read).
    pub(crate) fn set_mentions(
        &mut self,
        space: &str,
        memory_id: &str,
        mentions: Vec<Mention>,
        created: bool,
        now: Timestamp,
    ) -> Result<MentionReport> {
        // A memory this transaction creates mentions nothing yet: nothing to read.
        let old = if created { Vec::new() } else { self.mentioned(space, memory_id)? };
        let ordered = distinct_names(mentions);
        let mut entities = Vec::with_capacity(ordered.len());
        let mut new_ids: Vec<String> = Vec::with_capacity(ordered.len());
        let mut created = 0;
        // Every lookup key of every name, and the entities they name, read once for all mentions (one statement
        // per kind on PostgreSQL). The loop then reads only these and its own writes, which it keeps beside
        // them (`keys_put`, `written`): what the one-by-one reads of the stored records would have seen, two
        // mentions of one name under two kinds included. Its writes are sent after it, grouped by kind.
        let orders: Vec<Vec<(EntityType, String)>> =
            ordered.iter().map(|((kind, _), (_, spellings))| Self::lookup_order(*kind, &spellings[0])).collect();
        let lookups: Vec<String> = orders.iter().flatten().map(|(_, k)| k.clone()).collect();
        let stored_keys: HashMap<String, String> = lookups
            .iter()
            .cloned()
            .zip(self.0.by_keys(space, &lookups)?)
            .filter_map(|(k, id)| id.map(|id| (k, id)))
            .collect();
        // The entities the keys name, and the id each name would get as a new entity (a stored entity whose
        // keys are gone is found under it, as a read by id would).
        let fresh: Vec<String> =
            ordered.iter().map(|((kind, _), (_, spellings))| entity_id(*kind, &spellings[0])).collect();
        let mut ids: Vec<&str> = stored_keys.values().chain(&fresh).map(String::as_str).collect();
        ids.sort_unstable();
        ids.dedup();
        let mut stored: HashMap<String, Entity> = ids
            .iter()
            .zip(self.0.get_many(space, &ids)?)
            .filter_map(|(id, e)| e.map(|e| (id.to_string(), e)))
            .collect();
        let mut keys_put: HashMap<String, String> = HashMap::new();
        let mut written: HashMap<String, Entity> = HashMap::new();
        let mut mentioned: Vec<String> = Vec::new();
        for (((kind, _), (_, spellings)), order) in ordered.into_iter().zip(orders) {
            let name = spellings[0].clone();
            // The kind the rules guessed for a name may differ from the kind the store already knows it by
            // ("Mnemo" seen as an alias of a product): a known name of another name kind wins.
            let hit = order.iter().find_map(|(k, lookup)| {
                keys_put.get(lookup).or_else(|| stored_keys.get(lookup)).map(|id| (*k, id.clone()))
            });
            let (kind, found_id) = match hit {
                Some((k, id)) => (k, Some(id)),
                None => (kind, None),
            };
            let k = key(kind.as_str(), &name);
            let id = found_id.unwrap_or_else(|| entity_id(kind, &name));
            // An entity this loop wrote: its latest version; else one read above (named by a stored key, or
            // under a new name's id). An id read neither way (a name resolved through this loop's own keys to
            // an entity it did not write, which cannot happen as keys are written with their entity) is
            // looked up alone.
            let known = match written.remove(&id).or_else(|| stored.remove(&id)) {
                Some(e) => Some(e),
                None => self.0.get(space, id.as_str())?,
            };
            let mut e: Entity = known.unwrap_or_else(|| Entity {
                id: id.clone(),
                node_type: "entity".into(),
                created_at: now,
                updated_at: now,
                metadata: Metadata::default(),
                name: name.clone(),
                entity_type: kind.as_str().into(),
                description: String::new(),
                aliases: vec![],
                confidence: 0.8,
                entity_created: None,
                entity_ended: None,
                temporal_precision: None,
                temporal_context: None,
                temporal_confidence: 0.0,
                space_id: space.to_string(),
                mention_count: 0,
            });
            for s in &spellings {
                if !s.eq_ignore_ascii_case(&e.name)
                    && !e.aliases.iter().any(|a| a.eq_ignore_ascii_case(s))
                    && e.aliases.len() < 20
                {
                    e.aliases.push(s.clone());
                }
                keys_put.insert(key(kind.as_str(), s), id.clone());
                keys_put.insert(k.clone(), id.clone());
            }
            if !old.contains(&id) {
                e.mention_count += 1;
                e.updated_at = now;
                mentioned.push(id.clone());
                created += 1;
            }
            written.insert(id.clone(), e.clone());
            new_ids.push(id);
            entities.push(e);
        }
        for (lookup, id) in &keys_put {
            self.0.put_key(space, lookup, id)?;
        }
        let mentioned: Vec<&str> = mentioned.iter().map(String::as_str).collect();
        self.0.mention_many(space, memory_id, &mentioned)?;
        for (id, e) in &written {
            self.0.put(space, id, e)?;
        }
        for id in old.iter().filter(|id| !new_ids.contains(id)) {
            self.drop_mention(space, memory_id, id, now)?;
        }
        self.bump_relates(space, &old, -1)?;
        created += self.bump_relates(space, &new_ids, 1)?;
        Ok(MentionReport { entities, created_relationships: created })
    }

    fn drop_mention(&mut self, space: &str, memory_id: &str, id: &str, now: Timestamp) -> Result<()> {
        self.0.unmention(space, memory_id, id)?;
        if let Some(mut e) = self.0.get(space, id)? {
            e.mention_count = e.mention_count.saturating_sub(1);
            e.updated_at = now;
            if e.mention_count == 0 {
                self.0.remove(space, id)?;
                for name in std::iter::once(&e.name).chain(&e.aliases) {
                    self.0.remove_key(space, &key(&e.entity_type, name))?;
                }
            } else {
                self.0.put(space, id, &e)?;
            }
        }
        Ok(())
    }

    /// Removes every MENTIONS edge of a memory and its RELATES_TO weights; returns the edges removed.
    pub(crate) fn clear_mentions(&mut self, space: &str, memory_id: &str, now: Timestamp) -> Result<u64> {
        let old = self.mentioned(space, memory_id)?;
        self.bump_relates(space, &old, -1)?;
        for id in &old {
            self.drop_mention(space, memory_id, id, now)?;
        }
        Ok(old.len() as u64)
    }
}

impl Graph<'_> {
    /// The entities a memory mentions, in id order.
    ///
    /// # Errors
    /// Storage errors.
    pub fn entities_of(&self, space: &str, memory_id: &str) -> Result<Vec<Entity>> {
        Ok(self.entities_of_each(space, &[memory_id])?.pop().unwrap_or_default())
    }

    /// The entities each of `memory_ids` (memories of `space`) mentions, in id order, one list per memory in the
    /// order given: one read transaction, and on PostgreSQL one statement for the MENTIONS edges and one for the
    /// entity records, whatever the number of memories.
    ///
    /// # Errors
    /// Storage errors.
    pub fn entities_of_each(&self, space: &str, memory_ids: &[&str]) -> Result<Vec<Vec<Entity>>> {
        memories_entities_in(&self.store.core.db.read()?, space, memory_ids)
    }

    /// Entities of `space` related to entity `id` by RELATES_TO, heaviest first: `(entity, weight)`.
    ///
    /// # Errors
    /// Storage errors.
    pub fn related_entities(&self, space: &str, id: &str, limit: usize) -> Result<Vec<(Entity, u64)>> {
        let rtx = self.store.core.db.read()?;
        let rel = entity::relates_to(&rtx)?;
        let entities = entity::entities(&rtx)?;
        let mut pairs = entity::relates_of(&rel, space, id)?;
        pairs.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        let mut out = Vec::new();
        for (b, w) in pairs.into_iter().take(limit) {
            if let Some(e) = entities.get((space, b.as_str()))? {
                out.push((e, w));
            }
        }
        Ok(out)
    }

    /// The entity of `space` with id `id`.
    ///
    /// # Errors
    /// [`crate::ErrorKind::NotFound`] (`entity_not_found`).
    pub fn entity(&self, space: &str, id: &str) -> Result<Entity> {
        let rtx = self.store.core.db.read()?;
        entity::entities(&rtx)?
            .get((space, id))?
            .ok_or_else(|| crate::Error::not_found(ErrorCode::EntityNotFound, format!("entity '{id}' does not exist")))
    }

    /// Entities of `space`, most mentioned first (ties by name).
    ///
    /// # Errors
    /// Storage errors.
    pub fn entities(&self, space: &str, limit: usize) -> Result<Vec<Entity>> {
        Ok(self.entities_page(space, None, limit, 0)?.items)
    }

    /// Entities `offset..offset + limit` of `space` whose name contains `name_contains` (case-insensitive) when
    /// given, most mentioned first (ties by name), and how many match. There is no index by mention count: the
    /// space's entities are read and one page is kept.
    ///
    /// # Errors
    /// Storage errors.
    pub fn entities_page(
        &self,
        space: &str,
        name_contains: Option<&str>,
        limit: usize,
        offset: usize,
    ) -> Result<Page<Entity>> {
        let needle = name_contains.map(str::to_lowercase);
        let rtx = self.store.core.db.read()?;
        let mut out = Vec::new();
        entity::entities(&rtx)?.each_in_space(space, |_, e| {
            if needle.as_ref().is_none_or(|n| e.name.to_lowercase().contains(n)) {
                out.push(e);
            }
            true
        })?;
        out.sort_by(|a, b| b.mention_count.cmp(&a.mention_count).then_with(|| a.name.cmp(&b.name)));
        let total = out.len();
        let items = out.into_iter().skip(offset).take(limit).collect();
        Ok(Page { items, total, limit, offset })
    }

    /// Entities of `space` matching the mentions in `text` (by kind and name or alias): `(id, mention_count)`, in
    /// the order of their first mention, read in the caller's transaction `rtx` with one batched read per record
    /// kind.
    pub(crate) fn entities_in_tx(
        &self,
        rtx: &crate::storage::ReadTx,
        space: &str,
        text: &str,
    ) -> Result<Vec<(String, u64)>> {
        let names = query_entity_names(text);
        let keys: Vec<(&str, &str)> = names.iter().map(|(n, _)| (space, n.as_str())).collect();
        let mut ids: Vec<String> = Vec::new();
        for pair in entity::ids_by_keys(rtx, &keys)?.chunks(2) {
            if let Some(id) = pair.iter().flatten().next()
                && !ids.contains(id)
            {
                ids.push(id.clone());
            }
        }
        let keys: Vec<(&str, &str)> = ids.iter().map(|id| (space, id.as_str())).collect();
        let records = entity::entities(rtx)?.get_many(&keys)?;
        Ok(ids.into_iter().zip(records).filter_map(|(id, e)| e.map(|e| (id, e.mention_count))).collect())
    }
}

/// The entity lookup keys of the mentions in `text`, each mention's canonical name then its text as written (the
/// first of the two that is stored names it), with the id each would have if the key named the entity directly
/// (an alias names another one).
fn query_entity_names(text: &str) -> Vec<(String, String)> {
    extract(text)
        .iter()
        .flat_map(|m| {
            let kind = m.entity_type.as_str();
            let id = entity_id(m.entity_type, &m.canonical);
            [(key(kind, &m.canonical), id.clone()), (key(kind, &m.text), id)]
        })
        .collect()
}

/// Asks `rtx` ahead ([`crate::storage::ReadTx::read_ahead`]) for space `space` and for what
/// [`Graph::entities_in_tx`](crate::store::Graph::entities_in_tx) will read of it for `query` (`None`: no entity is read): the lookup keys,
/// and the entities they name when no alias redirects them. On PostgreSQL all travel with the transaction's next
/// point read, the space's: two statements fewer. Nothing is asked when the query names no entity (the space's
/// own read is then the one statement anyway).
pub(crate) fn ask_search(rtx: &crate::storage::ReadTx, space: &str, query: Option<&str>) {
    if !rtx.reads_ahead() {
        return;
    }
    let names = query.map(query_entity_names).unwrap_or_default();
    if names.is_empty() {
        return;
    }
    let keys: Vec<&str> = names.iter().map(|(n, _)| n.as_str()).collect();
    let ids: Vec<&str> = names.iter().step_by(2).map(|(_, id)| id.as_str()).collect();
    crate::store::records::ahead::ask_search(rtx, space, &keys, &ids);
}

/// [`Graph::entities_of_each`] in read transaction `rtx`.
///
/// # Errors
/// Storage errors.
pub(crate) fn memories_entities_in(
    rtx: &crate::storage::ReadTx,
    space: &str,
    memory_ids: &[&str],
) -> Result<Vec<Vec<Entity>>> {
    let edges: Vec<Vec<String>> = entity::mentioned_by_each(rtx, space, memory_ids)?;
    let mut ids: Vec<&str> = edges.iter().flatten().map(String::as_str).collect();
    ids.sort_unstable();
    ids.dedup();
    let keys: Vec<(&str, &str)> = ids.iter().map(|id| (space, *id)).collect();
    let found: std::collections::HashMap<&str, Entity> =
        ids.iter().zip(entity::entities(rtx)?.get_many(&keys)?).filter_map(|(id, e)| e.map(|e| (*id, e))).collect();
    Ok(edges.iter().map(|list| list.iter().filter_map(|id| found.get(id.as_str()).cloned()).collect()).collect())
}
