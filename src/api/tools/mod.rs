//! The agent tools: one transport-neutral table of tools (name, JSON Schema of the arguments, annotations,
//! handler) over the API, and one dispatcher, [`call`]. Four transports use it: MCP over Streamable HTTP
//! (`POST /mcp`, `server::mcp`), MCP over stdio (`engram mcp`), the REST route `POST /agent/tools/call`, and
//! the C API through `engram_request` on that route.
//!
//! The contract is `mcp.md` §3 of the interface notes (see `docs/api.md`, "Agent tools and MCP"): every tool
//! returns a JSON object, shaped as the reference product's tool of the same name. Handlers call the typed
//! functions beside the routes' handlers (`api::memories::get`, `api::search::search`, `api::fs::ls`, ...) with the
//! routes' own request types, so a tool and its REST twin validate and behave alike.
//!
//! Scope: the `X-Nmem-Space-Id`, `X-Nmem-Agent-Id` and `X-Nmem-Host-Agent-Id` headers win over the `space_id`,
//! `agent_id` and `host_agent_id` arguments; an empty value counts as absent. An unknown space is refused
//! before anything is read or written ([`ToolError::UnknownSpace`]).

mod agent;
mod args;
mod graph;
mod memfs;
mod memory;
mod threads;

use serde_json::{Map, Value, json};

pub use args::Args;

use super::Api;
use super::route::{Dto, Shape, route};
use crate::error::ErrorCode;
use crate::error::{Error, ErrorKind};
use crate::store::DEFAULT_SPACE;

/// The routes of this module, in table order ([`super::routes::ROUTES`] gathers every module's list).
pub(super) const ROUTES: &[super::route::Route] = &[route!(
    "POST",
    "/agent/tools/call",
    "agent_tools_call",
    "Call an agent tool by name ({name, arguments}); answers the tool's result object (the MCP tools' REST twin)",
    &[],
    Some(Dto::of::<ToolCallRequest>()),
    Shape::Object,
    false,
    rest_call
)];

/// Which tools a caller sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ToolSet {
    /// Every tool Engram implements.
    #[default]
    Full,
    /// The 16 tools of the external-agent contract (`X-Nmem-Tool-Set: external-agent`, `mcp.md` §3.1).
    ExternalAgent,
}

/// Who calls and where: from the trusted request headers of the transport.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scope {
    /// The client app (`APP` header), normalised as `lower().trim().replace(' ', '_')`; `mcp_generic` when absent.
    pub app: String,
    /// `X-Nmem-Space-Id`: the space every call runs in (wins over a `space_id` argument).
    pub space_id: Option<String>,
    /// `X-Nmem-Agent-Id`.
    pub agent_id: Option<String>,
    /// `X-Nmem-Host-Agent-Id`.
    pub host_agent_id: Option<String>,
    /// `X-Nmem-Tool-Set`.
    pub tool_set: ToolSet,
}

impl Scope {
    /// The scope of a request with `headers` (`(name, value)` pairs, names in any case). Empty values count as
    /// absent.
    pub fn from_headers<'a>(headers: impl IntoIterator<Item = (&'a str, &'a str)>) -> Scope {
        let mut s = Scope::default();
        for (name, value) in headers {
            let v = value.trim();
            if v.is_empty() {
                continue;
            }
            match name.to_ascii_lowercase().as_str() {
                "app" => s.app = v.to_lowercase().replace(' ', "_"),
                "x-nmem-space-id" => s.space_id = Some(v.to_string()),
                "x-nmem-agent-id" => s.agent_id = Some(v.to_string()),
                "x-nmem-host-agent-id" => s.host_agent_id = Some(v.to_string()),
                "x-nmem-tool-set" if v.eq_ignore_ascii_case("external-agent") => s.tool_set = ToolSet::ExternalAgent,
                _ => {}
            }
        }
        if s.app.is_empty() {
            s.app = "mcp_generic".into();
        }
        s
    }
}

/// Why a call produced no tool result.
#[derive(Debug)]
pub enum ToolError {
    /// No tool of that name in the caller's tool set (MCP: JSON-RPC -32602 `Unknown tool: X`).
    UnknownTool(String),
    /// The scope names a space that does not exist (MCP: JSON-RPC -32602 `Unknown space: X`); nothing was read
    /// or written.
    UnknownSpace(String),
    /// The tool ran and failed: bad arguments (a 422 naming the argument), a missing record, a conflict. MCP
    /// answers a result with `isError: true` so that the model can correct itself.
    Failed(Error),
}

