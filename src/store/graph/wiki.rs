//! The graph reads behind the wiki pages (`crate::library`): an entity by id or name, its mentions, the
//! crystals about it, a community's recent memories, related communities and its subgraph, and the one-line
//! form of a memory they share.

use std::collections::BTreeSet;

use super::Graph;
use crate::error::ErrorCode;
use crate::error::{Error, Result};
use crate::model::{Entity, MemoryState};
use crate::store::records::graph;
use crate::store::{MemoryView, StoredMemory};
use crate::store::{entity, label, memory};

/// The first line of a memory, at most `max` characters.
pub fn memory_line(v: &MemoryView, max: usize) -> String {
    let t = if v.memory.title.is_empty() || v.memory.is_crystal { &v.memory.content } else { &v.memory.title };
    let flat = t.replace('\n', " ");
    let mut out: String = flat.chars().take(max).collect();
    if flat.chars().count() > max {
        out.push('…');
    }
    out
}

/// The date a memory is filed under: its event date, else the day it was recorded (`YYYY-MM-DD`).
pub(crate) fn date_of(v: &MemoryView) -> String {
    v.memory.event_start.clone().unwrap_or_else(|| v.memory.created_at.to_rfc3339().chars().take(10).collect())
}

fn not_found(kind: ErrorCode, what: &str) -> Error {
    Error::not_found(kind, format!("{what} not found"))
}

/// The selection of a library bundle ([`Graph::library`]).
#[derive(Debug, Clone, Default)]
pub struct LibrarySelection {
    /// Every community.
    pub topics: Vec<super::Community>,
    /// The most mentioned entities.
    pub entities: Vec<Entity>,
    /// Every crystal.
    pub crystals: Vec<MemoryView>,
    /// Memories neither forgotten nor crystals (OKF only).
    pub memories: Vec<MemoryView>,
    /// Every label (OKF only).
    pub labels: Vec<crate::model::Label>,
}

