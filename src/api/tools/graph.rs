//! Graph tools: `memory_neighbors`, `memory_evolves_chain`, `list_crystals`, `graph_stats`, `list_communities`,
//! `get_community_details`, `explore_graph`, `list_spaces` (`mcp.md` §3.4 schemas).
//!
//! Communities are computed over the entity graph of every space; these tools show a community only to a
//! space that has members in it, and only that space's entities and memories.

use std::collections::{BTreeMap, HashSet, VecDeque};

use serde_json::{Value, json};

use super::{Call, ToolError};
use crate::api::{memories, relations};
use crate::error::Error;
use crate::error::ErrorCode;
use crate::model::Memory;
use crate::store::{Community, ListOrder, ListQuery, RelationQuery};

type Out = Result<Value, ToolError>;

fn memory(c: &Call<'_>, id: &str) -> Result<Memory, ToolError> {
    Ok(memories::get(c.api, id, Some(&c.space))?.memory)
}

fn brief(m: &Memory) -> Value {
    json!({"memory_id": m.id, "title": m.title, "content": m.content, "unit_type": m.unit_type,
        "state": m.state, "importance": m.importance})
}

/// The version links of a memory: `metadata.supersedes` (a list: a version may replace several) or
/// `metadata.superseded_by` (one id).
fn links(m: &Memory, key: &str) -> Vec<String> {
    match m.metadata.0.get(key) {
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(a)) => a.iter().filter_map(|v| v.as_str().map(str::to_string)).collect(),
        _ => Vec::new(),
    }
}

/// Neighbours of one memory: its relations (filtered by type) and version links, as `(id, type, direction)`.
fn edges(c: &Call<'_>, m: &Memory, types: &Option<Vec<String>>) -> Result<Vec<(String, String, String)>, ToolError> {
    let id = m.id.as_str();
    let mut out = Vec::new();
    let rq = RelationQuery {
        direction: "both".into(),
        status: "active".into(),
        limit: relations::DEFAULT_LIST_LIMIT,
        types: Vec::new(),
    };
    for r in relations::relations_of(c.api, id, &rq, Some(&c.space))?.relations {
        let rel = r.relation;
        if types.as_ref().is_some_and(|t| !t.contains(&rel.relation_type)) {
            continue;
        }
        let (other, dir) =
            if rel.source_memory_id == id { (rel.target_memory_id, "out") } else { (rel.source_memory_id, "in") };
        out.push((other, rel.relation_type, dir.to_string()));
    }
    for (key, ty, dir) in [("supersedes", "evolves", "out"), ("superseded_by", "evolves", "in")] {
        if types.as_ref().is_some_and(|t| !t.iter().any(|x| x == ty)) {
            continue;
        }
        for other in links(m, key) {
            out.push((other, ty.to_string(), dir.to_string()));
        }
    }
    Ok(out)
}

pub(super) fn memory_neighbors(c: &Call<'_>) -> Out {
    let id = c.args.req_str("memory_id")?;
    let depth = c.args.int("depth", 1, 3, 1)? as usize;
    let types = c.args.list("edge_types")?;
    let root = memory(c, &id)?;
    let mut seen: HashSet<String> = HashSet::from([id.clone()]);
    let mut queue = VecDeque::from([(root.clone(), 0usize)]);
    let mut neighbors = Vec::new();
    while let Some((m, d)) = queue.pop_front() {
        if d == depth {
            continue;
        }
        for (other, ty, dir) in edges(c, &m, &types)? {
            if !seen.insert(other.clone()) {
                continue;
            }
            // A neighbour in another space or forgotten is not shown.
            let Ok(n) = memory(c, &other) else { continue };
            let mut row = brief(&n);
            row["relation_type"] = ty.into();
            row["direction"] = dir.into();
            row["depth"] = (d + 1).into();
            row["via"] = m.id.clone().into();
            neighbors.push(row);
            queue.push_back((n, d + 1));
        }
    }
    let entities: Vec<Value> = c
        .api
        .store()
        .graph()
        .entities_of(&c.space, &id)?
        .into_iter()
        .map(|e| json!({"entity_id": e.id, "name": e.name, "entity_type": e.entity_type}))
        .collect();
    Ok(json!({
        "status": "success",
        "memory_id": id,
        "memory": brief(&root),
        "neighbors": neighbors,
        "total_neighbors": neighbors.len(),
        "entities": entities,
        "depth": depth,
    }))
}

