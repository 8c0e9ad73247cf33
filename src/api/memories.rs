//! Memory routes: create (one or a batch), list, read, update, delete, and a memory's labels.

use serde::Deserialize;
use utoipa::ToSchema;

use super::dto::*;
use super::query::{ParamSpec, boolean, choice, int, list, num, string};
use super::route::{Dto, Route, Shape, UNIT_TYPES, label_ids, ok, parse_expiry, parse_temporal, parse_unit, route};
use super::search::parse_date_bound;
use super::{Api, ApiResponse, Ctx};
use crate::error::{Error, FieldError, Result};
use crate::index::catalog::MemoryFilter;
use crate::model::{MemoryState, Metadata, UnitType};
use crate::store::{DEFAULT_SPACE, ListOrder, ListQuery, MemoryPatch, NewMemory, WriteAction};

const STATES: &[&str] = &["active", "archived", "deprecated", "superseded", "forgotten", "all"];

const LIST_PARAMS: &[ParamSpec] = &[
    int("limit", 1, Some(100), Some(20), "page size"),
    int("offset", 0, None, Some(0), "items to skip"),
    choice("state", Some("active"), STATES, "lifecycle state; `all` lists every state but forgotten"),
    num("importance_min", 0.0, 1.0, Some(0.0), "minimum importance"),
    string("space_id", Some(DEFAULT_SPACE), "space"),
    boolean("is_crystal", None, "true: only crystals, false: only non-crystals"),
    choice("unit_type", None, UNIT_TYPES, "only this unit type"),
    list("labels", "label names every memory must carry (repeat for AND)"),
    choice(
        "order_by",
        Some("recent"),
        &["recent", "importance", "pagerank"],
        "Engram extension: sort order (newest, most important or highest PageRank first)",
    ),
    string("recorded_date_from", None, "Engram extension: created on or after (YYYY, YYYY-MM, YYYY-MM-DD or RFC 3339)"),
    string("recorded_date_to", None, "Engram extension: created on or before (inclusive; same forms)"),
    string("source_thread_id", None, "Engram extension: only the memories extracted from this thread"),
    string("source_id", None, "Engram extension: only the memories made from this source's chunks"),
    boolean(
        "include_expired",
        Some(false),
        "Engram extension: also memories whose expires_at has passed (each with expired: true)",
    ),
];

const DELETE_PARAMS: &[ParamSpec] = &[
    string("space_id", None, "optional guard: the memory must be in this space"),
    boolean("cascade_delete", Some(true), "accepted; label edges are always removed with the memory"),
];

/// Body of `POST /memories` (create, or upsert by `id`).
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
pub struct CreateMemoryRequest {
    /// Body text, 1..=32,768 bytes.
    pub content: String,
    /// Upsert key: an existing id updates that memory.
    pub id: Option<String>,
    /// Title, at most 500 characters.
    pub title: Option<String>,
    /// 0..=1 (default 0.5).
    pub importance: Option<f64>,
    /// 0..=1 (default 1).
    pub confidence: Option<f64>,
    /// Origin, e.g. `cli`.
    pub source: Option<String>,
    /// Label names.
    pub labels: Option<Vec<String>>,
    /// fact, preference, decision, plan, procedure, learning, context or event.
    pub unit_type: Option<String>,
    /// `YYYY`, `YYYY-MM`, `YYYY-MM-DD` or RFC 3339.
    pub event_start: Option<String>,
    /// Same forms as `event_start`.
    pub event_end: Option<String>,
    /// past, present, future or timeless.
    pub temporal_context: Option<String>,
    /// Provenance: thread id owned by the caller.
    pub source_thread_id: Option<String>,
    /// Provenance: message id owned by the caller.
    pub source_message_id: Option<String>,
    /// Free-form object, at most 64 KiB.
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<serde_json::Map<String, serde_json::Value>>,
    /// Space (default `default`).
    pub space_id: Option<String>,
    /// Client app name (kept in `metadata.source_app`).
    pub source_app: Option<String>,
    /// Import origin (kept in `metadata.import_origin`).
    pub import_origin: Option<String>,
    /// Message indices of the source thread; stored as `source_range` `start_index`/`end_index`.
    pub source_message_indices: Option<Vec<i64>>,
    /// Engram extension: the memory's vector, for a store opened with `--embedding-model external:DIM` (DIM
    /// finite numbers, not all zero; stored L2-normalised). 422 in a store whose model embeds by itself.
    pub embedding: Option<Vec<f32>>,
    /// Engram extension: when the memory expires (RFC 3339, or `YYYY-MM-DD` for midnight UTC). From then on it
    /// leaves search, listings and the context bundle, stays readable by id with `expired: true`, and is
    /// forgotten after the store's grace period (30 days by default).
    pub expires_at: Option<String>,
}

