//! Agent workflow tools: skills (`find_skills`, `report_skill_outcome`), version revision
//! (`memory_evolves_revise`) and claim checking (`check_claims`).
//!
//! A **skill** is a procedure the store learned: a memory of unit type `procedure`, or one created with
//! `metadata.skill = true`. Its id is `skill-<memory id>` (stable across edits), its version the memory's
//! `version`, its name a slug of the title. Outcomes are counted in `metadata.skill_outcomes` and the last 20
//! are kept in `metadata.skill_outcome_log`.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::{Call, ToolError};
use crate::api::dto::{MemoryOut, SearchRequest};
use crate::api::memories::{CreateMemoryRequest, UpdateMemoryRequest};
use crate::api::{lifecycle, memories, search};
use crate::error::ErrorCode;
use crate::error::{Error, ErrorKind};
use crate::model::{MemoryState, UnitType};
use crate::store::{ListOrder, ListQuery, Transition};
use crate::text;

type Out = Result<Value, ToolError>;

/// Skill outcomes an agent reports.
pub const OUTCOMES: [&str; 4] = ["completed", "completed_with_deviation", "failed", "abandoned"];
/// Outcome notes kept per skill.
const OUTCOME_LOG: usize = 20;

fn slug(s: &str) -> String {
    let words = text::words(s);
    let mut out = words.into_iter().take(8).collect::<Vec<_>>().join("-");
    out.truncate(64);
    out
}

fn skill_of(m: &MemoryOut, score: Option<f64>) -> Value {
    let m = &m.memory;
    let title = Some(m.title.clone())
        .filter(|t| !t.is_empty())
        .unwrap_or_else(|| crate::extract::first_sentence(&m.content).chars().take(80).collect());
    let content = &m.content;
    let mut v = json!({
        "skill_id": format!("skill-{}", m.id),
        "id": format!("skill-{}", m.id),
        "memory_id": m.id,
        "version": m.version,
        "name": slug(&title),
        "title": title,
        "description": crate::extract::first_sentence(content).chars().take(300).collect::<String>(),
        "content": content,
        "outcomes": m.metadata.0.get("skill_outcomes").cloned().unwrap_or_else(|| json!({})),
    });
    if let Some(s) = score {
        v["score"] = s.into();
    }
    v
}

fn is_skill(m: &MemoryOut) -> bool {
    m.memory.unit_type == UnitType::Procedure || m.memory.metadata.0.get("skill") == Some(&Value::Bool(true))
}

pub(super) fn find_skills(c: &Call<'_>) -> Out {
    let query = c.args.text("query", 500)?;
    let limit = c.args.int("limit", 1, 20, 5)? as usize;
    let mut skills = Vec::new();
    match &query {
        Some(q) => {
            // Search wider than the limit: skills are a subset of the hits.
            for h in search::search(c.api, search_in(c, q, 100))?.into_full() {
                if is_skill(&h.memory) && skills.len() < limit {
                    skills.push(skill_of(&h.memory, Some(h.similarity_score)));
                }
            }
        }
        None => {
            let list = ListQuery {
                space_id: c.space.clone(),
                filter: crate::index::catalog::MemoryFilter {
                    unit_type: Some(UnitType::Procedure),
                    ..memories::list_filter()
                },
                limit,
                offset: 0,
            };
            let page = memories::list_page(c.api, &list, ListOrder::Recent)?;
            skills.extend(page.memories.iter().map(|m| skill_of(m, None)));
        }
    }
    Ok(json!({"status": "success", "query": query, "skills": skills, "matches": skills, "total": skills.len()}))
}

/// A plain search of the call's space: `query`, at most `limit` hits.
fn search_in(c: &Call<'_>, query: &str, limit: i64) -> SearchRequest {
    SearchRequest {
        query: query.to_string(),
        limit: Some(limit),
        space_id: Some(c.space.clone()),
        ..Default::default()
    }
}

fn skill_memory_id(skill_id: &str) -> &str {
    skill_id.strip_prefix("skill-").or_else(|| skill_id.strip_prefix("skill_")).unwrap_or(skill_id)
}

