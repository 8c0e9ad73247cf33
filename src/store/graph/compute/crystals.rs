//! Crystals: per community, an extractive memory about each of its most central entities, citing the memories
//! that mention it (planned after each graph computation, written in its transaction).

use super::*;
use crate::store::graph::Graph;

/// Fewest source memories of a crystal.
pub const MIN_CRYSTAL_SOURCES: usize = 3;
/// Most source memories cited by one crystal.
pub const MAX_CRYSTAL_SOURCES: usize = 8;
/// Entities mentioned by more memories than this are too general to crystallise (speakers, hubs).
pub const MAX_CRYSTAL_MENTIONS: usize = 60;
/// Crystals per community, most central entities first.
pub const CRYSTALS_PER_COMMUNITY: usize = 3;

/// A crystal to write: the entity it is about and its sources with contribution weights (summing to 1).
pub(super) struct CrystalPlan {
    community: u64,
    entity: Entity,
    sources: Vec<(String, f64, crate::model::Memory)>,
}

/// The id of the crystal about entity `entity_id` of `space`.
pub fn crystal_id(space: &str, entity_id: &str) -> String {
    format!("crystal-{space}-{entity_id}")
}

/// The crystal memory of a plan: extractive, one line per source with a footnote naming it.
fn crystal_memory(p: &CrystalPlan, now: Timestamp) -> crate::model::Memory {
    let e = &p.entity;
    let mut body = format!("What {} memories say about {}:\n\n", p.sources.len(), e.name);
    let mut notes = String::new();
    let mut seen = rustc_hash::FxHashSet::default();
    for (i, (id, _, m)) in p.sources.iter().enumerate() {
        let line = first_words(&m.content.replace('\n', " "), 240);
        if !seen.insert(line.clone()) {
            continue;
        }
        let when = m.event_start.clone().unwrap_or_else(|| m.created_at.to_rfc3339().chars().take(10).collect());
        body.push_str(&format!("- {line} [^{}]\n", i + 1));
        notes.push_str(&format!("[^{}]: memory `{id}` ({when})\n", i + 1));
    }
    body.push('\n');
    body.push_str(&notes);
    let mut m = crate::model::Memory::with_defaults(crystal_id(&e.space_id, &e.id), e.space_id.clone(), body, now);
    m.title = e.name.clone();
    m.crystal_title = Some(e.name.clone());
    m.is_crystal = true;
    m.source_unit_count = Some(p.sources.len() as i64);
    m.extraction_method = "crystal".into();
    m.source = "engram:crystal".into();
    m.importance = p.sources.iter().map(|s| s.2.importance).fold(0.0, f64::max);
    m.metadata.0.insert("crystal_entity_id".into(), e.id.clone().into());
    m.metadata.0.insert("crystal_entity_type".into(), e.entity_type.clone().into());
    m
}

/// Crystals to write: per community, up to [`CRYSTALS_PER_COMMUNITY`] of its most central named entities with
/// enough mentions, each with its best source memories and their weights (summing to 1).
pub(super) fn crystal_plans(
    groups: &[Vec<u32>],
    ids: &[u64],
    g: &GraphInput,
    r: &Ranks,
    mems: &crate::store::records::memory::MemoryRecords<
        impl Readable<crate::store::records::K2, crate::store::records::Bytes>,
    >,
) -> Result<Vec<CrystalPlan>> {
    let (entities, mentions_of, entities_of, memory_nodes) =
        (&g.entities, &g.mentions_of, &g.entities_of, &g.memory_nodes);
    let (rank, top_memory, e_count) = (&r.rank, r.top_memory, g.entities.len());
    let mut plans: Vec<CrystalPlan> = Vec::new();
    for (g, cid) in groups.iter().zip(ids) {
        let in_community: rustc_hash::FxHashSet<u32> = g.iter().copied().collect();
        let mut members = g.clone();
        members.sort_by(|a, b| rank[*b as usize].total_cmp(&rank[*a as usize]).then(a.cmp(b)));
        for m in members {
            if plans.iter().filter(|p| p.community == *cid).count() >= CRYSTALS_PER_COMMUNITY {
                break;
            }
            let e = &entities[m as usize];
            let named = matches!(e.entity_type.as_str(), "person" | "organization" | "location" | "product");
            let sources = &mentions_of[m as usize];
            if !named || sources.len() < MIN_CRYSTAL_SOURCES || sources.len() > MAX_CRYSTAL_MENTIONS {
                continue;
            }
            let mut scored: Vec<(u32, usize)> = sources
                .iter()
                .map(|mi| (*mi, entities_of.get(*mi).iter().filter(|x| in_community.contains(x)).count()))
                .collect();
            scored.sort_by(|a, b| {
                b.1.cmp(&a.1)
                    .then(rank[e_count + b.0 as usize].total_cmp(&rank[e_count + a.0 as usize]))
                    .then(memory_nodes.key(a.0).1.cmp(memory_nodes.key(b.0).1))
            });
            scored.truncate(MAX_CRYSTAL_SOURCES);
            let raw: Vec<f64> =
                scored.iter().map(|(mi, n)| *n as f64 + rank[e_count + *mi as usize] / top_memory).collect();
            let sum: f64 = raw.iter().sum::<f64>().max(f64::MIN_POSITIVE);
            let mut sources = Vec::with_capacity(scored.len());
            // The sources' records in one batch (one statement on PostgreSQL).
            let keys = node_keys(memory_nodes, scored.iter().map(|(mi, _)| *mi));
            for ((sp_id, w), sm) in keys.iter().zip(&raw).zip(mems.get_many(&keys)?) {
                let Some(sm) = sm else { continue };
                sources.push((sp_id.1.to_string(), w / sum, sm.memory));
            }
            plans.push(CrystalPlan { community: *cid, entity: e.clone(), sources });
        }
    }
    Ok(plans)
}