/// Body of `PATCH /memories/{memory_id}`: every field optional.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
pub struct UpdateMemoryRequest {
    /// New title.
    pub title: Option<String>,
    /// New content.
    pub content: Option<String>,
    /// New importance 0..=1.
    pub importance: Option<f64>,
    /// New confidence 0..=1.
    pub confidence: Option<f64>,
    /// New unit type.
    pub unit_type: Option<String>,
    /// Moves the memory to this space.
    pub space_id: Option<String>,
    /// Replaces the label set (names).
    pub labels: Option<Vec<String>>,
    /// New source.
    pub source: Option<String>,
    /// New event start.
    pub event_start: Option<String>,
    /// New event end.
    pub event_end: Option<String>,
    /// New temporal context.
    pub temporal_context: Option<String>,
    /// Replaces metadata.
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<serde_json::Map<String, serde_json::Value>>,
    /// Engram extension: a new vector (external-embedder stores; rules of `POST /memories`). Without it a
    /// content change keeps the old vector in such a store.
    pub embedding: Option<Vec<f32>>,
    /// Engram extension: a new expiry time (forms of `POST /memories`), or null to clear it.
    #[serde(default, deserialize_with = "nullable")]
    #[schema(value_type = Option<String>)]
    pub expires_at: Option<Option<String>>,
}

/// A field that tells "absent" (None) from "null" (Some(None)).
fn nullable<'de, D: serde::Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(d).map(Some)
}

/// Body of `POST /memories/batch` (Engram extension).
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
pub struct BatchCreateRequest {
    /// 1..=1,000 memories, each a `POST /memories` body; stored in one write transaction, all or none.
    pub memories: Vec<CreateMemoryRequest>,
}

/// The routes of this module, in table order ([`super::routes::ROUTES`] gathers every module's list).
pub(super) const ROUTES: &[Route] = &[
    route!(
        "POST",
        "/memories",
        "create_memory",
        "Create a memory, or upsert by id",
        &[],
        Some(Dto::of::<CreateMemoryRequest>()),
        Shape::Ref(Dto::of::<CreateMemoryResponse>()),
        false,
        create_memory
    ),
    route!(
        "POST",
        "/memories/batch",
        "create_memories",
        "Engram extension: create or upsert up to 1,000 memories in one write transaction (all or none)",
        &[],
        Some(Dto::of::<BatchCreateRequest>()),
        Shape::Ref(Dto::of::<BatchCreateResponse>()),
        false,
        create_memories
    ),
    route!(
        "GET",
        "/memories",
        "list_memories",
        "List memories of a space, newest first",
        LIST_PARAMS,
        None,
        Shape::Ref(Dto::of::<ListMemoriesResponse>()),
        false,
        list_memories
    ),
    route!(
        "GET",
        "/memories/{memory_id}",
        "get_memory",
        "Read a memory",
        SPACE_GUARD,
        None,
        Shape::Ref(Dto::of::<MemoryOut>()),
        false,
        get_memory
    ),
    route!(
        "PATCH",
        "/memories/{memory_id}",
        "update_memory",
        "Update fields; labels replace the set; space_id moves",
        SPACE_GUARD,
        Some(Dto::of::<UpdateMemoryRequest>()),
        Shape::Ref(Dto::of::<MemoryOut>()),
        false,
        update_memory
    ),
    route!(
        "DELETE",
        "/memories/{memory_id}",
        "delete_memory",
        "Delete a memory and its edges",
        DELETE_PARAMS,
        None,
        Shape::Ref(Dto::of::<DeleteMemoryResponse>()),
        false,
        delete_memory
    ),
    route!(
        "GET",
        "/memories/{memory_id}/labels",
        "get_memory_labels",
        "Labels of a memory",
        SPACE_GUARD,
        None,
        Shape::Ref(Dto::of::<LabelsResponse>()),
        false,
        memory_labels
    ),
    route!(
        "POST",
        "/memories/{memory_id}/labels/{label_id}",
        "add_memory_label",
        "Attach a label",
        SPACE_GUARD,
        None,
        Shape::Ref(Dto::of::<super::dto::MessageResponse>()),
        false,
        add_label
    ),
    route!(
        "DELETE",
        "/memories/{memory_id}/labels/{label_id}",
        "remove_memory_label",
        "Detach a label",
        SPACE_GUARD,
        None,
        Shape::Ref(Dto::of::<super::dto::MessageResponse>()),
        false,
        remove_label
    ),
];

