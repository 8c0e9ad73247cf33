//! Retrieval evaluation on LoCoMo (Maharana et al., "Evaluating Very Long-Term Conversational Memory of LLM
//! Agents", ACL 2024). Two ingest modes:
//!
//! * `turns`: every dialog turn becomes a memory in its conversation's own space (text
//!   `Speaker: text [shares a photo: caption]`, event date = session date);
//! * `threads`: every session becomes a thread (messages with the session's timestamp and the speaker in
//!   `metadata.speaker`), and the memories are whatever extraction makes of it ([`crate::extract`]); a memory
//!   stands for the turns in its provenance (`metadata.source_message_indices`).
//!
//! Every question is asked against its own conversation; metrics are LoCoMo's evidence recall@k (fraction of
//! evidence turns among the turns of the top k memories) and hit@k, per question category and overall, for
//! lexical-only, vector-only and hybrid retrieval. Threads mode also reports evidence coverage (evidence turns
//! that some extracted memory came from) and memories per turn.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;
use std::time::Instant;

use serde::Deserialize;

use crate::error::{Error, ErrorKind, Result};
use crate::index::fusion::Fusion;
use crate::model::Metadata;
use crate::store::{KnowledgeStore, NewMessage, NewSpace, NewThread, SearchMode, SearchOptions, SearchQuery};

pub mod longmemeval;

#[derive(Debug, Deserialize)]
struct Conversation {
    conversation: serde_json::Map<String, serde_json::Value>,
    qa: Vec<Qa>,
}

