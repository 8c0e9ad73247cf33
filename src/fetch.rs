//! Fetching a URL for the library (`POST /sources/ingest/url`, [`Sources::ingest_url`](crate::store::Sources::ingest_url)): `ureq`
//! over http and https (rustls, the webpki root certificates), with the server-side request forgery guard of
//! [`crate::net`] applied to every address every host name resolves to, redirects included (each redirect's
//! host goes through the same resolver before any connection), no proxy from the environment (a proxy would
//! resolve the host itself and bypass the guard), connect and total timeouts, a redirect cap and a size cap.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ureq::unversioned::resolver::{DefaultResolver, ResolvedSocketAddrs, Resolver};
use ureq::unversioned::transport::{DefaultConnector, NextTimeout};

use crate::error::{Error, ErrorCode, ErrorKind, FieldError, Result};

/// Longest URL accepted, characters.
pub const MAX_URL_CHARS: usize = 2048;

pub use crate::net::UrlPolicy;

/// A fetched document.
#[derive(Debug, Clone)]
pub struct Fetched {
    /// The URL asked for.
    pub url: String,
    /// The URL the body came from (after redirects).
    pub final_url: String,
    /// The `Content-Type` header, without parameters, lower case (empty when absent).
    pub content_type: String,
    /// The body (decompressed).
    pub bytes: Vec<u8>,
    /// Wall time of the fetch.
    pub elapsed: Duration,
}

fn host_of(uri: &ureq::http::Uri) -> String {
    uri.host().unwrap_or("").trim_start_matches('[').trim_end_matches(']').to_ascii_lowercase()
}

/// The guard: resolves as usual, then refuses (records why and fails before any connection) when a resolved
/// address is not public and the host is not allowed.
#[derive(Debug)]
struct Guarded {
    allow: Vec<String>,
    refused: Arc<Mutex<Option<String>>>,
}

impl Resolver for Guarded {
    fn resolve(
        &self,
        uri: &ureq::http::Uri,
        config: &ureq::config::Config,
        timeout: NextTimeout,
    ) -> std::result::Result<ResolvedSocketAddrs, ureq::Error> {
        let addrs = DefaultResolver::default().resolve(uri, config, timeout)?;
        let host = host_of(uri);
        if self.allow.contains(&host) {
            return Ok(addrs);
        }
        if let Some(bad) = addrs.iter().find(|a| !crate::net::classify(a.ip()).is_global()) {
            let class = crate::net::classify(bad.ip()).name();
            let why = format!(
                "host '{host}' resolves to {}, a {class} address: refused (allow it with --allow-url-host {host})",
                bad.ip()
            );
            if let Ok(mut r) = self.refused.lock() {
                *r = Some(why);
            }
            return Err(ureq::Error::HostNotFound);
        }
        Ok(addrs)
    }
}

fn bad_url(msg: impl Into<String>, url: &str, kind: &str) -> Error {
    Error::invalid(vec![FieldError::field(&["url"], kind, msg, serde_json::Value::String(url.into()))])
}

/// Checks `url`'s form: http or https, a host, no credentials, at most [`MAX_URL_CHARS`].
///
/// # Errors
/// [`ErrorKind::InvalidInput`] at `["url"]` (`url_invalid`) saying what is wrong.
pub fn check_url(url: &str) -> Result<ureq::http::Uri> {
    let url = url.trim();
    if url.is_empty() || url.chars().count() > MAX_URL_CHARS {
        return Err(bad_url(format!("the URL must have 1 to {MAX_URL_CHARS} characters"), url, "url_invalid"));
    }
    if let Some((scheme, _)) = url.split_once(':')
        && !scheme.eq_ignore_ascii_case("http")
        && !scheme.eq_ignore_ascii_case("https")
        && scheme.chars().all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
    {
        return Err(bad_url("only http and https URLs are fetched", url, "url_invalid"));
    }
    let uri: ureq::http::Uri = url.parse().map_err(|e| bad_url(format!("not a valid URL: {e}"), url, "url_invalid"))?;
    match uri.scheme_str().map(str::to_ascii_lowercase).as_deref() {
        Some("http") | Some("https") => {}
        _ => return Err(bad_url("only http and https URLs are fetched", url, "url_invalid")),
    }
    let Some(authority) = uri.authority() else {
        return Err(bad_url("the URL has no host", url, "url_invalid"));
    };
    if authority.as_str().contains('@') {
        return Err(bad_url("credentials in URLs are not accepted", url, "url_invalid"));
    }
    if host_of(&uri).is_empty() {
        return Err(bad_url("the URL has no host", url, "url_invalid"));
    }
    Ok(uri)
}