const SPACE_GUARD: &[ParamSpec] = &[string("space_id", None, "optional guard: the memory must be in this space")];
fn source_range_of(indices: Option<&Vec<i64>>) -> Option<std::collections::BTreeMap<String, f64>> {
    let v = indices.filter(|v| !v.is_empty())?;
    let (lo, hi) = (v.iter().min().copied().unwrap_or(0), v.iter().max().copied().unwrap_or(0));
    Some([("start_index".to_string(), lo as f64), ("end_index".to_string(), hi as f64)].into_iter().collect())
}

fn guard<'c>(ctx: &'c Ctx<'_>) -> Option<&'c str> {
    ctx.query.str("space_id").filter(|s| !s.is_empty())
}

/// The store input of one `POST /memories` body; field errors go to `errs` under `loc` (`["body"]`, or
/// `["body", "memories", i]` in a batch).
fn new_memory(r: CreateMemoryRequest, loc: &[serde_json::Value], errs: &mut Vec<FieldError>) -> NewMemory {
    let mut item = Vec::new();
    let unit_type = parse_unit(r.unit_type.as_deref(), &["body", "unit_type"], &mut item);
    let temporal_context = parse_temporal(r.temporal_context.as_deref(), &["body", "temporal_context"], &mut item);
    let expires_at = parse_expiry(r.expires_at.as_deref(), &["body", "expires_at"], &mut item);
    for mut e in item {
        e.loc.splice(0..1, loc.iter().cloned());
        errs.push(e);
    }
    let mut metadata = r.metadata.clone();
    for (k, v) in [("source_app", &r.source_app), ("import_origin", &r.import_origin)] {
        if let Some(v) = v {
            metadata.get_or_insert_with(Default::default).insert(k.into(), v.clone().into());
        }
    }
    NewMemory {
        id: r.id,
        content: r.content,
        title: r.title,
        importance: r.importance,
        confidence: r.confidence,
        source: r.source,
        labels: r.labels,
        unit_type,
        event_start: r.event_start,
        event_end: r.event_end,
        temporal_context,
        source_thread_id: r.source_thread_id,
        source_message_id: r.source_message_id,
        metadata: metadata.map(Metadata),
        space_id: r.space_id,
        source_range: source_range_of(r.source_message_indices.as_ref()),
        extraction_method: None,
        embedding: r.embedding,
        expires_at,
    }
}

fn created_out(c: crate::store::CreatedMemory) -> CreateMemoryResponse {
    let action = match c.action {
        WriteAction::Created => "created",
        WriteAction::Updated => "updated",
        WriteAction::Unchanged => "unchanged",
    };
    CreateMemoryResponse {
        memory: c.view.into(),
        extracted_entities: c.entities,
        assigned_labels: c.assigned_labels,
        created_relationships: c.created_relationships,
        action: action.into(),
        warnings: c.warnings,
    }
}

pub(super) fn create_memory(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    ok(&create(api, ctx.json()?)?)
}

