//! `engram eval locomo` and `engram eval longmemeval`: retrieval evaluation on a dataset file.

use std::path::PathBuf;

use clap::Subcommand;
use engram::{KnowledgeStore, StoreConfig};

use super::{DatabaseArgs, EmbedderArgs, IndexModeArg};

#[derive(Subcommand)]
pub enum EvalCommand {
    /// LoCoMo evidence recall@k for lexical, vector and hybrid retrieval.
    Locomo(LocomoArgs),
    /// LongMemEval retrieval metrics (recall_any, recall_all, ndcg_any at session and turn level, per question
    /// type) on an official file; each question's haystack goes into a space of its own. The file is streamed.
    Longmemeval(LongMemEvalArgs),
}

#[derive(clap::Args)]
pub struct LocomoArgs {
    /// Path to a LoCoMo JSON file (e.g. locomo10.json).
    #[arg(long)]
    dataset: PathBuf,
    /// Conversation range, e.g. `0-4` or `2`.
    #[arg(long)]
    conversations: Option<String>,
    /// Cut-offs, comma-separated.
    #[arg(long, default_value = "5,10", value_delimiter = ',')]
    k: Vec<usize>,
    /// Print one JSON object instead of tables.
    #[arg(long)]
    json: bool,
    /// Fusion for the store's hybrid search: `convex:<alpha>` or `rrf:<k>` (default: the embedder's).
    #[arg(long)]
    fusion: Option<String>,
    /// Also compare fusion methods (RRF, convex weights 0.5..0.9) through the store's hybrid search.
    #[arg(long)]
    fusion_study: bool,
    /// `turns`: every dialog turn is a memory; `threads`: every session is a thread and extraction makes
    /// the memories.
    #[arg(long, default_value = "turns", value_parser = ["turns", "threads"])]
    mode: String,
    /// Hybrid search's entity bonus (0 switches it off; default 0.05).
    #[arg(long)]
    entity_boost: Option<f32>,
    /// Hybrid search's PageRank weight (0 switches it off; default 0.02).
    #[arg(long)]
    pagerank_weight: Option<f32>,
    /// Put every conversation in one space (default: one space per conversation).
    #[arg(long)]
    one_space: bool,
    /// Also run each ranking stage on and off (`ablation/<mode>/<change>`; docs/retrieval.md).
    #[arg(long)]
    ablation: bool,
    /// Also run the tuning sweeps (`sweep/<param>=<value>`, one parameter at a time; tune on dev data only).
    #[arg(long)]
    sweep: bool,
    /// Context-expanded BM25 window (0 switches the stage off; default 1).
    #[arg(long)]
    context_window: Option<usize>,
    /// Neighbour expansion weight `a` (0 switches the stage off; default 0.5).
    #[arg(long)]
    expansion_weight: Option<f32>,
    /// Context-blended cosine weight `γ`, 0..=1 (0 switches the stage off; default: the embedder's, 0.5 for a
    /// model and the built-in static model, 0 for the hashing embedder).
    #[arg(long)]
    vector_context: Option<f32>,
    #[command(flatten)]
    store: EvalStoreArgs,
}

/// Where an evaluation stores what it ingests, and which embedder it uses.
#[derive(clap::Args)]
struct EvalStoreArgs {
    /// Store directory (default: a fresh temporary directory, removed afterwards).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Run on this PostgreSQL database (an empty schema: the evaluation writes its data there).
    #[command(flatten)]
    database: DatabaseArgs,
    /// Where the searches read their indexes (`database`: PostgreSQL's database index mode).
    #[arg(long, value_enum, default_value_t = IndexModeArg::Memory)]
    index_mode: IndexModeArg,
    #[command(flatten)]
    embedder: EmbedderArgs,
    /// Encrypt the evaluation's store at rest with this key file (the figures must not change).
    #[arg(long)]
    key_file: Option<PathBuf>,
    /// Run on a store in a sync group (a folder beside the store, removed afterwards): every write logs its
    /// changes, and a sync pass writes them as segments after the evaluation (the figures must not change).
    #[arg(long)]
    sync: bool,
}

/// The store an evaluation runs on: its configuration, the temporary directory to remove afterwards, and the
/// sync folder of `--sync`.
struct EvalStore {
    config: StoreConfig,
    temp: Option<PathBuf>,
    sync: Option<PathBuf>,
}

#[derive(clap::Args)]
pub struct LongMemEvalArgs {
    /// Path to a LongMemEval file (`longmemeval_s.json`, `longmemeval_m.json`, `longmemeval_oracle.json`).
    #[arg(long)]
    dataset: PathBuf,
    /// Cut-offs, comma-separated.
    #[arg(long, default_value = "5,10", value_delimiter = ',')]
    k: Vec<usize>,
    /// Print one JSON object instead of tables.
    #[arg(long)]
    json: bool,
    /// `turns`: every message is a memory; `threads`: every session is a thread and extraction makes the
    /// memories.
    #[arg(long, default_value = "turns", value_parser = ["turns", "threads"])]
    mode: String,
    /// Stop after this many questions of the file.
    #[arg(long)]
    limit: Option<usize>,
    /// Keep every question's space (`lme-<n>`) in the store instead of deleting it after its question.
    #[arg(long)]
    keep_spaces: bool,
    #[command(flatten)]
    store: EvalStoreArgs,
}

