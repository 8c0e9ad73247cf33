//! The knowledge graph derived from entities: communities (Louvain over the global RELATES_TO graph, stable
//! integer ids) with titles and extractive summaries, and PageRank over the entity and memory graph
//! (`pagerank_score` of memories, a small ranking signal). Computed off the write path by a background worker
//! once writes pause, or on demand with [`Graph::recompute`](crate::store::Graph::recompute). See docs/api.md "Communities".

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::storage::Readable;
use parking_lot::RwLock;
use rustc_hash::FxHashMap;

use crate::error::ErrorCode;
use crate::error::{Error, Result};
use crate::graph::{louvain, pagerank, stable_ids};
pub use crate::model::{Community, CommunityEntity, CommunityMemory, GraphReport};
use crate::model::{Entity, MemoryState, Timestamp};
use crate::store::core::Core;
use crate::store::core::ranks::{GraphState, SpaceRanks};
use crate::store::records::graph;
use crate::store::{entity, memory, meta};

/// Most entities kept on a community record (the members table has all of them).
pub const TOP_ENTITIES: usize = 50;
/// Representative memories kept on a community record.
pub const TOP_MEMORIES: usize = 10;
/// Quiet time after the last write before the worker recomputes.
const DEBOUNCE: Duration = Duration::from_secs(2);
/// After a background recompute that took `T`, the next one waits until `REST_FACTOR · T` has passed, so that
/// under sustained writes the worker takes at most about 1 / (1 + `REST_FACTOR`) of one core (at 1,000,000
/// memories a recompute reads every mention and takes 10-18 s, and batches of writes pause often enough for it
/// to run back to back). [`Graph::wait`](crate::store::Graph::wait) cuts the rest short.
const REST_FACTOR: u32 = 4;

/// What the worker needs.
pub(crate) struct Ctx {
    pub db: Arc<crate::storage::Db>,
    /// The store's write path.
    pub writes: Arc<crate::store::core::write::Writes>,
    pub graph: Arc<RwLock<GraphState>>,
    /// For writing crystals.
    pub embedder: Arc<dyn crate::embed::Embedder>,
    /// The change feed (publishes the recompute's crystal and PageRank changes; claims the recompute).
    pub feed: Arc<crate::store::core::feed::Feed>,
    /// Bulk loads running in this process ([`Admin::bulk_load`](crate::store::Admin::bulk_load)): the worker waits for them to end.
    pub bulk_loads: Arc<std::sync::atomic::AtomicUsize>,
    /// False in the database index mode: the recompute reads every memory's entity edges into memory, which a
    /// daemon that keeps no per-memory index leaves to the daemons that do (the worker does not run it; an
    /// explicit [`Graph::recompute`](crate::store::Graph::recompute) does, and keeps no PageRank table in memory after it).
    pub recompute: bool,
}

impl Ctx {
    /// What the worker needs of the store's runtime `core`.
    pub(crate) fn of(core: &Core) -> Ctx {
        Ctx {
            db: core.db.clone(),
            writes: core.writes.clone(),
            graph: core.graph.clone(),
            embedder: core.config.embedder.clone(),
            feed: core.feed.clone(),
            bulk_loads: core.bulk_loads.clone(),
            recompute: core.reads.in_memory(),
        }
    }
}

/// Starts the background recomputation: woken after writes, it runs once writes pause.
pub(crate) fn start_worker(ctx: Ctx) -> crate::store::core::worker::Worker {
    crate::store::core::worker::Worker::spawn("engram-communities", move |c| {
        let mut rest_until: Option<Instant> = None;
        while !c.stopped() {
            c.wait(Duration::from_secs(5));
            if c.stopped() {
                break;
            }
            if !ctx.recompute {
                continue;
            }
            let demanded = ctx.graph.read().demanded.swap(false, std::sync::atomic::Ordering::AcqRel);
            if let Some(until) = rest_until.filter(|u| !demanded && Instant::now() < *u) {
                c.wait(until.saturating_duration_since(Instant::now()).min(Duration::from_secs(5)));
                c.wake();
                continue;
            }
            // Wait for writes to pause, then recompute if anything changed since the last run.
            let Ok((g0, _)) = generations(&ctx.db) else { continue };
            if !c.sleep(DEBOUNCE) {
                break;
            }
            let Ok((g1, done)) = generations(&ctx.db) else { continue };
            if ctx.bulk_loads.load(std::sync::atomic::Ordering::Acquire) > 0 {
                continue;
            }
            if g1 != g0 {
                c.wake();
                continue;
            }
            if done == Some(g1) {
                continue;
            }
            // One process recomputes each generation: the others skip while it holds the claim, and find the
            // generation done once it committed.
            let claim = match ctx.db.claim("graph") {
                Ok(Some(claim)) => claim,
                Ok(None) => continue,
                Err(e) => {
                    tracing::debug!(error = %e.chain(), "claiming the graph recompute failed");
                    continue;
                }
            };
            if graph_generation(&ctx.db).unwrap_or(None) == Some(g1) {
                continue;
            }
            // The claim is released as soon as the recompute committed.
            let started = Instant::now();
            let result = {
                let _claim = claim;
                recompute(&ctx, &|| c.stopped())
            };
            rest_until = Some(Instant::now() + started.elapsed() * REST_FACTOR);
            if let Err(e) = result {
                tracing::warn!(error = %e.chain(), "community detection failed; will retry after the next write");
            }
        }
    })
}

