//! Typed relations between two memories of one space (client contract section 4: `POST/GET
//! /memories/{id}/relations`, `PATCH/DELETE /memories/relations/{rel_id}`).
//!
//! A relation is directed (source -> target) unless `bidirectional`. Statuses: `active` (the default),
//! `suggested` (proposed, not confirmed), `dismissed` (rejected by a person) and `deleted` (what DELETE sets:
//! the row stays listable with `status=deleted`, so an undo is a PATCH). Creating a relation that exists
//! (same source, target and type) updates it instead of adding a second row. Deleting a memory removes its
//! relations; forgetting one keeps them (graph rows stay).

use serde::Serialize;
use utoipa::ToSchema;

use super::Graph;
use crate::error::ErrorCode;
use crate::error::{Error, FieldError, Result};
pub use crate::model::MemoryRelation;
use crate::model::Timestamp;
use crate::store::{StoredMemory, memories::MemoryWrite, range_prefix3};
use crate::store::{memory, relation};

/// Longest `relation_type`, in characters.
pub const MAX_RELATION_TYPE_CHARS: usize = 64;
/// Most relations one listing returns.
pub const MAX_RELATIONS_LIMIT: usize = 500;
/// Accepted statuses.
pub const RELATION_STATUSES: [&str; 4] = ["active", "suggested", "dismissed", "deleted"];

/// A relation as seen from one memory: `direction` is `out` when that memory is the source, `in` when it is
/// the target; titles are filled for display.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct RelationView {
    /// The relation.
    #[serde(flatten)]
    pub relation: MemoryRelation,
    /// `out`, `in`, or `both` when read by its id.
    pub direction: String,
    /// Title (or the first 80 characters of content) of the source memory.
    pub source_title: String,
    /// Same for the target.
    pub target_title: String,
}

/// Input of [`Graph::create_relation`](crate::store::Graph::create_relation) and the fields of [`Graph::update_relation`](crate::store::Graph::update_relation).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RelationInput {
    /// Target memory (create only).
    pub target_memory_id: String,
    /// Type; create: required.
    pub relation_type: Option<String>,
    /// Reason.
    pub reason: Option<String>,
    /// 0..=1.
    pub strength: Option<f64>,
    /// 0..=1.
    pub confidence: Option<f64>,
    /// Both ways (create only).
    pub bidirectional: Option<bool>,
    /// One of [`RELATION_STATUSES`].
    pub status: Option<String>,
    /// Who made it.
    pub source: Option<String>,
}

/// Which relations a listing returns.
#[derive(Debug, Clone, PartialEq)]
pub struct RelationQuery {
    /// `out`, `in` or `both`.
    pub direction: String,
    /// Only this status.
    pub status: String,
    /// Most rows (1..=500).
    pub limit: usize,
    /// Only these types (empty: all).
    pub types: Vec<String>,
}

fn validate(r: &RelationInput, creating: bool) -> Result<()> {
    let mut errs = Vec::new();
    match &r.relation_type {
        Some(t) if t.trim().is_empty() || t.chars().count() > MAX_RELATION_TYPE_CHARS => errs.push(FieldError::field(
            &["relation_type"],
            "string_invalid",
            "relation_type is 1..=64 characters",
            t.clone().into(),
        )),
        None if creating => {
            errs.push(FieldError::field(&["relation_type"], "missing", "Field required", serde_json::Value::Null))
        }
        _ => {}
    }
    if creating && r.target_memory_id.trim().is_empty() {
        errs.push(FieldError::field(&["target_memory_id"], "missing", "Field required", serde_json::Value::Null));
    }
    for (name, v) in [("strength", r.strength), ("confidence", r.confidence)] {
        if let Some(x) = v
            && !(0.0..=1.0).contains(&x)
        {
            errs.push(
                FieldError::field(&[name], "number_out_of_range", format!("{name} is 0..=1"), x.into())
                    .with_ctx(serde_json::json!({"ge": 0, "le": 1})),
            );
        }
    }
    if let Some(s) = &r.status
        && !RELATION_STATUSES.contains(&s.as_str())
    {
        errs.push(FieldError::field(
            &["status"],
            "enum",
            "status is one of active, suggested, dismissed, deleted",
            s.clone().into(),
        ));
    }
    if r.reason.as_ref().is_some_and(|x| x.chars().count() > 1000) {
        errs.push(FieldError::field(&["reason"], "string_too_long", "at most 1000 characters", "".into()));
    }
    if errs.is_empty() { Ok(()) } else { Err(Error::invalid(errs)) }
}

