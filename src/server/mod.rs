//! The HTTP daemon (feature `server`): axum on hyper. Every request passes a guard before it reaches the shared
//! route table: Host-header allowlist (403; closes DNS rebinding, cf. CVE-2024-28224), API key on every route
//! but `/capabilities`, `/health` and `/livez` (401, constant-time comparison), body-size limit (413, enforced
//! while reading, so chunked bodies are capped too), a lockout after repeated wrong keys from one address (429
//! for 10 minutes after 8 failures within 5 minutes, as the reference product does), and an Origin check for
//! browser requests (403 unless the origin's host is an allowed Host name or the origin is configured with
//! `--cors-origin`). Handlers run on tokio's blocking pool. CORS headers are sent only for configured origins.
//! Connections are served by hyper's HTTP/1 builder with a timer, so slow clients are cut off: headers within
//! [`DEFAULT_HEADER_READ_TIMEOUT`] (also the idle limit of kept-alive connections), the body within
//! [`DEFAULT_BODY_READ_TIMEOUT`] (408), at most [`DEFAULT_MAX_CONNECTIONS`] open. Every request gets an id
//! (`X-Request-Id`, echoed) and a tracing span with its route template, and is counted in the Prometheus
//! metrics of `GET /metrics` (`observe.rs`; the key is needed there too unless
//! [`ServerConfig::metrics_public`]).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, HeaderValue, Request, Response, StatusCode, header};
use subtle::ConstantTimeEq;

use crate::api::{Api, ApiRequest, ApiResponse, ServiceInfo};
use crate::error::{Error, ErrorKind, Result};
use crate::store::KnowledgeStore;
pub use alloc::cap_malloc_arenas;
use lockout::Lockout;
pub use lockout::{LOCKOUT_BLOCK, LOCKOUT_FAILURES, LOCKOUT_WINDOW};

mod alloc;
mod backups;
pub mod client;
pub mod console;
mod lockout;
pub mod mcp;
mod observe;
pub mod sync;

/// Default listen address.
pub const DEFAULT_ADDR: &str = "127.0.0.1:14242";
/// Default body limit: 8 MiB.
pub const DEFAULT_MAX_BODY_BYTES: usize = 8 << 20;
/// Default time a client has to send a request's headers, and the longest a kept-alive connection may sit
/// idle: 15 s.
pub const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(15);
/// Default time a client has to send a request's body once its headers arrived: 60 s (8 MiB at 140 KiB/s).
pub const DEFAULT_BODY_READ_TIMEOUT: Duration = Duration::from_secs(60);
/// Default number of open connections; further clients wait in the kernel's accept queue: 512.
pub const DEFAULT_MAX_CONNECTIONS: usize = 512;
/// How long a shutdown waits for in-flight requests before it closes their connections: 30 s.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(30);

/// Daemon configuration.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Address to bind (default `127.0.0.1:14242`; port 0 picks a free one).
    pub addr: SocketAddr,
    /// The API key; None reads or creates `<data_dir>/api-key`.
    pub api_key: Option<String>,
    /// Data directory (for the key file).
    pub data_dir: PathBuf,
    /// Host names accepted besides `localhost`, `127.0.0.1`, `::1` and the bound address.
    pub allowed_hosts: Vec<String>,
    /// Largest request body in bytes.
    pub max_body_bytes: usize,
    /// Browser origins (`scheme://host[:port]`, exact) that get CORS headers; none by default.
    pub cors_origins: Vec<String>,
    /// Time allowed for a request's headers, and for an idle kept-alive connection (slow clients are
    /// disconnected; default [`DEFAULT_HEADER_READ_TIMEOUT`]).
    pub header_read_timeout: Duration,
    /// Time allowed for a request's body once its headers arrived (408 `request_timeout`, then the connection
    /// closes; default [`DEFAULT_BODY_READ_TIMEOUT`]).
    pub body_read_timeout: Duration,
    /// Open connections served at once (default [`DEFAULT_MAX_CONNECTIONS`]).
    pub max_connections: usize,
    /// Wrong keys from one address within [`LOCKOUT_WINDOW`] that block it for [`LOCKOUT_BLOCK`] (default
    /// [`LOCKOUT_FAILURES`]); 0 turns the lockout off, for test harnesses that send wrong keys on purpose.
    pub lockout_failures: usize,
    /// Serve the web console at `/ui/` and its cookie sessions (default true; `engram serve --no-console`
    /// turns it off for a server that wants the API only).
    pub console: bool,
    /// Run the sync worker ([`sync`]; `engram serve --sync`): the store must be in a sync group with a folder.
    pub sync: bool,
    /// Daemons of the same sync group to pull segments from directly (`http://host:port`; `engram serve --sync
    /// --sync-peer URL`), besides the folder.
    pub sync_peers: Vec<String>,
    /// Serve `GET /metrics` without the API key (`engram serve --metrics-public`), for a Prometheus that
    /// scrapes without credentials on a trusted network. Off by default: the metrics name routes and counts.
    pub metrics_public: bool,
    /// Online backups on a schedule (`engram serve --backup-every 24h --backup-keep 7`): every `every`, a
    /// backup into `<data_dir>/backups/`, keeping the newest `keep`. None: no scheduled backups.
    pub backups: Option<ScheduledBackups>,
}

