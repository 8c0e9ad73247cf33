//! Memory writes and reads: create (upsert by id), update, delete, get, list. Also the lexical postings that
//! follow every text change.

use crate::index::first_in_order;
use crate::storage::{ReadTx, Readable, Table, WriteTx};
use std::collections::{BTreeMap, BTreeSet};

use super::graph::entities::EntityWrite;
use super::{
    DEFAULT_SPACE, IndexOp, KnowledgeStore, LexEntry, StoredMemory, range_prefix3,
    types::{CreatedMemory, DeleteReport, ListOrder, ListQuery, MemoryPatch, MemoryView, NewMemory, Page, WriteAction},
};
use super::{entity, label, memory, relation, space, thread};
use crate::embed::InputType;
use crate::error::ErrorCode;
use crate::error::{Error, ErrorKind, FieldError, Result};
use crate::index::catalog::DocMeta;
use crate::index::lexicon;
use crate::model::{Label, Memory, MemoryState, Metadata, Space, Timestamp, date_precision};

mod input;
pub(crate) use input::check_label_name;
use input::{apply_new, apply_patch, validate_new, validate_patch};

/// Longest content in bytes.
pub const MAX_CONTENT_BYTES: usize = 32_768;
/// Longest title in characters.
pub const MAX_TITLE_CHARS: usize = 500;
/// Longest id in characters.
pub const MAX_ID_CHARS: usize = 200;
/// Longest label name in characters.
pub const MAX_LABEL_CHARS: usize = 100;
/// Most labels on one memory.
pub const MAX_LABELS: usize = 64;
/// Largest metadata object, as JSON bytes.
pub const MAX_METADATA_BYTES: usize = 65_536;

/// A typed record handle of a write transaction (see [`super::records`]).
type W<'t, K, R> = super::records::Records<Table<'t, K, super::records::Bytes>, K, R>;

/// A memory write's record writers, one per record module it touches, each opened once per transaction:
/// memories with their index records, labels, entities and relations (and spaces, read).
pub(crate) struct MemoryWrite<'t> {
    pub spaces: W<'t, &'static str, Space>,
    pub memories: memory::Writer<'t>,
    pub labels: label::Writer<'t>,
    pub entities: entity::Writer<'t>,
    pub relations: relation::Writer<'t>,
}

impl<'t> MemoryWrite<'t> {
    pub fn open(txn: &'t WriteTx) -> Result<Self> {
        Ok(MemoryWrite {
            spaces: space::spaces(txn)?,
            memories: memory::Writer::open(txn)?,
            labels: label::Writer::open(txn)?,
            entities: entity::Writer::open(txn)?,
            relations: relation::Writer::open(txn)?,
        })
    }

    fn require_space(&self, space: &str) -> Result<()> {
        if !self.spaces.contains(space)? {
            return Err(Error::not_found(ErrorCode::SpaceNotFound, format!("space '{space}' does not exist")));
        }
        Ok(())
    }

    /// Adds the postings of `text` for `docno`; returns what the in-memory lexicon needs.
    fn index_text(&mut self, space: &str, docno: u64, text: &str, prepared: Option<&mut Prepared>) -> Result<LexEntry> {
        let (tf, len) = match prepared {
            Some(p) if p.index_text == text => std::mem::take(&mut p.analysed),
            _ => lexicon::analyse(text),
        };
        self.memories.index_terms(space, docno, &tf, len)?;
        Ok(LexEntry { terms: tf, len })
    }

    /// Removes the postings of `text` for `docno`; returns what the in-memory lexicon needs.
    fn unindex_text(&mut self, space: &str, docno: u64, text: &str) -> Result<LexEntry> {
        let (tf, len) = lexicon::analyse(text);
        self.memories.unindex_terms(space, docno, &tf, len)?;
        Ok(LexEntry { terms: tf, len })
    }

    fn load(&self, space: &str, id: &str) -> Result<Option<StoredMemory>> {
        self.memories.get(space, id)
    }

    /// The space and record of memory `id`, as a by-id read sees it: `memory_not_found` when there is none, when
    /// it lives in another space than `space_guard`, or when it is forgotten.
    pub fn locate(&self, id: &str, space_guard: Option<&str>) -> Result<(String, StoredMemory)> {
        let not_found = || Error::not_found(ErrorCode::MemoryNotFound, format!("memory '{id}' not found"));
        let space = self.memories.space_of(id)?.ok_or_else(not_found)?;
        if space_guard.is_some_and(|g| g != space) {
            return Err(not_found());
        }
        let sm = self.load(&space, id)?.ok_or_else(not_found)?;
        if sm.memory.state == MemoryState::Forgotten {
            return Err(not_found());
        }
        Ok((space, sm))
    }

    pub(crate) fn label_ids(&self, space: &str, id: &str) -> Result<BTreeSet<String>> {
        Ok(self.labels.of_memory(space, id)?.into_iter().collect())
    }

