//! Crash safety: the real daemon binary is killed with SIGKILL at random moments while a client writes
//! (memories, label changes, lifecycle moves, threads), restarted on the same data directory, and checked:
//! every write acknowledged before the kill is present and intact, the store reopens, and lexical search agrees
//! with the records.
//!
//! The same runs on a store encrypted at rest (a key file), where every commit writes redb's header block to one
//! of two sealed copies after the data is synced (docs/security.md).
//!
//! `ENGRAM_CRASH_CYCLES` sets the number of kill cycles (default 100 plaintext and 200 encrypted; the documented
//! long run uses 1000).
#![cfg(all(feature = "server", unix))]

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const KEY: &str = "crash-test-key";

#[path = "common/daemon_http.rs"]
mod daemon_http;

fn request(addr: SocketAddr, method: &str, path: &str, body: &str) -> Option<(u16, String)> {
    daemon_http::request(addr, KEY, method, path, body, Duration::from_secs(10))
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).unwrap_or(14_500)
}

/// The daemon process; killed when dropped, so a failing assertion leaves no daemon behind.
struct Daemon(Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start(dir: &std::path::Path, port: u16, key: Option<&std::path::Path>) -> (Daemon, Duration) {
    let started = Instant::now();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_engram"));
    cmd.args(["serve", "--addr", &format!("127.0.0.1:{port}"), "--api-key", KEY, "--embedding-model", "builtin"]);
    if let Some(k) = key {
        cmd.arg("--key-file").arg(k);
    }
    let mut child = cmd
        .arg("--data-dir")
        .arg(dir.join("data"))
        .env("ENGRAM_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::from(
            std::fs::OpenOptions::new().create(true).append(true).open(dir.join("daemon.log")).expect("daemon log"),
        ))
        .spawn()
        .expect("daemon starts");
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().expect("addr");
    // Generous: a debug build on a loaded 2-core machine opens a store of thousands of memories slowly.
    while started.elapsed() < Duration::from_secs(60) {
        if request(addr, "GET", "/livez", "").is_some_and(|(s, _)| s == 200) {
            return (Daemon(child), started.elapsed());
        }
        if let Ok(Some(status)) = child.try_wait() {
            let log = std::fs::read_to_string(dir.join("daemon.log")).unwrap_or_default();
            panic!("the daemon exited after a kill ({status}); its log:\n{log}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = child.kill();
    let _ = child.wait();
    let log = std::fs::read_to_string(dir.join("daemon.log")).unwrap_or_default();
    panic!("the daemon did not come up within 60 s after a kill; its log:\n{log}");
}

#[path = "common/splitmix.rs"]
mod splitmix;
use splitmix::mix;

/// What an acknowledged write promises: the memory's content, labels and state. `pending` is a state change
/// that was sent but not acknowledged before the kill: it may or may not have been committed.
#[derive(Clone, Debug)]
struct Expect {
    content: String,
    label: Option<String>,
    state: &'static str,
    pending: Option<&'static str>,
}

impl Expect {
    fn state_ok(&self, got: &serde_json::Value) -> bool {
        *got == self.state || self.pending.is_some_and(|p| *got == p)
    }
}

#[test]
fn acknowledged_writes_survive_sigkill() {
    let cycles: usize = std::env::var("ENGRAM_CRASH_CYCLES").ok().and_then(|v| v.parse().ok()).unwrap_or(100);
    survive_sigkill(cycles, false);
}

#[test]
fn acknowledged_writes_survive_sigkill_on_an_encrypted_store() {
    let cycles: usize = std::env::var("ENGRAM_CRASH_CYCLES").ok().and_then(|v| v.parse().ok()).unwrap_or(200);
    survive_sigkill(cycles, true);
}

fn survive_sigkill(cycles: usize, encrypted: bool) {
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("store.key");
    if encrypted {
        engram::storage::crypt::write_key_file(&key).unwrap();
    }
    let key = encrypted.then_some(key.as_path());
    let port = free_port();
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let acked: Arc<Mutex<BTreeMap<String, Expect>>> = Arc::default();
    let mut threads_acked: Vec<String> = Vec::new();
    let mut rng = 0x5eed_u64;
    let mut reopen = Vec::new();
    let mut writes = 0usize;
    for cycle in 0..cycles {
        let (mut child, took) = start(dir.path(), port, key);
        reopen.push(took);
        // Everything acknowledged so far is there and intact; search finds it by its unique token.
        let expect = acked.lock().unwrap().clone();
        let recent: Vec<(&String, &Expect)> = expect.iter().rev().take(40).collect();
        for (id, e) in &recent {
            let (status, body) = request(addr, "GET", &format!("/memories/{id}"), "").expect("read after restart");
            assert_eq!(status, 200, "cycle {cycle}: acknowledged memory {id} lost: {body}");
            let v: serde_json::Value = serde_json::from_str(&body).unwrap();
            assert_eq!(v["content"], e.content.as_str(), "cycle {cycle}: {id} content");
            assert!(e.state_ok(&v["state"]), "cycle {cycle}: {id} state {} (expected {e:?})", v["state"]);
            if let Some(l) = &e.label {
                assert!(v["labels"].to_string().contains(l.as_str()), "cycle {cycle}: {id} label {l}: {v}");
            }
        }
        if let Some((id, e)) = recent.iter().find(|(_, e)| e.state == "active" && e.pending.is_none()) {
            let token = e.content.split_whitespace().nth(2).unwrap_or("");
            let (_, body) = request(addr, "GET", &format!("/memories/search?q={token}&limit=5"), "").expect("search");
            assert!(body.contains(id.as_str()), "cycle {cycle}: lexical search for {token} misses {id}");
        }
        let (_, body) = request(addr, "GET", "/memories?limit=1&state=all", "").expect("list");
        let total =
            serde_json::from_str::<serde_json::Value>(&body).unwrap()["pagination"]["total"].as_u64().unwrap_or(0);
        assert!(
            total as usize >= expect.values().filter(|e| e.state != "forgotten").count(),
            "cycle {cycle}: total {total}"
        );
        for t in threads_acked.iter().rev().take(5) {
            let (status, _) = request(addr, "GET", &format!("/threads/{t}"), "").expect("thread");
            assert_eq!(status, 200, "cycle {cycle}: acknowledged thread {t} lost");
        }

        // Write until killed.
        let stop = Arc::new(AtomicBool::new(false));
        let writer = {
            let (acked, stop) = (acked.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut n = 0usize;
                let mut threads = Vec::new();
                while !stop.load(Ordering::Acquire) {
                    let id = format!("c{cycle}-w{n}");
                    let content = format!("Cycle {cycle} token{cycle}x{n} about the harbour");
                    let body = serde_json::json!({"id": id, "content": content, "labels": ["crash"]}).to_string();
                    if let Some((200, _)) = request(addr, "POST", "/memories", &body) {
                        acked.lock().unwrap().insert(
                            id.clone(),
                            Expect { content, label: Some("crash".into()), state: "active", pending: None },
                        );
                    }
                    match n % 4 {
                        1 => {
                            let b = serde_json::json!({"labels": ["crash", "edited"]}).to_string();
                            if let Some((200, _)) = request(addr, "PATCH", &format!("/memories/{id}"), &b)
                                && let Some(e) = acked.lock().unwrap().get_mut(&id)
                            {
                                e.label = Some("edited".into());
                            }
                        }
                        2 => {
                            if let Some(e) = acked.lock().unwrap().get_mut(&id) {
                                e.pending = Some("archived");
                            }
                            if let Some((200, _)) = request(addr, "POST", &format!("/memories/{id}/archive"), "{}")
                                && let Some(e) = acked.lock().unwrap().get_mut(&id)
                            {
                                e.state = "archived";
                                e.pending = None;
                            }
                        }
                        3 => {
                            let t = format!("t{cycle}-{n}");
                            let b = serde_json::json!({"thread_id": t, "messages": [{"role": "user", "content": format!("I decided to sail on day {n}.")}]}).to_string();
                            if let Some((200, _)) = request(addr, "POST", "/threads", &b) {
                                threads.push(t);
                            }
                        }
                        _ => {}
                    }
                    n += 1;
                }
                (n, threads)
            })
        };
        let wait = 30 + mix(&mut rng) % 250;
        std::thread::sleep(Duration::from_millis(wait));
        child.0.kill().expect("SIGKILL");
        let _ = child.0.wait();
        stop.store(true, Ordering::Release);
        let (n, t) = writer.join().expect("writer");
        writes += n;
        threads_acked.extend(t);
    }
    // A last restart checks every acknowledged write, not only the recent ones.
    let (child, took) = start(dir.path(), port, key);
    reopen.push(took);
    let expect = acked.lock().unwrap().clone();
    for (id, e) in &expect {
        let (status, body) = request(addr, "GET", &format!("/memories/{id}"), "").expect("read");
        assert_eq!(status, 200, "acknowledged memory {id} lost");
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["content"], e.content.as_str());
        assert!(e.state_ok(&v["state"]), "{id} state {} (expected {e:?})", v["state"]);
    }
    drop(child);
    reopen.sort();
    println!(
        "crash{}: {cycles} SIGKILL cycles, {writes} write attempts, {} acknowledged memories and {} threads intact, 0 lost; reopen to serving p50 {:?}, max {:?}",
        if encrypted { " (encrypted)" } else { "" },
        expect.len(),
        threads_acked.len(),
        reopen[reopen.len() / 2],
        reopen[reopen.len() - 1]
    );
    if encrypted {
        let file = std::fs::read(dir.path().join("data/engram.redb")).unwrap();
        assert!(!file.windows(7).any(|w| w == b"harbour"), "plaintext in the encrypted store file");
    }
}