/// A backup schedule ([`ServerConfig::backups`]).
#[derive(Debug, Clone, Copy)]
pub struct ScheduledBackups {
    /// Time between two backups (the first runs one interval after the start).
    pub every: Duration,
    /// Backups kept in `<data_dir>/backups/` (older ones written by the schedule are deleted); at least 1.
    pub keep: usize,
}

impl ServerConfig {
    /// Defaults for `data_dir`.
    pub fn new(data_dir: impl AsRef<Path>) -> Self {
        ServerConfig {
            addr: DEFAULT_ADDR.parse().unwrap_or_else(|_| SocketAddr::from(([127, 0, 0, 1], 14242))),
            api_key: None,
            data_dir: data_dir.as_ref().to_path_buf(),
            allowed_hosts: vec![],
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            cors_origins: vec![],
            header_read_timeout: DEFAULT_HEADER_READ_TIMEOUT,
            body_read_timeout: DEFAULT_BODY_READ_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            lockout_failures: LOCKOUT_FAILURES,
            console: true,
            sync: false,
            sync_peers: Vec::new(),
            metrics_public: false,
            backups: None,
        }
    }
}

/// Reads the key from `<data_dir>/api-key`, or creates it with 256 random bits and mode 0600.
///
/// # Errors
/// [`ErrorKind::Io`] when the file cannot be read or written; [`ErrorKind::Forbidden`] when it exists and other
/// users can read it (fix with `chmod 600`).
pub fn load_or_create_key(data_dir: &Path) -> Result<(String, PathBuf)> {
    let path = data_dir.join("api-key");
    std::fs::create_dir_all(data_dir)?;
    if path.exists() {
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path)?.permissions().mode();
            if mode & 0o077 != 0 {
                return Err(Error::new(
                    ErrorKind::Forbidden,
                    format!(
                        "{} is readable by other users (mode {:o}); run chmod 600 on it",
                        path.display(),
                        mode & 0o777
                    ),
                ));
            }
        }
        let key = std::fs::read_to_string(&path)?.trim().to_string();
        if !key.is_empty() {
            return Ok((key, path));
        }
    }
    let key = format!("engram_{}{}", uuid::Uuid::new_v4().simple(), uuid::Uuid::new_v4().simple());
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    use std::io::Write;
    let mut f = opts.open(&path)?;
    f.write_all(key.as_bytes())?;
    f.sync_all()?;
    Ok((key, path))
}

struct AppState {
    api: Api,
    mcp: rmcp::transport::streamable_http_server::StreamableHttpService<
        mcp::McpFront,
        rmcp::transport::streamable_http_server::session::never::NeverSessionManager,
    >,
    key: String,
    hosts: Vec<String>,
    max_body: usize,
    body_timeout: Duration,
    cors: Vec<String>,
    lockout: Lockout,
    /// The console's sessions and sign-in tokens; None with the console off.
    console: Option<console::Sessions>,
    /// `GET /metrics` without the API key (`--metrics-public`).
    metrics_public: bool,
}

/// A response body read from a temporary file in 64 KiB chunks; the file is deleted when the body is dropped.
struct FileBody {
    file: std::fs::File,
    path: std::path::PathBuf,
    done: bool,
}

impl http_body::Body for FileBody {
    type Data = axum::body::Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<std::result::Result<http_body::Frame<Self::Data>, Self::Error>>> {
        use std::io::Read;
        if self.done {
            return std::task::Poll::Ready(None);
        }
        let mut buf = vec![0u8; 64 * 1024];
        match self.file.read(&mut buf) {
            Ok(0) => {
                self.done = true;
                std::task::Poll::Ready(None)
            }
            Ok(n) => {
                buf.truncate(n);
                std::task::Poll::Ready(Some(Ok(http_body::Frame::data(axum::body::Bytes::from(buf)))))
            }
            Err(e) => {
                self.done = true;
                std::task::Poll::Ready(Some(Err(e)))
            }
        }
    }
}

