//! Retrieval evaluation on LongMemEval (Wu et al., "LongMemEval: Benchmarking Chat Assistants on Long-Term
//! Interactive Memory", ICLR 2025), from the official files `longmemeval_s.json`, `longmemeval_m.json` and
//! `longmemeval_oracle.json`.
//!
//! Every question gets its own space holding its haystack: one thread per session, its messages dated with the
//! session's date. `turns` mode stores every message as a memory; `threads` mode stores what extraction makes
//! of each session ([`crate::extract`]). The question is then asked of its space (hybrid, lexical and vector),
//! and the space is deleted unless asked to keep it, so memory use stays that of one question.
//!
//! Metrics are the paper's retrieval metrics (its `src/retrieval/eval_utils.py`), at two granularities:
//!
//! * **session**: the ranked memories become the ranking of their sessions (each session at the rank of its
//!   first memory); the relevant sessions are `answer_session_ids`;
//! * **turn**: each ranked memory stands for the messages it came from (one in `turns` mode); the relevant
//!   turns are the messages with `has_answer: true`.
//!
//! At each cut-off k: `recall_any@k` (some relevant item in the top k), `recall_all@k` (every relevant item in
//! the top k) and `ndcg_any@k` (binary gains, the paper's discount: 1 at ranks 1 and 2, `1 / log2(r)` at rank
//! `r` from 2 on). Abstention questions (`question_id` ending in `_abs`) are skipped, as the paper does.
//! Two choices differ from the paper's script, which indexes only the user's turns: Engram stores both sides of
//! a conversation (so `has_answer` turns of the assistant count), and a question with no `has_answer` turn is
//! left out of the turn-level figures instead of scoring `recall_all` 1. Session-level nDCG is computed over the
//! deduplicated session ranking; the paper's turn-to-session conversion scores the turn list with its
//! duplicates (recall_any and recall_all are the same either way).
//!
//! The file is read as a stream: one question is in memory at a time (the S file is 278 MB).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::Read;
use std::path::Path;
use std::time::Instant;

use serde::Deserialize;
use serde::de::{DeserializeSeed, SeqAccess, Visitor};

use super::percentile;
use crate::error::{Error, ErrorKind, Result};
use crate::model::Metadata;
use crate::store::{KnowledgeStore, NewMessage, NewSpace, NewThread, SearchMode, SearchOptions, SearchQuery};

/// One question of a LongMemEval file (fields this evaluation reads; others, such as `answer`, are ignored).
#[derive(Debug, Clone, Deserialize)]
pub struct Question {
    /// Unique id; ends in `_abs` for abstention questions.
    pub question_id: String,
    /// `single-session-user`, `single-session-assistant`, `single-session-preference`, `multi-session`,
    /// `temporal-reasoning` or `knowledge-update`.
    pub question_type: String,
    /// The question.
    pub question: String,
    /// When the question is asked, `2023/05/30 (Tue) 23:40`.
    #[serde(default)]
    pub question_date: Option<String>,
    /// Session ids, parallel to `haystack_sessions`.
    pub haystack_session_ids: Vec<String>,
    /// Session dates, parallel to `haystack_sessions`.
    #[serde(default)]
    pub haystack_dates: Vec<String>,
    /// The sessions, oldest first.
    pub haystack_sessions: Vec<Vec<Turn>>,
    /// The sessions holding the evidence.
    #[serde(default)]
    pub answer_session_ids: Vec<String>,
}

/// One message of a haystack session.
#[derive(Debug, Clone, Deserialize)]
pub struct Turn {
    /// `user` or `assistant`.
    pub role: String,
    /// The text.
    pub content: String,
    /// Whether this message holds evidence for the question.
    #[serde(default)]
    pub has_answer: bool,
}

/// Options of [`run`].
#[derive(Debug, Clone, Default)]
pub struct LongMemEvalOptions {
    /// Cut-offs (default `[5, 10]`).
    pub ks: Vec<usize>,
    /// Ingest sessions as threads with extraction (true) or every message as a memory (false).
    pub threads: bool,
    /// Stop after this many questions of the file (abstention ones included); all when None.
    pub limit: Option<usize>,
    /// Keep each question's space (`lme-<n>`) instead of deleting it after the question.
    pub keep_spaces: bool,
}

/// `metric` (`recall_any@5`, ...) -> question type (`all` and each type) -> mean.
pub type Metrics = BTreeMap<String, BTreeMap<String, f64>>;

