//! Two real daemons (`engram serve --sync`) on one shared folder, and two on folders of their own that pull
//! from each other directly (`--sync-peer`; docs/sync.md): a memory written to one through REST is found by the
//! other's search. Prints the delay from the write's reply to the first search
//! that finds it, median and maximum over the writes (figures, not assertions: the test only asserts that
//! every write arrives).
#![cfg(feature = "server")]

#[path = "../common/daemon_http.rs"]
mod daemon_http;

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use daemon_http::request;

const KEY: &str = "sync-daemons-test-key";

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("a free port")
}

fn engram(args: &[&str], data_dir: &std::path::Path) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_engram")).args(args).arg("--data-dir").arg(data_dir).output().unwrap();
    assert!(out.status.success(), "engram {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// One `engram serve --sync`; killed when dropped.
struct Daemon {
    child: Child,
    addr: SocketAddr,
    log: std::path::PathBuf,
}

impl Daemon {
    fn start(data_dir: &std::path::Path) -> Daemon {
        Daemon::start_on(data_dir, free_port(), &[])
    }

    fn start_on(data_dir: &std::path::Path, port: u16, extra: &[&str]) -> Daemon {
        let log = data_dir.with_extension("log");
        let mut child = Command::new(env!("CARGO_BIN_EXE_engram"))
            .args(["serve", "--sync", "--addr", &format!("127.0.0.1:{port}"), "--api-key", KEY])
            .args(extra)
            .arg("--data-dir")
            .arg(data_dir)
            .env("ENGRAM_LOG", "info")
            .stdout(Stdio::null())
            .stderr(Stdio::from(std::fs::File::create(&log).unwrap()))
            .spawn()
            .unwrap();
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(60) {
            if call(addr, "GET", "/livez", "").is_some_and(|(s, _)| s == 200) {
                return Daemon { child, addr, log };
            }
            if let Ok(Some(status)) = child.try_wait() {
                panic!("daemon exited ({status}): {}", std::fs::read_to_string(&log).unwrap_or_default());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
        panic!("daemon did not come up: {}", std::fs::read_to_string(&log).unwrap_or_default());
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn call(addr: SocketAddr, method: &str, path: &str, body: &str) -> Option<(u16, String)> {
    request(addr, KEY, method, path, body, Duration::from_secs(30))
}

fn found(d: &Daemon, word: &str) -> bool {
    let body = format!(r#"{{"query":"{word}","limit":5,"mode":"lexical"}}"#);
    call(d.addr, "POST", "/memories/search", &body).is_some_and(|(s, b)| s == 200 && b.contains(word))
}

/// Waits until `d` finds `word`; the time it took.
fn arrival(d: &Daemon, word: &str) -> Duration {
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(60) {
        if found(d, word) {
            return t.elapsed();
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("{word} did not arrive in 60 s: {}", std::fs::read_to_string(&d.log).unwrap_or_default());
}

/// Writes `writes` memories to `a` through REST, each found by `b`'s search before the next, then one to `b`
/// found by `a`; prints the median and maximum delay from `a`'s reply to `b`'s first hit.
fn delays(what: &str, a: &Daemon, b: &Daemon, writes: usize, word: &str) {
    let mut delays = Vec::with_capacity(writes);
    for i in 0..writes {
        let word = format!("{word}{i}probe");
        let body = format!(r#"{{"content":"Sync probe {i}: the word is {word}"}}"#);
        let (status, reply) = call(a.addr, "POST", "/memories", &body).expect("a reply");
        assert_eq!(status, 200, "{reply}");
        delays.push(arrival(b, &word));
    }
    // And the other way.
    let back = format!("{word}written0on0b");
    let (status, _) = call(b.addr, "POST", "/memories", &format!(r#"{{"content":"Written on B: {back}"}}"#)).unwrap();
    assert_eq!(status, 200);
    arrival(a, &back);
    delays.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "{what}, {writes} writes: median {:.0} ms, max {:.0} ms (from A's reply to B's first hit)",
        ms(delays[writes / 2]),
        ms(delays[writes - 1])
    );
}

#[test]
fn a_write_to_one_daemon_is_found_by_the_other_through_the_folder() {
    let root = tempfile::tempdir().unwrap();
    let (a_dir, b_dir, folder) = (root.path().join("a"), root.path().join("b"), root.path().join("shared"));
    let folder_arg = folder.to_string_lossy().into_owned();
    let init = engram(&["sync", "init", "--folder", &folder_arg], &a_dir);
    let code = init.split_whitespace().find(|w| w.starts_with("engram-sync-1-")).expect("a pairing code").to_string();
    engram(&["sync", "join", "--folder", &folder_arg, "--code", &code], &b_dir);
    let (a, b) = (Daemon::start(&a_dir), Daemon::start(&b_dir));

    let writes = 50;
    delays("sync through a folder", &a, &b, writes, "zebra");
    // B's health names A, the last time it saw it, and no error.
    let (_, health) = call(b.addr, "GET", "/health", "").unwrap();
    let h: serde_json::Value = serde_json::from_str(&health).unwrap();
    assert_eq!(h["sync"]["enabled"], true, "{health}");
    let peers = h["sync"]["peers"].as_array().unwrap();
    assert_eq!(peers.len(), 1, "{health}");
    assert!(peers[0]["last_seen"].is_string() && peers[0]["error"].is_null(), "{health}");
    assert!(peers[0].get("device_id").is_none() && h["sync"].get("folder").is_none(), "public: no id, no path");
    assert!(peers[0]["applied"].as_u64().unwrap() >= writes as u64, "{health}");
}

/// `GET path` with only the header lines `headers` (no API key unless given): the status and body.
fn get_with(addr: SocketAddr, path: &str, headers: &str) -> (u16, Vec<u8>) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{headers}Connection: close\r\n\r\n").unwrap();
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).unwrap();
    let at = buf.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let status = String::from_utf8_lossy(&buf[..at]).split_whitespace().nth(1).unwrap().parse().unwrap();
    (status, buf[at + 4..].to_vec())
}

#[test]
fn two_daemons_on_folders_of_their_own_pull_from_each_other_with_the_pairing_key_only() {
    let root = tempfile::tempdir().unwrap();
    let (a_dir, b_dir) = (root.path().join("a"), root.path().join("b"));
    let (fa, fb) = (
        root.path().join("a-sync").to_string_lossy().into_owned(),
        root.path().join("b-sync").to_string_lossy().into_owned(),
    );
    let init = engram(&["sync", "init", "--folder", &fa], &a_dir);
    let code = init.split_whitespace().find(|w| w.starts_with("engram-sync-1-")).expect("a pairing code").to_string();
    engram(&["sync", "join", "--folder", &fb, "--code", &code], &b_dir);
    let (pa, pb) = (free_port(), free_port());
    let a = Daemon::start_on(&a_dir, pa, &["--sync-peer", &format!("http://127.0.0.1:{pb}")]);
    let b = Daemon::start_on(&b_dir, pb, &["--sync-peer", &format!("http://127.0.0.1:{pa}")]);

    // The pull routes take the group's pull token, not the API key.
    let key = code.trim_start_matches("engram-sync-1-");
    let key: Vec<u8> = (0..key.len()).step_by(2).map(|i| u8::from_str_radix(&key[i..i + 2], 16).unwrap()).collect();
    let token: String = {
        use sha2::Digest;
        let mut h = sha2::Sha256::new();
        h.update(b"engram-sync-pull-token-v1\0");
        h.update(&key);
        h.finalize().iter().map(|b| format!("{b:02x}")).collect()
    };
    assert_eq!(get_with(a.addr, "/sync/peer/segments", "").0, 401);
    assert_eq!(get_with(a.addr, "/sync/peer/segments", &format!("Authorization: Bearer {KEY}\r\n")).0, 401);
    assert_eq!(get_with(a.addr, "/sync/peer/segments", "x-engram-sync-token: 00\r\n").0, 401);
    let (status, list) = get_with(a.addr, "/sync/peer/segments", &format!("x-engram-sync-token: {token}\r\n"));
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&list));
    let list: serde_json::Value = serde_json::from_slice(&list).unwrap();
    assert!(list["segments"].is_object(), "{list}");
    // And the token opens nothing else.
    assert_eq!(get_with(a.addr, "/memories", &format!("x-engram-sync-token: {token}\r\n")).0, 401);
    assert_eq!(
        get_with(a.addr, "/sync/peer/segments/../../api-key/1", &format!("x-engram-sync-token: {token}\r\n")).0 / 100,
        4
    );

    let writes = 20;
    delays("sync directly between two daemons", &a, &b, writes, "okapi");
    // Each folder holds the other device's segments, pulled whole.
    let (_, st) = call(b.addr, "GET", "/sync/status", "").unwrap();
    let st: serde_json::Value = serde_json::from_str(&st).unwrap();
    let peers = st["peers"].as_array().unwrap();
    assert_eq!(peers.len(), 1, "{st}");
    assert!(peers[0]["error"].is_null() && peers[0]["applied"].as_u64().unwrap() >= writes as u64, "{st}");
    // The heads travel too (what a key rotation and compaction read): B's folder holds A's, and A's B's.
    let a_id = peers[0]["device_id"].as_str().unwrap().to_string();
    let (status, files) = get_with(b.addr, "/sync/peer/files", &format!("x-engram-sync-token: {token}\r\n"));
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&files));
    let files: serde_json::Value = serde_json::from_slice(&files).unwrap();
    let devices = files["files"].as_object().unwrap();
    assert_eq!(devices.len(), 2, "{files}");
    assert!(devices.values().all(|names| names["head"].as_str().is_some_and(|h| h.len() == 64)), "{files}");
    let (status, head) =
        get_with(b.addr, &format!("/sync/peer/files/{a_id}/head"), &format!("x-engram-sync-token: {token}\r\n"));
    assert_eq!(status, 200);
    assert!(head.starts_with(b"ENGRAMSG"), "a sealed head");
    let escape = format!("/sync/peer/files/{a_id}/../../api-key");
    assert_eq!(get_with(b.addr, &escape, &format!("x-engram-sync-token: {token}\r\n")).0 / 100, 4);
}
