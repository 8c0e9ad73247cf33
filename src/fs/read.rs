//! `cat` and `stat`: a file's content (whole, or a window of body lines) and a path's metadata.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use super::path::*;
use super::project::*;
use crate::error::Result;
use crate::model::Timestamp;
use crate::store::KnowledgeStore;

/// A file as `cat` returns it.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct FileContent {
    /// The file's canonical path.
    pub path: String,
    /// Its frontmatter (empty for `.jsonl` files and sources).
    pub frontmatter: BTreeMap<String, Value>,
    /// The body, or the window of it.
    pub body: String,
    /// Lines in the whole body.
    pub total_lines: usize,
    /// The file as served (frontmatter and body), or the window.
    pub content: String,
    /// First line of the window (1-based), when one was asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<usize>,
    /// Lines in the window.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lines: Option<usize>,
    /// Whether lines follow the window.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub has_more: Option<bool>,
}

/// Reads file `path` of `space`, whole or the body lines `window` = (first line, 1-based; line count).
///
/// # Errors
/// `EINVAL` for a directory (use `ls`) or a malformed path; `ENOENT` for a missing file.
pub fn cat(store: &KnowledgeStore, space: &str, path: &str, window: Option<(usize, usize)>) -> Result<FileContent> {
    let node = parse(path)?;
    let f = match node {
        Node::Root
        | Node::Memories
        | Node::ById
        | Node::ByLabel
        | Node::LabelDir(_)
        | Node::Threads
        | Node::ThreadDir(_)
        | Node::Sources
        | Node::Wiki
        | Node::WikiEntities
        | Node::WorkingDir => return Err(einval("path", "a directory (use ls)", path)),
        _ => load(store, space, &node, path)?,
    };
    let total_lines = f.body.lines().count();
    let Some((start, n)) = window else {
        let content = f.text();
        return Ok(FileContent {
            path: f.path,
            frontmatter: f.front,
            body: f.body,
            total_lines,
            content,
            line: None,
            lines: None,
            has_more: None,
        });
    };
    let text: Vec<&str> = f.body.lines().skip(start - 1).take(n).collect();
    let mut body = text.join("\n");
    if !text.is_empty() {
        body.push('\n');
    }
    let shown = text.len();
    Ok(FileContent {
        path: f.path,
        frontmatter: f.front,
        content: body.clone(),
        body,
        total_lines,
        line: Some(start),
        lines: Some(shown),
        has_more: Some(start - 1 + shown < total_lines),
    })
}

/// What `stat` says of a path.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Stat {
    /// The path asked for.
    pub path: String,
    /// `dir` or `file`.
    pub kind: &'static str,
    /// `memory`, `thread`, `messages`, `source`, `entity`, `working-memory`, `label` or `dir`.
    #[serde(rename = "type")]
    pub ty: &'static str,
    /// The record id (empty for plain directories).
    pub id: String,
    /// File extension (`md`, `jsonl`, ...; empty for directories).
    pub ext: &'static str,
    /// Size of the file as served, in bytes (0 for directories).
    pub size_bytes: usize,
    /// Creation time, when known.
    pub created_at: Option<Timestamp>,
    /// Last change, when known.
    pub updated_at: Option<Timestamp>,
    /// The file's frontmatter (empty for directories).
    pub frontmatter: BTreeMap<String, Value>,
    /// The canonical path of an alias path (`/memories/by-label/...`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub alias_of: Option<String>,
    /// Whether `write` takes the path (files only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub writable: Option<bool>,
}

fn dir_stat(path: &str, ty: &'static str, id: String, created: Option<Timestamp>, updated: Option<Timestamp>) -> Stat {
    Stat {
        path: path.to_string(),
        kind: "dir",
        ty,
        id,
        ext: "",
        size_bytes: 0,
        created_at: created,
        updated_at: updated,
        frontmatter: BTreeMap::new(),
        alias_of: None,
        writable: None,
    }
}

/// Metadata of `path` of `space`.
///
/// # Errors
/// `ENOENT` for a missing thread, label or file; `EINVAL` for a malformed path; `space_not_found`.
pub fn stat(store: &KnowledgeStore, space: &str, path: &str) -> Result<Stat> {
    let node = parse(path)?;
    store.spaces().require(space)?;
    Ok(match &node {
        Node::ThreadDir(t) => {
            let th = store.threads().get(t, Some(space)).map_err(|_| enoent(path))?;
            dir_stat(path, "thread", th.thread_id, Some(th.created_at), Some(th.updated_at))
        }
        Node::LabelDir(l) => {
            let label = store.labels().get(space, &crate::model::Label::id_for(l)).map_err(|_| enoent(path))?;
            dir_stat(path, "label", label.id, Some(label.created_at), Some(label.updated_at))
        }
        Node::Memory { .. } | Node::ThreadFile(..) | Node::Source(_) | Node::Entity(_) | Node::WorkingToday => {
            let f = load(store, space, &node, path)?;
            let ty = match &node {
                Node::Memory { .. } => "memory",
                Node::ThreadFile(_, "thread.md") => "thread",
                Node::ThreadFile(..) => "messages",
                Node::Source(_) => "source",
                Node::Entity(_) => "entity",
                _ => "working-memory",
            };
            let alias = matches!(node, Node::Memory { label: Some(_), .. });
            Stat {
                path: if alias { path.to_string() } else { f.path.clone() },
                kind: f.kind,
                ty,
                id: f.id.clone(),
                ext: f.ext,
                size_bytes: f.text().len(),
                created_at: f.created_at,
                updated_at: f.updated_at,
                alias_of: alias.then(|| f.path.clone()),
                writable: Some(!alias && matches!(node, Node::Memory { .. } | Node::WorkingToday)),
                frontmatter: f.front,
            }
        }
        _ => dir_stat(path, "dir", String::new(), None, None),
    })
}
