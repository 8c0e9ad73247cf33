//! Memory search: `GET /memories/search` (query parameters) and `POST /memories/search` (a body), both
//! through [`run_search`].

use super::dto::*;
use super::query::{ParamSpec, boolean, choice, int, list, num, required, string};
use super::route::{Dto, Route, Shape, UNIT_TYPES, label_ids, ok, parse_temporal, parse_unit, route};
use super::{Api, ApiResponse, Ctx};
use crate::error::{Error, FieldError, Result};
use crate::index::catalog::{MemoryFilter, end_of_period, parse_loose_date};
use crate::model::{Timestamp, UnitType};
use crate::store::{DEFAULT_SPACE, SearchMode, SearchOptions, SearchQuery, SearchResults};

/// Most hits one search returns: the bound of `limit` in the query (`GET /memories/search`), in the body
/// (`POST /memories/search`) and in the OpenAPI document, from this one constant.
pub(super) const MAX_HITS: i64 = 100;

/// The routes of this module, in table order ([`super::routes::ROUTES`] gathers every module's list).
pub(super) const ROUTES: &[Route] = &[
    route!(
        "GET",
        "/memories/search",
        "search_memories_get",
        "Hybrid search (query string form, used by the CLI)",
        SEARCH_GET_PARAMS,
        None,
        Shape::Ref(Dto::of::<SearchGetResponse>()),
        false,
        search_get
    ),
    route!(
        "POST",
        "/memories/search",
        "search_memories",
        "Hybrid search (MemorySearchRequest)",
        &[],
        Some(Dto::of::<SearchRequest>()),
        Shape::ArrayOfAny(&[Dto::of::<MemorySearchResult>(), Dto::of::<CompactSearchHit>()]),
        false,
        search_post
    ),
];

const SEARCH_GET_PARAMS: &[ParamSpec] = &[
    required("q", "query text"),
    int("limit", 1, Some(MAX_HITS), Some(10), "hits"),
    choice("mode", Some("fast"), &["fast", "deep", "normal"], "search depth; all run the hybrid search"),
    choice("retrieval", Some("hybrid"), &["hybrid", "lexical", "vector"], "Engram extension: rankings used"),
    list("labels", "label names every hit must carry"),
    list("metadata", "key=value equality on metadata (not supported yet: 422 when given)"),
    choice("unit_type", None, UNIT_TYPES, "only this unit type"),
    num("importance_min", 0.0, 1.0, None, "minimum importance"),
    string("time_range", None, "deprecated: today, week, month, year or an ISO date (recorded at or after)"),
    string("event_date_from", None, "event date lower bound (YYYY, YYYY-MM, YYYY-MM-DD)"),
    string("event_date_to", None, "event date upper bound"),
    string("recorded_date_from", None, "creation date lower bound"),
    string("recorded_date_to", None, "creation date upper bound"),
    boolean("include_history", Some(false), "include superseded versions"),
    boolean("explain", Some(false), "accepted; reasons are always included"),
    boolean("include_entities", Some(false), "add `related_entities` (the entities each memory mentions)"),
    string("space_id", Some(DEFAULT_SPACE), "space"),
    boolean("include_context", Some(false), "Engram extension: add `context` (neighbouring messages or chunks)"),
    int("context_window", 1, Some(10), Some(1), "Engram extension: neighbours on each side for `include_context`"),
    boolean("expand_neighbours", None, "Engram extension: neighbour expansion in ranking (default true)"),
];
pub(super) fn parse_date_bound(
    s: Option<&str>,
    loc: &[&str],
    end_of: bool,
    errs: &mut Vec<FieldError>,
) -> Option<Timestamp> {
    let s = s?.trim();
    if s.is_empty() {
        return None;
    }
    match parse_loose_date(s) {
        Some(t) if end_of => Some(Timestamp(end_of_period(s, t.0))),
        Some(t) => Some(t),
        None => {
            errs.push(FieldError::new(
                loc,
                "date_invalid",
                "expected YYYY, YYYY-MM, YYYY-MM-DD or an RFC 3339 date-time",
                s.into(),
            ));
            None
        }
    }
}

