//! The web console (`/ui/`): the built bundle of `ui/` embedded in the binary, and the cookie sessions that let
//! a person's browser use the REST routes without the API key ever reaching script-readable storage.
//!
//! * `GET /ui/...`: the static shell and assets, served without a session (no data is in them). Hashed assets
//!   under `/ui/assets/` are cacheable forever (`immutable`); every other path under `/ui/` is the single-page
//!   shell, so deep links, reloads and bookmarks work. Every answer carries [`CONTENT_SECURITY_POLICY`],
//!   `X-Content-Type-Options: nosniff`, `Referrer-Policy: no-referrer` and `X-Frame-Options: DENY`.
//! * `POST /ui/session` with `{"key": "<api key>"}` or `{"token": "<one-time token>"}`: 204 with the session
//!   cookie (`HttpOnly`, `SameSite=Strict`, `Path=/`); a wrong key or token is 401 and counts toward the
//!   address lockout. `GET /ui/session`: 204 while the cookie is a live session, 401 otherwise.
//!   `DELETE /ui/session`: signs out (204, the cookie cleared).
//! * `POST /ui/tokens` (API key or session): a fresh one-time sign-in token, what `engram ui` prints.
//!
//! Sessions and tokens live in the daemon's memory: a restart signs everyone out. A session expires after
//! [`SESSION_IDLE`] without a request; a token after [`TOKEN_TTL`] or its first use.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, Response, StatusCode, header};

/// The session cookie's name.
pub const COOKIE_NAME: &str = "engram_session";
/// A session ends after this long without a request: 12 hours.
pub const SESSION_IDLE: Duration = Duration::from_secs(12 * 3600);
/// A one-time sign-in token is valid this long after it was made, until its first use: 1 hour.
pub const TOKEN_TTL: Duration = Duration::from_secs(3600);
/// Live sessions and unused tokens kept at most (the oldest are dropped past it): 10,000 each.
const MAX_ENTRIES: usize = 10_000;

/// The policy of every `/ui/` answer: scripts, styles and connections from this origin only, no inline script
/// or `eval`, no framing, no plugins. `img-src data:` serves the graph's and the bundle's inline icons.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; style-src 'self'; \
img-src 'self' data: blob:; font-src 'self'; connect-src 'self'; worker-src 'self'; object-src 'none'; \
base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

#[derive(rust_embed::RustEmbed)]
#[folder = "ui/dist"]
struct Assets;

/// Sessions and one-time tokens of one daemon.
#[derive(Default)]
pub(crate) struct Sessions {
    /// Session id → last request.
    live: parking_lot::Mutex<HashMap<String, Instant>>,
    /// Token → when it was made.
    tokens: parking_lot::Mutex<HashMap<String, Instant>>,
}

/// 256 random bits as 64 hex digits (two v4 UUIDs, as the API key is made).
fn secret() -> String {
    format!("{}{}", uuid::Uuid::new_v4().simple(), uuid::Uuid::new_v4().simple())
}

/// Drops entries older than `ttl`, then the oldest while over [`MAX_ENTRIES`].
fn prune(map: &mut HashMap<String, Instant>, ttl: Duration) {
    let now = Instant::now();
    map.retain(|_, t| now.duration_since(*t) < ttl);
    while map.len() >= MAX_ENTRIES {
        let Some(oldest) = map.iter().min_by_key(|(_, t)| **t).map(|(k, _)| k.clone()) else { break };
        map.remove(&oldest);
    }
}

impl Sessions {
    /// A new one-time sign-in token, valid for [`TOKEN_TTL`].
    pub(crate) fn new_token(&self) -> String {
        let token = secret();
        let mut map = self.tokens.lock();
        prune(&mut map, TOKEN_TTL);
        map.insert(token.clone(), Instant::now());
        token
    }

    /// Uses up `token`; true when it was a live one.
    fn redeem(&self, token: &str) -> bool {
        let mut map = self.tokens.lock();
        prune(&mut map, TOKEN_TTL);
        // The map is keyed by the token, so the lookup compares lengths and bytes of a 64-digit random value;
        // a timing difference tells an attacker at most a prefix of a value that dies on first use.
        map.remove(token).is_some()
    }

    fn open(&self) -> String {
        let id = secret();
        let mut map = self.live.lock();
        prune(&mut map, SESSION_IDLE);
        map.insert(id.clone(), Instant::now());
        id
    }

    /// True when `id` is a live session; a request refreshes its idle clock.
    pub(crate) fn touch(&self, id: &str) -> bool {
        let mut map = self.live.lock();
        let now = Instant::now();
        match map.get_mut(id) {
            Some(t) if now.duration_since(*t) < SESSION_IDLE => {
                *t = now;
                true
            }
            Some(_) => {
                map.remove(id);
                false
            }
            None => false,
        }
    }

