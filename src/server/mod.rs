//! The HTTP daemon (feature `server`): axum on hyper. Every request passes a guard before it reaches the shared
//! route table: Host-header allowlist (403; closes DNS rebinding, cf. CVE-2024-28224), API key on every route
//! but `/capabilities`, `/health` and `/livez` (401, constant-time comparison), body-size limit (413, enforced
//! while reading, so chunked bodies are capped too). Handlers run on tokio's blocking pool. No CORS headers are
//! sent.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, HeaderValue, Request, Response, StatusCode, header};
use subtle::ConstantTimeEq;

use crate::api::{Api, ApiRequest, ApiResponse, ServiceInfo};
use crate::error::{Error, ErrorKind, Result};
use crate::store::KnowledgeStore;

/// Default listen address.
pub const DEFAULT_ADDR: &str = "127.0.0.1:14242";
/// Default body limit: 8 MiB.
pub const DEFAULT_MAX_BODY_BYTES: usize = 8 << 20;

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
    key: String,
    hosts: Vec<String>,
    max_body: usize,
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

fn presented_key(headers: &HeaderMap) -> Option<&[u8]> {
    if let Some(v) = headers.get(header::AUTHORIZATION) {
        let b = v.as_bytes();
        if b.len() > 7 && b[..7].eq_ignore_ascii_case(b"bearer ") {
            return Some(b[7..].trim_ascii());
        }
    }
    headers.get("x-nmem-api-key").map(|v| v.as_bytes().trim_ascii())
}

async fn handle(
    State(st): State<Arc<AppState>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    req: Request<Body>,
) -> Response<Body> {
    let (parts, body) = req.into_parts();
    let host = parts.headers.get(header::HOST).and_then(|h| h.to_str().ok()).map(host_name);
    if !host.as_ref().is_some_and(|h| st.hosts.iter().any(|a| a == h)) {
        tracing::warn!(%peer, host = ?host, "rejected Host header");
        return reject(ErrorKind::Forbidden, "host not allowed");
    }
    let method = parts.method.as_str().to_string();
    let path = parts.uri.path().to_string();
    let query = parts.uri.query().unwrap_or("").to_string();
    let content_type = parts.headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
    if !Api::is_public(&method, &path) {
        let ok = presented_key(&parts.headers).is_some_and(|k| !k.is_empty() && bool::from(k.ct_eq(st.key.as_bytes())));
        if !ok {
            let msg = if presented_key(&parts.headers).is_none() { "missing api key" } else { "invalid api key" };
            return reject(ErrorKind::Unauthorized, msg);
        }
    }
    let declared =
        parts.headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > st.max_body as u64) {
        return reject(ErrorKind::PayloadTooLarge, "request body too large");
    }
    let bytes = match axum::body::to_bytes(body, st.max_body).await {
        Ok(b) => b,
        Err(_) => return reject(ErrorKind::PayloadTooLarge, "request body too large"),
    };
    let st2 = st.clone();
    let out = tokio::task::spawn_blocking(move || {
        let req = ApiRequest { method: &method, path: &path, query: &query, body: &bytes, content_type: &content_type };
        st2.api.handle(req)
    })
    .await;
    match out {
        Ok(r) => respond(r),
        Err(e) => {
            tracing::error!(error = %e, "handler task failed");
            reject(ErrorKind::Internal, "internal error")
        }
    }
}

/// A server running on its own thread and runtime; dropped or [`RunningServer::stop`]ped, it shuts down.
pub struct RunningServer {
    /// The bound address.
    pub addr: SocketAddr,
    /// The key clients must present.
    pub api_key: String,
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

fn build(
    config: &ServerConfig,
    store: Arc<KnowledgeStore>,
    info: ServiceInfo,
    bound: SocketAddr,
) -> Result<(axum::Router, String)> {
    let key = match &config.api_key {
        Some(k) if !k.trim().is_empty() => k.trim().to_string(),
        _ => load_or_create_key(&config.data_dir)?.0,
    };
    let mut hosts: Vec<String> = ["localhost", "127.0.0.1", "::1"].iter().map(|s| s.to_string()).collect();
    hosts.push(bound.ip().to_string());
    hosts.extend(config.allowed_hosts.iter().map(|h| h.to_ascii_lowercase()));
    let st =
        Arc::new(AppState { api: Api::new(store, info), key: key.clone(), hosts, max_body: config.max_body_bytes });
    Ok((axum::Router::new().fallback(handle).with_state(st), key))
}

/// Binds and serves on a background thread. Returns once the socket is bound.
///
/// # Errors
/// [`ErrorKind::Io`] when the address cannot be bound or the key file cannot be read or created.
pub fn start(config: ServerConfig, store: Arc<KnowledgeStore>, info: ServiceInfo) -> Result<RunningServer> {
    let std_listener = std::net::TcpListener::bind(config.addr)?;
    std_listener.set_nonblocking(true)?;
    let addr = std_listener.local_addr()?;
    let (router, key) = build(&config, store, info, addr)?;
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let thread = std::thread::Builder::new().name("engram-http".into()).spawn(move || {
        rt.block_on(async move {
            let Ok(listener) = tokio::net::TcpListener::from_std(std_listener) else { return };
            let svc = router.into_make_service_with_connect_info::<SocketAddr>();
            let _ = axum::serve(listener, svc)
                .with_graceful_shutdown(async move {
                    let _ = rx.await;
                })
                .await;
        });
    })?;
    Ok(RunningServer { addr, api_key: key, shutdown: Some(tx), thread: Some(thread) })
}

/// Serves until SIGINT or SIGTERM, then shuts down cleanly (in-flight requests finish, the store closes).
///
/// # Errors
/// As [`start`].
pub fn serve_until_signal(config: ServerConfig, store: Arc<KnowledgeStore>, info: ServiceInfo) -> Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(config.addr).await?;
        let addr = listener.local_addr()?;
        let (router, _key) = build(&config, store, info, addr)?;
        tracing::info!(%addr, "engram listening");
        println!("engram listening on http://{addr}");
        let svc = router.into_make_service_with_connect_info::<SocketAddr>();
        axum::serve(listener, svc).with_graceful_shutdown(shutdown_signal()).await?;
        tracing::info!("engram stopped");
        Ok(())
    })
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
    }
}
