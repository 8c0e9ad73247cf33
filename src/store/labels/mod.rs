//! The label service ([`Labels`], `store.labels()`): list, create, read, attach to and detach from memories,
//! update (rename), delete, health report, merge candidates, merge and its reversal, consolidation of
//! exact-canonical duplicates, the consolidation preview, and the preview/apply plans the CLI uses
//! (`nmem labels merge|delete`). See docs/api.md "Labels".
//!
//! **Canonical form** ([`canonical_label`]): Unicode lowercase; a lower-to-upper case change starts a new word
//! (`MachineLearning`); every run of characters that are not letters or digits is one separator; words are
//! joined by one space. `Machine Learning`, `machine-learning`, `machine_learning` and `MachineLearning` all
//! have the canonical form `machine learning`.
//!
//! Edge changes never touch memory records (their `updated_at` and version stay); label usage counts are
//! recounted from the HAS_LABEL edges after every change.
//!
//! Here: the service, the canonical form, reads and the shared write helper. `attach`: listing, creating and
//! attaching labels. `edges`: HAS_LABEL edges and the changes that
//! move them (rename, delete). `merge`: merges, their reversal and the CLI's plans. `hygiene`: health report,
//! merge candidates and consolidation.

mod attach;
mod edges;
mod hygiene;
mod merge;

pub use hygiene::{
    ConsolidationGroup, ConsolidationPreview, ConsolidationReport, JudgedPair, LabelHealth, MergeCandidate,
};
pub use merge::{AffectedCounts, LabelMerge, LabelPlan};

use crate::storage::{Readable, WriteTx};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use utoipa::ToSchema;

use crate::error::ErrorCode;
use crate::error::{Error, Result};
use crate::model::Label;
use crate::store::KnowledgeStore;
use crate::store::label;
use crate::store::memories::MemoryWrite;

/// The labels of a store's spaces, borrowed from the store (`store.labels()`).
///
/// Owns: the `label` records (labels, HAS_LABEL edges both ways, usage counts, merges and their reversal
/// records) and the label-vector cache used for merge candidates.
#[derive(Clone, Copy)]
pub struct Labels<'s> {
    pub(crate) store: &'s KnowledgeStore,
}

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

/// Fields of [`Labels::update`](crate::store::Labels::update); None keeps the stored value.
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

fn label_not_found(id: &str) -> Error {
    Error::not_found(ErrorCode::LabelNotFound, format!("label '{id}' not found"))
}

fn load_label(
    t: &crate::store::records::Records<
        impl Readable<crate::store::records::K2, crate::store::records::Bytes>,
        crate::store::records::K2,
        Label,
    >,
    space: &str,
    id: &str,
) -> Result<Label> {
    t.get((space, id))?.ok_or_else(|| label_not_found(id))
}

impl Labels<'_> {
    fn write<T>(
        &self,
        f: impl FnOnce(&WriteTx, &mut MemoryWrite<'_>, &mut BTreeSet<(String, String)>) -> Result<T>,
    ) -> Result<T> {
        let out = self.store.core.write(|txn, ops| {
            let mut t = MemoryWrite::open(txn)?;
            let mut touched: BTreeSet<(String, String)> = BTreeSet::new();
            let out = f(txn, &mut t, &mut touched)?;
            let mut by_space: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
            for (s, m) in touched {
                by_space.entry(s).or_default().insert(m);
            }
            for (s, ids) in by_space {
                t.catalog_ops(&s, &ids, ops)?;
            }
            Ok(out)
        })?;
        Ok(out)
    }

    /// One label.
    ///
    /// # Errors
    /// [`crate::ErrorKind::NotFound`]: `space_not_found`, `label_not_found`.
    pub fn get(&self, space: &str, id: &str) -> Result<Label> {
        self.store.spaces().require(space)?;
        let rtx = self.store.core.db.read()?;
        load_label(&label::labels(&rtx)?, space, id)
    }

    /// Every label record of `space`, in id order.
    pub(crate) fn all(&self, space: &str) -> Result<Vec<Label>> {
        let rtx = self.store.core.db.read()?;
        let t = label::labels(&rtx)?;
        let mut out: Vec<Label> = Vec::new();
        for (_, v) in t.in_space(space)? {
            out.push(v);
        }
        Ok(out)
    }
}
