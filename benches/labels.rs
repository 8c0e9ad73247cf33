//! Label maintenance benchmark: merge candidates over L labels (cold: names embedded; warm: cached), health,
//! consolidation dry run, merge and its reversal, and a read by id with access tracking.
//!
//! `cargo bench --bench labels -- [--labels 2000] [--memories 4000]`

mod common;
use common::arg;

use std::time::Instant;

use engram::{KnowledgeStore, NewMemory, StoreConfig};

const WORDS: [&str; 48] = [
    "rust",
    "python",
    "travel",
    "budget",
    "design",
    "health",
    "music",
    "garden",
    "cooking",
    "finance",
    "reading",
    "running",
    "kernel",
    "database",
    "search",
    "ranking",
    "vector",
    "graph",
    "lisbon",
    "tokyo",
    "family",
    "career",
    "meeting",
    "roadmap",
    "launch",
    "hiring",
    "security",
    "privacy",
    "testing",
    "release",
    "mobile",
    "web",
    "api",
    "cloud",
    "storage",
    "memory",
    "embedding",
    "model",
    "paper",
    "review",
    "idea",
    "bug",
    "feature",
    "client",
    "server",
    "daemon",
    "notes",
    "journal",
];

fn pct(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

/// Label `i`: two words, with every 25th a separator/case fork of an earlier one.
fn label(i: usize) -> String {
    let (a, b) = (WORDS[i % WORDS.len()], WORDS[(i / WORDS.len() + i) % WORDS.len()]);
    let tag = i / (WORDS.len() * WORDS.len());
    match i % 25 {
        0 if i > 0 => label(i - 1).replace(' ', "-").to_uppercase(),
        _ if tag > 0 => format!("{a} {b} {tag}"),
        _ => format!("{a} {b}"),
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (labels, memories) = (arg(&args, "--labels", 2000), arg(&args, "--memories", 4000));
    let dir = tempfile::tempdir().expect("tempdir");
    let store = KnowledgeStore::open(StoreConfig::new(dir.path())).expect("open");
    let batch: Vec<NewMemory> = (0..memories)
        .map(|i| NewMemory {
            id: Some(format!("m{i}")),
            content: format!("note {i} about {} and {}", WORDS[i % 48], WORDS[(i * 7) % 48]),
            labels: Some(vec![label(i % labels), label((i * 31 + 7) % labels)]),
            ..Default::default()
        })
        .collect();
    let t0 = Instant::now();
    for chunk in batch.chunks(500) {
        store.memories().create_many(chunk.to_vec()).expect("seed");
    }
    let vocab = store.labels().health(Some("default")).expect("health");
    println!(
        "seeded {memories} memories, {} labels ({} canonical forks) in {:.1} s",
        vocab.vocabulary_size,
        vocab.canonical_fork_backlog,
        t0.elapsed().as_secs_f64()
    );

    let t = Instant::now();
    let pairs = store.labels().merge_candidates("default", 0.82, 2000, 100).expect("candidates");
    let cold = t.elapsed().as_secs_f64() * 1000.0;
    let mut warm = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        store.labels().merge_candidates("default", 0.82, 2000, 100).expect("candidates");
        warm.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    println!(
        "merge candidates over {} labels: cold {cold:.0} ms (names embedded), warm p50 {:.0} ms; {} pairs >= 0.82",
        vocab.vocabulary_size.min(2000),
        pct(&mut warm, 0.5),
        pairs.len()
    );

    let t = Instant::now();
    let h = store.labels().health(None).expect("health");
    println!(
        "health: {:.1} ms (coverage {:.2}, singleton rate {:.2})",
        t.elapsed().as_secs_f64() * 1000.0,
        h.coverage,
        h.singleton_rate
    );
    let t = Instant::now();
    let plan = store.labels().consolidate("default", true, 5000).expect("plan");
    println!("consolidate dry run: {:.1} ms, {} groups", t.elapsed().as_secs_f64() * 1000.0, plan.groups.len());
    let t = Instant::now();
    let prev = store.labels().consolidation_preview("default", 0.82, 2000, 40).expect("preview");
    println!(
        "consolidation preview: {:.1} ms, {} judged pairs",
        t.elapsed().as_secs_f64() * 1000.0,
        prev.semantic.len()
    );

    let all = store.labels().list("default", Default::default(), false, 1000, 0).expect("labels");
    let (mut merge, mut reverse) = (Vec::new(), Vec::new());
    for pair in all.chunks(2).take(50) {
        let [a, b] = pair else { break };
        let t = Instant::now();
        let rec = store.labels().merge("default", &a.id, &b.id).expect("merge");
        merge.push(t.elapsed().as_secs_f64() * 1000.0);
        let t = Instant::now();
        store.labels().reverse_merge("default", &rec.merge_id).expect("reverse");
        reverse.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    println!(
        "merge p50 {:.2} ms, reverse p50 {:.2} ms ({} each)",
        pct(&mut merge, 0.5),
        pct(&mut reverse, 0.5),
        merge.len()
    );

    let mut reads = Vec::new();
    let mut gets = Vec::new();
    for i in 0..500 {
        let id = format!("m{}", (i * 13) % memories);
        let t = Instant::now();
        store.memories().read(&id, None).expect("read");
        reads.push(t.elapsed().as_secs_f64() * 1000.0);
        let t = Instant::now();
        store.memories().get(&id, None).expect("get");
        gets.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    println!(
        "read by id with access tracking p50 {:.3} ms p99 {:.3} ms; plain get p50 {:.3} ms",
        pct(&mut reads, 0.5),
        pct(&mut reads, 0.99),
        pct(&mut gets, 0.5)
    );
}