/// Evaluation report.
#[derive(Debug, Clone, serde::Serialize)]
pub struct LongMemEvalReport {
    /// Dataset path.
    pub dataset: String,
    /// `turns` or `threads`.
    pub mode: String,
    /// Questions evaluated (abstention ones excluded).
    pub questions: usize,
    /// Questions evaluated, per question type.
    pub questions_by_type: BTreeMap<String, usize>,
    /// Abstention questions skipped.
    pub abstention_skipped: usize,
    /// Evaluated questions with no `has_answer` message, left out of the turn-level figures.
    pub without_answer_turns: usize,
    /// Haystack sessions ingested, all questions.
    pub sessions: usize,
    /// Messages ingested, all questions.
    pub turns: usize,
    /// Memories stored, all questions.
    pub memories: usize,
    /// Memories per second of thread creation (extraction included).
    pub ingest_per_s: f64,
    /// Hybrid search latency, ms: `p50`, `p99`.
    pub search_ms: BTreeMap<String, f64>,
    /// Wall time of the whole run, s.
    pub elapsed_s: f64,
    /// Peak resident memory of the process, MiB (Linux; 0 elsewhere).
    pub peak_rss_mib: f64,
    /// `hybrid`, `lexical`, `vector` -> `session` or `turn` -> metrics.
    pub methods: BTreeMap<String, BTreeMap<String, Metrics>>,
}

/// LongMemEval's metrics of one ranking at cut-off `k`: `(recall_any, recall_all, ndcg_any)`.
///
/// * `ranked`: the ranked items, best first; each is the set of ids it stands for (a session id, or the
///   turns a memory came from).
/// * `relevant`: the relevant ids; when empty, all three are 0.
///
/// An item gains 1 when it holds a relevant id that no earlier item held. DCG discounts rank `r` (from 1) by
/// 1 at `r = 1` and `1 / log2(r)` after, as the paper's `dcg` does; the ideal ranking gains 1 at each of the
/// first `min(|relevant|, k)` ranks.
pub fn metrics_at(ranked: &[Vec<String>], relevant: &HashSet<String>, k: usize) -> (f64, f64, f64) {
    if relevant.is_empty() || k == 0 {
        return (0.0, 0.0, 0.0);
    }
    let discount = |r: usize| if r <= 1 { 1.0 } else { 1.0 / (r as f64).log2() };
    let mut seen: HashSet<&str> = HashSet::new();
    let mut dcg = 0.0;
    for (i, item) in ranked.iter().take(k).enumerate() {
        let mut gained = false;
        for id in item {
            if relevant.contains(id) && seen.insert(id.as_str()) {
                gained = true;
            }
        }
        if gained {
            dcg += discount(i + 1);
        }
    }
    let idcg: f64 = (1..=relevant.len().min(k)).map(discount).sum();
    let found = seen.len();
    (
        if found > 0 { 1.0 } else { 0.0 },
        if found == relevant.len() { 1.0 } else { 0.0 },
        if idcg > 0.0 { dcg / idcg } else { 0.0 },
    )
}

