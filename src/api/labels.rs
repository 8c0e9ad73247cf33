//! Label maintenance routes (spec "Labels"; client contract section 6 for the CLI's preview/apply pairs).

use serde::Deserialize;
use utoipa::ToSchema;

use super::query::{ParamSpec, boolean, int, num, required, string};
use super::{Api, ApiResponse, Ctx};
use crate::error::Result;
use crate::store::{DEFAULT_SPACE, LabelPatch};

/// Body of `PUT /labels/{label_id}` (spec: UpdateLabelRequest); absent fields keep their value.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
pub struct UpdateLabelRequest {
    /// New name, 1..=100 characters; the label's id becomes `label_<name>`.
    #[serde(default)]
    pub name: Option<String>,
    /// Hex colour.
    #[serde(default)]
    pub color: Option<String>,
    /// At most 1,000 characters.
    #[serde(default)]
    pub description: Option<String>,
}

/// Body of the CLI's `merge/preview`, `merge/apply`, `delete/preview` and `delete/apply`.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
pub struct LabelPlanRequest {
    /// Merge: the survivor (required for merge).
    #[serde(default)]
    pub target_label_id: Option<String>,
    /// Apply: the preview's plan id (null applies without a preview).
    #[serde(default)]
    pub plan_id: Option<String>,
    /// Space of the labels (default `default`).
    #[serde(default)]
    pub space_id: Option<String>,
}

pub(super) const SPACE: &[ParamSpec] = &[string("space_id", Some(DEFAULT_SPACE), "space of the labels")];
pub(super) const HEALTH_PARAMS: &[ParamSpec] =
    &[string("space_id", None, "one space; omitted: every space (the spec's report is across spaces)")];
pub(super) const CANDIDATE_PARAMS: &[ParamSpec] = &[
    num("sim_floor", 0.0, 1.0, Some(0.82), "least cosine similarity of the names' embeddings"),
    int("max_labels", 2, Some(5000), Some(2000), "most-used labels compared"),
    int("max_pairs", 1, Some(1000), Some(100), "pairs returned"),
    string("space_id", Some(DEFAULT_SPACE), "space"),
];
pub(super) const PREVIEW_PARAMS: &[ParamSpec] = &[
    num("sim_floor", 0.0, 1.0, Some(0.82), "least cosine similarity of the names' embeddings"),
    int("max_labels", 2, Some(5000), Some(2000), "most-used labels compared"),
    int("max_pairs", 1, Some(200), Some(40), "semantic pairs judged"),
    string("space_id", Some(DEFAULT_SPACE), "space"),
];
pub(super) const MERGE_PARAMS: &[ParamSpec] = &[
    required("source_id", "label merged away and deleted"),
    required("target_id", "survivor"),
    string("space_id", Some(DEFAULT_SPACE), "space"),
];
pub(super) const CONSOLIDATE_PARAMS: &[ParamSpec] = &[
    boolean("dry_run", Some(true), "true: return the plan only"),
    int("max_groups", 1, Some(5000), Some(200), "duplicate groups handled"),
    string("space_id", Some(DEFAULT_SPACE), "space"),
];

fn space<'c>(ctx: &'c Ctx<'_>) -> &'c str {
    ctx.query.str("space_id").filter(|s| !s.is_empty()).unwrap_or(DEFAULT_SPACE)
}

fn ok(v: &impl serde::Serialize) -> Result<ApiResponse> {
    Ok(ApiResponse::json(200, v))
}

pub(super) fn get(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    ok(&api.store().get_label(space(ctx), ctx.param("label_id"))?)
}

pub(super) fn update(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let r: UpdateLabelRequest = ctx.json()?;
    let patch = LabelPatch { name: r.name, color: r.color, description: r.description };
    ok(&api.store().update_label(space(ctx), ctx.param("label_id"), patch)?)
}

pub(super) fn delete(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let r = api.store().delete_label(space(ctx), ctx.param("label_id"))?;
    ok(&serde_json::json!({
        "success": true,
        "message": format!("label '{}' deleted with {} memory edges", r.label.id, r.removed_edges),
        "label_id": r.label.id,
        "deleted_relationships": r.removed_edges,
        "label": r.label,
    }))
}

pub(super) fn health(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    ok(&api.store().label_health(ctx.query.str("space_id").filter(|s| !s.is_empty()))?)
}

