//! `grep`: literal or regular-expression search over memory contents, thread messages (one per line of
//! `messages.jsonl`) and source texts, with line numbers, in a stable order.

use serde::Serialize;

use super::path::*;
use crate::error::Result;
use crate::model::UnitType;
use crate::store::KnowledgeStore;

/// Longest pattern, in bytes.
pub const MAX_PATTERN: usize = 1000;

/// One grep.
#[derive(Debug, Clone)]
pub struct GrepArgs<'a> {
    /// Space searched.
    pub space: &'a str,
    /// Scope: `/`, `/memories`, `/memories/by-id`, `/memories/by-label/<label>`, `/threads` or `/sources`.
    pub path: &'a str,
    /// Literal text, or a regular expression when `regex` (1..=[`MAX_PATTERN`] bytes).
    pub pattern: &'a str,
    /// Treat `pattern` as a regular expression (Rust regex syntax; linear time, 1 MiB compiled at most).
    pub regex: bool,
    /// Match case.
    pub case_sensitive: bool,
    /// Only memories of this unit type (the name, as in the API).
    pub unit_type: Option<&'a str>,
    /// Matches skipped (the page start).
    pub offset: usize,
    /// Matches on the page (1..).
    pub limit: usize,
}

/// A matching line.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct GrepMatch {
    /// The file.
    pub path: String,
    /// Line number, 1-based.
    pub line: usize,
    /// The line, at most 400 characters.
    #[serde(rename = "match")]
    pub text: String,
    /// The text the pattern matched.
    pub matched: String,
}

/// A page of matches.
#[derive(Debug, Clone, PartialEq)]
pub struct GrepPage {
    /// The matches, in order: memories (file order), then thread messages, then sources.
    pub matches: Vec<GrepMatch>,
    /// Offset of the next page, when more matches exist.
    pub next: Option<usize>,
}

/// Runs a grep.
///
/// # Errors
/// `EINVAL` (422) for an empty or over-long pattern, an invalid regular expression, a path grep does not
/// search, or an unknown unit type; `ENOENT` or `ENOTSUP` for a path outside the tree; `space_not_found`.
pub fn grep(store: &KnowledgeStore, a: &GrepArgs<'_>) -> Result<GrepPage> {
    let (path, space, pattern, offset, limit) = (a.path, a.space, a.pattern, a.offset, a.limit);
    let node = parse(path)?;
    store.spaces().require(space)?;
    if pattern.is_empty() || pattern.len() > MAX_PATTERN {
        return Err(einval("q", format!("1 to {MAX_PATTERN} bytes"), pattern));
    }
    let source = if a.regex { pattern.to_string() } else { regex::escape(pattern) };
    let re = regex::RegexBuilder::new(&source)
        .case_insensitive(!a.case_sensitive)
        .size_limit(1 << 20)
        .dfa_size_limit(4 << 20)
        .build()
        .map_err(|e| einval("q", format!("not a valid regular expression: {e}"), pattern))?;
    let (memories, threads, sources, label) = match &node {
        Node::Root => (true, true, true, None),
        Node::Memories | Node::ById => (true, false, false, None),
        Node::LabelDir(l) => (true, false, false, Some(crate::model::Label::id_for(l))),
        Node::Threads => (false, true, false, None),
        Node::Sources => (false, false, true, None),
        _ => {
            return Err(einval(
                "path",
                "grep searches /, /memories, /memories/by-label/<label>, /threads or /sources",
                path,
            ));
        }
    };
    // Matches in a stable order; the page is [offset, offset + limit); one more tells whether more exist.
    let want = offset.saturating_add(limit).saturating_add(1);
    let mut out: Vec<GrepMatch> = Vec::new();
    let push_lines = |p: &str, text: &str, out: &mut Vec<GrepMatch>| {
        if !re.is_match(text) {
            return;
        }
        for (i, line) in text.lines().enumerate() {
            if out.len() >= want {
                return;
            }
            if let Some(m) = re.find(line) {
                let shown: String = line.chars().take(400).collect();
                out.push(GrepMatch { path: p.to_string(), line: i + 1, text: shown, matched: m.as_str().to_string() });
            }
        }
    };
    if memories {
        let labelled: Option<std::collections::HashSet<String>> = match &label {
            Some(l) => Some(store.labels().memory_ids(space, l)?.into_iter().collect()),
            None => None,
        };
        let unit: Option<UnitType> = match a.unit_type.filter(|u| !u.is_empty()) {
            Some(u) => Some(unit_type_param(u)?),
            None => None,
        };
        store.memories().scan(space, |m| {
            if labelled.as_ref().is_none_or(|s| s.contains(&m.id)) && unit.is_none_or(|u| m.unit_type == u) {
                push_lines(&memory_path(&m.id), &m.content, &mut out);
            }
            out.len() < want
        })?;
    }
    if threads && out.len() < want {
        let mut line_of: std::collections::HashMap<String, usize> = Default::default();
        store.threads().scan_messages(space, |t, m| {
            // messages.jsonl has one message per line.
            let n = line_of.entry(t.to_string()).or_insert(0);
            *n += 1;
            if re.is_match(&m.content) && out.len() < want {
                let found = re.find(&m.content).map(|x| x.as_str().to_string()).unwrap_or_default();
                let shown: String = m.content.chars().take(400).collect();
                out.push(GrepMatch {
                    path: format!("/threads/{}/messages.jsonl", segment(t)),
                    line: *n,
                    text: shown,
                    matched: found,
                });
            }
            out.len() < want
        })?;
    }
    if sources && out.len() < want {
        for s in store.sources().all(space)? {
            let text = store.sources().text(&s.id)?;
            push_lines(&format!("/sources/{}", segment(&s.original_name)), &text, &mut out);
            if out.len() >= want {
                break;
            }
        }
    }
    let more = out.len() > offset + limit;
    let matches: Vec<GrepMatch> = out.into_iter().skip(offset).take(limit).collect();
    let next = more.then_some(offset + matches.len());
    Ok(GrepPage { matches, next })
}