/// Calls `f` with each question of a LongMemEval file (a JSON array), one at a time, without reading the
/// whole file. Returns the number of questions read.
///
/// # Errors
/// [`ErrorKind::InvalidInput`] when the text is not a JSON array of LongMemEval questions (the message names
/// the line and column); any error of `f`, which stops the reading.
pub fn for_each_question<R: Read>(reader: R, f: impl FnMut(Question) -> Result<()>) -> Result<usize> {
    struct Each<F> {
        f: F,
        failed: Option<Error>,
        count: usize,
    }
    impl<'de, F: FnMut(Question) -> Result<()>> Visitor<'de> for &mut Each<F> {
        type Value = ();
        fn expecting(&self, out: &mut std::fmt::Formatter) -> std::fmt::Result {
            out.write_str("a JSON array of LongMemEval questions")
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<(), A::Error> {
            while let Some(q) = seq.next_element::<Question>()? {
                self.count += 1;
                if let Err(e) = (self.f)(q) {
                    self.failed = Some(e);
                    return Err(serde::de::Error::custom("stopped"));
                }
            }
            Ok(())
        }
    }
    impl<'de, F: FnMut(Question) -> Result<()>> DeserializeSeed<'de> for &mut Each<F> {
        type Value = ();
        fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> std::result::Result<(), D::Error> {
            d.deserialize_seq(self)
        }
    }
    let mut each = Each { f, failed: None, count: 0 };
    let mut de = serde_json::Deserializer::from_reader(std::io::BufReader::with_capacity(1 << 20, reader));
    let parsed = (&mut each).deserialize(&mut de).and_then(|()| de.end());
    if let Some(e) = each.failed.take() {
        return Err(e);
    }
    parsed.map_err(|e| {
        Error::new(ErrorKind::InvalidInput, format!("not a LongMemEval file (a JSON array of questions): {e}"))
    })?;
    Ok(each.count)
}

/// `2023/05/20 (Sat) 02:21` to `2023-05-20T02:21:00Z`; None when it has no `YYYY/MM/DD` date. A missing or
/// malformed time of day gives noon.
pub fn haystack_timestamp(s: &str) -> Option<String> {
    let mut parts = s.split_whitespace();
    let date = parts.next()?;
    let mut ymd = date.split('/').map(|p| p.parse::<u32>().ok());
    let (y, m, d) = (ymd.next()??, ymd.next()??, ymd.next()??);
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) || y > 9999 {
        return None;
    }
    let (hh, mm) = parts
        .find(|p| p.contains(':'))
        .and_then(|t| {
            let (h, mi) = t.split_once(':')?;
            Some((h.parse::<u32>().ok()?, mi.parse::<u32>().ok()?))
        })
        .filter(|(h, mi)| *h < 24 && *mi < 60)
        .unwrap_or((12, 0));
    Some(format!("{y:04}-{m:02}-{d:02}T{hh:02}:{mm:02}:00Z"))
}

/// What one memory stands for: its session (index into the haystack) and its turn ids.
struct Provenance {
    session: usize,
    turns: Vec<String>,
}

#[derive(Default)]
struct Sums {
    /// (granularity, metric, question type) -> sum.
    sums: BTreeMap<(String, String, String), f64>,
    /// (granularity, question type) -> questions.
    counts: BTreeMap<(String, String), usize>,
}

impl Sums {
    fn add(
        &mut self,
        granularity: &str,
        qtype: &str,
        ranked: &[Vec<String>],
        relevant: &HashSet<String>,
        ks: &[usize],
    ) {
        for t in ["all", qtype] {
            *self.counts.entry((granularity.into(), t.into())).or_default() += 1;
            for &k in ks {
                let (any, all, ndcg) = metrics_at(ranked, relevant, k);
                for (name, v) in [("recall_any", any), ("recall_all", all), ("ndcg_any", ndcg)] {
                    *self.sums.entry((granularity.into(), format!("{name}@{k}"), t.into())).or_default() += v;
                }
            }
        }
    }

    fn finish(&self) -> BTreeMap<String, Metrics> {
        let mut out: BTreeMap<String, Metrics> = BTreeMap::new();
        for ((g, metric, t), sum) in &self.sums {
            let n = self.counts.get(&(g.clone(), t.clone())).copied().unwrap_or(1).max(1);
            out.entry(g.clone())
                .or_default()
                .entry(metric.clone())
                .or_default()
                .insert(t.clone(), (sum / n as f64 * 10_000.0).round() / 10_000.0);
        }
        out
    }
}

/// Peak resident memory of this process in MiB (`VmHWM`), 0 where `/proc` has none.
fn peak_rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("VmHWM:")).map(str::to_string))
        .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse::<f64>().ok()))
        .map_or(0.0, |kib| (kib / 1024.0).round())
}

/// The state of a run across questions.
struct Run<'a> {
    store: &'a KnowledgeStore,
    opts: &'a LongMemEvalOptions,
    ks: Vec<usize>,
    methods: BTreeMap<String, Sums>,
    questions_by_type: BTreeMap<String, usize>,
    abstention_skipped: usize,
    without_answer_turns: usize,
    sessions: usize,
    turns: usize,
    memories: usize,
    ingest_s: f64,
    latencies: Vec<f64>,
}

