//! The transport-neutral API: one route table `(method, path) -> handler` over a [`KnowledgeStore`], request
//! validation to the spec's 422 shape, and error bodies. Both the HTTP server and the C API call
//! [`Api::handle`]; nothing here knows HTTP libraries or C.

pub mod admin;
pub mod catchup;
pub mod communities;
pub mod data;
pub mod dto;
pub mod embeddings;
pub mod fs;
pub mod labels;
pub mod library;
pub mod lifecycle;
mod memories;
mod openapi;
pub mod query;
pub mod relations;
pub mod reviews;
mod route;
mod routes;
mod search;
pub mod sources;
pub mod spaces;
mod system;
pub mod threads;
pub mod tools;
pub mod working;

use std::collections::HashMap;
use std::sync::Arc;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::{Error, ErrorKind, FieldError, Result};
use crate::store::KnowledgeStore;
pub use query::{ParamKind, ParamSpec, Query};
pub use route::Route;
pub use routes::ROUTES;

/// A request: method, percent-encoded path, raw query string (without `?`) and body bytes.
#[derive(Debug, Clone, Copy)]
pub struct ApiRequest<'a> {
    /// `GET`, `POST`, `PATCH`, `PUT` or `DELETE` (case-insensitive).
    pub method: &'a str,
    /// Path such as `/memories/abc`, percent-encoded.
    pub path: &'a str,
    /// Query string without the `?`.
    pub query: &'a str,
    /// Body (JSON for routes that take one).
    pub body: &'a [u8],
    /// The `Content-Type` header (empty when unknown): multipart uploads need its boundary.
    pub content_type: &'a str,
    /// Other request headers as `(name, value)`, names in any case. Only the agent routes read them (`APP`,
    /// `X-Nmem-Space-Id`, `X-Nmem-Agent-Id`, `X-Nmem-Host-Agent-Id`, `X-Nmem-Tool-Set`); empty is fine.
    pub headers: &'a [(&'a str, &'a str)],
}

impl<'a> ApiRequest<'a> {
    /// Splits a request target `path?query` into path and query.
    pub fn from_target(method: &'a str, target: &'a str, body: &'a [u8]) -> Self {
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        ApiRequest { method, path, query, body, content_type: "", headers: &[] }
    }
}

/// A response: status, content type and body bytes.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiResponse {
    /// HTTP status code.
    pub status: u16,
    /// `application/json` for every route of this release.
    pub content_type: &'static str,
    /// Body bytes (empty when `file` holds the body).
    pub body: Vec<u8>,
    /// A large body written to a temporary file in the data directory (ZIP exports): the HTTP server streams
    /// it in chunks and deletes it; [`ApiResponse::into_bytes`] reads and deletes it.
    pub file: Option<std::path::PathBuf>,
}

impl ApiResponse {
    /// A JSON response.
    pub fn json(status: u16, value: &impl Serialize) -> Self {
        let body = serde_json::to_vec(value).unwrap_or_else(|_| b"{}".to_vec());
        ApiResponse { status, content_type: "application/json", body, file: None }
    }

    /// A text response of `content_type`.
    pub fn text(status: u16, content_type: &'static str, body: String) -> Self {
        ApiResponse { status, content_type, body: body.into_bytes(), file: None }
    }

    /// The whole body: the bytes, or the file's content (the file is deleted).
    ///
    /// # Errors
    /// [`ErrorKind::Io`] when the file cannot be read.
    pub fn into_bytes(self) -> Result<Vec<u8>> {
        match self.file {
            None => Ok(self.body),
            Some(p) => {
                let out = std::fs::read(&p);
                let _ = std::fs::remove_file(&p);
                Ok(out?)
            }
        }
    }

    /// The error response of `e`: 422 with a `detail` list for validation errors, otherwise
    /// `{"detail", "error_code", "retryable"}`. A 500 never carries internal details.
    pub fn error(e: &Error) -> Self {
        let row = e.kind().row();
        if e.kind() == ErrorKind::InvalidInput {
            return ApiResponse::json(422, &dto::ValidationErrorBody { detail: e.fields().to_vec() });
        }
        match e.kind() {
            // Designed answers: a planned feature, a component not installed.
            ErrorKind::NotImplemented | ErrorKind::Unavailable => tracing::warn!(error = %e.chain(), "request refused"),
            _ if row.http_status >= 500 => tracing::error!(error = %e.chain(), "request failed"),
            _ => {}
        }
        ApiResponse::json(
            row.http_status,
            &dto::ErrorBody {
                detail: e.message().to_string(),
                error_code: e.code().to_string(),
                retryable: row.retryable,
            },
        )
    }
}

/// Facts about the running service that `/health` and `/capabilities` report.
#[derive(Debug, Clone)]
pub struct ServiceInfo {
    /// Version string.
    pub version: String,
    /// Why a fallback embedder runs in place of the one asked for, if one does ([`crate::embed::SelectedEmbedder`]).
    /// Reported as `embedding.degraded: true` with this message.
    pub embedding_fallback: Option<String>,
}