#[derive(Debug, Deserialize)]
struct Turn {
    speaker: String,
    dia_id: String,
    text: String,
    #[serde(default)]
    blip_caption: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Qa {
    question: String,
    #[serde(default)]
    evidence: Vec<String>,
    category: u8,
}

/// Options of [`locomo`].
#[derive(Debug, Clone, Default)]
pub struct LocomoOptions {
    /// Conversation indices to use (all when None).
    pub conversations: Option<std::ops::RangeInclusive<usize>>,
    /// Cut-offs, e.g. `[5, 10]`.
    pub ks: Vec<usize>,
    /// Also run hybrid search with RRF and several convex weights (reported as `fusion/...`).
    pub fusion_study: bool,
    /// Ingest turns as memories (false) or sessions as threads with extraction (true).
    pub threads: bool,
    /// Also run every ranking stage on and off (`ablation/<mode>/<change>`, see [`ablations`]).
    pub ablation: bool,
    /// Also run the coordinate sweeps of the tuning parameters around the defaults (`sweep/<param>=<value>`,
    /// see [`sweeps`]). For tuning on the dev set only.
    pub sweep: bool,
    /// Put every conversation in one space `locomo` (default: one space per conversation). Questions then
    /// search all conversations; the graph report's purity becomes meaningful (entities of different
    /// conversations can meet).
    pub one_space: bool,
}

/// Communities found after ingest (from [`Graph::recompute`](crate::store::Graph::recompute)).
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct GraphSummary {
    /// Entities and RELATES_TO edges in the graph.
    pub entities: u64,
    /// Edges.
    pub edges: u64,
    /// Communities of two or more entities.
    pub communities: u64,
    /// Community sizes in entities: min, median, max.
    pub sizes: [u64; 3],
    /// Entities in communities.
    pub entities_in_communities: u64,
    /// Modularity.
    pub modularity: f64,
    /// Crystals made.
    pub crystals: u64,
    /// Milliseconds for Louvain plus PageRank plus storing.
    pub elapsed_ms: f64,
    /// Titles of the 10 heaviest communities.
    pub sample_titles: Vec<String>,
    /// Share of community members whose conversation (the one most of their memories come from) is their
    /// community's majority conversation.
    pub purity: f64,
}

/// Recall and hit at each k, per category key (`all`, `1`..`5`).
pub type MethodScores = BTreeMap<String, BTreeMap<String, f64>>;

/// Evaluation report.
#[derive(Debug, Clone, serde::Serialize)]
pub struct LocomoReport {
    /// Dataset path.
    pub dataset: String,
    /// Questions with at least one valid evidence turn.
    pub questions: usize,
    /// Questions skipped for lack of evidence.
    pub skipped_questions: usize,
    /// Memories ingested.
    pub memories: usize,
    /// `hybrid`, `lexical`, `vector`, and the fusion study (`fusion/rrf`, `fusion/convex-0.3`, ...):
    /// metric name (`recall@5`, `hit@10`, ...) -> category -> value.
    pub methods: BTreeMap<String, MethodScores>,
    /// Ingest throughput, memories per second: thread creation with extraction, one thread per session.
    pub ingest_per_s: f64,
    /// Hybrid search latency in milliseconds.
    pub search_ms: BTreeMap<String, f64>,
    /// `turns` or `threads`.
    pub mode: String,
    /// Dialog turns in the selected conversations.
    pub turns: usize,
    /// Memories per turn.
    pub memories_per_turn: f64,
    /// Fraction of distinct evidence turns (of the questions asked) that some memory came from.
    pub evidence_coverage: f64,
    /// Thread mode: milliseconds to create one session thread including extraction, p50 and p99.
    pub thread_create_ms: BTreeMap<String, f64>,
    /// Entities found, all conversations: kind -> count.
    pub entities: BTreeMap<String, usize>,
    /// The most mentioned entities of each kind in the first conversation: kind -> `name (mentions)`.
    pub top_entities: BTreeMap<String, Vec<String>>,
    /// Communities over the ingested entity graph.
    pub graph: GraphSummary,
    /// The lexical index after ingest.
    pub lexical_index: crate::store::LexicalIndexStats,
    /// Timeline review events raised while ingesting (a memory that looks like an update or a contradiction of
    /// an earlier one; `store/reviews/`), all conversations.
    pub review_events: usize,
}

/// The ablation runs: `(name, mode, options)`. Each switches one stage off (`-context`: context-expanded
/// BM25, `-expansion`: neighbour expansion, `-priors`: entity, PageRank and decay adjustments, `-time`: the
/// time-question boost, `-questions`: the question penalty, `-vcontext`: the context-blended cosine), keeps one
/// of the two context stages alone (`context-only`, `expansion-only`), or switches all of them off (`plain`).
pub fn ablations() -> Vec<(String, SearchMode, SearchOptions)> {
    let off = |c: bool, e: bool, p: bool, t: bool, qp: bool, v: bool| SearchOptions {
        context_bm25: (!c).then_some(false),
        expand_neighbours: (!e).then_some(false),
        priors: (!p).then_some(false),
        temporal_boost: (!t).then_some(0.0),
        question_penalty: (!qp).then_some(0.0),
        vector_context: (!v).then_some(0.0),
        ..Default::default()
    };
    let mut out = Vec::new();
    for (m, mode) in [("hybrid", SearchMode::Hybrid), ("lexical", SearchMode::Lexical), ("vector", SearchMode::Vector)]
    {
        out.push((format!("ablation/{m}/-context"), mode, off(false, true, true, true, true, true)));
        out.push((format!("ablation/{m}/-expansion"), mode, off(true, false, true, true, true, true)));
        out.push((format!("ablation/{m}/-questions"), mode, off(true, true, true, true, false, true)));
        out.push((format!("ablation/{m}/plain"), mode, off(false, false, false, false, false, false)));
        if mode != SearchMode::Lexical {
            out.push((format!("ablation/{m}/-vcontext"), mode, off(true, true, true, true, true, false)));
        }
    }
    out.push(("ablation/hybrid/-priors".into(), SearchMode::Hybrid, off(true, true, false, true, true, true)));
    out.push(("ablation/hybrid/-time".into(), SearchMode::Hybrid, off(true, true, true, false, true, true)));
    out.push(("ablation/hybrid/context-only".into(), SearchMode::Hybrid, off(true, false, false, false, false, false)));
    out.push((
        "ablation/hybrid/expansion-only".into(),
        SearchMode::Hybrid,
        off(false, true, false, false, false, false),
    ));
    out
}

/// The tuning sweeps, one parameter at a time around the store's configuration `base`: `(name, fusion,
/// options)` of hybrid searches.
pub fn sweeps(base: &crate::StoreConfig) -> Vec<(String, Option<Fusion>, SearchOptions)> {
    use crate::index::bm25::Bm25Params;
    let mut out = Vec::new();
    let opts = |f: &dyn Fn(&mut SearchOptions)| {
        let mut o = SearchOptions {
            context_params: Some(base.context),
            expansion_params: Some(base.expansion),
            bm25: Some(base.bm25),
            ..Default::default()
        };
        f(&mut o);
        o
    };
    for a in [0.2f32, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0] {
        out.push((format!("sweep/alpha={a}"), Some(Fusion::Convex { alpha: a }), opts(&|_| {})));
    }
    out.push(("sweep/rrf-60".into(), Some(Fusion::Rrf { k: 60.0 }), opts(&|_| {})));
    for w in [0usize, 1, 2, 3] {
        out.push((
            format!("sweep/context-window={w}"),
            None,
            opts(&|o| o.context_params.iter_mut().for_each(|c| c.window = w)),
        ));
    }
    for b in [0.25f32, 0.5, 0.75, 0.85, 0.9, 1.0] {
        out.push((
            format!("sweep/context-blend={b}"),
            None,
            opts(&|o| o.context_params.iter_mut().for_each(|c| c.blend = b)),
        ));
    }
    for a in [0.0f32, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 1.0] {
        out.push((
            format!("sweep/expansion-weight={a}"),
            None,
            opts(&|o| o.expansion_params.iter_mut().for_each(|e| e.weight = a)),
        ));
    }
    for w in [1usize, 2, 3, 4] {
        out.push((
            format!("sweep/expansion-window={w}"),
            None,
            opts(&|o| o.expansion_params.iter_mut().for_each(|e| e.window = w)),
        ));
    }
    for sum in [false, true] {
        out.push((
            format!("sweep/expansion-sum={sum}"),
            None,
            opts(&|o| o.expansion_params.iter_mut().for_each(|e| e.sum = sum)),
        ));
    }
    for t in [0.0f32, 0.05, 0.1, 0.2, 0.3] {
        out.push((format!("sweep/temporal-boost={t}"), None, opts(&|o| o.temporal_boost = Some(t))));
    }
    for p in [0.0f32, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5] {
        out.push((format!("sweep/question-penalty={p}"), None, opts(&|o| o.question_penalty = Some(p))));
    }
    for g in [0.0f32, 0.3, 0.5, 0.6, 0.7] {
        out.push((format!("sweep/vector-context={g}"), None, opts(&|o| o.vector_context = Some(g))));
    }
    for k1 in [0.6f32, 0.9, 1.2, 1.5, 2.0] {
        out.push((format!("sweep/k1={k1}"), None, opts(&|o| o.bm25 = Some(Bm25Params { k1, ..base.bm25 }))));
    }
    for b in [0.3f32, 0.5, 0.75, 0.9, 1.0] {
        out.push((format!("sweep/b={b}"), None, opts(&|o| o.bm25 = Some(Bm25Params { b, ..base.bm25 }))));
    }
    out
}

/// `D<session>:<turn>` from the dataset's sometimes malformed ids ("D:11:26", "D30:05"); None if no two numbers.
pub fn normalise_dia_id(s: &str) -> Option<String> {
    let nums: Vec<u32> =
        s.split(|c: char| !c.is_ascii_digit()).filter(|p| !p.is_empty()).filter_map(|p| p.parse().ok()).collect();
    match nums.as_slice() {
        [a, b, ..] => Some(format!("D{a}:{b}")),
        _ => None,
    }
}

/// `"1:56 pm on 8 May, 2023"` to `"2023-05-08"`.
pub fn session_date(s: &str) -> Option<String> {
    let tail = s.split(" on ").nth(1)?.replace(',', " ");
    let mut parts = tail.split_whitespace();
    let day: u32 = parts.next()?.parse().ok()?;
    let month = parts.next()?.to_ascii_lowercase();
    let year: i32 = parts.next()?.parse().ok()?;
    let m = crate::model::MONTH_NAMES
        .iter()
        .map(|x| x.to_ascii_lowercase())
        .position(|x| x.starts_with(&month) || month.starts_with(&x))?
        + 1;
    Some(format!("{year:04}-{m:02}-{day:02}"))
}

struct Accumulator {
    sums: BTreeMap<(String, String), f64>,
    counts: BTreeMap<String, usize>,
}

impl Accumulator {
    fn new() -> Self {
        Accumulator { sums: BTreeMap::new(), counts: BTreeMap::new() }
    }

