//! The tree API (spec "Tree API (preview)", client contract section 7): memories, threads, sources, wiki
//! entity pages and working memory projected as a file tree, with `ls`, `cat`, `stat`, `find`, `grep`,
//! `recall`, `write` and `delete`.
//!
//! Paths (one space per request, `space_id`, default `default`):
//! * `/memories/by-id/<id>.memory.md`: a memory, canonical and writable;
//! * `/memories/by-label/<label>/<id>.memory.md`: the same memory under each of its labels (alias: read-only,
//!   writes give `EXDEV`);
//! * `/threads/<thread_id>/thread.md` and `/threads/<thread_id>/messages.jsonl` (one JSON message per line);
//! * `/sources/<file name>` (the parsed text; a name shared by several sources resolves to the newest, and
//!   `/sources/<source id>` always works);
//! * `/wiki/entities/<name>--<entity id>.entity.md` (derived pages);
//! * `/working-memory/today.md` (writable).
//!
//! Segments are the names as they are, except that `/` and `%` inside a name are percent-encoded (`%2F`,
//! `%25`). Errors carry the tree codes as `error_code`: `ENOENT` 404, `EROFS` 403 (derived path), `EXDEV` 409
//! (alias path), `EINVAL` 422 (the validation shape with `type: "EINVAL"`), `ENOTSUP` 501 (planned: mount,
//! fragments, SQL/Cypher, replay, tail, raw).

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::Api;
use super::query::Query;
use super::query::{ParamSpec, boolean, int, required, string};
use super::route::{Dto, Shape, ok, route};
use crate::error::Result;
use crate::fs::path::*;
use crate::store::DEFAULT_SPACE;

/// The routes of this module, in table order ([`super::routes::ROUTES`] gathers every module's list).
pub(super) const ROUTES: &[super::route::Route] = &[
    route!(
        "GET",
        "/fs/capabilities",
        "fs_capabilities",
        "Tree API roots, verbs, limits and feature flags",
        CAPS_PARAMS,
        None,
        Shape::Ref(Dto::of::<FsCapabilities>()),
        false,
        |_, _| ok(&capabilities())
    ),
    route!(
        "GET",
        "/fs/ls",
        "fs_ls",
        "List a directory of the tree (cursor paging)",
        LS_PARAMS,
        None,
        Shape::Ref(Dto::of::<FsListing>()),
        false,
        |api, ctx| ok(&ls(api, &ctx.query)?)
    ),
    route!(
        "GET",
        "/fs/cat",
        "fs_cat",
        "A file of the tree: frontmatter and body, or a window of lines",
        CAT_PARAMS,
        None,
        Shape::Ref(Dto::of::<crate::fs::FileContent>()),
        false,
        |api, ctx| ok(&cat(api, &ctx.query)?)
    ),
    route!(
        "GET",
        "/fs/stat",
        "fs_stat",
        "Metadata of a path without the body",
        STAT_PARAMS,
        None,
        Shape::Ref(Dto::of::<crate::fs::Stat>()),
        false,
        |api, ctx| ok(&stat(api, &ctx.query)?)
    ),
    route!(
        "GET",
        "/fs/find",
        "fs_find",
        "Structural search (type, label, dates, mentions); returns paths",
        FIND_PARAMS,
        None,
        Shape::Ref(Dto::of::<FsFindResponse>()),
        false,
        |api, ctx| ok(&find(api, &ctx.query)?)
    ),
    route!(
        "GET",
        "/fs/grep",
        "fs_grep",
        "Literal or regex search over memories, thread messages and sources, with line numbers",
        GREP_PARAMS,
        None,
        Shape::Ref(Dto::of::<FsGrepResponse>()),
        false,
        |api, ctx| ok(&grep(api, &ctx.query)?)
    ),
    route!(
        "GET",
        "/fs/recall",
        "fs_recall",
        "Semantic (hybrid) search; returns paths",
        RECALL_PARAMS,
        None,
        Shape::Ref(Dto::of::<FsRecallResponse>()),
        false,
        |api, ctx| ok(&recall(api, &ctx.query)?)
    ),
    route!(
        "POST",
        "/fs/write",
        "fs_write",
        "Write a canonical writable path (a memory, today's working memory)",
        &[],
        Some(Dto::of::<FsWriteRequest>()),
        Shape::Ref(Dto::of::<crate::fs::WriteReport>()),
        false,
        |api, ctx| ok(&write(api, ctx.json()?, &space_of(&ctx.query))?)
    ),
    route!(
        "POST",
        "/fs/delete",
        "fs_delete",
        "Delete a canonical writable path (a memory)",
        &[],
        Some(Dto::of::<FsDeleteRequest>()),
        Shape::Ref(Dto::of::<FsDeleteResponse>()),
        false,
        |api, ctx| ok(&delete(api, ctx.json()?, &space_of(&ctx.query))?)
    ),
];

