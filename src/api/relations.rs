//! Relations between memories (client contract section 4).

use serde::Deserialize;
use utoipa::ToSchema;

use super::query::{ParamSpec, choice, int, list, string};
use super::route::{Dto, Shape, route};
use super::{Api, ApiResponse, Ctx};
use crate::error::Result;
use crate::store::{RELATION_STATUSES, RelationInput, RelationQuery};

/// The routes of this module, in table order ([`super::routes::ROUTES`] gathers every module's list).
pub(super) const ROUTES: &[super::route::Route] = &[
    route!(
        "POST",
        "/memories/{memory_id}/relations",
        "create_memory_relation",
        "Relate a memory to another of its space (an existing source/target/type triple is updated)",
        &[],
        Some(Dto::of::<RelationRequest>()),
        Shape::Ref(Dto::of::<crate::store::RelationView>()),
        false,
        create
    ),
    route!(
        "GET",
        "/memories/{memory_id}/relations",
        "list_memory_relations",
        "Relations of a memory by direction, status and type",
        LIST_PARAMS,
        None,
        Shape::Ref(Dto::of::<MemoryRelationsResponse>()),
        false,
        list_for
    ),
    route!(
        "PATCH",
        "/memories/relations/{rel_id}",
        "update_memory_relation",
        "Change a relation's type, reason, strength, confidence or status",
        &[],
        Some(Dto::of::<RelationRequest>()),
        Shape::Ref(Dto::of::<crate::store::RelationView>()),
        false,
        update
    ),
    route!(
        "DELETE",
        "/memories/relations/{rel_id}",
        "delete_memory_relation",
        "Mark a relation deleted (listable with status=deleted)",
        &[],
        None,
        Shape::Ref(Dto::of::<RelationDeleteResponse>()),
        false,
        delete
    ),
];

/// Body of `POST /memories/{id}/relations` and `PATCH /memories/relations/{rel_id}` (PATCH ignores
/// `target_memory_id` and `bidirectional`).
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
pub struct RelationRequest {
    /// The other memory (create: required; same space).
    #[serde(default)]
    pub target_memory_id: Option<String>,
    /// Type, 1..=64 characters (create: required).
    #[serde(default)]
    pub relation_type: Option<String>,
    /// Why, at most 1,000 characters.
    #[serde(default)]
    pub reason: Option<String>,
    /// 0..=1, default 1.
    #[serde(default)]
    pub strength: Option<f64>,
    /// 0..=1, default 1.
    #[serde(default)]
    pub confidence: Option<f64>,
    /// Holds both ways (default false).
    #[serde(default)]
    pub bidirectional: Option<bool>,
    /// `active` (default), `suggested`, `dismissed` or `deleted`.
    #[serde(default)]
    pub status: Option<String>,
    /// Who made it.
    #[serde(default)]
    pub source: Option<String>,
    /// Guard: the source memory's space.
    #[serde(default)]
    pub space_id: Option<String>,
}

pub(super) const LIST_PARAMS: &[ParamSpec] = &[
    choice("direction", Some("both"), &["out", "in", "both"], "relations leaving, entering, or both"),
    choice("status", Some("active"), &RELATION_STATUSES, "only this status"),
    int("limit", 1, Some(500), Some(DEFAULT_LIST_LIMIT as i64), "most relations"),
    list("types", "only these relation types (repeat, or comma-separated)"),
    string("space_id", None, "guard: the memory's space"),
];

fn input(r: RelationRequest) -> RelationInput {
    RelationInput {
        target_memory_id: r.target_memory_id.unwrap_or_default(),
        relation_type: r.relation_type,
        reason: r.reason,
        strength: r.strength,
        confidence: r.confidence,
        bidirectional: r.bidirectional,
        status: r.status,
        source: r.source,
    }
}

pub(super) fn create(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let r: RelationRequest = ctx.json()?;
    let guard = r.space_id.clone().filter(|s| !s.is_empty());
    let guard = guard.as_deref().or_else(|| ctx.query.str("space_id"));
    let v = api.store().graph().create_relation(ctx.param("memory_id"), input(r), guard)?;
    Ok(ApiResponse::json(200, &v))
}

pub(super) fn list_for(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let q = &ctx.query;
    let types: Vec<String> = q
        .list("types")
        .iter()
        .flat_map(|t| t.split(','))
        .map(|t| t.trim().to_string())
        .filter(|t| !t.is_empty())
        .collect();
    let rq = RelationQuery {
        direction: q.str("direction").unwrap_or("both").to_string(),
        status: q.str("status").unwrap_or("active").to_string(),
        limit: q.limit(),
        types,
    };
    let space = q.str("space_id").filter(|s| !s.is_empty());
    Ok(ApiResponse::json(200, &relations_of(api, ctx.param("memory_id"), &rq, space)?))
}

/// `GET /memories/{memory_id}/relations` as a typed call; `space` is the optional guard.
///
/// # Errors
/// As [`crate::store::Graph::relations_of`] (404 when the memory is missing).
pub(crate) fn relations_of(
    api: &Api,
    id: &str,
    rq: &RelationQuery,
    space: Option<&str>,
) -> Result<MemoryRelationsResponse> {
    let rels = api.store().graph().relations_of(id, rq, space)?;
    Ok(MemoryRelationsResponse { memory_id: id.to_string(), total: rels.len() as u64, relations: rels })
}

/// Relations a listing returns when no `limit` is given.
pub(crate) const DEFAULT_LIST_LIMIT: usize = 50;

pub(super) fn update(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let r: RelationRequest = ctx.json()?;
    Ok(ApiResponse::json(200, &api.store().graph().update_relation(ctx.param("rel_id"), input(r))?))
}

pub(super) fn delete(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let v = api.store().graph().delete_relation(ctx.param("rel_id"))?;
    Ok(ApiResponse::json(
        200,
        &RelationDeleteResponse {
            success: true,
            message: format!("relation '{}' deleted", v.relation.id),
            relation: v,
        },
    ))
}

/// `GET /memories/{memory_id}/relations`.
#[derive(Debug, Clone, serde::Serialize, ToSchema)]
pub struct MemoryRelationsResponse {
    /// The memory.
    pub memory_id: String,
    /// Relations returned.
    pub total: u64,
    /// The relations, with the memory at the other end.
    pub relations: Vec<crate::store::RelationView>,
}

/// `DELETE /memories/relations/{rel_id}`.
#[derive(Debug, Clone, serde::Serialize, ToSchema)]
pub struct RelationDeleteResponse {
    /// Always true.
    pub success: bool,
    /// One line.
    pub message: String,
    /// The relation as it was.
    pub relation: crate::store::RelationView,
}
