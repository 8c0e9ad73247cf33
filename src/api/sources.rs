//! Sources (the library, `nmem library`): ingestion by upload or server path, listing, search, content windows,
//! deletion. Spec "Sources"; client contract section 7.

use serde::Deserialize;
use utoipa::ToSchema;

use super::query::{ParamSpec, boolean, choice, int, list, required, string};
use super::route::{Dto, Shape, route};
use super::{Api, ApiResponse, Ctx};
use crate::error::{Error, FieldError, Result};
use crate::model::{Metadata, SOURCE_STATES, Source};
use crate::store::{DEFAULT_SPACE, IngestReport, NewSource, SourceQuery};

/// The routes of this module, in table order ([`super::routes::ROUTES`] gathers every module's list).
pub(super) const ROUTES: &[super::route::Route] = &[
    route!(
        "POST",
        "/sources/ingest/file",
        "ingest_source_file",
        "Ingest a document (multipart `file` part, or JSON with content): markdown, text, HTML, CSV, TSV",
        INGEST_PARAMS,
        Some(Dto::of::<IngestRequest>()),
        Shape::Ref(Dto::of::<Source>()),
        false,
        ingest_file
    ),
    route!(
        "POST",
        "/sources/ingest/path",
        "ingest_source_path",
        "Ingest a file on the server's machine (inside the data directory or an allowed directory)",
        INGEST_PARAMS,
        Some(Dto::of::<IngestRequest>()),
        Shape::Ref(Dto::of::<Source>()),
        false,
        ingest_path
    ),
    route!(
        "POST",
        "/sources/ingest/url",
        "ingest_source_url",
        "Fetch an http(s) URL and ingest it (HTML, markdown, text, CSV, TSV, DOCX); public addresses only unless \
         --allow-url-host",
        INGEST_PARAMS,
        Some(Dto::of::<IngestRequest>()),
        Shape::Ref(Dto::of::<Source>()),
        false,
        ingest_url
    ),
    route!(
        "GET",
        "/sources",
        "list_sources",
        "Sources of a space with type, state, label and metadata filters, newest first",
        LIST_PARAMS,
        None,
        Shape::Ref(Dto::of::<SourceListResponse>()),
        false,
        list_sources
    ),
    route!(
        "GET",
        "/sources/search",
        "search_sources",
        "BM25 search over source chunks and file names, grouped by source",
        SEARCH_PARAMS,
        None,
        Shape::Ref(Dto::of::<SourceSearchResponse>()),
        false,
        search_sources
    ),
    route!(
        "GET",
        "/sources/{source_id}",
        "get_source",
        "One source",
        GUARD_PARAMS,
        None,
        Shape::Ref(Dto::of::<Source>()),
        false,
        get_source
    ),
    route!(
        "GET",
        "/sources/{source_id}/content",
        "get_source_content",
        "A window of a source's parsed text (offset and limit in bytes)",
        CONTENT_PARAMS,
        None,
        Shape::Ref(Dto::of::<crate::store::SourceContent>()),
        false,
        source_content
    ),
    route!(
        "GET",
        "/sources/{source_id}/analysis",
        "analyze_source",
        "Column statistics of a CSV or TSV source: per column the inferred type, counts, min, max, mean, top values",
        ANALYSIS_PARAMS,
        None,
        Shape::Ref(Dto::of::<SourceAnalysisResponse>()),
        false,
        analyze_source
    ),
    route!(
        "DELETE",
        "/sources/{source_id}",
        "delete_source",
        "Delete a source with its text, chunks and extracted memories",
        GUARD_PARAMS,
        None,
        Shape::Ref(Dto::of::<SourceDeleteResponse>()),
        false,
        delete_source
    ),
];

