//! Label merges: merge one label into another, list and reverse merges, and the preview/apply plans of
//! `nmem labels merge|delete`.

use crate::storage::{Readable, WriteTx};
use serde::Serialize;
use std::collections::BTreeSet;
use utoipa::ToSchema;

use crate::embed::fnv1a;
use crate::error::ErrorCode;
use crate::error::{Error, ErrorKind, Result};
use crate::model::{Label, Timestamp};
use crate::store::label;
use crate::store::memories::MemoryWrite;
use crate::store::range_prefix3;

use super::Labels;

use super::load_label;
pub use crate::model::LabelMerge;

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

impl MemoryWrite<'_> {
    /// Merges `source` into `target` of `space` and records it. Returns the record and the touched memories.
    pub(super) fn merge(
        &mut self,
        txn: &WriteTx,
        space: &str,
        source: &str,
        target: &str,
        now: Timestamp,
    ) -> Result<LabelMerge> {
        // Unknown labels are 404 before anything else.
        let src = load_label(self.labels.records(), space, source)?;
        load_label(self.labels.records(), space, target)?;
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
        self.labels.remove(space, source)?;
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
        label::label_merges(txn)?.put((space, rec.merge_id.as_str()), &rec)?;
        Ok(rec)
    }
}

impl MemoryWrite<'_> {
    /// In a sync group, after a merge or a reversal of `label`'s merges: every memory that shows `label` or a
    /// label its merges lead to gets the labels its add-wins set shows through the space's merges now
    /// (docs/sync.md, "Label merges"), as applying the same records from another device gives. A memory given
    /// a merged-away label elsewhere, while the merge was not known there, shows its own label again after a
    /// reversal. Memories whose edges change are added to `touched`.
    ///
    /// # Errors
    /// Storage errors.
    fn follow_merges(
        &mut self,
        txn: &WriteTx,
        space: &str,
        label: &str,
        touched: &mut BTreeSet<(String, String)>,
    ) -> Result<()> {
        use crate::store::records::sync;
        let merges: Vec<(String, LabelMerge)> = crate::store::label::label_merges(txn)?.in_space(space)?;
        let redirects = sync::Redirects::of(txn, space, |l| Ok(self.labels.get(space, l)?.is_some()))?;
        let clocks = sync::items(txn)?;
        let mut recount = BTreeSet::new();
        for l in sync::merge_chain(&merges, label) {
            for m in self.memories_with(space, &l)? {
                let clock = clocks.get(crate::model::Item::Memory(m.clone()).key())?.unwrap_or_default();
                if clock.winner.is_none() {
                    continue; // never stamped: written before the store joined, nothing to follow
                }
                let want = redirects.apply(&clock.present_labels());
                let have: BTreeSet<String> = self.labels.of_memory(space, &m)?.into_iter().collect();
                for gone in have.difference(&want) {
                    self.remove_edge(space, &m, gone)?;
                    recount.insert(gone.clone());
                }
                for new in want.difference(&have) {
                    if self.labels.get(space, new)?.is_some() {
                        self.add_edge(space, &m, new)?;
                        recount.insert(new.clone());
                    }
                }
                if want != have {
                    touched.insert((space.to_string(), m));
                }
            }
        }
        for l in recount {
            if self.labels.get(space, &l)?.is_some() {
                self.recount(space, &l)?;
            }
        }
        Ok(())
    }
}