/// Follows the version link `key` from `root` for at most `max_depth` steps (a version that replaced several
/// follows the most recent of them); stops at a loop, a missing or foreign memory.
fn walk(c: &Call<'_>, root: &Memory, key: &str, max_depth: usize, seen: &mut HashSet<String>) -> Vec<Memory> {
    let mut out = Vec::new();
    let mut cur = root.clone();
    while out.len() < max_depth {
        let Some(next) = links(&cur, key).pop() else { break };
        if !seen.insert(next.clone()) {
            break;
        }
        let Ok(m) = memory(c, &next) else { break };
        out.push(m.clone());
        cur = m;
    }
    out
}

pub(super) fn memory_evolves_chain(c: &Call<'_>) -> Out {
    let id = c.args.req_str("memory_id")?;
    let max_depth = c.args.int("max_depth", 1, 50, 10)? as usize;
    let root = memory(c, &id)?;
    let mut seen = HashSet::from([id.clone()]);
    let older = walk(c, &root, "supersedes", max_depth, &mut seen);
    let newer = walk(c, &root, "superseded_by", max_depth, &mut seen);
    let row = |m: &Memory, role: &str| {
        let mut b = brief(m);
        b["version"] = m.version.into();
        b["is_latest"] = m.is_latest.into();
        b["created_at"] = json!(m.created_at);
        b["role"] = role.into();
        b
    };
    let mut chain: Vec<Value> = older.iter().rev().map(|m| row(m, "older")).collect();
    chain.push(row(&root, "self"));
    chain.extend(newer.iter().map(|m| row(m, "newer")));
    let latest = chain.last().map(|r| r["memory_id"].clone()).unwrap_or(Value::Null);
    Ok(json!({
        "status": "success",
        "memory_id": id,
        "chain": chain,
        "total_versions": chain.len(),
        "latest_memory_id": latest,
    }))
}

pub(super) fn list_crystals(c: &Call<'_>) -> Out {
    let limit = c.args.int("limit", 1, 100, 20)?;
    let offset = c.args.int("offset", 0, i64::MAX, 0)?;
    let list = ListQuery {
        space_id: c.space.clone(),
        filter: crate::index::catalog::MemoryFilter { is_crystal: Some(true), ..memories::list_filter() },
        limit: limit as usize,
        offset: offset as usize,
    };
    let page = memories::list_page(c.api, &list, ListOrder::Recent)?;
    let crystals: Vec<Value> = page
        .memories
        .iter()
        .map(|m| {
            let m = &m.memory;
            let mut b = brief(m);
            b["crystal_title"] = json!(m.crystal_title);
            b["source_unit_count"] = json!(m.source_unit_count);
            b["created_at"] = json!(m.created_at);
            b
        })
        .collect();
    Ok(json!({"status": "success", "crystals": crystals, "total": page.pagination.total, "limit": limit,
        "offset": offset}))
}

pub(super) fn graph_stats(c: &Call<'_>) -> Out {
    let mut v = serde_json::to_value(c.api.store().admin().stats(Some(&c.space))?).unwrap_or_default();
    let (_, in_space) = c.api.store().graph().communities_of_space(&c.space, 0)?;
    v["community_count"] = in_space.into();
    v["space_id"] = c.space.clone().into();
    v["status"] = "success".into();
    Ok(v)
}

/// The community as this space sees it: its own entities and memories; the title and summary of a
/// community shared with other spaces are rebuilt from this space's entities alone.
fn in_space(k: &Community, space: &str, limit: usize) -> Value {
    let entities: Vec<Value> = k
        .top_entities
        .iter()
        .filter(|e| e.space_id == space)
        .take(limit)
        .map(|e| {
            json!({"entity_id": e.entity_id, "name": e.name, "entity_type": e.entity_type,
            "mention_count": e.mention_count, "pagerank": e.pagerank})
        })
        .collect();
    let memories: Vec<Value> = k
        .top_memories
        .iter()
        .filter(|m| m.space_id == space)
        .take(limit)
        .map(|m| json!({"memory_id": m.memory_id, "title": m.title, "entities_mentioned": m.entities_mentioned}))
        .collect();
    let shared = k.spaces.iter().any(|s| s != space);
    let names: Vec<&str> = entities.iter().filter_map(|e| e["name"].as_str()).take(3).collect();
    let (title, summary) = if shared {
        (names.join(", "), format!("Topic around {}", names.join(", ")))
    } else {
        (k.title.clone(), k.summary.clone())
    };
    json!({
        "community_id": k.id.to_string(),
        "id": k.id,
        "title": title,
        "summary": summary,
        "entity_count": entities.len().max(if shared { 0 } else { k.entity_count as usize }),
        "memory_count": if shared { memories.len() as u64 } else { k.memory_count },
        "weight": k.weight,
        "top_entities": entities,
        "top_memories": memories,
    })
}

