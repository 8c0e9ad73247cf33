//! Label maintenance routes (spec "Labels"; client contract section 6 for the CLI's preview/apply pairs).

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::query::{ParamSpec, boolean, choice, int, num, required, string};
use super::route::{Dto, Shape, route};
use super::{Api, ApiResponse, Ctx};
use crate::error::Result;
use crate::store::{DEFAULT_SPACE, LabelMerge, LabelOrder, LabelPatch};

/// The routes of this module, in table order ([`super::routes::ROUTES`] gathers every module's list).
pub(super) const ROUTES: &[super::route::Route] = &[
    route!(
        "GET",
        "/labels",
        "list_labels",
        "Labels with usage counts",
        LABEL_LIST_PARAMS,
        None,
        Shape::ArrayOf(Dto::of::<crate::model::Label>()),
        false,
        list_labels
    ),
    route!(
        "POST",
        "/labels",
        "create_label",
        "Create a label",
        LABEL_CREATE_PARAMS,
        None,
        Shape::Ref(Dto::of::<crate::model::Label>()),
        false,
        create_label
    ),
    route!(
        "GET",
        "/labels/health",
        "label_health",
        "Vocabulary health: size, labels per memory, coverage, singleton rate, canonical fork backlog",
        HEALTH_PARAMS,
        None,
        Shape::Ref(Dto::of::<crate::store::LabelHealth>()),
        false,
        health
    ),
    route!(
        "GET",
        "/labels/merge-candidates",
        "label_merge_candidates",
        "Semantically near label pairs (name embeddings, cosine >= sim_floor); read-only",
        CANDIDATE_PARAMS,
        None,
        Shape::Ref(Dto::of::<MergeCandidatesResponse>()),
        false,
        merge_candidates
    ),
    route!(
        "POST",
        "/labels/merge",
        "merge_labels",
        "Merge source into target: re-point every HAS_LABEL edge, record the merge, delete the source",
        MERGE_PARAMS,
        None,
        Shape::Ref(Dto::of::<LabelMergeResponse>()),
        false,
        merge
    ),
    route!(
        "GET",
        "/labels/merges",
        "list_label_merges",
        "Recorded label merges, newest first",
        SPACE,
        None,
        Shape::Ref(Dto::of::<LabelMergesResponse>()),
        false,
        merges
    ),
    route!(
        "POST",
        "/labels/merges/{merge_id}/reverse",
        "reverse_label_merge",
        "Undo a recorded merge: the source label and every edge come back",
        SPACE,
        None,
        Shape::Ref(Dto::of::<LabelMergeReversed>()),
        false,
        reverse
    ),
    route!(
        "POST",
        "/labels/consolidate",
        "consolidate_labels",
        "Merge exact-canonical duplicates into the highest-usage survivor (dry_run true: plan only)",
        CONSOLIDATE_PARAMS,
        None,
        Shape::Ref(Dto::of::<crate::store::ConsolidationReport>()),
        false,
        consolidate
    ),
    route!(
        "POST",
        "/labels/consolidation-preview",
        "label_consolidation_preview",
        "Full consolidation dry run with semantic pairs judged deterministically; never mutates",
        PREVIEW_PARAMS,
        None,
        Shape::Ref(Dto::of::<crate::store::ConsolidationPreview>()),
        false,
        consolidation_preview
    ),
    route!(
        "GET",
        "/labels/{label_id}",
        "get_label",
        "One label",
        SPACE,
        None,
        Shape::Ref(Dto::of::<crate::model::Label>()),
        false,
        get
    ),
    route!(
        "PUT",
        "/labels/{label_id}",
        "update_label",
        "Rename, recolour or describe a label",
        SPACE,
        Some(Dto::of::<UpdateLabelRequest>()),
        Shape::Ref(Dto::of::<crate::model::Label>()),
        false,
        update
    ),
    route!(
        "DELETE",
        "/labels/{label_id}",
        "delete_label",
        "Delete a label and all its HAS_LABEL edges",
        SPACE,
        None,
        Shape::Ref(Dto::of::<LabelDeleteResponse>()),
        false,
        delete
    ),
    route!(
        "POST",
        "/labels/{label_id}/merge/preview",
        "preview_label_merge",
        "Preview merging this label into target_label_id (returns a plan_id)",
        SPACE,
        Some(Dto::of::<LabelPlanRequest>()),
        Shape::Ref(Dto::of::<crate::store::LabelPlan>()),
        false,
        merge_preview
    ),
    route!(
        "POST",
        "/labels/{label_id}/merge/apply",
        "apply_label_merge",
        "Merge, refusing a stale plan_id",
        SPACE,
        Some(Dto::of::<LabelPlanRequest>()),
        Shape::Ref(Dto::of::<LabelMergeApplied>()),
        false,
        merge_apply
    ),
    route!(
        "POST",
        "/labels/{label_id}/delete/preview",
        "preview_label_delete",
        "Preview deleting this label (returns a plan_id)",
        SPACE,
        Some(Dto::of::<LabelPlanRequest>()),
        Shape::Ref(Dto::of::<crate::store::LabelPlan>()),
        false,
        delete_preview
    ),
    route!(
        "POST",
        "/labels/{label_id}/delete/apply",
        "apply_label_delete",
        "Delete, refusing a stale plan_id",
        SPACE,
        Some(Dto::of::<LabelPlanRequest>()),
        Shape::Ref(Dto::of::<LabelDeleteApplied>()),
        false,
        delete_apply
    ),
];

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
    ok(&api.store().labels().get(space(ctx), ctx.param("label_id"))?)
}