    /// Makes the label set of memory `id` exactly `names`, creating missing labels. Returns the label ids.
    pub fn set_labels(
        &mut self,
        space: &str,
        id: &str,
        names: &BTreeSet<String>,
        now: Timestamp,
    ) -> Result<BTreeSet<String>> {
        let current = self.label_ids(space, id)?;
        self.set_labels_from(space, id, current, names, now)
    }

    /// [`MemoryWrite::set_labels`] where the caller knows the memory's current label ids (none for a memory
    /// this transaction creates), so they are not read again.
    pub fn set_labels_from(
        &mut self,
        space: &str,
        id: &str,
        current: BTreeSet<String>,
        names: &BTreeSet<String>,
        now: Timestamp,
    ) -> Result<BTreeSet<String>> {
        let wanted: BTreeSet<String> = names.iter().map(|n| Label::id_for(n)).collect();
        // The labels taken off and put on, read once (one statement on PostgreSQL); their usage counts change
        // here and each is written once at the end, the edges kind by kind.
        let added: Vec<(&String, String)> =
            names.iter().map(|n| (n, Label::id_for(n))).filter(|(_, lid)| !current.contains(lid)).collect();
        let touched: Vec<&str> =
            current.difference(&wanted).map(String::as_str).chain(added.iter().map(|(_, lid)| lid.as_str())).collect();
        let mut labels: BTreeMap<String, Label> = touched
            .iter()
            .zip(self.labels.get_many(space, &touched)?)
            .filter_map(|(lid, l)| l.map(|l| (lid.to_string(), l)))
            .collect();
        for gone in current.difference(&wanted) {
            self.labels.unlink(space, id, gone)?;
            if let Some(l) = labels.get_mut(gone) {
                l.usage_count = l.usage_count.saturating_sub(1);
            }
        }
        let mut linked: Vec<&str> = Vec::with_capacity(added.len());
        for (name, lid) in &added {
            let l = labels.entry(lid.clone()).or_insert_with(|| new_label(space, name, None, None, now));
            l.usage_count += 1;
            linked.push(lid);
        }
        self.labels.link_many(space, id, &linked)?;
        for (lid, l) in &labels {
            self.labels.put(space, lid, l)?;
        }
        Ok(wanted)
    }

    /// Writes a memory record from a data import, without embedding or entity extraction: postings follow
    /// the text (kept when the text is unchanged, so is the vector; otherwise the vector is dropped for
    /// re-embedding), labels become exactly `label_names` and MENTIONS edges exactly `mentions`. `at` is the
    /// space the stored `existing` record lives in. Returns the document number the record has now.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn import_memory(
        &mut self,
        at: Option<&str>,
        existing: Option<StoredMemory>,
        memory: Memory,
        label_names: &BTreeSet<String>,
        mentions: &BTreeSet<String>,
        new_docno: u64,
        now: Timestamp,
    ) -> Result<u64> {
        let space = memory.space_id.clone();
        let id = memory.id.clone();
        let text = memory.index_text();
        let mut docno = new_docno;
        match (at, &existing) {
            (Some(old_space), Some(sm)) => {
                let same = old_space == space && sm.memory.index_text() == text;
                if same {
                    docno = sm.docno;
                } else {
                    self.unindex_text(old_space, sm.docno, &sm.memory.index_text())?;
                    self.memories.remove_vector(old_space, sm.docno)?;
                }
                if old_space != space {
                    self.set_labels(old_space, &id, &BTreeSet::new(), now)?;
                    for e in self.entities.mentioned_by(old_space, &id)? {
                        self.entities.unmention(old_space, &id, &e)?;
                    }
                    self.memories.remove_record(old_space, &id)?;
                }
                if !same {
                    self.index_text(&space, docno, &text, None)?;
                }
            }
            _ => {
                self.index_text(&space, docno, &text, None)?;
            }
        }
        let stored = StoredMemory { docno, memory };
        self.memories.place(&space, &stored)?;
        self.set_labels(&space, &id, label_names, now)?;
        let current: BTreeSet<String> = self.entities.mentioned_by(&space, &id)?.into_iter().collect();
        for gone in current.difference(mentions) {
            self.entities.unmention(&space, &id, gone)?;
        }
        for new in mentions.difference(&current) {
            self.entities.mention(&space, &id, new)?;
        }
        Ok(docno)
    }

    /// Removes a memory and everything keyed by it in its space. Returns the label edges removed and the
    /// postings that went with it.
    pub(crate) fn remove_memory(&mut self, space: &str, sm: &StoredMemory, now: Timestamp) -> Result<(u64, LexEntry)> {
        let id = sm.memory.id.as_str();
        let lex = self.unindex_text(space, sm.docno, &sm.memory.index_text())?;
        self.memories.remove_vector(space, sm.docno)?;
        let removed = self.label_ids(space, id)?.len() as u64
            + EntityWrite(&mut self.entities).clear_mentions(space, id, now)?
            + self.remove_memory_relations(space, id)?;
        self.set_labels(space, id, &BTreeSet::new(), now)?;
        self.memories.remove(space, id)?;
        Ok((removed, lex))
    }
}