impl Drop for FileBody {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

fn respond(r: ApiResponse) -> Response<Body> {
    if let Some(path) = r.file.clone() {
        return match std::fs::File::open(&path) {
            Ok(file) => {
                let len = file.metadata().map(|m| m.len()).ok();
                let mut resp = Response::new(Body::new(FileBody { file, path, done: false }));
                *resp.status_mut() = StatusCode::from_u16(r.status).unwrap_or(StatusCode::OK);
                resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(r.content_type));
                if let Some(n) = len.and_then(|n| HeaderValue::from_str(&n.to_string()).ok()) {
                    resp.headers_mut().insert(header::CONTENT_LENGTH, n);
                }
                resp
            }
            Err(e) => {
                let _ = std::fs::remove_file(&path);
                tracing::error!(error = %e, "export file vanished");
                reject(ErrorKind::Internal, "internal error")
            }
        };
    }
    let mut resp = Response::new(Body::from(r.body));
    *resp.status_mut() = StatusCode::from_u16(r.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(r.content_type));
    resp
}

fn reject(kind: ErrorKind, msg: &str) -> Response<Body> {
    let mut resp = respond(ApiResponse::error(&Error::new(kind, msg)));
    if kind == ErrorKind::Unauthorized {
        resp.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    }
    resp
}

/// 429 with `Retry-After`.
fn too_many(secs: u64) -> Response<Body> {
    let mut resp = reject(ErrorKind::TooManyRequests, "too many wrong api keys from this address; try again later");
    if let Ok(v) = HeaderValue::from_str(&secs.to_string()) {
        resp.headers_mut().insert(header::RETRY_AFTER, v);
    }
    resp
}

/// The answer to a CORS preflight from a configured origin.
fn preflight(origin: &str) -> Response<Body> {
    let mut resp = Response::new(Body::empty());
    *resp.status_mut() = StatusCode::NO_CONTENT;
    let h = resp.headers_mut();
    if let Ok(v) = HeaderValue::from_str(origin) {
        h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, v);
    }
    h.insert(header::ACCESS_CONTROL_ALLOW_METHODS, HeaderValue::from_static("GET, POST, PUT, PATCH, DELETE"));
    h.insert(
        header::ACCESS_CONTROL_ALLOW_HEADERS,
        HeaderValue::from_static("authorization, content-type, x-nmem-api-key"),
    );
    h.insert(header::ACCESS_CONTROL_MAX_AGE, HeaderValue::from_static("600"));
    h.insert(header::VARY, HeaderValue::from_static("Origin"));
    resp
}

/// The host of an Origin value (`scheme://host[:port]`), lowercase; None for `null` and malformed values.
fn origin_host(origin: &str) -> Option<String> {
    let rest = origin.split_once("://")?.1;
    if rest.contains('/') || rest.is_empty() {
        return None;
    }
    Some(host_name(rest))
}

/// The host part of a Host header value (`name:port`, `[v6]:port`), lowercase.
fn host_name(value: &str) -> String {
    let v = value.trim().to_ascii_lowercase();
    if let Some(rest) = v.strip_prefix('[') {
        return rest.split(']').next().unwrap_or("").to_string();
    }
    match v.rsplit_once(':') {
        Some((h, port)) if port.chars().all(|c| c.is_ascii_digit()) => h.to_string(),
        _ => v,
    }
}

/// Every key a request presents: each `Authorization` header (None unless it uses the Bearer scheme) and each
/// `X-NMEM-API-Key` header.
fn presented_keys(headers: &HeaderMap) -> Vec<Option<&[u8]>> {
    let mut out = Vec::new();
    for v in headers.get_all(header::AUTHORIZATION) {
        let b = v.as_bytes();
        out.push((b.len() > 7 && b[..7].eq_ignore_ascii_case(b"bearer ")).then(|| b[7..].trim_ascii()));
    }
    for v in headers.get_all("x-nmem-api-key") {
        out.push(Some(v.as_bytes().trim_ascii()));
    }
    out
}

/// True when keys were presented and every one is `key` (constant-time comparisons).
fn keys_match(keys: &[Option<&[u8]>], key: &str) -> bool {
    !keys.is_empty() && keys.iter().all(|k| k.is_some_and(|k| !k.is_empty() && bool::from(k.ct_eq(key.as_bytes()))))
}

