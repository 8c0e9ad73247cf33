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
        Shape::Ref("ReviewFeed"),
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
        Shape::Ref("ReviewOutcome"),
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

/// One of the two memories of a review event; only `id` and `missing` when it is gone.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct MemoryBrief {
    /// The memory.
    pub id: String,
    /// Its title.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Its text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// Its state.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// When it was recorded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created_at: Option<Timestamp>,
    /// True when the memory no longer exists.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub missing: Option<bool>,
}

fn memory_brief(api: &Api, space: &str, id: &str) -> MemoryBrief {
    match api.store().read_memory(id, Some(space)) {
        Ok(v) => MemoryBrief {
            id: v.memory.id,
            title: Some(v.memory.title),
            content: Some(v.memory.content),
            state: Some(v.memory.state.as_str().to_string()),
            created_at: Some(v.memory.created_at),
            missing: None,
        },
        Err(_) => MemoryBrief {
            id: id.to_string(),
            title: None,
            content: None,
            state: None,
            created_at: None,
            missing: Some(true),
        },
    }
}

/// A timeline review event as the feed shows it.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct FeedEvent {
    /// The event.
    pub event_id: String,
    /// The event (same as `event_id`).
    pub id: String,
    /// Always `timeline_review`.
    pub event_type: &'static str,
    /// `update` or `contradiction`.
    pub review_kind: String,
    /// Same as `review_kind`.
    pub kind: String,
    /// One line.
    pub title: String,
    /// The space.
    pub space_id: String,
    /// When it was raised.
    pub created_at: Timestamp,
    /// The older and the newer memory.
    pub memory_ids: Vec<String>,
    /// The older memory.
    pub older_memory: MemoryBrief,
    /// The newer memory.
    pub newer_memory: MemoryBrief,
    /// Why it was raised.
    pub signals: Vec<String>,
    /// Cosine similarity of the two memories (-1..=1).
    pub similarity: f64,
    /// Entities both mention.
    pub shared_entities: Vec<String>,
    /// True until resolved.
    pub needs_review: bool,
    /// True once resolved.
    pub resolved: bool,
    /// The resolution, once resolved.
    pub resolution: Option<Resolution>,
    /// The actions a resolution may take.
    pub actions: Vec<&'static str>,
    /// Same as `actions`.
    pub allowed_actions: Vec<&'static str>,
    /// Always false.
    pub person_only: bool,
}

/// A page of review events (`GET /agent/feed/events`).
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct ReviewFeed {
    /// Events of the page, newest first.
    pub events: Vec<FeedEvent>,
    /// Events passing the filters.
    pub total: u64,
    /// Page size.
    pub limit: u64,
    /// Items skipped.
    pub offset: u64,
    /// Whether events follow this page.
    pub has_more: bool,
    /// The space.
    pub space_id: String,
}

/// What resolving a review event shows (`POST /agent/feed/events/{event_id}/review`).
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct ReviewOutcome {
    /// `preview` or `success`.
    pub status: &'static str,
    /// `preview` or `apply`.
    pub phase: &'static str,
    /// The event.
    pub event_id: String,
    /// The action.
    pub action: String,
    /// The plan to apply (from a preview) or applied.
    pub plan_id: String,
    /// What the action changes.
    pub effects: Vec<String>,
    /// The event (resolved, after an apply).
    pub event: FeedEvent,
}

/// The feed form of an event.
pub(crate) fn event_json(api: &Api, e: &ReviewEvent) -> FeedEvent {
    let older = memory_brief(api, &e.space_id, &e.older_memory_id);
    let newer = memory_brief(api, &e.space_id, &e.newer_memory_id);
    let what = if e.kind == "contradiction" { "may contradict" } else { "may update" };
    FeedEvent {
        event_id: e.id.clone(),
        id: e.id.clone(),
        event_type: "timeline_review",
        review_kind: e.kind.clone(),
        kind: e.kind.clone(),
        title: format!("A new memory {what} an earlier one ({})", e.signals.join("; ")),
        space_id: e.space_id.clone(),
        created_at: e.created_at,
        memory_ids: vec![e.older_memory_id.clone(), e.newer_memory_id.clone()],
        older_memory: older,
        newer_memory: newer,
        signals: e.signals.clone(),
        similarity: e.similarity,
        shared_entities: e.shared_entities.clone(),
        needs_review: e.resolution.is_none(),
        resolved: e.resolution.is_some(),
        resolution: e.resolution.clone(),
        actions: REVIEW_ACTIONS.to_vec(),
        allowed_actions: REVIEW_ACTIONS.to_vec(),
        person_only: false,
    }
}

/// A page of review events as `{events, total, limit, offset, has_more}`.
pub(crate) fn feed(
    api: &Api,
    space: &str,
    unresolved_only: bool,
    days: i64,
    limit: usize,
    offset: usize,
) -> Result<ReviewFeed> {
    let since = Timestamp(Timestamp::now().millis() - days * 86_400_000);
    let (events, total) = api.store().list_reviews(space, unresolved_only, Some(since), limit, offset)?;
    let events: Vec<FeedEvent> = events.iter().map(|e| event_json(api, e)).collect();
    Ok(ReviewFeed {
        has_more: offset + events.len() < total,
        events,
        total: total as u64,
        limit: limit as u64,
        offset: offset as u64,
        space_id: space.to_string(),
    })
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
pub(crate) fn resolve(api: &Api, space: &str, id: &str, r: &ReviewRequest) -> Result<ReviewOutcome> {
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
        return Ok(ReviewOutcome {
            status: "preview",
            phase: "preview",
            event_id: id.to_string(),
            action: r.action.clone(),
            plan_id: plan,
            effects: fx,
            event: event_json(api, &e),
        });
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
    Ok(ReviewOutcome {
        status: "success",
        phase: "apply",
        event_id: id.to_string(),
        action: r.action.clone(),
        plan_id: plan,
        effects: fx,
        event: event_json(api, &done),
    })
}

pub(super) fn review(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let r: ReviewRequest = ctx.json()?;
    let space = r.space_id.clone().or_else(|| ctx.query.str("space_id").map(str::to_string));
    let space = space.unwrap_or_else(|| DEFAULT_SPACE.to_string());
    Ok(ApiResponse::json(200, &resolve(api, &space, ctx.param("event_id"), &r)?))
}
