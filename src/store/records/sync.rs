//! Sync's records (docs/sync.md): the clock of each replicated item (`sync_items`), the change log
//! (`sync_log`), the items a write touched, and each item's replicated value: the only place these kinds are
//! opened.

use std::collections::{BTreeMap, BTreeSet};

use sha2::Digest;

use super::{Bytes, K3, Records, Tx};
use crate::error::{Error, ErrorKind, Result};
use crate::model::{
    Change, Item, ItemClock, Label, LabelMerge, Memory, MemoryRelation, Message, Space, SpaceUsage, Thread,
    WorkingMemory,
};
use crate::storage::tables::{
    LABEL_MERGES, LABELS, MEMORIES, MEMORY_LABELS, MESSAGE_KEYS, RELATIONS, REVIEWS, SOURCE_CHUNKS, SOURCE_TEXT,
    SOURCES, SPACES, SYNC_ITEMS, SYNC_LOG, THREADS, WORKING_MEMORY,
};
use crate::storage::{Readable, key_from_bytes};

/// The kinds a write in a sync group is captured in ([`crate::storage::tables::REPLICATED`]).
pub(crate) const REPLICATED: &[&str] = crate::storage::tables::REPLICATED;

/// `(kind, space, id)` ([`Item::key`]) -> [`ItemClock`].
///
/// # Errors
/// Storage errors.
pub(crate) fn items<X: Tx>(tx: &X) -> Result<Records<X::Table<'_, K3, Bytes>, K3, ItemClock>> {
    super::records(tx, SYNC_ITEMS)
}

/// The clock kind as [`items`] opens it in a write transaction.
pub(crate) type ItemClocks<'t> = super::Opened<'t, crate::storage::WriteTx, K3, ItemClock>;

/// The change log: sequence number -> [`Change`].
///
/// # Errors
/// Storage errors.
pub(crate) fn log<X: Tx>(tx: &X) -> Result<Records<X::Table<'_, u64, Bytes>, u64, Change>> {
    super::records(tx, SYNC_LOG)
}

/// The clock of `item` (the default, never stamped, when there is none).
///
/// # Errors
/// Storage errors; [`ErrorKind::Corrupt`].
pub(crate) fn clock<X: Tx>(tx: &X, item: &Item) -> Result<ItemClock> {
    Ok(items(tx)?.get(item.key())?.unwrap_or_default())
}

/// The changes logged after sequence number `after`, in order, at most `limit`.
///
/// # Errors
/// Storage errors; [`ErrorKind::Corrupt`].
pub(crate) fn changes_after<X: Tx>(tx: &X, after: u64, limit: usize) -> Result<Vec<(u64, Change)>> {
    let t = log(tx)?;
    let mut out = Vec::new();
    for row in t.range(after.saturating_add(1)..)?.take(limit) {
        let (k, c) = row?;
        out.push((k.value(), c));
    }
    Ok(out)
}

/// Drops the change log's rows up to sequence number `last` (written to a segment, which now keeps them).
///
/// # Errors
/// Storage errors.
pub(crate) fn drop_log_through(txn: &crate::storage::WriteTx, last: u64) -> Result<()> {
    log(txn)?.remove_range(..=last)
}

