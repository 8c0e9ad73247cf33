//! Lifecycle routes: archive, forget, deprecate, supersede (bodies per client contract section 4), and
//! memory favourites.

use serde::Deserialize;
use utoipa::ToSchema;

use super::dto::MemoryOut;
use super::query::{ParamSpec, int, required_bool, string};
use super::route::{Dto, Shape, route};
use super::{Api, ApiResponse, Ctx};
use crate::error::Result;
use crate::store::Transition;

/// The routes of this module, in table order ([`super::routes::ROUTES`] gathers every module's list).
pub(super) const ROUTES: &[super::route::Route] = &[
    route!(
        "POST",
        "/memories/{memory_id}/archive",
        "archive_memory",
        "Archive: hide from everyday recall, keep readable by id",
        STATE_PARAMS,
        Some(Dto::of::<MemoryStateRequest>()),
        Shape::Ref(Dto::of::<StateChangeResponse>()),
        false,
        archive
    ),
    route!(
        "POST",
        "/memories/{memory_id}/forget",
        "forget_memory",
        "Forget: hide from recall and by-id reads",
        STATE_PARAMS,
        Some(Dto::of::<MemoryStateRequest>()),
        Shape::Ref(Dto::of::<StateChangeResponse>()),
        false,
        forget
    ),
    route!(
        "POST",
        "/memories/{memory_id}/deprecate",
        "deprecate_memory",
        "Deprecate, optionally naming the replacement",
        STATE_PARAMS,
        Some(Dto::of::<MemoryStateRequest>()),
        Shape::Ref(Dto::of::<StateChangeResponse>()),
        false,
        deprecate
    ),
    route!(
        "POST",
        "/memories/{memory_id}/supersede",
        "supersede_memory",
        "Supersede by a newer memory (newer_memory_id required)",
        STATE_PARAMS,
        Some(Dto::of::<MemoryStateRequest>()),
        Shape::Ref(Dto::of::<StateChangeResponse>()),
        false,
        supersede
    ),
    route!(
        "POST",
        "/memories/{memory_id}/favorite",
        "favorite_memory",
        "Mark or unmark a memory as favourite",
        FAVORITE_PARAMS,
        None,
        Shape::Ref(Dto::of::<super::dto::MessageResponse>()),
        false,
        favorite
    ),
    route!(
        "GET",
        "/favorites/memories",
        "favorite_memories",
        "Favourite memories",
        FAVORITES_PARAMS,
        None,
        Shape::ArrayOf(Dto::of::<MemoryOut>()),
        false,
        favorites
    ),
];

/// Body of `archive`, `forget`, `deprecate` and `supersede` (every field optional but `newer_memory_id` of
/// `supersede`; an empty body counts as `{}`).
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
pub struct MemoryStateRequest {
    /// Why (at most 1,000 characters); recorded in `metadata.lifecycle`.
    #[serde(default)]
    pub reason: Option<String>,
    /// Guard: the memory's space.
    #[serde(default)]
    pub space_id: Option<String>,
    /// `deprecate`: the memory that replaces this one.
    #[serde(default)]
    pub replacement_memory_id: Option<String>,
    /// `supersede`: the newer memory (required there).
    #[serde(default)]
    pub newer_memory_id: Option<String>,
}

pub(super) const STATE_PARAMS: &[ParamSpec] = &[string("space_id", None, "guard: the memory's space")];

pub(super) const FAVORITE_PARAMS: &[ParamSpec] =
    &[required_bool("is_favorite", "true marks, false unmarks"), string("space_id", None, "guard: the memory's space")];

pub(super) const FAVORITES_PARAMS: &[ParamSpec] = &[int("limit", 1, Some(100), Some(50), "memories")];

fn body(ctx: &Ctx<'_>) -> Result<MemoryStateRequest> {
    if ctx.body.iter().all(u8::is_ascii_whitespace) { Ok(MemoryStateRequest::default()) } else { ctx.json() }
}

fn run(api: &Api, ctx: &Ctx<'_>, make: impl FnOnce(&MemoryStateRequest) -> Result<Transition>) -> Result<ApiResponse> {
    let req = body(ctx)?;
    let t = make(&req)?;
    let guard = req.space_id.clone().or_else(|| ctx.query.str("space_id").map(str::to_string));
    let out = change_state(api, ctx.param("memory_id"), guard.as_deref(), t, req.reason)?;
    Ok(ApiResponse::json(200, &out))
}

/// The state change of `archive`, `forget`, `deprecate` and `supersede` as a typed call; `space` is the
/// optional guard, `reason` goes to `metadata.lifecycle`.
///
/// # Errors
/// As [`crate::store::Memories::change_state`] (404 when missing, 409 for a transition the state forbids).
pub(crate) fn change_state(
    api: &Api,
    id: &str,
    space: Option<&str>,
    t: Transition,
    reason: Option<String>,
) -> Result<StateChangeResponse> {
    let c = api.store().memories().change_state(id, space, t, reason)?;
    let state = c.view.memory.state.as_str();
    let forgotten = state == "forgotten";
    Ok(StateChangeResponse {
        success: true,
        id: id.to_string(),
        memory_id: id.to_string(),
        state: state.to_string(),
        previous_state: c.previous.as_str().to_string(),
        changed: c.changed,
        message: format!("memory '{id}' is {state}"),
        // A forgotten memory is not readable by id any more; its record is not echoed either.
        memory: (!forgotten).then(|| MemoryOut::from(c.view)),
    })
}

/// `POST /memories/{memory_id}/archive`, `/forget`, `/deprecate`, `/supersede`: the state change.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct StateChangeResponse {
    /// Always true.
    pub success: bool,
    /// The memory.
    pub id: String,
    /// The memory (same as `id`).
    pub memory_id: String,
    /// Its state now: `active`, `archived`, `deprecated`, `superseded` or `forgotten`.
    pub state: String,
    /// Its state before.
    pub previous_state: String,
    /// False when it was in that state already.
    pub changed: bool,
    /// One line.
    pub message: String,
    /// The memory as stored now; null once forgotten.
    pub memory: Option<MemoryOut>,
}

pub(super) fn archive(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    run(api, ctx, |_| Ok(Transition::Archive))
}

pub(super) fn forget(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    run(api, ctx, |_| Ok(Transition::Forget))
}

pub(super) fn deprecate(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    run(api, ctx, |r| Ok(Transition::Deprecate { replacement: r.replacement_memory_id.clone() }))
}

pub(super) fn supersede(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    run(api, ctx, |r| match r.newer_memory_id.clone().filter(|s| !s.trim().is_empty()) {
        Some(newer) => Ok(Transition::Supersede { newer }),
        None => Err(crate::Error::invalid_field(
            &["body", "newer_memory_id"],
            "missing",
            "Field required",
            serde_json::Value::Null,
        )),
    })
}

pub(super) fn favorite(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let fav = ctx.query.bool("is_favorite").unwrap_or(false);
    let id = ctx.param("memory_id");
    api.store().memories().set_favorite(id, ctx.query.str("space_id"), fav)?;
    let what = if fav { "marked as favorite" } else { "no longer a favorite" };
    Ok(ApiResponse::json(200, &serde_json::json!({"message": format!("memory '{id}' {what}"), "success": true})))
}

pub(super) fn favorites(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let limit = ctx.query.limit();
    let out: Vec<MemoryOut> = api.store().memories().favorites(limit)?.into_iter().map(MemoryOut::from).collect();
    Ok(ApiResponse::json(200, &out))
}