pub(super) fn merge_candidates(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let q = &ctx.query;
    let (floor, max_labels, max_pairs) =
        (q.num("sim_floor").unwrap_or(0.82), q.int("max_labels").unwrap_or(2000), q.int("max_pairs").unwrap_or(100));
    let pairs = api.store().label_merge_candidates(space(ctx), floor, max_labels as usize, max_pairs as usize)?;
    ok(&serde_json::json!({"sim_floor": floor, "total": pairs.len(), "candidates": pairs}))
}

pub(super) fn merge(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let (s, t) = (ctx.query.str("source_id").unwrap_or(""), ctx.query.str("target_id").unwrap_or(""));
    let rec = api.store().merge_labels(space(ctx), s, t)?;
    ok(&serde_json::json!({
        "success": true,
        "merge_id": rec.merge_id,
        "source_id": s,
        "target_id": t,
        "moved_edges": rec.moved_memory_ids.len(),
        "dropped_duplicate_edges": rec.shared_memory_ids.len(),
        "merge": rec,
    }))
}

pub(super) fn merges(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    ok(&serde_json::json!({"merges": api.store().label_merges(space(ctx))?}))
}

pub(super) fn reverse(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let rec = api.store().reverse_label_merge(space(ctx), ctx.param("merge_id"))?;
    ok(&serde_json::json!({"success": true, "merge": rec}))
}

pub(super) fn consolidate(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let q = &ctx.query;
    let r = api.store().consolidate_labels(
        space(ctx),
        q.bool("dry_run").unwrap_or(true),
        q.int("max_groups").unwrap_or(200) as usize,
    )?;
    ok(&r)
}

pub(super) fn consolidation_preview(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let q = &ctx.query;
    let r = api.store().consolidation_preview(
        space(ctx),
        q.num("sim_floor").unwrap_or(0.82),
        q.int("max_labels").unwrap_or(2000) as usize,
        q.int("max_pairs").unwrap_or(40) as usize,
    )?;
    ok(&r)
}

fn plan_body(ctx: &Ctx<'_>) -> Result<LabelPlanRequest> {
    if ctx.body.iter().all(u8::is_ascii_whitespace) { Ok(LabelPlanRequest::default()) } else { ctx.json() }
}

fn merge_target(r: &LabelPlanRequest) -> Result<&str> {
    r.target_label_id.as_deref().filter(|t| !t.is_empty()).ok_or_else(|| {
        crate::Error::invalid_field(&["body", "target_label_id"], "missing", "Field required", serde_json::Value::Null)
    })
}

fn plan_space<'a>(r: &'a LabelPlanRequest, ctx: &'a Ctx<'_>) -> &'a str {
    r.space_id.as_deref().filter(|s| !s.is_empty()).unwrap_or_else(|| space(ctx))
}

pub(super) fn merge_preview(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let r = plan_body(ctx)?;
    ok(&api.store().label_plan(plan_space(&r, ctx), ctx.param("label_id"), Some(merge_target(&r)?))?)
}

pub(super) fn merge_apply(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let r = plan_body(ctx)?;
    let (plan, merge) = api.store().apply_label_plan(
        plan_space(&r, ctx),
        ctx.param("label_id"),
        Some(merge_target(&r)?),
        r.plan_id.as_deref(),
    )?;
    ok(&serde_json::json!({
        "success": true,
        "applied": true,
        "plan_id": plan.plan_id,
        "message": plan.message,
        "affected": plan.affected,
        "duplicate_assignments": plan.duplicate_assignments,
        "source": plan.source,
        "target": plan.target,
        "merge_id": merge.as_ref().map(|m| m.merge_id.clone()),
        "merge": merge,
    }))
}

pub(super) fn delete_preview(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let r = plan_body(ctx)?;
    ok(&api.store().label_plan(plan_space(&r, ctx), ctx.param("label_id"), None)?)
}

pub(super) fn delete_apply(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let r = plan_body(ctx)?;
    let (plan, _) =
        api.store().apply_label_plan(plan_space(&r, ctx), ctx.param("label_id"), None, r.plan_id.as_deref())?;
    ok(&serde_json::json!({
        "success": true,
        "applied": true,
        "plan_id": plan.plan_id,
        "message": plan.message,
        "affected": plan.affected,
        "source": plan.source,
        "label_id": plan.source.id,
        "deleted_relationships": plan.affected_memories,
    }))
}
