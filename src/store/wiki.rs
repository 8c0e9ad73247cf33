//! Wiki pages: markdown with YAML frontmatter for entities, crystals and topics (communities), built from the
//! stored graph without a language model. Links go through a [`Linker`], so the same pages serve the HTTP
//! routes (links to other routes) and the ZIP exports (links to files in the bundle).

use crate::storage::Readable;
use std::fmt::Write as _;

use super::tables::*;
use super::{KnowledgeStore, MemoryView, StoredMemory, get_record, schema};
use crate::error::ErrorCode;
use crate::error::{Error, Result};
use crate::model::{Entity, MemoryState};

/// Where a page links to; None when the target is not part of the output (the label is then plain text).
pub trait Linker {
    /// The entity page of `e`.
    fn entity(&self, e: &Entity) -> Option<String>;
    /// The page of crystal `id` of `space`.
    fn crystal(&self, space: &str, id: &str) -> Option<String>;
    /// The page of community `id`.
    fn topic(&self, id: u64) -> Option<String>;
    /// Memory `id` of `space` (a page or a route).
    fn memory(&self, space: &str, id: &str) -> Option<String>;
}

/// `[label](target)`, or the label alone without a target.
pub fn link(label: &str, target: Option<String>) -> String {
    match target {
        Some(t) => format!("[{}]({t})", md_label(label)),
        None => md_label(label),
    }
}

/// Links to the HTTP routes (`/library/wiki-page/...`, `/memories/{id}`).
#[derive(Debug, Clone, Copy, Default)]
pub struct RouteLinker;

impl Linker for RouteLinker {
    fn entity(&self, e: &Entity) -> Option<String> {
        Some(format!("/library/wiki-page/entity/{}", encode_segment(&e.id)))
    }
    fn crystal(&self, _: &str, id: &str) -> Option<String> {
        Some(format!("/library/wiki-page/crystal/{}", encode_segment(id)))
    }
    fn topic(&self, id: u64) -> Option<String> {
        Some(format!("/library/wiki-page/topic/{id}"))
    }
    fn memory(&self, space: &str, id: &str) -> Option<String> {
        Some(format!("/memories/{}?space_id={}", encode_segment(id), encode_segment(space)))
    }
}

/// Percent-encodes everything but RFC 3986 unreserved characters, so ids with `#`, `?`, `/` or spaces stay
/// one path segment.
pub fn encode_segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The sentence of `text` that names `name` (without case), else its first sentence; at most `max` characters.
pub fn sentence_with(text: &str, name: &str, max: usize) -> String {
    let lower = name.to_lowercase();
    let flat = text.replace('\n', " ");
    let mut sentences = Vec::new();
    let mut start = 0;
    for (i, c) in flat.char_indices() {
        if matches!(c, '.' | '!' | '?') {
            let end = i + c.len_utf8();
            sentences.push(flat[start..end].trim().to_string());
            start = end;
        }
    }
    if start < flat.len() {
        sentences.push(flat[start..].trim().to_string());
    }
    let pick = sentences
        .iter()
        .find(|s| s.to_lowercase().contains(&lower))
        .or_else(|| sentences.iter().find(|s| !s.is_empty()))
        .cloned()
        .unwrap_or_default();
    let mut out: String = pick.chars().take(max).collect();
    if pick.chars().count() > max {
        out.push('…');
    }
    out
}

/// A YAML scalar: JSON string syntax is valid YAML, so every value is written as a JSON string or number.
pub fn yaml_str(s: &str) -> String {
    serde_json::Value::String(s.to_string()).to_string()
}

/// Escapes text for a markdown link label.
pub fn md_label(s: &str) -> String {
    s.replace('\\', "\\\\").replace('[', "\\[").replace(']', "\\]").replace('\n', " ")
}

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

fn date_of(v: &MemoryView) -> String {
    v.memory.event_start.clone().unwrap_or_else(|| v.memory.created_at.to_rfc3339().chars().take(10).collect())
}

