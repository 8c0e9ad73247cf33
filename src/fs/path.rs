//! The path grammar of the tree API: absolute paths, `%2F`/`%25`-encoded segments, the roots, and the tree
//! error codes (`ENOENT`, `EROFS`, `EXDEV`, `EINVAL`, `ENOTSUP`).

use serde_json::{Value, json};

use crate::error::{Error, ErrorCode, ErrorKind, FieldError, Result};
use crate::index::catalog::MemoryFilter;
use crate::model::{MemoryState, UnitType};

pub(crate) const ROOTS: &[(&str, &str)] = &[
    ("memories", "/memories"),
    ("threads", "/threads"),
    ("sources", "/sources"),
    ("wiki", "/wiki"),
    ("working-memory", "/working-memory"),
];

/// Planned roots and features: answered with ENOTSUP.
pub(crate) const PLANNED: &[&str] =
    &["context", "feed", "activities", "artifacts", "mnt", "sql", "cypher", "replay", "tail"];

pub(crate) fn enoent(path: &str) -> Error {
    Error::new(ErrorKind::NotFound, format!("ENOENT: no such file or directory: {path}")).with_code(ErrorCode::Enoent)
}

pub(crate) fn erofs(path: &str) -> Error {
    Error::new(ErrorKind::Forbidden, format!("EROFS: {path} is derived and read-only")).with_code(ErrorCode::Erofs)
}

pub(crate) fn exdev(path: &str, canonical: &str) -> Error {
    Error::new(ErrorKind::Conflict, format!("EXDEV: {path} is an alias path; write {canonical} instead"))
        .with_code(ErrorCode::Exdev)
}

pub(crate) fn einval(loc: &str, msg: impl Into<String>, input: &str) -> Error {
    Error::invalid(vec![FieldError::field(&[loc], "EINVAL", msg, Value::String(input.to_string()))])
}

pub(crate) fn enotsup(what: &str) -> Error {
    Error::new(ErrorKind::NotImplemented, format!("ENOTSUP: {what} is planned but not available in this release"))
        .with_code(ErrorCode::Enotsup)
}

/// A name as one path segment.
pub fn segment(name: &str) -> String {
    name.replace('%', "%25").replace('/', "%2F")
}

pub(crate) fn unsegment(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            let hex = |b: u8| (b as char).to_digit(16);
            if let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A parsed tree path.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Node {
    Root,
    Memories,
    ById,
    ByLabel,
    LabelDir(String),
    Memory { id: String, label: Option<String> },
    Threads,
    ThreadDir(String),
    ThreadFile(String, &'static str),
    Sources,
    Source(String),
    Wiki,
    WikiEntities,
    Entity(String),
    WorkingDir,
    WorkingToday,
}

pub(crate) fn parse(path: &str) -> Result<Node> {
    if !path.starts_with('/') || path.chars().any(char::is_control) || path.len() > 4096 {
        return Err(einval(
            "path",
            "paths are absolute (start with /), at most 4096 bytes, no control characters",
            path,
        ));
    }
    let trimmed = path.trim_end_matches('/');
    let segs: Vec<&str> = if trimmed.is_empty() { vec![] } else { trimmed[1..].split('/').collect() };
    if segs.iter().any(|s| s.is_empty() || *s == "." || *s == "..") {
        return Err(einval("path", "empty, `.` and `..` segments are not allowed", path));
    }
    let d: Vec<String> = segs.iter().map(|s| unsegment(s)).collect();
    let d: Vec<&str> = d.iter().map(String::as_str).collect();
    let memory_file = |f: &str| f.strip_suffix(".memory.md").map(str::to_string);
    Ok(match d.as_slice() {
        [] => Node::Root,
        ["memories"] => Node::Memories,
        ["memories", "by-id"] => Node::ById,
        ["memories", "by-id", f] => Node::Memory { id: memory_file(f).ok_or_else(|| enoent(path))?, label: None },
        ["memories", "by-label"] => Node::ByLabel,
        ["memories", "by-label", l] => Node::LabelDir((*l).to_string()),
        ["memories", "by-label", l, f] => {
            Node::Memory { id: memory_file(f).ok_or_else(|| enoent(path))?, label: Some((*l).to_string()) }
        }
        ["threads"] => Node::Threads,
        ["threads", t] => Node::ThreadDir((*t).to_string()),
        ["threads", t, f @ ("thread.md" | "messages.jsonl")] => {
            Node::ThreadFile((*t).to_string(), if *f == "thread.md" { "thread.md" } else { "messages.jsonl" })
        }
        ["sources"] => Node::Sources,
        ["sources", name] => Node::Source((*name).to_string()),
        ["wiki"] => Node::Wiki,
        ["wiki", "entities"] => Node::WikiEntities,
        ["wiki", "entities", f] => {
            let stem = f.strip_suffix(".entity.md").ok_or_else(|| enoent(path))?;
            let id = stem.rsplit_once("--").map(|(_, id)| id).ok_or_else(|| enoent(path))?;
            Node::Entity(id.to_string())
        }
        ["working-memory"] => Node::WorkingDir,
        ["working-memory", "today.md"] => Node::WorkingToday,
        [root, ..] if PLANNED.contains(root) => return Err(enotsup(&format!("/{root}"))),
        _ => return Err(enoent(path)),
    })
}

pub(crate) fn memory_path(id: &str) -> String {
    format!("/memories/by-id/{}.memory.md", segment(id))
}

pub(crate) fn entity_path(name: &str, id: &str) -> String {
    format!("/wiki/entities/{}--{}.entity.md", segment(name), segment(id))
}

/// Every memory the tree shows: all states but forgotten, old versions included.
pub(crate) fn tree_filter() -> MemoryFilter {
    MemoryFilter {
        states: vec![MemoryState::Active, MemoryState::Archived, MemoryState::Deprecated, MemoryState::Superseded],
        include_history: true,
        ..Default::default()
    }
}

/// The `unit_type` query parameter.
pub(crate) fn unit_type_param(u: &str) -> Result<UnitType> {
    serde_json::from_value(json!(u)).map_err(|_| {
        einval("unit_type", "one of fact, preference, decision, plan, procedure, learning, context, event", u)
    })
}
