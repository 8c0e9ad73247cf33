//! Thread tools: `thread_search`, `thread_fetch_messages`, `thread_delete` (`mcp.md` §3.2 rows 7-8 and P1).

use serde_json::{Value, json};

use super::{Call, ToolError, path_of};
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

fn summary_row(t: &Value) -> Value {
    json!({
        "thread_id": t["thread_id"],
        "title": t["title"],
        "summary": t.get("summary").cloned().unwrap_or(Value::String(String::new())),
        "message_count": t["message_count"],
        "source": t["source"],
        "updated_at": t["updated_at"],
    })
}

pub(super) fn thread_search(c: &Call<'_>) -> Out {
    let a = &c.args;
    let query = a.text("query", 500)?;
    let limit = a.int("limit", 1, 50, 10)?;
    let mode = a.choice("mode", &["full", "suggestions"], "full")?;
    let source = a.text("source", 200)?;
    let mut q = vec![("space_id", c.space.clone()), ("limit", limit.to_string())];
    if let Some(s) = &source {
        q.push(("source", s.clone()));
    }
    let Some(query) = query else {
        let v = c.api.invoke("GET", "/threads", &q, None)?;
        let threads: Vec<Value> =
            v["threads"].as_array().map(|a| a.iter().map(summary_row).collect()).unwrap_or_default();
        return Ok(json!({"status": "success", "threads": threads, "total_found": threads.len(), "query": "",
            "mode": "list"}));
    };
    q.push(("query", query.clone()));
    let v = c.api.invoke("GET", "/threads/search", &q, None)?;
    let terms: Vec<String> = text::terms(&query);
    let hits = v["threads"].as_array().cloned().unwrap_or_default();
    let best = hits.iter().filter_map(|t| t["total_matches"].as_f64()).fold(1.0f64, f64::max);
    let mut threads = Vec::with_capacity(hits.len());
    for t in &hits {
        let mut row = summary_row(t);
        let total = t["total_matches"].as_u64().unwrap_or(0);
        row["total_matches"] = total.into();
        row["relevance_score"] = (total as f64 / best).into();
        if mode == "full" {
            let id = t["thread_id"].as_str().unwrap_or("");
            let page = c.api.invoke(
                "GET",
                &path_of(&["threads", id]),
                &[("space_id", c.space.clone()), ("limit", SCAN_MESSAGES.to_string())],
                None,
            )?;
            let mut matched = Vec::new();
            for m in page["messages"].as_array().into_iter().flatten() {
                let content = m["content"].as_str().unwrap_or("");
                let have: std::collections::HashSet<String> = text::terms(content).into_iter().collect();
                let hit = terms.iter().filter(|t| have.contains(*t)).count();
                if hit == terms.len() && hit > 0 {
                    matched.push(json!({
                        "message_id": m["id"],
                        "message_index": m["order_index"],
                        "role": m["role"],
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
    let q = [("space_id", c.space.clone()), ("offset", offset.to_string()), ("limit", limit.to_string())];
    let v = match c.api.invoke("GET", &path_of(&["threads", &id]), &q, None) {
        Ok(v) => v,
        Err(e) if e.kind() == crate::error::ErrorKind::NotFound => {
            return Ok(json!({"status": "error", "error": format!("Thread not found: {id}"), "thread_id": id}));
        }
        Err(e) => return Err(e.into()),
    };
    let t = &v["thread"];
    let messages: Vec<Value> = v["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| {
            let content = m["content"].as_str().unwrap_or("");
            let content = match content.char_indices().nth(MESSAGE_MAX_CHARS) {
                None => content.to_string(),
                Some((i, _)) => format!("{}\n\n[... truncated, message too long ...]", &content[..i]),
            };
            json!({"id": m["id"], "role": m["role"], "content": content, "order_index": m["order_index"],
                "timestamp": m["timestamp"]})
        })
        .collect();
    Ok(json!({
        "status": "success",
        "thread_id": id,
        "title": t["title"],
        "summary": t.get("summary").cloned().unwrap_or(Value::String(String::new())),
        "source": t["source"],
        "message_count": v["total_messages"],
        "offset": offset,
        "has_more": v["has_more"],
        "messages": messages,
    }))
}

pub(super) fn thread_delete(c: &Call<'_>) -> Out {
    let id = c.args.req_str("thread_id")?;
    let cascade = c.args.bool("cascade_delete_memories", false)?;
    let q = [("space_id", c.space.clone()), ("cascade_delete_memories", cascade.to_string())];
    let mut v = c.api.invoke("DELETE", &path_of(&["threads", &id]), &q, None)?;
    v["status"] = "success".into();
    Ok(v)
}
