//! Lifecycle benchmark: archive, deprecate, supersede and forget on a store of N memories (one write
//! transaction and fsync each), p50/p99 per move.
//!
//! `cargo bench --bench lifecycle -- [--n 2000]`

use std::time::Instant;

use engram::{KnowledgeStore, NewMemory, StoreConfig, Transition};

fn pct(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: usize =
        args.iter().position(|a| a == "--n").and_then(|i| args.get(i + 1)).and_then(|v| v.parse().ok()).unwrap_or(2000);
    let dir = tempfile::tempdir().expect("tempdir");
    let store = KnowledgeStore::open(StoreConfig::new(dir.path())).expect("open");
    let batch: Vec<NewMemory> = (0..n)
        .map(|i| NewMemory {
            id: Some(format!("m{i}")),
            content: format!("note {i} about the Lisbon trip budget and the hotel in Alfama"),
            ..Default::default()
        })
        .collect();
    store.memories().create_many(batch).expect("seed");
    let mut times: Vec<(&str, Vec<f64>)> =
        vec![("archive", vec![]), ("deprecate", vec![]), ("supersede", vec![]), ("forget", vec![])];
    for i in (0..n).step_by(4) {
        if i + 3 >= n {
            break;
        }
        let moves = [
            (format!("m{i}"), Transition::Archive),
            (format!("m{}", i + 1), Transition::Deprecate { replacement: Some(format!("m{}", i + 3)) }),
            (format!("m{}", i + 2), Transition::Supersede { newer: format!("m{}", i + 3) }),
            (format!("m{}", i + 3), Transition::Forget),
        ];
        for (k, (id, t)) in moves.into_iter().enumerate() {
            let t0 = Instant::now();
            store.memories().change_state(&id, None, t, Some("bench".into())).expect("move");
            times[k].1.push(t0.elapsed().as_secs_f64() * 1000.0);
        }
    }
    for (name, mut v) in times {
        println!(
            "{name:<10} p50 {:.2} ms, p99 {:.2} ms over {} moves ({n} memories)",
            pct(&mut v, 0.5),
            pct(&mut v, 0.99),
            v.len()
        );
    }
}
