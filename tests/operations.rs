//! Running the daemon for years (docs/operations.md), each check on the real `engram` binary:
//!
//! * `GET /metrics` counts every request by route template, method and status class, its histograms agree
//!   with its counters, and no label holds memory text, a query or an id; request ids are echoed;
//! * `--log-format json` at `debug`: every line is a JSON object, request lines carry their id and route, and
//!   no line holds memory text, a query or the API key (REST and MCP);
//! * `engram backup` 20 times while a client writes: every backup verifies, restores and holds every write
//!   acknowledged before it began;
//! * a daemon SIGKILLed while it writes backups leaves its store whole and no finished-looking half backup;
//! * the bash completion, the man page and the systemd unit (`systemd-analyze verify`).
#![cfg(all(feature = "server", unix))]

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use engram::{KnowledgeStore, StoreConfig};

const KEY: &str = "operations-test-key-7f3a9c";
const MARK: &str = "QUOKKAMARK";

fn exe() -> Command {
    Command::new(env!("CARGO_BIN_EXE_engram"))
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("a free port")
}

/// A daemon process; killed (SIGKILL) when dropped.
struct Daemon {
    child: Child,
    addr: SocketAddr,
    log: PathBuf,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Daemon {
    fn start(dir: &Path, extra: &[&str], env: &[(&str, &str)]) -> Daemon {
        let port = free_port();
        let log = dir.join("daemon.log");
        let mut cmd = exe();
        cmd.args(["serve", "--addr", &format!("127.0.0.1:{port}"), "--api-key", KEY, "--data-dir"])
            .arg(dir.join("data"))
            .args(extra)
            .env("ENGRAM_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::from(std::fs::File::create(&log).expect("log file")));
        for (k, v) in env {
            cmd.env(k, v);
        }
        let child = cmd.spawn().expect("the daemon starts");
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().expect("addr");
        let d = Daemon { child, addr, log };
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(60) {
            if d.try_call("GET", "/livez", "", &[]).is_some_and(|r| r.status == 200) {
                return d;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("the daemon did not come up: {}", std::fs::read_to_string(&d.log).unwrap_or_default());
    }

    /// One request with the key; None when the connection fails or the reply is cut off.
    fn try_call(&self, method: &str, path: &str, body: &str, headers: &[(&str, &str)]) -> Option<Reply> {
        let mut s = TcpStream::connect_timeout(&self.addr, Duration::from_secs(2)).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(60))).ok()?;
        let mut req = format!(
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n",
            body.len()
        );
        for (k, v) in headers {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        req.push_str("\r\n");
        req.push_str(body);
        s.write_all(req.as_bytes()).ok()?;
        let mut buf = Vec::new();
        s.read_to_end(&mut buf).ok()?;
        let text = String::from_utf8_lossy(&buf).into_owned();
        let status = text.split_whitespace().nth(1)?.parse().ok()?;
        let (head, body) = text.split_once("\r\n\r\n")?;
        Some(Reply { status, head: head.to_string(), body: body.to_string() })
    }

    fn call(&self, method: &str, path: &str, body: &str) -> Reply {
        self.call_with(method, path, body, &[])
    }

    fn call_with(&self, method: &str, path: &str, body: &str, headers: &[(&str, &str)]) -> Reply {
        let auth = format!("Bearer {KEY}");
        let mut all = vec![("Authorization", auth.as_str())];
        all.extend_from_slice(headers);
        self.try_call(method, path, body, &all).unwrap_or_else(|| panic!("{method} {path}: no reply"))
    }
}

struct Reply {
    status: u16,
    head: String,
    body: String,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim().eq_ignore_ascii_case(name).then(|| v.trim())
        })
    }

    fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }
}

/// The samples of an OpenMetrics text: `name{labels}` to value (labels as written).
fn samples(text: &str) -> BTreeMap<String, f64> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| {
            let (k, v) = l.rsplit_once(' ')?;
            Some((k.to_string(), v.parse().ok()?))
        })
        .collect()
}

fn create(d: &Daemon, content: &str) -> String {
    let r = d.call("POST", "/memories", &serde_json::json!({ "content": content }).to_string());
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()["memory"]["id"].as_str().expect("id").to_string()
}