/// A request of the direct sync transport ([`sync::peer_call`]): the lockout, the call off the runtime, and its
/// answer (a wrong token counts as a wrong key).
async fn peer_route(
    st: &Arc<AppState>,
    peer: SocketAddr,
    method: String,
    path: String,
    query: String,
    token: Option<Vec<u8>>,
) -> Response<Body> {
    if let Some(secs) = st.lockout.blocked(peer.ip()) {
        return too_many(secs);
    }
    let call = |st: Arc<AppState>, method: String, path: String, query: String, token: Option<Vec<u8>>| {
        tokio::task::spawn_blocking(move || sync::peer_call(st.api.store(), &method, &path, &query, token.as_deref()))
    };
    // A long poll: a list request that saw this folder's generation waits (authorised first) until it changes.
    let long = sync::long_poll(&path, &query);
    let mut generation = sync::FOLDER.current();
    let mut out = call(st.clone(), method.clone(), path.clone(), query.clone(), token.clone()).await;
    if let (Some((since, wait)), Ok(Ok(sync::PeerOut::List(_)))) = (&long, &out)
        && *since == generation
    {
        sync::FOLDER.wait_past(since, *wait).await;
        generation = sync::FOLDER.current();
        out = call(st.clone(), method, path, query, token).await;
    }
    match out {
        Ok(Ok(sync::PeerOut::List(mut v))) => {
            v["generation"] = generation.into();
            respond(ApiResponse::json(200, &v))
        }
        Ok(Ok(sync::PeerOut::File(bytes))) => {
            let mut resp = Response::new(Body::from(bytes));
            resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/octet-stream"));
            resp
        }
        Ok(Err(e)) => {
            if e.kind() == ErrorKind::Unauthorized && st.lockout.fail(peer.ip()) {
                tracing::warn!(%peer, "too many wrong sync tokens: address blocked for 10 minutes");
                return too_many(LOCKOUT_BLOCK.as_secs());
            }
            respond(ApiResponse::error(&e))
        }
        Err(e) => {
            tracing::error!(error = %e, "a sync peer request stopped");
            reject(ErrorKind::Internal, "internal error")
        }
    }
}

/// Every request: its id, span and metrics ([`observe`]) around [`route_request`].
async fn handle(
    State(st): State<Arc<AppState>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    req: Request<Body>,
) -> Response<Body> {
    use tracing::Instrument;
    let started = std::time::Instant::now();
    let id = observe::request_id(req.headers());
    let route = observe::route_label(req.uri().path());
    let method = crate::metrics::method_label(req.method().as_str());
    let span = tracing::info_span!("request", request_id = %id, route, method);
    let mut resp = route_request(st, peer, req).instrument(span.clone()).await;
    span.in_scope(|| observe::finish(&mut resp, &id, route, method, started));
    resp
}