impl Default for ServiceInfo {
    fn default() -> Self {
        ServiceInfo { version: env!("CARGO_PKG_VERSION").to_string(), embedding_fallback: None }
    }
}

/// The API over one store.
#[derive(Debug, Clone)]
pub struct Api {
    store: Arc<KnowledgeStore>,
    info: ServiceInfo,
}

/// What a handler sees: path parameters, the validated query, the body.
pub struct Ctx<'a> {
    /// Decoded path parameters by name.
    pub params: HashMap<String, String>,
    /// Validated query.
    pub query: Query,
    /// Body bytes.
    pub body: &'a [u8],
    /// The `Content-Type` header (empty when unknown).
    pub content_type: &'a str,
    /// Request headers (see [`ApiRequest::headers`]).
    pub headers: &'a [(&'a str, &'a str)],
}

impl Ctx<'_> {
    /// A path parameter (empty if the route has none of that name).
    pub fn param(&self, name: &str) -> &str {
        self.params.get(name).map(String::as_str).unwrap_or("")
    }

    /// The body parsed as `T`.
    ///
    /// # Errors
    /// 422 (`missing` for an empty body, `json_invalid` for bad JSON, `*_type` with the field's location for a
    /// wrong type or a missing required field).
    pub fn json<T: DeserializeOwned>(&self) -> Result<T> {
        if self.body.iter().all(u8::is_ascii_whitespace) {
            return Err(Error::invalid_field(&["body"], "missing", "Field required", serde_json::Value::Null));
        }
        // The typed parse straight from the bytes is the fast path (no intermediate `Value`: a 384-float
        // `query_embedding` is one allocation, not 384 tree nodes and their copy). Anything it refuses (bad
        // input, and duplicate keys, which the `Value` path accepts as before, last one winning) takes the
        // `Value` path, which answers the same value or the field-level error.
        if let Ok(v) = serde_json::from_slice::<T>(self.body) {
            return Ok(v);
        }
        let value: serde_json::Value = serde_json::from_slice(self.body).map_err(|e| {
            Error::invalid(vec![
                FieldError::new(&["body"], "json_invalid", format!("JSON decode error: {e}"), serde_json::Value::Null)
                    .with_ctx(serde_json::json!({"error": e.to_string()})),
            ])
        })?;
        let input = value.clone();
        serde_path_to_error::deserialize(value).map_err(|e| {
            use serde_path_to_error::Segment;
            let mut loc: Vec<&str> = vec!["body"];
            // `messages[0].content` becomes ["messages", 0, "content"], as FastAPI reports it.
            let parts: Vec<String> = e
                .path()
                .iter()
                .filter_map(|seg| match seg {
                    Segment::Seq { index } => Some(index.to_string()),
                    Segment::Map { key } => Some(key.clone()),
                    Segment::Enum { variant } => Some(variant.clone()),
                    Segment::Unknown => None,
                })
                .collect();
            let inner = e.into_inner().to_string();
            let kind = if inner.starts_with("missing field") { "missing" } else { "type_error" };
            let missing_field =
                inner.strip_prefix("missing field `").and_then(|s| s.split('`').next()).map(str::to_string);
            loc.extend(parts.iter().map(String::as_str));
            if let Some(f) = &missing_field {
                loc.push(f);
            }
            let offending = lookup(&input, &parts).cloned().unwrap_or(serde_json::Value::Null);
            let msg = if kind == "missing" { "Field required".to_string() } else { inner };
            Error::invalid(vec![FieldError::new(&loc, kind, msg, offending)])
        })
    }
}