/// The text entities are extracted from: title and content (not the spelled-out event date of the index text).
pub(crate) fn entity_text(m: &Memory) -> String {
    if m.title.is_empty() { m.content.clone() } else { format!("{}\n{}", m.title, m.content) }
}

/// A new label record with defaults.
pub(crate) fn new_label(
    space: &str,
    name: &str,
    color: Option<String>,
    description: Option<String>,
    now: Timestamp,
) -> Label {
    Label {
        id: Label::id_for(name),
        name: name.to_string(),
        color: color.unwrap_or_else(|| "#3b82f6".into()),
        description: description.unwrap_or_default(),
        space_id: space.to_string(),
        usage_count: 0,
        created_at: now,
        updated_at: now,
    }
}

/// Everything needed to write one memory: what is stored now (if anything) and what should be.
struct PutPlan<'a> {
    space: &'a str,
    existing: Option<(String, StoredMemory)>,
    merged: Memory,
    labels: Option<BTreeSet<String>>,
    new_docno: u64,
    /// The vector, when known (computed with the batch, moved along, or given by the caller).
    vector: Option<Vec<f32>>,
    /// `vector` was given by the caller: the memory is re-indexed (new document number) even if its text is
    /// unchanged.
    given: bool,
    /// What the batch computed for this memory before the transaction, if anything.
    prepared: Option<Prepared>,
}

/// The work on a memory's text that needs no transaction, done for a whole batch in parallel before its one
/// commit (rayon): the analysed index text (terms, length) and the entity mentions, each with the text it was
/// computed from. The write path uses them only when its text is the same (an upsert may merge other fields in).
pub(crate) struct Prepared {
    index_text: String,
    analysed: (Vec<(String, u32)>, u32),
    entity_text: String,
    mentions: Vec<crate::extract::entities::Mention>,
}

impl Prepared {
    /// Prepares `m` as it would be written.
    fn of(m: &Memory) -> Prepared {
        let index_text = m.index_text();
        let entity_text = entity_text(m);
        Prepared {
            analysed: lexicon::analyse(&index_text),
            mentions: if m.is_crystal { Vec::new() } else { super::graph::entities::mentions_in(&entity_text) },
            index_text,
            entity_text,
        }
    }
}

impl KnowledgeStore {
    /// Stores a memory and indexes it, in one write transaction. With an `id` that already exists in the same
    /// space the call is an upsert: given fields replace stored ones and the action is `Updated`, or
    /// `Unchanged` when nothing differs.
    ///
    /// # Errors
    /// * [`ErrorKind::InvalidInput`]: empty or over-long content (1..=32,768 bytes), importance or confidence
    ///   outside 0..=1, a bad date, label or id.
    /// * [`ErrorKind::NotFound`] (`space_not_found`): the space does not exist.
    /// * [`ErrorKind::Conflict`]: the id belongs to a memory in another space.
    /// * [`ErrorKind::Io`]: the write failed; nothing was stored; retrying is safe.
    pub fn create_memory(&self, new: NewMemory) -> Result<CreatedMemory> {
        let mut out = self.create_memories(vec![new])?;
        out.pop().ok_or_else(|| Error::new(ErrorKind::Internal, "empty batch result"))
    }

    /// Stores many memories in one write transaction (one fsync): all or none. Embeds them in one batch.
    /// Same rules and errors as [`KnowledgeStore::create_memory`]; a validation error names the item index.
    pub fn create_memories(&self, batch: Vec<NewMemory>) -> Result<Vec<CreatedMemory>> {
        self.create_memories_with(batch, true)
    }

