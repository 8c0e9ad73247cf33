//! Community routes (spec "Communities and library": `GET /communities`, `GET /communities/{id}`).

use super::query::{ParamSpec, int};
use super::routes::{Shape, route};
use super::{Api, ApiResponse, Ctx};
use crate::error::{Error, Result};

/// The routes of this module, in table order ([`super::routes::ROUTES`] gathers every module's list).
pub(super) const ROUTES: &[super::routes::Route] = &[
    route!(
        "GET",
        "/communities",
        "list_communities",
        "Communities of the global entity graph (Louvain), heaviest first, with extractive summaries",
        LIST_PARAMS,
        None,
        Shape::Object,
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
        Shape::Object,
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
        Shape::Object,
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
    let limit = ctx.query.int("limit").unwrap_or(20) as usize;
    let (communities, total) = api.store().list_communities(limit)?;
    let report = api.store().graph_report();
    Ok(ApiResponse::json(
        200,
        &serde_json::json!({
            "communities": communities,
            "total": total,
            "summary_method": "extractive",
            "computed": report,
        }),
    ))
}

pub(super) fn get(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let id = community_id(ctx)?;
    let limit = ctx.query.int("entity_limit").unwrap_or(20) as usize;
    let (c, entities) = api.store().get_community(id, limit)?;
    let memories = c.top_memories.clone();
    Ok(ApiResponse::json(200, &serde_json::json!({"community": c, "entities": entities, "memories": memories})))
}

pub(super) const CRYSTAL_SOURCE_PARAMS: &[ParamSpec] = &[int("limit", 1, Some(100), Some(50), "source memories")];

pub(super) fn crystal_sources(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let id = ctx.param("crystal_id");
    let limit = ctx.query.int("limit").unwrap_or(50) as usize;
    let sources = api.store().crystal_sources(id, limit)?;
    let rows: Vec<serde_json::Value> = sources
        .into_iter()
        .map(|(v, w)| {
            let mut m = serde_json::to_value(super::dto::MemoryOut::from(v)).unwrap_or_default();
            if let Some(o) = m.as_object_mut() {
                o.insert("contribution_weight".into(), w.into());
                o.insert("relation".into(), "CRYSTALLIZED_FROM".into());
            }
            m
        })
        .collect();
    Ok(ApiResponse::json(200, &serde_json::json!({"crystal_id": id, "total": rows.len(), "source_memories": rows})))
}
