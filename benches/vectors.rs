//! The vector path on real sentence vectors, through the library: a store with an external embedder takes
//! caller-supplied all-MiniLM-L6-v2 vectors (384 dimensions), builds its HNSW graph in parallel, saves it and
//! attaches it at reopen.
//!
//! `cargo bench --bench vectors -- --dataset DIR [--n 100000] [--queries 1000] [--m 16] [--ef-construction 100]
//! [--ef-search 96] [--json]`
//!
//! DIR holds `corpus.jsonl` (`{"id", "text"}` per line) and `corpus.f32` (rows of 384 little-endian f32, same
//! order), made by `benches/compare/run.sh` (real English sentences, embedded once). The last `--queries` rows
//! are the held-out queries; the first `--n` rows are stored.
//!
//! Reports: graph build rate (vectors/s, every core), insert rate through `create_memories` (batches of 1,000,
//! one durable commit each), time from the last write until searches walk a complete graph, vector and hybrid
//! search latency (p50/p99 ms, in-process, the query vector given), recall@10 against exact search, reopen time
//! until the saved graph serves, store size on disk (MiB, redb file and graph) and the store's peak RSS above
//! the benchmark's own data (MiB).

use std::time::Instant;

use engram::embed::ExternalEmbedder;
use engram::index::vector::{Graph, Snapshot, SpaceVectors, VectorBlocks, VectorParams};
use engram::{KnowledgeStore, MemoryFilter, NewMemory, SearchMode, SearchOptions, SearchQuery, StoreConfig};
use rayon::prelude::*;

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1).cloned())
}

fn num(name: &str, default: usize) -> usize {
    arg(name).and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn percentile(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

fn status_kib(key: &str) -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with(key)).and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        })
        .unwrap_or(0.0)
}

/// Resets the peak RSS to the current RSS (Linux `clear_refs` 5).
fn reset_peak() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

