//! Label maintenance: read, update (rename), delete, health report, merge candidates, merge and its reversal,
//! consolidation of exact-canonical duplicates, the consolidation preview, and the preview/apply plans the CLI
//! uses (`nmem labels merge|delete`). See docs/api.md "Labels".
//!
//! **Canonical form** ([`canonical_label`]): Unicode lowercase; a lower-to-upper case change starts a new word
//! (`MachineLearning`); every run of characters that are not letters or digits is one separator; words are
//! joined by one space. `Machine Learning`, `machine-learning`, `machine_learning` and `MachineLearning` all
//! have the canonical form `machine learning`.
//!
//! Edge changes never touch memory records (their `updated_at` and version stay); label usage counts are
//! recounted from the HAS_LABEL edges after every change.

use std::collections::{BTreeMap, BTreeSet};

use redb::{ReadableDatabase, ReadableTable, WriteTransaction};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::memories::{WTables, check_label_name};
use super::tables::*;
use super::{IndexOp, KnowledgeStore, StoredMemory, get_record, range_prefix2, range_prefix3, schema};
use crate::embed::{InputType, cosine, fnv1a};
use crate::error::ErrorCode;
use crate::error::{Error, ErrorKind, FieldError, Result};
use crate::model::{Label, Timestamp};

/// The canonical form of a label name (module docs).
pub fn canonical_label(name: &str) -> String {
    let mut words: Vec<String> = Vec::new();
    let mut cur = String::new();
    let mut prev_lower = false;
    for ch in name.chars() {
        if ch.is_alphanumeric() {
            if ch.is_uppercase() && prev_lower && !cur.is_empty() {
                words.push(std::mem::take(&mut cur));
            }
            cur.extend(ch.to_lowercase());
            prev_lower = ch.is_lowercase() || ch.is_numeric();
        } else {
            if !cur.is_empty() {
                words.push(std::mem::take(&mut cur));
            }
            prev_lower = false;
        }
    }
    if !cur.is_empty() {
        words.push(cur);
    }
    words.join(" ")
}

/// Fields of [`KnowledgeStore::update_label`]; None keeps the stored value.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LabelPatch {
    /// New name (1..=100 characters). Renaming re-keys the label to `label_<new name>` and moves its edges.
    pub name: Option<String>,
    /// Hex colour `#rgb` or `#rrggbb`.
    pub color: Option<String>,
    /// At most 1,000 characters.
    pub description: Option<String>,
}

/// What deleting a label removed.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct LabelDeleteReport {
    /// The label as it was.
    pub label: Label,
    /// HAS_LABEL edges removed (memories keep everything else).
    pub removed_edges: u64,
}

/// A recorded merge: enough to put every edge back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct LabelMerge {
    /// `merge_<uuidv7>`.
    pub merge_id: String,
    /// Space of both labels.
    pub space_id: String,
    /// The label merged away, as it was before the merge.
    pub source: Label,
    /// The survivor.
    pub target_id: String,
    /// Memories that carried the source only (their edge was re-pointed to the target).
    pub moved_memory_ids: Vec<String>,
    /// Memories that carried both (their source edge was dropped).
    pub shared_memory_ids: Vec<String>,
    /// When the merge happened.
    pub merged_at: Timestamp,
    /// When it was reversed, if it was.
    pub reversed_at: Option<Timestamp>,
}

/// Vocabulary health of one space or of all (GET /labels/health).
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct LabelHealth {
    /// The space reported, or None for all spaces.
    pub space_id: Option<String>,
    /// Labels in the vocabulary.
    pub vocabulary_size: u64,
    /// Labels used by no memory.
    pub unused_labels: u64,
    /// Labels used by exactly one memory.
    pub singleton_labels: u64,
    /// `singleton_labels / vocabulary_size` (0 for an empty vocabulary).
    pub singleton_rate: f64,
    /// Memories (any state but forgotten).
    pub memories: u64,
    /// Memories carrying at least one label.
    pub labelled_memories: u64,
    /// `labelled_memories / memories`.
    pub coverage: f64,
    /// HAS_LABEL edges per memory, over all memories.
    pub labels_per_memory: f64,
    /// HAS_LABEL edges per labelled memory.
    pub labels_per_labelled_memory: f64,
    /// Groups of two or more labels with one canonical form (what consolidate would merge).
    pub canonical_fork_groups: u64,
    /// Labels consolidate would merge away (the backlog).
    pub canonical_fork_backlog: u64,
}

/// A semantically near label pair.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct MergeCandidate {
    /// Suggested to merge away (the lower usage of the two).
    pub source_id: String,
    /// Its name.
    pub source_name: String,
    /// Suggested survivor.
    pub target_id: String,
    /// Its name.
    pub target_name: String,
    /// Cosine similarity of the two names' embeddings, in `[sim_floor, 1]`.
    pub similarity: f64,
    /// Usage of the source.
    pub source_usage: u64,
    /// Usage of the target.
    pub target_usage: u64,
}