fn not_found(id: &str) -> Error {
    Error::not_found(ErrorCode::RelationNotFound, format!("relation '{id}' not found"))
}

fn title_of(sm: Option<StoredMemory>) -> String {
    match sm {
        Some(sm) if !sm.memory.title.is_empty() => sm.memory.title,
        Some(sm) => sm.memory.content.chars().take(80).collect(),
        None => String::new(),
    }
}

impl Graph<'_> {
    /// Relates memory `source_id` to `input.target_memory_id` (same space). Creating an existing (source,
    /// target, type) triple updates that relation.
    ///
    /// # Errors
    /// * [`crate::ErrorKind::InvalidInput`]: missing or over-long type, strength or confidence outside 0..=1,
    ///   unknown status, a memory related to itself.
    /// * [`crate::ErrorKind::NotFound`] (`memory_not_found`): either memory missing, forgotten, or (target) in
    ///   another space; the source outside `space_guard`.
    pub fn create_relation(
        &self,
        source_id: &str,
        input: RelationInput,
        space_guard: Option<&str>,
    ) -> Result<RelationView> {
        validate(&input, true)?;
        if input.target_memory_id == source_id {
            return Err(Error::invalid_value(
                &["target_memory_id"],
                "value_error",
                "a memory cannot be related to itself",
                source_id.into(),
            ));
        }
        let now = Timestamp::now();
        let rel = self.store.core.write(|txn, _| {
            let mut w = MemoryWrite::open(txn)?;
            let (space, _) = w.locate(source_id, space_guard)?;
            let (tspace, _) = w.locate(&input.target_memory_id, None)?;
            if tspace != space {
                return Err(Error::not_found(
                    ErrorCode::MemoryNotFound,
                    format!("memory '{}' not found in space '{space}'", input.target_memory_id),
                ));
            }
            let rtype = input.relation_type.clone().unwrap_or_default().trim().to_string();
            let mut existing = None;
            for rid in w.relations.of_memory(&space, source_id)? {
                if let Some(r) = w.relations.get(&space, &rid)?
                    && r.source_memory_id == source_id
                    && r.target_memory_id == input.target_memory_id
                    && r.relation_type == rtype
                {
                    existing = Some(r);
                    break;
                }
            }
            let mut r = existing.unwrap_or_else(|| MemoryRelation {
                id: format!("rel_{}", uuid::Uuid::now_v7()),
                source_memory_id: source_id.to_string(),
                target_memory_id: input.target_memory_id.clone(),
                relation_type: rtype.clone(),
                reason: String::new(),
                strength: 1.0,
                confidence: 1.0,
                bidirectional: false,
                status: "active".into(),
                source: String::new(),
                space_id: space.clone(),
                created_at: now,
                updated_at: now,
            });
            apply(&mut r, &input, now);
            if let Some(b) = input.bidirectional {
                r.bidirectional = b;
            }
            w.relations.put(&space, &r)?;
            Ok(r)
        })?;
        self.relation_view(rel, "out")
    }

    /// Relations of memory `id`, newest first.
    ///
    /// # Errors
    /// [`crate::ErrorKind::NotFound`] (`memory_not_found`); [`crate::ErrorKind::InvalidInput`] for an unknown
    /// direction or status.
    pub fn relations_of(&self, id: &str, q: &RelationQuery, space_guard: Option<&str>) -> Result<Vec<RelationView>> {
        let view = self.store.memories().get(id, space_guard)?;
        let space = view.memory.space_id;
        let rtx = self.store.core.db.read()?;
        let rels = relation::relations(&rtx)?;
        let by_mem = relation::memory_relations(&rtx)?;
        let mut out: Vec<(MemoryRelation, &str)> = Vec::new();
        for rid in range_prefix3(&by_mem, &space, id)? {
            let Some(r) = rels.get((space.as_str(), rid.as_str()))? else { continue };
            let dir = if r.source_memory_id == id { "out" } else { "in" };
            let dir_ok = match q.direction.as_str() {
                "both" => true,
                want => dir == want || r.bidirectional,
            };
            if dir_ok && r.status == q.status && (q.types.is_empty() || q.types.contains(&r.relation_type)) {
                out.push((r, dir));
            }
        }
        out.sort_by(|a, b| b.0.created_at.cmp(&a.0.created_at).then_with(|| a.0.id.cmp(&b.0.id)));
        out.truncate(q.limit.clamp(1, MAX_RELATIONS_LIMIT));
        let mems = memory::memories(&rtx)?;
        out.into_iter()
            .map(|(r, dir)| {
                let s = title_of(mems.get((space.as_str(), r.source_memory_id.as_str()))?);
                let t = title_of(mems.get((space.as_str(), r.target_memory_id.as_str()))?);
                Ok(RelationView { relation: r, direction: dir.into(), source_title: s, target_title: t })
            })
            .collect()
    }

    /// Changes type, reason, strength, confidence or status of relation `rel_id`.
    ///
    /// # Errors
    /// [`crate::ErrorKind::NotFound`] (`relation_not_found`); [`crate::ErrorKind::InvalidInput`] as for create.
    pub fn update_relation(&self, rel_id: &str, input: RelationInput) -> Result<RelationView> {
        validate(&input, false)?;
        let now = Timestamp::now();
        let rel = self.store.core.write(|txn, _| {
            let (space, mut r) = find_relation(txn, rel_id)?;
            let mut rels = relation::relations(txn)?;
            apply(&mut r, &input, now);
            if let Some(t) = &input.relation_type {
                r.relation_type = t.trim().to_string();
            }
            rels.put((space.as_str(), rel_id), &r)?;
            Ok(r)
        })?;
        self.relation_view(rel, "both")
    }

    /// Marks relation `rel_id` deleted (it stays listable with `status=deleted`).
    ///
    /// # Errors
    /// [`crate::ErrorKind::NotFound`] (`relation_not_found`).
    pub fn delete_relation(&self, rel_id: &str) -> Result<RelationView> {
        self.update_relation(rel_id, RelationInput { status: Some("deleted".into()), ..Default::default() })
    }

    fn relation_view(&self, r: MemoryRelation, dir: &str) -> Result<RelationView> {
        let rtx = self.store.core.db.read()?;
        let mems = memory::memories(&rtx)?;
        let s = title_of(mems.get((r.space_id.as_str(), r.source_memory_id.as_str()))?);
        let t = title_of(mems.get((r.space_id.as_str(), r.target_memory_id.as_str()))?);
        Ok(RelationView { relation: r, direction: dir.into(), source_title: s, target_title: t })
    }
}

