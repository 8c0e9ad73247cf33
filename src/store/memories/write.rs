//! The record writer every memory change goes through ([`MemoryWrite`]), and the write of one memory with
//! its derived records (postings, catalog entry, vector, entity edges).

use super::*;

/// A typed record handle of a write transaction (see [`crate::store::records`]).
type W<'t, K, R> = crate::store::records::Records<Table<'t, K, crate::store::records::Bytes>, K, R>;

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

    pub(super) fn require_space(&self, space: &str) -> Result<()> {
        if !self.spaces.contains(space)? {
            return Err(Error::not_found(ErrorCode::SpaceNotFound, format!("space '{space}' does not exist")));
        }
        Ok(())
    }

    /// Adds the postings of `text` for `docno`; returns what the in-memory lexicon needs.
    pub(super) fn index_text(
        &mut self,
        space: &str,
        docno: u64,
        text: &str,
        prepared: Option<&mut Prepared>,
    ) -> Result<LexEntry> {
        let (tf, len) = match prepared {
            Some(p) if p.index_text == text => std::mem::take(&mut p.analysed),
            _ => lexicon::analyse(text),
        };
        self.memories.index_terms(space, docno, &tf, len)?;
        Ok(LexEntry { terms: tf, len })
    }

    /// Removes the postings of `text` for `docno`; returns what the in-memory lexicon needs.
    pub(super) fn unindex_text(&mut self, space: &str, docno: u64, text: &str) -> Result<LexEntry> {
        let (tf, len) = lexicon::analyse(text);
        self.memories.unindex_terms(space, docno, &tf, len)?;
        Ok(LexEntry { terms: tf, len })
    }

    pub(crate) fn load(&self, space: &str, id: &str) -> Result<Option<StoredMemory>> {
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
pub(super) struct PutPlan<'a> {
    pub(super) space: &'a str,
    pub(super) existing: Option<(String, StoredMemory)>,
    pub(super) merged: Memory,
    pub(super) labels: Option<BTreeSet<String>>,
    pub(super) new_docno: u64,
    /// The vector, when known (computed with the batch, moved along, or given by the caller).
    pub(super) vector: Option<Vec<f32>>,
    /// `vector` was given by the caller: the memory is re-indexed (new document number) even if its text is
    /// unchanged.
    pub(super) given: bool,
    /// What the batch computed for this memory before the transaction, if anything.
    pub(super) prepared: Option<Prepared>,
    /// Store `merged` as it is (a change from another device, `crate::store::sync`): its `version` and
    /// `updated_at` are not advanced.
    pub(super) exact: bool,
}

/// The work on a memory's text that needs no transaction, done for a whole batch in parallel before its one
/// commit (rayon): the analysed index text (terms, length) and the entity mentions, each with the text it was
/// computed from. The write path uses them only when its text is the same (an upsert may merge other fields in).
pub(crate) struct Prepared {
    pub(super) index_text: String,
    pub(super) analysed: (Vec<(String, u32)>, u32),
    pub(super) entity_text: String,
    pub(super) mentions: Vec<crate::extract::entities::Mention>,
}

impl Prepared {
    /// Prepares `m` as it would be written.
    pub(super) fn of(m: &Memory) -> Prepared {
        let index_text = m.index_text();
        let entity_text = entity_text(m);
        Prepared {
            analysed: lexicon::analyse(&index_text),
            mentions: if m.is_crystal { Vec::new() } else { crate::store::graph::entities::mentions_in(&entity_text) },
            index_text,
            entity_text,
        }
    }
}