    /// [`KnowledgeStore::create_memories`], raising timeline reviews ([`crate::store::ReviewEvent`]) only when
    /// `reviews` is true.
    pub(crate) fn create_memories_with(&self, batch: Vec<NewMemory>, reviews: bool) -> Result<Vec<CreatedMemory>> {
        // A batch has the cores: the HNSW builder waits between chunks until it is written.
        let _writing = (batch.len() > 1).then(|| super::core::indexes::Running::start(&self.core.batch_writes));
        let mut errs = Vec::new();
        let mut label_sets = Vec::with_capacity(batch.len());
        for (i, n) in batch.iter().enumerate() {
            let mut item_errs = Vec::new();
            label_sets.push(validate_new(n, &mut item_errs));
            if batch.len() > 1 {
                for e in &mut item_errs {
                    e.loc.insert(0, serde_json::Value::from(i));
                }
            }
            errs.extend(item_errs);
        }
        let embedder = &*self.core.config.embedder;
        let mut given: Vec<Option<Vec<f32>>> = Vec::with_capacity(batch.len());
        for (i, n) in batch.iter().enumerate() {
            let mut item_errs = Vec::new();
            given.push(
                n.embedding
                    .as_ref()
                    .and_then(|v| crate::embed::check_vector(v, embedder, &["embedding"], &mut item_errs)),
            );
            for mut e in item_errs {
                if batch.len() > 1 {
                    e.loc.insert(0, serde_json::Value::from(i));
                }
                errs.push(e);
            }
        }
        if !errs.is_empty() {
            return Err(Error::invalid(errs));
        }
        let now = Timestamp::now();
        let presumed: Vec<Memory> = batch
            .iter()
            .map(|n| {
                let mut m = Memory::with_defaults(String::new(), String::new(), String::new(), now);
                apply_new(&mut m, n);
                m
            })
            .collect();
        // Text analysis and entity extraction of the batch, on every core (the commit stays single-writer).
        let mut prepared: Vec<Option<Prepared>> = {
            use rayon::prelude::*;
            if presumed.len() >= 16 {
                presumed.par_iter().map(|m| Some(Prepared::of(m))).collect()
            } else {
                presumed.iter().map(|m| Some(Prepared::of(m))).collect()
            }
        };
        let texts: Vec<&str> = prepared.iter().flatten().map(|p| p.index_text.as_str()).collect();
        // An external store computes nothing: each memory has the vector it was given, or none.
        let vectors = if embedder.external() { Vec::new() } else { embedder.embed(&texts, InputType::Document)? };

        let results = self.core.write(|txn, ops| {
            if txn.reads_ahead() {
                ask_reads(txn, &batch, &label_sets, &prepared);
            }
            let base = super::meta::alloc_docnos(txn, batch.len() as u64)?;
            let mut t = MemoryWrite::open(txn)?;
            if txn.reads_ahead() && batch.len() > 1 {
                // The given ids' spaces in one statement, not one per memory.
                let ids: Vec<&str> = batch.iter().filter_map(|n| n.id.as_deref()).collect();
                t.memories.spaces_of(&ids)?;
            }
            let mut results = Vec::with_capacity(batch.len());
            for (i, (n, labels)) in batch.iter().zip(label_sets).enumerate() {
                let space = n.space_id.as_deref().unwrap_or(DEFAULT_SPACE);
                t.require_space(space)?;
                let id = n.id.clone().unwrap_or_else(|| uuid::Uuid::now_v7().to_string());
                // An id made here (UUID v7) names no stored memory: nothing to read.
                let stored_space = if n.id.is_some() { t.memories.space_of(&id)? } else { None };
                let existing = match stored_space {
                    Some(s) if s != space => {
                        return Err(Error::new(
                            ErrorKind::Conflict,
                            format!("memory '{id}' already exists in space '{s}'; move it with PATCH and space_id"),
                        )
                        .with_code(ErrorCode::MemoryInOtherSpace));
                    }
                    Some(s) => t.load(&s, &id)?.map(|sm| (s, sm)),
                    None => None,
                };
                let mut merged = match &existing {
                    Some((_, sm)) => sm.memory.clone(),
                    None => Memory::with_defaults(id.clone(), space.to_string(), String::new(), now),
                };
                apply_new(&mut merged, n);
                let vector = match given[i].take() {
                    Some(v) => Some(v),
                    None => prepared[i]
                        .as_ref()
                        .is_some_and(|p| merged.index_text() == p.index_text)
                        .then(|| vectors.get(i).cloned())
                        .flatten(),
                };
                let given = n.embedding.is_some();
                let new_docno = base + i as u64;
                let prepared = prepared[i].take();
                let plan = PutPlan { space, existing, merged, labels, new_docno, vector, given, prepared };
                results.push(self.put_memory(&mut t, plan, now, ops)?);
            }
            Ok(results)
        })?;
        if reviews {
            self.reviews().raise(&results);
        }
        Ok(results)
    }

    /// Writes one memory according to `plan`, appending the index changes to `ops`.
    fn put_memory(
        &self,
        t: &mut MemoryWrite<'_>,
        plan: PutPlan<'_>,
        now: Timestamp,
        ops: &mut Vec<IndexOp>,
    ) -> Result<CreatedMemory> {
        put_with(&*self.core.config.embedder, t, plan, now, ops)
    }