fn parse_range(s: &str) -> Option<std::ops::RangeInclusive<usize>> {
    match s.split_once('-') {
        Some((a, b)) => Some(a.trim().parse().ok()?..=b.trim().parse().ok()?),
        None => {
            let n = s.trim().parse().ok()?;
            Some(n..=n)
        }
    }
}

fn parse_fusion(s: &str) -> Option<engram::index::fusion::Fusion> {
    use engram::index::fusion::Fusion;
    let (kind, val) = s.split_once(':').unwrap_or((s, ""));
    match kind {
        "convex" => Some(Fusion::Convex { alpha: val.parse().unwrap_or(0.5) }),
        "rrf" => Some(Fusion::Rrf { k: val.parse().unwrap_or(60.0) }),
        _ => None,
    }
}

impl EvalStoreArgs {
    /// The configuration of the store an evaluation runs on (its database and embedder) in `--data-dir`, or in a
    /// fresh temporary directory, returned too, for removal afterwards.
    fn config(self) -> engram::Result<EvalStore> {
        let selected = self.embedder.select()?;
        let (dir, temp) = match self.data_dir {
            Some(d) => (d, None),
            None => {
                let d = std::env::temp_dir().join(format!("engram-eval-{}", std::process::id()));
                (d.clone(), Some(d))
            }
        };
        let mut config = StoreConfig::new(&dir);
        config.database_url = self.database.database_url;
        config.index_mode = self.index_mode.into();
        config.embedder = selected.embedder;
        config.encryption = self.key_file.map(engram::storage::crypt::Encryption::key_file);
        let sync = self.sync.then(|| dir.with_extension("sync"));
        Ok(EvalStore { config, temp, sync })
    }
}

/// The bytes of the files in `dir`'s device directories (a sync folder).
fn walk_bytes(dir: Option<&std::path::Path>) -> u64 {
    let Some(dir) = dir else { return 0 };
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .flat_map(|d| std::fs::read_dir(d.path()).into_iter().flatten().flatten())
        .filter_map(|f| f.metadata().ok())
        .map(|m| m.len())
        .sum()
}

/// `engram eval longmemeval`.
fn longmemeval_command(args: LongMemEvalArgs) -> engram::Result<()> {
    let LongMemEvalArgs { dataset, k, json, mode, limit, keep_spaces, store } = args;
    let store = store.config()?;
    let opts = engram::eval::longmemeval::LongMemEvalOptions { ks: k, threads: mode == "threads", limit, keep_spaces };
    run_eval(
        store,
        json,
        |store, progress| engram::eval::longmemeval::run(store, &dataset, &opts, progress),
        print_longmemeval,
    )
}

/// Opens the evaluation store, runs `eval` on it (with a progress display when printing tables to a terminal),
/// removes the temporary directory `temp` whether or not it succeeded, and prints the report as one JSON object
/// or with `print`.
fn run_eval<R: serde::Serialize>(
    at: EvalStore,
    json: bool,
    eval: impl FnOnce(&KnowledgeStore, bool) -> engram::Result<R>,
    print: impl FnOnce(&R),
) -> engram::Result<()> {
    let progress = !json && std::io::IsTerminal::is_terminal(&std::io::stderr());
    let sync = at.sync.clone();
    let report = KnowledgeStore::open(at.config).and_then(|store| {
        if let Some(folder) = &sync {
            let _ = std::fs::remove_dir_all(folder);
            std::fs::create_dir_all(folder)
                .map_err(|e| engram::Error::new(engram::ErrorKind::Io, format!("making {}: {e}", folder.display())))?;
            store.sync().init_folder(folder)?;
        }
        let report = eval(&store, progress)?;
        if sync.is_some() {
            let r = store.sync().sync_folder()?;
            let bytes: u64 = walk_bytes(sync.as_deref());
            eprintln!(
                "sync: {} segments ({} changes) written; the folder holds {bytes} bytes ({:.0} per change)",
                r.written_segments,
                r.written_changes,
                bytes as f64 / r.written_changes.max(1) as f64
            );
        }
        Ok(report)
    });
    for dir in at.temp.iter().chain(sync.iter()) {
        let _ = std::fs::remove_dir_all(dir);
    }
    let report = report?;
    if json {
        println!("{}", serde_json::to_string_pretty(&report).unwrap_or_default());
    } else {
        print(&report);
    }
    Ok(())
}