pub(super) fn update(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let r: UpdateLabelRequest = ctx.json()?;
    let patch = LabelPatch { name: r.name, color: r.color, description: r.description };
    ok(&api.store().labels().update(space(ctx), ctx.param("label_id"), patch)?)
}

pub(super) fn delete(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let r = api.store().labels().delete(space(ctx), ctx.param("label_id"))?;
    ok(&LabelDeleteResponse {
        success: true,
        message: format!("label '{}' deleted with {} memory edges", r.label.id, r.removed_edges),
        label_id: r.label.id.clone(),
        deleted_relationships: r.removed_edges,
        label: r.label,
    })
}

pub(super) fn health(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    ok(&api.store().labels().health(ctx.query.str("space_id").filter(|s| !s.is_empty()))?)
}

pub(super) fn merge_candidates(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let q = &ctx.query;
    let (floor, max_labels, max_pairs) =
        (q.num("sim_floor").unwrap_or(0.82), q.int("max_labels").unwrap_or(2000), q.int("max_pairs").unwrap_or(100));
    let pairs = api.store().labels().merge_candidates(space(ctx), floor, max_labels as usize, max_pairs as usize)?;
    ok(&MergeCandidatesResponse { sim_floor: floor, total: pairs.len() as u64, candidates: pairs })
}

pub(super) fn merge(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let (s, t) = (ctx.query.str("source_id").unwrap_or(""), ctx.query.str("target_id").unwrap_or(""));
    let rec = api.store().labels().merge(space(ctx), s, t)?;
    ok(&LabelMergeResponse {
        success: true,
        merge_id: rec.merge_id.clone(),
        source_id: s.to_string(),
        target_id: t.to_string(),
        moved_edges: rec.moved_memory_ids.len() as u64,
        dropped_duplicate_edges: rec.shared_memory_ids.len() as u64,
        merge: rec,
    })
}

pub(super) fn merges(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    ok(&LabelMergesResponse { merges: api.store().labels().merges(space(ctx))? })
}

pub(super) fn reverse(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let rec = api.store().labels().reverse_merge(space(ctx), ctx.param("merge_id"))?;
    ok(&LabelMergeReversed { success: true, merge: rec })
}

pub(super) fn consolidate(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let q = &ctx.query;
    let r = api.store().labels().consolidate(
        space(ctx),
        q.bool("dry_run").unwrap_or(true),
        q.int("max_groups").unwrap_or(200) as usize,
    )?;
    ok(&r)
}

pub(super) fn consolidation_preview(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let q = &ctx.query;
    let r = api.store().labels().consolidation_preview(
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
    ok(&api.store().labels().plan(plan_space(&r, ctx), ctx.param("label_id"), Some(merge_target(&r)?))?)
}

pub(super) fn merge_apply(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let r = plan_body(ctx)?;
    let (plan, merge) = api.store().labels().apply_plan(
        plan_space(&r, ctx),
        ctx.param("label_id"),
        Some(merge_target(&r)?),
        r.plan_id.as_deref(),
    )?;
    ok(&LabelMergeApplied {
        success: true,
        applied: true,
        plan_id: plan.plan_id,
        message: plan.message,
        affected: plan.affected,
        duplicate_assignments: plan.duplicate_assignments,
        source: plan.source,
        target: plan.target,
        merge_id: merge.as_ref().map(|m| m.merge_id.clone()),
        merge,
    })
}

pub(super) fn delete_preview(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let r = plan_body(ctx)?;
    ok(&api.store().labels().plan(plan_space(&r, ctx), ctx.param("label_id"), None)?)
}

pub(super) fn delete_apply(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let r = plan_body(ctx)?;
    let (plan, _) =
        api.store().labels().apply_plan(plan_space(&r, ctx), ctx.param("label_id"), None, r.plan_id.as_deref())?;
    ok(&LabelDeleteApplied {
        success: true,
        applied: true,
        plan_id: plan.plan_id,
        message: plan.message,
        affected: plan.affected,
        label_id: plan.source.id.clone(),
        source: plan.source,
        deleted_relationships: plan.affected_memories,
    })
}

/// `DELETE /labels/{label_id}`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct LabelDeleteResponse {
    /// Always true.
    pub success: bool,
    /// One line.
    pub message: String,
    /// The label deleted.
    pub label_id: String,
    /// HAS_LABEL edges removed.
    pub deleted_relationships: u64,
    /// The label as it was.
    pub label: crate::model::Label,
}