    /// Moves one located memory to `target` inside a bulk move, keeping its vector when given.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn move_one(
        &self,
        t: &mut MemoryWrite<'_>,
        space: String,
        sm: StoredMemory,
        target: &str,
        docno: u64,
        vector: Option<Vec<f32>>,
        now: Timestamp,
        ops: &mut Vec<IndexOp>,
    ) -> Result<()> {
        let merged = sm.memory.clone();
        let plan = PutPlan {
            space: target,
            existing: Some((space, sm)),
            merged,
            labels: None,
            new_docno: docno,
            vector,
            given: false,
            prepared: None,
        };
        self.put_memory(t, plan, now, ops).map(|_| ())
    }

    /// Reads a memory by id. `space_guard`, when given, must be the memory's space.
    ///
    /// # Errors
    /// [`ErrorKind::NotFound`] (`memory_not_found`): no such id, another space than the guard, or forgotten.
    pub fn get_memory(&self, id: &str, space_guard: Option<&str>) -> Result<MemoryView> {
        let rtx = self.core.db.read()?;
        let (space, sm) = readable_memory(&rtx, id, space_guard)?;
        let ml = label::memory_labels(&rtx)?;
        let label_ids = range_prefix3(&ml, &space, id)?;
        let mut memory = sm.memory;
        memory.pagerank_score = self.graph().memory_pagerank(&space, id);
        Ok(MemoryView { memory, label_ids })
    }

    /// The stored vector of a memory: `dim` floats (the active embedder's dimension), L2-normalised, read back
    /// from the half-precision form it is stored in (relative error at most 2^-11 per component). None when the
    /// memory has no vector (an external-embedder store given none, or one still waiting to be re-embedded).
    ///
    /// # Errors
    /// [`ErrorKind::NotFound`] (`memory_not_found`): as [`KnowledgeStore::get_memory`].
    pub fn memory_embedding(&self, id: &str, space_guard: Option<&str>) -> Result<Option<Vec<f32>>> {
        let rtx = self.core.db.read()?;
        let (space, sm) = readable_memory(&rtx, id, space_guard)?;
        let dim = self.core.config.embedder.dim();
        let vectors = memory::vectors(&rtx)?;
        let stored = vectors.get((space.as_str(), sm.docno))?.map(|v| v.0);
        Ok(stored.filter(|v| v.len() == dim))
    }

    /// Updates fields of a memory (one write transaction); `space_id` moves it, `labels` replaces its set.
    ///
    /// # Errors
    /// * [`ErrorKind::InvalidInput`]: a field out of its bounds (see [`NewMemory`]).
    /// * [`ErrorKind::NotFound`]: no such memory (`memory_not_found`) or target space (`space_not_found`).
    /// * [`ErrorKind::Io`]: the write failed; nothing changed.
    pub fn update_memory(&self, id: &str, patch: MemoryPatch, space_guard: Option<&str>) -> Result<MemoryView> {
        let mut errs = Vec::new();
        let labels = validate_patch(&patch, &mut errs);
        let given = patch
            .embedding
            .as_ref()
            .and_then(|v| crate::embed::check_vector(v, &*self.core.config.embedder, &["embedding"], &mut errs));
        if !errs.is_empty() {
            return Err(Error::invalid(errs));
        }
        let now = Timestamp::now();
        let created = self.core.write(|txn, ops| {
            let base = super::meta::alloc_docnos(txn, 1)?;
            let mut t = MemoryWrite::open(txn)?;
            let (space, sm) = t.locate(id, space_guard)?;
            let target = patch.space_id.clone().unwrap_or_else(|| space.clone());
            t.require_space(&target)?;
            let mut merged = sm.memory.clone();
            apply_patch(&mut merged, &patch);
            let plan = PutPlan {
                space: &target,
                existing: Some((space.clone(), sm)),
                merged,
                labels,
                new_docno: base,
                given: given.is_some(),
                vector: given,
                prepared: None,
            };
            self.put_memory(&mut t, plan, now, ops)
        })?;
        Ok(created.view)
    }

    /// Deletes a memory, its vector, postings and label edges (one write transaction).
    ///
    /// # Errors
    /// [`ErrorKind::NotFound`] (`memory_not_found`) when there is no such memory (in `space_guard`, if given).
    pub fn delete_memory(&self, id: &str, space_guard: Option<&str>) -> Result<DeleteReport> {
        let now = Timestamp::now();
        let report = self.core.write(|txn, ops| {
            let mut t = MemoryWrite::open(txn)?;
            let not_found = || Error::not_found(ErrorCode::MemoryNotFound, format!("memory '{id}' not found"));
            let space = t.memories.space_of(id)?.ok_or_else(not_found)?;
            if space_guard.is_some_and(|g| g != space) {
                return Err(not_found());
            }
            // Deleting works on forgotten memories too (a hard delete of what forget kept).
            let sm = t.load(&space, id)?.ok_or_else(not_found)?;
            let (edges, lex) = t.remove_memory(&space, &sm, now)?;
            ops.push(IndexOp::Remove { space, docno: sm.docno, lex: Some(lex) });
            Ok(DeleteReport { deleted_relationships: edges })
        })?;
        Ok(report)
    }

    /// Lists memories of a space that pass the filter, newest first (ties by id), one page.
    ///
    /// # Errors
    /// [`ErrorKind::NotFound`] (`space_not_found`) for an unknown space.
    pub fn list_memories(&self, q: &ListQuery) -> Result<Page<MemoryView>> {
        self.list_memories_ordered(q, ListOrder::Recent)
    }

    /// As [`Self::list_memories`], in `order` (newest first, importance or PageRank, ties by id). O(n) in the
    /// memories that pass the filter plus O(m log m) for the `m = offset + limit` first of the order, which are
    /// selected before they are sorted (`select_nth_unstable`); then one batched read of the page's records and
    /// labels. `GET /memories?limit=10` over 1,000,000 memories on PostgreSQL: 75 ms p50 (944 ms when every
    /// listing sorted them all; `docs/deploy.md`).
    ///
    /// # Errors
    /// As [`Self::list_memories`].
    pub fn list_memories_ordered(&self, q: &ListQuery, order: ListOrder) -> Result<Page<MemoryView>> {
        self.spaces().require(&q.space_id)?;
        let keep = q.offset.saturating_add(q.limit);
        let listed = self.core.with_catalog(&q.space_id, |catalog| {
            let catalog = catalog?;
            let hits: Vec<(&crate::index::catalog::DocMeta, u64)> =
                catalog.iter().filter(|(_, m)| q.filter.accepts(m)).map(|(d, m)| (m, d)).collect();
            let total = hits.len();
            let newest = |a: &DocMeta, b: &DocMeta| b.created_at.cmp(&a.created_at).then_with(|| a.id.cmp(&b.id));
            let first: Vec<(&DocMeta, u64)> = match order {
                ListOrder::Recent => first_in_order(hits, keep, |a, b| newest(a.0, b.0)),
                ListOrder::Importance => first_in_order(hits, keep, |a, b| {
                    b.0.importance.total_cmp(&a.0.importance).then_with(|| newest(a.0, b.0))
                }),
                ListOrder::PageRank => {
                    // One read of the rank table for the whole listing (not one lock per memory).
                    let ranked = self.core.with_space_ranks(&q.space_id, |ranks| {
                        let rank = |d: &DocMeta| ranks.and_then(|m| m.get(&d.id)).map_or(0.0, f64::from);
                        let ranked: Vec<_> = hits.into_iter().map(|h| (rank(h.0), h)).collect();
                        first_in_order(ranked, keep, |a, b| b.0.total_cmp(&a.0).then_with(|| newest(a.1.0, b.1.0)))
                            .into_iter()
                            .map(|(_, h)| h)
                            .collect::<Vec<_>>()
                    });
                    match ranked {
                        Ok(r) => r,
                        Err(e) => return Some(Err(e)),
                    }
                }
            };
            let page: Vec<(u64, String)> =
                first.into_iter().skip(q.offset).take(q.limit).map(|(m, d)| (d, m.id.clone())).collect();
            Some(Ok((page, total)))
        })?;
        let Some((page, total)) = listed.transpose()? else {
            return Ok(Page { items: vec![], total: 0, limit: q.limit, offset: q.offset });
        };
        let items = self.load_views(&q.space_id, page.iter().map(|(_, id)| id.as_str()))?;
        Ok(Page { items, total, limit: q.limit, offset: q.offset })
    }

    /// Reads several memories of one space with their labels, in the order given (missing ones are skipped): one
    /// batched read of the records and one of their labels (one statement each on PostgreSQL).
    pub(crate) fn load_views<'a>(&self, space: &str, ids: impl Iterator<Item = &'a str>) -> Result<Vec<MemoryView>> {
        let ids: Vec<&str> = ids.collect();
        let rtx = self.core.db.read()?;
        let keys: Vec<(&str, &str)> = ids.iter().map(|id| (space, *id)).collect();
        let records = memory::memories(&rtx)?.get_many(&keys)?;
        let labels = crate::storage::txn::range_prefix3_many(&label::memory_labels(&rtx)?, space, &ids)?;
        // The PageRank of every id at once (in the database index mode one statement, not a transaction per id).
        let ranks = self.core.memory_pageranks(&rtx, space, &ids)?;
        let mut out = Vec::with_capacity(ids.len());
        for ((sm, label_ids), rank) in records.into_iter().zip(labels).zip(ranks) {
            if let Some(sm) = sm {
                let mut memory = sm.memory;
                memory.pagerank_score = rank;
                out.push(MemoryView { memory, label_ids });
            }
        }
        Ok(out)
    }

    /// Calls `f` for every memory of `space` that is not forgotten, in id order, until it returns false. One
    /// read transaction (a consistent snapshot); about 1 µs a memory plus `f`.
    ///
    /// # Errors
    /// Storage errors.
    pub fn scan_memories(&self, space: &str, mut f: impl FnMut(&Memory) -> bool) -> Result<()> {
        let rtx = self.core.db.read()?;
        memory::memories(&rtx)?
            .each_in_space(space, |_, sm: StoredMemory| sm.memory.state == MemoryState::Forgotten || f(&sm.memory))
    }

    /// Calls `f(thread_id, message)` for every message of `space`, by thread id and order, until it returns
    /// false.
    ///
    /// # Errors
    /// Storage errors.
    pub fn scan_messages(&self, space: &str, mut f: impl FnMut(&str, &crate::model::Message) -> bool) -> Result<()> {
        thread::each_message_in(&self.core.db.read()?, space, |th, m| f(th, &m))
    }
}

