//! Timeline reviews over REST (`GET /agent/feed/events`, `POST /agent/feed/events/{event_id}/review`, what
//! nmem 0.10 calls) and for the agent tools (`list_timeline_reviews`, `resolve_timeline_review`). Detection
//! is the store's (`store/reviews/`); resolving makes the memory changes an action implies, then records it.
//!
//! Actions: `keep_newer_as_latest` supersedes the older memory by the newer; `keep_older_as_latest`
//! supersedes the newer by the older; `keep_both_linked` relates them (`updates` or `contradicts`, newer to
//! older); `no_change_needed`, `dismiss` and `custom_note_only` change no memory. A `preview` phase answers
//! the plan and its `plan_id` and changes nothing; `apply` makes it (a given `plan_id` must match).

use serde::Deserialize;
use serde_json::{Value, json};

use super::query::{ParamSpec, boolean, int, string};
use super::route::{Dto, Shape, route};
use super::{Api, ApiResponse, Ctx};
use crate::error::ErrorCode;
use crate::error::{Error, Result};
use crate::model::Timestamp;
use crate::store::{DEFAULT_SPACE, REVIEW_ACTIONS, RelationInput, Resolution, ReviewEvent, Transition};

/// The routes of this module, in table order ([`super::routes::ROUTES`] gathers every module's list).
pub(super) const ROUTES: &[super::route::Route] = &[
    route!(
        "GET",
        "/agent/feed/events",
        "agent_feed_events",
        "Timeline review events (a new memory that may update or contradict an earlier one), newest first",
        FEED_PARAMS,
        None,
        Shape::Ref(Dto::of::<ReviewFeed>()),
        false,
        list
    ),
    route!(
        "POST",
        "/agent/feed/events/{event_id}/review",
        "agent_feed_event_review",
        "Preview or apply the resolution of a review event",
        REVIEW_PARAMS,
        Some(Dto::of::<ReviewRequest>()),
        Shape::Ref(Dto::of::<ReviewOutcome>()),
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
    match api.store().memories().get(id, Some(space)) {
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

/// What resolving a review event answers (`POST /agent/feed/events/{event_id}/review`,
/// `resolve_timeline_review`): the guarded-review envelope nmem 0.10 checks (`protocol_version`, `success`,
/// `event_id`, `message`, `action`, `result`), plus Engram's own fields (`status`, `phase`, `plan_id`,
/// `effects`, `event`).
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct ReviewOutcome {
    /// Version of this envelope: 1.
    pub protocol_version: u32,
    /// Always true (a refusal is an error status).
    pub success: bool,
    /// `preview`, `success` (applied) or `already_resolved` (a preview of a resolved event).
    pub status: &'static str,
    /// `preview` or `apply`.
    pub phase: &'static str,
    /// The event.
    pub event_id: String,
    /// The requested action.
    pub action: String,
    /// One line for a person.
    pub message: String,
    /// The plan to apply (from a preview) or applied.
    pub plan_id: String,
    /// What the action changes, in words.
    pub effects: Vec<String>,
    /// The event as the feed shows it (resolved, after an apply).
    pub event: FeedEvent,
    /// The outcome in the form nmem reads.
    pub result: ReviewResult,
}

/// `result` of a [`ReviewOutcome`].
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct ReviewResult {
    /// Always true.
    pub success: bool,
    /// The event.
    pub event_id: String,
    /// The requested action.
    pub action: String,
    /// True when the event was resolved before this call.
    pub already_resolved: bool,
    /// The plan (a preview of an unresolved event only; absent otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preview: Option<ReviewPreview>,
    /// The resolution in words (`<action>: <effects>`; absent from a preview of an unresolved event).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resolution: Option<String>,
    /// The resolution as stored (absent from a preview of an unresolved event).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resolution_detail: Option<Resolution>,
    /// What an apply changed (absent from previews).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub action_result: Option<ActionResult>,
}

/// What an applied resolution changed.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct ActionResult {
    /// Always null: a failed change is an error status and changes nothing.
    pub error: Option<String>,
    /// The changes, in words.
    pub effects: Vec<String>,
    /// Memories whose record changed (superseded ones, or the newer end of a new relation).
    pub changed_memory_ids: Vec<String>,
    /// The relation created by `keep_both_linked`.
    pub relation_id: Option<String>,
}

/// The plan of a resolution, as a preview shows it.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct ReviewPreview {
    /// Pass it back with `phase: "apply"`: a hash-free name of the event and action, stable across calls.
    pub plan_id: String,
    /// The requested action.
    pub action: String,
    /// False when applying would be refused (`blocked_reason` says why).
    pub can_apply: bool,
    /// Why applying would be refused, when it would.
    pub blocked_reason: Option<String>,
    /// The two memories, older first, as full records.
    pub memories: Vec<ReviewMemory>,
    /// The memory the plan's edge starts from (the one kept, or the newer one for a link or a note).
    pub from_memory_id: String,
    /// The memory it points to.
    pub to_memory_id: String,
    /// The edge the plan makes: `supersedes`, `updates`, `contradicts`, or `none` for note-only actions.
    pub relation: String,
    /// The edges between the two memories now, both directions.
    pub current_edges: Vec<ReviewEdge>,
    /// What the action changes, in words.
    pub effects: Vec<String>,
}

/// A memory of a review preview: the full record, `lifecycle_state`, labels as `{id, name}`, and the fields a
/// decision rests on.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct ReviewMemory {
    /// The full record.
    #[serde(flatten)]
    pub memory: crate::model::Memory,
    /// The lifecycle state (same as `state`).
    pub lifecycle_state: String,
    /// Its labels.
    pub labels: Vec<LabelRef>,
    /// The evidence a person weighs: when it was recorded and when it happened, where it came from, how sure.
    pub evidence_fields: EvidenceFields,
    /// `expires_at` has passed.
    pub expired: bool,
}

