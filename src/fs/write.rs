//! `write` and `delete`: the writable files of the tree (a memory by id, today's working memory).

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use super::path::*;
use super::project::*;
use crate::error::{Error, ErrorCode, ErrorKind, FieldError, Result};
use crate::model::{Timestamp, UnitType};
use crate::store::KnowledgeStore;

/// One `write`.
#[derive(Debug, Clone, Default)]
pub struct WriteArgs<'a> {
    /// Space written.
    pub space: &'a str,
    /// `/memories/by-id/<id>.memory.md` or `/working-memory/today.md`.
    pub path: &'a str,
    /// The new body (a memory's content, or the working memory); required.
    pub body: Option<String>,
    /// Memory fields: `title`, `labels` (array of names), `importance` (0..=1), `unit_type`.
    pub frontmatter: serde_json::Map<String, Value>,
    /// Optimistic concurrency: the memory's `version` the writer read; a different stored version is refused.
    pub record_version: Option<i64>,
}

/// What a write did.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct WriteReport {
    /// The canonical path written.
    pub path: String,
    /// Always true.
    pub written: bool,
    /// A memory: whether it was created (false: updated).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created: Option<bool>,
    /// A memory: its id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// A memory: its version after the write.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<i64>,
    /// A memory: its frontmatter after the write.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub frontmatter: Option<BTreeMap<String, Value>>,
    /// Working memory: when it changed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<Timestamp>,
}

pub(crate) fn read_only(node: &Node, path: &str) -> Error {
    match node {
        Node::Memory { id, label: Some(_) } => exdev(path, &memory_path(id)),
        Node::ThreadFile(..) | Node::Source(_) | Node::Entity(_) => erofs(path),
        Node::Memory { .. } | Node::WorkingToday => Error::new(ErrorKind::Internal, "writable"),
        _ => einval("path", "not a writable file", path),
    }
}

/// Writes a memory (created with that id when missing, else updated) or today's working memory.
///
/// # Errors
/// `EINVAL` without a body, for a bad unit type or a path that is no file; `EXDEV` for an alias path; `EROFS`
/// for derived files; `version_conflict` (409) when `record_version` differs from the stored version; the
/// store's validation errors.
pub fn write(store: &KnowledgeStore, a: WriteArgs<'_>) -> Result<WriteReport> {
    let path = a.path;
    let node = parse(path)?;
    let space = a.space.to_string();
    let body = a
        .body
        .clone()
        .ok_or_else(|| Error::invalid(vec![FieldError::field(&["body"], "EINVAL", "Field required", Value::Null)]))?;
    match &node {
        Node::Memory { id, label: None } => {
            let front = &a.frontmatter;
            let title = front.get("title").and_then(|v| v.as_str()).map(str::to_string);
            let labels = front
                .get("labels")
                .and_then(|v| v.as_array())
                .map(|a| a.iter().filter_map(|x| x.as_str().map(str::to_string)).collect::<Vec<_>>());
            let importance = front.get("importance").and_then(|v| v.as_f64());
            let unit_type = match front.get("unit_type") {
                Some(u) => Some(serde_json::from_value::<UnitType>(u.clone()).map_err(|_| {
                    Error::invalid(vec![FieldError::field(
                        &["frontmatter", "unit_type"],
                        "EINVAL",
                        "not a unit type",
                        u.clone(),
                    )])
                })?),
                None => None,
            };
            let existing = store.memories().get(id, Some(&space)).ok();
            if let (Some(want), Some(cur)) = (a.record_version, &existing)
                && cur.memory.version != want
            {
                return Err(Error::new(
                    ErrorKind::Conflict,
                    format!("the memory is at version {}, not {want}; read it again", cur.memory.version),
                )
                .with_code(ErrorCode::VersionConflict));
            }
            let v = if existing.is_some() {
                let patch = crate::store::MemoryPatch {
                    content: Some(body),
                    title,
                    labels,
                    importance,
                    unit_type,
                    ..Default::default()
                };
                store.memories().update(id, patch, Some(&space))?
            } else {
                store
                    .memories()
                    .create(crate::store::NewMemory {
                        id: Some(id.clone()),
                        content: body,
                        title,
                        labels,
                        importance,
                        unit_type,
                        source: Some("fs".into()),
                        space_id: Some(space.clone()),
                        ..Default::default()
                    })?
                    .view
            };
            Ok(WriteReport {
                path: memory_path(id),
                written: true,
                created: Some(existing.is_none()),
                id: Some(v.memory.id.clone()),
                version: Some(v.memory.version),
                frontmatter: Some(memory_front(&v)),
                updated_at: None,
            })
        }
        Node::WorkingToday => {
            let wm = store.working().set(&space, &body)?;
            Ok(WriteReport {
                path: "/working-memory/today.md".into(),
                written: true,
                created: None,
                id: None,
                version: None,
                frontmatter: None,
                updated_at: Some(wm.updated_at),
            })
        }
        _ => Err(read_only(&node, path)),
    }
}

/// Deletes the memory of `path` (`/memories/by-id/<id>.memory.md`); returns its id.
///
/// # Errors
/// `ENOENT` for a missing memory; `ENOTSUP` for working memory; `EXDEV`/`EROFS`/`EINVAL` for other paths.
pub fn delete(store: &KnowledgeStore, space: &str, path: &str) -> Result<String> {
    let node = parse(path)?;
    match &node {
        Node::Memory { id, label: None } => {
            store.memories().get(id, Some(space)).map_err(|_| enoent(path))?;
            store.memories().delete(id, Some(space))?;
            Ok(id.clone())
        }
        Node::WorkingToday => Err(enotsup("deleting working memory")),
        _ => Err(read_only(&node, path)),
    }
}
