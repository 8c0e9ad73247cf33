//! Library routes (spec "Communities and library"): community subgraph, recent memories, related communities,
//! the wiki index, export counts, and the wiki pages of entities, crystals and topics (markdown). Library
//! routes read the global graph across spaces.

use super::communities::community_id;
use super::query::{ParamSpec, int, string};
use super::route::{Dto, Shape, route};
use super::{Api, ApiResponse, Ctx};
use crate::error::Result;
use crate::library::{ExportKind, ExportParams, RouteLinker};

/// The routes of this module, in table order ([`super::routes::ROUTES`] gathers every module's list).
pub(super) const ROUTES: &[super::route::Route] = &[
    route!(
        "GET",
        "/library/graph",
        "entity_graph",
        "Engram extension: the entity graph for drawing: the most central entities with community and PageRank, and the RELATES_TO edges between them",
        GRAPH_PARAMS,
        None,
        Shape::Ref(Dto::of::<crate::store::EntityGraph>()),
        false,
        graph
    ),
    route!(
        "GET",
        "/library/community/{community_id}/subgraph",
        "community_subgraph",
        "Entities of a community with the RELATES_TO edges between them, and memories touching them",
        SUBGRAPH_PARAMS,
        None,
        Shape::Ref(Dto::of::<crate::store::Subgraph>()),
        false,
        subgraph
    ),
    route!(
        "GET",
        "/library/community/{community_id}/recent-memories",
        "community_recent_memories",
        "Most recent memories mentioning any entity of the community",
        RECENT_PARAMS,
        None,
        Shape::Ref(Dto::of::<CommunityMemoriesResponse>()),
        false,
        recent
    ),
    route!(
        "GET",
        "/library/community/{community_id}/related",
        "related_communities",
        "Other communities sharing RELATES_TO edges, with the shared edge count",
        RELATED_PARAMS,
        None,
        Shape::Ref(Dto::of::<RelatedCommunitiesResponse>()),
        false,
        related
    ),
    route!(
        "GET",
        "/library/wiki-index",
        "wiki_index",
        "One row per community with its surfaced entities and crystals",
        INDEX_PARAMS,
        None,
        Shape::Ref(Dto::of::<WikiIndexResponse>()),
        false,
        wiki_index
    ),
    route!(
        "GET",
        "/library/wiki-export-summary",
        "wiki_export_summary",
        "Counts of what the wiki exports contain",
        &[],
        None,
        Shape::Ref(Dto::of::<ExportSummary>()),
        false,
        export_summary
    ),
    route!(
        "GET",
        "/library/wiki-page/entity/{id_or_name}",
        "wiki_entity_page",
        "Entity page (markdown); id, or canonical name without case",
        ENTITY_PAGE_PARAMS,
        None,
        Shape::Markdown,
        false,
        entity_page
    ),
    route!(
        "GET",
        "/library/wiki-page/crystal/{crystal_id}",
        "wiki_crystal_page",
        "Crystal page (markdown)",
        &[],
        None,
        Shape::Markdown,
        false,
        crystal_page
    ),
    route!(
        "GET",
        "/library/wiki-page/topic/{community_id}",
        "wiki_topic_page",
        "Topic (community) page (markdown)",
        TOPIC_PAGE_PARAMS,
        None,
        Shape::Markdown,
        false,
        topic_page
    ),
    route!(
        "GET",
        "/library/wiki-export",
        "wiki_export",
        "Markdown wiki of the global graph as a ZIP (topics, entities, crystals)",
        EXPORT_PARAMS,
        None,
        Shape::Zip,
        false,
        wiki_export
    ),
    route!(
        "GET",
        "/library/okf-export",
        "okf_export",
        "Open Knowledge Format v0.2 bundle as a ZIP",
        EXPORT_PARAMS,
        None,
        Shape::Zip,
        false,
        okf_export
    ),
];

pub(super) const SUBGRAPH_PARAMS: &[ParamSpec] = &[
    int("max_entities", 10, Some(200), Some(80), "entities"),
    int("include_top_memories", 0, Some(40), Some(12), "memories touching the entities"),
];
pub(super) const RECENT_PARAMS: &[ParamSpec] = &[int("limit", 1, Some(20), Some(8), "memories")];
pub(super) const RELATED_PARAMS: &[ParamSpec] = &[int("limit", 1, Some(20), Some(6), "communities")];
pub(super) const INDEX_PARAMS: &[ParamSpec] = &[
    int("community_limit", 1, Some(200), Some(20), "communities"),
    int("top_per_community", 1, Some(10), Some(5), "entities per community"),
    int("include_top_memories", 0, Some(8), None, "memories per community (null: none)"),
];
pub(super) const ENTITY_PAGE_PARAMS: &[ParamSpec] = &[int("mention_limit", 1, Some(200), Some(30), "mentions")];
pub(super) const TOPIC_PAGE_PARAMS: &[ParamSpec] = &[int("top_per_community", 1, Some(30), Some(12), "entities")];