impl Graph<'_> {
    /// What a library bundle shows, read in one snapshot (communities apart): every community, the
    /// `entity_limit` most mentioned entities (ties by name, then space), every crystal, and with
    /// `with_memories` every memory that is neither forgotten nor a crystal, with its labels, and every label.
    ///
    /// # Errors
    /// Storage errors.
    pub fn library(&self, with_memories: bool, entity_limit: usize) -> Result<LibrarySelection> {
        let (topics, _) = self.communities(usize::MAX)?;
        let rtx = self.store.core.db.read()?;
        let mut entities: Vec<Entity> = Vec::new();
        for row in entity::entities(&rtx)?.iter()? {
            entities.push(row?.1);
        }
        entities.sort_by(|a, b| {
            b.mention_count
                .cmp(&a.mention_count)
                .then_with(|| a.name.cmp(&b.name))
                .then_with(|| a.space_id.cmp(&b.space_id))
        });
        entities.truncate(entity_limit);
        let crystal_ids: BTreeSet<(String, String)> = graph::all_crystal_sources(&rtx)?.into_keys().collect();
        let mut memories = Vec::new();
        let mut labels = Vec::new();
        if with_memories {
            let ml = label::memory_labels(&rtx)?;
            let mut kept = Vec::new();
            memory::memories(&rtx)?.each(|space, id, sm: StoredMemory| {
                if sm.memory.state != MemoryState::Forgotten && !sm.memory.is_crystal {
                    kept.push((space.to_string(), id.to_string(), sm.memory));
                }
                true
            })?;
            for (space, id, memory) in kept {
                let label_ids = crate::store::range_prefix3(&ml, &space, &id)?;
                memories.push(MemoryView { memory, label_ids });
            }
            for row in label::labels(&rtx)?.iter()? {
                labels.push(row?.1);
            }
        }
        drop(rtx);
        let mut crystals = Vec::new();
        for (s, c) in crystal_ids {
            if let Ok(v) = self.store.memories().get(&c, Some(&s)) {
                crystals.push(v);
            }
        }
        Ok(LibrarySelection { topics, entities, crystals, memories, labels })
    }

    /// The entity an id or a name refers to, across spaces: an entity id first (the most mentioned one when the
    /// id exists in several spaces), then a canonical name or alias compared without case.
    ///
    /// # Errors
    /// [`crate::ErrorKind::NotFound`] (`entity_not_found`).
    pub fn resolve_entity(&self, id_or_name: &str) -> Result<Entity> {
        let rtx = self.store.core.db.read()?;
        let t = entity::entities(&rtx)?;
        let lower = id_or_name.trim().to_lowercase();
        let mut by_id: Option<Entity> = None;
        let mut by_name: Option<Entity> = None;
        t.each(|_, id, e: Entity| {
            if id == id_or_name {
                if by_id.as_ref().is_none_or(|b| e.mention_count > b.mention_count) {
                    by_id = Some(e);
                }
            } else if by_id.is_none()
                && (e.name.to_lowercase() == lower || e.aliases.iter().any(|a| a.to_lowercase() == lower))
                && by_name.as_ref().is_none_or(|b| e.mention_count > b.mention_count)
            {
                by_name = Some(e);
            }
            true
        })?;
        by_id.or(by_name).ok_or_else(|| not_found(ErrorCode::EntityNotFound, &format!("entity '{id_or_name}'")))
    }

    /// Memories (not forgotten) mentioning entity `e`, newest event first, at most `limit`.
    ///
    /// # Errors
    /// Storage errors.
    pub fn entity_mentions(&self, e: &Entity, limit: usize) -> Result<Vec<MemoryView>> {
        let ids = self.entity_memory_ids(&e.space_id, &e.id)?;
        let mut views: Vec<MemoryView> = self
            .store
            .memories()
            .load_views(&e.space_id, ids.iter().map(String::as_str))?
            .into_iter()
            .filter(|v| v.memory.state != MemoryState::Forgotten)
            .collect();
        views.sort_by(|a, b| date_of(b).cmp(&date_of(a)).then_with(|| a.memory.id.cmp(&b.memory.id)));
        views.truncate(limit);
        Ok(views)
    }

    /// The crystals that cite memories mentioning entity `e`, or are about it.
    pub(crate) fn crystals_about(&self, e: &Entity) -> Result<Vec<MemoryView>> {
        let id = super::crystal_id(&e.space_id, &e.id);
        Ok(self.store.memories().get(&id, Some(&e.space_id)).ok().into_iter().collect())
    }

    /// Memories (not forgotten) mentioning any entity of community `id`, most recent first, at most `limit`.
    ///
    /// # Errors
    /// [`crate::ErrorKind::NotFound`] (`community_not_found`).
    pub fn community_recent_memories(&self, id: u64, limit: usize) -> Result<Vec<MemoryView>> {
        self.community(id, 1)?;
        let members = self.community_members(id)?;
        let rtx = self.store.core.db.read()?;
        let em = entity::entity_memories(&rtx)?;
        let mems = memory::memories(&rtx)?;
        let mut seen = rustc_hash::FxHashSet::default();
        let mut found: Vec<(String, crate::model::Memory)> = Vec::new();
        for (space, e, _) in &members {
            for m in crate::store::range_prefix3(&em, space, e)? {
                if seen.insert((space.clone(), m.clone()))
                    && let Some(sm) = mems.get((space.as_str(), m.as_str()))?
                    && sm.memory.state != MemoryState::Forgotten
                {
                    found.push((space.clone(), sm.memory));
                }
            }
        }
        found.sort_by(|a, b| b.1.created_at.cmp(&a.1.created_at).then_with(|| a.1.id.cmp(&b.1.id)));
        found.truncate(limit);
        drop((em, mems, rtx));
        let mut out = Vec::new();
        for (space, m) in found {
            if let Ok(v) = self.store.memories().get(&m.id, Some(&space)) {
                out.push(v);
            }
        }
        Ok(out)
    }

    /// Other communities linked to community `id` by RELATES_TO edges, most shared edges first:
    /// `(community, shared edge count)`.
    ///
    /// # Errors
    /// [`crate::ErrorKind::NotFound`] (`community_not_found`).
    pub fn related_communities(&self, id: u64, limit: usize) -> Result<Vec<(super::Community, u64)>> {
        self.community(id, 1)?;
        let members = self.community_members(id)?;
        let rtx = self.store.core.db.read()?;
        let rel = entity::relates_to(&rtx)?;
        let ec = graph::entity_community(&rtx)?;
        let mut counts: std::collections::BTreeMap<u64, u64> = Default::default();
        for (space, e, _) in &members {
            for (b, _) in entity::relates_of(&rel, space, e)? {
                if let Some(c) = crate::store::records::value_at(&ec, (space.as_str(), b.as_str()), |c| c)?
                    && c != id
                {
                    *counts.entry(c).or_default() += 1;
                }
            }
        }
        drop((rel, ec, rtx));
        let mut pairs: Vec<(u64, u64)> = counts.into_iter().collect();
        pairs.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        let mut out = Vec::new();
        for (c, n) in pairs.into_iter().take(limit) {
            if let Ok((community, _)) = self.community(c, 1) {
                out.push((community, n));
            }
        }
        Ok(out)
    }

    /// The subgraph of community `id`: its (at most `max_entities`) most central entities as nodes, the
    /// RELATES_TO edges between them, and optionally the `top_memories` memories touching most of them with
    /// MENTIONS edges. `{nodes[{id, node_type, label, metadata}], edges[{source, target, edge_type, weight}]}`.
    ///
    /// # Errors
    /// [`crate::ErrorKind::NotFound`] (`community_not_found`).
    pub fn community_subgraph(&self, id: u64, max_entities: usize, top_memories: usize) -> Result<Subgraph> {
        let (c, _) = self.community(id, 1)?;
        let members: Vec<(String, String, f64)> = self.community_members(id)?.into_iter().take(max_entities).collect();
        let keep: rustc_hash::FxHashSet<(String, String)> =
            members.iter().map(|(s, e, _)| (s.clone(), e.clone())).collect();
        let rtx = self.store.core.db.read()?;
        let ents = entity::entities(&rtx)?;
        let rel = entity::relates_to(&rtx)?;
        let mut nodes = Vec::new();
        let mut edges = Vec::new();
        let node_id = |s: &str, e: &str| format!("{s}/{e}");
        for (s, e, rank) in &members {
            if let Some(ent) = ents.get((s.as_str(), e.as_str()))? {
                nodes.push(GraphNode {
                    id: node_id(s, e),
                    node_type: "entity",
                    label: ent.name,
                    metadata: serde_json::json!({"entity_id": e, "space_id": s, "entity_type": ent.entity_type,
                                  "mention_count": ent.mention_count, "pagerank": rank}),
                });
            }
            for (b, weight) in entity::relates_of(&rel, s, e)? {
                if e.as_str() < b.as_str() && keep.contains(&(s.clone(), b.clone())) {
                    edges.push(GraphEdge {
                        source: node_id(s, e),
                        target: node_id(s, &b),
                        edge_type: "RELATES_TO",
                        weight,
                    });
                }
            }
        }
        drop((ents, rel, rtx));
        for m in c.top_memories.iter().take(top_memories) {
            let Ok(v) = self.store.memories().get(&m.memory_id, Some(&m.space_id)) else { continue };
            nodes.push(GraphNode {
                id: node_id(&m.space_id, &m.memory_id),
                node_type: "memory",
                label: memory_line(&v, 80),
                metadata: serde_json::json!({"memory_id": m.memory_id, "space_id": m.space_id,
                                             "entities_mentioned": m.entities_mentioned}),
            });
            for e in self.entities_of(&m.space_id, &m.memory_id)? {
                if keep.contains(&(m.space_id.clone(), e.id.clone())) {
                    edges.push(GraphEdge {
                        source: node_id(&m.space_id, &m.memory_id),
                        target: node_id(&m.space_id, &e.id),
                        edge_type: "MENTIONS",
                        weight: 1,
                    });
                }
            }
        }
        Ok(Subgraph { community_id: id, title: c.title, nodes, edges })
    }
}

