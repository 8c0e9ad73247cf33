//! The merge of other devices' changes (docs/sync.md, "Merge rules"). Every rule is a join: the result depends
//! on the set of changes applied, not on their order or their repeats.
//!
//! - **Last-writer-wins** on the stamp (HLC, then device id) for spaces, labels, working memory days and
//!   relations: a change applies when its stamp is greater than the one the item holds (cr-sqlite's LWW
//!   register).
//! - **A memory's history** is a set of (stamp, base) nodes. Its heads (stamps no node names as base) are the
//!   concurrent edits; the greatest head is the memory, the others are kept with their values
//!   ([`crate::model::Loser`]), so nothing a person typed disappears. A delete is a head like an edit
//!   (a tombstone): it wins over every older concurrent edit, and a newer one brings the memory back.
//! - **A thread's messages** are registers by deduplication key ([`merge::message_wins`]): the first of
//!   concurrent appends of one key wins and keeps its place; the thread's messages are ordered by the stamps
//!   of their winning appends, so each device's own appends keep their order.
//! - **Label assignments** are an add-wins set: per label the greatest add and the greatest add a removal saw
//!   (the observed-remove set of Shapiro et al., 2011).

mod records;
mod threads;

use super::ApplyReport;
use records::Redirects;
use std::collections::{BTreeSet, HashMap};
use threads::Threads;

use crate::error::{Error, ErrorKind, Result};
use crate::index::ops::IndexOp;
use crate::model::{
    Change, Item, ItemClock, Label, Memory, MemoryRelation, Op, Space, SpaceUsage, Timestamp, WorkingMemory,
};
use crate::storage::WriteTx;
use crate::store::KnowledgeStore;
use crate::store::core::changes;
use crate::store::memories::{MemoryWrite, put_remote};
use crate::store::records::{meta, sync, thread, working_memory};
use crate::sync::merge::{self, MessageWrite, NodeMerge};

/// What one change did.
enum Outcome {
    Applied,
    /// Nothing to do: a repeat, or older than what the item holds.
    Stale,
    /// An edit an already known edit was built on: recorded in the history (it may end a kept loser), the
    /// memory unchanged.
    Buried,
    Conflict,
}

/// [`super::SyncService::apply`].
pub(super) fn apply(store: &KnowledgeStore, changes: &[Change]) -> Result<ApplyReport> {
    apply_then(store, changes, |_| Ok(()))
}