    /// `ranked`: the turns each hit stands for, best hit first. Adds, per category and overall:
    ///
    /// * `recall@k`: the share of evidence turns among the turns of the top k hits (LoCoMo's evidence recall);
    /// * `hit@k`: 1 when the top k hits hold any evidence turn;
    /// * `mrr@K` (K the largest cut-off): the reciprocal rank of the first hit holding an evidence turn, 0 when
    ///   none of the top K does (Voorhees, "The TREC-8 Question Answering Track Report", TREC 1999);
    /// * `ndcg@K`: normalised discounted cumulative gain with binary gains (Järvelin and Kekäläinen, "Cumulated
    ///   Gain-based Evaluation of IR Techniques", ACM TOIS 20(4), 2002): a hit gains 1 when it holds an
    ///   evidence turn no earlier hit held, discounted by `log2(rank + 1)`; the ideal ranking finds one
    ///   evidence turn per rank, `min(|evidence|, K)` of them.
    fn add(&mut self, category: u8, ranked: &[Vec<String>], evidence: &HashSet<String>, ks: &[usize]) {
        let kmax = ks.iter().copied().max().unwrap_or(10);
        let first = ranked.iter().take(kmax).position(|turns| turns.iter().any(|t| evidence.contains(t)));
        let rr = first.map_or(0.0, |r| 1.0 / (r as f64 + 1.0));
        let mut seen: HashSet<&String> = HashSet::new();
        let mut dcg = 0.0;
        for (r, turns) in ranked.iter().take(kmax).enumerate() {
            let new = turns.iter().filter(|t| evidence.contains(*t)).any(|t| seen.insert(t));
            if new {
                dcg += 1.0 / (r as f64 + 2.0).log2();
            }
        }
        let idcg: f64 = (0..evidence.len().min(kmax)).map(|r| 1.0 / (r as f64 + 2.0).log2()).sum();
        for cat in ["all".to_string(), category.to_string()] {
            *self.counts.entry(cat.clone()).or_default() += 1;
            *self.sums.entry((format!("mrr@{kmax}"), cat.clone())).or_default() += rr;
            *self.sums.entry((format!("ndcg@{kmax}"), cat.clone())).or_default() +=
                if idcg > 0.0 { dcg / idcg } else { 0.0 };
            for &k in ks {
                let top: HashSet<&String> = ranked.iter().take(k).flatten().collect();
                let found = evidence.iter().filter(|d| top.contains(d)).count();
                let recall = found as f64 / evidence.len() as f64;
                *self.sums.entry((format!("recall@{k}"), cat.clone())).or_default() += recall;
                *self.sums.entry((format!("hit@{k}"), cat.clone())).or_default() += if found > 0 { 1.0 } else { 0.0 };
            }
        }
    }

