//! Routes of the service itself: capabilities, health, liveness, the OpenAPI document and the metrics.

use super::dto::*;
use super::route::{Dto, Route, Shape, ok, route};
use super::{Api, ApiResponse, Ctx};
use crate::error::Result;

/// The routes of this module, in table order ([`super::routes::ROUTES`] gathers every module's list).
pub(super) const ROUTES: &[Route] = &[
    route!(
        "GET",
        "/capabilities",
        "get_capabilities",
        "Server version and feature flags",
        &[],
        None,
        Shape::Ref(Dto::of::<CapabilitiesResponse>()),
        true,
        capabilities
    ),
    route!(
        "GET",
        "/health",
        "get_health",
        "Health, embedder and store counters",
        &[],
        None,
        Shape::Ref(Dto::of::<HealthResponse>()),
        true,
        health
    ),
    route!("GET", "/livez", "get_livez", "Liveness probe", &[], None, Shape::Ref(Dto::of::<Liveness>()), true, livez),
    route!(
        "GET",
        "/openapi.json",
        "get_openapi",
        "This OpenAPI 3.1 document",
        &[],
        None,
        Shape::Ref(Dto::of::<OpenApiDocument>()),
        false,
        openapi
    ),
    route!(
        "GET",
        "/metrics",
        "get_metrics",
        "Prometheus metrics (OpenMetrics text format)",
        &[],
        None,
        Shape::Metrics,
        false,
        metrics
    ),
];

pub(super) fn capabilities(api: &Api, _: &Ctx<'_>) -> Result<ApiResponse> {
    let mut features = serde_json::Map::new();
    for (k, v) in [
        ("memories", true),
        ("search", true),
        ("labels", true),
        ("spaces", true),
        ("threads", true),
        ("entities", false),
        ("communities", true),
        ("library", true),
        ("sources", true),
        ("embeddings_api", true),
        ("data_import", true),
        ("fs", true),
        ("working_memory", true),
    ] {
        features.insert(k.into(), v.into());
    }
    ok(&CapabilitiesResponse {
        version: api.info.version.clone(),
        server: "engram".into(),
        api_version: "0.9.15".into(),
        features,
        embedding: embedding_status(api, &api.store().admin().health()?),
    })
}

/// The `embedding` object of `/health` and `/capabilities`.
fn embedding_status(api: &Api, h: &crate::store::StoreHealth) -> EmbeddingStatus {
    let emb = &api.store().config().embedder;
    let r = &h.reembed;
    let message = match (&api.info.embedding_fallback, r.running) {
        (Some(why), _) => why.clone(),
        (None, true) => format!("re-embedding {} of {} memories; search is lexical until done", r.done, r.total),
        (None, false) => String::new(),
    };
    EmbeddingStatus {
        mode: emb.mode().into(),
        model: emb.name().into(),
        model_id: emb.model_id().into(),
        dimension: emb.dim(),
        max_input_tokens: emb.max_input_tokens(),
        degraded: api.info.embedding_fallback.is_some() || h.reindex_pending > 0,
        message,
    }
}

pub(super) fn health(api: &Api, _: &Ctx<'_>) -> Result<ApiResponse> {
    let h = api.store().admin().health()?;
    let r = &h.reembed;
    ok(&HealthResponse {
        status: "ok".into(),
        version: api.info.version.clone(),
        database_connected: true,
        embedding: embedding_status(api, &h),
        reindex_needed: h.reindex_pending > 0,
        reindex: ReindexStatus {
            pending: h.reindex_pending,
            running: r.running,
            done: r.done,
            total: r.total,
            from_model: r.from.clone(),
            error: r.error.clone(),
        },
        memory_count: h.memories,
        generation: h.generation,
        uptime_s: api.store().admin().uptime_s(),
        vector_index: api.store().admin().vector_index_stats().iter().fold(VectorIndexHealth::default(), |mut a, s| {
            a.vectors += s.vectors;
            a.graph_points += s.graph_points;
            a.tombstones += s.tombstones;
            a.pending += s.pending;
            a
        }),
        store_format: StoreFormatHealth { version: h.format_version, last_upgrade: h.last_upgrade.clone() },
        expiry: h.expiry,
        encryption: h.encryption,
        sync: SyncHealth::of(api.store().sync().status()?),
    })
}

pub(super) fn livez(_: &Api, _: &Ctx<'_>) -> Result<ApiResponse> {
    ok(&Liveness { status: "alive" })
}

pub(super) fn openapi(_: &Api, _: &Ctx<'_>) -> Result<ApiResponse> {
    ok(&Api::openapi())
}

/// `GET /livez`: the process answers.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct Liveness {
    /// Always `alive`.
    pub status: &'static str,
}

/// `GET /openapi.json`: this document (OpenAPI 3.1). Its parts are described loosely; the OpenAPI 3.1 schema
/// (https://spec.openapis.org/oas/3.1/schema) is the full description.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct OpenApiDocument {
    /// `3.1.0`.
    pub openapi: String,
    /// Title, version and description.
    #[schema(value_type = Object)]
    pub info: serde_json::Value,
    /// The operations by path.
    #[schema(value_type = Object)]
    pub paths: serde_json::Value,
    /// Schemas and security schemes.
    #[schema(value_type = Object)]
    pub components: serde_json::Value,
    /// The server (the daemon's default address).
    #[schema(value_type = Vec<Object>)]
    pub servers: serde_json::Value,
}

/// `GET /metrics`: every instrument of the process ([`crate::metrics`]) and the store's gauges read now.
pub(super) fn metrics(api: &Api, _: &Ctx<'_>) -> Result<ApiResponse> {
    let body = crate::metrics::global().render(&api.store().admin().gauges());
    Ok(ApiResponse::text(200, "application/openmetrics-text; version=1.0.0; charset=utf-8", body))
}