fn time_range_start(s: &str, errs: &mut Vec<FieldError>) -> Option<Timestamp> {
    const DAY: i64 = 86_400_000;
    let now = Timestamp::now().0;
    match s {
        "today" => Some(Timestamp(now - now.rem_euclid(DAY))),
        "week" => Some(Timestamp(now - 7 * DAY)),
        "month" => Some(Timestamp(now - 30 * DAY)),
        "year" => Some(Timestamp(now - 365 * DAY)),
        other => parse_date_bound(Some(other), &["query", "time_range"], false, errs),
    }
}

#[allow(clippy::too_many_arguments)]
fn run_search(
    api: &Api,
    query: String,
    query_embedding: Option<Vec<f32>>,
    space: String,
    limit: usize,
    mode: SearchMode,
    filter: MemoryFilter,
    options: SearchOptions,
) -> Result<SearchResults> {
    api.store().search().run(&SearchQuery {
        query,
        space_id: space,
        limit,
        filter,
        mode,
        fusion: None,
        query_embedding,
        options,
    })
}

/// The search options of `include_context`, `context_window` (1..=10, default 1) and `expand_neighbours`.
fn search_options(
    include_context: Option<bool>,
    window: Option<i64>,
    expand: Option<bool>,
    place: &str,
    errs: &mut Vec<FieldError>,
) -> SearchOptions {
    let max = crate::store::MAX_CONTEXT_WINDOW as i64;
    let w = window.unwrap_or(1);
    if !(1..=max).contains(&w) {
        errs.push(
            FieldError::new(&[place, "context_window"], "range", "context_window is 1..=10", w.into())
                .with_ctx(serde_json::json!({"ge": 1, "le": max})),
        );
    }
    SearchOptions {
        include_context: include_context.unwrap_or(false).then_some(w.clamp(1, max) as usize),
        expand_neighbours: expand,
        ..Default::default()
    }
}

pub(super) fn search_get(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let q = &ctx.query;
    let mut errs = Vec::new();
    if !q.list("metadata").is_empty() {
        errs.push(FieldError::new(
            &["query", "metadata"],
            "unsupported",
            "metadata filters are not supported yet",
            serde_json::Value::Null,
        ));
    }
    let mut filter = MemoryFilter {
        unit_type: q.str("unit_type").and_then(UnitType::parse),
        importance_min: q.num("importance_min"),
        label_ids: label_ids(q.list("labels")),
        include_history: q.bool("include_history").unwrap_or(false),
        event_from: parse_date_bound(q.str("event_date_from"), &["query", "event_date_from"], false, &mut errs),
        event_to: parse_date_bound(q.str("event_date_to"), &["query", "event_date_to"], true, &mut errs),
        recorded_from: parse_date_bound(
            q.str("recorded_date_from"),
            &["query", "recorded_date_from"],
            false,
            &mut errs,
        ),
        recorded_to: parse_date_bound(q.str("recorded_date_to"), &["query", "recorded_date_to"], true, &mut errs),
        ..Default::default()
    };
    if let (None, Some(tr)) = (filter.recorded_from, q.str("time_range")) {
        filter.recorded_from = time_range_start(tr, &mut errs);
    }
    let options = search_options(
        q.bool("include_context"),
        q.int("context_window"),
        q.bool("expand_neighbours"),
        "query",
        &mut errs,
    );
    if !errs.is_empty() {
        return Err(Error::invalid(errs));
    }
    let mode = retrieval_mode(q.str("retrieval"));
    let query = q.str("q").unwrap_or_default().to_string();
    let space = q.str("space_id").unwrap_or(DEFAULT_SPACE).to_string();
    let with_entities = q.bool("include_entities").unwrap_or(false);
    let res = run_search(api, query, None, space.clone(), q.limit(), mode, filter, options)
        .map_err(|e| relocate(e, "query", "q"))?;
    let entities: Vec<Option<Vec<crate::model::Entity>>> = if with_entities {
        let ids: Vec<&str> = res.hits.iter().map(|h| h.view.memory.id.as_str()).collect();
        api.store().graph().entities_of_each(&space, &ids)?.into_iter().map(Some).collect()
    } else {
        vec![None; res.hits.len()]
    };
    let memories = res
        .hits
        .iter()
        .zip(entities)
        .map(|(h, ents)| {
            let mut v = serde_json::to_value(MemoryOut::from(h.view.clone())).unwrap_or_default();
            let reason = h.reason();
            if let Some(obj) = v.as_object_mut() {
                if let Some(meta) = obj.get_mut("metadata").and_then(|m| m.as_object_mut()) {
                    meta.insert("similarity_score".into(), f64::from(h.score).into());
                    meta.insert("relevance_reason".into(), reason.clone().into());
                }
                obj.insert("similarity_score".into(), f64::from(h.score).into());
                obj.insert("relevance_score".into(), f64::from(h.score).into());
                obj.insert("relevance_reason".into(), reason.into());
                if let Some(e) = ents {
                    obj.insert("related_entities".into(), serde_json::to_value(e).unwrap_or_default());
                }
                if options.include_context.is_some() {
                    obj.insert("context".into(), serde_json::to_value(&h.context).unwrap_or_default());
                }
            }
            v
        })
        .collect();
    ok(&SearchGetResponse {
        search_metadata: SearchMetadata {
            total_found: res.hits.len(),
            search_mode: res.mode.as_str().into(),
            candidates: res.candidates,
            elapsed_ms: res.elapsed_ms,
            fallback_status: FallbackStatus {
                degraded: res.fallback.is_some(),
                message: res.fallback.clone().unwrap_or_default(),
            },
        },
        memories,
    })
}