fn lookup<'v>(v: &'v serde_json::Value, path: &[String]) -> Option<&'v serde_json::Value> {
    let mut cur = v;
    for p in path {
        cur = match cur {
            serde_json::Value::Object(m) => m.get(p)?,
            serde_json::Value::Array(a) => a.get(p.trim_matches(|c| c == '[' || c == ']').parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(cur)
}

/// Whether `path` has the shape of `template` (each `{param}` takes one non-empty segment, the rest equal), and
/// its number of literal segments; no allocation, no decoding. Every route is tried with it first: only a fit
/// is matched again with [`match_path`] for its parameters.
fn template_fit(template: &str, path: &str) -> Option<usize> {
    let mut t = template.trim_matches('/').split('/');
    let mut p = path.trim_matches('/').split('/');
    let mut literals = 0;
    loop {
        match (t.next(), p.next()) {
            (None, None) => return Some(literals),
            (Some(ts), Some(ps)) if ts.starts_with('{') && ts.ends_with('}') => {
                if ps.is_empty() {
                    return None;
                }
            }
            (Some(ts), Some(ps)) if ts == ps => literals += 1,
            _ => return None,
        }
    }
}

/// Matches `path` against a route template; returns the decoded parameters and the number of literal segments.
fn match_path(template: &str, path: &str) -> Option<(HashMap<String, String>, usize)> {
    let t: Vec<&str> = template.trim_matches('/').split('/').collect();
    let p: Vec<&str> = path.trim_matches('/').split('/').collect();
    if t.len() != p.len() {
        return None;
    }
    let mut params = HashMap::new();
    let mut literals = 0;
    for (ts, ps) in t.iter().zip(&p) {
        if let Some(name) = ts.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
            let decoded = percent_decode(ps)?;
            if decoded.is_empty() {
                return None;
            }
            params.insert(name.to_string(), decoded);
        } else if ts == ps {
            literals += 1;
        } else {
            return None;
        }
    }
    Some((params, literals))
}

fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// Puts the transport in front of the field locations of a library error (`["importance"]` becomes
/// `["body", "importance"]`): `query` for a field the route declares as a query parameter or a route without a
/// body, `body` otherwise. Locations that name their transport already are kept.
fn place_fields(e: Error, route: &Route) -> Error {
    if e.fields().iter().all(|f| f.in_request) {
        return e;
    }
    e.map_fields(|mut f| {
        let first = f.loc.first().and_then(|v| v.as_str());
        // A field named like a parameter of the route's path (`{source_id}`) came from the path.
        let in_path = first.is_some_and(|n| route.path.contains(&format!("{{{n}}}")));
        let in_query = route.body.is_none() || first.is_some_and(|n| route.query.iter().any(|p| p.name == n));
        f.place(&[if in_path {
            "path"
        } else if in_query {
            "query"
        } else {
            "body"
        }
        .into()]);
        f
    })
}

impl Api {
    /// The API over `store`.
    pub fn new(store: Arc<KnowledgeStore>, info: ServiceInfo) -> Self {
        Api { store, info }
    }

    /// The store.
    pub fn store(&self) -> &KnowledgeStore {
        &self.store
    }

    /// The shared store (for background jobs).
    pub fn store_arc(&self) -> &Arc<KnowledgeStore> {
        &self.store
    }

    /// Service facts.
    pub fn info(&self) -> &ServiceInfo {
        &self.info
    }

    /// Whether `path` is served without an API key (`/capabilities`, `/health`, `/livez`).
    pub fn is_public(method: &str, path: &str) -> bool {
        let path = if path.len() > 1 { path.trim_end_matches('/') } else { path };
        ROUTES.iter().any(|r| r.public && r.method.eq_ignore_ascii_case(method) && r.path == path)
    }

    /// The methods of the most specific path templates matching `path` (for the `Allow` header of a 405, as
    /// the OpenAPI document lists them), in route-table order; empty for an unknown path.
    pub fn allowed_methods(path: &str) -> Vec<&'static str> {
        let matches: Vec<(&Route, usize)> =
            ROUTES.iter().filter_map(|r| match_path(r.path, path).map(|(_, literals)| (r, literals))).collect();
        let best = matches.iter().map(|m| m.1).max().unwrap_or(0);
        let mut out: Vec<&'static str> = Vec::new();
        for (r, literals) in matches {
            if literals == best && !out.contains(&r.method) {
                out.push(r.method);
            }
        }
        out
    }

    /// The path template of the route table that `path` falls under (`/memories/{memory_id}` for
    /// `/memories/abc`), whatever the method; None for a path no route serves. What metrics and logs name a
    /// request by: never the raw path, which may hold ids.
    pub fn route_template(path: &str) -> Option<&'static str> {
        ROUTES
            .iter()
            .filter_map(|r| template_fit(r.path, path).map(|literals| (r.path, literals)))
            .fold(
                None,
                |best: Option<(&'static str, usize)>, m| if best.is_some_and(|b| b.1 >= m.1) { best } else { Some(m) },
            )
            .map(|m| m.0)
    }

    /// Runs one request: route, validate the query, call the handler, map errors. Never panics on input.
    pub fn handle(&self, req: ApiRequest<'_>) -> ApiResponse {
        match self.dispatch(req) {
            Ok(resp) => resp,
            Err(e) => ApiResponse::error(&e),
        }
    }

    /// Routes `req` and runs its handler, keeping the typed error.
    fn dispatch(&self, req: ApiRequest<'_>) -> Result<ApiResponse> {
        let mut best: Option<(&Route, HashMap<String, String>, usize)> = None;
        let mut path_known = false;
        for r in ROUTES.iter() {
            if template_fit(r.path, req.path).is_none() {
                continue;
            }
            if let Some((params, literals)) = match_path(r.path, req.path) {
                path_known = true;
                if r.method.eq_ignore_ascii_case(req.method) && best.as_ref().is_none_or(|b| literals > b.2) {
                    best = Some((r, params, literals));
                }
            }
        }
        let Some((route, params, _)) = best else {
            return Err(if path_known {
                Error::new(ErrorKind::MethodNotAllowed, format!("method {} not allowed on {}", req.method, req.path))
            } else {
                Error::new(ErrorKind::RouteNotFound, format!("no route for {}", req.path))
            });
        };
        let query = Query::parse(req.query, route.query)?;
        let ctx = Ctx { params, query, body: req.body, content_type: req.content_type, headers: req.headers };
        (route.handler)(self, &ctx).map_err(|e| place_fields(e, route))
    }

    /// The OpenAPI 3.1 document of every route, generated from the route table and the DTO schemas.
    pub fn openapi() -> serde_json::Value {
        openapi::document()
    }
}