/// Asks the write transaction for what writing `batch` will read ([`super::records::ahead`]): on PostgreSQL the
/// spaces, BM25 statistics, given ids, labels, entity keys, entities and RELATES_TO weights of every memory of
/// the batch travel in one statement, instead of one statement per kind and memory.
fn ask_reads(
    txn: &crate::storage::WriteTx,
    batch: &[NewMemory],
    label_sets: &[Option<BTreeSet<String>>],
    prepared: &[Option<Prepared>],
) {
    let mut reads = super::records::ahead::WriteReads::default();
    for (i, n) in batch.iter().enumerate() {
        let space = n.space_id.as_deref().unwrap_or(DEFAULT_SPACE);
        reads.spaces.push(space);
        reads.memory_ids.extend(n.id.as_deref());
        if let Some(names) = label_sets.get(i).and_then(Option::as_ref) {
            reads.labels.extend(names.iter().map(|name| (space, Label::id_for(name))));
        }
        if let Some(p) = prepared.get(i).and_then(Option::as_ref) {
            let (keys, ids, pairs) = super::graph::entities::mention_reads(&p.mentions);
            reads.entity_keys.extend(keys.into_iter().map(|k| (space, k)));
            reads.entities.extend(ids.into_iter().map(|id| (space, id)));
            reads.relates.extend(pairs.into_iter().map(|(a, b)| (space, a, b)));
        }
    }
    reads.spaces.sort_unstable();
    reads.spaces.dedup();
    super::records::ahead::ask(txn, &reads);
}

