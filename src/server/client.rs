//! A minimal client of a running daemon on loopback (hyper's HTTP/1 client, one connection per call): what
//! `engram mcp` uses to forward tool calls when the daemon holds the store.

use std::net::SocketAddr;
use std::path::Path;

use axum::body::Body;
use axum::http::{Request, header};
use serde_json::Value;

use crate::api::tools::{Scope, ToolError, ToolSet};
use crate::error::{Error, ErrorKind, Result};

/// Largest answer read from the daemon: 64 MiB.
const MAX_ANSWER_BYTES: usize = 64 << 20;

/// A daemon: its address and key.
#[derive(Debug, Clone)]
pub struct Daemon {
    /// Where it listens.
    pub addr: SocketAddr,
    key: String,
}

impl Daemon {
    /// The daemon at `addr` with `key`.
    pub fn new(addr: SocketAddr, key: String) -> Daemon {
        Daemon { addr, key }
    }

    /// The daemon at `addr` with the key in `<data_dir>/api-key`.
    ///
    /// # Errors
    /// [`ErrorKind::Io`] when the key file cannot be read.
    pub fn with_key_file(addr: SocketAddr, data_dir: &Path) -> Result<Daemon> {
        let key = std::fs::read_to_string(data_dir.join("api-key"))?.trim().to_string();
        Ok(Daemon { addr, key })
    }