/// The (space, memory id) keys of memory nodes `nodes` (indices into `memory_nodes`), in their order.
fn node_keys(memory_nodes: &MemoryNodes, nodes: impl Iterator<Item = u32>) -> Vec<(&str, &str)> {
    nodes.map(|i| memory_nodes.key(i)).collect()
}

/// The store's generation and the generation its stored graph was computed at (None before the first), in
/// one read.
pub(super) fn generations(db: &crate::storage::Db) -> Result<(u64, Option<u64>)> {
    let rtx = db.read()?;
    let g = meta::meta(&rtx)?.u64_many(&["generation", "graph_generation"])?;
    Ok((g.first().copied().flatten().unwrap_or(0), g.get(1).copied().flatten()))
}

fn graph_generation(db: &crate::storage::Db) -> Result<Option<u64>> {
    let rtx = db.read()?;
    meta::meta(&rtx)?.u64("graph_generation")
}

fn first_words(s: &str, max: usize) -> String {
    let t = s.trim();
    if t.chars().count() <= max {
        return t.to_string();
    }
    let cut: String = t.chars().take(max).collect();
    match cut.rfind(' ') {
        Some(i) if i > max / 2 => format!("{}…", &cut[..i]),
        _ => format!("{cut}…"),
    }
}

/// PageRank of every node, scaled separately for entities and memories so that each kind's top node is 1.
struct Ranks {
    rank: Vec<f64>,
    /// Top entity rank (divide by it to scale).
    top: f64,
    /// Top memory rank.
    top_memory: f64,
}

impl Ranks {
    fn entity(&self, i: u32) -> f64 {
        self.rank[i as usize] / self.top
    }
}