#[test]
fn metrics_count_requests_by_route_and_json_logs_hold_no_text_or_key() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = Daemon::start(dir.path(), &["--log-format", "json"], &[("ENGRAM_LOG", "debug")]);
    // A fixed mix; every text, query, id and unknown path carries the marker.
    let mut ids = Vec::new();
    for i in 0..3 {
        let r = d.call_with(
            "POST",
            "/memories",
            &serde_json::json!({ "content": format!("{MARK} note {i} about the zanzibar ferry") }).to_string(),
            &[("X-Request-Id", &format!("req-{i}"))],
        );
        assert_eq!(r.status, 200, "{}", r.body);
        assert_eq!(r.header("x-request-id"), Some(format!("req-{i}").as_str()), "the client's id is echoed");
        ids.push(r.json()["memory"]["id"].as_str().expect("id").to_string());
    }
    for id in &ids[..2] {
        assert_eq!(d.call("GET", &format!("/memories/{id}"), "").status, 200);
    }
    let q = serde_json::json!({ "query": format!("{MARK} zanzibar"), "space_id": "default" }).to_string();
    for _ in 0..2 {
        assert_eq!(d.call("POST", "/memories/search", &q).status, 200);
    }
    assert_eq!(d.call("GET", &format!("/memories/{MARK}-no-such-id"), "").status, 404);
    let unmatched = d.call_with("GET", &format!("/{MARK}/nowhere"), "", &[("X-Request-Id", &format!("{MARK} x"))]);
    assert_eq!(unmatched.status, 404);
    let generated = unmatched.header("x-request-id").expect("an id is generated").to_string();
    assert!(!generated.contains(MARK) && generated.len() == 32, "{generated}");
    assert_eq!(d.call("POST", "/memories", &format!("{{\"content\": 5, \"x\": \"{MARK}\"}}")).status, 422);
    assert_eq!(d.try_call("GET", "/health", "", &[]).map(|r| r.status), Some(200));
    let mcp = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "memory_add", "arguments": {"content": format!("{MARK} said over MCP")}}});
    let r = d.call("POST", "/mcp", &mcp.to_string());
    assert_eq!((r.status, r.json()["result"]["isError"].as_bool()), (200, Some(false)), "{}", r.body);
    assert_eq!(d.try_call("GET", "/metrics", "", &[]).map(|r| r.status), Some(401), "the key is needed");

    let m = d.call("GET", "/metrics", "");
    assert_eq!(m.status, 200);
    assert!(m.header("content-type").is_some_and(|c| c.starts_with("application/openmetrics-text")));
    assert!(m.body.ends_with("# EOF\n"), "OpenMetrics ends in # EOF");
    assert!(!m.body.contains(MARK), "no label holds text, a query or a path");
    for id in &ids {
        assert!(!m.body.contains(id.as_str()), "no label holds an id");
    }
    let s = samples(&m.body);
    let expected = [
        ("/memories", "POST", "2xx", 3.0),
        ("/memories", "POST", "4xx", 1.0),
        ("/memories/{memory_id}", "GET", "2xx", 2.0),
        ("/memories/{memory_id}", "GET", "4xx", 1.0),
        ("/memories/search", "POST", "2xx", 2.0),
        ("unmatched", "GET", "4xx", 1.0),
        ("/health", "GET", "2xx", 1.0),
        ("/mcp", "POST", "2xx", 1.0),
        ("/metrics", "GET", "4xx", 1.0),
    ];
    let counted: BTreeMap<&String, &f64> =
        s.iter().filter(|(k, _)| k.starts_with("engram_http_requests_total{")).collect();
    // The livez probes of the start are counted too.
    assert_eq!(counted.len(), expected.len() + 1, "{counted:?}");
    for (route, method, status, n) in expected {
        let labels = format!("{{route=\"{route}\",method=\"{method}\",status=\"{status}\"}}");
        assert_eq!(s.get(&format!("engram_http_requests_total{labels}")), Some(&n), "{labels}");
        assert_eq!(s.get(&format!("engram_http_request_duration_seconds_count{labels}")), Some(&n), "{labels}");
    }
    assert_eq!(s.get("engram_memories"), Some(&4.0));
    assert_eq!(s.get("engram_search_duration_seconds_count{mode=\"hybrid\"}"), Some(&2.0));
    assert!(s.get("engram_write_transactions_total").is_some_and(|n| *n >= 4.0));
    assert!(s.get("process_resident_memory_bytes").is_some_and(|n| *n > 1e6));
    let again = samples(&d.call("GET", "/metrics", "").body);
    assert_eq!(again.get("engram_http_requests_total{route=\"/metrics\",method=\"GET\",status=\"2xx\"}"), Some(&1.0));

    drop(d);
    let log = std::fs::read_to_string(dir.path().join("daemon.log")).expect("log");
    assert!(!log.contains(MARK), "no log line holds memory text or a query:\n{log}");
    assert!(!log.contains(KEY), "no log line holds the key");
    let mut answered = 0;
    for line in log.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
        for field in ["timestamp", "level", "target", "message"] {
            assert!(v.get(field).is_some(), "{field} missing: {line}");
        }
        if v["message"] == "request answered" {
            answered += 1;
            assert!(v["span"]["request_id"].as_str().is_some_and(|s| !s.is_empty()), "{line}");
            assert!(v["span"]["route"].as_str().is_some(), "{line}");
        }
    }
    assert!(answered >= 15, "one debug line per request: {answered}");
    assert!(log.contains("\"request_id\":\"req-1\""), "the client's request id names its lines");
}

