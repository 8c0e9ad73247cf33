//! Sources, timeline reviews and label merges in the merge (docs/sync.md): each a last-writer-wins register;
//! a label merge redirects its label on every memory, read once per space and batch ([`Redirects`]).

use std::collections::BTreeSet;

use super::{Merge, json};
use crate::error::{Error, ErrorKind, Result};
use crate::model::{ItemClock, LabelMerge, ReviewEvent};
use crate::storage::WriteTx;
use crate::store::memories::MemoryWrite;
use crate::store::records::{label, review, source, sync};

impl Merge<'_, '_> {
    /// A source: its record, text and chunks replace what this device holds (the original bytes are kept only
    /// where the source was ingested, and while it stays the same source here).
    pub(super) fn source(&mut self, id: &str, value: Option<&[u8]>) -> Result<Option<[u8; 16]>> {
        if let Some(space) = source::space_of(self.txn, id)? {
            if let Some(old) = source::sources(self.txn)?.get((space.as_str(), id))?
                && source::id_by_sha(self.txn, &space, &old.sha256)?.as_deref() == Some(id)
            {
                source::source_sha(self.txn)?.remove((space.as_str(), old.sha256.as_str()))?;
            }
            source::sources(self.txn)?.remove((space.as_str(), id))?;
            source::source_space(self.txn)?.remove(id)?;
            source::source_text(self.txn)?.remove(id)?;
            source::source_chunks(self.txn)?.remove_range((id, 0u64)..=(id, u64::MAX))?;
            self.sources.insert(space);
        }
        let Some(v) = value else {
            source::source_files(self.txn)?.remove(id)?;
            return Ok(None);
        };
        let sv: sync::SourceValue = sync::value_of(v)?;
        if sv.source.id != id {
            return Err(Error::new(ErrorKind::InvalidInput, "a source change names another source than its item"));
        }
        let space = sv.source.space_id.clone();
        self.ensure_space(&space)?;
        source::sources(self.txn)?.put((space.as_str(), id), &sv.source)?;
        source::source_space(self.txn)?.put(id, space.as_str())?;
        // Two devices that ingested the same bytes at once hold two sources; the lookup by hash names one.
        if source::id_by_sha(self.txn, &space, &sv.source.sha256)?.is_none() {
            source::source_sha(self.txn)?.put((space.as_str(), sv.source.sha256.as_str()), id)?;
        }
        if !sv.text.is_empty() {
            source::source_text(self.txn)?.put(id, sv.text.as_bytes())?;
        }
        let mut chunks = source::source_chunks(self.txn)?;
        for (i, c) in sv.chunks.iter().enumerate() {
            chunks.put((id, i as u64), c)?;
        }
        self.sources.insert(space);
        Ok(Some(sync::hash(&json(&sv)?)))
    }

    /// A timeline review event with its decision.
    pub(super) fn review(&mut self, space: &str, id: &str, value: Option<&[u8]>) -> Result<Option<[u8; 16]>> {
        let mut t = review::reviews(self.txn)?;
        let Some(v) = value else {
            t.remove((space, id))?;
            return Ok(None);
        };
        let r: ReviewEvent = sync::value_of(v)?;
        if r.space_id != space || r.id != id {
            return Err(Error::new(ErrorKind::InvalidInput, "a review change names another review than its item"));
        }
        drop(t);
        self.ensure_space(space)?;
        review::reviews(self.txn)?.put((space, id), &r)?;
        Ok(Some(sync::hash(&json(&r)?)))
    }

    /// A label merge record: stored as it came (a reversal is a put with `reversed_at`); the memories that
    /// show its labels are relabelled once the batch is merged.
    pub(super) fn label_merge(&mut self, space: &str, id: &str, value: Option<&[u8]>) -> Result<Option<[u8; 16]>> {
        self.redirects.changed(space);
        let old: Option<LabelMerge> = label::label_merges(self.txn)?.get((space, id))?;
        if let Some(o) = &old {
            self.relabel_chain(space, &o.source.id)?;
        }
        let Some(v) = value else {
            label::label_merges(self.txn)?.remove((space, id))?;
            return Ok(None);
        };
        let m: LabelMerge = sync::value_of(v)?;
        if m.space_id != space || m.merge_id != id {
            return Err(Error::new(ErrorKind::InvalidInput, "a label merge change names another merge than its item"));
        }
        self.ensure_space(space)?;
        label::label_merges(self.txn)?.put((space, id), &m)?;
        self.relabel_chain(space, &m.source.id)?;
        Ok(Some(sync::hash(&json(&m)?)))
    }

    /// Marks for relabelling every memory that shows `label` or a label a merge of it leads to (whether or not
    /// the merges redirect now).
    pub(super) fn relabel_chain(&mut self, space: &str, label: &str) -> Result<()> {
        let merges: Vec<(String, LabelMerge)> = label::label_merges(self.txn)?.in_space(space)?;
        for l in sync::merge_chain(&merges, label) {
            self.relabel.extend(self.t.labels.memories_of(space, &l)?);
        }
        Ok(())
    }
}

/// Each space's label redirects ([`sync::Redirects`]) as a batch reads them: once per space, again after a
/// label or label merge of the space changed.
#[derive(Default)]
pub(super) struct Redirects(std::collections::HashMap<String, sync::Redirects>);

impl Redirects {
    /// The labels a memory of `space` with clock `ic` shows: its add-wins set through the space's label merges.
    pub(super) fn shown(
        &mut self,
        txn: &WriteTx,
        t: &MemoryWrite<'_>,
        space: &str,
        ic: &ItemClock,
    ) -> Result<BTreeSet<String>> {
        let present = ic.present_labels();
        if !self.0.contains_key(space) {
            let r = sync::Redirects::of(txn, space, |l| Ok(t.labels.get(space, l)?.is_some()))?;
            self.0.insert(space.to_string(), r);
        }
        Ok(match self.0.get(space) {
            Some(r) if !r.is_empty() => r.apply(&present),
            _ => present,
        })
    }

    /// Forgets `space`'s redirects (one of its labels or label merges changed).
    pub(super) fn changed(&mut self, space: &str) {
        self.0.remove(space);
    }
}