    fn finish(&self) -> MethodScores {
        let mut out: MethodScores = BTreeMap::new();
        for ((metric, cat), sum) in &self.sums {
            let n = self.counts.get(cat).copied().unwrap_or(1).max(1);
            out.entry(metric.clone()).or_default().insert(cat.clone(), (sum / n as f64 * 10_000.0).round() / 10_000.0);
        }
        out
    }
}

/// The ids of the messages memory `m` came from (`metadata.source_message_indices`), looked up in `ids` (the id
/// of each message of its thread, by index); indices outside `ids` are skipped.
fn source_turns(m: &crate::model::Memory, ids: &[String]) -> Vec<String> {
    let idx = m.metadata.0.get("source_message_indices").and_then(|v| v.as_array());
    idx.into_iter().flatten().filter_map(|x| x.as_u64()).filter_map(|x| ids.get(x as usize).cloned()).collect()
}

/// The value at rank `p` (0..=1, nearest rank) of an ascending list; 0 for an empty one.
fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

fn round4(x: f64) -> f64 {
    (x * 10_000.0).round() / 10_000.0
}

/// Recomputes the graph and summarises its communities. The conversation of a memory is its id prefix
/// `c<i>-` (turn memories `c<i>-D..`, thread memories `c<i>-s<n>#m..`).
fn graph_summary(store: &KnowledgeStore) -> Result<GraphSummary> {
    let report = store.graph().recompute()?;
    let (communities, total) = store.graph().communities(usize::MAX)?;
    let conv_of = |memory_id: &str| memory_id.split('-').next().unwrap_or("").to_string();
    let mut sizes: Vec<u64> = Vec::new();
    let (mut agree, mut members_total) = (0u64, 0u64);
    for c in &communities {
        let members = store.graph().community_members(c.id)?;
        sizes.push(members.len() as u64);
        let mut votes: BTreeMap<String, u64> = BTreeMap::new();
        for (space, entity, _) in &members {
            let mut per: BTreeMap<String, u64> = BTreeMap::new();
            for m in store.graph().entity_memory_ids(space, entity)? {
                *per.entry(conv_of(&m)).or_default() += 1;
            }
            if let Some((conv, _)) = per.into_iter().max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0))) {
                *votes.entry(conv).or_default() += 1;
            }
        }
        agree += votes.values().copied().max().unwrap_or(0);
        members_total += members.len() as u64;
    }
    sizes.sort_unstable();
    Ok(GraphSummary {
        entities: report.entities,
        edges: report.edges,
        communities: total,
        sizes: [
            sizes.first().copied().unwrap_or(0),
            sizes.get(sizes.len() / 2).copied().unwrap_or(0),
            sizes.last().copied().unwrap_or(0),
        ],
        entities_in_communities: members_total,
        modularity: round4(report.modularity),
        crystals: report.crystals,
        elapsed_ms: report.elapsed_ms.round(),
        sample_titles: communities.iter().take(10).map(|c| c.title.clone()).collect(),
        purity: if members_total > 0 { round4(agree as f64 / members_total as f64) } else { 0.0 },
    })
}