fn not_found(kind: ErrorCode, what: &str) -> Error {
    Error::not_found(kind, format!("{what} not found"))
}

impl KnowledgeStore {
    /// The entity an id or a name refers to, across spaces: an entity id first (the most mentioned one when the
    /// id exists in several spaces), then a canonical name or alias compared without case.
    ///
    /// # Errors
    /// [`crate::ErrorKind::NotFound`] (`entity_not_found`).
    pub fn resolve_entity(&self, id_or_name: &str) -> Result<Entity> {
        let rtx = self.db.read()?;
        let t = rtx.table(ENTITIES)?;
        let lower = id_or_name.trim().to_lowercase();
        let mut by_id: Option<Entity> = None;
        let mut by_name: Option<Entity> = None;
        for row in t.iter()? {
            let (k, v) = row?;
            let (_, id) = k.value();
            let e: Entity = schema::decode(v.value())?;
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
        }
        by_id.or(by_name).ok_or_else(|| not_found(ErrorCode::EntityNotFound, &format!("entity '{id_or_name}'")))
    }

    /// Memories (not forgotten) mentioning entity `e`, newest event first, at most `limit`.
    ///
    /// # Errors
    /// Storage errors.
    pub fn entity_mentions(&self, e: &Entity, limit: usize) -> Result<Vec<MemoryView>> {
        let ids = self.entity_memory_ids(&e.space_id, &e.id)?;
        let mut views: Vec<MemoryView> = self
            .load_views(&e.space_id, ids.iter().map(String::as_str))?
            .into_iter()
            .filter(|v| v.memory.state != MemoryState::Forgotten)
            .collect();
        views.sort_by(|a, b| date_of(b).cmp(&date_of(a)).then_with(|| a.memory.id.cmp(&b.memory.id)));
        views.truncate(limit);
        Ok(views)
    }

    /// The crystals that cite memories mentioning entity `e`, or are about it.
    fn crystals_about(&self, e: &Entity) -> Result<Vec<MemoryView>> {
        let id = super::communities::crystal_id(&e.space_id, &e.id);
        Ok(self.get_memory(&id, Some(&e.space_id)).ok().into_iter().collect())
    }

    /// The wiki page of an entity (by id, or by canonical name without case): frontmatter (type, title, kind,
    /// space, mentions, community, aliases), a summary line, facts with dates, related entities as links, the
    /// crystal about it, and its mentions with their source memories (at most `mention_limit`).
    ///
    /// # Errors
    /// [`crate::ErrorKind::NotFound`] (`entity_not_found`).
    pub fn entity_page(&self, id_or_name: &str, mention_limit: usize, linker: &dyn Linker) -> Result<String> {
        let e = self.resolve_entity(id_or_name)?;
        self.entity_page_for(e, mention_limit, linker)
    }