/// A label as `{id, name}`.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct LabelRef {
    /// `label_<name>`.
    pub id: String,
    /// The name.
    pub name: String,
}

/// `evidence_fields` of a [`ReviewMemory`].
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct EvidenceFields {
    /// When it was recorded.
    pub created_at: Timestamp,
    /// Start of the event it describes, when known.
    pub event_start: Option<String>,
    /// End of that event, when known.
    pub event_end: Option<String>,
    /// `past`, `present`, `future` or `timeless`.
    pub temporal_context: crate::model::TemporalContext,
    /// Where it came from.
    pub source: String,
    /// Provenance thread, when known.
    pub source_thread_id: Option<String>,
    /// 0..=1.
    pub confidence: f64,
    /// 0..=1.
    pub importance: f64,
}

/// An edge between the two memories of a review event.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct ReviewEdge {
    /// Where it starts.
    pub from_memory_id: String,
    /// Where it points.
    pub to_memory_id: String,
    /// Relation type, or `supersedes` for a lifecycle link.
    pub relation: String,
    /// `relation` (a stored relation) or `lifecycle` (a supersession).
    pub kind: &'static str,
    /// The relation's id (relations only).
    pub relation_id: Option<String>,
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
    let (events, total) = api.store().reviews().list(space, unresolved_only, Some(since), limit, offset)?;
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
        q.limit(),
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

/// The edge action `action` makes on event `e`: `(from, to, relation)`.
fn plan_edge(e: &ReviewEvent, action: &str) -> (String, String, String) {
    let (o, n) = (e.older_memory_id.clone(), e.newer_memory_id.clone());
    match action {
        "keep_newer_as_latest" => (n, o, "supersedes".into()),
        "keep_older_as_latest" => (o, n, "supersedes".into()),
        "keep_both_linked" => (n, o, link_type(e).into()),
        _ => (n, o, "none".into()),
    }
}

/// The relation type `keep_both_linked` creates, newer to older.
fn link_type(e: &ReviewEvent) -> &'static str {
    if e.kind == "contradiction" { "contradicts" } else { "updates" }
}

/// The resolution in words, as `result.resolution` shows it.
fn resolution_text(r: &Resolution) -> String {
    let mut s = format!("{}: {}", r.action, r.effects.join("; "));
    if !r.note.is_empty() {
        s.push_str(&format!(" (note: {})", r.note));
    }
    s
}

