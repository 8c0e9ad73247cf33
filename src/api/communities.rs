//! Community routes (spec "Communities and library": `GET /communities`, `GET /communities/{id}`).

use super::query::{ParamSpec, int};
use super::{Api, ApiResponse, Ctx};
use crate::error::{Error, Result};

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