fn dir_mib(dir: &std::path::Path) -> f64 {
    fn walk(p: &std::path::Path) -> u64 {
        std::fs::read_dir(p)
            .map(|rd| {
                rd.flatten()
                    .map(|e| {
                        let m = e.metadata().ok();
                        if m.as_ref().is_some_and(|m| m.is_dir()) { walk(&e.path()) } else { m.map_or(0, |m| m.len()) }
                    })
                    .sum()
            })
            .unwrap_or(0)
    }
    walk(dir) as f64 / 1048576.0
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

fn main() -> engram::Result<()> {
    let Some(dataset) = arg("--dataset") else {
        eprintln!("usage: vectors --dataset DIR [--n N] [--queries Q] (DIR from benches/compare/run.sh)");
        std::process::exit(2);
    };
    let dataset = std::path::PathBuf::from(dataset);
    let (n, queries) = (num("--n", 100_000), num("--queries", 1000));
    let defaults = VectorParams::default();
    let params = VectorParams {
        m: num("--m", defaults.m),
        ef_construction: num("--ef-construction", defaults.ef_construction),
        ef_search: num("--ef-search", defaults.ef_search),
        ..defaults
    };
    let dim = 384;
    let texts: Vec<String> = std::fs::read_to_string(dataset.join("corpus.jsonl"))?
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).map(|v| v["text"].as_str().unwrap_or("").to_string()))
        .collect::<Result<_, _>>()
        .map_err(|e| engram::Error::new(engram::ErrorKind::InvalidInput, e.to_string()))?;
    let raw = std::fs::read(dataset.join("corpus.f32"))?;
    let all: Vec<Vec<f32>> = raw
        .chunks_exact(dim * 4)
        .map(|r| r.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect())
        .collect();
    drop(raw);
    assert!(all.len() >= n + queries && texts.len() == all.len(), "dataset has {} rows", all.len());
    let docs = &all[..n];
    let qs = &all[all.len() - queries..];
    let qtexts = &texts[texts.len() - queries..];
    println!(
        "vectors: {n} all-MiniLM-L6-v2 vectors ({dim} dims), {queries} held-out queries, k=10, M={} \
         ef_construction={} ef_search={}",
        params.m, params.ef_construction, params.ef_search
    );

    // Exact top-10 of every query (ground truth), by document number.
    let truth: Vec<Vec<usize>> = qs
        .par_iter()
        .map(|q| {
            let mut s: Vec<(f32, usize)> = docs.iter().enumerate().map(|(i, d)| (dot(q, d), i)).collect();
            s.select_nth_unstable_by(10, |a, b| b.0.total_cmp(&a.0));
            s.truncate(10);
            s.into_iter().map(|x| x.1).collect()
        })
        .collect();
    let recall = |hits: &[Vec<usize>]| -> f64 {
        let found: usize = hits.iter().zip(&truth).map(|(h, t)| h.iter().filter(|d| t.contains(d)).count()).sum();
        found as f64 / (truth.len() * 10) as f64
    };

    // 1. The graph alone: parallel build rate, walk latency and recall.
    let items: Vec<(u64, Vec<f32>)> = docs.iter().enumerate().map(|(i, v)| (i as u64, v.clone())).collect();
    let snapshot = Snapshot {
        dim,
        docnos: (0..docs.len() as u64).collect(),
        vectors: VectorBlocks::from_flat(dim, &docs.iter().flat_map(|v| v.iter().copied()).collect::<Vec<f32>>()),
    };
    let t0 = Instant::now();
    let graph = Graph::build(params, snapshot, &|| false).expect("not cancelled");
    let build_s = t0.elapsed().as_secs_f64();
    drop(graph);
    let mut idx = SpaceVectors::new(dim, params);
    idx.insert_batch(&items);
    idx.build_now();
    drop(items);
    let everything = |_: u64| true;
    let mut lat = Vec::with_capacity(queries);
    let mut scores = Vec::with_capacity(queries);
    for q in qs {
        let t = Instant::now();
        let h = idx.search(q, 10, &everything, None);
        lat.push(t.elapsed().as_secs_f64() * 1000.0);
        scores.push(h.iter().map(|x| x.docno as usize).collect::<Vec<usize>>());
    }
    let graph_recall = recall(&scores);
    let (walk50, walk99) = (percentile(&mut lat.clone(), 0.5), percentile(&mut lat, 0.99));
    println!(
        "graph build: {build_s:.1} s, {:.0} vectors/s on {} threads; walk p50 {walk50:.3} ms, p99 {walk99:.3} ms, \
         recall@10 {graph_recall:.4}; graph memory {:.0} MiB",
        n as f64 / build_s,
        rayon::current_num_threads(),
        idx.heap_bytes() as f64 / 1048576.0
    );
    drop(idx);

    // 2. The store: caller-supplied vectors through create_memories.
    let dir = std::env::temp_dir().join(format!("engram-vectors-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let config = || StoreConfig {
        vector: params,
        ..StoreConfig::new(&dir).embedder(std::sync::Arc::new(ExternalEmbedder::new(dim).expect("384 is valid")))
    };
    let base_rss = status_kib("VmRSS:") / 1024.0;
    reset_peak();
    let store = KnowledgeStore::open(config())?;
    let t0 = Instant::now();
    for (b, chunk) in docs.chunks(1000).enumerate() {
        let batch = chunk
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let k = b * 1000 + i;
                NewMemory {
                    id: Some(format!("s{k}")),
                    content: texts[k].clone(),
                    embedding: Some(v.clone()),
                    ..Default::default()
                }
            })
            .collect();
        store.memories().create_many(batch)?;
    }
    let insert_s = t0.elapsed().as_secs_f64();
    let t1 = Instant::now();
    assert!(store.admin().wait_for_indexes(std::time::Duration::from_secs(3600)));
    let ready_s = t1.elapsed().as_secs_f64();
    // Searches are timed with the store idle: the community and PageRank recompute after the load done.
    assert!(store.graph().wait(std::time::Duration::from_secs(3600)));
    let search = |store: &KnowledgeStore, mode: SearchMode| -> engram::Result<(f64, f64, f64)> {
        let mut lat = Vec::with_capacity(queries);
        let mut scores = Vec::with_capacity(queries);
        for (q, text) in qs.iter().zip(qtexts) {
            let query = SearchQuery {
                query: text.clone(),
                space_id: "default".into(),
                limit: 10,
                filter: MemoryFilter::default(),
                mode,
                fusion: None,
                query_embedding: Some(q.clone()),
                // Vector mode measures the index: no decay, importance or PageRank priors on the ranking.
                options: SearchOptions { priors: (mode == SearchMode::Vector).then_some(false), ..Default::default() },
            };
            let t = Instant::now();
            let r = store.search().run(&query)?;
            lat.push(t.elapsed().as_secs_f64() * 1000.0);
            scores.push(
                r.hits.iter().filter_map(|h| h.view.memory.id.strip_prefix('s')?.parse::<usize>().ok()).collect(),
            );
        }
        Ok((percentile(&mut lat.clone(), 0.5), percentile(&mut lat, 0.99), recall(&scores)))
    };
    let (v50, v99, v_recall) = search(&store, SearchMode::Vector)?;
    let (h50, h99, _) = search(&store, SearchMode::Hybrid)?;
    if std::env::args().any(|a| a == "--tables") {
        let st = store.admin().storage_stats()?;
        println!(
            "store file {:.1} MiB; tables (stored / metadata / fragmented MiB):",
            st.file_bytes as f64 / 1048576.0
        );
        for t in st.tables.iter().filter(|t| t.stored_bytes + t.fragmented_bytes > 1 << 20) {
            let mib = |b: u64| b as f64 / 1048576.0;
            println!(
                "  {:<18} {:>7.1} {:>6.1} {:>6.1}",
                t.table,
                mib(t.stored_bytes),
                mib(t.metadata_bytes),
                mib(t.fragmented_bytes)
            );
        }
    }
    let t2 = Instant::now();
    drop(store);
    let close_s = t2.elapsed().as_secs_f64();
    let peak = status_kib("VmHWM:") / 1024.0 - base_rss;
    let disk = dir_mib(&dir);
    let redb = std::fs::metadata(dir.join("engram.redb")).map_or(0.0, |m| m.len() as f64 / 1048576.0);

    // 3. Reopen: until the saved graph serves searches.
    let t0 = Instant::now();
    let store = KnowledgeStore::open(config())?;
    let open_s = t0.elapsed().as_secs_f64();
    let ready = store.admin().wait_for_indexes(std::time::Duration::from_secs(3600));
    let reopen_s = t0.elapsed().as_secs_f64();
    let stats = store.admin().vector_index_stats();
    let attached = stats.iter().map(|s| s.graph_points).sum::<usize>();
    let (r50, r99, _) = search(&store, SearchMode::Hybrid)?;
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);

    println!(
        "store insert: {:.0} docs/s ({insert_s:.1} s, batches of 1,000, one durable commit each); full speed \
         {ready_s:.1} s after the last write ({:.0} docs/s from first write to full speed)",
        n as f64 / insert_s,
        n as f64 / (insert_s + ready_s)
    );
    println!("store vector search: p50 {v50:.3} ms, p99 {v99:.3} ms, recall@10 {v_recall:.4}");
    println!("store hybrid search (query vector given): p50 {h50:.3} ms, p99 {h99:.3} ms");
    println!(
        "close (graph saved) {close_s:.2} s; reopen {open_s:.2} s, HNSW-speed searches after {reopen_s:.2} s \
         (ready {ready}, {attached} graph points attached); hybrid after reopen p50 {r50:.3} ms, p99 {r99:.3} ms"
    );
    println!("disk: {disk:.0} MiB ({redb:.0} MiB redb file); store peak RSS above the loaded data: {peak:.0} MiB");
    if std::env::args().any(|a| a == "--json") {
        println!(
            "{}",
            serde_json::json!({
                "store": "engram (library)", "n": n, "queries": queries, "m": params.m,
                "ef_construction": params.ef_construction, "ef_search": params.ef_search,
                "graph_build_vectors_per_s": n as f64 / build_s, "graph_walk_p50_ms": walk50,
                "graph_walk_p99_ms": walk99, "graph_recall_at_10": graph_recall,
                "insert_docs_per_s": n as f64 / insert_s, "full_speed_after_s": insert_s + ready_s,
                "search_p50_ms": v50, "search_p99_ms": v99, "recall_at_10": v_recall,
                "hybrid_p50_ms": h50, "hybrid_p99_ms": h99, "reopen_s": reopen_s, "disk_mib": disk,
                "peak_rss_mib": peak,
            })
        );
    }
    Ok(())
}