/// The replicated items behind the keys a write touched ([`crate::storage::WriteTx::take_touched`]), each once.
pub(crate) fn touched_items(touched: &[(&'static str, Vec<u8>)]) -> BTreeSet<Item> {
    let mut out = BTreeSet::new();
    for (kind, bytes) in touched {
        let item = match *kind {
            k if k == SPACES.name() => Item::Space(key_from_bytes::<&str>(bytes).to_string()),
            k if k == MEMORIES.name() => Item::Memory(key_from_bytes::<(&str, &str)>(bytes).1.to_string()),
            k if k == MEMORY_LABELS.name() => Item::Memory(key_from_bytes::<(&str, &str, &str)>(bytes).1.to_string()),
            k if k == LABELS.name() => {
                let (s, id) = key_from_bytes::<(&str, &str)>(bytes);
                Item::Label(s.to_string(), id.to_string())
            }
            k if k == WORKING_MEMORY.name() => {
                let (s, d) = key_from_bytes::<(&str, &str)>(bytes);
                Item::Working(s.to_string(), d.to_string())
            }
            k if k == RELATIONS.name() => Item::Relation(key_from_bytes::<(&str, &str)>(bytes).1.to_string()),
            k if k == THREADS.name() => {
                let (s, id) = key_from_bytes::<(&str, &str)>(bytes);
                Item::Thread(s.to_string(), id.to_string())
            }
            k if k == SOURCES.name() => Item::Source(key_from_bytes::<(&str, &str)>(bytes).1.to_string()),
            k if k == SOURCE_TEXT.name() => Item::Source(key_from_bytes::<&str>(bytes).to_string()),
            k if k == SOURCE_CHUNKS.name() => Item::Source(key_from_bytes::<(&str, u64)>(bytes).0.to_string()),
            k if k == REVIEWS.name() => {
                let (s, id) = key_from_bytes::<(&str, &str)>(bytes);
                Item::Review(s.to_string(), id.to_string())
            }
            k if k == LABEL_MERGES.name() => {
                let (s, id) = key_from_bytes::<(&str, &str)>(bytes);
                Item::LabelMerge(s.to_string(), id.to_string())
            }
            k if k == MESSAGE_KEYS.name() => {
                let (s, t, key) = key_from_bytes::<(&str, &str, &str)>(bytes);
                Item::message(s, t, key)
            }
            _ => continue,
        };
        out.insert(item);
    }
    out
}

/// `items` in the order a write stamps them: every other item first (in item order), then messages thread by
/// thread in their order in the thread, so that the stamps of one write's messages follow their order (a
/// thread's messages are ordered by their stamps on every device).
///
/// # Errors
/// Storage errors.
pub(crate) fn stamp_order<X: Tx>(tx: &X, items: BTreeSet<Item>) -> Result<Vec<Item>> {
    let (mut messages, mut out): (Vec<Item>, Vec<Item>) = items.into_iter().partition(|i| i.message_parts().is_some());
    let keys = super::thread::message_keys(tx)?;
    let mut ordered = Vec::with_capacity(messages.len());
    for item in messages.drain(..) {
        let Some((s, t, k)) = item.message_parts() else { continue };
        let at = keys.get((s, t, k))?.map_or(0, |i| i.value());
        ordered.push(((s.to_string(), t.to_string(), at), item));
    }
    ordered.sort_by(|a, b| a.0.cmp(&b.0));
    out.extend(ordered.into_iter().map(|(_, i)| i));
    Ok(out)
}

/// SHA-256 of a value, its first 16 bytes: what an [`ItemClock`] compares to tell a change from a rewrite.
pub(crate) fn hash(value: &[u8]) -> [u8; 16] {
    let d = sha2::Sha256::digest(value);
    let mut out = [0u8; 16];
    out.copy_from_slice(&d[..16]);
    out
}

fn json<T: serde::Serialize>(v: &T) -> Result<Vec<u8>> {
    serde_json::to_vec(v)
        .map_err(|e| Error::new(ErrorKind::Internal, "a replicated value does not encode").with_source(e))
}

/// A value of a change ([`crate::model::Op::Put`]) as `T`.
///
/// # Errors
/// [`ErrorKind::InvalidInput`] when it is not the JSON of a `T`.
pub(crate) fn value_of<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T> {
    serde_json::from_slice(bytes)
        .map_err(|e| Error::new(ErrorKind::InvalidInput, "a change's value does not decode").with_source(e))
}

/// A memory without the fields each device keeps for itself (read counts, last access and click, dwell time,
/// the cached decay and PageRank scores, the re-index bookkeeping): what replicates.
pub(crate) fn memory_projection(m: &Memory) -> Memory {
    let mut p = m.clone();
    p.pagerank_score = 0.0;
    p.reindex_needed = false;
    p.last_reindexed_at = None;
    p.last_accessed_at = None;
    p.last_clicked_at = None;
    p.last_evaluated_at = None;
    p.access_count = 0;
    p.appearances = 0;
    p.clicks = 0;
    p.total_dwell_time_ms = 0;
    p.decay_score_cached = 1.0;
    p
}

/// `remote` with this device's own fields of `local` (the fields [`memory_projection`] leaves out).
pub(crate) fn with_local_fields(mut remote: Memory, local: Option<&Memory>) -> Memory {
    if let Some(l) = local {
        remote.pagerank_score = l.pagerank_score;
        remote.reindex_needed = l.reindex_needed;
        remote.last_reindexed_at = l.last_reindexed_at;
        remote.last_accessed_at = l.last_accessed_at;
        remote.last_clicked_at = l.last_clicked_at;
        remote.last_evaluated_at = l.last_evaluated_at;
        remote.access_count = l.access_count;
        remote.appearances = l.appearances;
        remote.clicks = l.clicks;
        remote.total_dwell_time_ms = l.total_dwell_time_ms;
        remote.decay_score_cached = l.decay_score_cached;
    }
    remote
}

/// `metadata` key of a conflict copy ([`conflict_copy`]): the id of the memory whose concurrent edit it keeps.
pub(crate) const CONFLICT_OF: &str = "sync_conflict_of";

/// The id of the conflict copy of memory `id` for its losing edit `stamp`:
/// `<id>.sync-conflict-<ms>-<counter>-<first 8 hex digits of the device id>` (Syncthing names its conflict
/// copies the same way).
pub(crate) fn conflict_copy_id(id: &str, stamp: crate::model::Stamp) -> String {
    let device = stamp.device.to_hex();
    format!("{id}.sync-conflict-{}-{}-{}", stamp.hlc.ms, stamp.hlc.counter, &device[..8.min(device.len())])
}

/// Whether `m` is a conflict copy: derived on each device from the merged history, never replicated.
pub(crate) fn is_conflict_copy(m: &Memory) -> bool {
    m.metadata.0.contains_key(CONFLICT_OF)
}

/// The conflict copy of memory `id` for a losing edit (`stamp`, `value`: the JSON of its replicated fields): a
/// superseded version of the memory (`is_latest` false, `metadata.superseded_by` = `id`), so the edit that lost
/// stays in the memory's version history. The same on every device.
///
/// # Errors
/// [`ErrorKind::InvalidInput`] when `value` is not a memory's JSON.
pub(crate) fn conflict_copy(id: &str, stamp: crate::model::Stamp, value: &[u8]) -> Result<Memory> {
    let mut m: Memory = value_of(value)?;
    m.id = conflict_copy_id(id, stamp);
    m.state = crate::model::MemoryState::Superseded;
    m.is_latest = false;
    let md = &mut m.metadata.0;
    md.insert("superseded_by".into(), id.into());
    md.insert(CONFLICT_OF.into(), id.into());
    md.insert("sync_conflict_stamp".into(), format!("{}@{}", stamp.hlc, stamp.device).into());
    Ok(m)
}

/// A space without its usage counts (derived on each device).
pub(crate) fn space_projection(s: &Space) -> Space {
    Space { usage: SpaceUsage::default(), ..s.clone() }
}

/// A label without its usage count (derived on each device).
pub(crate) fn label_projection(l: &Label) -> Label {
    Label { usage_count: 0, ..l.clone() }
}

/// A thread without its message count (derived on each device from the messages it holds).
pub(crate) fn thread_projection(t: &Thread) -> Thread {
    Thread { message_count: 0, ..t.clone() }
}

/// A message without its place in the thread (its id `<thread>#<index>` and its order index), which each
/// device derives from the order of the messages' stamps.
pub(crate) fn message_projection(m: &Message) -> Message {
    Message { id: String::new(), order_index: 0, ..m.clone() }
}

/// The record a thread has while only its messages are known here (they arrived before it, or it was deleted
/// elsewhere while another device appended): the same on every device, never stamped.
pub(crate) fn placeholder_thread(space: &str, id: &str) -> Thread {
    Thread {
        id: id.to_string(),
        node_type: "thread".into(),
        created_at: crate::model::Timestamp(0),
        updated_at: crate::model::Timestamp(0),
        metadata: Default::default(),
        thread_id: id.to_string(),
        title: String::new(),
        summary: String::new(),
        message_count: 0,
        participants: vec![],
        source: String::new(),
        space_id: space.to_string(),
        project: String::new(),
        workspace: String::new(),
        tool_version: String::new(),
        import_date: None,
        is_favorite: false,
    }
}

/// What a source replicates: its record, parsed text and chunks (the original bytes stay on the device that
/// ingested them).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct SourceValue {
    /// The record.
    pub source: crate::model::Source,
    /// The parsed text (empty when it has none).
    pub text: String,
    /// Its chunks, in order.
    pub chunks: Vec<crate::model::Chunk>,
}

/// The replicated value of source `id`, if it exists.
///
/// # Errors
/// Storage errors; [`ErrorKind::Corrupt`].
pub(crate) fn source_value<X: Tx>(tx: &X, id: &str) -> Result<Option<SourceValue>> {
    let Some(space) = super::source::space_of(tx, id)? else { return Ok(None) };
    let Some(source) = super::source::sources(tx)?.get((space.as_str(), id))? else { return Ok(None) };
    let text = super::source::text_of(tx, id)?;
    let chunks = super::source::chunks_of(tx, id)?;
    Ok(Some(SourceValue { source, text, chunks }))
}

/// The replicated value of `item` as the transaction sees it (the JSON of its replicated fields), and for a
/// memory its label ids; None when the item does not exist or is derived (a crystal).
///
/// # Errors
/// Storage errors; [`ErrorKind::Corrupt`].
pub(crate) fn current<X: Tx>(tx: &X, item: &Item) -> Result<Option<(Vec<u8>, BTreeSet<String>)>> {
    let none = BTreeSet::new;
    Ok(match item {
        Item::Space(id) => match super::space::spaces(tx)?.get(id.as_str())? {
            Some(s) => Some((json(&space_projection(&s))?, none())),
            None => None,
        },
        Item::Memory(id) => {
            let Some(space) = super::memory::space_of(tx, id)? else { return Ok(None) };
            match super::memory::memories(tx)?.get((space.as_str(), id.as_str()))? {
                // Crystals are derived from the graph, conflict copies from the merged history: each device
                // makes its own.
                Some(sm) if sm.memory.is_crystal || is_conflict_copy(&sm.memory) => None,
                Some(sm) => {
                    let mut labels = BTreeSet::new();
                    let edges = tx.open(MEMORY_LABELS)?;
                    for row in edges.range((space.as_str(), id.as_str(), "")..)? {
                        let (k, _) = row?;
                        let (s, m, l) = k.value();
                        if s != space || m != id {
                            break;
                        }
                        labels.insert(l.to_string());
                    }
                    Some((json(&memory_projection(&sm.memory))?, labels))
                }
                None => None,
            }
        }
        Item::Label(s, id) => match super::label::labels(tx)?.get((s.as_str(), id.as_str()))? {
            Some(l) => Some((json(&label_projection(&l))?, none())),
            None => None,
        },
        Item::Working(s, d) => {
            let w: Option<WorkingMemory> = super::working_memory::days(tx)?.get((s.as_str(), d.as_str()))?;
            match w {
                Some(w) => Some((json(&w)?, none())),
                None => None,
            }
        }
        Item::Relation(id) => {
            let Some(space) = super::relation::space_of(tx, id)? else { return Ok(None) };
            let r: Option<MemoryRelation> = super::relation::relations(tx)?.get((space.as_str(), id.as_str()))?;
            match r {
                Some(r) => Some((json(&r)?, none())),
                None => None,
            }
        }
        Item::Source(id) => match source_value(tx, id)? {
            Some(v) => Some((json(&v)?, none())),
            None => None,
        },
        Item::Review(s, id) => {
            let r: Option<crate::model::ReviewEvent> = super::review::reviews(tx)?.get((s.as_str(), id.as_str()))?;
            match r {
                Some(r) => Some((json(&r)?, none())),
                None => None,
            }
        }
        Item::LabelMerge(s, id) => {
            let m: Option<LabelMerge> = super::label::label_merges(tx)?.get((s.as_str(), id.as_str()))?;
            match m {
                Some(m) => Some((json(&m)?, none())),
                None => None,
            }
        }
        Item::Thread(s, id) => match super::thread::threads(tx)?.get((s.as_str(), id.as_str()))? {
            Some(t) => Some((json(&thread_projection(&t))?, none())),
            None => None,
        },
        Item::Message(..) => {
            let Some((s, t, k)) = item.message_parts() else { return Ok(None) };
            match super::thread::message_with_key(tx, s, t, k)? {
                Some(m) => Some((json(&message_projection(&m))?, none())),
                None => None,
            }
        }
    })
}

/// Every replicated item the store holds, kind by kind (what a store joining a sync group stamps first).
///
/// # Errors
/// Storage errors.
pub(crate) fn all_items<X: Tx>(tx: &X) -> Result<Vec<Item>> {
    let mut out = Vec::new();
    for id in super::space::ids(tx)? {
        out.push(Item::Space(id));
    }
    for row in super::memory::memory_space(tx)?.iter()? {
        out.push(Item::Memory(row?.0.value().to_string()));
    }
    for row in super::label::labels(tx)?.iter()? {
        let (k, _) = row?;
        let (s, id) = k.value();
        out.push(Item::Label(s.to_string(), id.to_string()));
    }
    for row in super::working_memory::days(tx)?.iter()? {
        let (k, _) = row?;
        let (s, d) = k.value();
        out.push(Item::Working(s.to_string(), d.to_string()));
    }
    for row in super::relation::relation_space(tx)?.iter()? {
        out.push(Item::Relation(row?.0.value().to_string()));
    }
    for row in super::label::label_merges(tx)?.iter()? {
        let (k, _) = row?;
        let (s, id) = k.value();
        out.push(Item::LabelMerge(s.to_string(), id.to_string()));
    }
    for row in super::source::source_space(tx)?.iter()? {
        out.push(Item::Source(row?.0.value().to_string()));
    }
    for row in super::review::reviews(tx)?.iter()? {
        let (k, _) = row?;
        let (s, id) = k.value();
        out.push(Item::Review(s.to_string(), id.to_string()));
    }
    for row in super::thread::threads(tx)?.iter()? {
        let (k, _) = row?;
        let (s, id) = k.value();
        out.push(Item::Thread(s.to_string(), id.to_string()));
    }
    // Messages thread by thread in their order (the order their stamps take).
    let mut keys = super::thread::all_keys(tx)?;
    keys.sort_by(|a, b| (&a.0, &a.1, a.3).cmp(&(&b.0, &b.1, b.3)));
    out.extend(keys.into_iter().map(|(s, t, k, _)| Item::message(&s, &t, &k)));
    Ok(out)
}

/// The label merges of `space` that redirect (docs/sync.md, "Label merges"): merged-away label id -> survivor id.
/// A merge redirects while it is not reversed and its merged-away label has not been created again; of two merges
/// of one label (on two devices at once), the one with the greater merge id (a UUIDv7: the later) redirects.
/// The same on every device that holds the same merge and label records.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Redirects(BTreeMap<String, String>);

impl Redirects {
    /// The redirects of `space`; `exists` tells whether a label record is there (read through the caller's open
    /// label kind).
    ///
    /// # Errors
    /// Storage errors; [`ErrorKind::Corrupt`].
    pub(crate) fn of<X: Tx>(tx: &X, space: &str, mut exists: impl FnMut(&str) -> Result<bool>) -> Result<Self> {
        let merges: Vec<(String, LabelMerge)> = super::label::label_merges(tx)?.in_space(space)?;
        let mut out: BTreeMap<String, (String, String)> = BTreeMap::new();
        for (id, m) in merges {
            if m.reversed_at.is_some() || exists(&m.source.id)? {
                continue;
            }
            let newer = out.get(&m.source.id).is_none_or(|(held, _)| id > *held);
            if newer {
                out.insert(m.source.id.clone(), (id, m.target_id));
            }
        }
        Ok(Redirects(out.into_iter().map(|(s, (_, t))| (s, t)).collect()))
    }

    /// Whether nothing is redirected.
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Where `label` ends after following the redirects (at most one step per merge, so a cycle ends).
    pub(crate) fn target(&self, label: &str) -> String {
        let mut at = label;
        for _ in 0..self.0.len() {
            match self.0.get(at) {
                Some(next) => at = next,
                None => break,
            }
        }
        at.to_string()
    }

    /// `labels` after the redirects.
    pub(crate) fn apply(&self, labels: &BTreeSet<String>) -> BTreeSet<String> {
        labels.iter().map(|l| self.target(l)).collect()
    }

    /// Every label that redirects (through any number of steps) to `label`, and `label` itself.
    pub(crate) fn sources_of(&self, label: &str) -> BTreeSet<String> {
        let mut out: BTreeSet<String> = self.0.keys().filter(|s| self.target(s) == label).cloned().collect();
        out.insert(label.to_string());
        out
    }
}

/// `label` and every label its merges among `merges` lead to, through any number of steps, whether or not they
/// redirect now: the labels whose memories a change of those merges may relabel.
pub(crate) fn merge_chain(merges: &[(String, LabelMerge)], label: &str) -> BTreeSet<String> {
    let mut chain = BTreeSet::from([label.to_string()]);
    loop {
        let next: BTreeSet<String> = merges
            .iter()
            .filter(|(_, m)| chain.contains(&m.source.id) && !chain.contains(&m.target_id))
            .map(|(_, m)| m.target_id.clone())
            .collect();
        if next.is_empty() {
            return chain;
        }
        chain.extend(next);
    }
}