/// [`apply`], then `then` in the same transaction (a segment's cursor moves with its changes).
pub(super) fn apply_then(
    store: &KnowledgeStore,
    changes: &[Change],
    then: impl FnOnce(&WriteTx) -> Result<()>,
) -> Result<ApplyReport> {
    let core = &store.core;
    if !core.writes.sync.on() {
        return Err(Error::new(ErrorKind::InvalidInput, "this store is in no sync group (`engram sync init`)"));
    }
    let embedder = core.config.embedder.clone();
    let now = Timestamp::now();
    // The texts of the batch's memory values embedded together before the transaction opens (a transaction
    // never waits on a model; one call embeds them on every core).
    let mut vectors: HashMap<String, Vec<f32>> = HashMap::new();
    if !embedder.external() {
        let texts: BTreeSet<String> = changes
            .iter()
            .filter_map(|c| match (&c.item, &c.op) {
                (Item::Memory(_), Op::Put { value, .. }) => sync::value_of::<Memory>(value).ok(),
                _ => None,
            })
            .filter(|m| !m.is_crystal)
            .map(|m| m.index_text())
            .collect();
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        if !refs.is_empty() {
            let embedded = embedder.embed(&refs, crate::embed::InputType::Document)?;
            vectors = texts.into_iter().zip(embedded).collect();
        }
    }
    let (report, source_spaces) = core.write(|txn, ops| {
        let mut report = ApplyReport::default();
        let mut t = MemoryWrite::open(txn)?;
        let mut th = thread::Writer::open(txn)?;
        let mut clocks = sync::items(txn)?;
        let mut placeholders = Vec::new();
        let mut threads = Threads::default();
        let mut relabel = BTreeSet::new();
        let mut redirects = Redirects::default();
        let mut sources = BTreeSet::new();
        for c in changes {
            let observed = core.writes.sync.with(|clock| clock.observe(c.stamp.hlc));
            if let Some(Err(refused)) = observed {
                report.refused.push(format!("{} from device {}: {refused}", item_name(&c.item), c.stamp.device));
                continue;
            }
            let mut ic: ItemClock = clocks.get(c.item.key())?.unwrap_or_default();
            let mut m = Merge {
                txn,
                t: &mut t,
                th: &mut th,
                threads: &mut threads,
                relabel: &mut relabel,
                redirects: &mut redirects,
                sources: &mut sources,
                ic: &mut ic,
                embedder: &*embedder,
                vectors: &vectors,
                now,
                ops,
                placeholders: &mut placeholders,
            };
            let outcome = match &c.item {
                Item::Memory(id) => m.memory(id, c)?,
                _ => m.register(c)?,
            };
            match outcome {
                Outcome::Stale | Outcome::Buried => report.stale += 1,
                Outcome::Applied => report.applied += 1,
                Outcome::Conflict => {
                    report.applied += 1;
                    report.conflicts += 1;
                }
            }
            if !matches!(outcome, Outcome::Stale) {
                clocks.put(c.item.key(), &ic)?;
            }
        }
        // Placeholder spaces not replaced by their own change in this batch: never stamped, never logged.
        for (id, hash) in placeholders {
            let item = Item::Space(id);
            let mut ic: ItemClock = clocks.get(item.key())?.unwrap_or_default();
            if ic.winner.is_none() {
                ic.hash = Some(hash);
                clocks.put(item.key(), &ic)?;
            }
        }
        threads.settle(&mut th, &mut clocks)?;
        for id in relabel {
            let ic: ItemClock = clocks.get(Item::Memory(id.clone()).key())?.unwrap_or_default();
            let Some(space) = t.memories.space_of(&id)? else { continue };
            let Some(sm) = t.load(&space, &id)? else { continue };
            let wanted = redirects.shown(txn, &t, &space, &ic)?;
            if t.label_ids(&space, &id)? != wanted {
                put_remote(&*embedder, txn, &mut t, sm.memory, &wanted, None, now, ops)?;
            }
        }
        // The clock moved past what it saw: saved, so that a restart stamps after it.
        if let Some(last) = core.writes.sync.with(|clock| clock.last()) {
            meta::meta(txn)?.put_json(changes::HLC_KEY, &last)?;
        }
        drop((t, th, clocks));
        then(txn)?;
        Ok((report, sources))
    })?;
    // A space's chunk index is built again from its sources at its next chunk search.
    for space in source_spaces {
        core.chunk_index.write().remove(&space);
    }
    Ok(report)
}

fn item_name(item: &Item) -> String {
    let (kind, space, id) = item.key();
    match (space.is_empty(), id.is_empty()) {
        (true, _) => format!("{kind} {id}"),
        (false, true) => format!("{kind} {space}"),
        (false, false) => format!("{kind} {space}/{id}"),
    }
}

/// The state one change is merged with.
struct Merge<'a, 't> {
    txn: &'t WriteTx,
    t: &'a mut MemoryWrite<'t>,
    th: &'a mut thread::Writer<'t>,
    threads: &'a mut Threads,
    /// Memories whose shown labels a label merge or a label record of this batch may change.
    relabel: &'a mut BTreeSet<String>,
    /// Each space's label redirects, read once per batch until a label or label merge of the space changes.
    redirects: &'a mut Redirects,
    /// Spaces whose sources changed: their in-memory chunk index is dropped after the commit.
    sources: &'a mut BTreeSet<String>,
    ic: &'a mut ItemClock,
    embedder: &'a dyn crate::embed::Embedder,
    /// The batch's memory texts embedded ahead, by index text.
    vectors: &'a HashMap<String, Vec<f32>>,
    now: Timestamp,
    ops: &'a mut Vec<IndexOp>,
    /// Spaces created as placeholders, with the hash of their replicated value.
    placeholders: &'a mut Vec<(String, [u8; 16])>,
}

