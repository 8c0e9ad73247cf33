//! The PostgreSQL backend losing its database (issue 19): the daemon on a throwaway cluster of its own
//! (`tools/postgres/cluster.sh`), which the test stops at once (as a crash would) and starts again. While the
//! database is gone, requests get 503 `database_unavailable` with `retryable: true` and nothing is stored;
//! when it is back, serving resumes without a restart and every acknowledged write is there. A bad URL or an
//! unreachable server is a clear error at open. Needs PostgreSQL's server binaries (skips without them,
//! except under `CI`).
#![cfg(all(feature = "postgres", feature = "server"))]

mod backend;
mod common;

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::call;
use engram::{ErrorKind, KnowledgeStore, StoreConfig};

fn cluster(cmd: &str, dir: &Path) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tools/postgres/cluster.sh");
    let out = Command::new("bash").arg(script).arg(cmd).arg(dir).output().expect("run cluster.sh");
    assert!(out.status.success(), "cluster.sh {cmd}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn have_server_binaries() -> bool {
    let bin = std::env::var("PG_BIN").unwrap_or_else(|_| "/usr/lib/postgresql/15/bin".into());
    let found = Path::new(&bin).join("initdb").exists();
    assert!(found || std::env::var_os("CI").is_none(), "CI: no PostgreSQL server binaries in {bin}");
    if !found {
        eprintln!("skipped: no PostgreSQL server binaries in {bin}");
    }
    found
}

#[test]
fn a_lost_database_is_503_retryable_and_serving_resumes_when_it_is_back() {
    if !have_server_binaries() {
        return;
    }
    let pg = tempfile::tempdir().unwrap();
    let url = cluster("start", pg.path());
    let data = tempfile::tempdir().unwrap();
    let store = Arc::new(KnowledgeStore::open(StoreConfig::new(data.path()).database(&url)).unwrap());
    let srv = common::server_on(data.path(), store, 1 << 20);
    let r = call(&srv, "POST", "/memories", Some(r#"{"id":"before","content":"The ferry leaves at nine"}"#));
    assert_eq!(r.status, 200, "{}", r.body);

    cluster("down", pg.path());
    let r = call(&srv, "POST", "/memories", Some(r#"{"id":"during","content":"The ferry is late today"}"#));
    assert_eq!(r.status, 503, "{}", r.body);
    let body = r.json();
    assert_eq!(body["error_code"], "database_unavailable", "{body}");
    assert_eq!(body["retryable"], true);
    let r = call(&srv, "GET", "/memories/before", None);
    assert_eq!(r.status, 503, "{}", r.body);
    // The probes answer without the database.
    assert_eq!(call(&srv, "GET", "/livez", None).status, 200);

    cluster("up", pg.path());
    let started = Instant::now();
    let r = loop {
        let r = call(&srv, "POST", "/memories", Some(r#"{"id":"after","content":"The ferry runs again"}"#));
        if r.status != 503 || started.elapsed() > Duration::from_secs(20) {
            break r;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(r.status, 200, "{}", r.body);
    eprintln!("serving resumed {} ms after the server was back", started.elapsed().as_millis());
    assert_eq!(call(&srv, "GET", "/memories/before", None).json()["content"], "The ferry leaves at nine");
    assert_eq!(call(&srv, "GET", "/memories/during", None).status, 404, "the refused write stored nothing");
    let hits = call(&srv, "POST", "/memories/search", Some(r#"{"query":"ferry runs again","limit":3}"#)).json();
    assert_eq!(hits[0]["memory"]["id"], "after", "{hits}");
    drop(srv);
    cluster("stop", pg.path());
}

#[test]
fn a_bad_or_unreachable_database_is_a_clear_error_at_open() {
    let data = tempfile::tempdir().unwrap();
    let open = |url: &str| KnowledgeStore::open(StoreConfig::new(data.path()).database(url)).unwrap_err();
    let e = open("postgres://engram@/db?port=notaport");
    assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
    assert!(e.to_string().contains("database URL"), "{e}");
    let nowhere = data.path().join("no-server");
    let e = open(&format!("host={} user=engram dbname=engram connect_timeout=2", nowhere.display()));
    assert_eq!(e.kind(), ErrorKind::Unreachable, "{e}");
    assert!(e.to_string().starts_with("connecting to PostgreSQL failed"), "{e}");
    assert!(!data.path().join("engram.redb").exists(), "no redb file is made in its place");
}

/// Text PostgreSQL cannot hold (U+0000 in a message's `external_id`, which becomes a key) is 422 naming the body,
/// and the thread is unchanged; redb stores it.
#[test]
fn a_nul_character_in_a_key_is_422_and_changes_nothing() {
    if backend::pg_server().is_none() {
        return;
    }
    let data = tempfile::tempdir().unwrap();
    let store = Arc::new(KnowledgeStore::open(backend::Backend::Postgres.config(data.path())).unwrap());
    let srv = common::server_on(data.path(), store, 1 << 20);
    let r = call(&srv, "POST", "/threads", Some(r#"{"thread_id":"t","messages":[{"role":"user","content":"hi"}]}"#));
    assert_eq!(r.status, 200, "{}", r.body);
    let body = r#"{"messages":[{"role":"user","content":"x","metadata":{"external_id":"a\u0000b"}}]}"#;
    let r = call(&srv, "POST", "/threads/t/append", Some(body));
    assert_eq!(r.status, 422, "{}", r.body);
    assert_eq!(r.json()["detail"][0]["loc"], serde_json::json!(["body"]), "{}", r.body);
    assert_eq!(call(&srv, "GET", "/threads/t", None).json()["total_messages"], 1);
}
