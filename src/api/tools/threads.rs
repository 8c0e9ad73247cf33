//! Thread tools: `thread_search`, `thread_fetch_messages`, `thread_delete` (`mcp.md` §3.2 rows 7-8 and P1).

use serde_json::{Value, json};

use super::{Call, ToolError};
use crate::api::threads::{ThreadSummary, delete_thread, list_threads, search_threads, thread_messages};
use crate::text;

type Out = Result<Value, ToolError>;

/// Matched messages shown per thread.
const MATCHES_PER_THREAD: usize = 5;
/// Longest message content `thread_fetch_messages` returns, in characters.
const MESSAGE_MAX_CHARS: usize = 4000;
/// Messages read per thread to find the matching ones.
const SCAN_MESSAGES: usize = 1000;

/// About 200 characters of `content` around the first query term.
fn snippet(content: &str, terms: &[String]) -> String {
    let lower = content.to_lowercase();
    let at = terms.iter().filter_map(|t| lower.find(t.as_str())).min().unwrap_or(0);
    // Byte offsets of `lower` can differ from `content` for a few scripts; fall back to the start.
    let at = if content.is_char_boundary(at) { at } else { 0 };
    let start = content[..at].char_indices().rev().nth(80).map_or(0, |(i, _)| i);
    let mut out: String = content[start..].chars().take(200).collect();
    if start > 0 {
        out.insert_str(0, "...");
    }
    if content[start..].chars().count() > 200 {
        out.push_str("...");
    }
    out
}

fn summary_row(t: &ThreadSummary) -> Value {
    json!({
        "thread_id": t.thread_id,
        "title": t.title,
        "summary": t.summary,
        "message_count": t.message_count,
        "source": t.source,
        "updated_at": t.updated_at,
    })
}

pub(super) fn thread_search(c: &Call<'_>) -> Out {
    let a = &c.args;
    let query = a.text("query", 500)?;
    let limit = a.int("limit", 1, 50, 10)? as usize;
    let mode = a.choice("mode", &["full", "suggestions"], "full")?;
    let source = a.text("source", 200)?;
    let Some(query) = query else {
        let page = list_threads(c.api, &c.space, source.as_deref(), limit, 0)?;
        let threads: Vec<Value> = page.threads.iter().map(summary_row).collect();
        return Ok(json!({"status": "success", "threads": threads, "total_found": threads.len(), "query": "",
            "mode": "list"}));
    };
    let hits = search_threads(c.api, &query, &c.space, source.as_deref(), limit)?.threads;
    let terms: Vec<String> = text::terms(&query);
    let best = hits.iter().map(|t| t.total_matches as f64).fold(1.0f64, f64::max);
    let mut threads = Vec::with_capacity(hits.len());
    for t in &hits {
        let mut row = summary_row(&t.summary);
        let total = t.total_matches;
        row["total_matches"] = total.into();
        row["relevance_score"] = (total as f64 / best).into();
        if mode == "full" {
            let page = thread_messages(c.api, &t.summary.thread_id, Some(&c.space), SCAN_MESSAGES, 0)?;
            let mut matched = Vec::new();
            for m in &page.messages {
                let content = m.content.as_str();
                let have: std::collections::HashSet<String> = text::terms(content).into_iter().collect();
                let hit = terms.iter().filter(|t| have.contains(*t)).count();
                if hit == terms.len() && hit > 0 {
                    matched.push(json!({
                        "message_id": m.id,
                        "message_index": m.order_index,
                        "role": m.role,
                        "snippet": snippet(content, &terms),
                        "match_score": 1.0,
                    }));
                    if matched.len() == MATCHES_PER_THREAD {
                        break;
                    }
                }
            }
            row["matched_messages"] = matched.into();
        }
        threads.push(row);
    }
    Ok(json!({"status": "success", "threads": threads, "total_found": threads.len(), "query": query, "mode": mode}))
}

pub(super) fn thread_fetch_messages(c: &Call<'_>) -> Out {
    let a = &c.args;
    let id = a.req_str("thread_id")?;
    let offset = a.int("offset", 0, i64::MAX, 0)?;
    let limit = a.int("limit", 1, 100, 50)?;
    let v = match thread_messages(c.api, &id, Some(&c.space), limit as usize, offset as u64) {
        Ok(v) => v,
        Err(e) if e.kind() == crate::error::ErrorKind::NotFound => {
            return Ok(json!({"status": "error", "error": format!("Thread not found: {id}"), "thread_id": id}));
        }
        Err(e) => return Err(e.into()),
    };
    let t = &v.thread;
    let messages: Vec<Value> = v
        .messages
        .iter()
        .map(|m| {
            let content = match m.content.char_indices().nth(MESSAGE_MAX_CHARS) {
                None => m.content.clone(),
                Some((i, _)) => format!("{}\n\n[... truncated, message too long ...]", &m.content[..i]),
            };
            json!({"id": m.id, "role": m.role, "content": content, "order_index": m.order_index,
                "timestamp": m.timestamp})
        })
        .collect();
    Ok(json!({
        "status": "success",
        "thread_id": id,
        "title": t.title,
        "summary": t.summary,
        "source": t.source,
        "message_count": v.total_messages,
        "offset": offset,
        "has_more": v.has_more,
        "messages": messages,
    }))
}

pub(super) fn thread_delete(c: &Call<'_>) -> Out {
    let id = c.args.req_str("thread_id")?;
    let cascade = c.args.bool("cascade_delete_memories", false)?;
    let mut v = super::memory::to_json(&delete_thread(c.api, &id, Some(&c.space), cascade)?);
    v["status"] = "success".into();
    Ok(v)
}