async fn route_request(st: Arc<AppState>, peer: SocketAddr, req: Request<Body>) -> Response<Body> {
    let (parts, body) = req.into_parts();
    let host = parts.headers.get(header::HOST).and_then(|h| h.to_str().ok()).map(host_name);
    if !host.as_ref().is_some_and(|h| st.hosts.iter().any(|a| a == h)) {
        tracing::warn!(%peer, host = ?host, "rejected Host header");
        return reject(ErrorKind::Forbidden, "host not allowed");
    }
    let method = parts.method.as_str().to_string();
    let path = parts.uri.path().to_string();
    let query = parts.uri.query().unwrap_or("").to_string();
    // Browser requests: the Origin must be one of ours (a page on another site cannot drive the store, even
    // with a key it learned) or configured for CORS.
    let origin = parts.headers.get(header::ORIGIN).map(|v| v.to_str().unwrap_or("\u{0}").to_string());
    let cors_ok = origin.as_ref().is_some_and(|o| st.cors.iter().any(|c| c == o));
    if let Some(o) = &origin {
        let local = origin_host(o).is_some_and(|h| st.hosts.contains(&h));
        if !local && !cors_ok {
            tracing::warn!(%peer, origin = %o, "rejected Origin header");
            return reject(ErrorKind::Forbidden, "origin not allowed");
        }
    }
    if method == "OPTIONS" && cors_ok {
        return preflight(origin.as_deref().unwrap_or(""));
    }
    // The console's cookie is honoured for this daemon's own origin only (scheme, host and port): a page on
    // another port of this host is another program.
    let own_origin = origin.as_deref().is_none_or(|o| {
        parts.headers.get(header::HOST).and_then(|h| h.to_str().ok()).is_some_and(|h| o == format!("http://{h}"))
    });
    if let Some(sessions) = &st.console
        && console::is_console_path(&path)
    {
        if let Some(resp) = console_call(&st, sessions, peer, &method, &path, &parts.headers, body, own_origin).await {
            return resp;
        }
        return console::static_answer(&method, &path);
    }
    // The direct sync transport: authorised by the group's pull token, never by the API key.
    if sync::is_peer_path(&path) {
        let token = parts.headers.get(sync::TOKEN_HEADER).map(|v| v.as_bytes().to_vec());
        return peer_route(&st, peer, method, path, query, token).await;
    }
    let content_type = parts.headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
    let public = Api::is_public(&method, &path) || (st.metrics_public && path == "/metrics");
    if !public {
        if let Some(secs) = st.lockout.blocked(peer.ip()) {
            return too_many(secs);
        }
        // Every key header must carry the key (the official CLI sends both headers); one wrong or malformed
        // header among right ones is refused.
        let keys = presented_keys(&parts.headers);
        let mut ok = keys_match(&keys, &st.key);
        // No key: the console's session cookie, for same-origin requests only (a page on another site, or on
        // another port of this host, cannot ride on it).
        if keys.is_empty()
            && let Some(sessions) = &st.console
            && let Some(id) = console::session_cookie(&parts.headers)
        {
            if console::cross_site(&parts.headers, !own_origin) {
                tracing::warn!(%peer, "rejected a cross-site request carrying the console's session cookie");
                return reject(ErrorKind::Forbidden, "cross-site request with the console's session refused");
            }
            if sessions.touch(&id) {
                ok = true;
            } else {
                return reject(ErrorKind::Unauthorized, "console session expired; sign in again");
            }
        }
        if !ok {
            if !keys.is_empty() && st.lockout.fail(peer.ip()) {
                tracing::warn!(%peer, "too many wrong api keys: address blocked for 10 minutes");
                return too_many(LOCKOUT_BLOCK.as_secs());
            }
            let msg = if keys.is_empty() { "missing api key" } else { "invalid api key" };
            return reject(ErrorKind::Unauthorized, msg);
        }
        st.lockout.succeed(peer.ip());
    }
    let declared =
        parts.headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    let bytes = match read_body(body, st.max_body, declared, st.body_timeout).await {
        BodyRead::Complete(b) => b,
        BodyRead::TooLarge => return closing(ErrorKind::PayloadTooLarge, "request body too large"),
        BodyRead::Broken => return closing(ErrorKind::BadRequest, "request body could not be read"),
        BodyRead::TimedOut => {
            tracing::warn!(%peer, "request body not received in time");
            return closing(ErrorKind::Timeout, "request body not received in time");
        }
    };
    if mcp::is_mcp_path(&path) {
        use tower::ServiceExt;
        let req = Request::from_parts(parts, Body::from(bytes));
        return match st.mcp.clone().oneshot(req).await {
            Ok(r) => r.map(Body::new),
            Err(never) => match never {},
        };
    }
    let st2 = st.clone();
    let route_path = path.clone();
    let scope_headers = agent_headers(&parts.headers);
    let span = tracing::Span::current();
    let out = tokio::task::spawn_blocking(move || {
        let _in = span.enter();
        let headers: Vec<(&str, &str)> = scope_headers.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let req = ApiRequest {
            method: &method,
            path: &path,
            query: &query,
            body: &bytes,
            content_type: &content_type,
            headers: &headers,
        };
        st2.api.handle(req)
    })
    .await;
    match out {
        Ok(r) => {
            let status = r.status;
            let mut resp = respond(r);
            if status == 405 {
                // RFC 9110 section 15.5.6: a 405 lists the methods the path serves.
                if let Ok(v) = HeaderValue::from_str(&Api::allowed_methods(&route_path).join(", ")) {
                    resp.headers_mut().insert(header::ALLOW, v);
                }
            }
            if cors_ok && let Some(v) = origin.as_deref().and_then(|o| HeaderValue::from_str(o).ok()) {
                resp.headers_mut().insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, v);
                resp.headers_mut().insert(header::VARY, HeaderValue::from_static("Origin"));
            }
            resp
        }
        Err(e) => {
            tracing::error!(error = %e, "handler task failed");
            reject(ErrorKind::Internal, "internal error")
        }
    }
}

