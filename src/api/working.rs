//! Working memory, context bundle and statistics routes (client contract section 6).

use serde::Deserialize;
use utoipa::ToSchema;

use super::query::{ParamSpec, boolean, int, string};
use super::route::{Dto, Shape, route};
use super::{Api, ApiResponse, Ctx};
use crate::error::{Error, ErrorKind, Result};
use crate::index::catalog::MemoryFilter;
use crate::store::{DEFAULT_SPACE, ListQuery, WorkingMemory, working_today};

/// The routes of this module, in table order ([`super::routes::ROUTES`] gathers every module's list).
pub(super) const ROUTES: &[super::route::Route] = &[
    route!(
        "GET",
        "/agent/working-memory",
        "read_working_memory",
        "Working memory of a space (latest day, or `date`)",
        READ_PARAMS,
        None,
        Shape::Ref(Dto::of::<WorkingMemoryResponse>()),
        false,
        read
    ),
    route!(
        "PUT",
        "/agent/working-memory",
        "write_working_memory",
        "Replace today's working memory",
        WRITE_PARAMS,
        Some(Dto::of::<WorkingMemoryRequest>()),
        Shape::Ref(Dto::of::<WorkingMemoryResponse>()),
        false,
        write
    ),
    route!(
        "GET",
        "/agent/working-memory/history",
        "working_memory_history",
        "Days with a working memory, newest first",
        HISTORY_PARAMS,
        None,
        Shape::Ref(Dto::of::<WorkingMemoryHistory>()),
        false,
        history
    ),
    route!(
        "GET",
        "/context/bundle",
        "context_bundle",
        "Working memory and recent memories as markdown (session start)",
        BUNDLE_PARAMS,
        None,
        Shape::Ref(Dto::of::<ContextBundle>()),
        false,
        bundle
    ),
    route!(
        "GET",
        "/stats",
        "get_stats",
        "Store counters (one space with space_id)",
        STATS_PARAMS,
        None,
        Shape::Ref(Dto::of::<crate::store::StoreStats>()),
        false,
        stats
    ),
    route!(
        "GET",
        "/sync/status",
        "get_sync_status",
        "This device's place in its sync group: device id, folder, pending changes, the other devices (Engram extension)",
        &[],
        None,
        Shape::Ref(Dto::of::<crate::store::SyncStatus>()),
        false,
        sync_status
    ),
    route!(
        "DELETE",
        "/sync/devices/{device_id}",
        "remove_sync_device",
        "Remove a device from the sync group for good: its later segments are refused everywhere and the group key rotates; returns the new pairing code (Engram extension)",
        &[],
        None,
        Shape::Ref(Dto::of::<crate::store::RemoveReport>()),
        false,
        remove_sync_device
    ),
    route!(
        "POST",
        "/health/checkpoint",
        "health_checkpoint",
        "Force a durable commit of pending writes and report what it flushed",
        &[],
        None,
        Shape::Ref(Dto::of::<CheckpointResponse>()),
        false,
        checkpoint
    ),
];

/// Body of `PUT /agent/working-memory`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
pub struct WorkingMemoryRequest {
    /// Markdown, at most 262,144 bytes (replaces today's document).
    pub content: String,
    /// Space (default: the `space_id` query parameter, else `default`).
    #[serde(default)]
    pub space_id: Option<String>,
}

pub(super) const READ_PARAMS: &[ParamSpec] = &[
    string("space_id", Some(DEFAULT_SPACE), "space"),
    string("date", None, "a past day, YYYY-MM-DD (default: the latest)"),
];

pub(super) const WRITE_PARAMS: &[ParamSpec] = &[string("space_id", None, "space")];

pub(super) const HISTORY_PARAMS: &[ParamSpec] =
    &[int("limit", 1, Some(365), Some(30), "days"), string("space_id", Some(DEFAULT_SPACE), "space")];

pub(super) const BUNDLE_PARAMS: &[ParamSpec] = &[
    string("space_id", Some(DEFAULT_SPACE), "space"),
    boolean("include_working_memory", Some(true), "include today's working memory"),
    string("source_app", None, "calling app (accepted)"),
    string("agent_id", None, "agent identity (accepted)"),
    string("host_agent_id", None, "host-local agent id (accepted)"),
];

fn path_of(wm: &WorkingMemory) -> String {
    if wm.date == working_today() {
        "/working-memory/today.md".into()
    } else {
        format!("/working-memory/{}.md", wm.date)
    }
}