/// Puts a store validation error about the search fields where this transport took them (`place`), with the
/// search text under `query_name`.
fn relocate(e: Error, place: &str, query_name: &str) -> Error {
    e.map_fields(|mut f| {
        if !f.in_request && f.loc.first().and_then(|v| v.as_str()) == Some("query") {
            f.loc[0] = query_name.into();
        }
        f.place(&[place.into()]);
        f
    })
}

fn retrieval_mode(s: Option<&str>) -> SearchMode {
    match s {
        Some("lexical") => SearchMode::Lexical,
        Some("vector") => SearchMode::Vector,
        _ => SearchMode::Hybrid,
    }
}

/// The query vector of `query_embedding` or `query_embedding_base64` (little-endian float32); a field error
/// when both are given or the base64 does not decode to whole floats.
fn query_embedding(floats: Option<Vec<f32>>, b64: Option<&str>, errs: &mut Vec<FieldError>) -> Option<Vec<f32>> {
    use base64::Engine;
    let loc = ["body", "query_embedding_base64"];
    match (floats, b64) {
        (v, None) => v,
        (Some(_), Some(_)) => {
            errs.push(FieldError::new(
                &loc,
                "value_error",
                "give at most one of `query_embedding` and `query_embedding_base64`",
                serde_json::Value::Null,
            ));
            None
        }
        (None, Some(b)) => match base64::engine::general_purpose::STANDARD.decode(b.trim()) {
            Ok(bytes) if bytes.len() % 4 == 0 => {
                Some(bytes.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect())
            }
            Ok(bytes) => {
                errs.push(FieldError::new(
                    &loc,
                    "value_error",
                    format!("{} bytes is not a whole number of float32 values (4 bytes each)", bytes.len()),
                    serde_json::Value::Null,
                ));
                None
            }
            Err(e) => {
                errs.push(FieldError::new(&loc, "value_error", format!("not base64: {e}"), serde_json::Value::Null));
                None
            }
        },
    }
}

pub(super) fn search_post(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    match search(api, ctx.json()?)? {
        SearchOut::Full(hits) => ok(&hits),
        SearchOut::Compact(hits) => ok(&hits),
    }
}

/// The answer of `POST /memories/search`: full hits, or `result_format: "compact"` ids and scores.
pub(crate) enum SearchOut {
    /// Each hit with its memory, score, reason and matched terms, best first.
    Full(Vec<MemorySearchResult>),
    /// Each hit's id and score, best first.
    Compact(Vec<CompactSearchHit>),
}

impl SearchOut {
    /// The full hits (none for a compact answer, which a caller asks for by name).
    pub(crate) fn into_full(self) -> Vec<MemorySearchResult> {
        match self {
            SearchOut::Full(h) => h,
            SearchOut::Compact(_) => Vec::new(),
        }
    }
}