fn markdown(body: String) -> ApiResponse {
    ApiResponse::text(200, "text/markdown; charset=utf-8", body)
}

const GRAPH_PARAMS: &[ParamSpec] = &[
    string("space_id", None, "only this space's entities (default: every space)"),
    int("max_entities", 1, Some(20_000), Some(5_000), "most entities drawn (by PageRank, then mentions)"),
    int("max_edges", 0, Some(100_000), Some(20_000), "most RELATES_TO edges (heaviest first)"),
];

pub(super) fn graph(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let q = &ctx.query;
    let g = api.store().graph().entity_graph(
        q.str("space_id"),
        q.int("max_entities").unwrap_or(5_000) as usize,
        q.int("max_edges").unwrap_or(20_000) as usize,
    )?;
    Ok(ApiResponse::json(200, &g))
}

pub(super) fn subgraph(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let q = &ctx.query;
    let g = api.store().graph().community_subgraph(
        community_id(ctx)?,
        q.int("max_entities").unwrap_or(80) as usize,
        q.int("include_top_memories").unwrap_or(12) as usize,
    )?;
    Ok(ApiResponse::json(200, &g))
}

pub(super) fn recent(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let id = community_id(ctx)?;
    let views = api.store().graph().community_recent_memories(id, ctx.query.limit())?;
    let memories: Vec<super::dto::MemoryOut> = views.into_iter().map(Into::into).collect();
    Ok(ApiResponse::json(200, &CommunityMemoriesResponse { community_id: id, memories }))
}

pub(super) fn related(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let id = community_id(ctx)?;
    let related: Vec<RelatedCommunity> = api
        .store()
        .graph()
        .related_communities(id, ctx.query.limit())?
        .into_iter()
        .map(|(c, n)| RelatedCommunity {
            community_id: c.id,
            title: c.title,
            entity_count: c.entity_count,
            shared_edge_count: n,
        })
        .collect();
    Ok(ApiResponse::json(200, &RelatedCommunitiesResponse { community_id: id, related }))
}

pub(super) fn wiki_index(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let q = &ctx.query;
    let store = api.store();
    let (communities, total) = store.graph().communities(q.int("community_limit").unwrap_or(20) as usize)?;
    let top = q.int("top_per_community").unwrap_or(5) as usize;
    let with_memories = q.int("include_top_memories").map(|n| n as usize);
    let rows: Vec<WikiIndexRow> = communities
        .into_iter()
        .map(|c| {
            let crystals: Vec<WikiCrystal> = c
                .top_entities
                .iter()
                .filter_map(|e| {
                    let id = crate::store::crystal_id(&e.space_id, &e.entity_id);
                    store.memories().get(&id, Some(&e.space_id)).ok().map(|v| WikiCrystal {
                        crystal_id: id,
                        title: v.memory.title,
                        source_unit_count: v.memory.source_unit_count,
                    })
                })
                .collect();
            let entities: Vec<crate::store::CommunityEntity> = c.top_entities.iter().take(top).cloned().collect();
            // `name`, `member_count`, `top_entities` and `top_crystals` are what `nmem wiki topics` reads.
            WikiIndexRow {
                community_id: c.id,
                name: c.title.clone(),
                title: c.title,
                summary: c.summary,
                entity_count: c.entity_count,
                member_count: c.entity_count,
                memory_count: c.memory_count,
                top_entities: entities.clone(),
                entities,
                top_crystals: crystals.clone(),
                crystals,
                page: format!("/library/wiki-page/topic/{}", c.id),
                top_memories: with_memories.map(|n| c.top_memories.iter().take(n).cloned().collect()),
            }
        })
        .collect();
    Ok(ApiResponse::json(200, &WikiIndexResponse { total, communities: rows.clone(), rows }))
}

pub(super) const EXPORT_PARAMS: &[ParamSpec] = &[
    int("entity_limit", 1, Some(2000), Some(500), "entities exported, most mentioned first"),
    int("top_per_community", 1, Some(30), Some(12), "entities listed per topic page"),
    int("max_mentions_per_entity", 1, Some(100), Some(30), "mentions per entity page"),
];

fn export_params(ctx: &Ctx<'_>) -> ExportParams {
    let q = &ctx.query;
    ExportParams {
        entity_limit: q.int("entity_limit").unwrap_or(500) as usize,
        top_per_community: q.int("top_per_community").unwrap_or(12) as usize,
        max_mentions_per_entity: q.int("max_mentions_per_entity").unwrap_or(30) as usize,
    }
}

