//! Memory and context tools: `read_context_bundle`, `read_working_memory`, `memory_search`, `get_memory_by_id`,
//! `memory_add`, `memory_update`, `memory_delete`, `list_memory_labels` (`mcp.md` §3.2 rows 1-6 and P1).

use serde_json::{Value, json};

use super::{Call, ToolError, path_of};
use crate::error::{Error, ErrorKind};

type Out = Result<Value, ToolError>;

/// Longest working-memory text a tool returns, in characters (then `\n\n... (truncated)`).
const WORKING_MEMORY_MAX_CHARS: usize = 6000;
/// Memory content echoed by `memory_add`/`memory_update`, in characters (then `...`).
const ECHO_CHARS: usize = 500;

fn truncate_chars(s: &str, max: usize, tail: &str) -> String {
    match s.char_indices().nth(max) {
        None => s.to_string(),
        Some((i, _)) => format!("{}{tail}", &s[..i]),
    }
}

/// `YYYY-MM-DD HH:MM` of an RFC 3339 time (the 0.6.6 result form).
fn short_time(v: &Value) -> String {
    let s = v.as_str().unwrap_or("");
    if s.len() >= 16 { format!("{} {}", &s[..10], &s[11..16]) } else { s.to_string() }
}

pub(super) fn read_context_bundle(c: &Call<'_>) -> Out {
    let mut q = vec![("space_id", c.space.clone())];
    q.push(("include_working_memory", c.args.bool("include_working_memory", true)?.to_string()));
    q.push(("source_app", c.app()));
    let mut v = c.api.invoke("GET", "/context/bundle", &q, None)?;
    v["authorship"] = json!({"agent_id": c.agent_id(), "host_agent_id": c.host_agent_id(), "source_app": c.app()});
    v["active_space"] = json!({"primary_space_id": c.space});
    v["content"] = v["rendered_markdown"].clone();
    v["status"] = "success".into();
    Ok(v)
}

pub(super) fn read_working_memory(c: &Call<'_>) -> Out {
    let date = c.args.text("date", 10)?;
    if let Some(d) = &date
        && time::Date::parse(d, time::macros::format_description!("[year]-[month]-[day]")).is_err()
    {
        return Err(Error::invalid_field(
            &["arguments", "date"],
            "date_from_datetime_parsing",
            "date must be YYYY-MM-DD",
            d.clone().into(),
        )
        .into());
    }
    let wm = crate::api::working::working_memory(c.api, &c.space, date.as_deref())?;
    Ok(json!({
        "exists": wm.exists,
        "content": truncate_chars(&wm.content, WORKING_MEMORY_MAX_CHARS, "\n\n... (truncated)"),
        "date": date.unwrap_or(wm.date),
        "space_id": c.space,
        "path": wm.path,
    }))
}

/// The memory object of a search hit or listing row, in the tool result form.
fn hit(m: &Value, score: f64) -> Value {
    json!({
        "memory_id": m["id"],
        "id": m["id"],
        "content": m["content"],
        "title": m["title"],
        "importance": m["importance"],
        "similarity_score": score,
        "created_at": short_time(&m["created_at"]),
        "source_thread_id": m["source_thread_id"],
        "labels": m["labels"],
        "unit_type": m["unit_type"],
        "space_id": m["space_id"],
    })
}