    fn close(&self, id: &str) {
        self.live.lock().remove(id);
    }
}

/// The session id of the request's `Cookie` headers, if it has one.
pub(crate) fn session_cookie(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE_NAME)
        .map(|(_, value)| value.trim().to_string())
        .filter(|v| !v.is_empty())
}

/// True when a request that carries the session cookie must be refused before any handler runs: its `Origin`
/// is not the daemon's own (`foreign_origin`, decided by the caller from the `Host` header), or the browser
/// says it came from elsewhere (`Sec-Fetch-Site` other than `same-origin` or `none`).
pub(crate) fn cross_site(headers: &HeaderMap, foreign_origin: bool) -> bool {
    if foreign_origin {
        return true;
    }
    // `same-site` counts as foreign: another port on localhost is the same site but may be another program.
    headers
        .get("sec-fetch-site")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| !v.eq_ignore_ascii_case("same-origin") && !v.eq_ignore_ascii_case("none"))
}

/// What `POST /ui/session` carries.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct SignIn {
    key: Option<String>,
    token: Option<String>,
}

/// The outcome of a `/ui/session` call the daemon must act on.
pub(crate) enum SessionCall {
    /// An answer to send as it is.
    Answer(Response<Body>),
    /// A wrong key or token: 401, and one failure toward the lockout.
    WrongSecret(Response<Body>),
}

/// Handles `/ui/session` (`POST`, `GET`, `DELETE`). `key` is the daemon's API key.
pub(crate) fn session_call(
    sessions: &Sessions,
    method: &str,
    headers: &HeaderMap,
    body: &[u8],
    key: &str,
) -> SessionCall {
    use subtle::ConstantTimeEq;
    match method {
        "GET" => {
            let live = session_cookie(headers).is_some_and(|id| sessions.touch(&id));
            SessionCall::Answer(if live {
                no_content(None)
            } else {
                super::reject(crate::ErrorKind::Unauthorized, "not signed in")
            })
        }
        "DELETE" => {
            if let Some(id) = session_cookie(headers) {
                sessions.close(&id);
            }
            let clear = format!("{COOKIE_NAME}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0");
            SessionCall::Answer(no_content(Some(clear)))
        }
        "POST" => {
            let sign_in: SignIn = match serde_json::from_slice(body) {
                Ok(s) => s,
                Err(e) => {
                    return SessionCall::Answer(invalid(
                        "body",
                        &format!("expected {{\"key\": \"...\"}} or {{\"token\": \"...\"}}: {e}"),
                    ));
                }
            };
            let ok = match (&sign_in.key, &sign_in.token) {
                (Some(k), None) => !k.is_empty() && bool::from(k.trim().as_bytes().ct_eq(key.as_bytes())),
                (None, Some(t)) => !t.is_empty() && sessions.redeem(t.trim()),
                _ => return SessionCall::Answer(invalid("body", "give exactly one of key and token")),
            };
            if !ok {
                let what = if sign_in.key.is_some() { "invalid api key" } else { "invalid or used sign-in token" };
                return SessionCall::WrongSecret(super::reject(crate::ErrorKind::Unauthorized, what));
            }
            let id = sessions.open();
            SessionCall::Answer(no_content(Some(format!("{COOKIE_NAME}={id}; HttpOnly; SameSite=Strict; Path=/"))))
        }
        _ => SessionCall::Answer(super::reject(crate::ErrorKind::MethodNotAllowed, "method not allowed")),
    }
}

/// `POST /ui/tokens` for a caller already authenticated: 201 `{"token", "path", "expires_in_seconds"}`.
pub(crate) fn token_answer(sessions: &Sessions) -> Response<Body> {
    let token = sessions.new_token();
    let body = serde_json::json!({
        "token": token,
        "path": sign_in_path(&token),
        "expires_in_seconds": TOKEN_TTL.as_secs(),
    });
    let mut resp = Response::new(Body::from(body.to_string()));
    *resp.status_mut() = StatusCode::CREATED;
    resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}

/// The path that signs a browser in with `token`: in the URL fragment, which browsers send to no server and
/// put in no `Referer`, so it stays out of logs.
pub fn sign_in_path(token: &str) -> String {
    format!("/ui/#token={token}")
}