impl Merge<'_, '_> {
    /// Last-writer-wins for every item but memories.
    fn register(&mut self, c: &Change) -> Result<Outcome> {
        let wins = match (&c.item, &c.op) {
            (Item::Message(..), Op::Put { base, .. } | Op::Delete { base }) => {
                let change = MessageWrite { stamp: c.stamp, base: *base, delete: matches!(c.op, Op::Delete { .. }) };
                let held = self.ic.winner.map(|stamp| MessageWrite {
                    stamp,
                    base: self.ic.nodes.first().and_then(|n| n.1),
                    delete: self.ic.hash.is_none(),
                });
                merge::message_wins(held, change)
            }
            _ => merge::register_wins(self.ic.winner, c.stamp),
        };
        if !wins {
            return Ok(Outcome::Stale);
        }
        let value = match &c.op {
            Op::Put { value, .. } => Some(value.as_slice()),
            Op::Delete { .. } => None,
            Op::TagAdd { .. } | Op::TagRemove { .. } => {
                return Err(Error::new(ErrorKind::InvalidInput, "a label assignment names an item that is no memory"));
            }
        };
        self.ic.hash = match (&c.item, value) {
            (Item::Space(id), v) => self.space(id, v)?,
            (Item::Label(s, id), v) => self.label(s, id, v)?,
            (Item::Working(s, d), v) => self.working(s, d, v)?,
            (Item::Relation(id), v) => self.relation(id, v)?,
            (Item::Thread(s, id), v) => self.thread(s, id, v)?,
            (Item::LabelMerge(s, id), v) => self.label_merge(s, id, v)?,
            (Item::Source(id), v) => self.source(id, v)?,
            (Item::Review(s, id), v) => self.review(s, id, v)?,
            (item @ Item::Message(..), v) => self.message(item, v)?,
            (Item::Memory(_), _) => {
                return Err(Error::new(ErrorKind::Internal, "a memory reached the register merge"));
            }
        };
        self.ic.winner = Some(c.stamp);
        if let (Item::Message(..), Op::Put { base, .. } | Op::Delete { base }) = (&c.item, &c.op) {
            self.ic.nodes = vec![(c.stamp, *base)];
        }
        Ok(Outcome::Applied)
    }

    fn space(&mut self, id: &str, value: Option<&[u8]>) -> Result<Option<[u8; 16]>> {
        let Some(v) = value else {
            // A space deleted elsewhere: its record goes; what it held arrives as deletes of its own.
            self.t.spaces.remove(id)?;
            return Ok(None);
        };
        let mut s: Space = sync::value_of(v)?;
        if s.id != id {
            return Err(Error::new(ErrorKind::InvalidInput, "a space change names another space than its item"));
        }
        s.usage = self.t.spaces.get(id)?.map(|old| old.usage).unwrap_or_default();
        self.t.spaces.put(id, &s)?;
        Ok(Some(sync::hash(&json(&sync::space_projection(&s))?)))
    }

    fn label(&mut self, space: &str, id: &str, value: Option<&[u8]>) -> Result<Option<[u8; 16]>> {
        // A merged-away label deleted or created again turns its merges' redirects on or off.
        self.relabel_chain(space, id)?;
        self.redirects.changed(space);
        let Some(v) = value else {
            self.t.labels.remove(space, id)?;
            return Ok(None);
        };
        let mut l: Label = sync::value_of(v)?;
        if l.id != id || l.space_id != space {
            return Err(Error::new(ErrorKind::InvalidInput, "a label change names another label than its item"));
        }
        l.usage_count = self.t.labels.get(space, id)?.map_or(0, |old| old.usage_count);
        self.t.labels.put(space, id, &l)?;
        Ok(Some(sync::hash(&json(&sync::label_projection(&l))?)))
    }