/// One group of exact-canonical duplicates.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct ConsolidationGroup {
    /// The shared canonical form.
    pub canonical: String,
    /// The survivor: highest usage, then oldest, then smallest name.
    pub survivor_id: String,
    /// Labels merged into the survivor.
    pub merged_ids: Vec<String>,
    /// HAS_LABEL edges that move (or are dropped as duplicates).
    pub edges: u64,
}

/// Result of [`KnowledgeStore::consolidate_labels`].
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct ConsolidationReport {
    /// True: the plan only, nothing changed.
    pub dry_run: bool,
    /// The groups (at most `max_groups`, largest usage first).
    pub groups: Vec<ConsolidationGroup>,
    /// Groups beyond `max_groups` left for a later call.
    pub remaining_groups: u64,
    /// Labels merged away (0 on a dry run).
    pub merged_labels: u64,
    /// The recorded merges (each reversible); empty on a dry run.
    pub merge_ids: Vec<String>,
}

/// A semantic pair with the deterministic judge's verdict.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct JudgedPair {
    /// The pair.
    #[serde(flatten)]
    pub pair: MergeCandidate,
    /// Character-trigram Jaccard similarity of the canonical forms, 0..=1.
    pub string_similarity: f64,
    /// Jaccard similarity of the sets of memories carrying each label, 0..=1.
    pub co_usage: f64,
    /// `0.5 x similarity + 0.3 x string_similarity + 0.2 x co_usage`.
    pub judge_score: f64,
    /// `merge` (score >= 0.8), `review` (>= 0.65) or `keep`.
    pub verdict: String,
}

/// Result of [`KnowledgeStore::consolidation_preview`]: never mutates.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct ConsolidationPreview {
    /// What consolidate would do with exact-canonical duplicates.
    pub exact: ConsolidationReport,
    /// Semantic pairs judged (at most `max_pairs`).
    pub semantic: Vec<JudgedPair>,
    /// Always `deterministic:embedding+trigram+co-usage`: no language model is consulted.
    pub judge: String,
}

/// A preview of a merge or delete, bound to the state it saw by `plan_id`.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct LabelPlan {
    /// Hash of the action, the labels and their current edges; apply refuses a stale id.
    pub plan_id: String,
    /// `merge` or `delete`.
    pub action: String,
    /// The label merged away or deleted.
    pub source: Label,
    /// The survivor of a merge.
    pub target: Option<Label>,
    /// Memories whose label edges change.
    pub affected_memories: u64,
    /// The same count by record kind, as the CLI reads it (`memories`; sources, entities and threads carry no
    /// labels here, so they are 0).
    pub affected: AffectedCounts,
    /// Merge: memories carrying both labels, whose two edges become one.
    pub duplicate_assignments: u64,
    /// Up to 20 of them.
    pub sample_memory_ids: Vec<String>,
    /// What apply will do, in words.
    pub message: String,
}

/// Records a label plan touches, by kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, ToSchema)]
pub struct AffectedCounts {
    /// Memories.
    pub memories: u64,
    /// Sources (always 0: sources carry no labels yet).
    pub sources: u64,
    /// Entities (always 0).
    pub entities: u64,
    /// Threads (always 0).
    pub threads: u64,
}

/// Most labels whose name vectors the store caches.
const LABEL_VECTOR_CACHE: usize = 20_000;

fn label_not_found(id: &str) -> Error {
    Error::not_found(ErrorCode::LabelNotFound, format!("label '{id}' not found"))
}

fn load_label(
    t: &impl ReadableTable<(&'static str, &'static str), &'static [u8]>,
    space: &str,
    id: &str,
) -> Result<Label> {
    get_record(t, (space, id))?.ok_or_else(|| label_not_found(id))
}

fn trigrams(s: &str) -> BTreeSet<String> {
    let padded: Vec<char> = format!("  {s} ").chars().collect();
    padded.windows(3).map(|w| w.iter().collect()).collect()
}

fn jaccard<T: Ord>(a: &BTreeSet<T>, b: &BTreeSet<T>) -> f64 {
    let union = a.union(b).count();
    if union == 0 { 0.0 } else { a.intersection(b).count() as f64 / union as f64 }
}