impl From<Error> for ToolError {
    fn from(e: Error) -> Self {
        ToolError::Failed(e)
    }
}

impl ToolError {
    /// The message a client sees.
    pub fn message(&self) -> String {
        match self {
            ToolError::UnknownTool(n) => format!("Unknown tool: {n}"),
            ToolError::UnknownSpace(s) => format!("Unknown space: {s}"),
            ToolError::Failed(e) => failure_message(e),
        }
    }

    /// The structured error object of an `isError: true` result: `{status: "error", error, error_code,
    /// argument?}`.
    pub fn to_json(&self) -> Value {
        let mut v = json!({"status": "error", "error": self.message()});
        match self {
            ToolError::UnknownTool(_) => v["error_code"] = ErrorCode::UnknownTool.as_str().into(),
            ToolError::UnknownSpace(_) => v["error_code"] = ErrorCode::SpaceNotFound.as_str().into(),
            ToolError::Failed(e) => {
                v["error_code"] = e.code().into();
                if let Some(arg) = e.fields().first().and_then(argument_of) {
                    v["argument"] = arg.into();
                }
            }
        }
        v
    }

    /// The error as the REST route answers it: unknown tool 404 `unknown_tool`, unknown space 404
    /// `space_not_found`, otherwise the tool's own error (422 with `detail` locations under
    /// `["body", "arguments", ...]`).
    pub fn into_error(self) -> Error {
        match self {
            ToolError::UnknownTool(n) => Error::not_found(ErrorCode::UnknownTool, format!("Unknown tool: {n}")),
            ToolError::UnknownSpace(s) => Error::not_found(ErrorCode::SpaceNotFound, format!("Unknown space: {s}")),
            ToolError::Failed(e) => e,
        }
    }
}

/// The argument a field error names: the last name after `arguments` (an argument may be called `query`), or
/// else the last name that is no transport.
fn argument_of(f: &crate::error::FieldError) -> Option<String> {
    let names = || f.loc.iter().filter_map(|p| p.as_str());
    match names().position(|p| p == "arguments") {
        Some(i) => names().skip(i + 1).last(),
        None => names().skip(usize::from(f.in_request)).last().filter(|s| !matches!(*s, "body" | "query")),
    }
    .map(str::to_string)
}

fn failure_message(e: &Error) -> String {
    if e.kind() == ErrorKind::InvalidInput {
        let parts: Vec<String> = e
            .fields()
            .iter()
            .map(|f| match argument_of(f) {
                Some(a) => format!("argument '{a}': {}", f.msg),
                None => f.msg.clone(),
            })
            .collect();
        if !parts.is_empty() {
            return format!("Invalid arguments: {}", parts.join("; "));
        }
    }
    e.message().to_string()
}

/// One tool of the table.
pub struct Tool {
    /// Name, as agents call it.
    pub name: &'static str,
    /// What it does, for the model.
    pub description: &'static str,
    /// JSON Schema of the arguments (an object schema), as JSON text.
    pub input_schema: &'static str,
    /// Reads only (`readOnlyHint`).
    pub read_only: bool,
    /// May delete or overwrite (`destructiveHint`).
    pub destructive: bool,
    /// In the 16-tool external-agent set.
    pub external: bool,
    handler: fn(&Call<'_>) -> Result<Value, ToolError>,
}

impl std::fmt::Debug for Tool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tool").field("name", &self.name).finish_non_exhaustive()
    }
}

impl Tool {
    /// The input schema as JSON, in the portable dialect: one `type` per property (a nullable property is
    /// optional instead; null is still accepted and means absent), and `anyOf` branches where a property
    /// takes two types (labels as a string or an array), as MCP Inspector's `--strict` portability check and
    /// single-type dialects (Gemini function declarations) want.
    pub fn schema(&self) -> Value {
        let mut s: Value = serde_json::from_str(self.input_schema).unwrap_or_else(|_| json!({"type": "object"}));
        if let Some(props) = s.get_mut("properties").and_then(Value::as_object_mut) {
            for p in props.values_mut() {
                portable(p);
            }
        }
        s
    }