    fn working(&mut self, space: &str, day: &str, value: Option<&[u8]>) -> Result<Option<[u8; 16]>> {
        let mut days = working_memory::days(self.txn)?;
        let Some(v) = value else {
            days.remove((space, day))?;
            return Ok(None);
        };
        let w: WorkingMemory = sync::value_of(v)?;
        if w.space_id != space || w.date != day {
            return Err(Error::new(ErrorKind::InvalidInput, "a working memory change names another day"));
        }
        self.ensure_space(space)?;
        days.put((space, day), &w)?;
        Ok(Some(sync::hash(&json(&w)?)))
    }

    fn relation(&mut self, id: &str, value: Option<&[u8]>) -> Result<Option<[u8; 16]>> {
        let old = match self.t.relations.space_of(id)? {
            Some(s) => self.t.relations.get(&s, id)?,
            None => None,
        };
        if let Some(old) = &old {
            self.t.relations.remove(&old.space_id, old)?;
        }
        let Some(v) = value else { return Ok(None) };
        let r: MemoryRelation = sync::value_of(v)?;
        if r.id != id {
            return Err(Error::new(ErrorKind::InvalidInput, "a relation change names another relation"));
        }
        self.ensure_space(&r.space_id)?;
        self.t.relations.put(&r.space_id, &r)?;
        Ok(Some(sync::hash(&json(&r)?)))
    }

    /// A space a change needs that has not arrived yet: a placeholder, which its own change replaces whatever
    /// its stamp (the placeholder is never stamped, so it loses every comparison and is not logged).
    fn ensure_space(&mut self, id: &str) -> Result<()> {
        if self.t.spaces.contains(id)? {
            return Ok(());
        }
        let s = Space {
            id: id.to_string(),
            key: id.to_string(),
            name: id.to_string(),
            aliases: vec![],
            description: String::new(),
            icon: String::new(),
            instructions: String::new(),
            shared_space_ids: vec![],
            default_retrieval_mode: "strict".into(),
            is_default: false,
            usage: SpaceUsage::default(),
            observed: false,
            has_profile: false,
            created_at: Timestamp(0),
        };
        self.t.spaces.put(id, &s)?;
        self.placeholders.push((id.to_string(), sync::hash(&json(&sync::space_projection(&s))?)));
        Ok(())
    }

    /// A memory's history: the change is a node; the greatest head is the memory, the other heads are kept
    /// ([`crate::sync::merge`]).
    fn memory(&mut self, id: &str, c: &Change) -> Result<Outcome> {
        let (base, value) = match &c.op {
            Op::TagAdd { label } => {
                let changed = merge::tag_add(self.ic, label, c.stamp);
                return self.tags(id, changed);
            }
            Op::TagRemove { label, observed } => {
                let changed = merge::tag_remove(self.ic, label, *observed);
                return self.tags(id, changed);
            }
            Op::Put { base, value } => (*base, Some(value.clone())),
            Op::Delete { base } => (*base, None),
        };
        if let Some(v) = &value {
            let m: Memory = sync::value_of(v)?;
            if m.id != id {
                return Err(Error::new(ErrorKind::InvalidInput, "a memory change names another memory"));
            }
        }
        let before: Vec<crate::model::Stamp> = self.ic.losers.iter().map(|l| l.stamp).collect();
        let outcome = match merge::merge_node(self.ic, c.stamp, base) {
            NodeMerge::Known => Outcome::Stale,
            NodeMerge::Buried => Outcome::Buried,
            NodeMerge::Wins { kept } => {
                if let Some(k) = kept {
                    let v = self.current_value(id)?;
                    merge::keep_loser(self.ic, k, v);
                }
                self.write_memory(id, value.as_deref())?;
                if kept.is_some() { Outcome::Conflict } else { Outcome::Applied }
            }
            NodeMerge::Loses => {
                merge::keep_loser(self.ic, c.stamp, value);
                Outcome::Conflict
            }
        };
        self.conflict_copies(id, &before)?;
        Ok(outcome)
    }

