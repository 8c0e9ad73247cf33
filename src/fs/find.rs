//! `find`: structural search of the tree (by type, label, unit type, dates, mentioned entity), a page at a time;
//! and `recall`: hybrid search scoped to a directory.

use serde::Serialize;

use super::path::*;
use super::project::*;
use crate::error::Result;
use crate::index::catalog::MemoryFilter;
use crate::model::{Timestamp, UnitType};
use crate::store::{KnowledgeStore, ListQuery, MemoryView, SearchMode, SearchQuery};

/// One `find` hit.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Hit {
    /// Tree path of the file.
    pub path: String,
    /// `memory`, `thread`, `source` or `entity`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// Title (a memory's title, a thread's title, a source's file name, an entity's name).
    pub title: String,
    /// The first 200 characters of a memory, a thread's or source's summary, an entity's type and mentions.
    pub excerpt: String,
    /// When a memory was recorded (memories only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created_at: Option<Timestamp>,
}

impl Hit {
    fn memory(m: &MemoryView) -> Hit {
        Hit {
            path: memory_path(&m.memory.id),
            kind: "memory",
            title: m.memory.title.clone(),
            excerpt: m.memory.content.chars().take(200).collect(),
            created_at: Some(m.memory.created_at),
        }
    }

    fn other(path: String, kind: &'static str, title: &str, excerpt: &str) -> Hit {
        Hit { path, kind, title: title.to_string(), excerpt: excerpt.to_string(), created_at: None }
    }
}

/// One `find`.
#[derive(Debug, Clone, Default)]
pub struct FindArgs<'a> {
    /// Space searched.
    pub space: &'a str,
    /// Scope directory (`/memories`, `/memories/by-label/<label>`, `/threads`, `/sources`, `/wiki`, ...).
    pub path: &'a str,
    /// `memory`, `thread`, `source` or `entity` (plural accepted); default from the scope.
    pub kind: Option<&'a str>,
    /// Memories of this unit type.
    pub unit_type: Option<&'a str>,
    /// Memories with this label (name).
    pub label: Option<&'a str>,
    /// Memories recorded at or after (`YYYY-MM-DD` or RFC 3339).
    pub since: Option<&'a str>,
    /// Memories recorded at or before (a whole day includes that day).
    pub until: Option<&'a str>,
    /// Memories mentioning this entity (id or name); entities whose name contains it.
    pub mentions: Option<&'a str>,
    /// Hits skipped.
    pub offset: usize,
    /// Hits on the page.
    pub limit: usize,
}

/// A page of hits and how many match.
#[derive(Debug, Clone, PartialEq)]
pub struct FindPage {
    /// The page.
    pub hits: Vec<Hit>,
    /// Hits in all.
    pub total: usize,
}

fn parse_time(loc: &str, v: Option<&str>, end: bool) -> Result<Option<Timestamp>> {
    let Some(v) = v.filter(|v| !v.is_empty()) else { return Ok(None) };
    let t = crate::index::catalog::parse_loose_date(v)
        .ok_or_else(|| einval(loc, "a date (YYYY, YYYY-MM, YYYY-MM-DD) or an RFC 3339 date-time", v))?;
    // `until` names the end of the period it gives, as search's date bounds do: `until=2023` includes 2023.
    Ok(Some(if end { Timestamp(crate::index::catalog::end_of_period(v, t.0)) } else { t }))
}