/// Entries per `ls` page by default, and at most.
const DEFAULT_LIMIT: usize = 200;
const MAX_LIMIT: usize = 1000;
/// Hits per `find`/`grep` page by default.
const DEFAULT_SEARCH_LIMIT: usize = 50;
/// `recall` hits by default.
const DEFAULT_RECALL_K: usize = 20;
/// Lines of a `cat` window when `line` is given without `lines`.
const DEFAULT_LINE_WINDOW: usize = 200;

fn space_of(q: &Query) -> String {
    q.str("space_id").filter(|s| !s.is_empty()).unwrap_or(DEFAULT_SPACE).to_string()
}

/// Cursors are the offset of the next entry, in decimal: opaque to clients, and any string of 1 to 15 digits is
/// one (past the end gives an empty page).
fn encode_cursor(offset: usize) -> String {
    offset.to_string()
}

fn decode_cursor(c: Option<&str>) -> Result<usize> {
    let Some(c) = c.filter(|c| !c.is_empty()) else { return Ok(0) };
    Some(c)
        .filter(|c| c.len() <= 15 && c.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| einval("cursor", "not a cursor this server issued", c))
}

pub(super) const CAPS_PARAMS: &[ParamSpec] = &[];

/// `GET /fs/capabilities`: what this tree server offers.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct FsCapabilities {
    /// Protocol version (`engram-fs-1`).
    pub version: &'static str,
    /// The top-level directories.
    pub roots: Vec<FsRoot>,
    /// Verbs by kind.
    pub verbs: FsVerbs,
    /// Defaults and bounds.
    pub limits: FsLimits,
    /// Directories and files to start from.
    pub entry_points: Vec<&'static str>,
    /// Path patterns `write` takes.
    pub writable: Vec<&'static str>,
    /// Optional features and whether this server has them.
    pub features: FsFeatures,
}

/// A top-level directory.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct FsRoot {
    /// Name.
    pub name: &'static str,
    /// Path.
    pub path: &'static str,
}

/// The verbs of the tree API.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct FsVerbs {
    /// Reading verbs.
    pub read: Vec<&'static str>,
    /// Writing verbs.
    pub write: Vec<&'static str>,
    /// Verbs of the interface not offered yet.
    pub deferred: Vec<&'static str>,
}

/// Defaults and bounds of the tree API.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct FsLimits {
    /// `ls` page size by default.
    pub default_limit: usize,
    /// Largest page.
    pub max_limit: usize,
    /// `find` and `grep` page size by default.
    pub default_search_limit: usize,
    /// `recall` hits by default.
    pub default_recall_k: usize,
    /// `cat` window in lines by default.
    pub default_line_window: usize,
    /// Longest `grep` pattern in bytes.
    pub max_pattern_bytes: usize,
}

/// Optional features.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct FsFeatures {
    /// `grep` with `regex=true`.
    pub grep_regex: bool,
    /// `recall`.
    pub recall: bool,
    /// `find`.
    pub find: bool,
    /// `write` and `delete`.
    pub write: bool,
    /// Fragments of files.
    pub fragments: bool,
    /// Mounts.
    pub mount: bool,
}

