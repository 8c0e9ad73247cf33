//! Working memory, context bundle and stats through a real daemon.
#![cfg(feature = "server")]

mod backend;
mod common;

use common::{call, server};
use serde_json::json;

#[test]
fn working_memory_context_bundle_and_stats() {
    let dir = tempfile::tempdir().unwrap();
    let srv = server(dir.path(), 1 << 20);
    let v = call(&srv, "GET", "/agent/working-memory", None).json();
    assert_eq!((v["exists"].as_bool(), v["content"].as_str()), (Some(false), Some("")));

    let put =
        call(&srv, "PUT", "/agent/working-memory", Some(&json!({"content": "# Focus\n- ship threads"}).to_string()));
    assert_eq!(put.status, 200, "{}", put.body);
    assert_eq!(put.json()["success"], true);
    let v = call(&srv, "GET", "/agent/working-memory", None).json();
    assert_eq!((v["exists"].as_bool(), v["content"].as_str()), (Some(true), Some("# Focus\n- ship threads")));
    assert_eq!(v["file_path"], "/working-memory/today.md");
    let day = v["date"].as_str().unwrap().to_string();
    let h = call(&srv, "GET", "/agent/working-memory/history", None).json();
    assert_eq!(h["dates"], json!([day]));
    let v = call(&srv, "GET", &format!("/agent/working-memory?date={day}"), None).json();
    assert_eq!(v["exists"], true);
    assert_eq!(call(&srv, "GET", "/agent/working-memory?date=2020-01-01", None).json()["exists"], false);
    assert_eq!(call(&srv, "GET", "/agent/working-memory?date=yesterday", None).status, 422);
    assert_eq!(call(&srv, "GET", "/agent/working-memory?space_id=nope", None).status, 404);
    let big = "x".repeat(300_000);
    assert_eq!(call(&srv, "PUT", "/agent/working-memory", Some(&json!({"content": big}).to_string())).status, 422);
    assert_eq!(call(&srv, "GET", "/agent/working-memory", None).json()["content"], "# Focus\n- ship threads");

    for (id, imp, text) in [("low", 0.2, "Caroline prefers tea"), ("high", 0.9, "We decided to use PostgreSQL")] {
        let b = json!({"id": id, "content": text, "importance": imp});
        assert_eq!(call(&srv, "POST", "/memories", Some(&b.to_string())).status, 200);
    }
    let b = call(&srv, "GET", "/context/bundle", None).json();
    let md = b["rendered_markdown"].as_str().unwrap();
    assert!(md.starts_with(&format!("## Working memory ({day})\n\n# Focus")), "{md}");
    let (hi, lo) = (md.find("PostgreSQL").unwrap(), md.find("tea").unwrap());
    assert!(hi < lo, "more important first: {md}");
    assert_eq!(b["schema_version"], 1);
    let b = call(&srv, "GET", "/context/bundle?include_working_memory=false", None).json();
    assert!(!b["rendered_markdown"].as_str().unwrap().contains("Working memory"));

    let s = call(&srv, "GET", "/stats", None).json();
    assert_eq!((s["memory_count"].as_u64(), s["thread_count"].as_u64()), (Some(2), Some(0)));
    assert_eq!(s["entity_count"], 2, "{s}");
    assert_eq!(s["total_relationships"], 2, "two MENTIONS edges: {s}");
}

#[test]
fn checkpoint_reports_what_it_made_durable() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = backend::config(dir.path()).durability(engram::Durability::Eventual);
    let store = engram::KnowledgeStore::open(cfg).unwrap();
    for i in 0..3 {
        store
            .memories()
            .create(engram::NewMemory { id: Some(format!("m{i}")), content: format!("note {i}"), ..Default::default() })
            .unwrap();
    }
    store.memories().read("m0", None).unwrap();
    store.memories().read("m1", None).unwrap();
    let r = store.admin().checkpoint_report().unwrap();
    // Every write of a fresh Eventual store was committed without fsync: the 3 memories and the embedder record.
    assert_eq!((r.flushed_write_transactions, r.flushed_access_updates), (r.generation, 2), "{r:?}");
    assert!(r.generation >= 3);
    assert!(r.file_bytes > 0 && r.generation >= 3);
    let again = store.admin().checkpoint_report().unwrap();
    assert_eq!((again.flushed_write_transactions, again.flushed_access_updates), (0, 0));
    assert_eq!(again.generation, r.generation);
    drop(store);
    // Everything checkpointed is there after a reopen.
    let store = backend::open(dir.path());
    assert_eq!(store.memories().get("m0", None).unwrap().memory.access_count, 1);
    assert_eq!(store.memories().get("m2", None).unwrap().memory.content, "note 2");
}

#[cfg(feature = "server")]
#[test]
fn http_checkpoint_needs_the_key_and_reports() {
    let dir = tempfile::tempdir().unwrap();
    let srv = common::server(dir.path(), 1 << 20);
    let r = common::call(&srv, "POST", "/health/checkpoint", None);
    assert_eq!(r.status, 200, "{}", r.body);
    let j = r.json();
    assert_eq!((j["success"].as_bool(), j["durable"].as_bool()), (Some(true), Some(true)));
    assert!(j["generation"].as_u64().is_some() && j["message"].as_str().unwrap().contains("checkpoint"));
    let head = format!("POST /health/checkpoint HTTP/1.1\nHost: 127.0.0.1:{}\nContent-Length: 0\n", srv.addr.port());
    assert_eq!(common::raw(srv.addr, &head, b"").status, 401);
}

/// The service (`store.working()`) on a real store on either backend: today's document read back by day and as
/// the latest, replaced in place, and bad input refused without touching it.
#[test]
fn the_working_memory_service_reads_what_it_writes() {
    let dir = tempfile::tempdir().unwrap();
    let store = backend::open(dir.path());
    assert_eq!(store.working().get("default", None).unwrap(), None);
    let wm = store.working().set("default", "## Focus\n\n- the service").unwrap();
    let by_day = store.working().get("default", Some(&wm.date)).unwrap().expect("written today");
    assert_eq!((by_day.content.as_str(), by_day.date.as_str()), ("## Focus\n\n- the service", wm.date.as_str()));
    store.working().set("default", "## Focus\n\n- replaced").unwrap();
    let days = store.working().history("default", 10).unwrap();
    assert_eq!(days.iter().map(|d| d.content.as_str()).collect::<Vec<_>>(), ["## Focus\n\n- replaced"]);
    assert_eq!(store.working().get("nope", None).unwrap_err().kind(), engram::ErrorKind::NotFound);
    assert_eq!(store.working().get("default", Some("05/12/2026")).unwrap_err().kind(), engram::ErrorKind::InvalidInput);
    let big = "x".repeat(engram::store::MAX_WORKING_MEMORY_BYTES + 1);
    assert_eq!(store.working().set("default", &big).unwrap_err().kind(), engram::ErrorKind::InvalidInput);
    assert_eq!(store.working().get("default", None).unwrap().expect("kept").content, "## Focus\n\n- replaced");
}
