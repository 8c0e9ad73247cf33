//! The memory service ([`Memories`], `store.memories()`): create (upsert by id), update, delete, get, list, and
//! the lexical postings that follow every text change. `lifecycle.rs` has the state moves, favourites and read
//! counts; `expiry.rs` the expiry sweep; `input.rs` the validation of input; `write.rs` the record writer
//! (`MemoryWrite`) every memory change goes through.

use crate::index::first_in_order;
use crate::storage::{ReadTx, Table, WriteTx};
use std::collections::{BTreeMap, BTreeSet};

use super::graph::entities::EntityWrite;
use super::{
    DEFAULT_SPACE, IndexOp, KnowledgeStore, LexEntry, StoredMemory, range_prefix3,
    types::{CreatedMemory, DeleteReport, ListOrder, ListQuery, MemoryView, Page, WriteAction},
};
use super::{entity, label, memory, relation, space};
use crate::embed::InputType;
use crate::error::ErrorCode;
use crate::error::{Error, ErrorKind, FieldError, Result};
use crate::index::catalog::DocMeta;
use crate::index::lexicon;
use crate::model::{Label, Memory, MemoryState, Metadata, Space, Timestamp, date_precision};

mod expiry;
mod input;
mod lifecycle;
mod write;

pub use expiry::ExpiryStatus;
pub(crate) use input::check_label_name;
pub use input::{MemoryPatch, NewMemory};
use input::{apply_new, apply_patch, validate_new, validate_patch};
pub use lifecycle::{StateChange, Transition};
pub(crate) use write::{MemoryWrite, Prepared, new_label, put_remote, remove_derived, write_derived};
use write::{PutPlan, ask_reads, put_with};

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

/// The memories of a store's spaces, borrowed from the store (`store.memories()`).
///
/// Owns: the `memory` records (content, metadata, state, labels' edges, vectors, the lexical postings and the
/// catalog entries that follow them), their lifecycle moves, read counts and the expiry sweep.
#[derive(Clone, Copy)]
pub struct Memories<'s> {
    pub(crate) store: &'s KnowledgeStore,
}