pub(super) const LIST_PARAMS: &[ParamSpec] = &[
    int("limit", 1, Some(200), Some(50), "page size"),
    int("offset", 0, None, Some(0), "items to skip"),
    string("source_type", None, "only this type (`file`, `url`)"),
    choice("lifecycle_state", None, SOURCE_STATES, "only this state"),
    list("labels", "label names or ids every source must carry (repeat for AND)"),
    list("label", "alias of `labels`"),
    list("metadata", "`key=value`: different keys AND, repeated values of one key OR"),
    string("space_id", Some(DEFAULT_SPACE), "space"),
];

pub(super) const SEARCH_PARAMS: &[ParamSpec] = &[
    required("q", "query (BM25 over chunks and file names)"),
    int("limit", 1, Some(100), Some(20), "most sources"),
    string("space_id", Some(DEFAULT_SPACE), "space"),
];

pub(super) const GUARD_PARAMS: &[ParamSpec] = &[string("space_id", None, "guard: the source's space")];

pub(super) const CONTENT_PARAMS: &[ParamSpec] = &[
    int("offset", 0, None, Some(0), "start, in bytes of the parsed text"),
    int("limit", 1, Some(1_000_000), Some(8000), "window length in bytes"),
    string("space_id", None, "guard: the source's space"),
];

pub(super) const ANALYSIS_PARAMS: &[ParamSpec] = &[
    list("columns", "only these columns (repeat the parameter or separate names with commas); all by default"),
    string("space_id", None, "guard: the source's space"),
];

pub(super) const INGEST_PARAMS: &[ParamSpec] = &[
    string("space_id", None, "target space (a body field wins)"),
    boolean("extract_memories", Some(true), "extract memories from the chunks"),
];

/// JSON body of `POST /sources/ingest/file` (the C API and scripts; browsers and `nmem` send multipart with a
/// `file` part), of `POST /sources/ingest/path` and of `POST /sources/ingest/url`.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
pub struct IngestRequest {
    /// File name (JSON upload: required; `filename` is accepted for it).
    #[serde(default, alias = "filename")]
    pub file_name: Option<String>,
    /// The document as text (JSON upload: this or `content_base64`).
    #[serde(default)]
    pub content: Option<String>,
    /// The document's bytes, base64.
    #[serde(default)]
    pub content_base64: Option<String>,
    /// A file on the server's machine, inside the data directory or a `--allow-path` directory (`/path` route).
    #[serde(default)]
    pub path: Option<String>,
    /// The http or https URL to fetch (`/url` route).
    #[serde(default)]
    pub url: Option<String>,
    /// Declared MIME type.
    #[serde(default)]
    pub mime_type: Option<String>,
    /// Label names.
    #[serde(default)]
    pub labels: Option<Vec<String>>,
    /// Caller data.
    #[serde(default)]
    pub metadata: Option<Metadata>,
    /// Target space.
    #[serde(default)]
    pub space_id: Option<String>,
    /// Where the document came from.
    #[serde(default)]
    pub source_url: Option<String>,
    /// Extract memories (default true).
    #[serde(default)]
    pub extract_memories: Option<bool>,
}

fn report(r: IngestReport) -> ApiResponse {
    let mut v = serde_json::to_value(&r.source).unwrap_or_default();
    if let Some(o) = v.as_object_mut() {
        o.insert("source_id".into(), r.source.id.clone().into());
        o.insert("success".into(), true.into());
        o.insert("deduplicated".into(), r.deduplicated.into());
        o.insert("memory_ids".into(), r.memory_ids.clone().into());
        o.insert("source".into(), serde_json::to_value(&r.source).unwrap_or_default());
        let msg = if r.deduplicated { "the same document is already in the library" } else { "ingested" };
        o.insert("message".into(), msg.into());
    }
    ApiResponse::json(200, &v)
}