/// The community record of one group (members by entity index): title from its most central named entities,
/// a summary, its top entities and representative memories.
fn community_record(
    id: u64,
    group: &[u32],
    g: &GraphInput,
    r: &Ranks,
    mems: &crate::store::records::memory::MemoryRecords<
        impl Readable<crate::store::records::K2, crate::store::records::Bytes>,
    >,
    now: Timestamp,
) -> Result<Community> {
    let (entities, mentions_of, memory_nodes) = (&g.entities, &g.mentions_of, &g.memory_nodes);
    let (rank, top, e_count) = (&r.rank, r.top, g.entities.len());
    let mut members: Vec<u32> = group.to_vec();
    members.sort_by(|a, b| rank[*b as usize].total_cmp(&rank[*a as usize]).then(a.cmp(b)));
    let named = |i: &&u32| {
        matches!(entities[**i as usize].entity_type.as_str(), "person" | "organization" | "location" | "product")
    };
    let mut title_from: Vec<&u32> = members.iter().filter(named).take(3).collect();
    if title_from.is_empty() {
        title_from = members.iter().take(3).collect();
    }
    let title = title_from.iter().map(|i| entities[**i as usize].name.clone()).collect::<Vec<_>>().join(", ");
    let mut per_memory: FxHashMap<u32, u64> = FxHashMap::default();
    for m in &members {
        for mi in &mentions_of[*m as usize] {
            *per_memory.entry(*mi).or_default() += 1;
        }
    }
    let mut reps: Vec<(u32, u64)> = per_memory.iter().map(|(k, v)| (*k, *v)).collect();
    reps.sort_by(|a, b| {
        b.1.cmp(&a.1).then(rank[e_count + b.0 as usize].total_cmp(&rank[e_count + a.0 as usize])).then(a.0.cmp(&b.0))
    });
    let mut top_memories = Vec::new();
    // The top memories' records in one batch (one statement on PostgreSQL).
    let picked: Vec<&(u32, u64)> = reps.iter().take(TOP_MEMORIES).collect();
    let keys = node_keys(memory_nodes, picked.iter().map(|(mi, _)| *mi));
    for ((mi, n), sm) in picked.into_iter().zip(mems.get_many(&keys)?) {
        let (s, m) = memory_nodes.key(*mi);
        let Some(sm) = sm else { continue };
        let t = if sm.memory.title.is_empty() { &sm.memory.content } else { &sm.memory.title };
        top_memories.push(CommunityMemory {
            memory_id: m.to_string(),
            space_id: s.to_string(),
            title: first_words(t, 120),
            entities_mentioned: *n,
        });
    }
    let mut kinds: BTreeMap<&str, usize> = BTreeMap::new();
    let mut spaces: Vec<String> = Vec::new();
    for m in &members {
        let e = &entities[*m as usize];
        *kinds.entry(e.entity_type.as_str()).or_default() += 1;
        if !spaces.contains(&e.space_id) {
            spaces.push(e.space_id.clone());
        }
    }
    spaces.sort();
    let kinds_text = kinds.iter().map(|(k, n)| format!("{n} {k}")).collect::<Vec<_>>().join(", ");
    let central = members.iter().take(5).map(|i| entities[*i as usize].name.clone()).collect::<Vec<_>>().join(", ");
    let quotes = top_memories.iter().take(3).map(|m| format!("\"{}\"", first_words(&m.title, 100))).collect::<Vec<_>>();
    let summary = format!(
        "{} entities ({kinds_text}) mentioned in {} memories. Most central: {central}.{}",
        members.len(),
        per_memory.len(),
        if quotes.is_empty() { String::new() } else { format!(" Representative: {}.", quotes.join("; ")) }
    );
    Ok(Community {
        id,
        title,
        summary,
        entity_count: members.len() as u64,
        memory_count: per_memory.len() as u64,
        spaces,
        weight: members.iter().map(|i| rank[*i as usize] / top).sum(),
        top_entities: members
            .iter()
            .take(TOP_ENTITIES)
            .map(|i| {
                let e = &entities[*i as usize];
                CommunityEntity {
                    entity_id: e.id.clone(),
                    space_id: e.space_id.clone(),
                    name: e.name.clone(),
                    entity_type: e.entity_type.clone(),
                    mention_count: e.mention_count,
                    pagerank: rank[*i as usize] / top,
                }
            })
            .collect(),
        top_memories,
        updated_at: now,
    })
}

/// Reads the graph, runs Louvain and PageRank, and replaces the stored results. `stop` aborts between
/// stages.
pub(crate) fn recompute(ctx: &Ctx, stopped: &dyn Fn() -> bool) -> Result<GraphReport> {
    let started = Instant::now();
    let out = recompute_from(ctx, stopped, started);
    if out.is_ok() {
        crate::metrics::global().graph_recompute.observe(started.elapsed().as_secs_f64());
    }
    out
}

