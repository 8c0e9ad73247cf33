//! Load test on loopback: a real daemon (in this process) over a store of `--memories` generated memories,
//! `--clients` keep-alive HTTP/1.1 clients mixing writes (20 %), searches (50 %) and reads by id (30 %) for
//! `--seconds`, reporting throughput, p50/p99 latency per kind, errors, and the process RSS each minute (the
//! growth between the second and the last minute is the leak check).
//!
//! `cargo bench --features server --bench load -- [--memories 100000] [--clients 8] [--seconds 180]`
//!
//! On PostgreSQL (feature `postgres`): `--database-url URL` (an empty schema; the store's tables are made there),
//! and `--daemons N` to serve it from N daemons sharing the database (N stores opened in this process, each
//! with its own data directory, pool, indexes and server on its own port; client `c` talks to daemon `c % N`).
//! `--existing` serves a database that already holds `--memories` memories of an earlier run (ids
//! `mem-000000`..): nothing is generated, the vector index is built as at the end of a bulk load (timed), and
//! `--index-wait SECS` (default 900) bounds the wait for the daemons' in-memory indexes. `--data-dir DIR` keeps the
//! first daemon's data directory in DIR (a temporary one otherwise), so that a later `--existing` run opens with
//! the index snapshot and HNSW graphs it saved at close. `--publish` publishes the first daemon's indexes into
//! the database once they are complete (timed), so that a daemon with an empty data directory starts from
//! the publication: after the `--daemons` ones (from the tables) one more opens from it. Each further daemon
//! reports its open, its first search and its complete indexes. `--load-threads N` (default 2) writes the
//! bulk load's batches of 5,000 from N threads at once. `--index-mode database` opens every daemon in the
//! database index mode (no per-memory index in memory; `docs/deploy.md`, "Index modes").

mod common;
use common::{Conn, SplitMix, arg, pct, rss_mib};

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use engram::api::ServiceInfo;
use engram::server::{ServerConfig, start};
use engram::{KnowledgeStore, NewMemory, StoreConfig};

/// The daemon's allocator, as `engram serve` has it (src/bin/engram/main.rs): mimalloc with feature
/// `mimalloc`, else the system's malloc with its arenas capped ([`engram::server::cap_malloc_arenas`]).
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const KEY: &str = "load-test-key";
const WORDS: &[&str] = &[
    "coffee", "meeting", "project", "garden", "travel", "budget", "report", "family", "doctor", "music", "recipe",
    "deadline", "python", "rust", "invoice", "hiking", "weekend", "birthday", "office", "client", "server", "design",
    "review", "launch", "morning", "evening", "dinner", "airport", "hotel", "train", "book", "movie",
];