    /// Sends one request; returns the status and the body.
    async fn send(
        &self,
        method: &str,
        path: &str,
        headers: &[(String, String)],
        body: Vec<u8>,
    ) -> Result<(u16, Vec<u8>)> {
        let unavailable = |e: &dyn std::fmt::Display| {
            Error::new(ErrorKind::Unavailable, format!("the daemon at {} did not answer: {e}", self.addr))
        };
        let stream = tokio::net::TcpStream::connect(self.addr).await.map_err(|e| unavailable(&e))?;
        let (mut sender, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .map_err(|e| unavailable(&e))?;
        tokio::spawn(conn);
        let mut req = Request::builder()
            .method(method)
            .uri(path)
            .header(header::HOST, self.addr.to_string())
            .header(header::AUTHORIZATION, format!("Bearer {}", self.key))
            .header(header::CONTENT_TYPE, "application/json");
        for (k, v) in headers {
            req = req.header(k.as_str(), v.as_str());
        }
        let req = req.body(Body::from(body)).map_err(|e| Error::new(ErrorKind::InvalidInput, e.to_string()))?;
        let resp = sender.send_request(req).await.map_err(|e| unavailable(&e))?;
        let status = resp.status().as_u16();
        let bytes =
            axum::body::to_bytes(Body::new(resp.into_body()), MAX_ANSWER_BYTES).await.map_err(|e| unavailable(&e))?;
        Ok((status, bytes.to_vec()))
    }

    /// A fresh one-time sign-in URL for the daemon's web console (`POST /ui/tokens`):
    /// `http://<addr>/ui/#token=<64 hex digits>`, valid for one sign-in within an hour.
    ///
    /// # Errors
    /// [`ErrorKind::Unavailable`] when the daemon does not answer; [`ErrorKind::Unauthorized`] for a wrong key;
    /// [`ErrorKind::RouteNotFound`] when the daemon runs with `--no-console`.
    pub async fn sign_in_url(&self) -> Result<String> {
        let (status, bytes) = self.send("POST", "/ui/tokens", &[], Vec::new()).await?;
        let v: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        match (status, v["path"].as_str()) {
            (201, Some(path)) => Ok(format!("http://{}{path}", self.addr)),
            (401, _) => Err(Error::new(ErrorKind::Unauthorized, "the daemon refused the API key")),
            (404, _) => Err(Error::new(ErrorKind::RouteNotFound, "the daemon runs without its console (--no-console)")),
            _ => Err(Error::new(kind_of(status), format!("the daemon answered {status} to POST /ui/tokens"))),
        }
    }

    /// Asks the daemon for an online backup (`POST /admin/backup`) to `backup_path` (on the daemon's machine,
    /// inside its data directory or an allowed directory); returns the report.
    ///
    /// # Errors
    /// [`ErrorKind::Unavailable`] when the daemon does not answer; the daemon's error otherwise, with its
    /// message.
    pub async fn backup(&self, backup_path: &str) -> Result<crate::store::BackupReport> {
        let body = serde_json::to_vec(&serde_json::json!({ "backup_path": backup_path }))
            .map_err(|e| Error::new(ErrorKind::Internal, e.to_string()))?;
        let (status, bytes) = self.send("POST", "/admin/backup", &[], body).await?;
        if status == 200 {
            return serde_json::from_slice(&bytes).map_err(|e| {
                Error::new(ErrorKind::Internal, format!("the daemon's backup report did not parse: {e}"))
            });
        }
        let v: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        let detail = v["detail"].as_str().map(str::to_string).unwrap_or_else(|| v["detail"].to_string());
        Err(Error::new(kind_of(status), format!("the daemon answered {status} to POST /admin/backup: {detail}")))
    }

    /// Calls tool `name` on the daemon (`POST /agent/tools/call`) with `scope` as headers.
    ///
    /// # Errors
    /// The daemon's answer mapped back: 404 `unknown_tool` and `space_not_found` become
    /// [`ToolError::UnknownTool`] and [`ToolError::UnknownSpace`], other errors [`ToolError::Failed`].
    pub async fn call_tool(&self, scope: &Scope, name: &str, args: Value) -> std::result::Result<Value, ToolError> {
        let mut headers = vec![("app".to_string(), scope.app.clone())];
        for (k, v) in [
            ("x-nmem-space-id", &scope.space_id),
            ("x-nmem-agent-id", &scope.agent_id),
            ("x-nmem-host-agent-id", &scope.host_agent_id),
        ] {
            if let Some(v) = v {
                headers.push((k.to_string(), v.clone()));
            }
        }
        if scope.tool_set == ToolSet::ExternalAgent {
            headers.push(("x-nmem-tool-set".into(), "external-agent".into()));
        }
        let body = serde_json::to_vec(&serde_json::json!({"name": name, "arguments": args})).unwrap_or_default();
        let (status, bytes) = self.send("POST", "/agent/tools/call", &headers, body).await?;
        let v: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        if status == 200 {
            return Ok(v);
        }
        let code = v["error_code"].as_str().unwrap_or("");
        let msg = match &v["detail"] {
            Value::String(s) => s.clone(),
            Value::Array(a) => a.iter().filter_map(|d| d["msg"].as_str()).collect::<Vec<_>>().join("; "),
            _ => format!("daemon answered {status}"),
        };
        Err(match (status, code) {
            (404, "unknown_tool") => ToolError::UnknownTool(name.to_string()),
            (404, "space_not_found") => ToolError::UnknownSpace(scope.space_id.clone().unwrap_or_default()),
            (422, _) => ToolError::Failed(Error::invalid(field_errors(&v["detail"]))),
            _ => ToolError::Failed(Error::new(kind_of(status), msg)),
        })
    }
}

/// The `detail` list of a 422 as field errors (locations and messages kept).
fn field_errors(detail: &Value) -> Vec<crate::error::FieldError> {
    detail
        .as_array()
        .into_iter()
        .flatten()
        .map(|d| {
            let loc: Vec<String> = d["loc"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|p| p.as_str().map_or_else(|| p.to_string(), str::to_string))
                .collect();
            let loc: Vec<&str> = loc.iter().map(String::as_str).collect();
            crate::error::FieldError::new(
                &loc,
                d["type"].as_str().unwrap_or("value_error"),
                d["msg"].as_str().unwrap_or("invalid"),
                d["input"].clone(),
            )
        })
        .collect()
}

fn kind_of(status: u16) -> ErrorKind {
    match status {
        404 => ErrorKind::NotFound,
        409 => ErrorKind::Conflict,
        401 => ErrorKind::Unauthorized,
        403 => ErrorKind::Forbidden,
        _ => ErrorKind::Unavailable,
    }
}