/// Fetches `url` under `policy`.
///
/// # Errors
/// * [`ErrorKind::InvalidInput`] at `["url"]`: `url_invalid` (form), `url_refused` (an address that is not
///   public, without an allowance; no connection was made), `url_too_many_redirects`, `document_too_large`
///   (over `max_bytes`; the transfer is cut there).
/// * [`ErrorKind::UpstreamUnreachable`] (`url_unreachable`, HTTP 502): the host cannot be resolved or
///   reached, TLS fails, or the server answers an error status (named in the message).
/// * [`ErrorKind::UpstreamTimeout`] (`url_timeout`, HTTP 504): a timeout of `policy`.
pub fn fetch(url: &str, policy: &UrlPolicy) -> Result<Fetched> {
    let url = url.trim();
    check_url(url)?;
    let started = Instant::now();
    let refused = Arc::new(Mutex::new(None));
    let config = ureq::Agent::config_builder()
        .proxy(None)
        .timeout_connect(Some(policy.connect_timeout))
        .timeout_global(Some(policy.total_timeout))
        .max_redirects(policy.max_redirects)
        .max_redirects_will_error(true)
        .http_status_as_error(false)
        .user_agent(concat!("engram/", env!("CARGO_PKG_VERSION"), " (local memory store)"))
        .build();
    let allow = policy
        .allow_hosts
        .iter()
        .map(|h| h.trim().trim_start_matches('[').trim_end_matches(']').to_ascii_lowercase())
        .collect();
    let agent =
        ureq::Agent::with_parts(config, DefaultConnector::default(), Guarded { allow, refused: refused.clone() });
    let upstream = |e: ureq::Error| -> Error {
        if let Some(why) = refused.lock().ok().and_then(|mut r| r.take()) {
            return bad_url(why, url, "url_refused").with_code(ErrorCode::UrlRefused);
        }
        match e {
            ureq::Error::Timeout(t) => Error::new(
                ErrorKind::UpstreamTimeout,
                format!(
                    "fetching {url} timed out ({t}; connect {:?}, total {:?})",
                    policy.connect_timeout, policy.total_timeout
                ),
            )
            .with_code(ErrorCode::UrlTimeout),
            ureq::Error::TooManyRedirects => {
                bad_url(format!("more than {} redirects: refused", policy.max_redirects), url, "url_too_many_redirects")
            }
            ureq::Error::BodyExceedsLimit(n) => bad_url(
                format!("the document is over {n} bytes: cut off at the cap, nothing stored"),
                url,
                "document_too_large",
            ),
            ureq::Error::HostNotFound => Error::new(ErrorKind::UpstreamUnreachable, format!("host of {url} not found"))
                .with_code(ErrorCode::UrlUnreachable),
            e => Error::new(ErrorKind::UpstreamUnreachable, format!("fetching {url} failed: {e}"))
                .with_code(ErrorCode::UrlUnreachable),
        }
    };
    let mut resp = agent.get(url).call().map_err(upstream)?;
    let status = resp.status().as_u16();
    if status >= 400 {
        return Err(Error::new(ErrorKind::UpstreamUnreachable, format!("{url} answered HTTP {status}"))
            .with_code(ErrorCode::UrlUnreachable));
    }
    if status >= 300 {
        return Err(Error::new(
            ErrorKind::UpstreamUnreachable,
            format!("{url} answered HTTP {status} without a usable Location"),
        )
        .with_code(ErrorCode::UrlUnreachable));
    }
    let content_type = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .map(|v| v.split(';').next().unwrap_or("").trim().to_ascii_lowercase())
        .unwrap_or_default();
    let final_url = ureq::ResponseExt::get_uri(&resp).to_string();
    let bytes = resp.body_mut().with_config().limit(policy.max_bytes).read_to_vec().map_err(upstream)?;
    Ok(Fetched { url: url.to_string(), final_url, content_type, bytes, elapsed: started.elapsed() })
}