/// `POST /memories` as a typed call: creates (or upserts by `id`) one memory.
///
/// # Errors
/// 422 field errors under `["body", field]` for bad fields; otherwise as
/// [`crate::store::Memories::create`].
pub(crate) fn create(api: &Api, r: CreateMemoryRequest) -> Result<CreateMemoryResponse> {
    let mut errs = Vec::new();
    let new = new_memory(r, &["body".into()], &mut errs);
    if !errs.is_empty() {
        return Err(Error::invalid(errs));
    }
    Ok(created_out(api.store().memories().create(new)?))
}

/// Engram extension `POST /memories/batch`: up to [`MAX_BATCH`] memories in one write transaction (all or none).
pub(super) fn create_memories(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let r: BatchCreateRequest = ctx.json()?;
    if r.memories.is_empty() || r.memories.len() > MAX_BATCH {
        return Err(Error::invalid(vec![
            FieldError::new(
                &["body", "memories"],
                "batch_size",
                format!("memories holds 1..={MAX_BATCH} items, got {}", r.memories.len()),
                r.memories.len().into(),
            )
            .with_ctx(serde_json::json!({"min_items": 1, "max_items": MAX_BATCH})),
        ]));
    }
    let mut errs = Vec::new();
    let batch: Vec<NewMemory> = r
        .memories
        .into_iter()
        .enumerate()
        .map(|(i, m)| new_memory(m, &["body".into(), "memories".into(), i.into()], &mut errs))
        .collect();
    if !errs.is_empty() {
        return Err(Error::invalid(errs));
    }
    // The store names items [i, field] (a batch of one: [field]); this route nests them under body.memories.
    let created = api.store().memories().create_many(batch).map_err(|e| {
        e.map_fields(|mut f| {
            if f.loc.first().is_some_and(|v| v.is_number()) {
                f.place(&["body".into(), "memories".into()]);
            } else {
                f.place(&["body".into(), "memories".into(), 0.into()]);
            }
            f
        })
    })?;
    ok(&BatchCreateResponse { memories: created.into_iter().map(created_out).collect() })
}

/// Most memories in one `POST /memories/batch`.
const MAX_BATCH: usize = 1000;

pub(super) fn list_memories(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let q = &ctx.query;
    let states = match q.str("state").unwrap_or("active") {
        "all" => vec![MemoryState::Active, MemoryState::Archived, MemoryState::Deprecated, MemoryState::Superseded],
        s => MemoryState::parse(s).into_iter().collect(),
    };
    let mut errs = Vec::new();
    let recorded_from =
        parse_date_bound(q.str("recorded_date_from"), &["query", "recorded_date_from"], false, &mut errs);
    let recorded_to = parse_date_bound(q.str("recorded_date_to"), &["query", "recorded_date_to"], true, &mut errs);
    if !errs.is_empty() {
        return Err(Error::invalid(errs));
    }
    let group = match (q.str("source_thread_id"), q.str("source_id")) {
        (Some(t), _) => Some(format!("thread:{t}")),
        (None, Some(s)) => Some(format!("source:{s}")),
        (None, None) => None,
    };
    let filter = MemoryFilter {
        states,
        unit_type: q.str("unit_type").and_then(UnitType::parse),
        importance_min: q.num("importance_min"),
        label_ids: label_ids(q.list("labels")),
        is_crystal: q.bool("is_crystal"),
        recorded_from,
        recorded_to,
        group,
        include_expired: q.bool("include_expired").unwrap_or(false),
        ..list_filter()
    };
    let order = match q.str("order_by") {
        Some("importance") => ListOrder::Importance,
        Some("pagerank") => ListOrder::PageRank,
        _ => ListOrder::Recent,
    };
    let query = ListQuery {
        space_id: q.str("space_id").unwrap_or(DEFAULT_SPACE).to_string(),
        filter,
        limit: q.limit(),
        offset: q.int("offset").unwrap_or(0) as usize,
    };
    ok(&list_page(api, &query, order)?)
}

/// `GET /memories` as a typed call: one page of `query` in `order`.
///
/// # Errors
/// As [`crate::store::Memories::list_ordered`] (an unknown space is 404).
pub(crate) fn list_page(api: &Api, query: &ListQuery, order: ListOrder) -> Result<ListMemoriesResponse> {
    let page = api.store().memories().list_ordered(query, order)?;
    let has_more = page.has_more();
    Ok(ListMemoriesResponse {
        pagination: Pagination { limit: page.limit, offset: page.offset, total: page.total, has_more },
        memories: page.items.into_iter().map(MemoryOut::from).collect(),
    })
}