/// `GET /labels/merge-candidates`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct MergeCandidatesResponse {
    /// The similarity floor used (0..=1).
    pub sim_floor: f64,
    /// Pairs found.
    pub total: u64,
    /// Pairs, most similar first.
    pub candidates: Vec<crate::store::MergeCandidate>,
}

/// `POST /labels/merge`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct LabelMergeResponse {
    /// Always true.
    pub success: bool,
    /// Id of the merge record (for `/labels/merges/{merge_id}/reverse`).
    pub merge_id: String,
    /// The label merged away.
    pub source_id: String,
    /// The surviving label.
    pub target_id: String,
    /// HAS_LABEL edges moved to the target.
    pub moved_edges: u64,
    /// Edges dropped because the memory had both labels.
    pub dropped_duplicate_edges: u64,
    /// The merge record.
    pub merge: LabelMerge,
}

/// `GET /labels/merges`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct LabelMergesResponse {
    /// Merge records of the space, newest first.
    pub merges: Vec<LabelMerge>,
}

/// `POST /labels/merges/{merge_id}/reverse`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct LabelMergeReversed {
    /// Always true.
    pub success: bool,
    /// The merge record, now with `reversed_at`.
    pub merge: LabelMerge,
}

/// `POST /labels/{label_id}/merge/apply`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct LabelMergeApplied {
    /// Always true.
    pub success: bool,
    /// Always true.
    pub applied: bool,
    /// The plan applied.
    pub plan_id: String,
    /// One line.
    pub message: String,
    /// Records changed, by kind.
    pub affected: crate::store::AffectedCounts,
    /// Assignments dropped because the record had both labels.
    pub duplicate_assignments: u64,
    /// The label merged away.
    pub source: crate::model::Label,
    /// The surviving label.
    pub target: Option<crate::model::Label>,
    /// Id of the merge record.
    pub merge_id: Option<String>,
    /// The merge record.
    pub merge: Option<LabelMerge>,
}

/// `POST /labels/{label_id}/delete/apply`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct LabelDeleteApplied {
    /// Always true.
    pub success: bool,
    /// Always true.
    pub applied: bool,
    /// The plan applied.
    pub plan_id: String,
    /// One line.
    pub message: String,
    /// Records changed, by kind.
    pub affected: crate::store::AffectedCounts,
    /// The label deleted.
    pub source: crate::model::Label,
    /// The label deleted (same as `source.id`).
    pub label_id: String,
    /// Memories that lost the label.
    pub deleted_relationships: u64,
}

const LABEL_LIST_PARAMS: &[ParamSpec] = &[
    int("limit", 1, Some(1000), Some(100), "page size"),
    int("offset", 0, None, Some(0), "items to skip"),
    choice("order_by", Some("name"), &["name", "usage_count", "created_at", "updated_at"], "ordering"),
    boolean("order_desc", Some(false), "descending"),
    string("space_id", Some(DEFAULT_SPACE), "space"),
];

const LABEL_CREATE_PARAMS: &[ParamSpec] = &[
    required("name", "label name, 1..=100 characters"),
    string("color", Some("#3b82f6"), "hex colour"),
    string("description", Some(""), "description"),
    string("space_id", Some(DEFAULT_SPACE), "space"),
];

fn list_labels(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let q = &ctx.query;
    let order = match q.str("order_by") {
        Some("usage_count") => LabelOrder::UsageCount,
        Some("created_at") => LabelOrder::CreatedAt,
        Some("updated_at") => LabelOrder::UpdatedAt,
        _ => LabelOrder::Name,
    };
    let labels = api.store().labels().list(
        q.str("space_id").unwrap_or(DEFAULT_SPACE),
        order,
        q.bool("order_desc").unwrap_or(false),
        q.limit(),
        q.int("offset").unwrap_or(0) as usize,
    )?;
    ok(&labels)
}

fn create_label(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let q = &ctx.query;
    let label = api.store().labels().create(
        q.str("space_id").unwrap_or(DEFAULT_SPACE),
        q.str("name").unwrap_or_default(),
        q.str("color").map(str::to_string),
        q.str("description").map(str::to_string),
    )?;
    ok(&label)
}