/// Ids acknowledged by the writer, in order.
type Acked = Arc<Mutex<Vec<String>>>;

fn writer(d: Arc<Daemon>, acked: Acked, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut i = 0;
        while !stop.load(Ordering::Relaxed) {
            let body = serde_json::json!({ "content": format!("note {i} written under backup") }).to_string();
            if let Some(r) = d.try_call("POST", "/memories", &body, &[("Authorization", &format!("Bearer {KEY}"))])
                && r.status == 200
            {
                acked.lock().expect("lock").push(r.json()["memory"]["id"].as_str().expect("id").to_string());
            }
            i += 1;
        }
    })
}

#[test]
fn twenty_backups_under_writes_restore_every_acknowledged_write() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = Arc::new(Daemon::start(dir.path(), &[], &[]));
    create(&d, "a first memory");
    let acked: Acked = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let w = writer(d.clone(), acked.clone(), stop.clone());
    let mut taken = Vec::new();
    for i in 0..20 {
        while acked.lock().expect("lock").len() < (i + 1) * 3 {
            std::thread::sleep(Duration::from_millis(5));
        }
        let before: Vec<String> = acked.lock().expect("lock").clone();
        let dest = dir.path().join("backups-out").join(format!("b{i:02}.redb"));
        let out = exe()
            .arg("backup")
            .arg(&dest)
            .args(["--addr", &d.addr.to_string(), "--api-key", KEY, "--data-dir"])
            .arg(dir.path().join("data"))
            .env("ENGRAM_LOG", "warn")
            .output()
            .expect("engram backup runs");
        assert!(out.status.success(), "backup {i}: {}", String::from_utf8_lossy(&out.stderr));
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("a JSON report");
        assert_eq!(report["backup_path"], dest.display().to_string());
        assert!(report["memories"].as_u64().is_some_and(|n| n as usize > before.len()), "{report}");
        taken.push((dest, before));
    }
    stop.store(true, Ordering::Relaxed);
    w.join().expect("writer");
    let written = acked.lock().expect("lock").len();
    let refused = exe().arg("restore").arg(&taken[0].0).arg("--data-dir").arg(dir.path().join("data")).output();
    let refused = refused.expect("engram restore runs");
    let why = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success() && why.contains("open in another process"), "{why}");
    drop(d);
    assert!(written > 60, "the writer kept writing: {written}");
    eprintln!("20 backups while {written} memories were written");

    let out = exe().args(["restore", "--verify"]).arg(&taken[0].0).output().expect("engram restore --verify runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    for (i, (file, before)) in taken.iter().enumerate() {
        let target = dir.path().join(format!("restored-{i}"));
        let config = StoreConfig::new(&target);
        let check = engram::store::verify_backup(&config, file).expect("the backup verifies");
        let rep = engram::store::restore_backup(&config, file).expect("the backup restores");
        assert_eq!((rep.previous, rep.check.generation), (None, check.generation));
        let store = KnowledgeStore::open(config).expect("the restored store opens");
        for id in before {
            store.memories().get(id, None).unwrap_or_else(|e| panic!("backup {i} lost {id}: {e}"));
        }
    }
    // Nothing half-written was left beside the backups.
    let left: Vec<_> = std::fs::read_dir(dir.path().join("backups-out")).expect("dir").flatten().collect();
    assert_eq!(left.len(), 20, "{left:?}");
}