/// Writes one memory according to `plan` with `embedder`, appending the index changes to `ops`.
fn put_with(
    embedder: &dyn crate::embed::Embedder,
    t: &mut MemoryWrite<'_>,
    plan: PutPlan<'_>,
    now: Timestamp,
    ops: &mut Vec<IndexOp>,
) -> Result<CreatedMemory> {
    let PutPlan { space, existing, mut merged, labels, new_docno, vector, given, mut prepared } = plan;
    let old_labels = match &existing {
        Some((s, sm)) => t.label_ids(s, &sm.memory.id)?,
        None => BTreeSet::new(),
    };
    let wanted_names: BTreeSet<String> = match &labels {
        Some(l) => l.clone(),
        None => old_labels.iter().map(|id| id.strip_prefix("label_").unwrap_or(id).to_string()).collect(),
    };
    let wanted_ids: BTreeSet<String> = wanted_names.iter().map(|n| Label::id_for(n)).collect();
    let moved = existing.as_ref().is_some_and(|(s, _)| s != space);
    if let Some((_, sm)) = &existing {
        let mut cmp = merged.clone();
        cmp.updated_at = sm.memory.updated_at;
        if cmp == sm.memory && wanted_ids == old_labels && !moved && !given {
            let view = MemoryView { memory: sm.memory.clone(), label_ids: old_labels.into_iter().collect() };
            let entities = EntityWrite(&mut t.entities).current_entities(space, &sm.memory.id)?;
            return Ok(CreatedMemory {
                view,
                action: WriteAction::Unchanged,
                assigned_labels: vec![],
                warnings: vec![],
                entities,
                created_relationships: 0,
            });
        }
    }
    let text = merged.index_text();
    let text_changed = moved || given || existing.as_ref().is_none_or(|(_, sm)| sm.memory.index_text() != text);
    // An external store cannot recompute a vector: a memory re-indexed without a new one keeps its old one.
    let kept: Option<Vec<f32>> = match (&existing, &vector) {
        (Some((s, sm)), None) if embedder.external() && text_changed => t.memories.vector(s, sm.docno)?,
        _ => None,
    };
    if let Some((_, sm)) = &existing
        && sm.memory.content != merged.content
    {
        merged.version = sm.memory.version + 1;
    }
    merged.updated_at = now;
    merged.space_id = space.to_string();
    let last_used = merged.last_accessed_at.map_or(merged.created_at, |a| a.max(merged.created_at));
    merged.decay_score_cached =
        crate::index::decay::decay_score(merged.importance, merged.access_count, last_used, now);
    let docno = match &existing {
        Some((_, sm)) if !text_changed => sm.docno,
        _ => new_docno,
    };
    if let Some((old_space, sm)) = &existing {
        let lex = if moved {
            Some(t.remove_memory(old_space, sm, now)?.1)
        } else if text_changed {
            t.memories.remove_vector(old_space, sm.docno)?;
            Some(t.unindex_text(old_space, sm.docno, &sm.memory.index_text())?)
        } else {
            None
        };
        if let Some(lex) = lex {
            ops.push(IndexOp::Remove { space: old_space.clone(), docno: sm.docno, lex: Some(lex) });
        }
    }
    let mut lex = None;
    let vector = if text_changed {
        let v = match vector.or(kept) {
            Some(v) => Some(v),
            None if embedder.external() => None,
            None => Some(
                embedder
                    .embed(&[text.as_str()], InputType::Document)?
                    .pop()
                    .ok_or_else(|| Error::new(ErrorKind::Internal, "embedder returned no vector"))?,
            ),
        };
        lex = Some(t.index_text(space, docno, &text, prepared.as_mut())?);
        // The index holds exactly what the file holds (half precision), so a reopen changes no score. A changed
        // text always takes `new_docno`, which this transaction allocated: no vector is stored under it.
        let v = match v {
            Some(v) => Some(t.memories.put_new_vector(space, docno, v)?),
            None => None,
        };
        merged.last_reindexed_at = Some(now);
        merged.reindex_needed = false;
        v
    } else {
        None
    };
    let stored = StoredMemory { docno, memory: merged };
    t.memories.place(space, &stored)?;
    // A memory this write creates has no labels yet: nothing to read.
    let label_ids = match &existing {
        None => t.set_labels_from(space, &stored.memory.id, BTreeSet::new(), &wanted_names, now)?,
        Some(_) => t.set_labels(space, &stored.memory.id, &wanted_names, now)?,
    };
    let assigned: Vec<String> = wanted_names.iter().cloned().collect();
    let graph = if stored.memory.is_crystal {
        super::graph::entities::MentionReport { entities: vec![], created_relationships: 0 }
    } else if text_changed || existing.is_none() {
        let et = entity_text(&stored.memory);
        let mentions = match prepared.take() {
            Some(p) if p.entity_text == et => p.mentions,
            _ => super::graph::entities::mentions_in(&et),
        };
        EntityWrite(&mut t.entities).set_mentions(space, &stored.memory.id, mentions, existing.is_none(), now)?
    } else {
        super::graph::entities::MentionReport {
            entities: EntityWrite(&mut t.entities).current_entities(space, &stored.memory.id)?,
            created_relationships: 0,
        }
    };
    ops.push(IndexOp::Put {
        space: space.to_string(),
        docno,
        meta: DocMeta::of(&stored.memory, label_ids.clone()),
        vector,
        lex,
    });
    let action = if existing.is_some() { WriteAction::Updated } else { WriteAction::Created };
    Ok(CreatedMemory {
        view: MemoryView { memory: stored.memory, label_ids: label_ids.into_iter().collect() },
        action,
        assigned_labels: assigned,
        warnings: vec![],
        entities: graph.entities,
        created_relationships: graph.created_relationships,
    })
}