impl Run<'_> {
    /// Ingests one question's haystack into space `space`: memory id -> what it stands for.
    fn ingest(&mut self, q: &Question, space: &str) -> Result<HashMap<String, Provenance>> {
        let mut provenance = HashMap::new();
        for (j, session) in q.haystack_sessions.iter().enumerate() {
            let sid = q.haystack_session_ids.get(j).cloned().unwrap_or_else(|| format!("session-{j}"));
            let timestamp = q.haystack_dates.get(j).and_then(|d| haystack_timestamp(d));
            // Blank messages are not stored; `turn_ids[i]` is the turn id of the i-th stored message.
            let mut messages = Vec::new();
            let mut turn_ids = Vec::new();
            for (t, turn) in session.iter().enumerate() {
                if turn.content.trim().is_empty() {
                    continue;
                }
                let mut meta = serde_json::Map::new();
                meta.insert("turn_id".into(), format!("{sid}_{}", t + 1).into());
                messages.push(NewMessage {
                    role: if turn.role == "assistant" { "assistant".into() } else { "user".into() },
                    content: turn.content.clone(),
                    timestamp: timestamp.clone(),
                    metadata: Some(Metadata(meta)),
                });
                turn_ids.push(format!("{sid}_{}", t + 1));
            }
            self.sessions += 1;
            if messages.is_empty() {
                continue;
            }
            self.turns += messages.len();
            let mut thread_meta = serde_json::Map::new();
            thread_meta.insert("session_id".into(), sid.clone().into());
            if !self.opts.threads {
                thread_meta.insert("analysis".into(), crate::store::PER_MESSAGE.into());
            }
            let t0 = Instant::now();
            let created = self.store.threads().create(NewThread {
                thread_id: Some(format!("s{j}")),
                title: Some(format!("LongMemEval {}, session {sid}", q.question_id)),
                messages,
                source: Some("longmemeval".into()),
                space_id: Some(space.to_string()),
                metadata: Some(Metadata(thread_meta)),
                deduplicate: true,
                ..Default::default()
            })?;
            self.ingest_s += t0.elapsed().as_secs_f64();
            for m in &created.extraction.memories {
                let turns = super::source_turns(&m.view.memory, &turn_ids);
                provenance.insert(m.view.memory.id.clone(), Provenance { session: j, turns });
            }
            self.memories += created.extraction.memories.len();
        }
        Ok(provenance)
    }

    fn question(&mut self, n: usize, q: Question) -> Result<()> {
        if q.question_id.ends_with("_abs") {
            self.abstention_skipped += 1;
            return Ok(());
        }
        if q.haystack_session_ids.len() != q.haystack_sessions.len() {
            return Err(Error::new(
                ErrorKind::InvalidInput,
                format!(
                    "question {}: {} haystack_session_ids for {} haystack_sessions",
                    q.question_id,
                    q.haystack_session_ids.len(),
                    q.haystack_sessions.len()
                ),
            ));
        }
        let space = format!("lme-{n}");
        if let Err(e) = self.store.spaces().create(NewSpace { name: space.clone(), ..Default::default() })
            && e.kind() != ErrorKind::Conflict
        {
            return Err(e);
        }
        let provenance = self.ingest(&q, &space)?;
        *self.questions_by_type.entry(q.question_type.clone()).or_default() += 1;
        let relevant_sessions: HashSet<String> = q.answer_session_ids.iter().cloned().collect();
        let relevant_turns: HashSet<String> = q
            .haystack_sessions
            .iter()
            .zip(&q.haystack_session_ids)
            .flat_map(|(s, sid)| {
                s.iter().enumerate().filter(|(_, t)| t.has_answer).map(move |(i, _)| format!("{sid}_{}", i + 1))
            })
            .collect();
        if relevant_turns.is_empty() {
            self.without_answer_turns += 1;
        }
        let kmax = self.ks.iter().copied().max().unwrap_or(10);
        for (name, mode) in
            [("hybrid", SearchMode::Hybrid), ("lexical", SearchMode::Lexical), ("vector", SearchMode::Vector)]
        {
            let t0 = Instant::now();
            // Deep enough that the top memories reach `kmax` distinct sessions in practice.
            let results = self.store.search().run(&SearchQuery {
                query: q.question.clone(),
                space_id: space.clone(),
                limit: kmax * 5,
                filter: Default::default(),
                mode,
                fusion: None,
                query_embedding: None,
                options: SearchOptions::default(),
            })?;
            if mode == SearchMode::Hybrid {
                self.latencies.push(t0.elapsed().as_secs_f64() * 1000.0);
            }
            let hits: Vec<&Provenance> =
                results.hits.iter().filter_map(|h| provenance.get(&h.view.memory.id)).collect();
            let mut sessions: Vec<Vec<String>> = Vec::new();
            let mut seen = HashSet::new();
            for p in &hits {
                if seen.insert(p.session) {
                    sessions.push(vec![q.haystack_session_ids[p.session].clone()]);
                }
            }
            let turns: Vec<Vec<String>> = hits.iter().map(|p| p.turns.clone()).collect();
            let sums = self.methods.entry(name.into()).or_default();
            sums.add("session", &q.question_type, &sessions, &relevant_sessions, &self.ks);
            if !relevant_turns.is_empty() {
                sums.add("turn", &q.question_type, &turns, &relevant_turns, &self.ks);
            }
        }
        if !self.opts.keep_spaces {
            self.store.spaces().delete(&space, true)?;
        }
        Ok(())
    }
}