impl Memories<'_> {
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
    pub fn create(&self, new: NewMemory) -> Result<CreatedMemory> {
        let mut out = self.create_many(vec![new])?;
        out.pop().ok_or_else(|| Error::new(ErrorKind::Internal, "empty batch result"))
    }

    /// Stores many memories in one write transaction (one fsync): all or none. Embeds them in one batch.
    /// Same rules and errors as [`Memories::create`](crate::store::Memories::create); a validation error names the item index.
    pub fn create_many(&self, batch: Vec<NewMemory>) -> Result<Vec<CreatedMemory>> {
        self.create_many_with(batch, true)
    }

    /// [`Memories::create_many`](crate::store::Memories::create_many), raising timeline reviews ([`crate::store::ReviewEvent`]) only when
    /// `reviews` is true.
    pub(crate) fn create_many_with(&self, batch: Vec<NewMemory>, reviews: bool) -> Result<Vec<CreatedMemory>> {
        // A batch has the cores: the HNSW builder waits between chunks until it is written.
        let _writing = (batch.len() > 1).then(|| super::core::indexes::Running::start(&self.store.core.batch_writes));
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
        let embedder = &*self.store.core.config.embedder;
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

        let results = self.store.core.write(|txn, ops| {
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
                let plan =
                    PutPlan { space, existing, merged, labels, new_docno, vector, given, prepared, exact: false };
                results.push(self.put(&mut t, plan, now, ops)?);
            }
            Ok(results)
        })?;
        if reviews {
            self.store.reviews().raise(&results);
        }
        Ok(results)
    }

    /// Writes one memory according to `plan`, appending the index changes to `ops`.
    fn put(
        &self,
        t: &mut MemoryWrite<'_>,
        plan: PutPlan<'_>,
        now: Timestamp,
        ops: &mut Vec<IndexOp>,
    ) -> Result<CreatedMemory> {
        put_with(&*self.store.core.config.embedder, t, plan, now, ops)
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
            exact: false,
        };
        self.put(t, plan, now, ops).map(|_| ())
    }

    /// Reads a memory by id. `space_guard`, when given, must be the memory's space.
    ///
    /// # Errors
    /// [`ErrorKind::NotFound`] (`memory_not_found`): no such id, another space than the guard, or forgotten.
    pub fn get(&self, id: &str, space_guard: Option<&str>) -> Result<MemoryView> {
        let rtx = self.store.core.db.read()?;
        let (space, sm) = readable_memory(&rtx, id, space_guard)?;
        let ml = label::memory_labels(&rtx)?;
        let label_ids = range_prefix3(&ml, &space, id)?;
        let mut memory = sm.memory;
        memory.pagerank_score = self.store.graph().memory_pagerank(&space, id);
        Ok(MemoryView { memory, label_ids })
    }

    /// The stored vector of a memory: `dim` floats (the active embedder's dimension), L2-normalised, read back
    /// from the half-precision form it is stored in (relative error at most 2^-11 per component). None when the
    /// memory has no vector (an external-embedder store given none, or one still waiting to be re-embedded).
    ///
    /// # Errors
    /// [`ErrorKind::NotFound`] (`memory_not_found`): as [`Memories::get`](crate::store::Memories::get).
    pub fn embedding(&self, id: &str, space_guard: Option<&str>) -> Result<Option<Vec<f32>>> {
        let rtx = self.store.core.db.read()?;
        let (space, sm) = readable_memory(&rtx, id, space_guard)?;
        let dim = self.store.core.config.embedder.dim();
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
    pub fn update(&self, id: &str, patch: MemoryPatch, space_guard: Option<&str>) -> Result<MemoryView> {
        let mut errs = Vec::new();
        let labels = validate_patch(&patch, &mut errs);
        let given = patch
            .embedding
            .as_ref()
            .and_then(|v| crate::embed::check_vector(v, &*self.store.core.config.embedder, &["embedding"], &mut errs));
        if !errs.is_empty() {
            return Err(Error::invalid(errs));
        }
        let now = Timestamp::now();
        let created = self.store.core.write(|txn, ops| {
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
                exact: false,
            };
            self.put(&mut t, plan, now, ops)
        })?;
        Ok(created.view)
    }

    /// Deletes a memory, its vector, postings and label edges (one write transaction).
    ///
    /// # Errors
    /// [`ErrorKind::NotFound`] (`memory_not_found`) when there is no such memory (in `space_guard`, if given).
    pub fn delete(&self, id: &str, space_guard: Option<&str>) -> Result<DeleteReport> {
        let now = Timestamp::now();
        let report = self.store.core.write(|txn, ops| {
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
    pub fn list(&self, q: &ListQuery) -> Result<Page<MemoryView>> {
        self.list_ordered(q, ListOrder::Recent)
    }

    /// As [`Memories::list`](crate::store::Memories::list), in `order` (newest first, importance or PageRank, ties by id). O(n) in the
    /// memories that pass the filter plus O(m log m) for the `m = offset + limit` first of the order, which are
    /// selected before they are sorted (`select_nth_unstable`); then one batched read of the page's records and
    /// labels. `GET /memories?limit=10` over 1,000,000 memories on PostgreSQL: 75 ms p50 (944 ms when every
    /// listing sorted them all; `docs/deploy.md`).
    ///
    /// # Errors
    /// As [`Memories::list`](crate::store::Memories::list).
    pub fn list_ordered(&self, q: &ListQuery, order: ListOrder) -> Result<Page<MemoryView>> {
        self.store.spaces().require(&q.space_id)?;
        let keep = q.offset.saturating_add(q.limit);
        let listed = self.store.core.with_catalog(&q.space_id, |catalog| {
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
                    let ranked = self.store.core.with_space_ranks(&q.space_id, |ranks| {
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
        let rtx = self.store.core.db.read()?;
        let keys: Vec<(&str, &str)> = ids.iter().map(|id| (space, *id)).collect();
        let records = memory::memories(&rtx)?.get_many(&keys)?;
        let labels = crate::storage::txn::range_prefix3_many(&label::memory_labels(&rtx)?, space, &ids)?;
        // The PageRank of every id at once (in the database index mode one statement, not a transaction per id).
        let ranks = self.store.core.memory_pageranks(&rtx, space, &ids)?;
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
    pub fn scan(&self, space: &str, mut f: impl FnMut(&Memory) -> bool) -> Result<()> {
        let rtx = self.store.core.db.read()?;
        memory::memories(&rtx)?
            .each_in_space(space, |_, sm: StoredMemory| sm.memory.state == MemoryState::Forgotten || f(&sm.memory))
    }
}

/// The memory `id` as a read by id sees it: its space and record. Not found when there is no such id, when
/// `space_guard` names another space, or when it was forgotten.
fn readable_memory(rtx: &ReadTx, id: &str, space_guard: Option<&str>) -> Result<(String, StoredMemory)> {
    let not_found = || Error::not_found(ErrorCode::MemoryNotFound, format!("memory '{id}' not found"));
    let space = memory::space_of(&rtx, id)?.ok_or_else(not_found)?;
    if space_guard.is_some_and(|g| g != space) {
        return Err(not_found());
    }
    let sm: StoredMemory = memory::memories(&rtx)?.get((space.as_str(), id))?.ok_or_else(not_found)?;
    if sm.memory.state == MemoryState::Forgotten {
        return Err(not_found());
    }
    Ok((space, sm))
}