fn recompute_from(ctx: &Ctx, stopped: &dyn Fn() -> bool, started: Instant) -> Result<GraphReport> {
    let rtx = ctx.db.read()?;
    let gen_seen = meta::meta(&rtx)?.u64("generation")?.unwrap_or(0);
    let mut g = read_graph(&rtx)?;
    if stopped() {
        return Err(Error::new(crate::ErrorKind::Internal, "stopped"));
    }
    let e_count = g.entities.len();
    let partition = louvain(e_count, &g.edges, 1.0);
    // RELATES_TO edges, then MENTIONS edges (moved: not read again).
    let mut all_edges = std::mem::take(&mut g.mention_edges);
    all_edges.splice(0..0, g.edges.iter().copied());
    let rank = pagerank(e_count + g.memory_nodes.len(), &all_edges, 0.85);
    drop(all_edges);
    let memory_nodes = &g.memory_nodes;
    // Entities and memories are scaled separately, each so that its top node is 1.
    let top = rank[..e_count].iter().copied().fold(0.0f64, f64::max).max(f64::MIN_POSITIVE);
    let top_memory = rank[e_count..].iter().copied().fold(0.0f64, f64::max).max(f64::MIN_POSITIVE);
    let r = Ranks { rank, top, top_memory };
    let rank = &r.rank;

    // Group members; communities of one entity are not kept.
    let mut groups: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    for (i, c) in partition.community.iter().enumerate() {
        groups.entry(*c).or_default().push(i as u32);
    }
    let groups: Vec<Vec<u32>> = groups.into_values().filter(|grp| grp.len() >= 2).collect();
    let keys: Vec<Vec<(String, String)>> = groups
        .iter()
        .map(|grp| {
            grp.iter().map(|i| (g.entities[*i as usize].space_id.clone(), g.entities[*i as usize].id.clone())).collect()
        })
        .collect();
    let (old, old_sizes, next_id) = {
        let old: FxHashMap<(String, String), u64> = graph::entity_communities(&rtx)?;
        let mut sizes: FxHashMap<u64, usize> = FxHashMap::default();
        for c in old.values() {
            *sizes.entry(*c).or_default() += 1;
        }
        (old, sizes, meta::meta(&rtx)?.u64("next_community_id")?.unwrap_or(1))
    };
    let (ids, next_id) = stable_ids(&keys, &old, &old_sizes, next_id);
    let now = Timestamp::now();
    let mems = memory::memories(&rtx)?;
    let communities = groups
        .iter()
        .zip(&ids)
        .map(|(grp, id)| community_record(*id, grp, &g, &r, &mems, now))
        .collect::<Result<Vec<Community>>>()?;
    let plans = crystal_plans(&groups, &ids, &g, &r, &mems)?;
    drop(mems);
    drop(rtx);
    if stopped() {
        return Err(Error::new(crate::ErrorKind::Internal, "stopped"));
    }
    let mut report = GraphReport {
        entities: e_count as u64,
        edges: g.edges.len() as u64,
        memories: memory_nodes.len() as u64,
        communities: communities.len() as u64,
        modularity: partition.modularity,
        crystals: plans.len() as u64,
        crystals_changed: 0,
        elapsed_ms: started.elapsed().as_secs_f64() * 1000.0,
        generation: gen_seen,
    };
    // Store: replace every derived row. Not a user write: the generation counter is left alone (unless
    // crystals changed).
    // Not a change of knowledge: the generation is bumped here only when crystals changed.
    let changed = ctx.writes.write(crate::store::core::write::Commit::BOOKKEEPING, |txn, ops| {
        {
            let mut ct = graph::communities(txn)?;
            ct.clear()?;
            let mut members_t = graph::community_members(txn)?;
            members_t.clear()?;
            let mut ec = graph::entity_community(txn)?;
            ec.clear()?;
            for ((c, g), k) in communities.iter().zip(&groups).zip(&keys) {
                ct.put(c.id, c)?;
                for (i, (s, e)) in g.iter().zip(k) {
                    ec.put((s.as_str(), e.as_str()), c.id)?;
                    members_t.put((c.id, s.as_str(), e.as_str()), r.entity(*i))?;
                }
            }
            let mut pr = graph::memory_pagerank(txn)?;
            pr.clear()?;
            for (mi, key) in memory_nodes.iter().enumerate() {
                pr.put(key, rank[e_count + mi] / top_memory)?;
            }
        }
        let changed = write_crystals(ctx, txn, &plans, now, ops)?;
        {
            let mut meta = meta::meta(txn)?;
            meta.put_u64("next_community_id", next_id)?;
            // Crystal changes are writes: they bump the generation. The graph is current when nobody else
            // wrote since the snapshot; otherwise the old generation is kept so that the worker runs again.
            let current = meta.u64("generation")?.unwrap_or(0);
            let done = if changed > 0 {
                meta.put_u64("generation", current + 1)?;
                if current == gen_seen { current + 1 } else { gen_seen }
            } else {
                gen_seen
            };
            meta.put_u64("graph_generation", done)?;
        }
        let mut report = report.clone();
        report.crystals_changed = changed;
        // The report is shared: every process sharing the database serves it (`load_graph_state`).
        meta::meta(txn)?.put_json("graph_report", &report)?;
        ctx.feed.publish(txn, crate::store::core::feed::ChangeOut::Ranks)?;
        Ok(changed)
    })?;
    report.crystals_changed = changed;
    let mut memory_rank: HashMap<String, SpaceRanks> = HashMap::new();
    for (mi, (s, m)) in memory_nodes.iter().enumerate() {
        if !memory_rank.contains_key(s) {
            memory_rank.insert(s.to_string(), SpaceRanks::default());
        }
        if let Some(r) = memory_rank.get_mut(s) {
            r.insert(m, (rank[e_count + mi] / top_memory) as f32);
        }
    }
    let mut g = ctx.graph.write();
    if ctx.recompute {
        g.memory_rank = memory_rank;
    }
    g.last = Some(report.clone());
    tracing::info!(
        entities = report.entities,
        edges = report.edges,
        communities = report.communities,
        ms = report.elapsed_ms,
        generation = report.generation,
        "communities and PageRank recomputed"
    );
    Ok(report)
}

mod crystals;
mod input;
pub use crystals::crystal_id;
use crystals::{crystal_plans, write_crystals};
use input::{GraphInput, MemoryNodes, read_graph};