#[test]
fn a_daemon_killed_during_backups_leaves_its_store_and_finished_backups_whole() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut ids = Vec::new();
    for round in 0..3u64 {
        let d = Arc::new(Daemon::start(dir.path(), &[], &[]));
        for i in 0..40 {
            ids.push(create(&d, &format!("round {round} note {i}")));
        }
        let stop = Arc::new(AtomicBool::new(false));
        let (d2, stop2) = (d.clone(), stop.clone());
        let backups = std::thread::spawn(move || {
            let mut n = 0;
            while !stop2.load(Ordering::Relaxed) {
                let body = serde_json::json!({ "backup_path": format!("backups/r{round}-{n:04}.redb") }).to_string();
                let auth = format!("Bearer {KEY}");
                if d2.try_call("POST", "/admin/backup", &body, &[("Authorization", &auth)]).is_none() {
                    break;
                }
                n += 1;
            }
            n
        });
        std::thread::sleep(Duration::from_millis(150 + 70 * round));
        // SIGKILL while backups run back to back.
        let pid = d.child.id().to_string();
        assert!(Command::new("kill").args(["-9", &pid]).status().expect("kill").success());
        stop.store(true, Ordering::Relaxed);
        let n = backups.join().expect("backups");
        assert!(n > 0, "round {round}: at least one backup finished before the kill");
        let cut = std::fs::read_dir(dir.path().join("data/backups"))
            .map(|r| r.flatten().filter(|e| e.file_name().to_string_lossy().starts_with(".engram-backup-")).count())
            .unwrap_or(0);
        eprintln!("round {round}: {n} backups answered before the kill, {cut} cut short");
        drop(d);
        // Every file under a backup's name is a whole backup; a cut copy stays in a hidden directory.
        let bdir = dir.path().join("data/backups");
        for e in std::fs::read_dir(&bdir).expect("backups").flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with(".engram-backup-") {
                continue;
            }
            let check = engram::store::verify_backup(&StoreConfig::new(dir.path()), &e.path())
                .unwrap_or_else(|err| panic!("{name} is not whole: {err}"));
            assert!(check.memories >= 40, "{name}: {check:?}");
        }
        let store = KnowledgeStore::open(StoreConfig::new(dir.path().join("data"))).expect("the store reopens");
        for id in &ids {
            store.memories().get(id, None).unwrap_or_else(|e| panic!("round {round} lost {id}: {e}"));
        }
    }
}

#[test]
fn the_bash_completion_completes_serve_and_the_man_page_renders() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = exe().args(["completions", "bash"]).output().expect("engram completions runs");
    assert!(out.status.success());
    let script = dir.path().join("engram.bash");
    std::fs::write(&script, &out.stdout).expect("write");
    let probe = format!(
        "source '{}'; COMP_WORDS=(engram se); COMP_CWORD=1; COMP_LINE='engram se'; COMP_POINT=9; _engram engram se engram; \
         printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        script.display()
    );
    let got = Command::new("bash").args(["--norc", "-c", &probe]).output().expect("bash runs");
    let words: Vec<String> = String::from_utf8_lossy(&got.stdout).split_whitespace().map(str::to_string).collect();
    assert!(words.contains(&"serve".to_string()), "{words:?} {}", String::from_utf8_lossy(&got.stderr));
    assert!(words.iter().all(|w| w.starts_with("se")), "{words:?}");
    let man = exe().arg("man").output().expect("engram man runs");
    let roff = String::from_utf8_lossy(&man.stdout);
    assert!(man.status.success() && roff.contains(".TH engram") && roff.contains("backup"), "{roff}");
}

