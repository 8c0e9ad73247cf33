//! Library sources on a real store: ingestion and the column analysis of a data table (CSV, TSV), timed.
//!
//! `cargo bench --bench sources -- --file PATH [--columns a,b] [--repeat 3]`: ingests the file (CSV or TSV by
//! its extension) into a fresh store in a temp dir, then analyses it `--repeat` times, printing the ingestion
//! time, chunks, rows and columns, the best analysis time and throughput (MiB/s), and each column's statistics.

mod common;
use common::{arg, rss_mib};

use std::time::Instant;

use engram::{KnowledgeStore, NewSource, StoreConfig};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let Some(path) = args.iter().position(|a| a == "--file").and_then(|i| args.get(i + 1)).cloned() else {
        eprintln!("usage: cargo bench --bench sources -- --file PATH [--columns a,b] [--repeat 3]");
        return;
    };
    let repeat = arg(&args, "--repeat", 3).max(1);
    let columns: Vec<String> = args
        .iter()
        .position(|a| a == "--columns")
        .and_then(|i| args.get(i + 1))
        .map(|c| c.split(',').map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect())
        .unwrap_or_default();
    let bytes = std::fs::read(&path).expect("read --file");
    let mib = bytes.len() as f64 / 1048576.0;
    let name = std::path::Path::new(&path).file_name().and_then(|n| n.to_str()).unwrap_or("data.csv").to_string();
    let dir = tempfile::tempdir().expect("tempdir");
    let store = KnowledgeStore::open(StoreConfig::new(dir.path())).expect("open");
    let t = Instant::now();
    let r = store
        .sources()
        .ingest(NewSource { bytes, original_name: name.clone(), extract_memories: true, ..Default::default() })
        .expect("ingest");
    let ingest = t.elapsed().as_secs_f64();
    println!(
        "{name}: {mib:.1} MiB ingested in {ingest:.2} s ({:.1} MiB/s): {} chunks, {} memory, state {}; RSS {:.0} MiB",
        mib / ingest,
        r.source.chunk_count,
        r.source.memory_count,
        r.source.lifecycle_state,
        rss_mib()
    );
    println!("summary: {}", r.source.summary);
    let mut best = f64::INFINITY;
    let mut analysis = None;
    for _ in 0..repeat {
        let t = Instant::now();
        analysis = Some(store.sources().analyze(&r.source.id, None, &columns).expect("analyse"));
        best = best.min(t.elapsed().as_secs_f64());
    }
    let a = analysis.expect("one run");
    let sheet = &a.sheets[0];
    println!(
        "analysis: {} rows x {} columns in {:.0} ms (best of {repeat}; {:.1} MiB/s); RSS {:.0} MiB",
        sheet.row_count,
        sheet.column_count,
        best * 1000.0,
        mib / best,
        rss_mib()
    );
    for c in &sheet.columns {
        let top: Vec<String> = c.top.iter().take(3).map(|t| format!("{} ({})", t.value, t.count)).collect();
        println!(
            "  {:<16} {:<8} non-null {:>9} / {:<9} unique {:>9}  min {}  max {}  mean {}  top {}",
            c.name,
            serde_json::to_value(c.dtype).ok().and_then(|v| v.as_str().map(String::from)).unwrap_or_default(),
            c.non_null_count,
            c.count,
            c.unique_count,
            c.min,
            c.max,
            c.mean.map(|m| format!("{m:.3}")).unwrap_or_else(|| "-".into()),
            top.join(", ")
        );
    }
}