/// Writes (creates or replaces) a derived memory such as a crystal in `space`, keeping what a person set on
/// it (favourite, state). Crystals get no entity mentions: they are derived from the graph, not part of it.
pub(crate) fn write_derived(
    embedder: &dyn crate::embed::Embedder,
    t: &mut MemoryWrite<'_>,
    mut memory: Memory,
    labels: BTreeSet<String>,
    new_docno: u64,
    now: Timestamp,
    ops: &mut Vec<IndexOp>,
) -> Result<()> {
    let space = memory.space_id.clone();
    let existing = t.load(&space, &memory.id)?.map(|sm| (space.clone(), sm));
    if let Some((_, sm)) = &existing {
        memory.created_at = sm.memory.created_at;
        memory.is_favorite = sm.memory.is_favorite;
        memory.state = sm.memory.state;
        memory.access_count = sm.memory.access_count;
        memory.last_accessed_at = sm.memory.last_accessed_at;
        memory.version = sm.memory.version;
    }
    let plan = PutPlan {
        space: &space,
        existing,
        merged: memory,
        labels: Some(labels),
        new_docno,
        vector: None,
        given: false,
        prepared: None,
    };
    put_with(embedder, t, plan, now, ops).map(|_| ())
}

/// Deletes a derived memory (a crystal whose sources no longer qualify).
pub(crate) fn remove_derived(
    t: &mut MemoryWrite<'_>,
    space: &str,
    id: &str,
    now: Timestamp,
    ops: &mut Vec<IndexOp>,
) -> Result<()> {
    if let Some(sm) = t.load(space, id)? {
        let (_, lex) = t.remove_memory(space, &sm, now)?;
        ops.push(IndexOp::Remove { space: space.to_string(), docno: sm.docno, lex: Some(lex) });
    }
    Ok(())
}

/// The memory `id` as a read by id sees it: its space and record. Not found when there is no such id, when
/// `space_guard` names another space, or when it was forgotten.
fn readable_memory(rtx: &ReadTx, id: &str, space_guard: Option<&str>) -> Result<(String, StoredMemory)> {
    let not_found = || Error::not_found(ErrorCode::MemoryNotFound, format!("memory '{id}' not found"));
    let space = memory::memory_space(&rtx)?.get(id)?.map(|v| v.value().to_string()).ok_or_else(not_found)?;
    if space_guard.is_some_and(|g| g != space) {
        return Err(not_found());
    }
    let sm: StoredMemory = memory::memories(&rtx)?.get((space.as_str(), id))?.ok_or_else(not_found)?;
    if sm.memory.state == MemoryState::Forgotten {
        return Err(not_found());
    }
    Ok((space, sm))
}