fn apply(r: &mut MemoryRelation, input: &RelationInput, now: Timestamp) {
    if let Some(x) = &input.reason {
        r.reason = x.clone();
    }
    if let Some(x) = input.strength {
        r.strength = x;
    }
    if let Some(x) = input.confidence {
        r.confidence = x;
    }
    if let Some(x) = &input.status {
        r.status = x.clone();
    }
    if let Some(x) = &input.source {
        r.source = x.clone();
    }
    r.updated_at = now;
}

fn find_relation(txn: &crate::storage::WriteTx, rel_id: &str) -> Result<(String, MemoryRelation)> {
    let space = relation::space_of(txn, rel_id)?;
    let Some(space) = space else { return Err(not_found(rel_id)) };
    let r = relation::relations(txn)?.get((space.as_str(), rel_id))?.ok_or_else(|| not_found(rel_id))?;
    Ok((space, r))
}

impl MemoryWrite<'_> {
    /// Removes every relation touching memory `id` of `space` (the memory is deleted or leaves the space).
    /// Returns how many.
    pub(crate) fn remove_memory_relations(&mut self, space: &str, id: &str) -> Result<u64> {
        let mut n = 0;
        for rid in self.relations.of_memory(space, id)? {
            if let Some(r) = self.relations.get(space, &rid)? {
                self.relations.remove(space, &r)?;
                n += 1;
            }
        }
        Ok(n)
    }
}