fn print_longmemeval(r: &engram::eval::longmemeval::LongMemEvalReport) {
    println!(
        "dataset {}: {} questions ({} abstention skipped, {} without has_answer turns left out of turn level)",
        r.dataset, r.questions, r.abstention_skipped, r.without_answer_turns
    );
    println!(
        "mode {}: {} sessions, {} turns, {} memories; ingest {:.0} memories/s; hybrid search p50 {:.2} ms, \
         p99 {:.2} ms; {:.1} s, peak RSS {:.0} MiB",
        r.mode,
        r.sessions,
        r.turns,
        r.memories,
        r.ingest_per_s,
        r.search_ms.get("p50").copied().unwrap_or(0.0),
        r.search_ms.get("p99").copied().unwrap_or(0.0),
        r.elapsed_s,
        r.peak_rss_mib
    );
    for (method, levels) in &r.methods {
        for (level, metrics) in levels {
            println!("\n{method}, {level} level");
            for (metric, types) in metrics {
                let row: Vec<String> = types.iter().map(|(t, v)| format!("{t}={v:.3}")).collect();
                println!("  {metric:<14} {}", row.join("  "));
            }
        }
    }
}

/// `engram eval locomo` and `engram eval longmemeval`.
pub fn eval_command(which: EvalCommand) -> engram::Result<()> {
    match which {
        EvalCommand::Locomo(args) => locomo_command(args),
        EvalCommand::Longmemeval(args) => longmemeval_command(args),
    }
}

/// `engram eval locomo`.
fn locomo_command(args: LocomoArgs) -> engram::Result<()> {
    let LocomoArgs {
        dataset,
        conversations,
        k,
        json,
        fusion,
        fusion_study,
        mode,
        entity_boost,
        pagerank_weight,
        one_space,
        ablation,
        sweep,
        context_window,
        expansion_weight,
        vector_context,
        store,
    } = args;
    let mut store = store.config()?;
    let fusion = match fusion.as_deref() {
        Some(f) => Some(parse_fusion(f).ok_or_else(|| {
            engram::Error::new(engram::ErrorKind::InvalidInput, "--fusion is convex:<alpha> or rrf:<k>")
        })?),
        None => None,
    };
    let range = match conversations.as_deref() {
        Some(s) => Some(
            parse_range(s)
                .ok_or_else(|| engram::Error::new(engram::ErrorKind::InvalidInput, "--conversations is N or A-B"))?,
        ),
        None => None,
    };
    store.config.fusion = fusion;
    if let Some(b) = entity_boost {
        store.config.entity_boost = b.clamp(0.0, 1.0);
    }
    if let Some(w) = pagerank_weight {
        store.config.pagerank_weight = w.clamp(0.0, 1.0);
    }
    if let Some(w) = context_window {
        store.config.context.window = w;
    }
    if let Some(a) = expansion_weight {
        store.config.expansion.weight = a.max(0.0);
    }
    if let Some(g) = vector_context {
        if !(0.0..=1.0).contains(&g) {
            return Err(engram::Error::new(engram::ErrorKind::InvalidInput, "--vector-context is 0..=1"));
        }
        store.config.vector_context = Some(g);
    }
    let opts = engram::eval::LocomoOptions {
        conversations: range,
        ks: k,
        fusion_study,
        threads: mode == "threads",
        one_space,
        ablation,
        sweep,
    };
    run_eval(store, json, |store, progress| engram::eval::locomo(store, &dataset, &opts, progress), print_report)
}

fn print_report(r: &engram::eval::LocomoReport) {
    println!(
        "dataset {}: {} memories, {} questions ({} skipped: no valid evidence)",
        r.dataset, r.memories, r.questions, r.skipped_questions
    );
    println!(
        "mode {}: {} turns, {:.3} memories per turn, evidence coverage {:.3}",
        r.mode, r.turns, r.memories_per_turn, r.evidence_coverage
    );
    if let (Some(p50), Some(p99)) = (r.thread_create_ms.get("p50"), r.thread_create_ms.get("p99")) {
        println!("thread create with extraction: p50 {p50:.2} ms, p99 {p99:.2} ms per session");
    }
    println!(
        "ingest {:.0} memories/s; hybrid search p50 {:.2} ms, p99 {:.2} ms",
        r.ingest_per_s, r.search_ms["p50"], r.search_ms["p99"]
    );
    let g = &r.graph;
    println!(
        "graph: {} entities, {} edges; {} communities (sizes min {} / median {} / max {}, {} entities in them), \
         modularity {:.3}, purity {:.3}, {} crystals, {:.0} ms",
        g.entities,
        g.edges,
        g.communities,
        g.sizes[0],
        g.sizes[1],
        g.sizes[2],
        g.entities_in_communities,
        g.modularity,
        g.purity,
        g.crystals,
        g.elapsed_ms
    );
    println!("  titles: {}", g.sample_titles.join(" | "));
    println!("timeline review events raised while ingesting: {}", r.review_events);
    let l = &r.lexical_index;
    println!(
        "lexical index: {} documents, {} terms, {} postings; {} memories with a thread or source position",
        l.documents, l.terms, l.postings, l.positioned
    );
    for (method, metrics) in &r.methods {
        println!("\n{method}");
        for (metric, cats) in metrics {
            let row: Vec<String> = cats.iter().map(|(c, v)| format!("{c}={v:.3}")).collect();
            println!("  {metric:<10} {}", row.join("  "));
        }
    }
}