/// `GET /fs/capabilities` as a typed call.
pub(crate) fn capabilities() -> FsCapabilities {
    FsCapabilities {
        version: "engram-fs-1",
        roots: ROOTS.iter().map(|(name, path)| FsRoot { name, path }).collect(),
        verbs: FsVerbs {
            read: vec!["ls", "cat", "stat", "find", "grep", "recall"],
            write: vec!["write", "delete"],
            deferred: vec!["mount", "fragments", "sql", "cypher", "replay", "tail", "raw"],
        },
        limits: FsLimits {
            default_limit: DEFAULT_LIMIT,
            max_limit: MAX_LIMIT,
            default_search_limit: DEFAULT_SEARCH_LIMIT,
            default_recall_k: DEFAULT_RECALL_K,
            default_line_window: DEFAULT_LINE_WINDOW,
            max_pattern_bytes: crate::fs::MAX_PATTERN,
        },
        entry_points: vec![
            "/memories/by-id",
            "/memories/by-label",
            "/threads",
            "/sources",
            "/wiki/entities",
            "/working-memory/today.md",
        ],
        writable: vec!["/memories/by-id/<id>.memory.md", "/working-memory/today.md"],
        features: FsFeatures {
            grep_regex: true,
            recall: true,
            find: true,
            write: true,
            fragments: false,
            mount: false,
        },
    }
}

/// `GET /fs/ls`: one page of a directory.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct FsListing {
    /// The directory.
    pub path: String,
    /// Entries of the page.
    pub entries: Vec<crate::fs::Entry>,
    /// Entries in the directory.
    pub total: usize,
    /// Cursor of the next page; null on the last.
    pub next_cursor: Option<String>,
    /// Same as `next_cursor` (the interface's camel-case alias).
    #[serde(rename = "nextCursor")]
    pub next_cursor_alias: Option<String>,
}

/// `GET /fs/find`: one page of hits.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct FsFindResponse {
    /// Where it looked.
    pub path: String,
    /// Hits of the page.
    pub hits: Vec<crate::fs::Hit>,
    /// Same as `hits` (the interface's alias).
    pub paths: Vec<crate::fs::Hit>,
    /// Hits in all.
    pub total: usize,
    /// Cursor of the next page; null on the last.
    pub next_cursor: Option<String>,
}

/// `GET /fs/grep`: one page of matching lines.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct FsGrepResponse {
    /// The scope.
    pub path: String,
    /// The pattern.
    pub q: String,
    /// Matching lines of the page.
    pub matches: Vec<crate::fs::GrepMatch>,
    /// Cursor of the next page; null on the last.
    pub next_cursor: Option<String>,
}

/// `GET /fs/recall`: hybrid-search hits in a directory.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct FsRecallResponse {
    /// The scope.
    pub path: String,
    /// The query.
    pub query: String,
    /// Hits, best first.
    pub hits: Vec<crate::fs::RecallHit>,
    /// Same as `hits` (the interface's alias).
    pub paths: Vec<crate::fs::RecallHit>,
}

/// `POST /fs/delete`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct FsDeleteResponse {
    /// The path deleted.
    pub path: String,
    /// Always true.
    pub deleted: bool,
    /// The memory deleted.
    pub id: String,
}

pub(super) const LS_PARAMS: &[ParamSpec] = &[
    string("path", Some("/"), "directory"),
    int("limit", 1, Some(MAX_LIMIT as i64), Some(DEFAULT_LIMIT as i64), "entries per page"),
    string("cursor", None, "opaque cursor from the previous page"),
    string("space_id", Some(DEFAULT_SPACE), "space"),
];

/// `GET /fs/ls` as a typed call over its parsed parameters ([`LS_PARAMS`]).
///
/// # Errors
/// `EINVAL` 422 for a bad path or cursor, `ENOENT` 404 for a missing directory.
pub(crate) fn ls(api: &Api, q: &Query) -> Result<FsListing> {
    let path = q.str("path").unwrap_or("/");
    let offset = decode_cursor(q.str("cursor"))?;
    let page = crate::fs::ls(api.store(), &space_of(q), path, offset, q.limit())?;
    let next = offset + page.entries.len();
    let next_cursor = (next < page.total).then(|| encode_cursor(next));
    Ok(FsListing {
        path: path.to_string(),
        entries: page.entries,
        total: page.total,
        next_cursor_alias: next_cursor.clone(),
        next_cursor,
    })
}