/// Memory `id` of event `e` as a full record; 404 `memory_not_found` when it is gone.
fn review_memory(api: &Api, e: &ReviewEvent, id: &str) -> Result<ReviewMemory> {
    let v = api.store().memories().get(id, Some(&e.space_id)).map_err(|err| {
        if err.kind() == crate::error::ErrorKind::NotFound {
            Error::not_found(
                ErrorCode::MemoryNotFound,
                format!("memory '{id}' of review event '{}' no longer exists; dismiss the event instead", e.id),
            )
        } else {
            err
        }
    })?;
    let labels = v.label_ids.iter().zip(v.label_names()).map(|(id, name)| LabelRef { id: id.clone(), name }).collect();
    let m = v.memory;
    Ok(ReviewMemory {
        lifecycle_state: m.state.as_str().to_string(),
        labels,
        evidence_fields: EvidenceFields {
            created_at: m.created_at,
            event_start: m.event_start.clone(),
            event_end: m.event_end.clone(),
            temporal_context: m.temporal_context,
            source: m.source.clone(),
            source_thread_id: m.source_thread_id.clone(),
            confidence: m.confidence,
            importance: m.importance,
        },
        expired: m.expired_at(Timestamp::now()),
        memory: m,
    })
}

/// The edges between the two memories of `e` now: relations either way and supersession links.
fn current_edges(api: &Api, e: &ReviewEvent, older: &ReviewMemory, newer: &ReviewMemory) -> Result<Vec<ReviewEdge>> {
    let (o, n) = (&e.older_memory_id, &e.newer_memory_id);
    let q = crate::store::RelationQuery {
        direction: "both".into(),
        status: "active".into(),
        limit: crate::store::MAX_RELATIONS_LIMIT,
        types: Vec::new(),
    };
    let mut edges: Vec<ReviewEdge> = api
        .store()
        .graph()
        .relations_of(n, &q, Some(&e.space_id))?
        .into_iter()
        .map(|v| v.relation)
        .filter(|r| (&r.source_memory_id == o) || (&r.target_memory_id == o))
        .map(|r| ReviewEdge {
            from_memory_id: r.source_memory_id,
            to_memory_id: r.target_memory_id,
            relation: r.relation_type,
            kind: "relation",
            relation_id: Some(r.id),
        })
        .collect();
    for (m, other) in [(older, n), (newer, o)] {
        if m.memory.metadata.0.get("superseded_by").and_then(Value::as_str) == Some(other.as_str()) {
            edges.push(ReviewEdge {
                from_memory_id: other.clone(),
                to_memory_id: m.memory.id.clone(),
                relation: "supersedes".into(),
                kind: "lifecycle",
                relation_id: None,
            });
        }
    }
    Ok(edges)
}

/// Why applying `action` would be refused, when it would: a memory to supersede that another memory superseded.
fn blocked_reason(action: &str, older: &ReviewMemory, newer: &ReviewMemory) -> Option<String> {
    let (gone, keeper) = match action {
        "keep_newer_as_latest" => (older, newer),
        "keep_older_as_latest" => (newer, older),
        _ => return None,
    };
    let by = gone.memory.metadata.0.get("superseded_by").and_then(Value::as_str);
    match by {
        Some(other) if other != keeper.memory.id => {
            Some(format!("memory '{}' is superseded by another memory ('{other}')", gone.memory.id))
        }
        _ => None,
    }
}

/// Makes the memory changes `action` implies for event `e` (none for the note actions): the memories whose record
/// changed, and the relation `keep_both_linked` created.
fn change_memories(
    api: &Api,
    space: &str,
    e: &ReviewEvent,
    action: &str,
    note: &str,
    reason: Option<String>,
) -> Result<(Vec<String>, Option<String>)> {
    let store = api.store();
    let mut changed = Vec::new();
    let mut relation_id = None;
    match action {
        "keep_newer_as_latest" => {
            store.memories().change_state(
                &e.older_memory_id,
                Some(space),
                Transition::Supersede { newer: e.newer_memory_id.clone() },
                reason,
            )?;
            changed = vec![e.older_memory_id.clone(), e.newer_memory_id.clone()];
        }
        "keep_older_as_latest" => {
            store.memories().change_state(
                &e.newer_memory_id,
                Some(space),
                Transition::Supersede { newer: e.older_memory_id.clone() },
                reason,
            )?;
            changed = vec![e.newer_memory_id.clone(), e.older_memory_id.clone()];
        }
        "keep_both_linked" => {
            let rel = store.graph().create_relation(
                &e.newer_memory_id,
                RelationInput {
                    target_memory_id: e.older_memory_id.clone(),
                    relation_type: Some(link_type(e).into()),
                    reason: Some(if note.is_empty() { e.signals.join("; ") } else { note.to_string() }),
                    source: Some("timeline_review".into()),
                    ..Default::default()
                },
                Some(space),
            )?;
            changed = vec![e.newer_memory_id.clone()];
            relation_id = Some(rel.relation.id);
        }
        _ => {}
    }
    Ok((changed, relation_id))
}