pub(super) fn report_skill_outcome(c: &Call<'_>) -> Out {
    let skill_id = c.args.req_str("skill_id")?;
    let outcome = c.args.choice("outcome", &OUTCOMES, "")?;
    if outcome.is_empty() {
        return Err(super::args::missing("outcome").into());
    }
    let note = c.args.text("note", 2000)?.or(c.args.text("notes", 2000)?).or(c.args.text("summary", 2000)?);
    let version = c.args.opt_int("skill_version", 1, i64::MAX)?;
    let id = skill_memory_id(&skill_id);
    let m = memories::get(c.api, id, Some(&c.space))?;
    if !is_skill(&m) {
        return Err(Error::not_found(
            ErrorCode::SkillNotFound,
            format!("{skill_id} is not a skill (a procedure memory)"),
        )
        .into());
    }
    let mut meta = m.memory.metadata.0.clone();
    let counts = meta.entry("skill_outcomes").or_insert_with(|| json!({}));
    let n = counts[&outcome].as_u64().unwrap_or(0) + 1;
    counts[&outcome] = n.into();
    let counts = counts.clone();
    let entry = json!({
        "outcome": outcome,
        "note": note,
        "skill_version": version.unwrap_or(m.memory.version),
        "agent_id": c.agent_id(),
        "source_app": c.app(),
        "at": crate::model::Timestamp::now().to_rfc3339(),
    });
    let log = meta.entry("skill_outcome_log").or_insert_with(|| json!([]));
    if let Some(a) = log.as_array_mut() {
        a.push(entry.clone());
        let extra = a.len().saturating_sub(OUTCOME_LOG);
        a.drain(..extra);
    }
    let patch = UpdateMemoryRequest { metadata: Some(meta), ..Default::default() };
    memories::update(c.api, id, patch, Some(&c.space))?;
    Ok(json!({
        "status": "success",
        "skill_id": format!("skill-{id}"),
        "recorded": entry,
        "outcomes": counts,
        "total_reports": counts.as_object().map_or(0, |o| o.values().filter_map(Value::as_u64).sum::<u64>()),
    }))
}

pub(super) fn memory_evolves_revise(c: &Call<'_>) -> Out {
    let a = &c.args;
    let id = a.req_str("memory_id")?;
    let phase = a.choice("phase", &["preview", "apply"], "preview")?;
    let new_content = a.text("new_content", 32_768)?.or(a.text("content", 32_768)?);
    let new_title = a.text("new_title", 200)?.or(a.text("title", 200)?);
    let newer = a.text("newer_memory_id", 200)?;
    let reason = a.text("reason", 1000)?;
    if new_content.is_none() && newer.is_none() {
        return Err(Error::invalid_field(
            &["arguments", "new_content"],
            "missing",
            "give new_content (a new version) or newer_memory_id (an existing memory)",
            Value::Null,
        )
        .into());
    }
    let old = memories::get(c.api, &id, Some(&c.space))?;
    let superseded_by = old.memory.metadata.0.get("superseded_by").cloned().unwrap_or(Value::Null);
    let old_labels = old.labels;
    let old = old.memory;
    if old.state == MemoryState::Superseded {
        return Err(Error::new(ErrorKind::Conflict, format!("memory {id} is already superseded by {superseded_by}"))
            .with_code(ErrorCode::InvalidStateTransition)
            .into());
    }
    if let Some(n) = &newer {
        // Validates the target before anything is written.
        memories::get(c.api, n, Some(&c.space))?;
    }
    let plan = json!({
        "action": if newer.is_some() { "supersede_with_existing" } else { "supersede_with_new_version" },
        "memory_id": id,
        "current": {"title": old.title, "content": old.content, "version": old.version},
        "new_version": newer.as_ref().map_or_else(
            || json!({"title": new_title.clone().unwrap_or_else(|| old.title.clone()),
                "content": new_content, "version": old.version + 1}),
            |n| json!({"memory_id": n})),
        "effects": ["the current memory becomes superseded (is_latest false) and leaves everyday recall",
                    "the versions are linked: metadata.superseded_by / metadata.supersedes"],
    });
    if phase == "preview" {
        return Ok(json!({"status": "preview", "phase": "preview", "plan": plan,
            "next": "call again with phase=apply to make this change"}));
    }
    let newer_id = match newer {
        Some(n) => n,
        None => {
            let r = CreateMemoryRequest {
                content: new_content.unwrap_or_default(),
                title: Some(new_title.unwrap_or_else(|| old.title.clone())),
                importance: Some(old.importance),
                labels: Some(old_labels),
                unit_type: Some(old.unit_type.as_str().to_string()),
                space_id: Some(c.space.clone()),
                source: Some(c.app()),
                event_start: old.event_start.clone(),
                ..Default::default()
            };
            memories::create(c.api, r)?.memory.memory.id
        }
    };
    let reason = reason.unwrap_or_else(|| "revised by an agent".into());
    lifecycle::change_state(
        c.api,
        &id,
        Some(&c.space),
        Transition::Supersede { newer: newer_id.clone() },
        Some(reason),
    )?;
    Ok(json!({"status": "success", "phase": "apply", "plan": plan, "memory_id": id, "newer_memory_id": newer_id}))
}

