//! The projection: memories, threads, sources, wiki entity pages and working memory as files with YAML
//! frontmatter and a body.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::path::*;
use crate::error::{Error, ErrorKind, Result};
use crate::model::Timestamp;
use crate::store::{KnowledgeStore, MemoryView};

pub(crate) fn yaml_value(v: &Value) -> String {
    match v {
        Value::String(s) => crate::library::yaml_str(s),
        Value::Array(a) => format!("[{}]", a.iter().map(yaml_value).collect::<Vec<_>>().join(", ")),
        Value::Null => "null".into(),
        other => other.to_string(),
    }
}

/// `---\n<yaml>\n---\n\n<body>`.
pub(crate) fn render(front: &BTreeMap<String, Value>, body: &str) -> String {
    let mut out = String::from("---\n");
    for (k, v) in front {
        out.push_str(&format!("{k}: {}\n", yaml_value(v)));
    }
    out.push_str("---\n\n");
    out.push_str(body);
    if !body.ends_with('\n') {
        out.push('\n');
    }
    out
}

/// A file: its frontmatter, body and metadata.
pub(crate) struct File {
    pub(crate) path: String,
    pub(crate) kind: &'static str,
    pub(crate) id: String,
    pub(crate) ext: &'static str,
    pub(crate) front: BTreeMap<String, Value>,
    pub(crate) body: String,
    pub(crate) created_at: Option<Timestamp>,
    pub(crate) updated_at: Option<Timestamp>,
    /// `.md` files render frontmatter; `.jsonl` and sources are their body.
    pub(crate) markdown: bool,
}

impl File {
    /// The file as served: rendered frontmatter and body for markdown, the body otherwise.
    pub(crate) fn text(&self) -> String {
        if self.markdown { render(&self.front, &self.body) } else { self.body.clone() }
    }
}

pub(crate) fn label_name(id: &str) -> String {
    id.strip_prefix("label_").unwrap_or(id).to_string()
}

pub(crate) fn memory_front(v: &MemoryView) -> BTreeMap<String, Value> {
    let m = &v.memory;
    let mut f = BTreeMap::new();
    f.insert("id".into(), json!(m.id));
    f.insert("title".into(), json!(m.title));
    f.insert("type".into(), json!("memory"));
    f.insert("unit_type".into(), json!(m.unit_type));
    f.insert("state".into(), json!(m.state));
    f.insert("importance".into(), json!(m.importance));
    f.insert("labels".into(), json!(v.label_ids.iter().map(|l| label_name(l)).collect::<Vec<_>>()));
    f.insert("source".into(), json!(m.source));
    f.insert("space_id".into(), json!(m.space_id));
    f.insert("created_at".into(), json!(m.created_at));
    f.insert("updated_at".into(), json!(m.updated_at));
    if let Some(e) = &m.event_start {
        f.insert("event_start".into(), json!(e));
    }
    if m.is_crystal {
        f.insert("is_crystal".into(), json!(true));
    }
    f
}