pub(super) fn export_summary(api: &Api, _: &Ctx<'_>) -> Result<ApiResponse> {
    let p = ExportParams::default();
    let (wiki, okf) = api.store().graph().export_counts(&p)?;
    Ok(ApiResponse::json(
        200,
        &ExportSummary {
            topics: wiki.topics,
            entities: wiki.entities,
            crystals: wiki.crystals,
            memories: okf.memories,
            labels: okf.labels,
            defaults: ExportDefaults {
                entity_limit: p.entity_limit as u64,
                top_per_community: p.top_per_community as u64,
                max_mentions_per_entity: p.max_mentions_per_entity as u64,
            },
            wiki,
            okf,
        },
    ))
}

fn zip_response(api: &Api, ctx: &Ctx<'_>, kind: ExportKind) -> Result<ApiResponse> {
    let (path, _) = api.store().graph().export_library(kind, &export_params(ctx))?;
    Ok(ApiResponse { status: 200, content_type: "application/zip", body: Vec::new(), file: Some(path) })
}

pub(super) fn wiki_export(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    zip_response(api, ctx, ExportKind::Wiki)
}

pub(super) fn okf_export(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    zip_response(api, ctx, ExportKind::Okf)
}

pub(super) fn entity_page(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let limit = ctx.query.int("mention_limit").unwrap_or(30) as usize;
    Ok(markdown(api.store().graph().entity_page(ctx.param("id_or_name"), limit, &RouteLinker)?))
}

pub(super) fn crystal_page(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    Ok(markdown(api.store().graph().crystal_page(ctx.param("crystal_id"), &RouteLinker)?))
}

pub(super) fn topic_page(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let top = ctx.query.int("top_per_community").unwrap_or(12) as usize;
    Ok(markdown(api.store().graph().topic_page(community_id(ctx)?, top, &RouteLinker)?))
}

/// `GET /library/community/{community_id}/recent-memories`.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct CommunityMemoriesResponse {
    /// The community.
    pub community_id: u64,
    /// Memories mentioning its entities, most recent first.
    pub memories: Vec<super::dto::MemoryOut>,
}

/// A community sharing edges with another.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct RelatedCommunity {
    /// The related community.
    pub community_id: u64,
    /// Its title.
    pub title: String,
    /// Its entities.
    pub entity_count: u64,
    /// RELATES_TO edges between the two communities.
    pub shared_edge_count: u64,
}

/// `GET /library/community/{community_id}/related`.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct RelatedCommunitiesResponse {
    /// The community asked about.
    pub community_id: u64,
    /// Related communities, most shared edges first.
    pub related: Vec<RelatedCommunity>,
}

/// A crystal listed in the wiki index.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct WikiCrystal {
    /// The crystal memory.
    pub crystal_id: String,
    /// Its title.
    pub title: String,
    /// Memories it was made from.
    pub source_unit_count: Option<i64>,
}

/// One topic of the wiki index.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct WikiIndexRow {
    /// The community.
    pub community_id: u64,
    /// Its title.
    pub title: String,
    /// Its title (what `nmem wiki topics` reads).
    pub name: String,
    /// Extractive summary.
    pub summary: String,
    /// Entities in it.
    pub entity_count: u64,
    /// Entities in it (what `nmem wiki topics` reads).
    pub member_count: u64,
    /// Memories mentioning its entities.
    pub memory_count: u64,
    /// Its top entities (`top_per_community`).
    pub entities: Vec<crate::store::CommunityEntity>,
    /// Same as `entities`.
    pub top_entities: Vec<crate::store::CommunityEntity>,
    /// Crystals about its top entities.
    pub crystals: Vec<WikiCrystal>,
    /// Same as `crystals`.
    pub top_crystals: Vec<WikiCrystal>,
    /// Route of its topic page.
    pub page: String,
    /// Its top memories, when `include_top_memories` was given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub top_memories: Option<Vec<crate::store::CommunityMemory>>,
}

/// `GET /library/wiki-index`.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct WikiIndexResponse {
    /// Communities in all.
    pub total: u64,
    /// Topics, largest first.
    pub communities: Vec<WikiIndexRow>,
    /// Same as `communities`.
    pub rows: Vec<WikiIndexRow>,
}

/// The export bounds used by default.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct ExportDefaults {
    /// Entities exported, most mentioned first.
    pub entity_limit: u64,
    /// Entities listed per topic page.
    pub top_per_community: u64,
    /// Mentions per entity page.
    pub max_mentions_per_entity: u64,
}

/// `GET /library/wiki-export-summary`: what the two bundles would hold.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct ExportSummary {
    /// Topic pages.
    pub topics: u64,
    /// Entity pages.
    pub entities: u64,
    /// Crystal pages.
    pub crystals: u64,
    /// Memory pages (OKF).
    pub memories: u64,
    /// Label pages (OKF).
    pub labels: u64,
    /// The bounds used.
    pub defaults: ExportDefaults,
    /// The wiki bundle's counts.
    pub wiki: crate::library::ExportCounts,
    /// The OKF bundle's counts.
    pub okf: crate::library::ExportCounts,
}