fn no_content(cookie: Option<String>) -> Response<Body> {
    let mut resp = Response::new(Body::empty());
    *resp.status_mut() = StatusCode::NO_CONTENT;
    resp.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    if let Some(v) = cookie.and_then(|c| HeaderValue::from_str(&c).ok()) {
        resp.headers_mut().insert(header::SET_COOKIE, v);
    }
    resp
}

/// A 422 in the interface's `detail` shape, naming `field` of the body.
fn invalid(field: &str, msg: &str) -> Response<Body> {
    let body = serde_json::json!({"detail": [{"loc": ["body", field], "msg": msg, "type": "value_error"}]});
    let mut resp = Response::new(Body::from(body.to_string()));
    *resp.status_mut() = StatusCode::UNPROCESSABLE_ENTITY;
    resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp
}

/// The headers every `/ui/` answer carries.
fn harden(resp: &mut Response<Body>) {
    let h = resp.headers_mut();
    h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CONTENT_SECURITY_POLICY));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
}

/// The content type of a bundle file, by its extension.
fn content_type(path: &str) -> &'static str {
    match path.rsplit_once('.').map(|(_, ext)| ext) {
        Some("html") => "text/html; charset=utf-8",
        Some("js") => "text/javascript; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("svg") => "image/svg+xml",
        Some("png") => "image/png",
        Some("ico") => "image/x-icon",
        Some("json") => "application/json",
        Some("woff2") => "font/woff2",
        Some("txt") => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    }
}

/// True for the paths the console answers: `/ui` and everything under `/ui/`.
pub(crate) fn is_console_path(path: &str) -> bool {
    path == "/ui" || path.starts_with("/ui/")
}

/// The static part of the console: the shell for every page path, the assets by name. `GET` and `HEAD` only.
pub(crate) fn static_answer(method: &str, path: &str) -> Response<Body> {
    let mut resp = static_file(method, path);
    harden(&mut resp);
    resp
}

fn static_file(method: &str, path: &str) -> Response<Body> {
    if method != "GET" && method != "HEAD" {
        return super::reject(crate::ErrorKind::MethodNotAllowed, "method not allowed");
    }
    if path == "/ui" {
        let mut resp = Response::new(Body::empty());
        *resp.status_mut() = StatusCode::PERMANENT_REDIRECT;
        resp.headers_mut().insert(header::LOCATION, HeaderValue::from_static("/ui/"));
        return resp;
    }
    let rel = path.trim_start_matches("/ui/");
    let (name, cache) = if rel.starts_with("assets/") {
        // Vite names every asset by its content hash: a changed file has a new name.
        (rel, "public, max-age=31536000, immutable")
    } else if !rel.is_empty() && Assets::get(rel).is_some() && !rel.ends_with(".html") {
        (rel, "no-cache")
    } else {
        ("index.html", "no-cache")
    };
    let Some(file) = Assets::get(name) else {
        return super::reject(crate::ErrorKind::NotFound, "no such console file");
    };
    let len = file.data.len();
    let body = if method == "HEAD" { Body::empty() } else { Body::from(file.data.into_owned()) };
    let mut resp = Response::new(body);
    let h = resp.headers_mut();
    h.insert(header::CONTENT_LENGTH, HeaderValue::from(len));
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type(name)));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
    resp
}

/// Applies [`harden`] to a session answer too (every `/ui/` response carries the policy).
pub(crate) fn hardened(mut resp: Response<Body>) -> Response<Body> {
    harden(&mut resp);
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_signs_in_once() {
        let s = Sessions::default();
        let t = s.new_token();
        assert!(s.redeem(&t));
        assert!(!s.redeem(&t));
        assert!(!s.redeem("made-up"));
    }

    #[test]
    fn the_cookie_is_found_among_others() {
        let mut h = HeaderMap::new();
        h.append(header::COOKIE, HeaderValue::from_static("a=1; engram_session=abc ; b=2"));
        assert_eq!(session_cookie(&h).as_deref(), Some("abc"));
        let mut h = HeaderMap::new();
        h.append(header::COOKIE, HeaderValue::from_static("engram_session_x=1"));
        assert_eq!(session_cookie(&h), None);
    }

    #[test]
    fn same_site_requests_from_another_port_are_cross_site() {
        let mut h = HeaderMap::new();
        assert!(!cross_site(&h, false));
        h.insert("sec-fetch-site", HeaderValue::from_static("same-origin"));
        assert!(!cross_site(&h, false));
        h.insert("sec-fetch-site", HeaderValue::from_static("same-site"));
        assert!(cross_site(&h, false));
        h.insert("sec-fetch-site", HeaderValue::from_static("cross-site"));
        assert!(cross_site(&h, false));
        assert!(cross_site(&HeaderMap::new(), true));
    }
}
