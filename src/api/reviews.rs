//! Timeline reviews over REST (`GET /agent/feed/events`, `POST /agent/feed/events/{event_id}/review`, what
//! nmem 0.10 calls) and for the agent tools (`list_timeline_reviews`, `resolve_timeline_review`). Detection
//! is the store's (`store/reviews.rs`); resolving makes the memory changes an action implies, then records it.
//!
//! Actions: `keep_newer_as_latest` supersedes the older memory by the newer; `keep_older_as_latest`
//! supersedes the newer by the older; `keep_both_linked` relates them (`updates` or `contradicts`, newer to
//! older); `no_change_needed`, `dismiss` and `custom_note_only` change no memory. A `preview` phase answers
//! the plan and its `plan_id` and changes nothing; `apply` makes it (a given `plan_id` must match).

use serde::Deserialize;
use serde_json::{Value, json};

use super::query::{ParamSpec, boolean, int, string};
use super::routes::{Shape, route};
use super::{Api, ApiResponse, Ctx};
use crate::error::ErrorCode;
use crate::error::{Error, Result};
use crate::model::Timestamp;
use crate::store::{DEFAULT_SPACE, REVIEW_ACTIONS, RelationInput, Resolution, ReviewEvent, Transition};

/// The routes of this module, in table order ([`super::routes::ROUTES`] gathers every module's list).
pub(super) const ROUTES: &[super::routes::Route] = &[
    route!(
        "GET",
        "/agent/feed/events",
        "agent_feed_events",
        "Timeline review events (a new memory that may update or contradict an earlier one), newest first",
        FEED_PARAMS,
        None,
        Shape::Object,
        false,
        list
    ),
    route!(
        "POST",
        "/agent/feed/events/{event_id}/review",
        "agent_feed_event_review",
        "Preview or apply the resolution of a review event",
        REVIEW_PARAMS,
        Some("ReviewRequest"),
        Shape::Object,
        false,
        review
    ),
];

pub(super) const FEED_PARAMS: &[ParamSpec] = &[
    boolean("review_only", Some(true), "only review events (the only kind of feed event today)"),
    boolean("unresolved_only", Some(false), "hide resolved events"),
    int("last_n_days", 1, Some(3650), Some(365), "events raised within this many days"),
    int("limit", 1, Some(200), Some(50), "page size"),
    int("offset", 0, None, Some(0), "events to skip"),
    string("space_id", Some(DEFAULT_SPACE), "space"),
];

pub(super) const REVIEW_PARAMS: &[ParamSpec] = &[string("space_id", None, "space (default `default`)")];

/// Body of `POST /agent/feed/events/{event_id}/review`.
#[derive(Debug, Clone, Deserialize, utoipa::ToSchema)]
pub struct ReviewRequest {
    /// `preview` (default) or `apply`.
    #[serde(default)]
    pub phase: Option<String>,
    /// One of `keep_newer_as_latest`, `keep_older_as_latest`, `keep_both_linked`, `no_change_needed`, `dismiss`,
    /// `custom_note_only`.
    pub action: String,
    /// Optional guard: the event's memory ids.
    #[serde(default)]
    pub memory_ids: Option<Vec<String>>,
    /// A note kept with the resolution (at most 2,000 characters).
    #[serde(default)]
    pub resolution_note: Option<String>,
    /// The `plan_id` of the preview being applied.
    #[serde(default)]
    pub plan_id: Option<String>,
    /// Space (default `default`).
    #[serde(default)]
    pub space_id: Option<String>,
}

fn memory_brief(api: &Api, space: &str, id: &str) -> Value {
    match api.store().read_memory(id, Some(space)) {
        Ok(v) => json!({"id": v.memory.id, "title": v.memory.title, "content": v.memory.content,
            "state": v.memory.state.as_str(), "created_at": v.memory.created_at}),
        Err(_) => json!({"id": id, "missing": true}),
    }
}

/// The feed form of an event.
pub(crate) fn event_json(api: &Api, e: &ReviewEvent) -> Value {
    let older = memory_brief(api, &e.space_id, &e.older_memory_id);
    let newer = memory_brief(api, &e.space_id, &e.newer_memory_id);
    let what = if e.kind == "contradiction" { "may contradict" } else { "may update" };
    json!({
        "event_id": e.id,
        "id": e.id,
        "event_type": "timeline_review",
        "review_kind": e.kind,
        "kind": e.kind,
        "title": format!("A new memory {what} an earlier one ({})", e.signals.join("; ")),
        "space_id": e.space_id,
        "created_at": e.created_at,
        "memory_ids": [e.older_memory_id, e.newer_memory_id],
        "older_memory": older,
        "newer_memory": newer,
        "signals": e.signals,
        "similarity": e.similarity,
        "shared_entities": e.shared_entities,
        "needs_review": e.resolution.is_none(),
        "resolved": e.resolution.is_some(),
        "resolution": e.resolution,
        "actions": REVIEW_ACTIONS,
        "allowed_actions": REVIEW_ACTIONS,
        "person_only": false,
    })
}

/// A page of review events as `{events, total, limit, offset, has_more}`.
pub(crate) fn feed(
    api: &Api,
    space: &str,
    unresolved_only: bool,
    days: i64,
    limit: usize,
    offset: usize,
) -> Result<Value> {
    let since = Timestamp(Timestamp::now().millis() - days * 86_400_000);
    let (events, total) = api.store().list_reviews(space, unresolved_only, Some(since), limit, offset)?;
    let rows: Vec<Value> = events.iter().map(|e| event_json(api, e)).collect();
    Ok(json!({
        "events": rows,
        "total": total,
        "limit": limit,
        "offset": offset,
        "has_more": offset + rows.len() < total,
        "space_id": space,
    }))
}