impl Graph<'_> {
    /// The entity graph for drawing (the console's graph view): the `max_entities` most central entities (by
    /// PageRank, then mentions) of `space` (every space when None) as nodes, with their community and PageRank
    /// in `metadata`, and the heaviest RELATES_TO edges between them, at most `max_edges`. One read
    /// transaction; O(entities + edges) time, about 30 ms for 5,000 entities and 20,000 edges.
    ///
    /// # Errors
    /// Storage errors.
    pub fn entity_graph(&self, space: Option<&str>, max_entities: usize, max_edges: usize) -> Result<EntityGraph> {
        let rtx = self.store.core.db.read()?;
        let mut member: rustc_hash::FxHashMap<(String, String), (u64, f64)> = Default::default();
        graph::each_member(&rtx, |c, s, e, rank| {
            if space.is_none_or(|sp| sp == s) {
                member.insert((s.to_string(), e.to_string()), (c, rank));
            }
        })?;
        let ents = entity::entities(&rtx)?;
        let mut all: Vec<(String, Entity, Option<u64>, f64)> = Vec::new();
        let mut add = |s: &str, ent: Entity| {
            let (community, rank) =
                member.get(&(s.to_string(), ent.id.clone())).map_or((None, 0.0), |m| (Some(m.0), m.1));
            all.push((s.to_string(), ent, community, rank));
        };
        match space {
            Some(sp) => ents.each_in_space(sp, |_, ent| {
                add(sp, ent);
                true
            })?,
            None => ents.each(|s, _, ent| {
                add(s, ent);
                true
            })?,
        }
        let total_entities = all.len() as u64;
        all.sort_by(|a, b| {
            b.3.total_cmp(&a.3)
                .then_with(|| b.1.mention_count.cmp(&a.1.mention_count))
                .then_with(|| a.1.id.cmp(&b.1.id))
        });
        all.truncate(max_entities);
        let keep: rustc_hash::FxHashSet<(&str, &str)> =
            all.iter().map(|(s, e, ..)| (s.as_str(), e.id.as_str())).collect();
        let rel = entity::relates_to(&rtx)?;
        let mut edges = Vec::new();
        let mut total_edges = 0u64;
        for (s, e, ..) in &all {
            for (b, weight) in entity::relates_of(&rel, s, &e.id)? {
                if e.id < b && keep.contains(&(s.as_str(), b.as_str())) {
                    total_edges += 1;
                    edges.push(GraphEdge {
                        source: format!("{s}/{}", e.id),
                        target: format!("{s}/{b}"),
                        edge_type: "RELATES_TO",
                        weight,
                    });
                }
            }
        }
        edges.sort_by(|a, b| b.weight.cmp(&a.weight).then_with(|| (&a.source, &a.target).cmp(&(&b.source, &b.target))));
        edges.truncate(max_edges);
        let nodes = all
            .into_iter()
            .map(|(s, ent, community, rank)| GraphNode {
                id: format!("{s}/{}", ent.id),
                node_type: "entity",
                metadata: serde_json::json!({"entity_id": ent.id, "space_id": s, "entity_type": ent.entity_type,
                              "mention_count": ent.mention_count, "pagerank": rank, "community_id": community}),
                label: ent.name,
            })
            .collect();
        Ok(EntityGraph { nodes, edges, total_entities, total_edges })
    }
}

