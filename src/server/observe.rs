//! What the daemon records about each request: a request id (taken from `X-Request-Id` when it is a sane
//! token, otherwise a new UUID), a tracing span carrying it and the route template, the Prometheus request
//! counter and latency histogram ([`crate::metrics`]), and the id echoed in the response's `X-Request-Id`.
//! The raw path and query never reach a label or a log field: a route template names the request.

use std::time::Instant;

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, Response};

use crate::api::Api;
use crate::metrics::{self, HttpLabels};

/// The request id header, read and written.
pub const REQUEST_ID_HEADER: &str = "x-request-id";

/// The longest request id taken from a client: 128 bytes.
const MAX_ID_BYTES: usize = 128;

/// The client's `X-Request-Id` when it is 1..=128 bytes of `[A-Za-z0-9._:-]`, else a new UUID v7 (simple
/// form). A client id outside that set is replaced, not echoed: it could carry text into the logs.
pub(super) fn request_id(headers: &HeaderMap) -> String {
    let given = headers.get(REQUEST_ID_HEADER).and_then(|v| v.to_str().ok()).filter(|v| {
        !v.is_empty()
            && v.len() <= MAX_ID_BYTES
            && v.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-'))
    });
    match given {
        Some(v) => v.to_string(),
        None => uuid::Uuid::now_v7().simple().to_string(),
    }
}

/// The route label of `path`: the route table's template, or a fixed name for the daemon's own paths.
pub(super) fn route_label(path: &str) -> &'static str {
    if super::console::is_console_path(path) {
        "/ui/*"
    } else if super::sync::is_peer_path(path) {
        "/sync/peer/*"
    } else if super::mcp::is_mcp_path(path) {
        "/mcp"
    } else {
        Api::route_template(path).unwrap_or("unmatched")
    }
}

/// Counts the answered request, records its latency, logs it at debug (template, status, milliseconds) and
/// puts its id in the response.
pub(super) fn finish(resp: &mut Response<Body>, id: &str, route: &'static str, method: &'static str, started: Instant) {
    let status = resp.status().as_u16();
    let labels = HttpLabels { route, method, status: metrics::status_class(status) };
    let m = metrics::global();
    let elapsed = started.elapsed();
    m.http_requests.get_or_create(&labels).inc();
    m.http_duration.get_or_create(&labels).observe(elapsed.as_secs_f64());
    tracing::debug!(status, ms = elapsed.as_secs_f64() * 1000.0, "request answered");
    if let Ok(v) = HeaderValue::from_str(id) {
        resp.headers_mut().insert(REQUEST_ID_HEADER, v);
    }
}