    /// The MCP `Tool` object: `name`, `description`, `inputSchema`, `outputSchema` (any object) and
    /// `annotations`.
    pub fn descriptor(&self) -> Value {
        json!({
            "name": self.name,
            "description": self.description,
            "inputSchema": self.schema(),
            "outputSchema": {"type": "object", "additionalProperties": true},
            "annotations": {
                "readOnlyHint": self.read_only,
                "destructiveHint": self.destructive,
                "idempotentHint": self.read_only,
                "openWorldHint": false,
            },
        })
    }
}

/// Rewrites one property schema with a `type` list into a single type or `anyOf` branches.
fn portable(p: &mut Value) {
    let Some(o) = p.as_object_mut() else { return };
    let Some(types) = o.get("type").and_then(Value::as_array).cloned() else { return };
    let types: Vec<String> =
        types.iter().filter_map(|t| t.as_str()).filter(|t| *t != "null").map(str::to_string).collect();
    if let Some(Value::Array(e)) = o.get_mut("enum") {
        e.retain(|v| !v.is_null());
    }
    if types.len() == 1 {
        o.insert("type".into(), types[0].clone().into());
        return;
    }
    o.remove("type");
    // Keywords that belong to one type go to that type's branch.
    let owned: &[(&str, &[&str])] = &[
        ("string", &["maxLength", "minLength", "pattern"]),
        ("array", &["items", "maxItems", "minItems"]),
        ("integer", &["minimum", "maximum"]),
    ];
    let mut branches = Vec::new();
    for t in &types {
        let mut b = serde_json::Map::new();
        b.insert("type".into(), t.clone().into());
        for (ty, keys) in owned {
            if ty == t {
                for k in *keys {
                    if let Some(v) = o.remove(*k) {
                        b.insert((*k).into(), v);
                    }
                }
            }
        }
        branches.push(Value::Object(b));
    }
    o.insert("anyOf".into(), Value::Array(branches));
}

/// What a handler sees: the API, the resolved space and identity, and the arguments.
pub struct Call<'a> {
    /// The API.
    pub api: &'a Api,
    /// The space this call runs in (header, else argument, else `default`); known to exist.
    pub space: String,
    /// The trusted scope.
    pub scope: &'a Scope,
    /// The arguments (unknown keys are ignored).
    pub args: Args,
}

impl Call<'_> {
    /// `agent_id`: the header, else the argument.
    pub fn agent_id(&self) -> Option<String> {
        self.scope.agent_id.clone().or_else(|| self.args.opt_str("agent_id").ok().flatten())
    }

    /// `host_agent_id`: the header, else the argument.
    pub fn host_agent_id(&self) -> Option<String> {
        self.scope.host_agent_id.clone().or_else(|| self.args.opt_str("host_agent_id").ok().flatten())
    }

    /// The calling app: `source_app` argument if given, else the `APP` header's normalised name.
    pub fn app(&self) -> String {
        self.args.opt_str("source_app").ok().flatten().unwrap_or_else(|| self.scope.app.clone())
    }
}

/// The tools visible to `scope`, in table order.
pub fn visible(scope: &Scope) -> impl Iterator<Item = &'static Tool> + '_ {
    TOOLS.iter().filter(move |t| scope.tool_set == ToolSet::Full || t.external)
}

/// The tool `name`, if `scope` may call it.
pub fn find(scope: &Scope, name: &str) -> Option<&'static Tool> {
    TOOLS.iter().find(|t| t.name == name && (scope.tool_set == ToolSet::Full || t.external))
}

/// Calls tool `name` with `arguments` (an object, or null for none) in `scope`: the one dispatcher of every
/// transport. Returns the tool's result object.
///
/// # Errors
/// [`ToolError::UnknownTool`], [`ToolError::UnknownSpace`] (checked before the tool runs), or the tool's own
/// [`ToolError::Failed`].
pub fn call(api: &Api, scope: &Scope, name: &str, arguments: Value) -> Result<Value, ToolError> {
    let tool = find(scope, name).ok_or_else(|| ToolError::UnknownTool(name.to_string()))?;
    let args = match arguments {
        Value::Object(m) => Args::new(m),
        Value::Null => Args::new(Map::new()),
        other => {
            return Err(ToolError::Failed(Error::invalid_field(
                &["arguments"],
                "dict_type",
                "arguments must be an object",
                other,
            )));
        }
    };
    let space = match scope.space_id.clone() {
        Some(s) => s,
        None => args.opt_str("space_id")?.filter(|s| !s.trim().is_empty()).unwrap_or_else(|| DEFAULT_SPACE.into()),
    };
    if api.store().spaces().require(&space).is_err() {
        return Err(ToolError::UnknownSpace(space));
    }
    let call = Call { api, space, scope, args };
    (tool.handler)(&call)
}

