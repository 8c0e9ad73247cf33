//! Memory and context tools: `read_context_bundle`, `read_working_memory`, `memory_search`, `get_memory_by_id`,
//! `memory_add`, `memory_update`, `memory_delete`, `list_memory_labels` (`mcp.md` §3.2 rows 1-6 and P1).

use serde_json::{Value, json};

use super::{Call, ToolError};
use crate::api::dto::{MemoryOut, SearchRequest};
use crate::api::memories::{CreateMemoryRequest, UpdateMemoryRequest};
use crate::api::{memories, search, working};
use crate::error::{Error, ErrorKind};
use crate::model::Timestamp;
use crate::store::{ListOrder, ListQuery};

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

/// `YYYY-MM-DD HH:MM` of a time (the 0.6.6 result form).
fn short_time(t: &Timestamp) -> String {
    let s = t.to_rfc3339();
    if s.len() >= 16 { format!("{} {}", &s[..10], &s[11..16]) } else { s }
}

/// A typed answer as the JSON object a tool returns.
pub(super) fn to_json(v: &impl serde::Serialize) -> Value {
    serde_json::to_value(v).unwrap_or_default()
}

pub(super) fn read_context_bundle(c: &Call<'_>) -> Out {
    let with_working_memory = c.args.bool("include_working_memory", true)?;
    let mut v = to_json(&working::context_bundle(c.api, &c.space, with_working_memory)?);
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
    let wm = working::working_memory(c.api, &c.space, date.as_deref())?;
    Ok(json!({
        "exists": wm.exists,
        "content": truncate_chars(&wm.content, WORKING_MEMORY_MAX_CHARS, "\n\n... (truncated)"),
        "date": date.unwrap_or(wm.date),
        "space_id": c.space,
        "path": wm.path,
    }))
}

/// The memory object of a search hit or listing row, in the tool result form.
fn hit(m: &MemoryOut, score: f64) -> Value {
    let r = &m.memory;
    json!({
        "memory_id": r.id,
        "id": r.id,
        "content": r.content,
        "title": r.title,
        "importance": r.importance,
        "similarity_score": score,
        "created_at": short_time(&r.created_at),
        "source_thread_id": r.source_thread_id,
        "labels": m.labels,
        "unit_type": r.unit_type,
        "space_id": r.space_id,
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
    let mut r = SearchRequest::default();
    for (key, field) in [
        ("unit_type", &mut r.unit_type),
        ("event_date_from", &mut r.event_date_from),
        ("event_date_to", &mut r.event_date_to),
        ("temporal_context", &mut r.temporal_context),
        ("recorded_date_from", &mut r.recorded_date_from),
        ("recorded_date_to", &mut r.recorded_date_to),
    ] {
        if let Some(v) = a.text(key, 40)? {
            filters.insert(key.into(), v.clone().into());
            *field = Some(v);
        }
    }
    let Some(query) = query else {
        // List mode: the most recent memories (with the label filter), scored 1.0.
        let mut errs = Vec::new();
        let unit_type = crate::api::route::parse_unit(r.unit_type.as_deref(), &["arguments", "unit_type"], &mut errs);
        if !errs.is_empty() {
            return Err(Error::invalid(errs).into());
        }
        let list = ListQuery {
            space_id: c.space.clone(),
            filter: crate::index::catalog::MemoryFilter {
                unit_type,
                label_ids: crate::api::route::label_ids(&labels),
                ..memories::list_filter()
            },
            limit: limit as usize,
            offset: 0,
        };
        let page = memories::list_page(c.api, &list, ListOrder::Recent)?;
        let results: Vec<Value> = page.memories.iter().map(|m| hit(m, 1.0)).collect();
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
    let r = SearchRequest {
        query: query.clone(),
        limit: Some(limit),
        space_id: Some(c.space.clone()),
        mode: Some(if mode == "deep" { "deep" } else { "normal" }.into()),
        filter_labels: (!labels.is_empty()).then(|| labels.clone()),
        include_context: with_context.then_some(true),
        context_window: with_context.then_some(window),
        ..r
    };
    let mut results = Vec::new();
    for r in search::search(c.api, r)?.into_full() {
        let score = r.similarity_score;
        // The threshold drops weak semantic-only hits; a hit that shares a keyword with the query stays
        // (fused scores of exact matches can be low in a large space).
        if score < threshold && r.matched_terms.is_empty() {
            continue;
        }
        let mut h = hit(&r.memory, score);
        if with_context {
            h["context"] = json!(r.context);
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
    let mut v = to_json(&memories::get(c.api, &id, Some(&c.space))?);
    v["memory_id"] = v["id"].clone();
    v["status"] = "success".into();
    Ok(v)
}

fn echo(m: &MemoryOut) -> Value {
    let r = &m.memory;
    json!({
        "id": r.id,
        "content": truncate_chars(&r.content, ECHO_CHARS, "..."),
        "title": r.title,
        "importance": r.importance,
        "created_at": short_time(&r.created_at),
        "labels": m.labels,
        "unit_type": r.unit_type,
        "space_id": r.space_id,
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
    let mut r = CreateMemoryRequest {
        content,
        space_id: Some(c.space.clone()),
        source: Some(app.clone()),
        source_app: Some(app.clone()),
        metadata: Some(metadata),
        title: a.text("title", 200)?,
        importance: Some(a.opt_num("importance", 0.0, 1.0)?.unwrap_or(0.5)),
        labels: a.list("labels")?,
        ..Default::default()
    };
    for (key, field) in [
        ("unit_type", &mut r.unit_type),
        ("event_start", &mut r.event_start),
        ("event_end", &mut r.event_end),
        ("temporal_context", &mut r.temporal_context),
        ("expires_at", &mut r.expires_at),
    ] {
        *field = a.text(key, 40)?;
    }
    let v = memories::create(c.api, r)?;
    let m = &v.memory;
    let mut out = json!({
        "status": "success",
        "memory_id": m.memory.id,
        "memory": echo(m),
        "processing": {
            "entities_extracted": v.extracted_entities.len(),
            "labels_applied": m.labels,
            "source": app,
            "action": v.action,
        },
    });
    if !v.warnings.is_empty() {
        out["warnings"] = json!(v.warnings);
    }
    Ok(out)
}

pub(super) fn memory_update(c: &Call<'_>) -> Out {
    let a = &c.args;
    let id = a.req_str("memory_id")?;
    let mut body = UpdateMemoryRequest::default();
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
        body.title = Some(t);
        fields.push("title");
    }
    if let Some(t) = a.text("content", 32_768)? {
        body.content = Some(t);
        fields.push("content");
    }
    if let Some(x) = a.opt_num("importance", 0.0, 1.0)? {
        body.importance = Some(x);
        fields.push("importance");
    }
    if let Some(l) = a.list("labels")? {
        body.labels = Some(l);
        fields.push("labels");
    }
    if let Some(e) = a.opt_str("expires_at")? {
        // An empty string clears the expiry (null means "not given" to MCP clients).
        body.expires_at = Some(Some(e).filter(|e| !e.trim().is_empty()));
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
    let before = memories::get(c.api, &id, Some(&c.space))?;
    let after = memories::update(c.api, &id, body, Some(&c.space))?;
    let (old, new) = (&before.labels, &after.labels);
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
    let mut results = Vec::new();
    let (mut deleted, mut failed, mut rels) = (0u64, 0u64, 0u64);
    for id in &ids {
        match memories::delete(c.api, id, Some(&c.space)) {
            Ok(v) => {
                deleted += 1;
                let r = v.deleted_relationships;
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