pub(super) const CAT_PARAMS: &[ParamSpec] = &[
    required("path", "file"),
    int("line", 1, None, None, "first line of the window (1-based, in the body)"),
    int("lines", 1, Some(100_000), None, "lines in the window"),
    string("fragment", None, "planned (ENOTSUP)"),
    boolean("raw", None, "planned (ENOTSUP)"),
    string("space_id", Some(DEFAULT_SPACE), "space"),
];

/// `GET /fs/cat` as a typed call over its parsed parameters ([`CAT_PARAMS`]).
///
/// # Errors
/// `ENOTSUP` 501 for `fragment` or `raw`, `EINVAL` 422 for a bad path, `ENOENT` 404 for a missing file.
pub(crate) fn cat(api: &Api, q: &Query) -> Result<crate::fs::FileContent> {
    if q.str("fragment").is_some_and(|f| !f.is_empty()) {
        return Err(enotsup("fragment"));
    }
    if q.bool("raw") == Some(true) {
        return Err(enotsup("raw"));
    }
    let path = q.str("path").unwrap_or("");
    let window = match (q.int("line"), q.int("lines")) {
        (None, None) => None,
        (line, lines) => Some((line.unwrap_or(1).max(1) as usize, lines.map_or(DEFAULT_LINE_WINDOW, |v| v as usize))),
    };
    crate::fs::cat(api.store(), &space_of(q), path, window)
}

pub(super) const STAT_PARAMS: &[ParamSpec] =
    &[required("path", "file or directory"), string("space_id", Some(DEFAULT_SPACE), "space")];

/// `GET /fs/stat` as a typed call over its parsed parameters ([`STAT_PARAMS`]).
///
/// # Errors
/// `EINVAL` 422 for a bad path, `ENOENT` 404 for a missing node.
pub(crate) fn stat(api: &Api, q: &Query) -> Result<crate::fs::Stat> {
    crate::fs::stat(api.store(), &space_of(q), q.str("path").unwrap_or(""))
}

pub(super) const FIND_PARAMS: &[ParamSpec] = &[
    string("path", Some("/memories"), "where to look"),
    string("type", None, "memory (default under /memories), thread, source or entity"),
    string("unit_type", None, "memories of this unit type"),
    string("label", None, "memories carrying this label"),
    string("since", None, "recorded at or after (date or date-time)"),
    string("until", None, "recorded at or before (date or date-time)"),
    string("mentions", None, "memories mentioning this entity (name or id)"),
    int("limit", 1, Some(MAX_LIMIT as i64), Some(DEFAULT_SEARCH_LIMIT as i64), "hits per page"),
    string("cursor", None, "opaque cursor from the previous page"),
    string("space_id", Some(DEFAULT_SPACE), "space"),
];

/// `GET /fs/find` as a typed call over its parsed parameters ([`FIND_PARAMS`]).
///
/// # Errors
/// `EINVAL` 422 for a bad path, cursor, type or date.
pub(crate) fn find(api: &Api, q: &Query) -> Result<FsFindResponse> {
    let path = q.str("path").unwrap_or("/memories");
    let space = space_of(q);
    let offset = decode_cursor(q.str("cursor"))?;
    let args = crate::fs::FindArgs {
        space: &space,
        path,
        kind: q.str("type"),
        unit_type: q.str("unit_type"),
        label: q.str("label"),
        since: q.str("since"),
        until: q.str("until"),
        mentions: q.str("mentions"),
        offset,
        limit: q.limit(),
    };
    let page = crate::fs::find(api.store(), &args)?;
    let next = offset + page.hits.len();
    let next_cursor = (next < page.total).then(|| encode_cursor(next));
    Ok(FsFindResponse {
        path: path.to_string(),
        paths: page.hits.clone(),
        hits: page.hits,
        total: page.total,
        next_cursor,
    })
}