/// The console's dynamic paths: `/ui/session` and `/ui/tokens`; None for the static shell and assets.
#[allow(clippy::too_many_arguments)]
async fn console_call(
    st: &AppState,
    sessions: &console::Sessions,
    peer: SocketAddr,
    method: &str,
    path: &str,
    headers: &HeaderMap,
    body: Body,
    own_origin: bool,
) -> Option<Response<Body>> {
    let path = path.trim_end_matches('/');
    if path != "/ui/session" && path != "/ui/tokens" {
        return None;
    }
    if console::cross_site(headers, !own_origin) {
        return Some(console::hardened(reject(ErrorKind::Forbidden, "cross-site request refused")));
    }
    if let Some(secs) = st.lockout.blocked(peer.ip()) {
        return Some(console::hardened(too_many(secs)));
    }
    let bytes = match read_body(body, 64 << 10, None, st.body_timeout).await {
        BodyRead::Complete(b) => b,
        BodyRead::TooLarge => return Some(closing(ErrorKind::PayloadTooLarge, "request body too large")),
        BodyRead::Broken => return Some(closing(ErrorKind::BadRequest, "request body could not be read")),
        BodyRead::TimedOut => return Some(closing(ErrorKind::Timeout, "request body not received in time")),
    };
    let resp = if path == "/ui/tokens" {
        let keys = presented_keys(headers);
        let by_key = keys_match(&keys, &st.key);
        let by_session = keys.is_empty() && console::session_cookie(headers).is_some_and(|id| sessions.touch(&id));
        if method != "POST" {
            reject(ErrorKind::MethodNotAllowed, "method not allowed")
        } else if by_key || by_session {
            console::token_answer(sessions)
        } else {
            if !keys.is_empty() && st.lockout.fail(peer.ip()) {
                return Some(console::hardened(too_many(LOCKOUT_BLOCK.as_secs())));
            }
            reject(ErrorKind::Unauthorized, if keys.is_empty() { "missing api key" } else { "invalid api key" })
        }
    } else {
        match console::session_call(sessions, method, headers, &bytes, &st.key) {
            console::SessionCall::Answer(r) => r,
            console::SessionCall::WrongSecret(r) => {
                if st.lockout.fail(peer.ip()) {
                    tracing::warn!(%peer, "too many wrong sign-ins: address blocked for 10 minutes");
                    return Some(console::hardened(too_many(LOCKOUT_BLOCK.as_secs())));
                }
                r
            }
        }
    };
    Some(console::hardened(resp))
}

/// Bytes of an over-limit body read and discarded before the 413 goes out: 64 MiB.
pub const LINGER_MAX_BYTES: u64 = 64 << 20;
/// Time spent discarding an over-limit body before the 413 goes out: 5 s.
pub const LINGER_TIME: Duration = Duration::from_secs(5);

/// What reading a request body gave.
enum BodyRead {
    Complete(axum::body::Bytes),
    /// The body stream failed (the client went away, a malformed chunk).
    Broken,
    /// Over the limit; the rest was discarded (bounded by [`LINGER_MAX_BYTES`] and [`LINGER_TIME`]).
    TooLarge,
    TimedOut,
}

/// Reads a body of at most `max` bytes within `timeout`. An over-limit body (declared or found while reading)
/// is read on and discarded, up to [`LINGER_MAX_BYTES`] for at most [`LINGER_TIME`], as nginx's
/// `lingering_close` does: a client that sends its whole body before reading (Python's urllib and requests)
/// then reads the 413 instead of a broken pipe.
async fn read_body(body: Body, max: usize, declared: Option<u64>, timeout: Duration) -> BodyRead {
    use futures_util::StreamExt;
    let mut stream = body.into_data_stream();
    if declared.is_none_or(|n| n <= max as u64) {
        let read = async {
            let mut buf: Vec<u8> = Vec::new();
            while let Some(chunk) = stream.next().await {
                let Ok(chunk) = chunk else { return BodyRead::Broken };
                if buf.len() + chunk.len() > max {
                    return BodyRead::TooLarge;
                }
                buf.extend_from_slice(&chunk);
            }
            BodyRead::Complete(axum::body::Bytes::from(buf))
        };
        match tokio::time::timeout(timeout, read).await {
            Ok(BodyRead::TooLarge) => {}
            Ok(done) => return done,
            Err(_) => return BodyRead::TimedOut,
        }
    }
    let drain = async {
        let mut seen = 0u64;
        while let Some(Ok(chunk)) = stream.next().await {
            seen += chunk.len() as u64;
            if seen > LINGER_MAX_BYTES {
                break;
            }
        }
    };
    let _ = tokio::time::timeout(LINGER_TIME, drain).await;
    BodyRead::TooLarge
}

/// An error answer after which the connection closes (the request body was not, or not wholly, read).
fn closing(kind: ErrorKind, msg: &str) -> Response<Body> {
    let mut resp = reject(kind, msg);
    resp.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
    resp
}

