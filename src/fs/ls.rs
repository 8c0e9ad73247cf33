//! `ls`: the entries of a directory of the tree, a page at a time.

use serde::Serialize;

use super::path::*;
use super::project::{map_page, sources_page};
use crate::error::Result;
use crate::model::Timestamp;
use crate::store::{KnowledgeStore, ListQuery};

/// One directory entry.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Entry {
    /// Name within its directory.
    pub name: String,
    /// Absolute tree path.
    pub path: String,
    /// `dir` or `file`.
    pub kind: &'static str,
    /// What it holds (a title, a count, a summary).
    pub hint: String,
    /// Last change, when the entry has one.
    pub updated_at: Option<Timestamp>,
}

fn dir(name: &str, path: &str, hint: &str) -> Entry {
    Entry { name: name.into(), path: path.into(), kind: "dir", hint: hint.into(), updated_at: None }
}

fn file(name: &str, path: &str, hint: &str, updated: Option<Timestamp>) -> Entry {
    Entry { name: name.into(), path: path.into(), kind: "file", hint: hint.into(), updated_at: updated }
}

/// A page of a directory: entries `offset..offset + limit` and how many the directory holds.
#[derive(Debug, Clone, PartialEq)]
pub struct Listing {
    /// The page.
    pub entries: Vec<Entry>,
    /// Entries in the directory.
    pub total: usize,
}

/// Lists directory `path` of `space` from entry `offset`, at most `limit` entries.
///
/// # Errors
/// `space_not_found`; `ENOENT` for a path that does not exist; `EINVAL` for a file (use `cat` or `stat`) or a
/// malformed path; `ENOTSUP` for a planned root.
pub fn ls(store: &KnowledgeStore, space: &str, path: &str, offset: usize, limit: usize) -> Result<Listing> {
    let node = parse(path)?;
    store.spaces().require(space)?;
    let space = space.to_string();
    let (entries, total): (Vec<Entry>, usize) = match &node {
        Node::Root => {
            let v: Vec<Entry> = ROOTS.iter().map(|(n, p)| dir(n, p, "root")).collect();
            let n = v.len();
            (v.into_iter().skip(offset).take(limit).collect(), n)
        }
        Node::Memories => {
            let v = vec![
                dir("by-id", "/memories/by-id", "every memory, canonical and writable"),
                dir("by-label", "/memories/by-label", "memories by label (alias paths)"),
            ];
            (v, 2)
        }
        Node::ById | Node::LabelDir(_) => {
            let mut filter = tree_filter();
            if let Node::LabelDir(l) = &node {
                filter.label_ids = vec![crate::model::Label::id_for(l)];
                if store.labels().get(&space, &filter.label_ids[0]).is_err() {
                    return Err(enoent(path));
                }
            }
            let page = store.memories().list(&ListQuery { space_id: space.clone(), filter, limit, offset })?;
            let prefix = match &node {
                Node::LabelDir(l) => format!("/memories/by-label/{}", segment(l)),
                _ => "/memories/by-id".into(),
            };
            let v = page
                .items
                .iter()
                .map(|m| {
                    let name = format!("{}.memory.md", segment(&m.memory.id));
                    file(&name, &format!("{prefix}/{name}"), &m.memory.title, Some(m.memory.updated_at))
                })
                .collect();
            (v, page.total)
        }
        Node::ByLabel => {
            let labels = store.labels().list(&space, crate::store::LabelOrder::Name, false, limit, offset)?;
            let total = store.labels().count(&space)?;
            map_page(crate::store::Page { items: labels, total, limit, offset }, |l| {
                let path = format!("/memories/by-label/{}", segment(&l.name));
                dir(&l.name, &path, &format!("{} memories", l.usage_count))
            })
        }
        Node::Threads => {
            let page = store.threads().list(&space, None, limit, offset)?;
            let v = page
                .items
                .iter()
                .map(|t| {
                    let mut d = dir(&t.thread_id, &format!("/threads/{}", segment(&t.thread_id)), &t.title);
                    d.updated_at = Some(t.updated_at);
                    d
                })
                .collect();
            (v, page.total)
        }
        Node::ThreadDir(t) => {
            let th = store.threads().get(t, Some(&space)).map_err(|_| enoent(path))?;
            let base = format!("/threads/{}", segment(t));
            let v = vec![
                file("thread.md", &format!("{base}/thread.md"), &th.title, Some(th.updated_at)),
                file(
                    "messages.jsonl",
                    &format!("{base}/messages.jsonl"),
                    &format!("{} messages", th.message_count),
                    Some(th.updated_at),
                ),
            ];
            (v, 2)
        }
        Node::Sources => map_page(sources_page(store, &space, offset, limit)?, |s| {
            file(&s.original_name, &format!("/sources/{}", segment(&s.original_name)), &s.summary, Some(s.updated_at))
        }),
        Node::Wiki => (vec![dir("entities", "/wiki/entities", "entity pages (derived, read-only)")], 1),
        Node::WikiEntities => map_page(store.graph().entities_page(&space, None, limit, offset)?, |e| {
            let p = entity_path(&e.name, &e.id);
            let name = p.rsplit('/').next().unwrap_or("").to_string();
            file(&name, &p, &format!("{} ({} mentions)", e.entity_type, e.mention_count), Some(e.updated_at))
        }),
        Node::WorkingDir => {
            let wm = store.working().get(&space, None)?;
            (vec![file("today.md", "/working-memory/today.md", "working memory", wm.map(|w| w.updated_at))], 1)
        }
        _ => return Err(einval("path", "not a directory (use cat or stat)", path)),
    };
    Ok(Listing { entries, total })
}
