//! Several daemons on one PostgreSQL store (issue 19), through their HTTP APIs: real `engram serve` processes,
//! each with its own data directory, on one schema of the `ENGRAM_TEST_PG` server. A write acknowledged by one
//! is read by another at once and found by its searches shortly after (the change feed); concurrent thread
//! appends with overlapping deduplication keys leave no duplicate and no gap; concurrent label merges keep usage
//! counts equal to the edges; one daemon killed with SIGKILL mid-write 100 times loses no acknowledged write
//! while another serves without an error; each graph recompute runs on exactly one daemon.
//! Skips without a server, except under `CI`.
#![cfg(all(feature = "postgres", feature = "server", unix))]

mod backend;

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const KEY: &str = "daemons-test-key";

#[path = "common/daemon_http.rs"]
mod daemon_http;

/// One request; `None` when the connection failed or the reply was cut off (not an acknowledgement).
fn request(port: u16, method: &str, path: &str, body: &str) -> Option<(u16, Value)> {
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().ok()?;
    let (status, body) = daemon_http::request(addr, KEY, method, path, body, Duration::from_secs(30))?;
    Some((status, serde_json::from_str(&body).ok()?))
}

/// A request that must succeed with 200.
fn ok(port: u16, method: &str, path: &str, body: &str) -> Value {
    match request(port, method, path, body) {
        Some((200, v)) => v,
        other => panic!("{method} {path} on :{port}: {other:?}"),
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("a free port")
}

/// One `engram serve` process on the shared database; killed when dropped.
struct Daemon {
    child: Child,
    port: u16,
    log: PathBuf,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Daemon {
    fn start(url: &str, dir: &Path, name: &str, log_level: &str) -> Daemon {
        Daemon::start_with(url, dir, name, log_level, &[])
    }

    /// A daemon in the database index mode (no per-memory index in memory).
    fn start_light(url: &str, dir: &Path, name: &str, log_level: &str) -> Daemon {
        Daemon::start_with(url, dir, name, log_level, &["--index-mode", "database"])
    }

    fn start_with(url: &str, dir: &Path, name: &str, log_level: &str, extra: &[&str]) -> Daemon {
        let port = free_port();
        let log = dir.join(format!("{name}.log"));
        let started = Instant::now();
        let mut child = Command::new(env!("CARGO_BIN_EXE_engram"))
            .args(["serve", "--addr", &format!("127.0.0.1:{port}"), "--api-key", KEY, "--embedding-model", "builtin"])
            .arg("--data-dir")
            .arg(dir.join(name))
            .args(["--database-url", url])
            .args(extra)
            .env("ENGRAM_LOG", log_level)
            .stdout(Stdio::null())
            .stderr(Stdio::from(std::fs::OpenOptions::new().create(true).append(true).open(&log).expect("daemon log")))
            .spawn()
            .expect("daemon starts");
        while started.elapsed() < Duration::from_secs(60) {
            if request(port, "GET", "/livez", "").is_some_and(|(s, _)| s == 200) {
                return Daemon { child, port, log };
            }
            if let Ok(Some(status)) = child.try_wait() {
                panic!("daemon {name} exited ({status}): {}", std::fs::read_to_string(&log).unwrap_or_default());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = child.kill();
        let _ = child.wait();
        panic!("daemon {name} did not come up in 60 s: {}", std::fs::read_to_string(&log).unwrap_or_default());
    }

    fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The shared database's URL (its own schema), or `None` when no server is named (outside CI).
fn shared_store(dir: &Path) -> Option<String> {
    backend::pg_server()?;
    Some(backend::pg_url_for(&dir.join("shared")))
}

/// Polls `f` until it returns `Some`, at most `limit`; the value and how long it took.
fn poll<T>(limit: Duration, mut f: impl FnMut() -> Option<T>) -> Option<(T, Duration)> {
    let started = Instant::now();
    loop {
        if let Some(v) = f() {
            return Some((v, started.elapsed()));
        }
        if started.elapsed() > limit {
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn search_ids(port: u16, q: &str) -> Vec<String> {
    let body = json!({"query": q, "limit": 10}).to_string();
    let v = ok(port, "POST", "/memories/search", &body);
    v.as_array()
        .map(|a| a.iter().filter_map(|h| h["memory"]["id"].as_str().map(String::from)).collect())
        .unwrap_or_default()
}

/// Daemon `c` serves from the database (`--index-mode database`): its searches see every commit at once.
#[test]
fn a_write_on_one_daemon_is_read_at_once_and_found_by_search_on_the_others() {
    let dir = tempfile::tempdir().unwrap();
    let Some(url) = shared_store(dir.path()) else { return };
    // Two daemons with in-memory indexes and one in the database index mode, writing and searching in turn.
    let daemons: Vec<Daemon> = vec![
        Daemon::start(&url, dir.path(), "a", "warn"),
        Daemon::start(&url, dir.path(), "b", "warn"),
        Daemon::start_light(&url, dir.path(), "c", "warn"),
    ];
    let mut lags = Vec::new();
    for i in 0..20 {
        let (writer, reader) = (&daemons[i % 3], &daemons[(i + 1) % 3]);
        let id = format!("m{i}");
        let token = format!("zebrafinch{i}x");
        let body = json!({"id": id, "content": format!("Field note {token}: the colony moved north")}).to_string();
        ok(writer.port, "POST", "/memories", &body);
        // Read by id on another daemon right after the acknowledgement: no wait.
        let got = ok(reader.port, "GET", &format!("/memories/{id}"), "");
        assert_eq!(got["content"], format!("Field note {token}: the colony moved north"));
        let (_, lag) =
            poll(Duration::from_secs(10), || (search_ids(reader.port, &token).first() == Some(&id)).then_some(()))
                .unwrap_or_else(|| panic!("{id} never found by search on another daemon"));
        lags.push(lag);
    }
    // Edits and deletes travel too.
    ok(
        daemons[0].port,
        "PATCH",
        "/memories/m1",
        &json!({"content": "Field note rewritten: kestrel sighted"}).to_string(),
    );
    ok(daemons[1].port, "DELETE", "/memories/m2", "");
    for d in &daemons {
        // Hybrid search also returns vector neighbours: the edited memory ranks first for its new word, and the
        // deleted one is in no result.
        poll(Duration::from_secs(10), || {
            (search_ids(d.port, "kestrel").first().map(String::as_str) == Some("m1")
                && !search_ids(d.port, "zebrafinch2x").contains(&"m2".to_string())
                && !search_ids(d.port, "zebrafinch1x").contains(&"m1".to_string()))
            .then_some(())
        })
        .unwrap_or_else(|| panic!("daemon :{} did not see the edit and the delete", d.port));
    }
    // Listings agree across daemons once the feed is applied (a graph recompute on one daemon may add a crystal
    // memory the others list within the poll interval); the written memories are all there but the deleted one.
    let listing = |d: &Daemon| -> BTreeSet<String> {
        ok(d.port, "GET", "/memories?limit=100", "")["memories"]
            .as_array()
            .map(|a| a.iter().filter_map(|m| m["id"].as_str().map(String::from)).collect())
            .unwrap_or_default()
    };
    let (listed, _) = poll(Duration::from_secs(10), || {
        let l: Vec<BTreeSet<String>> = daemons.iter().map(listing).collect();
        (l[0] == l[1] && l[1] == l[2]).then_some(l)
    })
    .expect("the daemons' listings agree");
    let written: BTreeSet<String> = listed[0].iter().filter(|id| id.starts_with('m')).cloned().collect();
    let expected: BTreeSet<String> = (0..20).filter(|i| *i != 2).map(|i| format!("m{i}")).collect();
    assert_eq!(written, expected);
    lags.sort();
    eprintln!(
        "search on another daemon found a write after: p50 {} ms, max {} ms (20 writes)",
        lags[lags.len() / 2].as_millis(),
        lags[lags.len() - 1].as_millis()
    );
}

#[test]
fn concurrent_appends_from_two_daemons_with_overlapping_keys_leave_no_duplicate_and_no_gap() {
    let dir = tempfile::tempdir().unwrap();
    let Some(url) = shared_store(dir.path()) else { return };
    let a = Daemon::start(&url, dir.path(), "a", "warn");
    let b = Daemon::start(&url, dir.path(), "b", "warn");
    ok(a.port, "POST", "/threads", &json!({"thread_id": "sync", "title": "Sync", "messages": []}).to_string());
    // Both daemons replay the same 120 messages in batches of 1 to 4, starting at different offsets, so that
    // every key is sent at least twice, often at the same moment on both.
    let keys: Vec<String> = (0..120).map(|i| format!("ext-{i:03}")).collect();
    let run = |port: u16, offset: usize, seed: u64| {
        let order: Vec<String> = keys[offset..].iter().chain(&keys[..offset]).cloned().collect();
        std::thread::spawn(move || {
            let mut rng = seed;
            let mut i = 0;
            while i < order.len() {
                rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                let n = (1 + (rng >> 62) as usize).min(order.len() - i);
                let batch: Vec<Value> = order[i..i + n]
                    .iter()
                    .map(|k| json!({"role": "user", "content": format!("message {k}"), "metadata": {"external_id": k}}))
                    .collect();
                let body = json!({"messages": batch}).to_string();
                let (s, v) = request(port, "POST", "/threads/sync/append", &body).expect("append answered");
                assert_eq!(s, 200, "{v}");
                i += n;
            }
        })
    };
    let ta = run(a.port, 0, 1);
    let tb = run(b.port, 37, 2);
    ta.join().unwrap();
    tb.join().unwrap();
    // Each key once; indexes 0..n with no gap; both daemons agree.
    for port in [a.port, b.port] {
        let t = ok(port, "GET", "/threads/sync?limit=1000", "");
        let msgs = t["messages"].as_array().expect("messages");
        let seen: Vec<String> =
            msgs.iter().map(|m| m["metadata"]["external_id"].as_str().unwrap().to_string()).collect();
        let unique: BTreeSet<&String> = seen.iter().collect();
        assert_eq!(seen.len(), unique.len(), "a key appended twice: {seen:?}");
        assert_eq!(unique.len(), keys.len(), "a key missing");
        assert_eq!(t["total_messages"], keys.len());
        // Message ids are `<thread_id>#<order_index>`: 0..n, no gap.
        let idx: Vec<u64> = msgs
            .iter()
            .map(|m| m["id"].as_str().and_then(|id| id.rsplit('#').next()?.parse().ok()).expect("message id"))
            .collect();
        assert_eq!(idx, (0..keys.len() as u64).collect::<Vec<_>>(), "order indexes have a gap");
    }
}

#[test]
fn concurrent_label_merges_on_two_daemons_keep_usage_counts_equal_to_the_edges() {
    let dir = tempfile::tempdir().unwrap();
    let Some(url) = shared_store(dir.path()) else { return };
    let a = Daemon::start(&url, dir.path(), "a", "warn");
    let b = Daemon::start(&url, dir.path(), "b", "warn");
    let names = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta"];
    let batch: Vec<Value> = (0..60)
        .map(|i| {
            json!({"id": format!("m{i}"), "content": format!("Tagged note number {i}"),
                   "labels": [names[i % 6], names[(i / 6) % 6]]})
        })
        .collect();
    for m in &batch {
        ok(a.port, "POST", "/memories", &m.to_string());
    }
    // Merges into overlapping targets from both daemons at once, and one chain (gamma -> delta -> zeta).
    let plans: [(u16, &[(&str, &str)]); 2] = [
        (a.port, &[("alpha", "zeta"), ("gamma", "delta"), ("beta", "zeta")]),
        (b.port, &[("beta", "zeta"), ("delta", "zeta"), ("epsilon", "alpha")]),
    ];
    let outcomes: Arc<Mutex<Vec<(String, u16)>>> = Arc::default();
    let threads: Vec<_> = plans
        .iter()
        .map(|(port, merges)| {
            let (port, merges, outcomes) = (*port, merges.to_vec(), outcomes.clone());
            let merges: Vec<(String, String)> = merges.iter().map(|(s, t)| (s.to_string(), t.to_string())).collect();
            std::thread::spawn(move || {
                for (s, t) in merges {
                    let path = format!("/labels/merge?source_id=label_{s}&target_id=label_{t}");
                    let (status, v) = request(port, "POST", &path, "").expect("merge answered");
                    assert!(matches!(status, 200 | 404 | 409), "{s} -> {t}: {status} {v}");
                    outcomes.lock().unwrap().push((format!("{s}->{t}"), status));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    // Usage counts equal the HAS_LABEL edges read memory by memory, on both daemons.
    let mut edges: BTreeMap<String, u64> = BTreeMap::new();
    for i in 0..60 {
        let m = ok(b.port, "GET", &format!("/memories/m{i}"), "");
        let labels: BTreeSet<String> = m["labels"]
            .as_array()
            .expect("labels")
            .iter()
            .map(|l| l.as_str().map(String::from).unwrap_or_else(|| l["id"].as_str().unwrap_or_default().to_string()))
            .collect();
        assert!(!labels.is_empty(), "m{i} lost every label");
        for l in labels {
            *edges.entry(l).or_default() += 1;
        }
    }
    for port in [a.port, b.port] {
        let labels = ok(port, "GET", "/labels?limit=100", "");
        let usage: BTreeMap<String, u64> = labels
            .as_array()
            .expect("labels")
            .iter()
            .map(|l| (l["id"].as_str().unwrap().to_string(), l["usage_count"].as_u64().unwrap()))
            .filter(|(_, n)| *n > 0)
            .collect();
        let by_id: BTreeMap<String, u64> = edges
            .iter()
            .map(|(k, v)| (if k.starts_with("label_") { k.clone() } else { format!("label_{k}") }, *v))
            .collect();
        assert_eq!(usage, by_id, "usage counts on :{port} vs edges; merges {:?}", outcomes.lock().unwrap());
    }
}

#[test]
fn a_daemon_killed_mid_write_100_times_loses_no_acknowledged_write_and_the_other_serves_throughout() {
    let dir = tempfile::tempdir().unwrap();
    let Some(url) = shared_store(dir.path()) else { return };
    let cycles: usize = std::env::var("ENGRAM_DAEMON_KILLS").ok().and_then(|v| v.parse().ok()).unwrap_or(100);
    // B, in the database index mode, serves reads, searches and writes of its own all along; any non-200 is an
    // error.
    let b = Daemon::start_light(&url, dir.path(), "b", "warn");
    let b_port = b.port;
    let stop = Arc::new(AtomicBool::new(false));
    let b_errors: Arc<Mutex<Vec<String>>> = Arc::default();
    let b_requests = Arc::new(AtomicUsize::new(0));
    let b_acked: Arc<Mutex<Vec<String>>> = Arc::default();
    let serving = {
        let (stop, errors, requests, acked) = (stop.clone(), b_errors.clone(), b_requests.clone(), b_acked.clone());
        std::thread::spawn(move || {
            let mut i = 0u64;
            while !stop.load(Ordering::Acquire) {
                i += 1;
                let (method, path, body) = match i % 3 {
                    0 => (
                        "POST",
                        "/memories".to_string(),
                        json!({"id": format!("b{i}"), "content": format!("Steady note {i} from the surviving daemon")})
                            .to_string(),
                    ),
                    1 => (
                        "POST",
                        "/memories/search".to_string(),
                        json!({"query": "note from daemon", "limit": 5}).to_string(),
                    ),
                    _ => ("GET", "/memories?limit=5".to_string(), String::new()),
                };
                match request(b_port, method, &path, &body) {
                    Some((200, _)) => {
                        if i.is_multiple_of(3) {
                            acked.lock().unwrap().push(format!("b{i}"));
                        }
                    }
                    other => errors.lock().unwrap().push(format!("{method} {path}: {other:?}")),
                }
                requests.fetch_add(1, Ordering::AcqRel);
            }
        })
    };
    let mut a_acked: Vec<(String, String)> = Vec::new();
    let mut rng = 0x5eed_u64;
    let mut restart = Vec::new();
    for cycle in 0..cycles {
        let started = Instant::now();
        let a = Daemon::start(&url, dir.path(), "a", "warn");
        restart.push(started.elapsed());
        let port = a.port;
        rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let kill_after = Duration::from_millis((rng >> 56) % 200);
        // A writer on A until the kill; every write it saw acknowledged must survive.
        let acked: Arc<Mutex<Vec<(String, String)>>> = Arc::default();
        let writer = {
            let acked = acked.clone();
            std::thread::spawn(move || {
                for j in 0.. {
                    let id = format!("a{cycle}-{j}");
                    let content = format!("Cycle {cycle} write {j} before the kill, marker k{cycle}w{j}q");
                    let body = json!({"id": id, "content": content, "labels": ["crash"]}).to_string();
                    match request(port, "POST", "/memories", &body) {
                        Some((200, _)) => acked.lock().unwrap().push((id, content)),
                        _ => break,
                    }
                }
            })
        };
        // Killed a random time after its first acknowledged write, mostly while the next is in flight.
        poll(Duration::from_secs(30), || (!acked.lock().unwrap().is_empty()).then_some(()))
            .unwrap_or_else(|| panic!("cycle {cycle}: the daemon acknowledged no write"));
        std::thread::sleep(kill_after);
        a.kill();
        writer.join().unwrap();
        a_acked.extend(acked.lock().unwrap().drain(..));
    }
    stop.store(true, Ordering::Release);
    serving.join().unwrap();
    let errors = b_errors.lock().unwrap().clone();
    assert!(errors.is_empty(), "the surviving daemon answered errors: {errors:?}");
    assert!(a_acked.len() >= cycles, "too few writes acknowledged by the killed daemon: {}", a_acked.len());
    for (id, content) in &a_acked {
        let (s, v) = request(b_port, "GET", &format!("/memories/{id}"), "").expect("read");
        assert_eq!(s, 200, "acknowledged write {id} lost: {v}");
        assert_eq!(v["content"], content.as_str());
    }
    for id in b_acked.lock().unwrap().iter() {
        assert_eq!(request(b_port, "GET", &format!("/memories/{id}"), "").map(|r| r.0), Some(200), "{id} lost");
    }
    // B's searches find the killed daemon's writes (through the feed): every tenth, by its unique marker.
    for (id, content) in a_acked.iter().step_by(10).chain(a_acked.last()) {
        let marker = content.rsplit(' ').next().unwrap_or_default().to_string();
        poll(Duration::from_secs(10), || (search_ids(b_port, &marker).first() == Some(id)).then_some(()))
            .unwrap_or_else(|| panic!("search on the survivor never found {id} by {marker}"));
    }
    restart.sort();
    eprintln!(
        "{cycles} kills: {} writes acknowledged by the killed daemon, 0 lost; survivor served {} requests with 0 errors; \
         restart p50 {} ms",
        a_acked.len(),
        b_requests.load(Ordering::Acquire),
        restart[restart.len() / 2].as_millis()
    );
}

#[test]
fn each_graph_recompute_runs_on_exactly_one_daemon() {
    let dir = tempfile::tempdir().unwrap();
    let Some(url) = shared_store(dir.path()) else { return };
    let daemons: Vec<Daemon> =
        ["a", "b", "c"].iter().map(|n| Daemon::start(&url, dir.path(), n, "engram=info")).collect();
    let people = ["Alice Moreau", "Bruno Diaz", "Chen Wei", "Dana Scott", "Emil Novak", "Farah Khan"];
    for round in 0..3 {
        for (i, d) in daemons.iter().enumerate() {
            for k in 0..4 {
                let (p, q) = (people[(i + k + round) % 6], people[(i + k + round + 1) % 6]);
                let body = json!({"content": format!("{p} met {q} in Lisbon to plan the launch, round {round}")});
                ok(d.port, "POST", "/memories", &body.to_string());
            }
        }
        // Let the graph workers see the writes pause (5 s wake-up + 2 s debounce) and recompute.
        std::thread::sleep(Duration::from_secs(9));
    }
    let runs = |log: &Path| -> Vec<u64> {
        std::fs::read_to_string(log)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains("communities and PageRank recomputed"))
            .filter_map(|l| l.split("generation=").nth(1)?.split_whitespace().next()?.parse().ok())
            .collect()
    };
    let per_daemon: Vec<Vec<u64>> = daemons.iter().map(|d| runs(&d.log)).collect();
    let all: Vec<u64> = per_daemon.iter().flatten().copied().collect();
    let distinct: BTreeSet<u64> = all.iter().copied().collect();
    assert!(!all.is_empty(), "no recompute ran: {per_daemon:?}");
    assert_eq!(all.len(), distinct.len(), "a generation was recomputed by more than one daemon: {per_daemon:?}");
    // Every daemon serves the one result.
    let first = ok(daemons[0].port, "GET", "/communities?limit=50", "");
    for d in &daemons[1..] {
        assert_eq!(ok(d.port, "GET", "/communities?limit=50", ""), first);
    }
    eprintln!("graph recomputes per daemon (generations): {per_daemon:?}");
}

/// A process whose feed position fell below the pruned mark (it missed entries: suspended longer than the
/// retention) rebuilds its indexes from the tables and finds what it missed. The entries are deleted and the
/// mark raised by hand right after a write on the other process, as pruning would after ten minutes.
#[test]
fn a_process_that_missed_pruned_feed_entries_rebuilds_its_indexes() {
    use engram::{KnowledgeStore, NewMemory, SearchQuery, StoreConfig};
    let dir = tempfile::tempdir().unwrap();
    let Some(url) = shared_store(dir.path()) else { return };
    let a = KnowledgeStore::open(StoreConfig::new(dir.path().join("a")).database(&url)).unwrap();
    let b = KnowledgeStore::open(StoreConfig::new(dir.path().join("b")).database(&url)).unwrap();
    let mut admin = engram::storage::postgres::connect(&url).unwrap();
    let found = |store: &KnowledgeStore, q: &str| -> Vec<String> {
        let query = SearchQuery { query: q.into(), space_id: "default".into(), limit: 5, ..Default::default() };
        store.search().run(&query).unwrap().hits.into_iter().map(|h| h.view.memory.id).collect()
    };
    for round in 0..5 {
        let id = format!("missed{round}");
        let token = format!("quokka{round}z");
        b.memories()
            .create(NewMemory {
                id: Some(id.clone()),
                content: format!("The {token} crossed the dunes"),
                ..Default::default()
            })
            .unwrap();
        admin
            .batch_execute(
                "DELETE FROM engram_changes;
                 UPDATE engram_changes_pruned SET upto = (SELECT last_value FROM engram_change_seq)",
            )
            .unwrap();
        poll(Duration::from_secs(10), || (found(&a, &token).first() == Some(&id)).then_some(()))
            .unwrap_or_else(|| panic!("round {round}: the other process never found {id}"));
        // And it goes on applying the feed after the rebuild.
        a.memories()
            .create(NewMemory {
                id: Some(format!("after{round}")),
                content: format!("Wombat {round}y burrows"),
                ..Default::default()
            })
            .unwrap();
        let token = format!("{round}y");
        poll(Duration::from_secs(10), || {
            (found(&b, &format!("wombat {token}")).first().map(String::as_str) == Some(&format!("after{round}")))
                .then_some(())
        })
        .unwrap_or_else(|| panic!("round {round}: the writer's next write was not found on the other"));
    }
}