/// The filter of `GET /memories` when no parameter narrows it: active memories, superseded versions
/// included, any importance, unexpired.
pub(crate) fn list_filter() -> MemoryFilter {
    MemoryFilter {
        states: vec![MemoryState::Active],
        importance_min: Some(0.0),
        include_history: true,
        ..Default::default()
    }
}

pub(super) fn get_memory(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    ok(&get(api, ctx.param("memory_id"), guard(ctx))?)
}

/// `GET /memories/{memory_id}` as a typed call; `space` is the optional guard.
///
/// # Errors
/// As [`crate::store::Memories::read`] (404 when missing or in another space than `space`).
pub(crate) fn get(api: &Api, id: &str, space: Option<&str>) -> Result<MemoryOut> {
    Ok(MemoryOut::from(api.store().memories().read(id, space)?))
}

pub(super) fn update_memory(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    ok(&update(api, ctx.param("memory_id"), ctx.json()?, guard(ctx))?)
}

/// `PATCH /memories/{memory_id}` as a typed call; `space` is the optional guard.
///
/// # Errors
/// 422 field errors under `["body", field]`; otherwise as [`crate::store::Memories::update`].
pub(crate) fn update(api: &Api, id: &str, r: UpdateMemoryRequest, space: Option<&str>) -> Result<MemoryOut> {
    let mut errs = Vec::new();
    let unit_type = parse_unit(r.unit_type.as_deref(), &["body", "unit_type"], &mut errs);
    let temporal_context = parse_temporal(r.temporal_context.as_deref(), &["body", "temporal_context"], &mut errs);
    let expires_at = r.expires_at.map(|e| parse_expiry(e.as_deref(), &["body", "expires_at"], &mut errs));
    if !errs.is_empty() {
        return Err(Error::invalid(errs));
    }
    let patch = MemoryPatch {
        title: r.title,
        content: r.content,
        importance: r.importance,
        confidence: r.confidence,
        unit_type,
        space_id: r.space_id,
        labels: r.labels,
        source: r.source,
        event_start: r.event_start,
        event_end: r.event_end,
        temporal_context,
        metadata: r.metadata.map(Metadata),
        embedding: r.embedding,
        expires_at,
    };
    Ok(MemoryOut::from(api.store().memories().update(id, patch, space)?))
}

pub(super) fn delete_memory(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    ok(&delete(api, ctx.param("memory_id"), guard(ctx))?)
}

/// `DELETE /memories/{memory_id}` as a typed call; `space` is the optional guard.
///
/// # Errors
/// As [`crate::store::Memories::delete`] (404 when missing).
pub(crate) fn delete(api: &Api, id: &str, space: Option<&str>) -> Result<DeleteMemoryResponse> {
    let r = api.store().memories().delete(id, space)?;
    Ok(DeleteMemoryResponse {
        message: format!("memory '{id}' deleted"),
        deleted_relationships: r.deleted_relationships,
        deleted_entities: 0,
    })
}

pub(super) fn memory_labels(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    ok(&LabelsResponse { labels: api.store().labels().of_memory(ctx.param("memory_id"), guard(ctx))? })
}

pub(super) fn add_label(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let (m, l) = (ctx.param("memory_id"), ctx.param("label_id"));
    let changed = api.store().labels().set_on_memory(m, l, true, guard(ctx))?;
    let message = if changed {
        format!("label '{l}' added to memory '{m}'")
    } else {
        format!("memory '{m}' already has label '{l}'")
    };
    ok(&MessageResponse { message })
}

pub(super) fn remove_label(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let (m, l) = (ctx.param("memory_id"), ctx.param("label_id"));
    let changed = api.store().labels().set_on_memory(m, l, false, guard(ctx))?;
    let message = if changed {
        format!("label '{l}' removed from memory '{m}'")
    } else {
        format!("memory '{m}' did not have label '{l}'")
    };
    ok(&MessageResponse { message })
}