/// Runs the evaluation against `store` (which should be empty; spaces `locomo-<i>` are created).
///
/// # Errors
/// [`ErrorKind::Io`] when the dataset cannot be read, [`ErrorKind::InvalidInput`] when it is not LoCoMo JSON,
/// and any store error.
/// What ingesting the selected conversations produced.
struct Ingested {
    ingest_s: f64,
    memories: usize,
    turns_total: usize,
    /// Per selected conversation, its turn ids.
    turn_ids: Vec<HashSet<String>>,
    /// Memory id -> the turns it stands for.
    provenance: HashMap<String, Vec<String>>,
    /// Thread creation times, ms.
    create_ms: Vec<f64>,
    /// `<conversation>/<turn>` of every turn some memory stands for.
    covered: HashSet<String>,
}

/// Every session of every selected conversation becomes a thread of the conversation's space (turn mode: one
/// memory per message; threads mode: what extraction makes of it).
fn ingest(store: &KnowledgeStore, selected: &[(usize, &Conversation)], opts: &LocomoOptions) -> Result<Ingested> {
    let mut ingest_s = 0.0;
    let mut memories = 0;
    let mut turns_total = 0;
    let mut turn_ids: Vec<HashSet<String>> = Vec::new();
    // Memory id -> the turns it stands for.
    let mut provenance: HashMap<String, Vec<String>> = HashMap::new();
    let mut create_ms = Vec::new();
    // `<conversation>/<turn>` of every turn some memory stands for.
    let mut covered: HashSet<String> = HashSet::new();
    for (i, conv) in selected {
        let space = if opts.one_space { "locomo".to_string() } else { format!("locomo-{i}") };
        if let Err(e) = store.spaces().create(NewSpace { name: space.clone(), ..Default::default() })
            && e.kind() != ErrorKind::Conflict
        {
            return Err(e);
        }
        let mut ids = HashSet::new();
        for n in 1.. {
            let Some(turns) = conv.conversation.get(&format!("session_{n}")) else { break };
            let when = conv.conversation.get(&format!("session_{n}_date_time")).and_then(|v| v.as_str()).unwrap_or("");
            let date = session_date(when);
            let turns: Vec<Turn> = serde_json::from_value(turns.clone())
                .map_err(|e| Error::new(ErrorKind::InvalidInput, format!("session_{n} of conversation {i}: {e}")))?;
            let mut messages = Vec::new();
            let mut dias = Vec::new();
            let first_speaker = turns.first().map(|t| t.speaker.clone()).unwrap_or_default();
            for t in turns {
                let Some(dia) = normalise_dia_id(&t.dia_id) else { continue };
                let mut text = t.text.clone();
                if let Some(c) = t.blip_caption.as_deref().filter(|c| !c.is_empty()) {
                    text.push_str(&format!(" [shares a photo: {c}]"));
                }
                let mut meta = serde_json::Map::new();
                meta.insert("speaker".into(), t.speaker.clone().into());
                meta.insert("dia_id".into(), dia.clone().into());
                meta.insert("session".into(), n.into());
                meta.insert("session_date_time".into(), when.into());
                ids.insert(dia.clone());
                turns_total += 1;
                messages.push(NewMessage {
                    role: if t.speaker == first_speaker { "user".into() } else { "assistant".into() },
                    content: text,
                    timestamp: date.as_ref().map(|d| format!("{d}T12:00:00Z")),
                    metadata: Some(Metadata(meta)),
                });
                dias.push(dia);
            }
            if messages.is_empty() {
                continue;
            }
            // Turn mode: one memory per message, the path a client takes with `metadata.analysis` `per-message`.
            let mut thread_meta = serde_json::Map::new();
            if !opts.threads {
                thread_meta.insert("analysis".into(), crate::store::PER_MESSAGE.into());
            }
            let t0 = Instant::now();
            let created = store.threads().create(NewThread {
                thread_id: Some(format!("c{i}-s{n}")),
                title: Some(format!("LoCoMo conversation {i}, session {n}")),
                messages,
                source: Some("locomo".into()),
                space_id: Some(space.clone()),
                metadata: Some(Metadata(thread_meta)),
                deduplicate: true,
                ..Default::default()
            })?;
            let ms = t0.elapsed().as_secs_f64() * 1000.0;
            create_ms.push(ms);
            ingest_s += ms / 1000.0;
            for m in &created.extraction.memories {
                let turns = source_turns(&m.view.memory, &dias);
                covered.extend(turns.iter().map(|d| format!("{i}/{d}")));
                provenance.insert(m.view.memory.id.clone(), turns);
            }
            memories += created.extraction.memories.len();
        }
        turn_ids.push(ids);
    }
    Ok(Ingested { ingest_s, memories, turns_total, turn_ids, provenance, create_ms, covered })
}