    pub(crate) fn entity_page_for(&self, e: Entity, mention_limit: usize, linker: &dyn Linker) -> Result<String> {
        let mentions = self.entity_mentions(&e, mention_limit)?;
        let related = self.related_entities(&e.space_id, &e.id, 12)?;
        let community = self.entity_community(&e.space_id, &e.id)?;
        let mut s = String::new();
        let _ = writeln!(s, "---\ntype: Entity\ntitle: {}\nentity_id: {}", yaml_str(&e.name), yaml_str(&e.id));
        let _ = writeln!(s, "entity_type: {}\nspace_id: {}", yaml_str(&e.entity_type), yaml_str(&e.space_id));
        let _ = writeln!(s, "mention_count: {}", e.mention_count);
        if let Some(c) = community {
            let _ = writeln!(s, "community_id: {c}");
        }
        if !e.aliases.is_empty() {
            let _ = writeln!(s, "aliases: [{}]", e.aliases.iter().map(|a| yaml_str(a)).collect::<Vec<_>>().join(", "));
        }
        let _ = writeln!(
            s,
            "description: {}\n---\n",
            yaml_str(&format!("{} ({}) mentioned in {} memories", e.name, e.entity_type, e.mention_count))
        );
        let _ = writeln!(s, "# {}\n", e.name);
        let topic = match community.and_then(|c| self.get_community(c, 1).ok()) {
            Some((c, _)) => format!(" Part of the topic {}.", link(&c.title, linker.topic(c.id))),
            None => String::new(),
        };
        let first = mentions.last().map(date_of).unwrap_or_default();
        let last = mentions.first().map(date_of).unwrap_or_default();
        let _ = writeln!(
            s,
            "A {} mentioned in {} memories{}.{topic}\n",
            e.entity_type,
            e.mention_count,
            if first.is_empty() { String::new() } else { format!(" between {first} and {last}") }
        );
        if !e.description.is_empty() {
            let _ = writeln!(s, "{}\n", e.description);
        }
        let crystals = self.crystals_about(&e)?;
        if !crystals.is_empty() {
            let _ = writeln!(s, "## Crystal\n");
            for c in &crystals {
                let _ = writeln!(s, "* {}", link(&c.memory.title, linker.crystal(&c.memory.space_id, &c.memory.id)));
            }
            s.push('\n');
        }
        let _ = writeln!(s, "## Facts\n");
        let facts: Vec<&MemoryView> =
            mentions.iter().filter(|v| v.memory.state == MemoryState::Active).take(10).collect();
        if facts.is_empty() {
            let _ = writeln!(s, "No active memory mentions it.");
        }
        for v in facts {
            let _ = writeln!(s, "* **{}**: {}", date_of(v), sentence_with(&v.memory.content, &e.name, 240));
        }
        s.push('\n');
        if !related.is_empty() {
            let _ = writeln!(s, "## Related entities\n");
            for (r, w) in &related {
                let _ = writeln!(s, "* {} ({}, {w} shared memories)", link(&r.name, linker.entity(r)), r.entity_type);
            }
            s.push('\n');
        }
        let _ = writeln!(s, "## Mentions\n");
        for v in &mentions {
            let _ = writeln!(
                s,
                "* {} {}{}",
                date_of(v),
                link(&sentence_with(&v.memory.content, &e.name, 120), linker.memory(&v.memory.space_id, &v.memory.id)),
                if v.memory.state == MemoryState::Active {
                    String::new()
                } else {
                    format!(" ({})", v.memory.state.as_str())
                }
            );
        }
        Ok(s)
    }

    /// The wiki page of a crystal: frontmatter (type, title, sources with weights), its content, and its
    /// sources with their weights as links.
    ///
    /// # Errors
    /// [`crate::ErrorKind::NotFound`] (`crystal_not_found`).
    pub fn crystal_page(&self, crystal_id: &str, linker: &dyn Linker) -> Result<String> {
        let sources = self.crystal_sources(crystal_id, 100)?;
        let c = self.get_memory(crystal_id, None)?;
        let title = c.memory.crystal_title.clone().unwrap_or_else(|| c.memory.title.clone());
        let mut s = String::new();
        let _ = writeln!(s, "---\ntype: Crystal\ntitle: {}\ncrystal_id: {}", yaml_str(&title), yaml_str(crystal_id));
        let _ = writeln!(s, "space_id: {}\nsource_unit_count: {}", yaml_str(&c.memory.space_id), sources.len());
        let _ = writeln!(
            s,
            "generated:\n  by: {}\n  at: {}",
            yaml_str(&format!("engram/{}", env!("CARGO_PKG_VERSION"))),
            yaml_str(&c.memory.updated_at.to_rfc3339())
        );
        let _ = writeln!(s, "sources:");
        for (i, (v, w)) in sources.iter().enumerate() {
            let _ = writeln!(
                s,
                "  - id: \"{}\"\n    resource: {}\n    title: {}\n    contribution_weight: {:.4}",
                i + 1,
                yaml_str(&format!("engram://memory/{}", v.memory.id)),
                yaml_str(&memory_line(v, 80)),
                w
            );
        }
        let _ = writeln!(
            s,
            "description: {}\n---\n",
            yaml_str(&format!("What {} memories say about {title}", sources.len()))
        );
        let _ = writeln!(s, "# {title}\n");
        // The stored content cites sources as footnotes naming memory ids; the page lists them as links.
        let body: String = c.memory.content.lines().filter(|l| !l.starts_with("[^")).collect::<Vec<_>>().join("\n");
        let _ = writeln!(s, "{}\n", body.trim_end());
        let _ = writeln!(s, "## Sources\n");
        for (i, (v, w)) in sources.iter().enumerate() {
            let _ = writeln!(
                s,
                "[^{}]: {} ({}, weight {:.2})",
                i + 1,
                link(&memory_line(v, 100), linker.memory(&v.memory.space_id, &v.memory.id)),
                date_of(v),
                w
            );
        }
        Ok(s)
    }

