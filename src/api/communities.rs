//! Community routes (spec "Communities and library": `GET /communities`, `GET /communities/{id}`).

use super::query::{ParamSpec, int};
use super::route::{Dto, Shape, route};
use super::{Api, ApiResponse, Ctx};
use crate::error::{Error, Result};

/// The routes of this module, in table order ([`super::routes::ROUTES`] gathers every module's list).
pub(super) const ROUTES: &[super::route::Route] = &[
    route!(
        "GET",
        "/communities",
        "list_communities",
        "Communities of the global entity graph (Louvain), heaviest first, with extractive summaries",
        LIST_PARAMS,
        None,
        Shape::Ref(Dto::of::<CommunityListResponse>()),
        false,
        list
    ),
    route!(
        "GET",
        "/communities/{community_id}",
        "get_community",
        "A community with its most central entities and representative memories",
        GET_PARAMS,
        None,
        Shape::Ref(Dto::of::<CommunityResponse>()),
        false,
        get
    ),
    route!(
        "GET",
        "/library/crystal/{crystal_id}/source-memories",
        "crystal_source_memories",
        "Source memories of a crystal by contribution_weight, heaviest first",
        CRYSTAL_SOURCE_PARAMS,
        None,
        Shape::Ref(Dto::of::<CrystalSourcesResponse>()),
        false,
        crystal_sources
    ),
];

pub(super) const LIST_PARAMS: &[ParamSpec] = &[int("limit", 1, Some(50), Some(20), "communities")];
pub(super) const GET_PARAMS: &[ParamSpec] = &[int("entity_limit", 1, Some(50), Some(20), "entities")];

/// A community id path parameter: a non-negative integer, else 422.
pub(super) fn community_id(ctx: &Ctx<'_>) -> Result<u64> {
    let raw = ctx.param("community_id");
    raw.parse().map_err(|_| {
        Error::invalid_field(
            &["path", "community_id"],
            "int_parsing",
            "Input should be a valid integer, unable to parse string as an integer",
            raw.into(),
        )
    })
}

pub(super) fn list(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let limit = ctx.query.limit();
    let (communities, total) = api.store().graph().communities(limit)?;
    let report = api.store().graph().report();
    Ok(ApiResponse::json(
        200,
        &CommunityListResponse { communities, total, summary_method: "extractive", computed: report },
    ))
}

pub(super) fn get(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let id = community_id(ctx)?;
    let limit = ctx.query.int("entity_limit").unwrap_or(20) as usize;
    let (c, entities) = api.store().graph().community(id, limit)?;
    let memories = c.top_memories.clone();
    Ok(ApiResponse::json(200, &CommunityResponse { community: c, entities, memories }))
}

pub(super) const CRYSTAL_SOURCE_PARAMS: &[ParamSpec] = &[int("limit", 1, Some(100), Some(50), "source memories")];

pub(super) fn crystal_sources(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let id = ctx.param("crystal_id");
    let limit = ctx.query.limit();
    let sources = api.store().graph().crystal_sources(id, limit)?;
    let rows: Vec<CrystalSourceMemory> = sources
        .into_iter()
        .map(|(v, w)| CrystalSourceMemory {
            memory: super::dto::MemoryOut::from(v),
            contribution_weight: w,
            relation: "CRYSTALLIZED_FROM",
        })
        .collect();
    Ok(ApiResponse::json(
        200,
        &CrystalSourcesResponse { crystal_id: id.to_string(), total: rows.len() as u64, source_memories: rows },
    ))
}

/// `GET /communities`.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct CommunityListResponse {
    /// Communities, largest first.
    pub communities: Vec<crate::store::Community>,
    /// Communities in all.
    pub total: u64,
    /// How titles and summaries are made (`extractive`: no language model).
    pub summary_method: &'static str,
    /// The last recomputation; null before the first.
    pub computed: Option<crate::store::GraphReport>,
}

/// `GET /communities/{community_id}`.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct CommunityResponse {
    /// The community.
    pub community: crate::store::Community,
    /// Its entities, by PageRank.
    pub entities: Vec<crate::store::CommunityEntity>,
    /// Its top memories.
    pub memories: Vec<crate::store::CommunityMemory>,
}

/// A memory a crystal was made from.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct CrystalSourceMemory {
    /// The memory.
    #[serde(flatten)]
    pub memory: super::dto::MemoryOut,
    /// Its share of the crystal (the weights of one crystal sum to 1).
    pub contribution_weight: f64,
    /// Always `CRYSTALLIZED_FROM`.
    pub relation: &'static str,
}

/// `GET /library/crystal/{crystal_id}/source-memories`.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct CrystalSourcesResponse {
    /// The crystal.
    pub crystal_id: String,
    /// Source memories returned.
    pub total: u64,
    /// The source memories, largest weight first.
    pub source_memories: Vec<CrystalSourceMemory>,
}