#[test]
fn the_systemd_unit_passes_systemd_analyze_verify() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("da ta%1");
    let out = exe()
        .args(["service", "install", "--print", "--data-dir"])
        .arg(&data)
        .output()
        .expect("engram service install --print runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let unit = String::from_utf8_lossy(&out.stdout).into_owned();
    for line in ["ProtectSystem=strict", "NoNewPrivileges=yes", "PrivateTmp=yes", "Restart=on-failure"] {
        assert!(unit.contains(line), "{line}: {unit}");
    }
    assert!(unit.contains("ReadWritePaths=\"") && unit.contains("da ta%%1"), "{unit}");
    // `install` writes the file where asked and `uninstall` removes it.
    let units = dir.path().join("units");
    let st =
        exe().args(["service", "install", "--user", "--unit-dir"]).arg(&units).arg("--data-dir").arg(&data).status();
    assert!(st.expect("install").success());
    assert!(units.join("engram.service").is_file());
    let st = exe().args(["service", "uninstall", "--user", "--unit-dir"]).arg(&units).status();
    assert!(st.expect("uninstall").success());
    assert!(!units.join("engram.service").exists());

    let Ok(v) = Command::new("systemd-analyze").arg("--version").output() else {
        assert!(std::env::var("CI").is_err(), "CI needs systemd-analyze (Debian's systemd package)");
        eprintln!("systemd-analyze is not installed: the unit was not verified");
        return;
    };
    assert!(v.status.success());
    let file = dir.path().join("engram.service");
    std::fs::write(&file, &unit).expect("write");
    let out = Command::new("systemd-analyze").arg("verify").arg(&file).output().expect("systemd-analyze runs");
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "systemd-analyze verify: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn an_encrypted_stores_backup_stays_encrypted_and_opens_with_its_key_only() {
    use engram::storage::crypt::Encryption;
    let dir = tempfile::tempdir().expect("tempdir");
    let key = dir.path().join("store.key");
    engram::storage::crypt::write_key_file(&key).expect("key file");
    let config = StoreConfig::new(dir.path().join("data")).encrypted(Encryption::key_file(&key));
    let store = KnowledgeStore::open(config.clone()).expect("open");
    let id = store
        .memories()
        .create(engram::store::NewMemory {
            content: format!("{MARK} the safe combination is 1234"),
            ..Default::default()
        })
        .expect("create")
        .view
        .memory
        .id;
    let dest = dir.path().join("out/enc.redb");
    let rep = store.admin().backup(&dest).expect("backup");
    assert!(rep.encrypted && rep.memories == 1, "{rep:?}");
    drop(store);
    let bytes = std::fs::read(&dest).expect("read");
    assert!(!bytes.windows(MARK.len()).any(|w| w == MARK.as_bytes()), "the backup holds no plaintext");
    let plain = StoreConfig::new(dir.path().join("other"));
    let e = engram::store::verify_backup(&plain, &dest).expect_err("no key, no backup");
    assert_eq!(e.kind(), engram::ErrorKind::WrongKey, "{e}");
    let check = engram::store::verify_backup(&config, &dest).expect("the store's key opens it");
    assert_eq!(check.memories, 1);
    let target = StoreConfig::new(dir.path().join("restored")).encrypted(Encryption::key_file(&key));
    engram::store::restore_backup(&target, &dest).expect("restore");
    let back = KnowledgeStore::open(target).expect("the restored store opens with the key");
    assert!(back.memories().get(&id, None).expect("get").memory.content.contains(MARK));
}

/// Also: a daemon serves with the smallest page cache (`--cache-size 1MiB`), and sizes out of range or
/// unreadable stop the start with the reason.
#[test]
fn scheduled_backups_keep_the_newest() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (size, reason) in [("12", "give 1MiB to 1TiB"), ("2TiB", "give 1MiB to 1TiB"), ("lots", "e.g. 64MiB")] {
        let out = exe().args(["serve", "--cache-size", size, "--data-dir"]).arg(dir.path()).output().expect("runs");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains(reason), "--cache-size {size}: {err}");
    }
    let d = Daemon::start(dir.path(), &["--backup-every", "1s", "--backup-keep", "2", "--cache-size", "1MiB"], &[]);
    create(&d, "kept by the schedule");
    let at = |p: &str| serde_json::json!({ "backup_path": p }).to_string();
    assert_eq!(d.call("POST", "/admin/backup", &at("manual/one.redb")).status, 200);
    for taken in ["manual/one.redb", "manual/one.redb/two.redb"] {
        let r = d.call("POST", "/admin/backup", &at(taken));
        assert_eq!((r.status, r.json()["error_code"].as_str()), (409, Some("conflict")), "{taken}: {}", r.body);
    }
    let r = d.call("POST", "/admin/backup", &at("../outside.redb"));
    assert_eq!(r.status, 403, "{}", r.body);
    let bdir = dir.path().join("data/backups");
    let started = Instant::now();
    let mut seen = 0;
    while started.elapsed() < Duration::from_secs(30) {
        seen = seen.max(engram::store::scheduled_backups(&bdir).len());
        let m = samples(&d.call("GET", "/metrics", "").body);
        if m.get("engram_backup_duration_seconds_count").is_some_and(|n| *n >= 4.0) {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(d);
    let kept = engram::store::scheduled_backups(&bdir);
    assert_eq!(kept.len(), 2, "the oldest beyond --backup-keep are deleted: {kept:?} (seen {seen})");
    for f in &kept {
        let check = engram::store::verify_backup(&StoreConfig::new(dir.path()), f).expect("verifies");
        assert_eq!(check.memories, 1, "{f:?}");
    }
}