    /// The wiki page of a topic (community): frontmatter, its extractive summary, its most central entities
    /// (at most `top`) as links, its crystals, and its representative memories.
    ///
    /// # Errors
    /// [`crate::ErrorKind::NotFound`] (`community_not_found`).
    pub fn topic_page(&self, community_id: u64, top: usize, linker: &dyn Linker) -> Result<String> {
        let (c, entities) = self.get_community(community_id, top)?;
        let mut s = String::new();
        let _ = writeln!(s, "---\ntype: Topic\ntitle: {}\ncommunity_id: {}", yaml_str(&c.title), c.id);
        let _ = writeln!(s, "entity_count: {}\nmemory_count: {}", c.entity_count, c.memory_count);
        let _ = writeln!(
            s,
            "description: {}\n---\n",
            yaml_str(&format!("Topic of {} entities: {}", c.entity_count, c.title))
        );
        let _ = writeln!(s, "# {}\n\n{}\n", c.title, c.summary);
        let _ = writeln!(s, "## Entities\n");
        for ce in &entities {
            if let Ok(e) = self.get_entity(&ce.space_id, &ce.entity_id) {
                let _ = writeln!(
                    s,
                    "* {} ({}, {} mentions)",
                    link(&e.name, linker.entity(&e)),
                    e.entity_type,
                    e.mention_count
                );
            }
        }
        s.push('\n');
        let crystals: Vec<MemoryView> = entities
            .iter()
            .filter_map(|ce| {
                self.get_memory(&super::communities::crystal_id(&ce.space_id, &ce.entity_id), Some(&ce.space_id)).ok()
            })
            .collect();
        if !crystals.is_empty() {
            let _ = writeln!(s, "## Crystals\n");
            for v in &crystals {
                let _ = writeln!(s, "* {}", link(&v.memory.title, linker.crystal(&v.memory.space_id, &v.memory.id)));
            }
            s.push('\n');
        }
        let _ = writeln!(s, "## Representative memories\n");
        for m in &c.top_memories {
            let _ = writeln!(s, "* {}", link(&m.title, linker.memory(&m.space_id, &m.memory_id)));
        }
        Ok(s)
    }