pub(super) fn list(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let q = &ctx.query;
    let v = feed(
        api,
        q.str("space_id").unwrap_or(DEFAULT_SPACE),
        q.bool("unresolved_only").unwrap_or(false),
        q.int("last_n_days").unwrap_or(365),
        q.int("limit").unwrap_or(50) as usize,
        q.int("offset").unwrap_or(0) as usize,
    )?;
    Ok(ApiResponse::json(200, &v))
}

fn plan_id(e: &ReviewEvent, action: &str) -> String {
    format!("plan_{}_{action}", e.id.trim_start_matches("rev_"))
}

fn effects(e: &ReviewEvent, action: &str) -> Vec<String> {
    let (o, n) = (&e.older_memory_id, &e.newer_memory_id);
    match action {
        "keep_newer_as_latest" => vec![format!("memory {o} becomes superseded by {n}")],
        "keep_older_as_latest" => vec![format!("memory {n} becomes superseded by {o}")],
        "keep_both_linked" => {
            let ty = if e.kind == "contradiction" { "contradicts" } else { "updates" };
            vec![format!("relation {n} -[{ty}]-> {o}")]
        }
        _ => vec!["no memory changes; the event is marked resolved".to_string()],
    }
}

/// Previews or applies the resolution of event `id` in `space`.
///
/// # Errors
/// 422 for an unknown action or phase, a `memory_ids` guard that names other memories, a stale `plan_id`;
/// 404 `review_not_found`; 409 `review_resolved`; the lifecycle and relation errors of the changes.
pub(crate) fn resolve(api: &Api, space: &str, id: &str, r: &ReviewRequest) -> Result<Value> {
    let phase = r.phase.as_deref().unwrap_or("preview");
    if phase != "preview" && phase != "apply" {
        return Err(Error::invalid_field(&["body", "phase"], "enum", "phase is preview or apply", phase.into()));
    }
    if !REVIEW_ACTIONS.contains(&r.action.as_str()) {
        return Err(Error::invalid_field(
            &["body", "action"],
            "enum",
            format!("action is one of {}", REVIEW_ACTIONS.join(", ")),
            r.action.clone().into(),
        ));
    }
    if r.resolution_note.as_ref().is_some_and(|n| n.chars().count() > 2000) {
        return Err(Error::invalid_field(
            &["body", "resolution_note"],
            "string_too_long",
            "at most 2000 characters",
            Value::Null,
        ));
    }
    let e = api.store().get_review(space, id)?;
    if let Some(ids) = &r.memory_ids
        && ids.iter().any(|m| m != &e.older_memory_id && m != &e.newer_memory_id)
    {
        return Err(Error::invalid_field(
            &["body", "memory_ids"],
            "value_error",
            "memory_ids must be the event's memories",
            json!(ids),
        ));
    }
    let plan = plan_id(&e, &r.action);
    let fx = effects(&e, &r.action);
    if phase == "preview" {
        return Ok(json!({"status": "preview", "phase": "preview", "event_id": id, "action": r.action,
            "plan_id": plan, "effects": fx, "event": event_json(api, &e)}));
    }
    if r.plan_id.as_ref().is_some_and(|p| p != &plan) {
        return Err(Error::invalid_field(
            &["body", "plan_id"],
            "value_error",
            "plan_id does not match this event and action; preview again",
            r.plan_id.clone().into(),
        ));
    }
    if e.resolution.is_some() {
        return Err(crate::error::Error::new(
            crate::error::ErrorKind::Conflict,
            format!("review event '{id}' is resolved already"),
        )
        .with_code(ErrorCode::ReviewResolved));
    }
    let store = api.store();
    let note = r.resolution_note.clone().unwrap_or_default();
    let reason = Some(format!("timeline review {id}: {}", r.action));
    match r.action.as_str() {
        "keep_newer_as_latest" => {
            store.change_state(
                &e.older_memory_id,
                Some(space),
                Transition::Supersede { newer: e.newer_memory_id.clone() },
                reason,
            )?;
        }
        "keep_older_as_latest" => {
            store.change_state(
                &e.newer_memory_id,
                Some(space),
                Transition::Supersede { newer: e.older_memory_id.clone() },
                reason,
            )?;
        }
        "keep_both_linked" => {
            let ty = if e.kind == "contradiction" { "contradicts" } else { "updates" };
            store.create_relation(
                &e.newer_memory_id,
                RelationInput {
                    target_memory_id: e.older_memory_id.clone(),
                    relation_type: Some(ty.into()),
                    reason: Some(if note.is_empty() { e.signals.join("; ") } else { note.clone() }),
                    source: Some("timeline_review".into()),
                    ..Default::default()
                },
                Some(space),
            )?;
        }
        _ => {}
    }
    let done = store.record_review_resolution(
        space,
        id,
        Resolution { action: r.action.clone(), note, resolved_at: Timestamp::now(), effects: fx.clone() },
    )?;
    Ok(json!({"status": "success", "phase": "apply", "event_id": id, "action": r.action, "plan_id": plan,
        "effects": fx, "event": event_json(api, &done)}))
}

pub(super) fn review(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let r: ReviewRequest = ctx.json()?;
    let space = r.space_id.clone().or_else(|| ctx.query.str("space_id").map(str::to_string));
    let space = space.unwrap_or_else(|| DEFAULT_SPACE.to_string());
    Ok(ApiResponse::json(200, &resolve(api, &space, ctx.param("event_id"), &r)?))
}
