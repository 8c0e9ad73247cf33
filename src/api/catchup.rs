//! Memory catch-up (`POST /agent/trigger/memory-catchup {"horizon"}` and the `trigger_memory_catchup` tool):
//! distils the thread messages within a horizon that no memory was distilled from.
//!
//! A message counts as distilled when a memory of its thread lists its index in
//! `metadata.source_message_indices`. Messages that are not (a thread with `metadata.analysis` set to
//! `searchable-now-distill-on-demand`, an extraction that failed, a message that yielded nothing) are run
//! through the same deterministic extraction as an append; extraction is idempotent (memory ids are
//! `<thread>#m<first index>`, near-duplicates are dropped), so running catch-up twice creates nothing new.
//!
//! Horizons: `today` (since 00:00 UTC), a whole number of days (`"3"` or `3`), `all`, or `off` (nothing runs).

use std::collections::{HashMap, HashSet};

use serde::Deserialize;
use serde_json::Value;

use super::route::{Dto, Shape, route};
use super::{Api, ApiResponse, Ctx};
use crate::error::{Error, Result};
use crate::model::Timestamp;
use crate::store::DEFAULT_SPACE;

/// The routes of this module, in table order ([`super::routes::ROUTES`] gathers every module's list).
pub(super) const ROUTES: &[super::route::Route] = &[route!(
    "POST",
    "/agent/trigger/memory-catchup",
    "agent_memory_catchup",
    "Distil thread messages within a horizon that no memory was distilled from",
    &[],
    Some(Dto::of::<CatchupRequest>()),
    Shape::Ref(Dto::of::<CatchupReport>()),
    false,
    trigger
)];

/// Threads read per page while catching up.
const PAGE: usize = 200;

/// Body of `POST /agent/trigger/memory-catchup`.
#[derive(Debug, Clone, Deserialize, utoipa::ToSchema)]
pub struct CatchupRequest {
    /// `today` (default), a number of days (string or integer), `all` or `off`.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub horizon: Option<Value>,
    /// Space (default `default`).
    #[serde(default)]
    pub space_id: Option<String>,
}

/// The start of a horizon in milliseconds since the epoch (`i64::MIN` for `all`), or None for `off`.
///
/// # Errors
/// 422 naming `loc` for anything else.
pub(crate) fn horizon_start(raw: Option<&Value>, loc: &[&str]) -> Result<Option<i64>> {
    let now = Timestamp::now().millis();
    let text = match raw {
        None | Some(Value::Null) => "today".to_string(),
        Some(Value::String(s)) => s.trim().to_ascii_lowercase(),
        Some(Value::Number(n)) => n.to_string(),
        Some(other) => {
            return Err(Error::invalid_field(
                loc,
                "value_error",
                "horizon is today, a number of days, all or off",
                other.clone(),
            ));
        }
    };
    match text.as_str() {
        "off" | "none" | "0" => Ok(None),
        "all" => Ok(Some(i64::MIN)),
        "today" | "" => Ok(Some(now - now.rem_euclid(86_400_000))),
        n => match n.parse::<i64>() {
            Ok(days) if (1..=36_500).contains(&days) => Ok(Some(now - days * 86_400_000)),
            _ => Err(Error::invalid_field(
                loc,
                "value_error",
                "horizon is today, a number of days (1..=36500), all or off",
                n.into(),
            )),
        },
    }
}