pub(super) fn list_communities(c: &Call<'_>) -> Out {
    let limit = c.args.int("limit", 1, 50, 20)? as usize;
    let (page, _) = c.api.store().graph().communities_of_space(&c.space, limit)?;
    let rows: Vec<Value> = page.iter().map(|k| in_space(k, &c.space, 5)).collect();
    Ok(json!({"status": "success", "communities": rows, "total": rows.len()}))
}

pub(super) fn get_community_details(c: &Call<'_>) -> Out {
    let raw = c.args.req_str("community_id")?;
    let limit = c.args.int("limit", 1, 50, 20)? as usize;
    let id: u64 = raw.trim().parse().map_err(|_| {
        Error::invalid_field(
            &["arguments", "community_id"],
            "int_parsing",
            "community_id is an integer",
            raw.clone().into(),
        )
    })?;
    let (k, _) = c.api.store().graph().community(id, limit)?;
    if !k.spaces.contains(&c.space) {
        return Err(Error::not_found(
            ErrorCode::CommunityNotFound,
            format!("community {id} has nothing in space {}", c.space),
        )
        .into());
    }
    let mut v = in_space(&k, &c.space, limit);
    v["status"] = "success".into();
    Ok(v)
}

pub(super) fn explore_graph(c: &Call<'_>) -> Out {
    let ids = c.args.list("memory_ids")?.unwrap_or_default();
    if ids.is_empty() {
        return Err(super::args::missing("memory_ids").into());
    }
    let depth = c.args.int("depth", 1, 3, 1)? as usize;
    let limit = c.args.int("limit", 1, 50, 15)? as usize;
    let store = c.api.store();
    let mut nodes: BTreeMap<String, Value> = BTreeMap::new();
    let mut links = Vec::new();
    let mut frontier: Vec<String> = Vec::new();
    for id in &ids {
        let m = memory(c, id)?;
        nodes.insert(id.clone(), json!({"id": id, "kind": "memory", "title": m.title, "depth": 0}));
        frontier.push(id.clone());
    }
    for d in 1..=depth {
        let mut next = Vec::new();
        for mid in frontier.drain(..) {
            for e in store.graph().entities_of(&c.space, &mid)? {
                let eid = format!("entity:{}", e.id);
                links.push(json!({"source": mid, "target": eid, "type": "mentions"}));
                if nodes.contains_key(&eid) {
                    continue;
                }
                nodes.insert(
                    eid.clone(),
                    json!({"id": eid, "kind": "entity", "name": e.name,
                    "entity_type": e.entity_type, "depth": d}),
                );
                for other in store.graph().entity_memory_ids(&c.space, &e.id)?.into_iter().take(limit) {
                    if nodes.len() >= limit * (depth + 1) {
                        break;
                    }
                    links.push(json!({"source": other, "target": eid, "type": "mentions"}));
                    if nodes.contains_key(&other) {
                        continue;
                    }
                    let Ok(m) = memory(c, &other) else { continue };
                    nodes.insert(other.clone(), json!({"id": other, "kind": "memory", "title": m.title, "depth": d}));
                    next.push(other);
                }
            }
        }
        frontier = next;
    }
    let mut seen = HashSet::new();
    links.retain(|l| nodes.contains_key(l["source"].as_str().unwrap_or("")) && seen.insert(l.to_string()));
    Ok(json!({
        "status": "success",
        "memory_ids": ids,
        "nodes": nodes.into_values().collect::<Vec<_>>(),
        "links": links,
        "depth": depth,
    }))
}

pub(super) fn list_spaces(c: &Call<'_>) -> Out {
    let spaces = c.api.store().spaces().list()?;
    let rows: Vec<Value> = spaces
        .iter()
        .map(|s| {
            json!({"space_id": s.id, "id": s.id, "name": s.name, "description": s.description,
            "active": s.id == c.space})
        })
        .collect();
    Ok(json!({"status": "success", "spaces": rows, "total": rows.len(), "active_space_id": c.space}))
}

pub(super) fn sync_status(c: &Call<'_>) -> Out {
    let mut v = serde_json::to_value(c.api.store().sync().status()?)
        .map_err(|e| Error::new(crate::error::ErrorKind::Internal, format!("the sync status does not encode: {e}")))?;
    v["status"] = "success".into();
    Ok(v)
}
