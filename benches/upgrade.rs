//! Format upgrade benchmark: a store of N memories written by this release, turned into the format-1 store an
//! earlier release wrote (`downgrade_to_format_1`), then brought back by `upgrade_store`: the backup copy of
//! the file and the migration transaction, timed apart, then the first open after.
//!
//! `cargo bench --bench upgrade -- [--n 100000] [--database-url URL]` (PostgreSQL: feature `postgres`; no
//! backup copy there).

use std::time::Instant;

use engram::store::upgrade::{downgrade_to_format_1, upgrade_store};
use engram::{KnowledgeStore, NewMemory, StoreConfig};

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1).cloned())
}

fn main() {
    let n: usize = arg("--n").and_then(|v| v.parse().ok()).unwrap_or(100_000);
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = StoreConfig::new(dir.path());
    config.database_url = arg("--database-url");
    config.durability = engram::storage::Durability::Eventual;
    let t = Instant::now();
    {
        let store = KnowledgeStore::open(config.clone()).expect("open");
        for at in (0..n).step_by(1000) {
            let batch: Vec<NewMemory> = (at..(at + 1000).min(n))
                .map(|i| NewMemory {
                    id: Some(format!("m{i:07}")),
                    content: format!(
                        "Note {i}: the {} budget for the Lisbon trip is {} euros, booked with the hotel in Alfama",
                        ["flight", "hotel", "museum", "dinner"][i % 4],
                        100 + i % 900
                    ),
                    labels: (i % 5 == 0).then(|| vec!["travel".to_string()]),
                    ..Default::default()
                })
                .collect();
            store.memories().create_many(batch).expect("write");
        }
        store.admin().checkpoint().expect("checkpoint");
    }
    let write_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    assert_eq!(downgrade_to_format_1(&config).expect("downgrade") as usize, n);
    let downgrade_s = t.elapsed().as_secs_f64();
    let file = config.db_path();
    let mib = |p: &std::path::Path| std::fs::metadata(p).map_or(0.0, |m| m.len() as f64 / 1048576.0);
    let before_mib = mib(&file);

    let t = Instant::now();
    let up = upgrade_store(&config).expect("upgrade").expect("a format-1 store is upgraded");
    let total_s = t.elapsed().as_secs_f64();
    assert_eq!(up.records as usize, n);
    let t = Instant::now();
    let store = KnowledgeStore::open(config.clone()).expect("open after the upgrade");
    let open_s = t.elapsed().as_secs_f64();
    assert_eq!(store.admin().health().expect("health").format_version, engram::store::upgrade::FORMAT_VERSION);
    println!(
        "upgrade: {n} memories ({}; written in {write_s:.1} s, turned to format 1 in {downgrade_s:.1} s)",
        if config.database_url.is_some() { "PostgreSQL".to_string() } else { format!("redb file {before_mib:.0} MiB") }
    );
    println!(
        "format 1 -> {}: {total_s:.2} s in all: rewriting the records inside the transaction {:.2} s ({:.0} \
         records/s), the backup copy, the opens and the commit {:.2} s; first open after {open_s:.2} s",
        up.to,
        up.elapsed_ms / 1000.0,
        n as f64 / (up.elapsed_ms / 1000.0),
        total_s - up.elapsed_ms / 1000.0
    );
}