/// `GET /agent/working-memory` (and, with `success`, `PUT`): one day's working memory of a space.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct WorkingMemoryResponse {
    /// Set (true) by a write.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub success: Option<bool>,
    /// Whether the day has working memory.
    pub exists: bool,
    /// The markdown (empty when none).
    pub content: String,
    /// The day, `YYYY-MM-DD`.
    pub date: String,
    /// The space.
    pub space_id: String,
    /// Its tree path.
    pub file_path: String,
    /// Its tree path (same as `file_path`).
    pub path: String,
    /// Last change; null when none.
    pub last_modified: Option<crate::model::Timestamp>,
    /// Same as `last_modified` (the interface's camel-case alias).
    #[serde(rename = "lastModified")]
    pub last_modified_alias: Option<crate::model::Timestamp>,
}

fn wm_json(space: &str, wm: Option<&WorkingMemory>) -> WorkingMemoryResponse {
    match wm {
        Some(w) => WorkingMemoryResponse {
            success: None,
            exists: true,
            content: w.content.clone(),
            date: w.date.clone(),
            space_id: space.to_string(),
            file_path: path_of(w),
            path: path_of(w),
            last_modified: Some(w.updated_at),
            last_modified_alias: Some(w.updated_at),
        },
        None => WorkingMemoryResponse {
            success: None,
            exists: false,
            content: String::new(),
            date: working_today(),
            space_id: space.to_string(),
            file_path: "/working-memory/today.md".into(),
            path: "/working-memory/today.md".into(),
            last_modified: None,
            last_modified_alias: None,
        },
    }
}

/// One day of `GET /agent/working-memory/history`.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct WorkingMemoryDay {
    /// The day, `YYYY-MM-DD`.
    pub date: String,
    /// Bytes of its markdown.
    pub size_bytes: u64,
    /// Last change.
    pub updated_at: crate::model::Timestamp,
    /// Its tree path.
    pub path: String,
}

/// `GET /agent/working-memory/history`.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct WorkingMemoryHistory {
    /// The space.
    pub space_id: String,
    /// Days with working memory, newest first.
    pub history: Vec<WorkingMemoryDay>,
    /// The same days' dates.
    pub dates: Vec<String>,
}

/// `GET /context/bundle`: working memory and recent memories for an agent's context.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct ContextBundle {
    /// Always 1.
    pub schema_version: u32,
    /// The space.
    pub space_id: String,
    /// The bundle as markdown.
    pub rendered_markdown: String,
    /// Same as `rendered_markdown`.
    pub markdown: String,
    /// Today's working memory, when there is one and it was asked for.
    pub working_memory: Option<WorkingMemoryResponse>,
    /// The 10 most important of the 50 most recently changed memories.
    pub memories: Vec<super::dto::MemoryOut>,
}

/// `POST /health/checkpoint`: what the checkpoint made durable.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct CheckpointResponse {
    /// What was flushed.
    #[serde(flatten)]
    pub report: crate::store::CheckpointReport,
    /// Always true.
    pub success: bool,
    /// Always true.
    pub durable: bool,
    /// One line.
    pub message: String,
}

pub(super) fn read(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let space = ctx.query.str("space_id").unwrap_or(DEFAULT_SPACE);
    Ok(ApiResponse::json(200, &working_memory(api, space, ctx.query.str("date"))?))
}

/// The body of `GET /agent/working-memory`: the working memory of `space` on `date` (default: the latest day),
/// or an empty one for today. Also the `read_working_memory` tool's call.
///
/// # Errors
/// As [`crate::store::Working::get`].
pub(crate) fn working_memory(api: &Api, space: &str, date: Option<&str>) -> Result<WorkingMemoryResponse> {
    let wm = api.store().working().get(space, date)?;
    Ok(wm_json(space, wm.as_ref()))
}

pub(super) fn write(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let req: WorkingMemoryRequest = ctx.json()?;
    let space = req.space_id.as_deref().or_else(|| ctx.query.str("space_id")).unwrap_or(DEFAULT_SPACE);
    let wm = api.store().working().set(space, &req.content)?;
    let mut v = wm_json(space, Some(&wm));
    v.success = Some(true);
    Ok(ApiResponse::json(200, &v))
}

pub(super) fn history(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let space = ctx.query.str("space_id").unwrap_or(DEFAULT_SPACE);
    let limit = ctx.query.limit();
    let days = api.store().working().history(space, limit)?;
    let history: Vec<WorkingMemoryDay> = days
        .iter()
        .map(|w| WorkingMemoryDay {
            date: w.date.clone(),
            size_bytes: w.content.len() as u64,
            updated_at: w.updated_at,
            path: path_of(w),
        })
        .collect();
    Ok(ApiResponse::json(
        200,
        &WorkingMemoryHistory {
            space_id: space.to_string(),
            history,
            dates: days.iter().map(|w| w.date.clone()).collect(),
        },
    ))
}