impl WTables<'_> {
    fn memories_with(&self, space: &str, label_id: &str) -> Result<Vec<String>> {
        range_prefix3(&self.label_memories, space, label_id)
    }

    fn add_edge(&mut self, space: &str, memory: &str, label: &str) -> Result<()> {
        self.memory_labels.insert((space, memory, label), ())?;
        self.label_memories.insert((space, label, memory), ())?;
        Ok(())
    }

    fn remove_edge(&mut self, space: &str, memory: &str, label: &str) -> Result<()> {
        self.memory_labels.remove((space, memory, label))?;
        self.label_memories.remove((space, label, memory))?;
        Ok(())
    }

    /// Sets the usage count of a label to its number of edges. A derived count, so `updated_at` stays (as
    /// when memory writes change it).
    fn recount(&mut self, space: &str, label_id: &str) -> Result<()> {
        if let Some(mut l) = get_record::<_, Label>(&self.labels, (space, label_id))? {
            let n = self.memories_with(space, label_id)?.len() as u64;
            if l.usage_count != n {
                l.usage_count = n;
                self.labels.insert((space, label_id), schema::encode(&l)?.as_slice())?;
            }
        }
        Ok(())
    }

    /// Catalog updates for memories whose label edges changed.
    fn catalog_ops(&self, space: &str, ids: &BTreeSet<String>, ops: &mut Vec<IndexOp>) -> Result<()> {
        for id in ids {
            if let Some(sm) = get_record::<_, StoredMemory>(&self.memories, (space, id.as_str()))? {
                let labels = self.label_ids(space, id)?;
                ops.push(IndexOp::meta(space, &sm, labels));
            }
        }
        Ok(())
    }

    /// Merges `source` into `target` of `space` and records it. Returns the record and the touched memories.
    fn merge(
        &mut self,
        txn: &WriteTransaction,
        space: &str,
        source: &str,
        target: &str,
        now: Timestamp,
    ) -> Result<LabelMerge> {
        // Unknown labels are 404 before anything else.
        let src = load_label(&self.labels, space, source)?;
        load_label(&self.labels, space, target)?;
        if source == target {
            return Err(Error::invalid_value(
                &["target_id"],
                "value_error",
                "a label cannot be merged into itself",
                target.into(),
            ));
        }
        let target_has: BTreeSet<String> = self.memories_with(space, target)?.into_iter().collect();
        let mut moved = Vec::new();
        let mut shared = Vec::new();
        for m in self.memories_with(space, source)? {
            self.remove_edge(space, &m, source)?;
            if target_has.contains(&m) {
                shared.push(m);
            } else {
                self.add_edge(space, &m, target)?;
                moved.push(m);
            }
        }
        self.labels.remove((space, source))?;
        self.recount(space, target)?;
        let rec = LabelMerge {
            merge_id: format!("merge_{}", uuid::Uuid::now_v7()),
            space_id: space.to_string(),
            source: src,
            target_id: target.to_string(),
            moved_memory_ids: moved,
            shared_memory_ids: shared,
            merged_at: now,
            reversed_at: None,
        };
        txn.open_table(LABEL_MERGES)?.insert((space, rec.merge_id.as_str()), schema::encode(&rec)?.as_slice())?;
        Ok(rec)
    }
}