    /// Makes the memory's version history follow its kept losers: a conflict copy
    /// ([`sync::conflict_copy`]) for each losing edit newly kept, none for one no longer kept (an edit built on
    /// it arrived). A concurrent delete that lost has no copy: the memory is there.
    fn conflict_copies(&mut self, id: &str, before: &[crate::model::Stamp]) -> Result<()> {
        let now: Vec<(crate::model::Stamp, Option<Vec<u8>>)> =
            self.ic.losers.iter().map(|l| (l.stamp, l.value.clone())).collect();
        for gone in before.iter().filter(|b| !now.iter().any(|(s, _)| s == *b)) {
            self.remove_memory(&sync::conflict_copy_id(id, *gone))?;
        }
        for (stamp, value) in now.iter().filter(|(s, _)| !before.contains(s)) {
            let Some(v) = value else { continue };
            let copy = sync::conflict_copy(id, *stamp, v)?;
            self.ensure_space(&copy.space_id)?;
            let vector = self.vectors.get(&copy.index_text()).cloned();
            put_remote(self.embedder, self.txn, self.t, copy, &BTreeSet::new(), vector, self.now, self.ops)?;
        }
        Ok(())
    }

    /// Deletes memory `id` if it is stored, with its index entries.
    fn remove_memory(&mut self, id: &str) -> Result<()> {
        if let Some(space) = self.t.memories.space_of(id)?
            && let Some(sm) = self.t.load(&space, id)?
        {
            let (_, lex) = self.t.remove_memory(&space, &sm, self.now)?;
            self.ops.push(IndexOp::Remove { space, docno: sm.docno, lex: Some(lex) });
        }
        Ok(())
    }

    /// After a label assignment merged (`changed`): the stored memory gets the labels of its add-wins set.
    fn tags(&mut self, id: &str, changed: bool) -> Result<Outcome> {
        if !changed {
            return Ok(Outcome::Stale);
        }
        self.relabel(id)?;
        Ok(Outcome::Applied)
    }

    /// The JSON of the memory's replicated fields as stored now (None: not stored).
    fn current_value(&self, id: &str) -> Result<Option<Vec<u8>>> {
        match self.t.memories.space_of(id)? {
            Some(s) => match self.t.load(&s, id)? {
                Some(sm) => Ok(Some(json(&sync::memory_projection(&sm.memory))?)),
                None => Ok(None),
            },
            None => Ok(None),
        }
    }

    /// Stores the winner's value (None: deletes the memory), with the labels of the add-wins set.
    fn write_memory(&mut self, id: &str, value: Option<&[u8]>) -> Result<()> {
        match value {
            Some(v) => {
                let m: Memory = sync::value_of(v)?;
                self.ensure_space(&m.space_id)?;
                let labels = self.redirects.shown(self.txn, self.t, &m.space_id, self.ic)?;
                let vector = self.vectors.get(&m.index_text()).cloned();
                put_remote(self.embedder, self.txn, self.t, m, &labels, vector, self.now, self.ops)?;
                self.ic.hash = self.current_value(id)?.map(|v| sync::hash(&v));
            }
            None => {
                self.remove_memory(id)?;
                self.ic.hash = None;
            }
        }
        Ok(())
    }

    /// Gives a stored memory the labels of its add-wins set.
    fn relabel(&mut self, id: &str) -> Result<()> {
        let Some(space) = self.t.memories.space_of(id)? else { return Ok(()) };
        let Some(sm) = self.t.load(&space, id)? else { return Ok(()) };
        let wanted = self.redirects.shown(self.txn, self.t, &space, self.ic)?;
        if self.t.label_ids(&space, id)? == wanted {
            return Ok(());
        }
        let memory = sm.memory.clone();
        put_remote(self.embedder, self.txn, self.t, memory, &wanted, None, self.now, self.ops)
    }
}

pub(super) fn json<T: serde::Serialize>(v: &T) -> Result<Vec<u8>> {
    serde_json::to_vec(v)
        .map_err(|e| Error::new(ErrorKind::Internal, "a replicated value does not encode").with_source(e))
}
