//! `check_claims` accuracy on labelled claims over a fixed set of memories (`tests/fixtures/claims/`):
//! `before.jsonl` was written before the method was tuned, `after.jsonl` after. The figures go in the issue's
//! closing note; the asserts are floors at the measured values.

use std::sync::Arc;

use engram::api::tools::{Scope, call};
use engram::api::{Api, ServiceInfo};
use engram::{KnowledgeStore, NewMemory, StoreConfig};
use serde_json::{Value, json};

fn lines(file: &str) -> Vec<Value> {
    let path = format!("{}/tests/fixtures/claims/{file}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{path}: {e}"))
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect()
}

/// Accuracy of `check_claims` on `file`, with the confusions printed.
fn accuracy(file: &str) -> f64 {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Arc::new(KnowledgeStore::open(StoreConfig::new(dir.path())).expect("open"));
    for m in lines("memories.jsonl") {
        let content = m["content"].as_str().expect("content").to_string();
        store.memories().create(NewMemory { content, ..Default::default() }).expect("create");
    }
    let api = Api::new(store, ServiceInfo::default());
    let claims = lines(file);
    let mut right = 0;
    // At most 20 claims per call, as the tool allows.
    for chunk in claims.chunks(20) {
        let texts: Vec<&str> = chunk.iter().filter_map(|c| c["claim"].as_str()).collect();
        let out = call(&api, &Scope::default(), "check_claims", json!({"claims": texts})).expect("check_claims");
        for (c, r) in chunk.iter().zip(out["results"].as_array().expect("results")) {
            if r["verdict"] == c["label"] {
                right += 1;
            } else {
                eprintln!("{file}: {} -> {} (label {})", c["claim"], r["verdict"], c["label"]);
            }
        }
    }
    let acc = right as f64 / claims.len() as f64;
    println!("check_claims {file}: {right}/{} right, accuracy {acc:.3}", claims.len());
    acc
}

#[test]
fn claims_written_before_tuning() {
    // 0.881 (37/42) with the first method; clause scoping and value conflicts were then tuned on this file.
    assert!(accuracy("before.jsonl") >= 0.97);
}

#[test]
fn claims_written_after_tuning() {
    // Written after tuning and never tuned on: 0.900 (36/40).
    assert!(accuracy("after.jsonl") >= 0.89);
}
