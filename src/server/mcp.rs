//! MCP (Model Context Protocol) over the official SDK, `rmcp`: one [`ServerHandler`] over the agent tool table
//! ([`crate::api::tools`]), served two ways.
//!
//! * **Streamable HTTP** on `POST /mcp` and `POST /mcp/` (identical, no redirect), in stateless JSON mode:
//!   no session, `tools/call` works without `initialize`, answers are `application/json`, notifications get
//!   202, GET and DELETE 405, `Mcp-Session-Id` is ignored. Protocol versions 2024-11-05 to 2025-11-25 through
//!   `initialize`, 2026-07-28 through `server/discover` (rmcp). The daemon's guard runs first (Host allowlist,
//!   key, lockout, body limit, Origin: a present foreign `Origin` is 403, as the MCP transport spec requires);
//!   rmcp then checks `Accept` (406) and `MCP-Protocol-Version` (400).
//! * **stdio** for hosts that spawn a process (`engram mcp`): newline-delimited JSON-RPC, over the local store
//!   or, when a daemon holds the store, forwarded to the daemon's `POST /agent/tools/call`.
//!
//! The `APP`, `X-Nmem-Space-Id`, `X-Nmem-Agent-Id`, `X-Nmem-Host-Agent-Id` and `X-Nmem-Tool-Set` headers of
//! each HTTP request make its [`Scope`]; over stdio the scope comes from the command line.

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, Implementation, ListToolsResult, PaginatedRequestParams,
    ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::{
    StreamableHttpServerConfig, StreamableHttpService, session::never::NeverSessionManager,
};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::Value;

use crate::api::Api;
use crate::api::tools::{self, Scope, ToolError};

/// Where tool calls go.
#[derive(Clone)]
pub enum Backend {
    /// The store of this process.
    Local(Api),
    /// A running daemon: each call is a `POST /agent/tools/call` to it (for `engram mcp` while the daemon
    /// holds the store).
    Remote(Arc<super::client::Daemon>),
}

impl Backend {
    /// Runs a tool on a blocking thread (local) or over loopback HTTP (remote).
    async fn call(&self, scope: Scope, name: String, args: Value) -> Result<Value, ToolError> {
        match self {
            Backend::Local(api) => {
                let api = api.clone();
                tokio::task::spawn_blocking(move || tools::call(&api, &scope, &name, args)).await.unwrap_or_else(|e| {
                    Err(ToolError::Failed(crate::error::Error::new(
                        crate::error::ErrorKind::Internal,
                        format!("tool task failed: {e}"),
                    )))
                })
            }
            Backend::Remote(d) => d.call_tool(&scope, &name, args).await,
        }
    }
}

/// The MCP server: tools only (no prompts, no resources).
#[derive(Clone)]
pub struct McpFront {
    backend: Backend,
    /// The scope when no HTTP request carries one (stdio).
    fixed: Option<Scope>,
}

impl McpFront {
    /// A front over `backend`; `fixed` is the scope of every call when set (stdio), else each HTTP request's
    /// headers give it.
    pub fn new(backend: Backend, fixed: Option<Scope>) -> Self {
        McpFront { backend, fixed }
    }

    fn scope(&self, cx: &RequestContext<RoleServer>) -> Scope {
        if let Some(s) = &self.fixed {
            return s.clone();
        }
        match cx.extensions.get::<axum::http::request::Parts>() {
            Some(p) => Scope::from_headers(p.headers.iter().filter_map(|(k, v)| Some((k.as_str(), v.to_str().ok()?)))),
            None => Scope::from_headers([]),
        }
    }
}

fn tool_of(t: &tools::Tool) -> Option<Tool> {
    serde_json::from_value(t.descriptor()).ok()
}

impl ServerHandler for McpFront {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("engram", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Engram is the user's local memory. Search it (memory_search) before answering questions about \
                 past work, preferences or decisions; store durable facts, decisions and procedures with memory_add.",
            )
    }

    async fn list_tools(
        &self,
        _: Option<PaginatedRequestParams>,
        cx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let scope = self.scope(&cx);
        Ok(ListToolsResult::with_all_items(tools::visible(&scope).filter_map(tool_of).collect()))
    }

    async fn call_tool(
        &self,
        req: CallToolRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let scope = self.scope(&cx);
        let args = req.arguments.map(Value::Object).unwrap_or(Value::Null);
        match self.backend.call(scope, req.name.to_string(), args).await {
            Ok(v) => Ok(CallToolResult::structured(v).into()),
            Err(e @ (ToolError::UnknownTool(_) | ToolError::UnknownSpace(_))) => {
                Err(ErrorData::invalid_params(e.message(), None))
            }
            Err(e) => Ok(CallToolResult::structured_error(e.to_json()).into()),
        }
    }
}

/// The Streamable HTTP service of `/mcp`, stateless with JSON answers. Host and Origin checks are the
/// daemon guard's (it runs first and knows the configured hosts), so rmcp's own are turned off here.
pub fn http_service(api: Api, max_body_bytes: usize) -> StreamableHttpService<McpFront, NeverSessionManager> {
    let cfg = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_max_request_body_bytes(max_body_bytes)
        .disable_allowed_hosts()
        .disable_allowed_origins();
    StreamableHttpService::new(
        move || Ok(McpFront::new(Backend::Local(api.clone()), None)),
        Arc::new(NeverSessionManager::default()),
        cfg,
    )
}

/// Whether `path` is the MCP endpoint (`/mcp` or `/mcp/`).
pub fn is_mcp_path(path: &str) -> bool {
    path == "/mcp" || path == "/mcp/"
}

/// Serves MCP over stdin/stdout (newline-delimited JSON-RPC) until the client closes stdin. Logs go to
/// stderr; stdout carries only protocol messages.
///
/// # Errors
/// [`crate::ErrorKind::Io`] when the runtime cannot start or the handshake fails.
pub fn serve_stdio(front: McpFront) -> crate::error::Result<()> {
    use rmcp::ServiceExt;
    // The store closes after the runtime, outside it (the PostgreSQL client cannot run inside one).
    let _keep = front.clone();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let out = rt.block_on(async move {
        let running = front.serve(rmcp::transport::stdio()).await.map_err(|e| {
            crate::error::Error::new(crate::error::ErrorKind::Io, format!("MCP stdio handshake failed: {e}"))
        })?;
        let _ = running.waiting().await;
        Ok(())
    });
    drop(rt);
    out
}