/// Runs the catch-up in `space` from `start` (see [`horizon_start`]); the report counts threads scanned,
/// messages found undistilled, memories created and near-duplicates merged.
///
/// # Errors
/// `space_not_found`; store errors.
pub(crate) fn run(api: &Api, space: &str, horizon: &str, start: Option<i64>) -> Result<CatchupReport> {
    let store = api.store();
    store.spaces().require(space)?;
    let Some(start) = start else {
        return Ok(CatchupReport {
            status: "skipped",
            horizon: horizon.to_string(),
            space_id: space.to_string(),
            threads_scanned: 0,
            messages_undistilled: 0,
            memories_created: 0,
            memories_merged: 0,
            threads: None,
            message: "horizon is off: nothing was distilled".into(),
        });
    };
    // Which message indices of each thread some memory was distilled from.
    let mut covered: HashMap<String, HashSet<u64>> = HashMap::new();
    store.memories().scan(space, |m| {
        if let (Some(t), Some(ix)) = (&m.source_thread_id, m.metadata.0.get("source_message_indices")) {
            let set = covered.entry(t.clone()).or_default();
            set.extend(ix.as_array().into_iter().flatten().filter_map(Value::as_u64));
        }
        true
    })?;
    let (mut scanned, mut undistilled, mut created, mut merged) = (0usize, 0usize, 0usize, 0usize);
    let mut threads_touched = Vec::new();
    let mut offset = 0;
    loop {
        let page = store.threads().list(space, None, PAGE, offset)?;
        let n = page.items.len();
        for thread in page.items {
            if thread.updated_at.millis() < start {
                continue;
            }
            scanned += 1;
            let (_, messages) = store.threads().all_messages(&thread.thread_id, Some(space))?;
            let done = covered.get(&thread.thread_id);
            let todo: Vec<crate::model::Message> = messages
                .into_iter()
                .filter(|m| m.timestamp.millis() >= start || m.created_at.millis() >= start)
                .filter(|m| !done.is_some_and(|d| d.contains(&m.order_index)))
                .filter(|m| m.metadata.0.get("exclude_from_distillation").and_then(Value::as_bool) != Some(true))
                .collect();
            if todo.is_empty() {
                continue;
            }
            undistilled += todo.len();
            let prefix = crate::store::thread_memory_prefix(space, &thread.thread_id);
            let x = store.threads().extract_units(space, &prefix, Some(&thread.thread_id), &todo)?;
            let new = x.memories.iter().filter(|c| c.action == crate::store::WriteAction::Created).count();
            created += new;
            merged += x.merged;
            if new > 0 {
                threads_touched.push(CatchupThread { thread_id: thread.thread_id, memories_created: new as u64 });
            }
        }
        offset += n;
        if n < PAGE || offset >= page.total {
            break;
        }
    }
    Ok(CatchupReport {
        status: "success",
        horizon: horizon.to_string(),
        space_id: space.to_string(),
        threads_scanned: scanned as u64,
        messages_undistilled: undistilled as u64,
        memories_created: created as u64,
        memories_merged: merged as u64,
        threads: Some(threads_touched),
        message: format!("{created} memories distilled from {undistilled} undistilled messages in {scanned} threads"),
    })
}

/// A thread the catch-up distilled memories from.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct CatchupThread {
    /// The thread.
    pub thread_id: String,
    /// Memories created from it.
    pub memories_created: u64,
}

/// `POST /agent/trigger/memory-catchup`: what the catch-up distilled.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct CatchupReport {
    /// `success`, or `skipped` when the horizon is off.
    pub status: &'static str,
    /// The horizon asked for.
    pub horizon: String,
    /// The space.
    pub space_id: String,
    /// Threads changed since the horizon.
    pub threads_scanned: u64,
    /// Their messages no memory was distilled from.
    pub messages_undistilled: u64,
    /// Memories created.
    pub memories_created: u64,
    /// Units merged into stored near-duplicates.
    pub memories_merged: u64,
    /// Threads that gave memories (absent when skipped).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub threads: Option<Vec<CatchupThread>>,
    /// One line.
    pub message: String,
}

pub(super) fn trigger(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let r: CatchupRequest = if ctx.body.iter().all(u8::is_ascii_whitespace) {
        CatchupRequest { horizon: None, space_id: None }
    } else {
        ctx.json()?
    };
    let start = horizon_start(r.horizon.as_ref(), &["body", "horizon"])?;
    let label = match &r.horizon {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => "today".into(),
    };
    let space = r.space_id.unwrap_or_else(|| DEFAULT_SPACE.to_string());
    Ok(ApiResponse::json(200, &run(api, &space, &label, start)?))
}