pub(super) fn list_timeline_reviews(c: &Call<'_>) -> Out {
    let a = &c.args;
    let limit = a.int("limit", 1, 100, 20)? as usize;
    let offset = a.int("offset", 0, i64::MAX, 0)? as usize;
    let days = a.int("last_n_days", 1, 3650, 365)?;
    let unresolved = a.bool("unresolved_only", true)?;
    let mut v = serde_json::to_value(crate::api::reviews::feed(c.api, &c.space, unresolved, days, limit, offset)?)
        .unwrap_or_default();
    v["status"] = "success".into();
    v["reviews"] = v["events"].clone();
    Ok(v)
}

pub(super) fn resolve_timeline_review(c: &Call<'_>) -> Out {
    let a = &c.args;
    let id = a.req_str("event_id")?;
    let req = crate::api::reviews::ReviewRequest {
        phase: Some(a.choice("phase", &["preview", "apply"], "preview")?),
        action: a.choice("action", &crate::store::REVIEW_ACTIONS, "")?,
        memory_ids: a.list("memory_ids")?,
        resolution_note: a.text("resolution_note", 2000)?.or(a.text("note", 2000)?),
        plan_id: a.text("plan_id", 200)?,
        space_id: None,
    };
    if req.action.is_empty() {
        return Err(super::args::missing("action").into());
    }
    let outcome = crate::api::reviews::resolve(c.api, &c.space, &id, &req).map_err(super::relocate_to_arguments)?;
    Ok(serde_json::to_value(outcome).unwrap_or_default())
}

pub(super) fn trigger_memory_catchup(c: &Call<'_>) -> Out {
    let raw = c.args.raw("horizon").cloned();
    let start = crate::api::catchup::horizon_start(raw.as_ref(), &["arguments", "horizon"])?;
    let label = match &raw {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => "today".into(),
    };
    Ok(serde_json::to_value(crate::api::catchup::run(c.api, &c.space, &label, start)?).unwrap_or_default())
}

pub(super) fn search_source_chunks(c: &Call<'_>) -> Out {
    let id = c.args.req_str("source_id")?;
    let query = c.args.text("query", 500)?;
    let Some(query) = query else {
        return Err(super::args::missing("query").into());
    };
    let limit = c.args.int("limit", 1, 50, 5)? as usize;
    let found = c
        .api
        .store()
        .sources()
        .search_chunks(&id, Some(&c.space), &query, limit)
        .map_err(super::relocate_to_arguments)?;
    let (source, total) = (found.source, found.total_chunks);
    let chunks: Vec<Value> = found
        .chunks
        .into_iter()
        .map(|(h, text)| {
            json!({"chunk_index": h.chunk_index, "score": h.score, "text": text, "section": h.section,
            "snippet": h.snippet})
        })
        .collect();
    Ok(json!({"status": "success", "source_id": source.id, "source_name": source.original_name, "query": query,
        "chunks": chunks, "total_chunks": total}))
}

pub(super) fn analyze_source_data(c: &Call<'_>) -> Out {
    let id = c.args.req_str("source_id")?;
    let columns = c.args.list("columns")?.unwrap_or_default();
    let a = c.api.store().sources().analyze(&id, Some(&c.space), &columns).map_err(super::relocate_to_arguments)?;
    Ok(json!({"status": "success", "source_id": a.source_id, "source_name": a.source_name, "sheets": a.sheets}))
}

/// The signals a claim is compared on: content terms (stemmed, stop words out), numbers, negation, and the
/// terms of capitalised words that do not start the text (names, places, products: values).
struct Signals {
    terms: BTreeSet<String>,
    numbers: BTreeSet<String>,
    proper: BTreeSet<String>,
    negated: bool,
}

fn signals(s: &str) -> Signals {
    let words = text::words(s);
    let numbers = words.iter().filter(|w| w.chars().all(|c| c.is_ascii_digit())).cloned().collect();
    let negated = words.iter().any(|w| text::is_negation(w)) || s.to_lowercase().contains("n't");
    let mut proper = BTreeSet::new();
    for (i, token) in s.split_whitespace().enumerate() {
        let word: String = token.chars().filter(|c| c.is_alphanumeric()).collect();
        if i > 0 && word.chars().next().is_some_and(char::is_uppercase) {
            proper.extend(text::terms(&word));
        }
    }
    Signals { terms: text::terms(s).into_iter().collect(), numbers, proper, negated }
}

/// A memory's clauses: split at sentence ends, semicolons and ", but"; a negation then belongs to its own
/// clause ("Bob does not drink coffee; he prefers tea" supports "Bob prefers tea").
fn clauses(s: &str) -> Vec<&str> {
    s.split(['.', ';', '!', '?']).flat_map(|c| c.split(", but ")).map(str::trim).filter(|c| !c.is_empty()).collect()
}