/// The request headers the agent tools read (`APP` and `X-Nmem-*`), as owned pairs.
fn agent_headers(headers: &HeaderMap) -> Vec<(String, String)> {
    headers
        .iter()
        .filter(|(k, _)| k.as_str() == "app" || k.as_str().starts_with("x-nmem-"))
        .filter(|(k, _)| k.as_str() != "x-nmem-api-key")
        .filter_map(|(k, v)| Some((k.as_str().to_string(), v.to_str().ok()?.to_string())))
        .collect()
}

/// A server running on its own thread and runtime; dropped or [`RunningServer::stop`]ped, it shuts down.
pub struct RunningServer {
    /// The bound address.
    pub addr: SocketAddr,
    /// The key clients must present.
    pub api_key: String,
    /// A one-time path that signs a browser in to the console (`/ui/#token=...`); None with the console off.
    pub sign_in_path: Option<String>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl RunningServer {
    /// Stops accepting, finishes in-flight requests, joins the thread.
    pub fn stop(mut self) {
        self.shutdown_now();
    }

    fn shutdown_now(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for RunningServer {
    fn drop(&mut self) {
        self.shutdown_now();
    }
}

/// What [`build`] makes: the router, the key, and a first one-time sign-in path for the console (None with
/// the console off).
type Built = (axum::Router, String, Option<String>);

fn build(config: &ServerConfig, store: Arc<KnowledgeStore>, info: ServiceInfo, bound: SocketAddr) -> Result<Built> {
    let key = match &config.api_key {
        Some(k) if !k.trim().is_empty() => k.trim().to_string(),
        _ => load_or_create_key(&config.data_dir)?.0,
    };
    let mut hosts: Vec<String> = ["localhost", "127.0.0.1", "::1"].iter().map(|s| s.to_string()).collect();
    hosts.push(bound.ip().to_string());
    hosts.extend(config.allowed_hosts.iter().map(|h| h.to_ascii_lowercase()));
    let api = Api::new(store, info);
    let st = Arc::new(AppState {
        mcp: mcp::http_service(api.clone(), config.max_body_bytes),
        api,
        key: key.clone(),
        hosts,
        max_body: config.max_body_bytes,
        body_timeout: config.body_read_timeout,
        cors: config.cors_origins.clone(),
        lockout: Lockout::new(config.lockout_failures),
        console: config.console.then(console::Sessions::default),
        metrics_public: config.metrics_public,
    });
    let sign_in = st.console.as_ref().map(|c| console::sign_in_path(&c.new_token()));
    Ok((axum::Router::new().fallback(handle).with_state(st), key, sign_in))
}

/// Binds and serves on a background thread. Returns once the socket is bound.
///
/// # Errors
/// [`ErrorKind::Io`] when the address cannot be bound or the key file cannot be read or created.
pub fn start(config: ServerConfig, store: Arc<KnowledgeStore>, info: ServiceInfo) -> Result<RunningServer> {
    let std_listener = std::net::TcpListener::bind(config.addr)?;
    std_listener.set_nonblocking(true)?;
    let addr = std_listener.local_addr()?;
    // The store closes after the runtime, on this plain thread: closing writes to the database, which the
    // PostgreSQL client cannot do from inside an async runtime.
    let keep = store.clone();
    let (router, key, sign_in_path) = build(&config, store, info, addr)?;
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let limits = Limits::of(&config);
    let thread = std::thread::Builder::new().name("engram-http".into()).spawn(move || {
        rt.block_on(async move {
            let Ok(listener) = tokio::net::TcpListener::from_std(std_listener) else { return };
            accept_loop(listener, router, limits, async move {
                let _ = rx.await;
            })
            .await;
        });
        drop(rt);
        drop(keep);
    })?;
    Ok(RunningServer { addr, api_key: key, sign_in_path, shutdown: Some(tx), thread: Some(thread) })
}

/// Serves until SIGINT or SIGTERM, then shuts down cleanly (in-flight requests finish, the store closes).
///
/// # Errors
/// As [`start`].
pub fn serve_until_signal(config: ServerConfig, store: Arc<KnowledgeStore>, info: ServiceInfo) -> Result<()> {
    // As in `start`: the store closes after the runtime, outside it.
    let _keep = store.clone();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let out = rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(config.addr).await?;
        let addr = listener.local_addr()?;
        tokio::spawn(expiry_sweeps(store.clone()));
        if let Some(b) = config.backups {
            tokio::spawn(backups::run(store.clone(), b));
        }
        if config.sync {
            sync::start(store.clone(), config.sync_peers.clone())?;
        }
        let (router, _key, sign_in) = build(&config, store, info, addr)?;
        tracing::info!(%addr, "engram listening");
        // Written without `println!`, which panics when stdout is closed (a supervisor that stopped reading
        // after the first line): a daemon must not stop because nobody reads its banner.
        use std::io::Write;
        let mut out = std::io::stdout();
        let _ = writeln!(out, "engram listening on http://{addr}");
        if let Some(p) = sign_in {
            // The token rides in the URL fragment, which no browser sends to a server or puts in a Referer.
            let _ = writeln!(
                out,
                "console: http://{addr}{p}  (one-time sign-in, valid 1 hour; `engram ui` prints a fresh one)"
            );
        }
        let _ = out.flush();
        accept_loop(listener, router, Limits::of(&config), shutdown_signal()).await;
        tracing::info!("engram stopped");
        Ok(())
    });
    drop(rt);
    out
}

/// How often the daemon forgets memories whose expiry passed more than the grace period ago (the store also
/// does at open).
const EXPIRY_SWEEP_EVERY: Duration = Duration::from_secs(3600);

/// The daemon's expiry worker: [`Memories::forget_expired`](crate::store::Memories::forget_expired) every [`EXPIRY_SWEEP_EVERY`], off the
/// async threads. Ends with the runtime.
async fn expiry_sweeps(store: Arc<KnowledgeStore>) {
    let mut tick = tokio::time::interval(EXPIRY_SWEEP_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await; // the first tick is immediate, and the store swept at open
    loop {
        tick.tick().await;
        let s = store.clone();
        match tokio::task::spawn_blocking(move || s.memories().forget_expired()).await {
            Ok(Err(e)) => tracing::warn!(error = %e, "the expiry sweep failed; it runs again in an hour"),
            Err(e) => tracing::warn!(error = %e, "the expiry sweep stopped"),
            Ok(Ok(_)) => {}
        }
    }
}

/// Connection limits of the accept loop.
#[derive(Clone, Copy)]
struct Limits {
    header_read: Duration,
    max_connections: usize,
}

impl Limits {
    fn of(c: &ServerConfig) -> Limits {
        Limits { header_read: c.header_read_timeout, max_connections: c.max_connections.max(1) }
    }
}

/// Accepts HTTP/1.1 connections until `shutdown` resolves, then lets in-flight requests finish (at most
/// [`SHUTDOWN_GRACE`]). Each connection must send its headers within `header_read` (also the idle limit of a
/// kept-alive connection), so slow clients (slowloris) are disconnected; at most `max_connections` are open.
async fn accept_loop(
    listener: tokio::net::TcpListener,
    router: axum::Router,
    limits: Limits,
    shutdown: impl std::future::Future<Output = ()>,
) {
    use hyper_util::rt::{TokioIo, TokioTimer};
    use tower::ServiceExt;
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let slots = Arc::new(tokio::sync::Semaphore::new(limits.max_connections));
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new()).header_read_timeout(limits.header_read).keep_alive(true);
    tokio::pin!(shutdown);
    loop {
        let slot = tokio::select! {
            s = slots.clone().acquire_owned() => match s { Ok(s) => s, Err(_) => break },
            () = &mut shutdown => break,
        };
        let (stream, peer) = tokio::select! {
            r = listener.accept() => match r {
                Ok(c) => c,
                Err(e) => {
                    // Out of file descriptors and the like: back off instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let router = router.clone();
        let svc = hyper::service::service_fn(move |mut req: Request<hyper::body::Incoming>| {
            req.extensions_mut().insert(ConnectInfo(peer));
            router.clone().oneshot(req.map(Body::new))
        });
        let conn = graceful.watch(http.serve_connection(TokioIo::new(stream), svc));
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!(%peer, error = %e, "connection closed");
            }
            drop(slot);
        });
    }
    drop(listener);
    tokio::select! {
        () = graceful.shutdown() => {}
        () = tokio::time::sleep(SHUTDOWN_GRACE) => tracing::warn!("shutdown grace period over; closing connections"),
    }
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_names_are_parsed_without_ports() {
        assert_eq!(host_name("LOCALHOST:14242"), "localhost");
        assert_eq!(host_name("[::1]:80"), "::1");
        assert_eq!(host_name("127.0.0.1"), "127.0.0.1");
        assert_eq!(host_name("evil.com:1:2"), "evil.com:1");
        assert_eq!(origin_host("http://LOCALHOST:3000").as_deref(), Some("localhost"));
        assert_eq!(origin_host("https://[::1]:8443").as_deref(), Some("::1"));
        assert_eq!(origin_host("null"), None);
        assert_eq!(origin_host("http://evil.com/path"), None);
    }
}