macro_rules! tool {
    ($name:literal, $ext:literal, $ro:literal, $destr:literal, $desc:literal, $schema:expr, $h:expr) => {
        Tool {
            name: $name,
            description: $desc,
            input_schema: $schema,
            read_only: $ro,
            destructive: $destr,
            external: $ext,
            handler: $h,
        }
    };
}

/// Identity arguments every tool accepts (the headers win over them).
macro_rules! ids {
    () => {
        r#""space_id":{"type":["string","null"],"description":"space (the X-Nmem-Space-Id header wins)"},"agent_id":{"type":["string","null"]},"host_agent_id":{"type":["string","null"]},"source_app":{"type":["string","null"]}"#
    };
}

/// Tools of the external-agent set (`mcp.md` §3.1).
pub const EXTERNAL_AGENT_TOOLS: usize = 16;

/// Every tool, external-agent set first.
pub static TOOLS: &[Tool] = &[
    tool!(
        "read_context_bundle",
        true,
        true,
        false,
        "Read the session-start context: today's working memory and the most useful recent memories, as markdown (rendered_markdown).",
        concat!(
            r#"{"type":"object","properties":{"include_working_memory":{"type":"boolean","default":true},"#,
            ids!(),
            "}}"
        ),
        memory::read_context_bundle
    ),
    tool!(
        "read_working_memory",
        true,
        true,
        false,
        "Read the working memory (a daily briefing) of a day, today by default.",
        concat!(
            r#"{"type":"object","properties":{"date":{"type":["string","null"],"description":"YYYY-MM-DD; default today"},"#,
            ids!(),
            "}}"
        ),
        memory::read_working_memory
    ),
    tool!(
        "memory_search",
        true,
        true,
        false,
        "Search memories (hybrid BM25 + vector). A blank query lists the most recent memories. Filters: labels, unit type, event and recorded dates. include_context adds the messages or chunks around each hit.",
        concat!(
            r#"{"type":"object","properties":{"query":{"type":["string","null"],"maxLength":500},"limit":{"type":"integer","minimum":1,"maximum":20,"default":10},"filter_labels":{"type":["string","array","null"],"items":{"type":"string"},"description":"comma-separated label names (all must match)"},"mode":{"type":"string","enum":["normal","deep","fast"],"default":"normal"},"confidence_threshold":{"type":"number","minimum":0,"maximum":1,"default":0.2},"unit_type":{"type":["string","null"]},"event_date_from":{"type":["string","null"],"description":"YYYY, YYYY-MM or YYYY-MM-DD"},"event_date_to":{"type":["string","null"]},"temporal_context":{"type":["string","null"],"enum":["past","present","future","timeless",null]},"recorded_date_from":{"type":["string","null"],"description":"YYYY-MM-DD"},"recorded_date_to":{"type":["string","null"]},"include_context":{"type":"boolean","default":false,"description":"add each hit's neighbouring messages or chunks (the exchange around it)"},"context_window":{"type":"integer","minimum":1,"maximum":10,"default":1},"#,
            ids!(),
            "}}"
        ),
        memory::memory_search
    ),
    tool!(
        "get_memory_by_id",
        true,
        true,
        false,
        "Read one memory by id (the full record, as GET /memories/{id}).",
        concat!(
            r#"{"type":"object","required":["memory_id"],"properties":{"memory_id":{"type":"string","minLength":1},"#,
            ids!(),
            "}}"
        ),
        memory::get_memory_by_id
    ),
    tool!(
        "memory_add",
        true,
        false,
        false,
        "Store a memory (a fact, preference, decision, plan, procedure, learning, context or event). Returns memory_id.",
        concat!(
            r#"{"type":"object","required":["content"],"properties":{"content":{"type":"string","minLength":1,"maxLength":32768},"title":{"type":["string","null"],"maxLength":200},"importance":{"type":"number","minimum":0,"maximum":1,"default":0.5},"labels":{"type":["string","array","null"],"items":{"type":"string"},"description":"label names: an array or a comma-separated string"},"unit_type":{"type":["string","null"],"enum":["fact","preference","decision","plan","procedure","learning","context","event",null]},"event_start":{"type":["string","null"],"description":"YYYY, YYYY-MM or YYYY-MM-DD"},"event_end":{"type":["string","null"]},"temporal_context":{"type":["string","null"],"enum":["past","present","future","timeless",null]},"expires_at":{"type":["string","null"],"description":"when the memory expires: RFC 3339 or YYYY-MM-DD; it then leaves search and listings"},"#,
            ids!(),
            "}}"
        ),
        memory::memory_add
    ),
    tool!(
        "memory_update",
        true,
        false,
        false,
        "Change a memory's title, content, importance, labels (labels replace the set) or expiry. At least one field is needed.",
        concat!(
            r#"{"type":"object","required":["memory_id"],"properties":{"memory_id":{"type":"string","minLength":1},"title":{"type":["string","null"],"maxLength":200},"content":{"type":["string","null"],"maxLength":32768},"importance":{"type":["number","null"],"minimum":0,"maximum":1},"labels":{"type":["string","array","null"],"items":{"type":"string"}},"expires_at":{"type":["string","null"],"description":"a new expiry time (RFC 3339 or YYYY-MM-DD); an empty string clears it"},"#,
            ids!(),
            "}}"
        ),
        memory::memory_update
    ),
    tool!(
        "thread_search",
        true,
        true,
        false,
        "Search conversation threads by the words of their messages; a blank query lists recent threads.",
        concat!(
            r#"{"type":"object","properties":{"query":{"type":["string","null"],"maxLength":500},"limit":{"type":"integer","minimum":1,"maximum":50,"default":10},"mode":{"type":"string","enum":["full","suggestions"],"default":"full"},"source":{"type":["string","null"]},"#,
            ids!(),
            "}}"
        ),
        threads::thread_search
    ),
    tool!(
        "thread_fetch_messages",
        true,
        true,
        false,
        "Read a page of a thread's messages in order.",
        concat!(
            r#"{"type":"object","required":["thread_id"],"properties":{"thread_id":{"type":"string","minLength":1},"offset":{"type":"integer","minimum":0,"default":0},"limit":{"type":"integer","minimum":1,"maximum":100,"default":50},"#,
            ids!(),
            "}}"
        ),
        threads::thread_fetch_messages
    ),
    tool!(
        "mem_fs",
        true,
        false,
        false,
        "Browse memory as a file tree. Shell form: \"ls /\", \"cat /memories/by-id/<id>.memory.md --line 1 --lines 20\", \"stat PATH\", \"find /memories --label L --unit-type T --since D --mentions E\", \"grep [-E] [--case-sensitive] QUERY PATH\", \"recall QUERY --in PATH -k N\", \"write PATH --body TEXT\", \"rm PATH\", \"capabilities\". Structured form: command=verb with path, query, line, lines, body.",
        concat!(
            r#"{"type":"object","required":["command"],"properties":{"command":{"type":"string","minLength":1},"path":{"type":["string","null"]},"query":{"type":["string","null"]},"line":{"type":["integer","null"],"minimum":1},"lines":{"type":["integer","null"],"minimum":1},"body":{"type":["string","null"]},"limit":{"type":["integer","null"],"minimum":1},"regex":{"type":["boolean","null"]},"#,
            ids!(),
            "}}"
        ),
        memfs::mem_fs
    ),
    tool!(
        "find_skills",
        true,
        true,
        false,
        "Find learned skills (procedures) that fit a task. Each has a stable skill-… id and a version to report outcomes against.",
        concat!(
            r#"{"type":"object","properties":{"query":{"type":["string","null"],"maxLength":500},"limit":{"type":"integer","minimum":1,"maximum":20,"default":5},"#,
            ids!(),
            "}}"
        ),
        agent::find_skills
    ),
    tool!(
        "report_skill_outcome",
        true,
        false,
        false,
        "Report how following a skill went: completed, completed_with_deviation, failed or abandoned, with a short note.",
        concat!(
            r#"{"type":"object","required":["skill_id","outcome"],"properties":{"skill_id":{"type":"string","minLength":1},"skill_version":{"type":["integer","null"],"minimum":1},"outcome":{"type":"string","enum":["completed","completed_with_deviation","failed","abandoned"]},"note":{"type":["string","null"],"maxLength":2000},"#,
            ids!(),
            "}}"
        ),
        agent::report_skill_outcome
    ),
    tool!(
        "list_timeline_reviews",
        true,
        true,
        false,
        "List review events: a new memory that looks like an update or a contradiction of an active one (shared entities, high similarity, a differing number, date, negation or value).",
        concat!(
            r#"{"type":"object","properties":{"limit":{"type":"integer","minimum":1,"maximum":100,"default":20},"offset":{"type":"integer","minimum":0,"default":0},"last_n_days":{"type":"integer","minimum":1,"maximum":3650,"default":365},"unresolved_only":{"type":"boolean","default":true},"#,
            ids!(),
            "}}"
        ),
        agent::list_timeline_reviews
    ),
    tool!(
        "resolve_timeline_review",
        true,
        false,
        true,
        "Resolve a review event: preview first (phase=preview, returns plan_id), then apply. Actions: keep_newer_as_latest, keep_older_as_latest, keep_both_linked, no_change_needed, dismiss, custom_note_only.",
        concat!(
            r#"{"type":"object","required":["event_id","action"],"properties":{"event_id":{"type":"string","minLength":1},"action":{"type":"string","enum":["keep_newer_as_latest","keep_older_as_latest","keep_both_linked","no_change_needed","dismiss","custom_note_only"]},"phase":{"type":"string","enum":["preview","apply"],"default":"preview"},"resolution_note":{"type":["string","null"],"maxLength":2000},"plan_id":{"type":["string","null"]},"memory_ids":{"type":["array","null"],"items":{"type":"string"}},"#,
            ids!(),
            "}}"
        ),
        agent::resolve_timeline_review
    ),
    tool!(
        "memory_evolves_revise",
        true,
        false,
        true,
        "Revise a memory's version chain: supersede it with a new version (new content) or with an existing memory. Preview first (phase=preview), then apply.",
        concat!(
            r#"{"type":"object","required":["memory_id"],"properties":{"memory_id":{"type":"string","minLength":1},"new_content":{"type":["string","null"],"maxLength":32768},"new_title":{"type":["string","null"],"maxLength":200},"newer_memory_id":{"type":["string","null"]},"reason":{"type":["string","null"],"maxLength":1000},"phase":{"type":"string","enum":["preview","apply"],"default":"preview"},"#,
            ids!(),
            "}}"
        ),
        agent::memory_evolves_revise
    ),
    tool!(
        "check_claims",
        true,
        true,
        false,
        "Check claims against memory: for each claim the supporting and contradicting memories with scores, and a verdict (supported, contradicted, unknown).",
        concat!(
            r#"{"type":"object","required":["claims"],"properties":{"claims":{"type":["array","string"],"items":{"type":"string"},"maxItems":20},"limit":{"type":"integer","minimum":1,"maximum":10,"default":3},"#,
            ids!(),
            "}}"
        ),
        agent::check_claims
    ),
    tool!(
        "trigger_memory_catchup",
        true,
        false,
        false,
        "Distil memories from thread messages that were never distilled, within a horizon (today, a number of days, all, or off). Reports the counts.",
        concat!(
            r#"{"type":"object","properties":{"horizon":{"type":["string","integer","null"],"default":"today","description":"today, a number of days, all, or off"},"#,
            ids!(),
            "}}"
        ),
        agent::trigger_memory_catchup
    ),
    tool!(
        "memory_delete",
        false,
        false,
        true,
        "Delete one memory (memory_id) or several (memory_ids).",
        concat!(
            r#"{"type":"object","properties":{"memory_id":{"type":["string","null"]},"memory_ids":{"type":["array","null"],"items":{"type":"string"}},"#,
            ids!(),
            "}}"
        ),
        memory::memory_delete
    ),
    tool!(
        "list_memory_labels",
        false,
        true,
        false,
        "The labels in use, most used first (top 100).",
        concat!(r#"{"type":"object","properties":{"#, ids!(), "}}"),
        memory::list_memory_labels
    ),
    tool!(
        "thread_delete",
        false,
        false,
        true,
        "Delete a thread and its messages; cascade_delete_memories also deletes the memories distilled from it.",
        concat!(
            r#"{"type":"object","required":["thread_id"],"properties":{"thread_id":{"type":"string","minLength":1},"cascade_delete_memories":{"type":"boolean","default":false},"#,
            ids!(),
            "}}"
        ),
        threads::thread_delete
    ),
    tool!(
        "search_source_chunks",
        false,
        true,
        false,
        "Search inside one Library source (a file or page): its best-matching chunks with their text.",
        concat!(
            r#"{"type":"object","required":["source_id","query"],"properties":{"source_id":{"type":"string","minLength":1},"query":{"type":"string","minLength":1,"maxLength":500},"limit":{"type":"integer","minimum":1,"maximum":50,"default":5},"#,
            ids!(),
            "}}"
        ),
        agent::search_source_chunks
    ),
    tool!(
        "analyze_source_data",
        false,
        true,
        false,
        "Column statistics of a CSV or TSV Library source: per column the inferred type, counts, min, max, mean and top values.",
        concat!(
            r#"{"type":"object","required":["source_id"],"properties":{"source_id":{"type":"string","minLength":1},"columns":{"type":["array","null"],"items":{"type":"string"},"description":"only these columns; all by default"},"#,
            ids!(),
            "}}"
        ),
        agent::analyze_source_data
    ),
    tool!(
        "memory_neighbors",
        false,
        true,
        false,
        "A memory's neighbours: related memories (typed relations, version links) and the entities it mentions.",
        concat!(
            r#"{"type":"object","required":["memory_id"],"properties":{"memory_id":{"type":"string","minLength":1},"edge_types":{"type":["string","null"],"description":"comma list of relation types"},"depth":{"type":"integer","minimum":1,"maximum":3,"default":1},"#,
            ids!(),
            "}}"
        ),
        graph::memory_neighbors
    ),
    tool!(
        "memory_evolves_chain",
        false,
        true,
        false,
        "The version chain of a memory: older versions it supersedes and newer ones that supersede it, oldest first.",
        concat!(
            r#"{"type":"object","required":["memory_id"],"properties":{"memory_id":{"type":"string","minLength":1},"max_depth":{"type":"integer","minimum":1,"maximum":50,"default":10},"#,
            ids!(),
            "}}"
        ),
        graph::memory_evolves_chain
    ),
    tool!(
        "list_crystals",
        false,
        true,
        false,
        "Crystals: memories synthesised from several source memories.",
        concat!(
            r#"{"type":"object","properties":{"limit":{"type":"integer","minimum":1,"maximum":100,"default":20},"offset":{"type":"integer","minimum":0,"default":0},"#,
            ids!(),
            "}}"
        ),
        graph::list_crystals
    ),
    tool!(
        "graph_stats",
        false,
        true,
        false,
        "Counts of the knowledge graph: memories, entities, threads, relations, communities.",
        concat!(r#"{"type":"object","properties":{"#, ids!(), "}}"),
        graph::graph_stats
    ),
    tool!(
        "list_communities",
        false,
        true,
        false,
        "Topic communities of the entity graph (Louvain), heaviest first.",
        concat!(
            r#"{"type":"object","properties":{"limit":{"type":"integer","minimum":1,"maximum":50,"default":20},"#,
            ids!(),
            "}}"
        ),
        graph::list_communities
    ),
    tool!(
        "get_community_details",
        false,
        true,
        false,
        "A community: its summary, most central entities and memories of this space.",
        concat!(
            r#"{"type":"object","required":["community_id"],"properties":{"community_id":{"type":["string","integer"]},"limit":{"type":"integer","minimum":1,"maximum":50,"default":20},"#,
            ids!(),
            "}}"
        ),
        graph::get_community_details
    ),
    tool!(
        "explore_graph",
        false,
        true,
        false,
        "Explore the graph around memories (comma-separated ids): their entities, the memories sharing them, relations.",
        concat!(
            r#"{"type":"object","required":["memory_ids"],"properties":{"memory_ids":{"type":["string","array"],"items":{"type":"string"}},"depth":{"type":"integer","minimum":1,"maximum":3,"default":1},"limit":{"type":"integer","minimum":1,"maximum":50,"default":15},"#,
            ids!(),
            "}}"
        ),
        graph::explore_graph
    ),
    tool!(
        "list_spaces",
        false,
        true,
        false,
        "The spaces of this store (the X-Nmem-Space-Id header, when set, marks the active one).",
        r#"{"type":"object","properties":{}}"#,
        graph::list_spaces
    ),
    tool!(
        "sync_status",
        false,
        true,
        false,
        "Whether this store syncs with the person's other devices (docs/sync.md): this device, the shared folder, changes not yet written, and each other device's last segment, when it was last seen, the changes and conflicts applied, and the last error.",
        r#"{"type":"object","properties":{}}"#,
        graph::sync_status
    ),
];

/// Body of `POST /agent/tools/call`.
#[derive(Debug, Clone, serde::Deserialize, utoipa::ToSchema)]
pub struct ToolCallRequest {
    /// The tool's name (see `tools/list` over MCP).
    pub name: String,
    /// The tool's arguments (an object; null or absent for none).
    #[serde(default)]
    #[schema(value_type = Object)]
    pub arguments: Value,
}

/// The REST twin: `POST /agent/tools/call` with `{"name", "arguments"}` answers the tool's result object.
pub(crate) fn rest_call(api: &Api, ctx: &super::Ctx<'_>) -> crate::error::Result<super::ApiResponse> {
    let b: ToolCallRequest = ctx.json()?;
    let scope = Scope::from_headers(ctx.headers.iter().copied());
    match call(api, &scope, &b.name, b.arguments) {
        Ok(v) => Ok(super::ApiResponse::json(200, &v)),
        Err(e) => Err(relocate_args(e.into_error())),
    }
}

/// Field errors of a REST handler (`["body", x]`, `["query", x]`) as errors of tool arguments
/// (`["arguments", x]`).
pub(crate) fn relocate_to_arguments(e: Error) -> Error {
    relocate(e, &["arguments"])
}

/// Field errors of a tool sit under `["body", "arguments", name]` over REST.
fn relocate_args(e: Error) -> Error {
    relocate(e, &["body", "arguments"])
}

/// Field error locations with their transport prefix (`body`, `query`, `arguments`) replaced by `prefix`.
fn relocate(e: Error, prefix: &[&str]) -> Error {
    e.map_fields(|mut f| {
        // Library errors name the field; errors of the HTTP layer start with their transport, dropped here.
        let skip = if f.in_request { 1 } else { 0 };
        let rest: Vec<_> = f.loc.iter().skip(skip).filter(|p| p.as_str() != Some("arguments")).cloned().collect();
        f.loc = prefix.iter().map(|p| json!(p)).chain(rest).collect();
        f.in_request = true;
        f
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_schema_parses_as_an_object_schema() {
        for t in TOOLS {
            let s: Value = serde_json::from_str(t.input_schema).unwrap_or_else(|e| panic!("{}: {e}", t.name));
            assert_eq!(s["type"], "object", "{}", t.name);
            for (name, p) in t.schema()["properties"].as_object().into_iter().flatten() {
                assert!(p["type"].is_string() || p["anyOf"].is_array(), "{}.{name}: {p}", t.name);
            }
        }
        let labels = find(&Scope::default(), "memory_add").map(|t| t.schema()["properties"]["labels"].clone());
        assert_eq!(
            labels,
            Some(json!({"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}],
                "description": "label names: an array or a comma-separated string"}))
        );
        let names: std::collections::HashSet<_> = TOOLS.iter().map(|t| t.name).collect();
        assert_eq!(names.len(), TOOLS.len(), "duplicate tool names");
        assert_eq!(TOOLS.iter().filter(|t| t.external).count(), EXTERNAL_AGENT_TOOLS);
    }

    #[test]
    fn headers_make_the_scope_and_empty_values_are_absent() {
        let s = Scope::from_headers([
            ("APP", " Claude Code "),
            ("x-nmem-space-id", ""),
            ("X-Nmem-Agent-Id", "a1"),
            ("X-Nmem-Tool-Set", "external-agent"),
        ]);
        assert_eq!(s.app, "claude_code");
        assert_eq!(s.space_id, None);
        assert_eq!(s.agent_id.as_deref(), Some("a1"));
        assert_eq!(s.tool_set, ToolSet::ExternalAgent);
        assert_eq!(visible(&s).count(), EXTERNAL_AGENT_TOOLS);
        assert!(find(&s, "memory_delete").is_none());
        assert_eq!(Scope::from_headers([]).app, "mcp_generic");
    }
}