impl KnowledgeStore {
    fn label_write<T>(
        &self,
        f: impl FnOnce(&WriteTransaction, &mut WTables<'_>, &mut BTreeSet<(String, String)>) -> Result<T>,
    ) -> Result<T> {
        let _w = self.writer.lock();
        let mut ops = Vec::new();
        let out = self.write_txn(|txn| {
            let mut t = WTables::open(txn)?;
            let mut touched: BTreeSet<(String, String)> = BTreeSet::new();
            let out = f(txn, &mut t, &mut touched)?;
            let mut by_space: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
            for (s, m) in touched {
                by_space.entry(s).or_default().insert(m);
            }
            for (s, ids) in by_space {
                t.catalog_ops(&s, &ids, &mut ops)?;
            }
            Ok(out)
        })?;
        self.apply(ops);
        Ok(out)
    }

    /// One label.
    ///
    /// # Errors
    /// [`ErrorKind::NotFound`]: `space_not_found`, `label_not_found`.
    pub fn get_label(&self, space: &str, id: &str) -> Result<Label> {
        self.require_space(space)?;
        let rtx = self.db.begin_read()?;
        load_label(&rtx.open_table(LABELS)?, space, id)
    }

    /// Changes a label's name, colour or description. A new name re-keys the label to `label_<name>` (ids
    /// derive from names) and re-points its edges; the response carries the new id.
    ///
    /// # Errors
    /// * [`ErrorKind::InvalidInput`]: bad name, colour or description.
    /// * [`ErrorKind::NotFound`]: `label_not_found`, `space_not_found`.
    /// * [`ErrorKind::Conflict`] (`label_exists`): another label has the new name (merge them instead).
    pub fn update_label(&self, space: &str, id: &str, patch: LabelPatch) -> Result<Label> {
        let mut errs = Vec::new();
        let name = patch.name.as_deref().and_then(|n| check_label_name(n, &["name"], &mut errs));
        if let Some(c) = &patch.color
            && !super::labels::check_color(c)
        {
            errs.push(FieldError::field(
                &["color"],
                "color_invalid",
                "expected a hex colour such as #3b82f6",
                c.clone().into(),
            ));
        }
        if patch.description.as_ref().is_some_and(|d| d.chars().count() > 1000) {
            errs.push(FieldError::field(
                &["description"],
                "string_too_long",
                "at most 1000 characters",
                serde_json::Value::Null,
            ));
        }
        if !errs.is_empty() {
            return Err(Error::invalid(errs));
        }
        self.require_space(space)?;
        let now = Timestamp::now();
        self.label_write(|_, t, touched| {
            let mut l = load_label(&t.labels, space, id)?;
            if let Some(c) = &patch.color {
                l.color = c.clone();
            }
            if let Some(d) = &patch.description {
                l.description = d.clone();
            }
            l.updated_at = now;
            if let Some(n) = name.filter(|n| *n != l.name) {
                let new_id = Label::id_for(&n);
                if new_id != l.id && t.labels.get((space, new_id.as_str()))?.is_some() {
                    return Err(Error::new(
                        ErrorKind::Conflict,
                        format!("label '{n}' already exists; merge the two labels instead"),
                    )
                    .with_code(ErrorCode::LabelExists));
                }
                for m in t.memories_with(space, id)? {
                    t.remove_edge(space, &m, id)?;
                    t.add_edge(space, &m, &new_id)?;
                    touched.insert((space.to_string(), m));
                }
                t.labels.remove((space, id))?;
                l.id = new_id;
                l.name = n;
            }
            t.labels.insert((space, l.id.as_str()), schema::encode(&l)?.as_slice())?;
            Ok(l)
        })
    }

    /// Deletes a label and all its HAS_LABEL edges; the memories stay.
    ///
    /// # Errors
    /// [`ErrorKind::NotFound`]: `label_not_found`, `space_not_found`.
    pub fn delete_label(&self, space: &str, id: &str) -> Result<LabelDeleteReport> {
        self.require_space(space)?;
        self.label_write(|_, t, touched| {
            let label = load_label(&t.labels, space, id)?;
            let mut removed = 0;
            for m in t.memories_with(space, id)? {
                t.remove_edge(space, &m, id)?;
                touched.insert((space.to_string(), m));
                removed += 1;
            }
            t.labels.remove((space, id))?;
            Ok(LabelDeleteReport { label, removed_edges: removed })
        })
    }

    /// Merges label `source` into `target` (same space): every HAS_LABEL edge of the source is re-pointed to
    /// the target, the source is deleted, and the merge is recorded so that
    /// [`KnowledgeStore::reverse_label_merge`] can restore every edge.
    ///
    /// # Errors
    /// [`ErrorKind::NotFound`] (`label_not_found`, `space_not_found`); [`ErrorKind::InvalidInput`] when source
    /// and target are the same.
    pub fn merge_labels(&self, space: &str, source: &str, target: &str) -> Result<LabelMerge> {
        self.require_space(space)?;
        let now = Timestamp::now();
        self.label_write(|txn, t, touched| {
            let rec = t.merge(txn, space, source, target, now)?;
            touched.extend(
                rec.moved_memory_ids.iter().chain(&rec.shared_memory_ids).map(|m| (space.to_string(), m.clone())),
            );
            Ok(rec)
        })
    }

    /// Recorded merges of a space, newest first.
    ///
    /// # Errors
    /// [`ErrorKind::NotFound`] (`space_not_found`).
    pub fn label_merges(&self, space: &str) -> Result<Vec<LabelMerge>> {
        self.require_space(space)?;
        let rtx = self.db.begin_read()?;
        let t = rtx.open_table(LABEL_MERGES)?;
        let mut out: Vec<LabelMerge> = Vec::new();
        for (_, v) in range_prefix2(&t, space)? {
            out.push(schema::decode(v.value())?);
        }
        out.sort_by(|a, b| b.merge_id.cmp(&a.merge_id));
        Ok(out)
    }

    /// Undoes a recorded merge: the source label comes back as it was (same id, name, colour, description,
    /// creation time), memories that had only the source lose the target edge and get the source back, and
    /// memories that had both get the source edge back. Edges added to the target after the merge stay.
    ///
    /// # Errors
    /// * [`ErrorKind::NotFound`]: `merge_not_found`, `space_not_found`.
    /// * [`ErrorKind::Conflict`]: `merge_reversed` (already undone), `label_exists` (a label with the
    ///   source's id exists again).
    pub fn reverse_label_merge(&self, space: &str, merge_id: &str) -> Result<LabelMerge> {
        self.require_space(space)?;
        let now = Timestamp::now();
        self.label_write(|txn, t, touched| {
            let mut merges = txn.open_table(LABEL_MERGES)?;
            let mut rec: LabelMerge = get_record(&merges, (space, merge_id))?
                .ok_or_else(|| Error::not_found(ErrorCode::MergeNotFound, format!("merge '{merge_id}' not found")))?;
            if rec.reversed_at.is_some() {
                return Err(Error::new(ErrorKind::Conflict, format!("merge '{merge_id}' was already reversed"))
                    .with_code(ErrorCode::MergeReversed));
            }
            let sid = rec.source.id.clone();
            if t.labels.get((space, sid.as_str()))?.is_some() {
                return Err(Error::new(
                    ErrorKind::Conflict,
                    format!("label '{sid}' exists again; delete or rename it first"),
                )
                .with_code(ErrorCode::LabelExists));
            }
            t.labels.insert((space, sid.as_str()), schema::encode(&rec.source)?.as_slice())?;
            for m in &rec.moved_memory_ids {
                if t.memories.get((space, m.as_str()))?.is_none() {
                    continue; // deleted since the merge
                }
                t.remove_edge(space, m, &rec.target_id)?;
                t.add_edge(space, m, &sid)?;
                touched.insert((space.to_string(), m.clone()));
            }
            for m in &rec.shared_memory_ids {
                if t.memories.get((space, m.as_str()))?.is_none() {
                    continue;
                }
                t.add_edge(space, m, &sid)?;
                touched.insert((space.to_string(), m.clone()));
            }
            // The restored record keeps its stored usage count unless the edges say otherwise.
            let n = t.memories_with(space, &sid)?.len() as u64;
            if n != rec.source.usage_count {
                t.recount(space, &sid)?;
            }
            t.recount(space, &rec.target_id)?;
            rec.reversed_at = Some(now);
            merges.insert((space, merge_id), schema::encode(&rec)?.as_slice())?;
            Ok(rec)
        })
    }

    /// Every label record of `space`, in id order.
    pub(crate) fn all_labels(&self, space: &str) -> Result<Vec<Label>> {
        let rtx = self.db.begin_read()?;
        let t = rtx.open_table(LABELS)?;
        let mut out: Vec<Label> = Vec::new();
        for (_, v) in range_prefix2(&t, space)? {
            out.push(schema::decode(v.value())?);
        }
        Ok(out)
    }

    /// Vocabulary health of `space`, or of every space when None.
    ///
    /// # Errors
    /// [`ErrorKind::NotFound`] (`space_not_found`).
    pub fn label_health(&self, space: Option<&str>) -> Result<LabelHealth> {
        let spaces: Vec<String> = match space {
            Some(s) => {
                self.require_space(s)?;
                vec![s.to_string()]
            }
            None => self.list_spaces()?.into_iter().map(|s| s.id).collect(),
        };
        let (mut vocab, mut unused, mut single, mut forks, mut backlog) = (0u64, 0u64, 0u64, 0u64, 0u64);
        let (mut memories, mut labelled, mut edges) = (0u64, 0u64, 0u64);
        for s in &spaces {
            let labels = self.all_labels(s)?;
            vocab += labels.len() as u64;
            unused += labels.iter().filter(|l| l.usage_count == 0).count() as u64;
            single += labels.iter().filter(|l| l.usage_count == 1).count() as u64;
            let mut groups: BTreeMap<String, u64> = BTreeMap::new();
            for l in &labels {
                *groups.entry(canonical_label(&l.name)).or_default() += 1;
            }
            for n in groups.values().filter(|n| **n > 1) {
                forks += 1;
                backlog += n - 1;
            }
            let state = self.index.read();
            if let Some(si) = state.spaces.get(s) {
                for (_, m) in si.catalog.iter() {
                    if m.state == crate::model::MemoryState::Forgotten {
                        continue;
                    }
                    memories += 1;
                    if !m.labels.is_empty() {
                        labelled += 1;
                        edges += m.labels.len() as u64;
                    }
                }
            }
        }
        let ratio = |a: u64, b: u64| if b == 0 { 0.0 } else { a as f64 / b as f64 };
        Ok(LabelHealth {
            space_id: space.map(str::to_string),
            vocabulary_size: vocab,
            unused_labels: unused,
            singleton_labels: single,
            singleton_rate: ratio(single, vocab),
            memories,
            labelled_memories: labelled,
            coverage: ratio(labelled, memories),
            labels_per_memory: ratio(edges, memories),
            labels_per_labelled_memory: ratio(edges, labelled),
            canonical_fork_groups: forks,
            canonical_fork_backlog: backlog,
        })
    }

    /// Embeddings of label names, cached per store (the embedder is fixed for a store's life).
    fn label_vectors(&self, names: &[&str]) -> Result<Vec<Vec<f32>>> {
        let missing: Vec<&str> = {
            let cache = self.label_vector_cache.lock();
            names.iter().copied().filter(|n| !cache.contains_key(*n)).collect()
        };
        if !missing.is_empty() {
            let vecs = self.config.embedder.embed(&missing, InputType::Document)?;
            let mut cache = self.label_vector_cache.lock();
            if cache.len() + missing.len() > LABEL_VECTOR_CACHE {
                cache.clear();
            }
            for (n, v) in missing.iter().zip(vecs) {
                cache.insert((*n).to_string(), v);
            }
        }
        let cache = self.label_vector_cache.lock();
        names
            .iter()
            .map(|n| match cache.get(*n) {
                Some(v) => Ok(v.clone()),
                None => self
                    .config
                    .embedder
                    .embed(&[n], InputType::Document)?
                    .pop()
                    .ok_or_else(|| Error::new(ErrorKind::Internal, "embedder returned no vector")),
            })
            .collect()
    }

    /// Semantically near label pairs: cosine similarity of the name embeddings at or above `sim_floor`, among
    /// the `max_labels` most used labels of `space`, best `max_pairs` first. Pairs with one canonical form are
    /// excluded (consolidate handles them). Read-only. O(max_labels^2) cosine computations.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`]: `sim_floor` outside 0..=1, `max_labels` outside 2..=5000, `max_pairs`
    /// outside 1..=1000. [`ErrorKind::NotFound`] (`space_not_found`).
    pub fn label_merge_candidates(
        &self,
        space: &str,
        sim_floor: f64,
        max_labels: usize,
        max_pairs: usize,
    ) -> Result<Vec<MergeCandidate>> {
        let mut errs = Vec::new();
        if !(0.0..=1.0).contains(&sim_floor) {
            errs.push(FieldError::field(&["sim_floor"], "number_out_of_range", "sim_floor is 0..=1", sim_floor.into()));
        }
        if !(2..=5000).contains(&max_labels) {
            errs.push(FieldError::field(
                &["max_labels"],
                "number_out_of_range",
                "max_labels is 2..=5000",
                max_labels.into(),
            ));
        }
        if !(1..=1000).contains(&max_pairs) {
            errs.push(FieldError::field(
                &["max_pairs"],
                "number_out_of_range",
                "max_pairs is 1..=1000",
                max_pairs.into(),
            ));
        }
        if !errs.is_empty() {
            return Err(Error::invalid(errs));
        }
        self.require_space(space)?;
        let mut labels = self.all_labels(space)?;
        labels.sort_by(|a, b| b.usage_count.cmp(&a.usage_count).then_with(|| a.name.cmp(&b.name)));
        labels.truncate(max_labels);
        let names: Vec<&str> = labels.iter().map(|l| l.name.as_str()).collect();
        let vecs = self.label_vectors(&names)?;
        let canon: Vec<String> = labels.iter().map(|l| canonical_label(&l.name)).collect();
        let floor = sim_floor as f32;
        let mut pairs: Vec<(f32, usize, usize)> = Vec::new();
        for i in 0..labels.len() {
            for j in i + 1..labels.len() {
                let sim = cosine(&vecs[i], &vecs[j]);
                if sim >= floor && canon[i] != canon[j] {
                    pairs.push((sim, i, j));
                }
            }
        }
        pairs.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
        pairs.truncate(max_pairs);
        Ok(pairs
            .into_iter()
            .map(|(sim, i, j)| {
                // Labels are sorted by usage (desc): i is the survivor.
                let (t, s) = (&labels[i], &labels[j]);
                MergeCandidate {
                    source_id: s.id.clone(),
                    source_name: s.name.clone(),
                    target_id: t.id.clone(),
                    target_name: t.name.clone(),
                    similarity: f64::from(sim.min(1.0)),
                    source_usage: s.usage_count,
                    target_usage: t.usage_count,
                }
            })
            .collect())
    }

    fn consolidation_groups(&self, space: &str) -> Result<Vec<(ConsolidationGroup, u64)>> {
        let labels = self.all_labels(space)?;
        let mut groups: BTreeMap<String, Vec<Label>> = BTreeMap::new();
        for l in labels {
            groups.entry(canonical_label(&l.name)).or_default().push(l);
        }
        let mut out = Vec::new();
        for (canonical, mut ls) in groups {
            if ls.len() < 2 {
                continue;
            }
            ls.sort_by(|a, b| {
                b.usage_count
                    .cmp(&a.usage_count)
                    .then(a.created_at.cmp(&b.created_at))
                    .then_with(|| a.name.cmp(&b.name))
            });
            let usage: u64 = ls.iter().map(|l| l.usage_count).sum();
            let edges = ls[1..].iter().map(|l| l.usage_count).sum();
            out.push((
                ConsolidationGroup {
                    canonical,
                    survivor_id: ls[0].id.clone(),
                    merged_ids: ls[1..].iter().map(|l| l.id.clone()).collect(),
                    edges,
                },
                usage,
            ));
        }
        out.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.canonical.cmp(&b.0.canonical)));
        Ok(out)
    }

    /// Merges exact-canonical duplicates (module docs) into the highest-usage survivor of each group (ties:
    /// oldest, then smallest name), at most `max_groups` groups per call. With `dry_run` only the plan is
    /// returned and nothing is written. Every merge is recorded and reversible.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`]: `max_groups` outside 1..=5000. [`ErrorKind::NotFound`] (`space_not_found`).
    pub fn consolidate_labels(&self, space: &str, dry_run: bool, max_groups: usize) -> Result<ConsolidationReport> {
        if !(1..=5000).contains(&max_groups) {
            return Err(Error::invalid_value(
                &["max_groups"],
                "number_out_of_range",
                "max_groups is 1..=5000",
                max_groups.into(),
            ));
        }
        self.require_space(space)?;
        let all = self.consolidation_groups(space)?;
        let remaining = all.len().saturating_sub(max_groups) as u64;
        let groups: Vec<ConsolidationGroup> = all.into_iter().take(max_groups).map(|(g, _)| g).collect();
        if dry_run {
            return Ok(ConsolidationReport {
                dry_run,
                groups,
                remaining_groups: remaining,
                merged_labels: 0,
                merge_ids: vec![],
            });
        }
        let now = Timestamp::now();
        let merge_ids = self.label_write(|txn, t, touched| {
            let mut ids = Vec::new();
            for g in &groups {
                for src in &g.merged_ids {
                    let rec = t.merge(txn, space, src, &g.survivor_id, now)?;
                    touched.extend(
                        rec.moved_memory_ids
                            .iter()
                            .chain(&rec.shared_memory_ids)
                            .map(|m| (space.to_string(), m.clone())),
                    );
                    ids.push(rec.merge_id);
                }
            }
            Ok(ids)
        })?;
        Ok(ConsolidationReport {
            dry_run,
            groups,
            remaining_groups: remaining,
            merged_labels: merge_ids.len() as u64,
            merge_ids,
        })
    }

    /// A full consolidation dry run: the exact-canonical plan plus semantic pairs judged by a deterministic
    /// judge in place of a language model: `0.5 x embedding cosine + 0.3 x trigram Jaccard of the canonical
    /// forms + 0.2 x Jaccard of the labels' memory sets`, `merge` at 0.8 or more, `review` at 0.65 or more.
    /// Never writes.
    ///
    /// # Errors
    /// As [`KnowledgeStore::label_merge_candidates`], with `max_pairs` 1..=200.
    pub fn consolidation_preview(
        &self,
        space: &str,
        sim_floor: f64,
        max_labels: usize,
        max_pairs: usize,
    ) -> Result<ConsolidationPreview> {
        if !(1..=200).contains(&max_pairs) {
            return Err(Error::invalid_value(
                &["max_pairs"],
                "number_out_of_range",
                "max_pairs is 1..=200",
                max_pairs.into(),
            ));
        }
        let exact = self.consolidate_labels(space, true, 5000)?;
        let pairs = self.label_merge_candidates(space, sim_floor, max_labels, max_pairs)?;
        let rtx = self.db.begin_read()?;
        let lm = rtx.open_table(LABEL_MEMORIES)?;
        let mut semantic = Vec::with_capacity(pairs.len());
        for p in pairs {
            let a: BTreeSet<String> = range_prefix3(&lm, space, &p.source_id)?.into_iter().collect();
            let b: BTreeSet<String> = range_prefix3(&lm, space, &p.target_id)?.into_iter().collect();
            let string_similarity =
                jaccard(&trigrams(&canonical_label(&p.source_name)), &trigrams(&canonical_label(&p.target_name)));
            let co_usage = jaccard(&a, &b);
            let judge_score = 0.5 * p.similarity + 0.3 * string_similarity + 0.2 * co_usage;
            let verdict = if judge_score >= 0.8 {
                "merge"
            } else if judge_score >= 0.65 {
                "review"
            } else {
                "keep"
            };
            semantic.push(JudgedPair { pair: p, string_similarity, co_usage, judge_score, verdict: verdict.into() });
        }
        Ok(ConsolidationPreview { exact, semantic, judge: "deterministic:embedding+trigram+co-usage".into() })
    }

    /// Previews merging `source` into `target` (Some) or deleting `source` (target None). The `plan_id`
    /// hashes the action, both labels and their current edges: [`KnowledgeStore::apply_label_plan`] refuses
    /// it once anything it covers has changed.
    ///
    /// # Errors
    /// [`ErrorKind::NotFound`] (`label_not_found`, `space_not_found`); [`ErrorKind::InvalidInput`] when
    /// source and target are the same.
    pub fn label_plan(&self, space: &str, source: &str, target: Option<&str>) -> Result<LabelPlan> {
        self.require_space(space)?;
        let rtx = self.db.begin_read()?;
        build_plan(&rtx.open_table(LABELS)?, &rtx.open_table(LABEL_MEMORIES)?, space, source, target)
    }

    /// Applies a merge (target Some) or delete after checking `plan_id` against the current state (None:
    /// apply without a preview), in one write transaction with the check. Returns the plan applied and the
    /// merge record of a merge.
    ///
    /// # Errors
    /// [`ErrorKind::Conflict`] (`plan_stale`) when `plan_id` no longer matches; as [`KnowledgeStore::label_plan`].
    pub fn apply_label_plan(
        &self,
        space: &str,
        source: &str,
        target: Option<&str>,
        plan_id: Option<&str>,
    ) -> Result<(LabelPlan, Option<LabelMerge>)> {
        self.require_space(space)?;
        let now = Timestamp::now();
        self.label_write(|txn, t, touched| {
            let plan = build_plan(&t.labels, &t.label_memories, space, source, target)?;
            if let Some(p) = plan_id
                && p != plan.plan_id
            {
                return Err(Error::new(
                    ErrorKind::Conflict,
                    format!(
                        "plan '{p}' is stale: the labels changed since the preview (current plan '{}'); preview again",
                        plan.plan_id
                    ),
                )
                .with_code(ErrorCode::PlanStale));
            }
            let merge = match target {
                Some(tg) => {
                    let rec = t.merge(txn, space, source, tg, now)?;
                    touched.extend(
                        rec.moved_memory_ids
                            .iter()
                            .chain(&rec.shared_memory_ids)
                            .map(|m| (space.to_string(), m.clone())),
                    );
                    Some(rec)
                }
                None => {
                    for m in t.memories_with(space, source)? {
                        t.remove_edge(space, &m, source)?;
                        touched.insert((space.to_string(), m));
                    }
                    t.labels.remove((space, source))?;
                    None
                }
            };
            Ok((plan, merge))
        })
    }
}