pub(super) fn memory_search(c: &Call<'_>) -> Out {
    let a = &c.args;
    let query = a.text("query", 500)?;
    let limit = a.int("limit", 1, 20, 10)?;
    let labels = a.list("filter_labels")?.unwrap_or_default();
    let mode = a.choice("mode", &["normal", "deep", "fast"], "normal")?;
    let threshold = a.opt_num("confidence_threshold", 0.0, 1.0)?.unwrap_or(0.2);
    let with_context = a.bool("include_context", false)?;
    let window = a.int("context_window", 1, 10, 1)?;
    let mut filters = serde_json::Map::new();
    for key in
        ["unit_type", "event_date_from", "event_date_to", "temporal_context", "recorded_date_from", "recorded_date_to"]
    {
        if let Some(v) = a.text(key, 40)? {
            filters.insert(key.into(), v.into());
        }
    }
    let Some(query) = query else {
        // List mode: the most recent memories (with the label filter), scored 1.0.
        let mut q = vec![("space_id", c.space.clone()), ("limit", limit.to_string())];
        for l in &labels {
            q.push(("labels", l.clone()));
        }
        if let Some(u) = filters.get("unit_type").and_then(Value::as_str) {
            q.push(("unit_type", u.to_string()));
        }
        let v = c.api.invoke("GET", "/memories", &q, None)?;
        let results: Vec<Value> =
            v["memories"].as_array().map(|a| a.iter().map(|m| hit(m, 1.0)).collect()).unwrap_or_default();
        let mut applied = filters.clone();
        applied.insert("mode".into(), "list".into());
        return Ok(json!({
            "status": "success",
            "results": results,
            "query": "",
            "total_found": results.len(),
            "filter_labels": labels,
            "filters_applied": applied,
        }));
    };
    let mut body = json!({
        "query": query,
        "limit": limit,
        "space_id": c.space,
        "mode": if mode == "deep" { "deep" } else { "normal" },
    });
    if !labels.is_empty() {
        body["filter_labels"] = json!(labels);
    }
    if with_context {
        body["include_context"] = true.into();
        body["context_window"] = window.into();
    }
    for (k, v) in &filters {
        body[k.as_str()] = v.clone();
    }
    let v = c.api.invoke("POST", "/memories/search", &[], Some(&body))?;
    let mut results = Vec::new();
    for r in v.as_array().into_iter().flatten() {
        let score = r["similarity_score"].as_f64().unwrap_or(0.0);
        // The threshold drops weak semantic-only hits; a hit that shares a keyword with the query stays
        // (fused scores of exact matches can be low in a large space).
        let keyword = r["matched_terms"].as_array().is_some_and(|t| !t.is_empty());
        if score < threshold && !keyword {
            continue;
        }
        let mut h = hit(&r["memory"], score);
        if with_context {
            h["context"] = r["context"].clone();
        }
        results.push(h);
    }
    let mut applied = filters;
    applied.insert("mode".into(), mode.into());
    applied.insert("confidence_threshold".into(), threshold.into());
    Ok(json!({
        "status": "success",
        "results": results,
        "query": query,
        "total_found": results.len(),
        "filter_labels": labels,
        "filters_applied": applied,
    }))
}

pub(super) fn get_memory_by_id(c: &Call<'_>) -> Out {
    let id = c.args.req_str("memory_id")?;
    let mut v = c.api.invoke("GET", &path_of(&["memories", &id]), &[("space_id", c.space.clone())], None)?;
    v["memory_id"] = v["id"].clone();
    v["status"] = "success".into();
    Ok(v)
}

fn echo(m: &Value) -> Value {
    json!({
        "id": m["id"],
        "content": truncate_chars(m["content"].as_str().unwrap_or(""), ECHO_CHARS, "..."),
        "title": m["title"],
        "importance": m["importance"],
        "created_at": short_time(&m["created_at"]),
        "labels": m["labels"],
        "unit_type": m["unit_type"],
        "space_id": m["space_id"],
    })
}

pub(super) fn memory_add(c: &Call<'_>) -> Out {
    let a = &c.args;
    let content = a.req_str("content")?;
    let app = c.app();
    let mut metadata = serde_json::Map::new();
    metadata.insert("source_detected".into(), app.clone().into());
    if let Some(x) = c.agent_id() {
        metadata.insert("agent_id".into(), x.into());
    }
    if let Some(x) = c.host_agent_id() {
        metadata.insert("host_agent_id".into(), x.into());
    }
    let mut body = json!({
        "content": content,
        "space_id": c.space,
        "source": app,
        "source_app": app,
        "metadata": metadata,
    });
    if let Some(t) = a.text("title", 200)? {
        body["title"] = t.into();
    }
    body["importance"] = a.opt_num("importance", 0.0, 1.0)?.unwrap_or(0.5).into();
    if let Some(l) = a.list("labels")? {
        body["labels"] = json!(l);
    }
    for key in ["unit_type", "event_start", "event_end", "temporal_context", "expires_at"] {
        if let Some(v) = a.text(key, 40)? {
            body[key] = v.into();
        }
    }
    let v = c.api.invoke("POST", "/memories", &[], Some(&body))?;
    let m = &v["memory"];
    let mut out = json!({
        "status": "success",
        "memory_id": m["id"],
        "memory": echo(m),
        "processing": {
            "entities_extracted": v["extracted_entities"].as_array().map_or(0, Vec::len),
            "labels_applied": m["labels"],
            "source": app,
            "action": v["action"],
        },
    });
    if let Some(w) = v["warnings"].as_array().filter(|w| !w.is_empty()) {
        out["warnings"] = json!(w);
    }
    if let Some(r) = v.get("review_event_id").filter(|r| !r.is_null()) {
        out["timeline_review_event_id"] = r.clone();
    }
    Ok(out)
}