impl Labels<'_> {
    /// Merges label `source` into `target` (same space): every HAS_LABEL edge of the source is re-pointed to
    /// the target, the source is deleted, and the merge is recorded so that
    /// [`Labels::reverse_merge`](crate::store::Labels::reverse_merge) can restore every edge.
    ///
    /// # Errors
    /// [`ErrorKind::NotFound`] (`label_not_found`, `space_not_found`); [`ErrorKind::InvalidInput`] when source
    /// and target are the same.
    pub fn merge(&self, space: &str, source: &str, target: &str) -> Result<LabelMerge> {
        self.store.spaces().require(space)?;
        let now = Timestamp::now();
        self.write(|txn, t, touched| {
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
    pub fn merges(&self, space: &str) -> Result<Vec<LabelMerge>> {
        self.store.spaces().require(space)?;
        let rtx = self.store.core.db.read()?;
        let t = label::label_merges(&rtx)?;
        let mut out: Vec<LabelMerge> = Vec::new();
        for (_, v) in t.in_space(space)? {
            out.push(v);
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
    pub fn reverse_merge(&self, space: &str, merge_id: &str) -> Result<LabelMerge> {
        self.store.spaces().require(space)?;
        let now = Timestamp::now();
        let synced = self.store.core.writes.sync.on();
        self.write(|txn, t, touched| {
            let mut merges = label::label_merges(txn)?;
            let mut rec: LabelMerge = merges
                .get((space, merge_id))?
                .ok_or_else(|| Error::not_found(ErrorCode::MergeNotFound, format!("merge '{merge_id}' not found")))?;
            if rec.reversed_at.is_some() {
                return Err(Error::new(ErrorKind::Conflict, format!("merge '{merge_id}' was already reversed"))
                    .with_code(ErrorCode::MergeReversed));
            }
            let sid = rec.source.id.clone();
            if t.labels.get(space, sid.as_str())?.is_some() {
                return Err(Error::new(
                    ErrorKind::Conflict,
                    format!("label '{sid}' exists again; delete or rename it first"),
                )
                .with_code(ErrorCode::LabelExists));
            }
            t.labels.put(space, sid.as_str(), &rec.source)?;
            for m in &rec.moved_memory_ids {
                if t.memories.get(space, m)?.is_none() {
                    continue; // deleted since the merge
                }
                t.remove_edge(space, m, &rec.target_id)?;
                t.add_edge(space, m, &sid)?;
                touched.insert((space.to_string(), m.clone()));
            }
            for m in &rec.shared_memory_ids {
                if t.memories.get(space, m)?.is_none() {
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
            merges.put((space, merge_id), &rec)?;
            drop(merges);
            if synced {
                t.follow_merges(txn, space, &sid, touched)?;
            }
            Ok(rec)
        })
    }

    /// Previews merging `source` into `target` (Some) or deleting `source` (target None). The `plan_id`
    /// hashes the action, both labels and their current edges: [`Labels::apply_plan`](crate::store::Labels::apply_plan) refuses
    /// it once anything it covers has changed.
    ///
    /// # Errors
    /// [`ErrorKind::NotFound`] (`label_not_found`, `space_not_found`); [`ErrorKind::InvalidInput`] when
    /// source and target are the same.
    pub fn plan(&self, space: &str, source: &str, target: Option<&str>) -> Result<LabelPlan> {
        self.store.spaces().require(space)?;
        let rtx = self.store.core.db.read()?;
        build_plan(&label::labels(&rtx)?, &label::label_memories(&rtx)?, space, source, target)
    }

    /// Applies a merge (target Some) or delete after checking `plan_id` against the current state (None:
    /// apply without a preview), in one write transaction with the check. Returns the plan applied and the
    /// merge record of a merge.
    ///
    /// # Errors
    /// [`ErrorKind::Conflict`] (`plan_stale`) when `plan_id` no longer matches; as [`Labels::plan`](crate::store::Labels::plan).
    pub fn apply_plan(
        &self,
        space: &str,
        source: &str,
        target: Option<&str>,
        plan_id: Option<&str>,
    ) -> Result<(LabelPlan, Option<LabelMerge>)> {
        self.store.spaces().require(space)?;
        let now = Timestamp::now();
        self.write(|txn, t, touched| {
            let plan = build_plan(t.labels.records(), t.labels.by_label(), space, source, target)?;
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
                    t.labels.remove(space, source)?;
                    None
                }
            };
            Ok((plan, merge))
        })
    }
}

/// The plan of merging `source` into `target` (Some) or deleting it, from the label and edge tables of a read
/// or write transaction.
pub(super) fn build_plan(
    labels: &crate::store::records::Records<
        impl Readable<crate::store::records::K2, crate::store::records::Bytes>,
        crate::store::records::K2,
        Label,
    >,
    lm: &impl Readable<(&'static str, &'static str, &'static str), ()>,
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