/// The plan of merging `source` into `target` (Some) or deleting it, from the label and edge tables of a read
/// or write transaction.
fn build_plan(
    labels: &impl ReadableTable<(&'static str, &'static str), &'static [u8]>,
    lm: &impl ReadableTable<(&'static str, &'static str, &'static str), ()>,
    space: &str,
    source: &str,
    target: Option<&str>,
) -> Result<LabelPlan> {
    let src = load_label(labels, space, source)?;
    let tgt = target.map(|t| load_label(labels, space, t)).transpose()?;
    if target == Some(source) {
        return Err(Error::invalid_value(
            &["target_label_id"],
            "value_error",
            "a label cannot be merged into itself",
            source.into(),
        ));
    }
    let src_mems = range_prefix3(lm, space, source)?;
    let tgt_mems = match target {
        Some(t) => range_prefix3(lm, space, t)?,
        None => vec![],
    };
    let action = if target.is_some() { "merge" } else { "delete" };
    let mut key = format!("{action}\u{0}{space}\u{0}{source}\u{0}{}", target.unwrap_or(""));
    for m in src_mems.iter().chain(&[String::from("\u{1}")]).chain(&tgt_mems) {
        key.push('\u{0}');
        key.push_str(m);
    }
    let plan_id = format!("plan_{:016x}", fnv1a(key.as_bytes()));
    let message = match &tgt {
        Some(t) => format!(
            "merge '{}' into '{}': {} memories change labels, '{}' is deleted; the merge is recorded and reversible",
            src.name,
            t.name,
            src_mems.len(),
            src.name
        ),
        None => {
            format!("delete '{}': {} memories lose this label and keep everything else", src.name, src_mems.len())
        }
    };
    let tgt_set: BTreeSet<&String> = tgt_mems.iter().collect();
    let duplicate_assignments = src_mems.iter().filter(|m| tgt_set.contains(m)).count() as u64;
    Ok(LabelPlan {
        plan_id,
        action: action.into(),
        affected_memories: src_mems.len() as u64,
        affected: AffectedCounts { memories: src_mems.len() as u64, ..Default::default() },
        duplicate_assignments,
        sample_memory_ids: src_mems.into_iter().take(20).collect(),
        source: src,
        target: tgt,
        message,
    })
}
