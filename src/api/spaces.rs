//! Space routes: create, list, get, resolve, update, delete, and bulk moves of memories (client contract
//! sections 4 and 6).

use serde::Deserialize;
use utoipa::ToSchema;

use super::dto::{CreateSpaceRequest, SpacesResponse};
use super::query::{ParamSpec, boolean, required};
use super::route::{Dto, Shape, route};
use super::{Api, ApiResponse, Ctx};
use crate::error::{Error, Result};
use crate::store::{MoveSelection, NewSpace, SpacePatch};

/// The routes of this module, in table order ([`super::routes::ROUTES`] gathers every module's list).
pub(super) const ROUTES: &[super::route::Route] = &[
    route!(
        "POST",
        "/spaces",
        "create_space",
        "Create a space",
        &[],
        Some(Dto::of::<CreateSpaceRequest>()),
        Shape::Ref(Dto::of::<SpacesResponse>()),
        false,
        create
    ),
    route!(
        "GET",
        "/spaces",
        "list_spaces",
        "List spaces",
        &[],
        None,
        Shape::Ref(Dto::of::<SpacesResponse>()),
        false,
        list
    ),
    route!(
        "GET",
        "/spaces/resolve",
        "resolve_space",
        "The space a name, alias or id refers to",
        RESOLVE_PARAMS,
        None,
        Shape::Ref(Dto::of::<crate::model::Space>()),
        false,
        resolve
    ),
    route!(
        "GET",
        "/spaces/{space_id}",
        "get_space",
        "One space with usage counts",
        &[],
        None,
        Shape::Ref(Dto::of::<crate::model::Space>()),
        false,
        get
    ),
    route!(
        "PATCH",
        "/spaces/{space_id}",
        "update_space",
        "Update a space profile (the id never changes)",
        &[],
        Some(Dto::of::<UpdateSpaceRequest>()),
        Shape::Ref(Dto::of::<crate::model::Space>()),
        false,
        update
    ),
    route!(
        "PUT",
        "/spaces/{space_id}",
        "replace_space_profile",
        "Same as PATCH",
        &[],
        Some(Dto::of::<UpdateSpaceRequest>()),
        Shape::Ref(Dto::of::<crate::model::Space>()),
        false,
        update
    ),
    route!(
        "DELETE",
        "/spaces/{space_id}",
        "delete_space",
        "Delete a space; refused while it holds records unless cascade=true",
        DELETE_PARAMS,
        None,
        Shape::Ref(Dto::of::<SpaceDeleteResponse>()),
        false,
        delete
    ),
    route!(
        "POST",
        "/memories/bulk/move/preview",
        "preview_bulk_move",
        "Count the memories a bulk move would take",
        &[],
        Some(Dto::of::<BulkMoveRequest>()),
        Shape::Ref(Dto::of::<crate::store::MoveReport>()),
        false,
        move_preview
    ),
    route!(
        "POST",
        "/memories/bulk/move",
        "bulk_move",
        "Move memories to another space in one transaction",
        &[],
        Some(Dto::of::<BulkMoveRequest>()),
        Shape::Ref(Dto::of::<crate::store::MoveReport>()),
        false,
        move_apply
    ),
];

/// Body of `PATCH /spaces/{space_id}`; absent fields keep their value, lists replace.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
pub struct UpdateSpaceRequest {
    /// Display name.
    #[serde(default)]
    pub name: Option<String>,
    /// Description.
    #[serde(default)]
    pub description: Option<String>,
    /// Icon.
    #[serde(default)]
    pub icon: Option<String>,
    /// Instructions for agents.
    #[serde(default)]
    pub instructions: Option<String>,
    /// Replaces the aliases.
    #[serde(default)]
    pub aliases: Option<Vec<String>>,
    /// Replaces the shared spaces.
    #[serde(default, rename = "sharedSpaceIds", alias = "shared_space_ids")]
    pub shared_space_ids: Option<Vec<String>>,
    /// Retrieval mode.
    #[serde(default, rename = "defaultRetrievalMode", alias = "default_retrieval_mode")]
    pub default_retrieval_mode: Option<String>,
}

/// The selection of a bulk move: `{mode: "ids", memory_ids, source_space_id?}` or `{mode: "space",
/// source_space_id, exclude_memory_ids?}`.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
pub struct MoveSelectionRequest {
    /// `ids` or `space`.
    pub mode: String,
    /// `ids`: the memories.
    #[serde(default)]
    pub memory_ids: Vec<String>,
    /// `space`: the space emptied; `ids`: an optional guard.
    #[serde(default)]
    pub source_space_id: Option<String>,
    /// `space`: ids left behind.
    #[serde(default)]
    pub exclude_memory_ids: Vec<String>,
}

/// Body of `/memories/bulk/move` and its preview.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
pub struct BulkMoveRequest {
    /// Which memories.
    pub selection: MoveSelectionRequest,
    /// Where to.
    pub target_space_id: String,
}