/// The entity graph of a space or the store (`store.graph().entity_graph()`).
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct EntityGraph {
    /// Entities, most central first; `metadata`: `entity_id`, `space_id`, `entity_type`, `mention_count`,
    /// `pagerank` (0..=1, 0 before the first graph recompute) and `community_id` (null outside communities).
    pub nodes: Vec<GraphNode>,
    /// RELATES_TO edges between the nodes, heaviest first.
    pub edges: Vec<GraphEdge>,
    /// Entities in the space (or store), drawn or not.
    pub total_entities: u64,
    /// RELATES_TO edges between the drawn entities, before the `max_edges` cut.
    pub total_edges: u64,
}

/// A community's subgraph for drawing (`store.graph().community_subgraph()`).
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct Subgraph {
    /// The community.
    pub community_id: u64,
    /// Its title.
    pub title: String,
    /// Entities (by PageRank), then memories.
    pub nodes: Vec<GraphNode>,
    /// RELATES_TO edges between the entities, MENTIONS edges from the memories.
    pub edges: Vec<GraphEdge>,
}

/// A node of a [`Subgraph`].
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct GraphNode {
    /// `<space>/<entity or memory id>`.
    pub id: String,
    /// `entity` or `memory`.
    pub node_type: &'static str,
    /// The entity's name, or the memory's first line.
    pub label: String,
    /// Entities: `entity_id`, `space_id`, `entity_type`, `mention_count`, `pagerank`; memories: `memory_id`,
    /// `space_id`, `entities_mentioned`.
    #[schema(value_type = Object)]
    pub metadata: serde_json::Value,
}

/// An edge of a [`Subgraph`].
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct GraphEdge {
    /// Node id.
    pub source: String,
    /// Node id.
    pub target: String,
    /// `RELATES_TO` or `MENTIONS`.
    pub edge_type: &'static str,
    /// Memories mentioning both entities (RELATES_TO), 1 (MENTIONS).
    pub weight: u64,
}