pub(super) const GREP_PARAMS: &[ParamSpec] = &[
    string("path", Some("/memories"), "scope: /, /memories, /memories/by-label/<label>, /threads, /sources"),
    required("q", "literal text, or a regular expression with regex=true"),
    boolean("regex", Some(false), "treat q as a regular expression (Rust regex syntax; linear time)"),
    boolean("case_sensitive", Some(false), "match case"),
    boolean("ignore_case", None, "the opposite of case_sensitive (wins when both are given)"),
    string("unit_type", None, "only memories of this unit type"),
    int("limit", 1, Some(MAX_LIMIT as i64), Some(DEFAULT_SEARCH_LIMIT as i64), "matches per page"),
    string("cursor", None, "opaque cursor from the previous page"),
    string("space_id", Some(DEFAULT_SPACE), "space"),
];

/// `GET /fs/grep` as a typed call over its parsed parameters ([`GREP_PARAMS`]).
///
/// # Errors
/// `EINVAL` 422 for a bad path, cursor or pattern (a regular expression that does not compile, or one longer
/// than [`crate::fs::MAX_PATTERN`] bytes).
pub(crate) fn grep(api: &Api, q: &Query) -> Result<FsGrepResponse> {
    let path = q.str("path").unwrap_or("/memories");
    let space = space_of(q);
    let pattern = q.str("q").unwrap_or("");
    let case_sensitive = match q.bool("ignore_case") {
        Some(ic) => !ic,
        None => q.bool("case_sensitive").unwrap_or(false),
    };
    let args = crate::fs::GrepArgs {
        space: &space,
        path,
        pattern,
        regex: q.bool("regex").unwrap_or(false),
        case_sensitive,
        unit_type: q.str("unit_type"),
        offset: decode_cursor(q.str("cursor"))?,
        limit: q.limit(),
    };
    let page = crate::fs::grep(api.store(), &args)?;
    let next_cursor = page.next.map(encode_cursor);
    Ok(FsGrepResponse { path: path.to_string(), q: pattern.to_string(), matches: page.matches, next_cursor })
}

pub(super) const RECALL_PARAMS: &[ParamSpec] = &[
    required("query", "what to recall (hybrid search)"),
    string("path", Some("/memories"), "scope: /memories, /memories/by-label/<label>, /sources"),
    int("k", 1, Some(100), Some(DEFAULT_RECALL_K as i64), "hits"),
    string("unit_type", None, "memories of this unit type"),
    string("space_id", Some(DEFAULT_SPACE), "space"),
];

/// `GET /fs/recall` as a typed call over its parsed parameters ([`RECALL_PARAMS`]).
///
/// # Errors
/// `EINVAL` 422 for a bad path; search errors.
pub(crate) fn recall(api: &Api, q: &Query) -> Result<FsRecallResponse> {
    let path = q.str("path").unwrap_or("/memories");
    let k = q.int("k").map_or(DEFAULT_RECALL_K, |v| v as usize);
    let query = q.str("query").unwrap_or("");
    let hits = crate::fs::recall(api.store(), &space_of(q), path, query, k, q.str("unit_type"))?;
    Ok(FsRecallResponse { path: path.to_string(), query: query.to_string(), paths: hits.clone(), hits })
}

/// Body of `POST /fs/write`.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
pub struct FsWriteRequest {
    /// `/memories/by-id/<id>.memory.md` or `/working-memory/today.md`.
    #[serde(default)]
    pub path: Option<String>,
    /// The new body (the memory's content, or the working memory).
    #[serde(default)]
    pub body: Option<String>,
    /// Memory fields: `title`, `labels` (array of names), `importance` (0..=1), `unit_type`.
    #[serde(default)]
    pub frontmatter: Option<serde_json::Map<String, Value>>,
    /// Optimistic concurrency: the memory's `version` the writer read; a different stored version gives 409.
    #[serde(default)]
    pub record_version: Option<i64>,
    /// Space (default `default`).
    #[serde(default)]
    pub space_id: Option<String>,
}