fn new_source(api: &Api, ctx: &Ctx<'_>, r: &IngestRequest) -> NewSource {
    let _ = api;
    NewSource {
        original_name: r.file_name.clone().unwrap_or_default(),
        mime_type: r.mime_type.clone().unwrap_or_default(),
        source_type: "file".into(),
        source_url: r.source_url.clone().unwrap_or_default(),
        space_id: r
            .space_id
            .clone()
            .filter(|s| !s.is_empty())
            .or_else(|| ctx.query.str("space_id").map(str::to_string)),
        labels: r.labels.clone().unwrap_or_default(),
        metadata: r.metadata.clone().unwrap_or_default(),
        extract_memories: r.extract_memories.unwrap_or_else(|| ctx.query.bool("extract_memories").unwrap_or(true)),
        ..Default::default()
    }
}

/// Polls a future that never waits (multer over an in-memory body) to completion.
fn ready<F: std::future::Future>(f: F) -> Option<F::Output> {
    let mut f = std::pin::pin!(f);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    // The body is already in memory, so the parser never waits; the bound only guards against a parser that
    // would, so that a request can never spin for ever.
    for _ in 0..1_000_000 {
        if let std::task::Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return Some(v);
        }
    }
    None
}

fn multipart_error(e: multer::Error) -> Error {
    Error::invalid_field(&["body"], "multipart_invalid", format!("bad multipart body: {e}"), serde_json::Value::Null)
}

/// Reads the `file` part (and `labels`, `space_id`, `metadata`, `source_url`, `extract_memories` parts).
fn parse_multipart(ctx: &Ctx<'_>) -> Result<(IngestRequest, Vec<u8>)> {
    let boundary = multer::parse_boundary(ctx.content_type).map_err(multipart_error)?;
    let body = bytes::Bytes::copy_from_slice(ctx.body);
    let stream = futures_util::stream::once(async move { Ok::<_, std::convert::Infallible>(body) });
    let mut mp = multer::Multipart::new(stream, boundary);
    let mut req = IngestRequest::default();
    let mut file: Option<Vec<u8>> = None;
    let mut labels = Vec::new();
    let stalled = || {
        Error::invalid_field(
            &["body"],
            "multipart_invalid",
            "the multipart body could not be read",
            serde_json::Value::Null,
        )
    };
    while let Some(field) = ready(mp.next_field()).ok_or_else(stalled)?.map_err(multipart_error)? {
        let name = field.name().unwrap_or("").to_string();
        match name.as_str() {
            "file" => {
                req.file_name = field.file_name().map(str::to_string);
                req.mime_type = field.content_type().map(|m| m.to_string());
                file = Some(ready(field.bytes()).ok_or_else(stalled)?.map_err(multipart_error)?.to_vec());
            }
            _ => {
                let text = ready(field.text()).ok_or_else(stalled)?.map_err(multipart_error)?;
                match name.as_str() {
                    "labels" | "label" => {
                        labels.extend(text.split(',').map(|l| l.trim().to_string()).filter(|l| !l.is_empty()))
                    }
                    "space_id" => req.space_id = Some(text),
                    "source_url" => req.source_url = Some(text),
                    "extract_memories" => req.extract_memories = Some(text.trim() != "false"),
                    "metadata" => {
                        let m: Metadata = serde_json::from_str(&text).map_err(|e| {
                            Error::invalid_field(
                                &["body", "metadata"],
                                "json_invalid",
                                format!("metadata must be a JSON object: {e}"),
                                serde_json::Value::String(text.clone()),
                            )
                        })?;
                        req.metadata = Some(m);
                    }
                    _ => {}
                }
            }
        }
    }
    if !labels.is_empty() {
        req.labels = Some(labels);
    }
    let file = file
        .ok_or_else(|| Error::invalid_field(&["body", "file"], "missing", "Field required", serde_json::Value::Null))?;
    Ok((req, file))
}