fn main() {
    engram::server::cap_malloc_arenas();
    let args: Vec<String> = std::env::args().collect();
    let n = arg(&args, "--memories", 100_000);
    let clients = arg(&args, "--clients", 8);
    let seconds = arg(&args, "--seconds", 180);
    // `--data-dir DIR`: the (first) daemon's data directory, kept after the run, so that a later `--existing` run
    // opens with what it saved at close (its index snapshot and HNSW graphs); a temporary directory otherwise.
    let kept = args.iter().position(|a| a == "--data-dir").and_then(|i| args.get(i + 1)).map(std::path::PathBuf::from);
    let temp = tempfile::tempdir().expect("tempdir");
    let dir_path = kept.unwrap_or_else(|| temp.path().to_path_buf());
    let mut config = StoreConfig::new(&dir_path);
    config.database_url = args.iter().position(|a| a == "--database-url").and_then(|i| args.get(i + 1)).cloned();
    // `--index-mode database`: every daemon searches through the database and keeps no per-memory index.
    let database_mode = args.iter().position(|a| a == "--index-mode").and_then(|i| args.get(i + 1)).map(String::as_str)
        == Some("database");
    if database_mode {
        config.index_mode = engram::IndexMode::Database;
    }
    let config_url = config.database_url.clone();
    println!("backend: {}", if config.database_url.is_some() { "postgres" } else { "redb" });
    let t = Instant::now();
    let store = Arc::new(KnowledgeStore::open(config).expect("open"));
    println!("opened in {:.1} s; RSS {:.0} MiB", t.elapsed().as_secs_f64(), rss_mib());
    let existing = args.iter().any(|a| a == "--existing");
    let index_wait = Duration::from_secs(arg(&args, "--index-wait", 900) as u64);
    let t = Instant::now();
    // `--load-threads N` (default 2): threads writing batches at once. Writes take turns under the writer lock,
    // so a second thread prepares its batch (text analysis, entities, embedding) while the first one's commit
    // waits for the database: the pipeline a bulk loader gets from concurrent batches. Batch `b` holds
    // memories `5000·b ..` with words drawn from `SplitMix(11 + b)`, whichever thread writes it.
    let load_threads = arg(&args, "--load-threads", 2).max(1);
    let (_, built) = store
        .admin()
        .bulk_load(|store| {
            let next = AtomicU64::new(0);
            let done = AtomicU64::new(if existing { n as u64 } else { 0 });
            std::thread::scope(|scope| {
                for _ in 0..load_threads {
                    scope.spawn(|| {
                        loop {
                            let b = next.fetch_add(1, Ordering::Relaxed) as usize;
                            let from = b * 5000;
                            if existing || from >= n {
                                return;
                            }
                            let mut rng = SplitMix(11 + b as u64);
                            let batch: Vec<NewMemory> = (from..(from + 5000).min(n))
                                .map(|k| {
                                    let words: Vec<&str> = (0..12).map(|_| WORDS[rng.below(WORDS.len())]).collect();
                                    NewMemory {
                                        id: Some(format!("mem-{k:06}")),
                                        content: format!("Note {k}: {}.", words.join(" ")),
                                        ..Default::default()
                                    }
                                })
                                .collect();
                            let len = batch.len() as u64;
                            store.memories().create_many(batch).expect("ingest");
                            let i = done.fetch_add(len, Ordering::Relaxed) + len;
                            if i.is_multiple_of(100_000) && (i as usize) < n {
                                let secs = t.elapsed().as_secs_f64();
                                println!(
                                    "  {i} memories after {secs:.0} s ({:.0}/s so far); RSS {:.0} MiB",
                                    i as f64 / secs,
                                    rss_mib()
                                );
                            }
                        }
                    });
                }
            });
            Ok(())
        })
        .expect("bulk load");
    let verb = if existing { "opened with" } else { "loaded" };
    println!("store: {verb} {n} memories in {:.1} s; RSS {:.0} MiB", t.elapsed().as_secs_f64(), rss_mib());
    if let Some(b) = built {
        println!(
            "pgvector HNSW index: {} index(es) over {} vectors built in {:.1} s (part of the time above)",
            b.indexes,
            b.vectors,
            b.elapsed_ms / 1000.0
        );
    }
    if let Ok(Some(bytes)) = store.storage().size_bytes() {
        println!(
            "database size: {:.0} MiB (tables, TOAST and indexes of the store's schema)",
            bytes as f64 / 1048576.0
        );
    }
    // Steady state: the background HNSW build (minutes for 100,000 vectors on 2 cores) is done first.
    let t = Instant::now();
    let complete = store.admin().wait_for_indexes(index_wait);
    println!("indexes complete: {complete} after {:.0} s; RSS {:.0} MiB", t.elapsed().as_secs_f64(), rss_mib());
    // And the graph recompute (communities, PageRank) of the loaded store, which otherwise takes a core during
    // the measurement (minutes at 1M); the run's writes do not start another (it waits for writes to pause).
    let t = Instant::now();
    // The database index mode leaves the recompute to daemons with in-memory indexes: nothing to wait for.
    let done = !database_mode && store.graph().wait(index_wait);
    println!("graph recompute done: {done} after {:.0} s", t.elapsed().as_secs_f64());
    let daemons = arg(&args, "--daemons", 1).max(1);
    let mut stores = vec![store.clone()];
    let mut dirs = Vec::new();
    // Opens another daemon with an empty data directory; reports its open, first search and complete indexes.
    let open_daemon = |stores: &mut Vec<Arc<KnowledgeStore>>, dirs: &mut Vec<tempfile::TempDir>, from: &str| {
        let d = tempfile::tempdir().expect("tempdir");
        let mut c = StoreConfig::new(d.path());
        c.database_url = config_url.clone();
        if database_mode {
            c.index_mode = engram::IndexMode::Database;
        }
        assert!(c.database_url.is_some(), "--daemons and --publish need --database-url");
        let t = Instant::now();
        let s = Arc::new(KnowledgeStore::open(c).expect("open another daemon's store"));
        let opened = t.elapsed().as_secs_f64();
        let q = engram::SearchQuery {
            query: "coffee meeting".into(),
            space_id: "default".into(),
            limit: 10,
            ..Default::default()
        };
        let hits = s.search().run(&q).expect("first search").hits.len();
        let searched = t.elapsed().as_secs_f64();
        s.admin().wait_for_indexes(index_wait);
        println!(
            "daemon {} ({from}): store open {opened:.1} s, first search ({hits} hits) {searched:.1} s, indexes \
             complete {:.1} s after start; RSS {:.0} MiB",
            stores.len() + 1,
            t.elapsed().as_secs_f64(),
            rss_mib()
        );
        stores.push(s);
        dirs.push(d);
    };
    for _ in 1..daemons {
        open_daemon(&mut stores, &mut dirs, "the tables");
    }
    if args.iter().any(|a| a == "--publish") {
        let t = Instant::now();
        let p = store.admin().publish_indexes().expect("publish");
        println!("published in {:.1} s: {p:?}", t.elapsed().as_secs_f64());
        open_daemon(&mut stores, &mut dirs, "the publication");
    }
    let mut servers = Vec::new();
    for (i, s) in stores.iter().enumerate() {
        let mut cfg = ServerConfig::new(if i == 0 { &dir_path } else { dirs[i - 1].path() });
        cfg.addr = "127.0.0.1:0".parse().expect("addr");
        cfg.api_key = Some(KEY.into());
        servers.push(start(cfg, s.clone(), ServiceInfo::default()).expect("server"));
    }
    let addrs: Vec<_> = servers.iter().map(|s| s.addr).collect();

    let stop = Arc::new(AtomicBool::new(false));
    let errors = Arc::new(AtomicU64::new(0));
    let lat: Arc<Mutex<[Vec<f64>; 3]>> = Arc::default();
    // Write ids differ from run to run, so that `--existing` runs on one database do not collide.
    let run = std::process::id();
    let mut handles = Vec::new();
    for c in 0..clients {
        let (stop, errors, lat) = (stop.clone(), errors.clone(), lat.clone());
        let addr = addrs[c % addrs.len()];
        handles.push(std::thread::spawn(move || {
            let mut conn = Conn::new(addr, KEY);
            let mut rng = SplitMix(1000 + c as u64);
            let mut local: [Vec<f64>; 3] = Default::default();
            let mut k = 0usize;
            while !stop.load(Ordering::Relaxed) {
                let roll = rng.below(100);
                let t = Instant::now();
                let (kind, status) = if roll < 20 {
                    let body = format!(
                        "{{\"id\":\"load-{run}-{c}-{k}\",\"content\":\"Load note {k} from client {c} about the {} and the {}\"}}",
                        WORDS[rng.below(WORDS.len())],
                        WORDS[rng.below(WORDS.len())]
                    );
                    (0, conn.send("POST", "/memories", &body))
                } else if roll < 70 {
                    let q = format!("{}%20{}", WORDS[rng.below(WORDS.len())], WORDS[rng.below(WORDS.len())]);
                    (1, conn.send("GET", &format!("/memories/search?q={q}&limit=10"), ""))
                } else {
                    (2, conn.send("GET", &format!("/memories/mem-{:06}", rng.below(n)), ""))
                };
                local[kind].push(t.elapsed().as_secs_f64() * 1000.0);
                if status != Some(200) {
                    errors.fetch_add(1, Ordering::Relaxed);
                }
                k += 1;
            }
            let mut all = lat.lock().expect("latencies");
            for (i, v) in local.iter_mut().enumerate() {
                all[i].append(v);
            }
        }));
    }
    let started = Instant::now();
    let mut rss: Vec<f64> = Vec::new();
    while started.elapsed() < Duration::from_secs(seconds as u64) {
        std::thread::sleep(Duration::from_secs(1));
        rss.push(rss_mib());
    }
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        let _ = h.join();
    }
    let elapsed = started.elapsed().as_secs_f64();
    let mut lat = lat.lock().expect("latencies").clone();
    let total: usize = lat.iter().map(Vec::len).sum();
    println!(
        "load: {daemons} daemon(s), {clients} clients, {elapsed:.0} s, {total} requests ({:.0}/s), {} errors",
        total as f64 / elapsed,
        errors.load(Ordering::Relaxed)
    );
    for (i, name) in
        ["write (POST /memories)", "search (GET /memories/search)", "read (GET /memories/{id})"].iter().enumerate()
    {
        let v = &mut lat[i];
        let count = v.len();
        println!("  {name}: {count} requests, p50 {:.2} ms, p99 {:.2} ms", pct(v, 0.5), pct(v, 0.99));
    }
    let minute = |m: usize| -> f64 {
        let s: Vec<f64> = rss.iter().copied().skip(m * 60).take(60).collect();
        if s.is_empty() { 0.0 } else { s.iter().sum::<f64>() / s.len() as f64 }
    };
    let minutes = rss.len().div_ceil(60);
    let (second, last) = (minute(1.min(minutes.saturating_sub(1))), minute(minutes.saturating_sub(1)));
    println!(
        "  RSS: start {:.0} MiB, end {:.0} MiB; mean of minute 2 {second:.0} MiB, of the last minute {last:.0} MiB ({:+.1} %)",
        rss.first().copied().unwrap_or(0.0),
        rss.last().copied().unwrap_or(0.0),
        if second > 0.0 { (last - second) / second * 100.0 } else { 0.0 }
    );
    for srv in servers {
        srv.stop();
    }
}
