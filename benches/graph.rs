//! Graph benchmark: Louvain community detection and PageRank on a planted-partition graph (default 100,000
//! nodes in groups of 100 and 1,000,000 weighted edges, 80 % inside groups), with time, peak memory and how
//! well the planted groups are recovered (purity).
//!
//! `cargo bench --bench graph -- [--nodes 100000] [--edges 1000000] [--group 100] [--resolution 1.0]
//! [--dataset locomo10-dev.json]`; with a dataset it also ingests LoCoMo as threads and times the graph
//! computation and both ZIP exports of that store.
//!
//! At resolution 1 modularity cannot separate groups this small in a graph this large (the resolution limit,
//! Fortunato and Barthelemy, PNAS 2007): communities merge 2-4 planted groups; a higher resolution recovers them.

mod common;
use common::{SplitMix, arg, peak_rss_mib};

use std::time::Instant;

use engram::graph::{louvain, pagerank};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (n, m, group) = (arg(&args, "--nodes", 100_000), arg(&args, "--edges", 1_000_000), arg(&args, "--group", 100));
    let mut rng = SplitMix(42);
    let edges: Vec<(u32, u32, f64)> = (0..m)
        .map(|_| {
            let u = rng.below(n);
            let v = if rng.below(10) < 8 {
                let g = u / group * group;
                (g + rng.below(group)).min(n - 1)
            } else {
                rng.below(n)
            };
            (u as u32, v as u32, 1.0 + rng.below(3) as f64)
        })
        .filter(|(u, v, _)| u != v)
        .collect();
    println!("graph: {n} nodes, {} edges; peak RSS after building {:.0} MiB", edges.len(), peak_rss_mib());
    let t = Instant::now();
    let resolution: f64 = args
        .iter()
        .position(|a| a == "--resolution")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(1.0);
    let p = louvain(n, &edges, resolution);
    let louvain_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let r = pagerank(n, &edges, 0.85);
    let pagerank_s = t.elapsed().as_secs_f64();
    // Purity: each found community counts its most common planted group.
    let mut counts: std::collections::HashMap<(u32, usize), usize> = Default::default();
    for (i, c) in p.community.iter().enumerate() {
        *counts.entry((*c, i / group)).or_default() += 1;
    }
    let mut best = vec![0usize; p.communities];
    for ((c, _), k) in counts {
        best[c as usize] = best[c as usize].max(k);
    }
    let purity = best.iter().sum::<usize>() as f64 / n as f64;
    let mut sizes: Vec<usize> = vec![0; p.communities];
    for c in &p.community {
        sizes[*c as usize] += 1;
    }
    sizes.sort_unstable();
    println!(
        "louvain (resolution {resolution}): {louvain_s:.2} s, {} communities (sizes min {} / median {} / max {}), modularity {:.3}, {} levels, purity {:.3}",
        p.communities,
        sizes.first().copied().unwrap_or(0),
        sizes.get(sizes.len() / 2).copied().unwrap_or(0),
        sizes.last().copied().unwrap_or(0),
        p.modularity,
        p.levels,
        purity
    );
    println!(
        "pagerank: {pagerank_s:.2} s (sum {:.6}); total {:.2} s; peak RSS {:.0} MiB",
        r.iter().sum::<f64>(),
        louvain_s + pagerank_s,
        peak_rss_mib()
    );
    if let Some(path) = args.iter().position(|a| a == "--dataset").and_then(|i| args.get(i + 1)) {
        locomo_exports(std::path::Path::new(path));
    }
}

/// Ingests LoCoMo in threads mode, then times the graph computation and both ZIP exports.
fn locomo_exports(dataset: &std::path::Path) {
    use engram::{ExportKind, ExportParams, KnowledgeStore, StoreConfig};
    let dir = tempfile::tempdir().expect("tempdir");
    let store = KnowledgeStore::open(StoreConfig::new(dir.path())).expect("open");
    let opts = engram::eval::LocomoOptions { threads: true, ..Default::default() };
    engram::eval::locomo(&store, dataset, &opts, false).expect("ingest");
    let t = Instant::now();
    let g = store.graph().recompute().expect("graph");
    println!(
        "LoCoMo store: {} entities, {} edges, {} communities, {} crystals; graph {:.0} ms",
        g.entities,
        g.edges,
        g.communities,
        g.crystals,
        t.elapsed().as_secs_f64() * 1000.0
    );
    for kind in [ExportKind::Wiki, ExportKind::Okf] {
        let t = Instant::now();
        let (path, c) = store.graph().export_library(kind, &ExportParams::default()).expect("export");
        let bytes = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        println!(
            "{kind:?} export: {:.0} ms, {} pages, {} KiB",
            t.elapsed().as_secs_f64() * 1000.0,
            c.pages,
            bytes / 1024
        );
        let _ = std::fs::remove_file(path);
    }
}
