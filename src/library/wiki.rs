//! Wiki pages: markdown with YAML frontmatter for entities, crystals and topics (communities), built from the
//! stored graph without a language model. The pages read the store through its public queries; links go
//! through a [`Linker`].

use std::fmt::Write as _;

use super::links::{Linker, link};
use super::markdown::{sentence_with, yaml_str};
use crate::error::Result;
use crate::model::{Entity, MemoryState};
use crate::store::{Graph, MemoryView, date_of, memory_line};

impl Graph<'_> {
    /// The wiki page of an entity (by id, or by canonical name without case): frontmatter (type, title, kind,
    /// space, mentions, community, aliases), a summary line, facts with dates, related entities as links, the
    /// crystal about it, and its mentions with their source memories (at most `mention_limit`).
    ///
    /// # Errors
    /// [`crate::ErrorKind::NotFound`] (`entity_not_found`).
    pub fn entity_page(&self, id_or_name: &str, mention_limit: usize, linker: &dyn Linker) -> Result<String> {
        let e = self.store.graph().resolve_entity(id_or_name)?;
        self.entity_page_for(e, mention_limit, linker)
    }

    pub(crate) fn entity_page_for(&self, e: Entity, mention_limit: usize, linker: &dyn Linker) -> Result<String> {
        let mentions = self.store.graph().entity_mentions(&e, mention_limit)?;
        let related = self.store.graph().related_entities(&e.space_id, &e.id, 12)?;
        let community = self.store.graph().entity_community(&e.space_id, &e.id)?;
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
        let topic = match community.and_then(|c| self.store.graph().community(c, 1).ok()) {
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
        let crystals = self.store.graph().crystals_about(&e)?;
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
        let sources = self.store.graph().crystal_sources(crystal_id, 100)?;
        let c = self.store.memories().get(crystal_id, None)?;
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
        let (c, entities) = self.store.graph().community(community_id, top)?;
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
            if let Ok(e) = self.store.graph().entity(&ce.space_id, &ce.entity_id) {
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
                self.store
                    .memories()
                    .get(&crate::store::crystal_id(&ce.space_id, &ce.entity_id), Some(&ce.space_id))
                    .ok()
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
}