    /// Memories (not forgotten) mentioning any entity of community `id`, most recent first, at most `limit`.
    ///
    /// # Errors
    /// [`crate::ErrorKind::NotFound`] (`community_not_found`).
    pub fn community_recent_memories(&self, id: u64, limit: usize) -> Result<Vec<MemoryView>> {
        self.get_community(id, 1)?;
        let members = self.community_members(id)?;
        let rtx = self.db.read()?;
        let em = rtx.table(ENTITY_MEMORIES)?;
        let mems = rtx.table(MEMORIES)?;
        let mut seen = rustc_hash::FxHashSet::default();
        let mut found: Vec<(String, crate::model::Memory)> = Vec::new();
        for (space, e, _) in &members {
            for m in super::range_prefix3(&em, space, e)? {
                if seen.insert((space.clone(), m.clone()))
                    && let Some(sm) = get_record::<_, StoredMemory>(&mems, (space.as_str(), m.as_str()))?
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
            if let Ok(v) = self.get_memory(&m.id, Some(&space)) {
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
        self.get_community(id, 1)?;
        let members = self.community_members(id)?;
        let rtx = self.db.read()?;
        let rel = rtx.table(RELATES_TO)?;
        let ec = rtx.table(ENTITY_COMMUNITY)?;
        let mut counts: std::collections::BTreeMap<u64, u64> = Default::default();
        for (space, e, _) in &members {
            for row in rel.range((space.as_str(), e.as_str(), "")..)? {
                let (k, _) = row?;
                let (s, a, b) = k.value();
                if s != space || a != e {
                    break;
                }
                if let Some(c) = ec.get((s, b))?.map(|v| v.value())
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
            if let Ok((community, _)) = self.get_community(c, 1) {
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
    pub fn community_subgraph(&self, id: u64, max_entities: usize, top_memories: usize) -> Result<serde_json::Value> {
        let (c, _) = self.get_community(id, 1)?;
        let members: Vec<(String, String, f64)> = self.community_members(id)?.into_iter().take(max_entities).collect();
        let keep: rustc_hash::FxHashSet<(String, String)> =
            members.iter().map(|(s, e, _)| (s.clone(), e.clone())).collect();
        let rtx = self.db.read()?;
        let ents = rtx.table(ENTITIES)?;
        let rel = rtx.table(RELATES_TO)?;
        let mut nodes = Vec::new();
        let mut edges = Vec::new();
        let node_id = |s: &str, e: &str| format!("{s}/{e}");
        for (s, e, rank) in &members {
            if let Some(ent) = get_record::<_, Entity>(&ents, (s.as_str(), e.as_str()))? {
                nodes.push(serde_json::json!({
                    "id": node_id(s, e), "node_type": "entity", "label": ent.name,
                    "metadata": {"entity_id": e, "space_id": s, "entity_type": ent.entity_type,
                                  "mention_count": ent.mention_count, "pagerank": rank}
                }));
            }
            for row in rel.range((s.as_str(), e.as_str(), "")..)? {
                let (k, v) = row?;
                let (s2, a, b) = k.value();
                if s2 != s || a != e {
                    break;
                }
                if a < b && keep.contains(&(s.clone(), b.to_string())) {
                    edges.push(serde_json::json!({
                        "source": node_id(s, a), "target": node_id(s, b), "edge_type": "RELATES_TO", "weight": v.value()
                    }));
                }
            }
        }
        drop((ents, rel, rtx));
        for m in c.top_memories.iter().take(top_memories) {
            let Ok(v) = self.get_memory(&m.memory_id, Some(&m.space_id)) else { continue };
            nodes.push(serde_json::json!({
                "id": node_id(&m.space_id, &m.memory_id), "node_type": "memory", "label": memory_line(&v, 80),
                "metadata": {"memory_id": m.memory_id, "space_id": m.space_id, "entities_mentioned": m.entities_mentioned}
            }));
            for e in self.memory_entities(&m.space_id, &m.memory_id)? {
                if keep.contains(&(m.space_id.clone(), e.id.clone())) {
                    edges.push(serde_json::json!({
                        "source": node_id(&m.space_id, &m.memory_id), "target": node_id(&m.space_id, &e.id),
                        "edge_type": "MENTIONS", "weight": 1
                    }));
                }
            }
        }
        Ok(serde_json::json!({"community_id": id, "title": c.title, "nodes": nodes, "edges": edges}))
    }
}