/// Writes the planned crystals (unchanged ones are left alone) and removes crystals no longer planned.
/// Returns how many crystals were written or removed.
pub(super) fn write_crystals(
    ctx: &Ctx,
    txn: &crate::storage::WriteTx,
    plans: &[CrystalPlan],
    now: Timestamp,
    ops: &mut Vec<crate::store::IndexOp>,
) -> Result<u64> {
    let existing = graph::all_crystal_sources(txn)?;
    let base = meta::alloc_docnos(txn, plans.len() as u64)?;
    let mut t = crate::store::memories::MemoryWrite::open(txn)?;
    let mut cs = graph::crystal_sources(txn)?;
    let mut changed = 0u64;
    let mut wanted: rustc_hash::FxHashSet<(String, String)> = Default::default();
    for (i, p) in plans.iter().enumerate() {
        let memory = crystal_memory(p, now);
        let key = (memory.space_id.clone(), memory.id.clone());
        wanted.insert(key.clone());
        let mut sources: Vec<(String, f64)> = p.sources.iter().map(|(id, w, _)| (id.clone(), *w)).collect();
        sources.sort_by(|a, b| a.0.cmp(&b.0));
        let same_content = match t.memories.get(&key.0, &key.1)? {
            Some(v) => v.memory.content == memory.content,
            None => false,
        };
        let same_sources = existing.get(&key).is_some_and(|old| {
            old.len() == sources.len() && old.iter().zip(&sources).all(|(a, b)| a.0 == b.0 && (a.1 - b.1).abs() < 1e-9)
        });
        if same_content && same_sources {
            continue;
        }
        for (m, _) in existing.get(&key).into_iter().flatten() {
            cs.remove((key.0.as_str(), key.1.as_str(), m.as_str()))?;
        }
        for (m, w) in &sources {
            cs.put((key.0.as_str(), key.1.as_str(), m.as_str()), *w)?;
        }
        if !same_content {
            crate::store::memories::write_derived(
                &*ctx.embedder,
                &mut t,
                memory,
                Default::default(),
                base + i as u64,
                now,
                ops,
            )?;
        }
        changed += 1;
    }
    for (key, rows) in &existing {
        if wanted.contains(key) {
            continue;
        }
        for (m, _) in rows {
            cs.remove((key.0.as_str(), key.1.as_str(), m.as_str()))?;
        }
        crate::store::memories::remove_derived(&mut t, &key.0, &key.1, now, ops)?;
        changed += 1;
    }
    Ok(changed)
}

impl Graph<'_> {
    /// The source memories of crystal `crystal_id` with their contribution weights (summing to 1), heaviest
    /// first, at most `limit`. Sources forgotten since the last computation are left out.
    ///
    /// # Errors
    /// [`crate::ErrorKind::NotFound`] (`crystal_not_found`) when there is no such crystal.
    pub fn crystal_sources(&self, crystal_id: &str, limit: usize) -> Result<Vec<(crate::store::MemoryView, f64)>> {
        let not_found = || Error::not_found(ErrorCode::CrystalNotFound, format!("crystal '{crystal_id}' not found"));
        let view = self.store.memories().get(crystal_id, None).map_err(|_| not_found())?;
        if !view.memory.is_crystal {
            return Err(not_found());
        }
        let space = view.memory.space_id.clone();
        let rows = graph::crystal_sources_of(&self.store.core.db.read()?, &space, crystal_id)?;
        let mut out = Vec::new();
        for (id, w) in rows {
            if let Ok(v) = self.store.memories().get(&id, Some(&space)) {
                out.push((v, w));
            }
        }
        out.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.memory.id.cmp(&b.0.memory.id)));
        out.truncate(limit);
        Ok(out)
    }
}