fn body_space(given: &Option<String>, default_space: &str) -> String {
    given.clone().filter(|s| !s.is_empty()).unwrap_or_else(|| default_space.to_string())
}

/// `POST /fs/write` as a typed call; `default_space` serves when the body names none.
///
/// # Errors
/// `EROFS` 403 on a derived path, `EXDEV` 409 on an alias, `EINVAL` 422 for bad frontmatter, 409 on a stale
/// `record_version`.
pub(crate) fn write(api: &Api, r: FsWriteRequest, default_space: &str) -> Result<crate::fs::WriteReport> {
    let space = body_space(&r.space_id, default_space);
    let args = crate::fs::WriteArgs {
        space: &space,
        path: r.path.as_deref().unwrap_or_default(),
        body: r.body,
        frontmatter: r.frontmatter.unwrap_or_default(),
        record_version: r.record_version,
    };
    crate::fs::write(api.store(), args)
}

/// Body of `POST /fs/delete`.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
pub struct FsDeleteRequest {
    /// `/memories/by-id/<id>.memory.md`.
    #[serde(default)]
    pub path: Option<String>,
    /// Space (default `default`).
    #[serde(default)]
    pub space_id: Option<String>,
}

/// `POST /fs/delete` as a typed call; `default_space` serves when the body names none.
///
/// # Errors
/// `ENOENT` 404 for a missing memory, `EROFS`/`EXDEV` for a path that is not a canonical memory file.
pub(crate) fn delete(api: &Api, r: FsDeleteRequest, default_space: &str) -> Result<FsDeleteResponse> {
    let path = r.path.clone().unwrap_or_default();
    let id = crate::fs::delete(api.store(), &body_space(&r.space_id, default_space), &path)?;
    Ok(FsDeleteResponse { path, deleted: true, id })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    #[test]
    fn paths_parse_to_nodes_and_bad_paths_are_refused() {
        assert_eq!(parse("/").unwrap(), Node::Root);
        assert_eq!(
            parse("/memories/by-id/t1%2Fx#m0.memory.md").unwrap(),
            Node::Memory { id: "t1/x#m0".into(), label: None }
        );
        assert_eq!(
            parse("/memories/by-label/coffee/m1.memory.md").unwrap(),
            Node::Memory { id: "m1".into(), label: Some("coffee".into()) }
        );
        assert_eq!(parse("/wiki/entities/Alice--Smith--ent_1.entity.md").unwrap(), Node::Entity("ent_1".into()));
        assert_eq!(parse("/threads/t1/messages.jsonl").unwrap(), Node::ThreadFile("t1".into(), "messages.jsonl"));
        assert_eq!(parse("/sources/").unwrap(), Node::Sources);
        for bad in ["memories", "/memories/../etc", "/memories//by-id", "/a\u{0}b"] {
            assert_eq!(parse(bad).unwrap_err().kind(), ErrorKind::InvalidInput, "{bad}");
        }
        assert_eq!(parse("/nope").unwrap_err().code(), "ENOENT");
        assert_eq!(parse("/context/x").unwrap_err().code(), "ENOTSUP");
        assert_eq!(segment("a/b%c"), "a%2Fb%25c");
        assert_eq!(unsegment(&segment("a/b%c d")), "a/b%c d");
        assert_eq!(unsegment("100%"), "100%");
    }

    proptest::proptest! {
        /// Names survive the segment codec; a segment never contains `/`; cursors survive theirs.
        #[test]
        fn segments_and_cursors_round_trip(name in "\\PC{0,40}", offset in 0usize..1_000_000_000_000_000) {
            let seg = segment(&name);
            proptest::prop_assert!(!seg.contains('/'));
            proptest::prop_assert_eq!(unsegment(&seg), name);
            proptest::prop_assert_eq!(decode_cursor(Some(&encode_cursor(offset))).ok(), Some(offset));
        }
    }
}