/// A crystal stands for the turns of the memories it cites.
fn add_crystal_provenance(store: &KnowledgeStore, provenance: &mut HashMap<String, Vec<String>>) -> Result<()> {
    for space in store.spaces().list()? {
        let q = crate::store::ListQuery {
            space_id: space.id.clone(),
            filter: crate::MemoryFilter { is_crystal: Some(true), ..Default::default() },
            limit: 10_000,
            offset: 0,
        };
        for c in store.memories().list(&q)?.items {
            let mut turns: Vec<String> = Vec::new();
            for (src, _) in store.graph().crystal_sources(&c.memory.id, 100)? {
                turns.extend(provenance.get(&src.memory.id).cloned().unwrap_or_default());
            }
            turns.sort();
            turns.dedup();
            provenance.insert(c.memory.id, turns);
        }
    }
    Ok(())
}

/// Entities by type, the top entities of the first conversation, and the review events raised.
#[allow(clippy::type_complexity)]
fn entity_summary(
    store: &KnowledgeStore,
    selected: &[(usize, &Conversation)],
    opts: &LocomoOptions,
) -> Result<(BTreeMap<String, usize>, BTreeMap<String, Vec<String>>, usize)> {
    let mut entities: BTreeMap<String, usize> = BTreeMap::new();
    let mut top_entities: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (n, (i, _)) in selected.iter().enumerate() {
        for e in store.graph().entities(&format!("locomo-{i}"), usize::MAX)? {
            *entities.entry(e.entity_type.clone()).or_default() += 1;
            let top = top_entities.entry(e.entity_type.clone()).or_default();
            if n == 0 && top.len() < 6 {
                top.push(format!("{} ({})", e.name, e.mention_count));
            }
        }
    }
    let mut review_events = 0;
    let mut spaces: Vec<String> = selected
        .iter()
        .map(|(i, _)| if opts.one_space { "locomo".to_string() } else { format!("locomo-{i}") })
        .collect();
    spaces.dedup();
    for space in &spaces {
        review_events += store.reviews().list(space, false, None, 0, 0)?.1;
    }
    Ok((entities, top_entities, review_events))
}