pub(crate) fn load(store: &KnowledgeStore, space: &str, node: &Node, path: &str) -> Result<File> {
    match node {
        Node::Memory { id, label } => {
            let v = store.memories().get(id, Some(space)).map_err(|_| enoent(path))?;
            if let Some(l) = label
                && !v.label_ids.iter().any(|x| label_name(x) == *l)
            {
                return Err(enoent(path));
            }
            Ok(File {
                path: memory_path(id),
                kind: "file",
                id: id.clone(),
                ext: "md",
                front: memory_front(&v),
                body: v.memory.content.clone(),
                created_at: Some(v.memory.created_at),
                updated_at: Some(v.memory.updated_at),
                markdown: true,
            })
        }
        Node::ThreadFile(t, which) => {
            let (thread, msgs) = store.threads().all_messages(t, Some(space)).map_err(|_| enoent(path))?;
            let (front, body, markdown) = if *which == "thread.md" {
                let mut f = BTreeMap::new();
                f.insert("id".into(), json!(thread.thread_id));
                f.insert("type".into(), json!("thread"));
                f.insert("title".into(), json!(thread.title));
                f.insert("message_count".into(), json!(thread.message_count));
                f.insert("source".into(), json!(thread.source));
                f.insert("created_at".into(), json!(thread.created_at));
                f.insert("updated_at".into(), json!(thread.updated_at));
                let mut body = String::new();
                if !thread.summary.is_empty() {
                    body.push_str(&format!("{}\n\n", thread.summary));
                }
                for m in &msgs {
                    body.push_str(&format!("**{}**: {}\n\n", m.role, m.content.trim()));
                }
                (f, body, true)
            } else {
                let body: String = msgs.iter().map(|m| serde_json::to_string(m).unwrap_or_default() + "\n").collect();
                (BTreeMap::new(), body, false)
            };
            Ok(File {
                path: format!("/threads/{}/{which}", segment(t)),
                kind: "file",
                id: thread.thread_id.clone(),
                ext: if markdown { "md" } else { "jsonl" },
                front,
                body,
                created_at: Some(thread.created_at),
                updated_at: Some(thread.updated_at),
                markdown,
            })
        }
        Node::Source(name) => {
            let s = find_source(store, space, name)?.ok_or_else(|| enoent(path))?;
            let mut f = BTreeMap::new();
            f.insert("id".into(), json!(s.id));
            f.insert("type".into(), json!("source"));
            f.insert("original_name".into(), json!(s.original_name));
            f.insert("mime_type".into(), json!(s.mime_type));
            f.insert("lifecycle_state".into(), json!(s.lifecycle_state));
            f.insert("chunk_count".into(), json!(s.chunk_count));
            f.insert("labels".into(), json!(s.label_ids.iter().map(|l| label_name(l)).collect::<Vec<_>>()));
            Ok(File {
                path: format!("/sources/{}", segment(&s.original_name)),
                kind: "file",
                id: s.id.clone(),
                ext: "md",
                front: f,
                body: store.sources().text(&s.id)?,
                created_at: Some(s.created_at),
                updated_at: Some(s.updated_at),
                markdown: true,
            })
        }
        Node::Entity(id) => {
            let e = store.graph().entity(space, id).map_err(|_| enoent(path))?;
            let page = store.graph().entity_page(&e.id, 30, &FsLinker)?;
            // The page renders its own frontmatter: split it off.
            let (front, body) = split_front(&page);
            Ok(File {
                path: entity_path(&e.name, &e.id),
                kind: "file",
                id: e.id.clone(),
                ext: "md",
                front,
                body,
                created_at: Some(e.created_at),
                updated_at: Some(e.updated_at),
                markdown: true,
            })
        }
        Node::WorkingToday => {
            let wm = store.working().get(space, None)?;
            let mut f = BTreeMap::new();
            f.insert("type".into(), json!("working-memory"));
            f.insert("date".into(), json!(crate::store::working_today()));
            f.insert("space_id".into(), json!(space));
            Ok(File {
                path: "/working-memory/today.md".into(),
                kind: "file",
                id: "today".into(),
                ext: "md",
                front: f,
                body: wm.as_ref().map(|w| w.content.clone()).unwrap_or_default(),
                created_at: None,
                updated_at: wm.map(|w| w.updated_at),
                markdown: true,
            })
        }
        _ => Err(Error::new(ErrorKind::InvalidInput, "not a file")),
    }
}

/// Splits `---\n...\n---\n` frontmatter (simple `key: value` lines) from a rendered page.
pub(crate) fn split_front(page: &str) -> (BTreeMap<String, Value>, String) {
    let mut f = BTreeMap::new();
    if let Some(rest) = page.strip_prefix("---\n")
        && let Some((head, body)) = rest.split_once("\n---\n")
    {
        for line in head.lines() {
            if let Some((k, v)) = line.split_once(':') {
                let v = v.trim();
                let val = serde_json::from_str::<Value>(v).unwrap_or_else(|_| Value::String(v.to_string()));
                f.insert(k.trim().to_string(), val);
            }
        }
        return (f, body.trim_start_matches('\n').to_string());
    }
    (f, page.to_string())
}

/// Links of wiki pages as tree paths.
pub(crate) struct FsLinker;

impl crate::library::Linker for FsLinker {
    fn entity(&self, e: &crate::model::Entity) -> Option<String> {
        Some(entity_path(&e.name, &e.id))
    }
    fn crystal(&self, _space: &str, id: &str) -> Option<String> {
        Some(memory_path(id))
    }
    fn topic(&self, _id: u64) -> Option<String> {
        None
    }
    fn memory(&self, _space: &str, id: &str) -> Option<String> {
        Some(memory_path(id))
    }
}

pub(crate) fn find_source(store: &KnowledgeStore, space: &str, name: &str) -> Result<Option<crate::model::Source>> {
    if let Ok(s) = store.sources().get(name, Some(space)) {
        return Ok(Some(s));
    }
    Ok(store.sources().all(space)?.into_iter().rev().find(|s| s.original_name == name))
}

/// Sources `offset..offset + limit` of `space`, newest first (as `ls /sources` and `find type=source` list
/// them), and how many there are.
pub(crate) fn sources_page(
    store: &KnowledgeStore,
    space: &str,
    offset: usize,
    limit: usize,
) -> Result<crate::store::Page<crate::model::Source>> {
    store.sources().list(&crate::store::SourceQuery {
        space_id: space.to_string(),
        source_type: None,
        lifecycle_state: None,
        labels: vec![],
        metadata: vec![],
        limit,
        offset,
    })
}

/// A page's items through `f`, and the page's total.
pub(crate) fn map_page<T, R>(page: crate::store::Page<T>, f: impl FnMut(&T) -> R) -> (Vec<R>, usize) {
    (page.items.iter().map(f).collect(), page.total)
}
