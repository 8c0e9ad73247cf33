//! Working memory, context bundle and stats through a real daemon.
#![cfg(feature = "server")]

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