pub fn locomo(store: &KnowledgeStore, dataset: &Path, opts: &LocomoOptions, progress: bool) -> Result<LocomoReport> {
    let study = opts.fusion_study;
    let raw = std::fs::read(dataset)?;
    let convs: Vec<Conversation> = serde_json::from_slice(&raw)
        .map_err(|e| Error::new(ErrorKind::InvalidInput, format!("{} is not LoCoMo JSON: {e}", dataset.display())))?;
    let selected: Vec<(usize, &Conversation)> =
        convs.iter().enumerate().filter(|(i, _)| opts.conversations.as_ref().is_none_or(|r| r.contains(i))).collect();
    let ks = if opts.ks.is_empty() { vec![5, 10] } else { opts.ks.clone() };
    let kmax = ks.iter().copied().max().unwrap_or(10);

    let Ingested { ingest_s, memories, turns_total, turn_ids, mut provenance, mut create_ms, covered } =
        ingest(store, &selected, opts)?;
    let graph = graph_summary(store)?;
    add_crystal_provenance(store, &mut provenance)?;
    let total_q: usize = selected.iter().map(|(_, c)| c.qa.len()).sum();
    let bar = if progress { indicatif::ProgressBar::new(total_q as u64) } else { indicatif::ProgressBar::hidden() };
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} questions {elapsed_precise}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let fusions: Vec<(String, Fusion)> = std::iter::once(("fusion/rrf-60".to_string(), Fusion::Rrf { k: 60.0 }))
        .chain(
            [0.5f32, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9]
                .iter()
                .map(|a| (format!("fusion/convex-{a}"), Fusion::Convex { alpha: *a })),
        )
        .collect();
    let mut acc: BTreeMap<String, Accumulator> = BTreeMap::new();
    let ablation_runs = if opts.ablation { ablations() } else { Vec::new() };
    let sweep_runs = if opts.sweep { sweeps(store.config()) } else { Vec::new() };
    let mut latencies = Vec::new();
    let mut questions = 0;
    let mut skipped = 0;
    let mut evidence_covered = 0usize;
    let mut evidence_asked = 0usize;
    for ((i, conv), ids) in selected.iter().zip(&turn_ids) {
        let space = if opts.one_space { "locomo".to_string() } else { format!("locomo-{i}") };
        for qa in &conv.qa {
            bar.inc(1);
            let evidence: HashSet<String> = qa
                .evidence
                .iter()
                .flat_map(|e| e.split(';').map(str::to_string).collect::<Vec<_>>())
                .filter_map(|e| normalise_dia_id(&e))
                .filter(|d| ids.contains(d))
                .collect();
            if evidence.is_empty() || qa.question.trim().is_empty() {
                skipped += 1;
                continue;
            }
            questions += 1;
            evidence_covered += evidence.iter().filter(|e| covered.contains(&format!("{i}/{e}"))).count();
            evidence_asked += evidence.len();
            let ask_with = |mode, limit, fusion, options| {
                store.search().run(&SearchQuery {
                    query: qa.question.clone(),
                    space_id: space.clone(),
                    limit,
                    filter: Default::default(),
                    mode,
                    fusion,
                    query_embedding: None,
                    options,
                })
            };
            let ask = |mode, limit, fusion| ask_with(mode, limit, fusion, SearchOptions::default());
            let ranked = |r: &crate::store::SearchResults| -> Vec<Vec<String>> {
                r.hits.iter().map(|h| provenance.get(&h.view.memory.id).cloned().unwrap_or_default()).collect()
            };
            let t0 = Instant::now();
            let hybrid = ask(SearchMode::Hybrid, kmax, None)?;
            latencies.push(t0.elapsed().as_secs_f64() * 1000.0);
            acc.entry("hybrid".into()).or_insert_with(Accumulator::new).add(
                qa.category,
                &ranked(&hybrid),
                &evidence,
                &ks,
            );
            for (name, mode) in [("lexical", SearchMode::Lexical), ("vector", SearchMode::Vector)] {
                let r = ask(mode, kmax, None)?;
                acc.entry(name.into()).or_insert_with(Accumulator::new).add(qa.category, &ranked(&r), &evidence, &ks);
            }
            for (name, mode, o) in &ablation_runs {
                let r = ask_with(*mode, kmax, None, *o)?;
                acc.entry(name.clone()).or_insert_with(Accumulator::new).add(qa.category, &ranked(&r), &evidence, &ks);
            }
            for (name, f, o) in &sweep_runs {
                let r = ask_with(SearchMode::Hybrid, kmax, *f, *o)?;
                acc.entry(name.clone()).or_insert_with(Accumulator::new).add(qa.category, &ranked(&r), &evidence, &ks);
            }
            if study {
                for (name, f) in &fusions {
                    let r = ask(SearchMode::Hybrid, kmax, Some(*f))?;
                    acc.entry(name.clone()).or_insert_with(Accumulator::new).add(
                        qa.category,
                        &ranked(&r),
                        &evidence,
                        &ks,
                    );
                }
            }
        }
    }
    bar.finish_and_clear();
    latencies.sort_by(f64::total_cmp);
    let mut search_ms = BTreeMap::new();
    search_ms.insert("p50".to_string(), (percentile(&latencies, 0.5) * 1000.0).round() / 1000.0);
    search_ms.insert("p99".to_string(), (percentile(&latencies, 0.99) * 1000.0).round() / 1000.0);
    let (entities, top_entities, review_events) = entity_summary(store, &selected, opts)?;
    create_ms.sort_by(f64::total_cmp);
    let mut thread_create_ms = BTreeMap::new();
    if !create_ms.is_empty() {
        thread_create_ms.insert("p50".to_string(), (percentile(&create_ms, 0.5) * 1000.0).round() / 1000.0);
        thread_create_ms.insert("p99".to_string(), (percentile(&create_ms, 0.99) * 1000.0).round() / 1000.0);
    }
    let round = |x: f64| (x * 10_000.0).round() / 10_000.0;
    Ok(LocomoReport {
        mode: if opts.threads { "threads" } else { "turns" }.into(),
        turns: turns_total,
        memories_per_turn: if turns_total > 0 { round(memories as f64 / turns_total as f64) } else { 0.0 },
        evidence_coverage: if evidence_asked > 0 {
            round(evidence_covered as f64 / evidence_asked as f64)
        } else {
            0.0
        },
        thread_create_ms,
        entities,
        top_entities,
        graph,
        review_events,
        lexical_index: store.admin().lexical_index_stats(),
        dataset: dataset.display().to_string(),
        questions,
        skipped_questions: skipped,
        memories,
        methods: acc.into_iter().map(|(k, v)| (k, v.finish())).collect(),
        ingest_per_s: if ingest_s > 0.0 { (memories as f64 / ingest_s).round() } else { 0.0 },
        search_ms,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn malformed_ids_and_dates_are_normalised() {
        assert_eq!(normalise_dia_id("D:11:26").as_deref(), Some("D11:26"));
        assert_eq!(normalise_dia_id("D30:05").as_deref(), Some("D30:5"));
        assert_eq!(normalise_dia_id("D1:3").as_deref(), Some("D1:3"));
        assert_eq!(normalise_dia_id("D"), None);
        assert_eq!(session_date("1:56 pm on 8 May, 2023").as_deref(), Some("2023-05-08"));
        assert_eq!(session_date("10:37 am on 27 June, 2023").as_deref(), Some("2023-06-27"));
        assert_eq!(session_date("garbage"), None);
    }
}