pub(super) fn ingest_file(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let (req, bytes) = if ctx.content_type.to_ascii_lowercase().starts_with("multipart/") {
        parse_multipart(ctx)?
    } else {
        let r: IngestRequest = ctx.json()?;
        if r.file_name.as_deref().is_none_or(|n| n.trim().is_empty()) {
            return Err(Error::invalid_field(
                &["body", "file_name"],
                "missing",
                "Field required: the document's file name (`file_name`, or `filename`), which names its format",
                r.file_name.clone().map_or(serde_json::Value::Null, serde_json::Value::String),
            ));
        }
        let bytes = match (&r.content, &r.content_base64) {
            (Some(t), None) => t.clone().into_bytes(),
            (None, Some(b)) => {
                use base64::Engine;
                base64::engine::general_purpose::STANDARD.decode(b.trim()).map_err(|e| {
                    Error::invalid_field(
                        &["body", "content_base64"],
                        "value_error",
                        format!("not base64: {e}"),
                        serde_json::Value::Null,
                    )
                })?
            }
            _ => {
                return Err(Error::invalid(vec![FieldError::new(
                    &["body", "content"],
                    "missing",
                    "give exactly one of `content` and `content_base64` (or upload multipart with a `file` part)",
                    serde_json::Value::Null,
                )]));
            }
        };
        (r, bytes)
    };
    let mut new = new_source(api, ctx, &req);
    new.bytes = bytes;
    Ok(report(api.store().sources().ingest(new)?))
}

pub(super) fn ingest_path(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let r: IngestRequest = ctx.json()?;
    let Some(path) = r.path.clone().filter(|p| !p.trim().is_empty()) else {
        return Err(Error::invalid_field(&["body", "path"], "missing", "Field required", serde_json::Value::Null));
    };
    let new = new_source(api, ctx, &r);
    Ok(report(api.store().sources().ingest_path(std::path::Path::new(&path), new)?))
}

pub(super) fn ingest_url(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let r: IngestRequest = ctx.json()?;
    let Some(url) = r.url.clone().filter(|u| !u.trim().is_empty()) else {
        return Err(Error::invalid_field(&["body", "url"], "missing", "Field required", serde_json::Value::Null));
    };
    let new = new_source(api, ctx, &r);
    #[cfg(feature = "url")]
    return Ok(report(api.store().sources().ingest_url(&url, new)?));
    #[cfg(not(feature = "url"))]
    {
        let _ = (url, new);
        Err(Error::new(
            crate::error::ErrorKind::Unavailable,
            "ingestion by URL needs Engram built with the `url` feature (part of `server` and `ffi`)",
        ))
    }
}

pub(super) fn list_sources(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let q = &ctx.query;
    let mut labels = q.list("labels").to_vec();
    labels.extend(q.list("label").iter().cloned());
    let mut metadata = Vec::new();
    for (i, kv) in q.list("metadata").iter().enumerate() {
        let Some((k, v)) = kv.split_once('=') else {
            return Err(Error::invalid_field(
                &["query", "metadata", &i.to_string()],
                "value_error",
                "metadata filters have the form key=value",
                serde_json::Value::String(kv.clone()),
            ));
        };
        metadata.push((k.trim().to_string(), v.to_string()));
    }
    let query = SourceQuery {
        space_id: q.str("space_id").unwrap_or(DEFAULT_SPACE).to_string(),
        source_type: q.str("source_type").map(str::to_string),
        lifecycle_state: q.str("lifecycle_state").map(str::to_string),
        labels,
        metadata,
        limit: q.limit(),
        offset: q.int("offset").map(|v| v.max(0) as usize).unwrap_or(0),
    };
    let page = api.store().sources().list(&query)?;
    Ok(ApiResponse::json(
        200,
        &SourceListResponse {
            sources: page.items,
            total: page.total as u64,
            limit: page.limit as u64,
            offset: page.offset as u64,
        },
    ))
}