/// `POST /memories/search` as a typed call.
///
/// # Errors
/// 422 field errors under `["body", field]` (limit out of 1..=100, bad dates, modes or embeddings); otherwise as
/// [`crate::store::Search::run`].
pub(crate) fn search(api: &Api, r: SearchRequest) -> Result<SearchOut> {
    let mut errs = Vec::new();
    let limit = r.limit.unwrap_or(10);
    if !(1..=MAX_HITS).contains(&limit) {
        errs.push(
            FieldError::new(&["body", "limit"], "limit_invalid", format!("limit is 1..={MAX_HITS}"), limit.into())
                .with_ctx(serde_json::json!({"ge": 1, "le": MAX_HITS})),
        );
    }
    if let Some(x) = r.importance_min
        && !(0.0..=1.0).contains(&x)
    {
        errs.push(FieldError::new(
            &["body", "importance_min"],
            "range",
            "importance_min is 0..=1",
            serde_json::Value::Null,
        ));
    }
    if let Some(m) = r.retrieval.as_deref()
        && !["hybrid", "lexical", "vector"].contains(&m)
    {
        errs.push(FieldError::new(
            &["body", "retrieval"],
            "enum",
            "Input should be one of: hybrid, lexical, vector",
            m.into(),
        ));
    }
    let unit_type = parse_unit(r.unit_type.as_deref(), &["body", "unit_type"], &mut errs);
    let _ = parse_temporal(r.temporal_context.as_deref(), &["body", "temporal_context"], &mut errs);
    let filter = MemoryFilter {
        unit_type,
        importance_min: r.importance_min,
        label_ids: label_ids(r.filter_labels.as_deref().unwrap_or_default()),
        include_history: r.include_history.unwrap_or(false),
        event_from: parse_date_bound(r.event_date_from.as_deref(), &["body", "event_date_from"], false, &mut errs),
        event_to: parse_date_bound(r.event_date_to.as_deref(), &["body", "event_date_to"], true, &mut errs),
        recorded_from: parse_date_bound(
            r.recorded_date_from.as_deref(),
            &["body", "recorded_date_from"],
            false,
            &mut errs,
        ),
        recorded_to: parse_date_bound(r.recorded_date_to.as_deref(), &["body", "recorded_date_to"], true, &mut errs),
        ..Default::default()
    };
    let options = search_options(r.include_context, r.context_window, r.expand_neighbours, "body", &mut errs);
    let compact = match r.result_format.as_deref() {
        None | Some("full") => false,
        Some("compact") => true,
        Some(other) => {
            errs.push(FieldError::new(
                &["body", "result_format"],
                "enum",
                "Input should be one of: full, compact",
                other.into(),
            ));
            false
        }
    };
    let embedding = query_embedding(r.query_embedding, r.query_embedding_base64.as_deref(), &mut errs);
    if !errs.is_empty() {
        return Err(Error::invalid(errs));
    }
    let space = r.space_id.unwrap_or_else(|| DEFAULT_SPACE.to_string());
    let with_entities = r.include_entities.unwrap_or(false);
    let mode = retrieval_mode(r.retrieval.as_deref());
    let res =
        run_search(api, r.query, embedding, space.clone(), usize::try_from(limit).unwrap_or(0), mode, filter, options)?;
    if compact {
        let out: Vec<CompactSearchHit> = res
            .hits
            .into_iter()
            .map(|h| CompactSearchHit { id: h.view.memory.id, similarity_score: f64::from(h.score) })
            .collect();
        return Ok(SearchOut::Compact(out));
    }
    let mut out: Vec<MemorySearchResult> = Vec::with_capacity(res.hits.len());
    let mut entities = if with_entities {
        let ids: Vec<&str> = res.hits.iter().map(|h| h.view.memory.id.as_str()).collect();
        api.store().graph().entities_of_each(&space, &ids)?
    } else {
        Vec::new()
    }
    .into_iter();
    for mut h in res.hits {
        let related_entities = entities.next().unwrap_or_default();
        out.push(MemorySearchResult {
            similarity_score: f64::from(h.score),
            relevance_reason: h.reason(),
            matched_terms: std::mem::take(&mut h.matched_terms),
            related_entities,
            evolves_context: serde_json::json!({}),
            context: options.include_context.map(|_| h.context),
            memory: h.view.into(),
        });
    }
    Ok(SearchOut::Full(out))
}