/// Runs a `find`.
///
/// # Errors
/// `EINVAL` for an unknown type, unit type or date, or a malformed path; `ENOENT`/`ENOTSUP` for a path outside
/// the tree; `space_not_found`.
pub fn find(store: &KnowledgeStore, a: &FindArgs<'_>) -> Result<FindPage> {
    let (path, offset, limit) = (a.path, a.offset, a.limit);
    let node = parse(path)?;
    let space = a.space.to_string();
    store.spaces().require(&space)?;
    let default_type = match node {
        Node::Threads => "thread",
        Node::Sources => "source",
        Node::Wiki | Node::WikiEntities => "entity",
        _ => "memory",
    };
    let ty = a.kind.filter(|t| !t.is_empty()).unwrap_or(default_type);
    let (hits, total): (Vec<Hit>, usize) = match ty {
        "memory" | "memories" => {
            let mut filter = tree_filter();
            if let Some(u) = a.unit_type.filter(|u| !u.is_empty()) {
                let ut: UnitType = unit_type_param(u)?;
                filter.unit_type = Some(ut);
            }
            let label = a.label.filter(|l| !l.is_empty()).map(str::to_string).or(match &node {
                Node::LabelDir(l) => Some(l.clone()),
                _ => None,
            });
            if let Some(l) = label {
                filter.label_ids = vec![crate::model::Label::id_for(&l)];
            }
            filter.recorded_from = parse_time("since", a.since, false)?;
            filter.recorded_to = parse_time("until", a.until, true)?;
            if let Some(m) = a.mentions.filter(|m| !m.is_empty()) {
                // The entity's own memory list bounds the scan; the page and the total come from the store.
                filter.memory_ids = Some(match store.graph().resolve_entity(m) {
                    Ok(e) if e.space_id == space => {
                        store.graph().entity_memory_ids(&space, &e.id)?.into_iter().collect()
                    }
                    _ => Default::default(),
                });
            }
            let page = store.memories().list(&ListQuery { space_id: space.clone(), filter, limit, offset })?;
            (page.items.iter().map(Hit::memory).collect(), page.total)
        }
        "thread" | "threads" => {
            let page = store.threads().list(&space, None, limit, offset)?;
            let v = page
                .items
                .iter()
                .map(|t| {
                    Hit::other(format!("/threads/{}/thread.md", segment(&t.thread_id)), "thread", &t.title, &t.summary)
                })
                .collect();
            (v, page.total)
        }
        "source" | "sources" => map_page(sources_page(store, &space, offset, limit)?, |s| {
            Hit::other(format!("/sources/{}", segment(&s.original_name)), "source", &s.original_name, &s.summary)
        }),
        "entity" | "entities" => {
            let name = a.mentions.filter(|m| !m.is_empty());
            map_page(store.graph().entities_page(&space, name, limit, offset)?, |e| {
                let excerpt = format!("{} ({} mentions)", e.entity_type, e.mention_count);
                Hit::other(entity_path(&e.name, &e.id), "entity", &e.name, &excerpt)
            })
        }
        other => return Err(einval("type", "one of memory, thread, source, entity", other)),
    };
    Ok(FindPage { hits, total })
}

/// One `recall` hit.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct RecallHit {
    /// Tree path of the file.
    pub path: String,
    /// The search score (hybrid for memories, BM25 over chunks for sources).
    pub score: f32,
    /// The first 200 characters of a memory, or the best chunk's snippet of a source.
    pub excerpt: String,
    /// A memory's title (memories only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
}

/// Hybrid search scoped to a directory: `k` hits for `query` among the memories of `/memories` (or of one label
/// directory, optionally of one unit type), or among the sources of `/sources`.
///
/// # Errors
/// `EINVAL` for another path or an unknown unit type; the search's own validation errors.
pub fn recall(
    store: &KnowledgeStore,
    space: &str,
    path: &str,
    query: &str,
    k: usize,
    unit_type: Option<&str>,
) -> Result<Vec<RecallHit>> {
    let node = parse(path)?;
    Ok(match &node {
        Node::Sources => store
            .sources()
            .search(space, query, k)?
            .iter()
            .map(|h| RecallHit {
                path: format!("/sources/{}", segment(&h.source.original_name)),
                score: h.score,
                excerpt: h.chunks.first().map(|c| c.snippet.clone()).unwrap_or_default(),
                title: None,
            })
            .collect(),
        Node::Root | Node::Memories | Node::ById | Node::LabelDir(_) => {
            let mut filter = MemoryFilter::default();
            if let Node::LabelDir(l) = &node {
                filter.label_ids = vec![crate::model::Label::id_for(l)];
            }
            if let Some(u) = unit_type.filter(|u| !u.is_empty()) {
                filter.unit_type = Some(unit_type_param(u)?);
            }
            let sq = SearchQuery {
                query: query.to_string(),
                space_id: space.to_string(),
                limit: k,
                filter,
                mode: SearchMode::Hybrid,
                fusion: None,
                query_embedding: None,
                options: Default::default(),
            };
            store
                .search()
                .run(&sq)?
                .hits
                .iter()
                .map(|h| RecallHit {
                    path: memory_path(&h.view.memory.id),
                    score: h.score,
                    excerpt: h.view.memory.content.chars().take(200).collect(),
                    title: Some(h.view.memory.title.clone()),
                })
                .collect()
        }
        _ => return Err(einval("path", "recall searches /memories, /memories/by-label/<label> or /sources", path)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `until` ends where the period it names ends, the rule of search's date bounds: a year, a month or a day
    /// is included whole; a date-time is an instant.
    #[test]
    fn until_includes_the_whole_period_it_names() {
        let at = |s: &str, end: bool| parse_time("until", Some(s), end).expect("parses").expect("given").0;
        assert_eq!(at("2023", true), 1_704_067_199_999); // 2023-12-31T23:59:59.999Z
        assert_eq!(at("2023-02", true), 1_677_628_799_999); // 2023-02-28T23:59:59.999Z
        assert_eq!(at("2023-02-03", true), 1_675_468_799_999); // 2023-02-03T23:59:59.999Z
        assert_eq!(at("2023-02-03T10:00:00Z", true), 1_675_418_400_000);
        assert_eq!(at("2023", false), 1_672_531_200_000); // `since`: the period's start
        assert!(parse_time("until", Some("20x3"), true).is_err());
    }
}