pub(super) fn memory_update(c: &Call<'_>) -> Out {
    let a = &c.args;
    let id = a.req_str("memory_id")?;
    let mut body = json!({});
    let mut fields = Vec::new();
    if let Some(t) = a.opt_str("title")? {
        if t.chars().count() > 200 {
            return Err(Error::invalid_field(
                &["arguments", "title"],
                "string_too_long",
                "String should have at most 200 characters",
                t.into(),
            )
            .into());
        }
        body["title"] = t.into();
        fields.push("title");
    }
    if let Some(t) = a.text("content", 32_768)? {
        body["content"] = t.into();
        fields.push("content");
    }
    if let Some(x) = a.opt_num("importance", 0.0, 1.0)? {
        body["importance"] = x.into();
        fields.push("importance");
    }
    let new_labels = a.list("labels")?;
    if let Some(l) = &new_labels {
        body["labels"] = json!(l);
        fields.push("labels");
    }
    if let Some(e) = a.opt_str("expires_at")? {
        // An empty string clears the expiry (null means "not given" to MCP clients).
        body["expires_at"] = if e.trim().is_empty() { Value::Null } else { e.into() };
        fields.push("expires_at");
    }
    if fields.is_empty() {
        return Err(Error::invalid_field(
            &["arguments", "memory_id"],
            "missing",
            "give at least one of title, content, importance, labels, expires_at",
            Value::Null,
        )
        .into());
    }
    let path = path_of(&["memories", &id]);
    let guard = [("space_id", c.space.clone())];
    let before = c.api.invoke("GET", &path, &guard, None)?;
    let after = c.api.invoke("PATCH", &path, &guard, Some(&body))?;
    let names = |v: &Value| -> Vec<String> {
        v["labels"]
            .as_array()
            .map(|a| a.iter().filter_map(|x| x.as_str().map(str::to_string)).collect())
            .unwrap_or_default()
    };
    let (old, new) = (names(&before), names(&after));
    let added: Vec<&String> = new.iter().filter(|l| !old.contains(l)).collect();
    let removed: Vec<&String> = old.iter().filter(|l| !new.contains(l)).collect();
    Ok(json!({
        "status": "success",
        "memory_id": id,
        "memory": echo(&after),
        "updates": {"fields_updated": fields, "labels_added": added, "labels_removed": removed},
    }))
}

pub(super) fn memory_delete(c: &Call<'_>) -> Out {
    let a = &c.args;
    let single = a.opt_str("memory_id")?.map(|s| s.trim().to_string()).filter(|s| !s.is_empty());
    let many = a.list("memory_ids")?;
    let bulk = many.is_some();
    let mut ids: Vec<String> = many.unwrap_or_default();
    if let Some(s) = &single {
        ids.insert(0, s.clone());
    }
    let mut seen = std::collections::HashSet::new();
    ids.retain(|i| seen.insert(i.clone()));
    if ids.is_empty() {
        return Ok(json!({"status": "error", "message": "Provide memory_id or memory_ids"}));
    }
    let guard = [("space_id", c.space.clone())];
    let mut results = Vec::new();
    let (mut deleted, mut failed, mut rels) = (0u64, 0u64, 0u64);
    for id in &ids {
        match c.api.invoke("DELETE", &path_of(&["memories", id]), &guard, None) {
            Ok(v) => {
                deleted += 1;
                let r = v["deleted_relationships"].as_u64().unwrap_or(0);
                rels += r;
                results.push(json!({"memory_id": id, "status": "success", "message": "deleted",
                    "deletion": {"deleted_relationships": r, "deleted_entities": 0}}));
            }
            Err(e) => {
                failed += 1;
                let status = if e.kind() == ErrorKind::NotFound { "not_found" } else { "error" };
                results.push(json!({"memory_id": id, "status": status, "message": e.message(), "deletion": null}));
            }
        }
    }
    if !bulk && ids.len() == 1 {
        let r = &results[0];
        return Ok(if deleted == 1 {
            json!({"status": "success", "message": format!("Memory {} deleted", ids[0]), "deletion": r["deletion"]})
        } else {
            json!({"status": "error", "message": r["message"], "deletion": null})
        });
    }
    let status = match (deleted, failed) {
        (_, 0) => "success",
        (0, _) => "error",
        _ => "partial_success",
    };
    Ok(json!({
        "status": status,
        "message": format!("Deleted {deleted} memories, {failed} failed"),
        "summary": {
            "requested_count": ids.len(),
            "processed_count": ids.len(),
            "deleted_count": deleted,
            "failed_count": failed,
            "deleted_relationships": rels,
            "deleted_entities": 0,
        },
        "results": results,
    }))
}

pub(super) fn list_memory_labels(c: &Call<'_>) -> Out {
    let labels: Vec<Value> = c
        .api
        .store()
        .labels()
        .list(&c.space, crate::store::LabelOrder::UsageCount, true, 100, 0)?
        .into_iter()
        .map(|l| json!({"name": l.name, "usage_count": l.usage_count, "id": l.id}))
        .collect();
    Ok(json!({"status": "success", "total": labels.len(), "labels": labels}))
}