/// Runs the evaluation on the LongMemEval file `dataset` against `store` (spaces `lme-<n>` are created, one per
/// question, `n` its index in the file). `progress` shows a spinner on standard error.
///
/// # Errors
/// [`ErrorKind::Io`] when the file cannot be read, [`ErrorKind::InvalidInput`] when it is not a LongMemEval file
/// or a question's session ids and sessions differ in number, and any store error.
pub fn run(
    store: &KnowledgeStore,
    dataset: &Path,
    opts: &LongMemEvalOptions,
    progress: bool,
) -> Result<LongMemEvalReport> {
    let started = Instant::now();
    let file = std::fs::File::open(dataset)
        .map_err(|e| Error::new(ErrorKind::Io, format!("cannot read {}", dataset.display())).with_source(e))?;
    let mut ks = if opts.ks.is_empty() { vec![5, 10] } else { opts.ks.clone() };
    ks.retain(|k| *k > 0);
    ks.sort_unstable();
    ks.dedup();
    let bar = if progress { indicatif::ProgressBar::new_spinner() } else { indicatif::ProgressBar::hidden() };
    bar.set_style(
        indicatif::ProgressStyle::with_template("{spinner} {pos} questions {elapsed_precise}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
    );
    let mut run = Run {
        store,
        opts,
        ks,
        methods: BTreeMap::new(),
        questions_by_type: BTreeMap::new(),
        abstention_skipped: 0,
        without_answer_turns: 0,
        sessions: 0,
        turns: 0,
        memories: 0,
        ingest_s: 0.0,
        latencies: Vec::new(),
    };
    let mut n = 0usize;
    let limit = opts.limit.unwrap_or(usize::MAX);
    // Reading stops at the limit through a sentinel error, told apart from real ones by `stopped`.
    let mut stopped = false;
    let read = for_each_question(file, |q| {
        if n >= limit {
            stopped = true;
            return Err(Error::new(ErrorKind::Internal, "question limit reached"));
        }
        let i = n;
        n += 1;
        bar.inc(1);
        run.question(i, q)
    });
    bar.finish_and_clear();
    match read {
        Ok(_) => {}
        Err(_) if stopped => {}
        Err(e) => return Err(e),
    }
    let mut latencies = std::mem::take(&mut run.latencies);
    latencies.sort_by(f64::total_cmp);
    let round3 = |x: f64| (x * 1000.0).round() / 1000.0;
    let search_ms: BTreeMap<String, f64> = [
        ("p50".to_string(), round3(percentile(&latencies, 0.5))),
        ("p99".to_string(), round3(percentile(&latencies, 0.99))),
    ]
    .into();
    Ok(LongMemEvalReport {
        dataset: dataset.display().to_string(),
        mode: if opts.threads { "threads" } else { "turns" }.into(),
        questions: run.questions_by_type.values().sum(),
        questions_by_type: run.questions_by_type,
        abstention_skipped: run.abstention_skipped,
        without_answer_turns: run.without_answer_turns,
        sessions: run.sessions,
        turns: run.turns,
        memories: run.memories,
        ingest_per_s: if run.ingest_s > 0.0 { (run.memories as f64 / run.ingest_s).round() } else { 0.0 },
        search_ms,
        elapsed_s: round3(started.elapsed().as_secs_f64()),
        peak_rss_mib: peak_rss_mib(),
        methods: run.methods.iter().map(|(k, v)| (k.clone(), v.finish())).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ranked(items: &[&[&str]]) -> Vec<Vec<String>> {
        items.iter().map(|i| i.iter().map(|s| s.to_string()).collect()).collect()
    }

    fn set(ids: &[&str]) -> HashSet<String> {
        ids.iter().map(|s| s.to_string()).collect()
    }

    fn close(a: (f64, f64, f64), b: (f64, f64, f64)) -> bool {
        (a.0 - b.0).abs() < 1e-9 && (a.1 - b.1).abs() < 1e-9 && (a.2 - b.2).abs() < 1e-9
    }

    #[test]
    fn metrics_match_hand_computed_cases() {
        // One relevant item at rank 1: everything 1.
        let r = ranked(&[&["a"], &["b"], &["c"]]);
        assert!(close(metrics_at(&r, &set(&["a"]), 3), (1.0, 1.0, 1.0)));
        // One relevant item at rank 3: discount 1/log2(3); ideal 1.
        let got = metrics_at(&r, &set(&["c"]), 3);
        assert!(close(got, (1.0, 1.0, 1.0 / 3f64.log2())), "{got:?}");
        // ... and outside a cut-off of 2.
        assert!(close(metrics_at(&r, &set(&["c"]), 2), (0.0, 0.0, 0.0)));
        // Two relevant, one found at rank 2: DCG 1 (rank 2 is not discounted), ideal 1 + 1 = 2.
        let got = metrics_at(&r, &set(&["b", "z"]), 3);
        assert!(close(got, (1.0, 0.0, 0.5)), "{got:?}");
        // Both found at ranks 1 and 3: DCG 1 + 1/log2(3), ideal 2.
        let got = metrics_at(&r, &set(&["a", "c"]), 3);
        assert!(close(got, (1.0, 1.0, (1.0 + 1.0 / 3f64.log2()) / 2.0)), "{got:?}");
        // Three relevant, cut-off 2: the ideal has two gains.
        let got = metrics_at(&r, &set(&["a", "b", "c"]), 2);
        assert!(close(got, (1.0, 0.0, 1.0)), "{got:?}");
        // Nothing relevant: all 0.
        assert!(close(metrics_at(&r, &HashSet::new(), 3), (0.0, 0.0, 0.0)));
        // Empty ranking.
        assert!(close(metrics_at(&[], &set(&["a"]), 5), (0.0, 0.0, 0.0)));
    }

    #[test]
    fn an_item_gains_once_for_the_ids_it_adds() {
        // A memory of two turns holding both relevant ones gains once; a later item repeating one gains nothing.
        let r = ranked(&[&["x"], &["a", "b"], &["a"]]);
        let got = metrics_at(&r, &set(&["a", "b"]), 3);
        // DCG: rank 2 gains 1; ideal: ranks 1 and 2, 2.
        assert!(close(got, (1.0, 1.0, 0.5)), "{got:?}");
    }

    #[test]
    fn haystack_dates_become_timestamps() {
        assert_eq!(haystack_timestamp("2023/05/20 (Sat) 02:21").as_deref(), Some("2023-05-20T02:21:00Z"));
        assert_eq!(haystack_timestamp("2023/05/20").as_deref(), Some("2023-05-20T12:00:00Z"));
        assert_eq!(haystack_timestamp("2023/05/20 (Sat) 25:99").as_deref(), Some("2023-05-20T12:00:00Z"));
        assert_eq!(haystack_timestamp("2023/13/20 (Sat) 02:21"), None);
        assert_eq!(haystack_timestamp("yesterday"), None);
        assert_eq!(haystack_timestamp(""), None);
    }

    #[test]
    fn questions_are_streamed_and_bad_files_are_input_errors() {
        let text = r#"[{"question_id":"q1","question_type":"multi-session","question":"Where?","answer":3,
            "haystack_session_ids":["s1"],"haystack_dates":["2023/05/20 (Sat) 02:21"],
            "haystack_sessions":[[{"role":"user","content":"hi","has_answer":true}]],"answer_session_ids":["s1"]},
            {"question_id":"q2_abs","question_type":"temporal-reasoning","question":"When?",
            "haystack_session_ids":[],"haystack_sessions":[]}]"#;
        let mut ids = Vec::new();
        let n = for_each_question(text.as_bytes(), |q| {
            ids.push(q.question_id);
            Ok(())
        });
        assert_eq!(n.ok(), Some(2));
        assert_eq!(ids, ["q1", "q2_abs"]);
        for bad in ["{}", "[{\"question_id\":1}]", "[", "[] trailing", ""] {
            let e = for_each_question(bad.as_bytes(), |_| Ok(())).err().map(|e| e.kind());
            assert_eq!(e, Some(ErrorKind::InvalidInput), "{bad}");
        }
        // An error of the callback stops the reading and is returned as it is.
        let mut seen = 0;
        let e = for_each_question(text.as_bytes(), |_| {
            seen += 1;
            Err(Error::new(ErrorKind::Conflict, "stop"))
        });
        assert_eq!(e.err().map(|e| e.kind()), Some(ErrorKind::Conflict));
        assert_eq!(seen, 1);
    }
}
