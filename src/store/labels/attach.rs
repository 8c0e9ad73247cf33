//! Labels: list, create, read, and attaching them to memories (HAS_LABEL edges).

use std::collections::BTreeSet;

use super::Labels;
use crate::error::ErrorCode;
use crate::error::{Error, ErrorKind, FieldError, Result};
use crate::model::{Label, Timestamp};
use crate::store::label;
use crate::store::memories::{MemoryWrite, check_label_name, new_label};
use crate::store::types::LabelOrder;
use crate::store::{IndexOp, range_prefix3};

pub(crate) fn check_color(c: &str) -> bool {
    let hex = c.strip_prefix('#').unwrap_or("");
    (hex.len() == 3 || hex.len() == 6) && hex.chars().all(|ch| ch.is_ascii_hexdigit())
}

impl Labels<'_> {
    /// Ids of the memories carrying label `label_id` in `space` (HAS_LABEL edges, any state), in id order.
    ///
    /// # Errors
    /// Storage errors.
    pub fn memory_ids(&self, space: &str, label_id: &str) -> Result<Vec<String>> {
        let rtx = self.store.core.db.read()?;
        range_prefix3(&label::label_memories(&rtx)?, space, label_id)
    }

    /// How many labels `space` has.
    ///
    /// # Errors
    /// Storage errors.
    pub fn count(&self, space: &str) -> Result<usize> {
        let rtx = self.store.core.db.read()?;
        label::labels(&rtx)?.count_in_space(space)
    }

    /// Labels of a space with their usage counts, ordered, one page.
    ///
    /// # Errors
    /// [`ErrorKind::NotFound`] (`space_not_found`) for an unknown space.
    pub fn list(&self, space: &str, order: LabelOrder, desc: bool, limit: usize, offset: usize) -> Result<Vec<Label>> {
        self.store.spaces().require(space)?;
        let mut all = self.all(space)?;
        all.sort_by(|a, b| {
            let o = match order {
                LabelOrder::Name => a.name.cmp(&b.name),
                LabelOrder::UsageCount => a.usage_count.cmp(&b.usage_count),
                LabelOrder::CreatedAt => a.created_at.cmp(&b.created_at),
                LabelOrder::UpdatedAt => a.updated_at.cmp(&b.updated_at),
            };
            let o = if desc { o.reverse() } else { o };
            o.then_with(|| a.name.cmp(&b.name))
        });
        Ok(all.into_iter().skip(offset).take(limit).collect())
    }

    /// Creates a label in a space.
    ///
    /// # Errors
    /// * [`ErrorKind::InvalidInput`]: name not 1..=100 characters, colour not `#rgb`/`#rrggbb`,
    ///   description over 1,000 characters.
    /// * [`ErrorKind::Conflict`] (`label_exists`): a label of that name exists in the space.
    /// * [`ErrorKind::NotFound`] (`space_not_found`).
    pub fn create(&self, space: &str, name: &str, color: Option<String>, description: Option<String>) -> Result<Label> {
        let mut errs = Vec::new();
        let name = check_label_name(name, &["name"], &mut errs);
        if let Some(c) = &color
            && !check_color(c)
        {
            errs.push(FieldError::field(
                &["color"],
                "color_invalid",
                "expected a hex colour such as #3b82f6",
                c.clone().into(),
            ));
        }
        if description.as_ref().is_some_and(|d| d.chars().count() > 1000) {
            errs.push(FieldError::field(
                &["description"],
                "string_too_long",
                "at most 1000 characters",
                serde_json::Value::Null,
            ));
        }
        let Some(name) = name.filter(|_| errs.is_empty()) else { return Err(Error::invalid(errs)) };
        self.store.core.write(|txn, _| {
            let t = MemoryWrite::open(txn)?;
            if !t.spaces.contains(space)? {
                return Err(Error::not_found(ErrorCode::SpaceNotFound, format!("space '{space}' does not exist")));
            }
            drop(t);
            let mut labels = label::labels(txn)?;
            let id = Label::id_for(&name);
            if labels.get((space, id.as_str()))?.is_some() {
                return Err(Error::new(ErrorKind::Conflict, format!("label '{name}' already exists"))
                    .with_code(ErrorCode::LabelExists));
            }
            let l = new_label(space, &name, color, description, Timestamp::now());
            labels.put((space, id.as_str()), &l)?;
            Ok(l)
        })
    }

    /// The labels of a memory.
    ///
    /// # Errors
    /// [`ErrorKind::NotFound`] (`memory_not_found`).
    pub fn of_memory(&self, memory_id: &str, space_guard: Option<&str>) -> Result<Vec<Label>> {
        let view = self.store.memories().get(memory_id, space_guard)?;
        let space = view.memory.space_id.clone();
        let rtx = self.store.core.db.read()?;
        let t = label::labels(&rtx)?;
        let mut out = Vec::new();
        for id in &view.label_ids {
            if let Some(l) = t.get((space.as_str(), id.as_str()))? {
                out.push(l);
            }
        }
        Ok(out)
    }

    /// Attaches (`attach` true) or detaches a label of the memory's space. Detaching a label the memory does
    /// not carry changes nothing. Returns whether anything changed.
    ///
    /// # Errors
    /// [`ErrorKind::NotFound`]: `memory_not_found` or `label_not_found` (no such label in the memory's space).
    pub fn set_on_memory(
        &self,
        memory_id: &str,
        label_id: &str,
        attach: bool,
        space_guard: Option<&str>,
    ) -> Result<bool> {
        let now = Timestamp::now();
        let changed = self.store.core.write(|txn, ops| {
            let mut t = MemoryWrite::open(txn)?;
            let (space, sm) = t.locate(memory_id, space_guard)?;
            let label: Label = t
                .labels
                .get(&space, label_id)?
                .ok_or_else(|| Error::not_found(ErrorCode::LabelNotFound, format!("label '{label_id}' not found")))?;
            let current: BTreeSet<String> = t.labels.of_memory(&space, memory_id)?.into_iter().collect();
            let mut names: BTreeSet<String> =
                current.iter().map(|id| id.strip_prefix("label_").unwrap_or(id).to_string()).collect();
            let changed = if attach { names.insert(label.name.clone()) } else { names.remove(&label.name) };
            if !changed {
                return Ok(false);
            }
            let ids = t.set_labels(&space, memory_id, &names, now)?;
            ops.push(IndexOp::meta(&space, sm.docno, &sm.memory, ids));
            Ok(true)
        })?;
        Ok(changed)
    }
}