/// Previews or applies the resolution of event `id` in `space`.
///
/// A preview of an unresolved event answers the plan (`result.preview`, with both memories as full records); a
/// preview of a resolved one answers `result.already_resolved: true` and the resolution; an apply makes the
/// change and records the resolution (`result.resolution`, `result.action_result`).
///
/// # Errors
/// 422 for an unknown action or phase, a `memory_ids` guard that names other memories, a stale `plan_id`;
/// 404 `review_not_found`; 404 `memory_not_found` when one of the event's memories is gone (a preview, or an
/// apply of an action that changes memories: `dismiss`, `no_change_needed` and `custom_note_only` still apply);
/// 409 `review_resolved` for an apply of a resolved event; the lifecycle and relation errors of the changes.
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
    let e = api.store().reviews().get(space, id)?;
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
    let outcome =
        |status, phase, message: String, fx: Vec<String>, result: ReviewResult, event: FeedEvent| ReviewOutcome {
            protocol_version: 1,
            success: true,
            status,
            phase,
            event_id: id.to_string(),
            action: r.action.clone(),
            message,
            plan_id: plan.clone(),
            effects: fx,
            event,
            result,
        };
    let result = |preview, resolution: Option<&Resolution>, action_result| ReviewResult {
        success: true,
        event_id: id.to_string(),
        action: r.action.clone(),
        already_resolved: phase == "preview" && resolution.is_some(),
        preview,
        resolution: resolution.map(resolution_text),
        resolution_detail: resolution.cloned(),
        action_result,
    };
    if phase == "preview" {
        if let Some(done) = &e.resolution {
            let msg = format!("review event '{id}' was resolved already ({})", resolution_text(done));
            return Ok(outcome(
                "already_resolved",
                "preview",
                msg,
                fx,
                result(None, Some(done), None),
                event_json(api, &e),
            ));
        }
        let older = review_memory(api, &e, &e.older_memory_id)?;
        let newer = review_memory(api, &e, &e.newer_memory_id)?;
        let (from, to, relation) = plan_edge(&e, &r.action);
        let blocked = blocked_reason(&r.action, &older, &newer);
        let msg = match &blocked {
            None => format!("{}: {}; apply with plan_id {plan}", r.action, fx.join("; ")),
            Some(why) => format!("{} cannot be applied: {why}", r.action),
        };
        let preview = ReviewPreview {
            plan_id: plan.clone(),
            action: r.action.clone(),
            can_apply: blocked.is_none(),
            blocked_reason: blocked,
            current_edges: current_edges(api, &e, &older, &newer)?,
            memories: vec![older, newer],
            from_memory_id: from,
            to_memory_id: to,
            relation,
            effects: fx.clone(),
        };
        return Ok(outcome("preview", "preview", msg, fx, result(Some(preview), None, None), event_json(api, &e)));
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
    let changes_memories =
        matches!(r.action.as_str(), "keep_newer_as_latest" | "keep_older_as_latest" | "keep_both_linked");
    if changes_memories {
        review_memory(api, &e, &e.older_memory_id)?;
        review_memory(api, &e, &e.newer_memory_id)?;
    }
    let (changed, relation_id) = change_memories(api, space, &e, &r.action, &note, reason)?;
    let done = store.reviews().record_resolution(
        space,
        id,
        Resolution { action: r.action.clone(), note, resolved_at: Timestamp::now(), effects: fx.clone() },
    )?;
    let stored = done.resolution.clone();
    let msg = format!("resolved review event '{id}' with {}: {}", r.action, fx.join("; "));
    let action_result = ActionResult { error: None, effects: fx.clone(), changed_memory_ids: changed, relation_id };
    let res = result(None, stored.as_ref(), Some(action_result));
    Ok(outcome("success", "apply", msg, fx, res, event_json(api, &done)))
}

pub(super) fn review(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let r: ReviewRequest = ctx.json()?;
    let space = r.space_id.clone().or_else(|| ctx.query.str("space_id").map(str::to_string));
    let space = space.unwrap_or_else(|| DEFAULT_SPACE.to_string());
    Ok(ApiResponse::json(200, &resolve(api, &space, ctx.param("event_id"), &r)?))
}