pub(super) fn search_sources(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let q = &ctx.query;
    let text = q.str("q").unwrap_or("");
    let space = q.str("space_id").unwrap_or(DEFAULT_SPACE);
    let hits = api.store().sources().search(space, text, q.limit())?;
    let results: Vec<SourceSearchHit> = hits
        .into_iter()
        .map(|h| SourceSearchHit {
            source_id: h.source.id.clone(),
            title: h.source.original_name.clone(),
            source_type: h.source.source_type.clone(),
            score: h.score,
            snippet: h.chunks.first().map(|c| c.snippet.clone()).unwrap_or_default(),
            matches: h.chunks,
            source: h.source,
        })
        .collect();
    Ok(ApiResponse::json(200, &SourceSearchResponse { total: results.len() as u64, results, query: text.to_string() }))
}

pub(super) fn get_source(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let s: Source = api.store().sources().get(ctx.param("source_id"), ctx.query.str("space_id"))?;
    Ok(ApiResponse::json(200, &s))
}

pub(super) fn source_content(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let q = &ctx.query;
    let c = api.store().sources().content(
        ctx.param("source_id"),
        q.str("space_id"),
        q.int("offset").map(|v| v.max(0) as usize).unwrap_or(0),
        q.limit(),
    )?;
    Ok(ApiResponse::json(200, &c))
}

/// `GET /sources/{id}/analysis`: [`crate::store::SourceAnalysis`] with `status: "success"`.
#[derive(Debug, serde::Serialize, ToSchema)]
pub struct SourceAnalysisResponse {
    /// `success`.
    pub status: String,
    /// The source id.
    pub source_id: String,
    /// Its file name.
    pub source_name: String,
    /// One sheet per table (a CSV or TSV file has one).
    pub sheets: Vec<crate::extract::table::SheetAnalysis>,
}

/// Column names from repeated and comma-separated values, trimmed, empty ones dropped.
pub(super) fn column_names<'a>(values: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    values.into_iter().flat_map(|v| v.split(',')).map(str::trim).filter(|c| !c.is_empty()).map(String::from).collect()
}

pub(super) fn analyze_source(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let columns = column_names(ctx.query.list("columns").iter().map(String::as_str));
    let a = api.store().sources().analyze(ctx.param("source_id"), ctx.query.str("space_id"), &columns)?;
    Ok(ApiResponse::json(
        200,
        &SourceAnalysisResponse {
            status: "success".into(),
            source_id: a.source_id,
            source_name: a.source_name,
            sheets: a.sheets,
        },
    ))
}

pub(super) fn delete_source(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let (s, memories) = api.store().sources().delete(ctx.param("source_id"), ctx.query.str("space_id"))?;
    Ok(ApiResponse::json(
        200,
        &SourceDeleteResponse {
            success: true,
            deleted: true,
            id: s.id,
            original_name: s.original_name,
            memories_deleted: memories,
        },
    ))
}

/// `GET /sources`: one page of sources, newest first.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct SourceListResponse {
    /// Sources of the page.
    pub sources: Vec<Source>,
    /// Sources passing the filters.
    pub total: u64,
    /// Page size.
    pub limit: u64,
    /// Items skipped.
    pub offset: u64,
}

/// One source found by `GET /sources/search`.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct SourceSearchHit {
    /// The source.
    pub source_id: String,
    /// Its file name.
    pub title: String,
    /// `file` or `url`.
    pub source_type: String,
    /// Best chunk score (BM25).
    pub score: f32,
    /// The best chunk's text, at most 300 characters.
    pub snippet: String,
    /// Matching chunks, best first (at most 3).
    pub matches: Vec<crate::store::ChunkHit>,
    /// The source record.
    pub source: Source,
}

/// `GET /sources/search`.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct SourceSearchResponse {
    /// Sources found, best first.
    pub results: Vec<SourceSearchHit>,
    /// How many.
    pub total: u64,
    /// The query.
    pub query: String,
}

/// `DELETE /sources/{source_id}`.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct SourceDeleteResponse {
    /// Always true.
    pub success: bool,
    /// Always true.
    pub deleted: bool,
    /// The source deleted.
    pub id: String,
    /// Its file name.
    pub original_name: String,
    /// Memories extracted from it and deleted with it.
    pub memories_deleted: u64,
}
