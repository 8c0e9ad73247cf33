//! HAS_LABEL edges: add, remove and recount them, and the label changes that move them (rename onto another
//! label, delete).

use std::collections::BTreeSet;

use crate::error::ErrorCode;
use crate::error::{Error, ErrorKind, FieldError, Result};
use crate::model::{Label, Timestamp};
use crate::store::IndexOp;
use crate::store::memories::{MemoryWrite, check_label_name};

use super::{LabelDeleteReport, LabelPatch, Labels, load_label};

impl MemoryWrite<'_> {
    pub(super) fn memories_with(&self, space: &str, label_id: &str) -> Result<Vec<String>> {
        self.labels.memories_of(space, label_id)
    }

    pub(super) fn add_edge(&mut self, space: &str, memory: &str, label: &str) -> Result<()> {
        self.labels.link(space, memory, label)
    }

    pub(super) fn remove_edge(&mut self, space: &str, memory: &str, label: &str) -> Result<()> {
        self.labels.unlink(space, memory, label)
    }

    /// Sets the usage count of a label to its number of edges. A derived count, so `updated_at` stays (as
    /// when memory writes change it).
    pub(super) fn recount(&mut self, space: &str, label_id: &str) -> Result<()> {
        if let Some(mut l) = self.labels.get(space, label_id)? {
            let n = self.memories_with(space, label_id)?.len() as u64;
            if l.usage_count != n {
                l.usage_count = n;
                self.labels.put(space, label_id, &l)?;
            }
        }
        Ok(())
    }

    /// Catalog updates for memories whose label edges changed.
    pub(super) fn catalog_ops(&self, space: &str, ids: &BTreeSet<String>, ops: &mut Vec<IndexOp>) -> Result<()> {
        for id in ids {
            if let Some(sm) = self.memories.get(space, id)? {
                let labels = self.label_ids(space, id)?;
                ops.push(IndexOp::meta(space, sm.docno, &sm.memory, labels));
            }
        }
        Ok(())
    }
}

impl Labels<'_> {
    /// Changes a label's name, colour or description. A new name re-keys the label to `label_<name>` (ids
    /// derive from names) and re-points its edges; the response carries the new id.
    ///
    /// # Errors
    /// * [`ErrorKind::InvalidInput`]: bad name, colour or description.
    /// * [`ErrorKind::NotFound`]: `label_not_found`, `space_not_found`.
    /// * [`ErrorKind::Conflict`] (`label_exists`): another label has the new name (merge them instead).
    pub fn update(&self, space: &str, id: &str, patch: LabelPatch) -> Result<Label> {
        let mut errs = Vec::new();
        let name = patch.name.as_deref().and_then(|n| check_label_name(n, &["name"], &mut errs));
        if let Some(c) = &patch.color
            && !super::attach::check_color(c)
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
        self.store.spaces().require(space)?;
        let now = Timestamp::now();
        self.write(|_, t, touched| {
            let mut l = load_label(t.labels.records(), space, id)?;
            if let Some(c) = &patch.color {
                l.color = c.clone();
            }
            if let Some(d) = &patch.description {
                l.description = d.clone();
            }
            l.updated_at = now;
            if let Some(n) = name.filter(|n| *n != l.name) {
                let new_id = Label::id_for(&n);
                if new_id != l.id && t.labels.get(space, new_id.as_str())?.is_some() {
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
                t.labels.remove(space, id)?;
                l.id = new_id;
                l.name = n;
            }
            t.labels.put(space, l.id.as_str(), &l)?;
            Ok(l)
        })
    }

    /// Deletes a label and all its HAS_LABEL edges; the memories stay.
    ///
    /// # Errors
    /// [`ErrorKind::NotFound`]: `label_not_found`, `space_not_found`.
    pub fn delete(&self, space: &str, id: &str) -> Result<LabelDeleteReport> {
        self.store.spaces().require(space)?;
        self.write(|_, t, touched| {
            let label = load_label(t.labels.records(), space, id)?;
            let mut removed = 0;
            for m in t.memories_with(space, id)? {
                t.remove_edge(space, &m, id)?;
                touched.insert((space.to_string(), m));
                removed += 1;
            }
            t.labels.remove(space, id)?;
            Ok(LabelDeleteReport { label, removed_edges: removed })
        })
    }
}