pub(super) const RESOLVE_PARAMS: &[ParamSpec] = &[required("reference", "space name, alias or id")];
pub(super) const DELETE_PARAMS: &[ParamSpec] = &[
    boolean("cascade", Some(false), "also delete every record of the space"),
    boolean("dry_run", Some(false), "report what would block deletion; delete nothing"),
    boolean("purge_working_memory", Some(false), "also delete working memory when it is all that is left"),
];

fn ok(v: &impl serde::Serialize) -> Result<ApiResponse> {
    Ok(ApiResponse::json(200, v))
}

pub(super) fn create(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let r: CreateSpaceRequest = ctx.json()?;
    let space = api.store().spaces().create(NewSpace {
        name: r.name,
        description: r.description,
        icon: r.icon,
        instructions: r.instructions,
        aliases: r.aliases.unwrap_or_default(),
        id: r.id,
        shared_space_ids: r.shared_space_ids.unwrap_or_default(),
        default_retrieval_mode: r.default_retrieval_mode,
    })?;
    ok(&SpacesResponse { enabled: true, spaces: api.store().spaces().list()?, space: Some(space) })
}

pub(super) fn list(api: &Api, _: &Ctx<'_>) -> Result<ApiResponse> {
    ok(&SpacesResponse { enabled: true, spaces: api.store().spaces().list()?, space: None })
}

pub(super) fn get(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    ok(&api.store().spaces().get(ctx.param("space_id"))?)
}

pub(super) fn resolve(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    ok(&api.store().spaces().resolve(ctx.query.str("reference").unwrap_or(""))?)
}

pub(super) fn update(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let r: UpdateSpaceRequest = ctx.json()?;
    let patch = SpacePatch {
        name: r.name,
        description: r.description,
        icon: r.icon,
        instructions: r.instructions,
        aliases: r.aliases,
        shared_space_ids: r.shared_space_ids,
        default_retrieval_mode: r.default_retrieval_mode,
    };
    ok(&api.store().spaces().update(ctx.param("space_id"), patch)?)
}

pub(super) fn delete(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let id = ctx.param("space_id");
    let q = &ctx.query;
    let space = api.store().spaces().get(id)?;
    let u = &space.usage;
    // Working memory alone does not block deletion when the caller asks to purge it.
    let only_wm = u.memories == 0 && u.threads == 0 && u.has_working_memory;
    let cascade = q.bool("cascade").unwrap_or(false) || (only_wm && q.bool("purge_working_memory").unwrap_or(false));
    if q.bool("dry_run").unwrap_or(false) {
        let blocked = !cascade && (u.memories > 0 || u.threads > 0 || u.has_working_memory) || id == "default";
        return ok(&SpaceDeleteResponse {
            dry_run: Some(true),
            can_delete: Some(!blocked),
            success: None,
            message: None,
            deleted: None,
            space,
        });
    }
    let gone = api.store().spaces().delete(id, cascade)?;
    ok(&SpaceDeleteResponse {
        dry_run: None,
        can_delete: None,
        success: Some(true),
        message: Some(format!("space '{id}' deleted")),
        deleted: Some(gone.usage.clone()),
        space: gone,
    })
}

fn selection(r: &BulkMoveRequest) -> Result<MoveSelection> {
    let s = &r.selection;
    match s.mode.as_str() {
        "ids" => Ok(MoveSelection::Ids {
            memory_ids: s.memory_ids.clone(),
            source_space_id: s.source_space_id.clone().filter(|x| !x.is_empty()),
        }),
        "space" => match s.source_space_id.clone().filter(|x| !x.is_empty()) {
            Some(src) => {
                Ok(MoveSelection::Space { source_space_id: src, exclude_memory_ids: s.exclude_memory_ids.clone() })
            }
            None => Err(Error::invalid_field(
                &["body", "selection", "source_space_id"],
                "missing",
                "Field required for mode `space`",
                serde_json::Value::Null,
            )),
        },
        other => {
            Err(Error::invalid_field(&["body", "selection", "mode"], "enum", "mode is `ids` or `space`", other.into()))
        }
    }
}

pub(super) fn move_preview(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let r: BulkMoveRequest = ctx.json()?;
    ok(&api.store().spaces().move_memories(&selection(&r)?, &r.target_space_id, true)?)
}

pub(super) fn move_apply(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let r: BulkMoveRequest = ctx.json()?;
    ok(&api.store().spaces().move_memories(&selection(&r)?, &r.target_space_id, false)?)
}

/// `DELETE /spaces/{space_id}`: with `dry_run`, whether it could be deleted (`dry_run`, `can_delete`); otherwise
/// what was deleted (`success`, `message`, `deleted`). Both carry the space.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct SpaceDeleteResponse {
    /// True for a dry run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dry_run: Option<bool>,
    /// Dry run: whether a delete with the same options would succeed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub can_delete: Option<bool>,
    /// Delete: always true.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub success: Option<bool>,
    /// Delete: one line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Delete: the records deleted with it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deleted: Option<crate::model::SpaceUsage>,
    /// The space (as it was, for a delete).
    pub space: crate::model::Space,
}