/// Coverage of the claim's terms by a memory text (0..=1), and whether the two disagree: a negation on one
/// side only, numbers on both sides that share none, or a value (a proper name) on each side that the other
/// lacks.
fn compare(claim: &Signals, memory: &Signals) -> (f64, Option<&'static str>) {
    let content: BTreeSet<&String> = claim.terms.iter().filter(|t| !claim.numbers.contains(*t)).collect();
    if content.is_empty() {
        return (0.0, None);
    }
    let shared = content.iter().filter(|t| memory.terms.contains(**t)).count();
    let coverage = shared as f64 / content.len() as f64;
    let claim_only = claim.proper.iter().any(|t| !memory.terms.contains(t));
    let memory_only = memory.proper.iter().any(|t| !claim.terms.contains(t));
    let conflict = if claim.negated != memory.negated {
        Some("negation")
    } else if !claim.numbers.is_empty() && !memory.numbers.is_empty() && claim.numbers.is_disjoint(&memory.numbers) {
        Some("number")
    } else if claim_only && memory_only {
        Some("value")
    } else {
        None
    };
    (coverage, conflict)
}

/// How a memory bears on a claim: the coverage of the whole text (a claim may span clauses), and the
/// disagreement of the clause that covers the claim best, when one covers at least [`MIN_COVERAGE`] (else of
/// the whole text).
fn best_match(claim: &Signals, memory_text: &str) -> (f64, Option<&'static str>) {
    let whole = compare(claim, &signals(memory_text));
    let mut best = (0.0, None);
    for c in clauses(memory_text) {
        let r = compare(claim, &signals(c));
        if r.0 > best.0 {
            best = r;
        }
    }
    let conflict = if best.0 >= MIN_COVERAGE { best.1 } else { whole.1 };
    (whole.0.max(best.0), conflict)
}

/// Least term coverage for a memory to bear on a claim.
const MIN_COVERAGE: f64 = 0.5;

pub(super) fn check_claims(c: &Call<'_>) -> Out {
    let claims = c.args.list("claims")?.unwrap_or_default();
    if claims.is_empty() {
        return Err(super::args::missing("claims").into());
    }
    if claims.len() > 20 {
        return Err(Error::invalid_field(&["arguments", "claims"], "too_long", "at most 20 claims", Value::Null).into());
    }
    let limit = c.args.int("limit", 1, 10, 3)? as usize;
    let mut out = Vec::with_capacity(claims.len());
    let mut counts = json!({"supported": 0, "contradicted": 0, "unknown": 0});
    for claim in &claims {
        let cs = signals(claim);
        let (mut sup, mut con) = (Vec::new(), Vec::new());
        for h in search::search(c.api, search_in(c, claim, 10))?.into_full() {
            let m = &h.memory.memory;
            let (coverage, conflict) = best_match(&cs, &m.content);
            if coverage < MIN_COVERAGE {
                continue;
            }
            let row = json!({"memory_id": m.id, "title": m.title, "content": m.content,
                "score": (coverage * 1000.0).round() / 1000.0, "reason": conflict.unwrap_or("agrees")});
            if conflict.is_some() { con.push(row) } else { sup.push(row) }
        }
        let best = |v: &Vec<Value>| v.iter().filter_map(|r| r["score"].as_f64()).fold(0.0, f64::max);
        let (bs, bc) = (best(&sup), best(&con));
        let verdict = if bs == 0.0 && bc == 0.0 {
            "unknown"
        } else if bc > bs {
            "contradicted"
        } else {
            "supported"
        };
        counts[verdict] = (counts[verdict].as_u64().unwrap_or(0) + 1).into();
        sup.truncate(limit);
        con.truncate(limit);
        out.push(json!({"claim": claim, "verdict": verdict, "confidence": bs.max(bc), "supporting": sup,
            "contradicting": con}));
    }
    Ok(
        json!({"status": "success", "results": out, "summary": counts, "method": "term coverage with negation and number checks"}),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claims_disagree_on_negation_numbers_and_values() {
        let claim = signals("Alice lives in Berlin");
        assert_eq!(compare(&claim, &signals("Alice lives in Berlin since 2019")), (1.0, None));
        assert_eq!(compare(&claim, &signals("Alice does not live in Berlin")).1, Some("negation"));
        assert_eq!(compare(&claim, &signals("Alice lives in Munich")).1, Some("value"));
        let n = signals("The team has 12 engineers");
        assert_eq!(compare(&n, &signals("The team has 15 engineers")).1, Some("number"));
        assert!(compare(&claim, &signals("Bob likes tea")).0 < MIN_COVERAGE);
        let tea = signals("Bob prefers green tea in the morning");
        assert_eq!(best_match(&tea, "Bob does not drink coffee; he prefers green tea in the morning.").1, None);
    }
}