/// The context bundle: today's working memory and the most useful recent memories (the 50 most recently
/// changed active memories, the 10 most important of them, newest first among equals), as markdown.
pub(super) fn bundle(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let space = ctx.query.str("space_id").unwrap_or(DEFAULT_SPACE);
    let with_working_memory = ctx.query.bool("include_working_memory").unwrap_or(true);
    Ok(ApiResponse::json(200, &context_bundle(api, space, with_working_memory)?))
}

/// `GET /context/bundle` as a typed call: today's working memory (when `with_working_memory`) and the 10 most
/// important of the 50 most recently changed memories of `space`, as records and as markdown.
///
/// # Errors
/// 404 when `space` does not exist; storage errors.
pub(crate) fn context_bundle(api: &Api, space: &str, with_working_memory: bool) -> Result<ContextBundle> {
    let store = api.store();
    let wm = if with_working_memory {
        store.working().get(space, None)?
    } else {
        store.spaces().require(space)?;
        None
    };
    let page = store.memories().list(&ListQuery {
        space_id: space.to_string(),
        filter: MemoryFilter::default(),
        limit: 50,
        offset: 0,
    })?;
    let mut recent = page.items;
    recent.sort_by(|a, b| {
        b.memory.importance.total_cmp(&a.memory.importance).then(b.memory.updated_at.cmp(&a.memory.updated_at))
    });
    recent.truncate(10);
    let mut md = String::new();
    if let Some(w) = &wm {
        md.push_str(&format!("## Working memory ({})\n\n{}\n\n", w.date, w.content.trim()));
    }
    if !recent.is_empty() {
        md.push_str("## Recent memories\n\n");
        for m in &recent {
            let m = &m.memory;
            let head = if m.title.is_empty() {
                crate::extract::first_sentence(&m.content).to_string()
            } else {
                m.title.clone()
            };
            md.push_str(&format!(
                "- **{}** ({}, {}): {}\n",
                head,
                m.unit_type.as_str(),
                &m.updated_at.to_rfc3339()[..10],
                m.content.trim()
            ));
        }
    }
    Ok(ContextBundle {
        schema_version: 1,
        space_id: space.to_string(),
        rendered_markdown: md.clone(),
        markdown: md,
        working_memory: wm.as_ref().map(|w| wm_json(space, Some(w))),
        memories: recent.into_iter().map(super::dto::MemoryOut::from).collect(),
    })
}

pub(super) const STATS_PARAMS: &[super::query::ParamSpec] =
    &[super::query::string("space_id", None, "count one space; omitted: every space")];

pub(super) fn stats(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    Ok(ApiResponse::json(200, &api.store().admin().stats(ctx.query.str("space_id").filter(|s| !s.is_empty()))?))
}

pub(super) fn sync_status(api: &Api, _: &Ctx<'_>) -> Result<ApiResponse> {
    Ok(ApiResponse::json(200, &api.store().sync().status()?))
}

/// `DELETE /sync/devices/{device_id}`: [`crate::store::SyncService::remove_device`], so that a daemon that runs
/// for years need not stop for it (`engram sync remove` opens the store itself).
/// A device id that is not 32 hex digits names no device (404); a store in no group, or this device's own id,
/// is a conflict with the store's state (409), not a malformed request.
pub(super) fn remove_sync_device(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let id = ctx.param("device_id");
    if crate::model::DeviceId::parse(id).is_none() {
        return Err(Error::new(ErrorKind::NotFound, format!("no device '{id}' (a device id is 32 hex digits)")));
    }
    match api.store().sync().remove_device(id) {
        Ok(r) => Ok(ApiResponse::json(200, &r)),
        Err(e) if e.kind() == ErrorKind::InvalidInput => Err(Error::new(ErrorKind::Conflict, e.to_string())),
        Err(e) => Err(e),
    }
}

pub(super) fn checkpoint(api: &Api, _: &Ctx<'_>) -> Result<ApiResponse> {
    let r = api.store().admin().checkpoint_report()?;
    let message = format!(
        "checkpoint at generation {}: {} write transactions and {} access updates made durable",
        r.generation, r.flushed_write_transactions, r.flushed_access_updates
    );
    Ok(ApiResponse::json(200, &CheckpointResponse { report: r, success: true, durable: true, message }))
}