/// Asks the write transaction for what writing `batch` will read ([`crate::store::records::ahead`]): on PostgreSQL the
/// spaces, BM25 statistics, given ids, labels, entity keys, entities and RELATES_TO weights of every memory of
/// the batch travel in one statement, instead of one statement per kind and memory.
pub(super) fn ask_reads(
    txn: &crate::storage::WriteTx,
    batch: &[NewMemory],
    label_sets: &[Option<BTreeSet<String>>],
    prepared: &[Option<Prepared>],
) {
    let mut reads = crate::store::records::ahead::WriteReads::default();
    for (i, n) in batch.iter().enumerate() {
        let space = n.space_id.as_deref().unwrap_or(DEFAULT_SPACE);
        reads.spaces.push(space);
        reads.memory_ids.extend(n.id.as_deref());
        if let Some(names) = label_sets.get(i).and_then(Option::as_ref) {
            reads.labels.extend(names.iter().map(|name| (space, Label::id_for(name))));
        }
        if let Some(p) = prepared.get(i).and_then(Option::as_ref) {
            let (keys, ids, pairs) = crate::store::graph::entities::mention_reads(&p.mentions);
            reads.entity_keys.extend(keys.into_iter().map(|k| (space, k)));
            reads.entities.extend(ids.into_iter().map(|id| (space, id)));
            reads.relates.extend(pairs.into_iter().map(|(a, b)| (space, a, b)));
        }
    }
    reads.spaces.sort_unstable();
    reads.spaces.dedup();
    crate::store::records::ahead::ask(txn, &reads);
}

/// Writes one memory according to `plan` with `embedder`, appending the index changes to `ops`.
pub(super) fn put_with(
    embedder: &dyn crate::embed::Embedder,
    t: &mut MemoryWrite<'_>,
    plan: PutPlan<'_>,
    now: Timestamp,
    ops: &mut Vec<IndexOp>,
) -> Result<CreatedMemory> {
    let PutPlan { space, existing, mut merged, labels, new_docno, vector, given, mut prepared, exact } = plan;
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
        if !exact {
            cmp.updated_at = sm.memory.updated_at;
        }
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
        && !exact
    {
        merged.version = sm.memory.version + 1;
    }
    if !exact {
        merged.updated_at = now;
    }
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
        crate::store::graph::entities::MentionReport { entities: vec![], created_relationships: 0 }
    } else if text_changed || existing.is_none() {
        let et = entity_text(&stored.memory);
        let mentions = match prepared.take() {
            Some(p) if p.entity_text == et => p.mentions,
            _ => crate::store::graph::entities::mentions_in(&et),
        };
        EntityWrite(&mut t.entities).set_mentions(space, &stored.memory.id, mentions, existing.is_none(), now)?
    } else {
        crate::store::graph::entities::MentionReport {
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

/// Writes `memory` as another device sent it (sync's merge, `crate::store::sync`): its replicated fields exactly
/// as given (no version or `updated_at` advanced), this device's own fields kept (read counts, decay, PageRank,
/// re-index bookkeeping), its labels exactly `label_ids`, moved between spaces and re-indexed as its space and
/// text require, with `vector` (embedded ahead) or embedded here. The index changes are appended to `ops`.
///
/// # Errors
/// Storage errors; the embedder's errors.
#[allow(clippy::too_many_arguments)]
pub(crate) fn put_remote(
    embedder: &dyn crate::embed::Embedder,
    txn: &WriteTx,
    t: &mut MemoryWrite<'_>,
    memory: Memory,
    label_ids: &BTreeSet<String>,
    vector: Option<Vec<f32>>,
    now: Timestamp,
    ops: &mut Vec<IndexOp>,
) -> Result<()> {
    let existing = match t.memories.space_of(&memory.id)? {
        Some(s) => t.load(&s, &memory.id)?.map(|sm| (s, sm)),
        None => None,
    };
    let merged = crate::store::records::sync::with_local_fields(memory, existing.as_ref().map(|(_, sm)| &sm.memory));
    let names = label_ids.iter().map(|l| l.strip_prefix("label_").unwrap_or(l).to_string()).collect();
    let new_docno = crate::store::records::meta::alloc_docnos(txn, 1)?;
    let space = merged.space_id.clone();
    let plan = PutPlan {
        space: &space,
        existing,
        merged,
        labels: Some(names),
        new_docno,
        vector,
        given: false,
        prepared: None,
        exact: true,
    };
    put_with(embedder, t, plan, now, ops).map(|_| ())
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
        exact: false,
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
