//! Label maintenance on a real redb file and through a real daemon: rename, delete, health, merge
//! candidates, merge and its reversal (edges exactly as before), consolidation (dry run changes nothing),
//! the preview, and the CLI's preview/apply plans.

mod backend;
#[cfg(feature = "server")]
mod common;

#[cfg(feature = "server")]
use std::sync::Arc;

#[cfg(feature = "server")]
use common::{call, server_on};

use engram::{
    ErrorKind, KnowledgeStore, LabelOrder, LabelPatch, ListQuery, MemoryFilter, MemoryState, NewMemory, canonical_label,
};

fn add(store: &KnowledgeStore, id: &str, labels: &[&str]) {
    store
        .memories()
        .create(NewMemory {
            id: Some(id.into()),
            content: format!("note {id} about the project"),
            labels: Some(labels.iter().map(|s| s.to_string()).collect()),
            ..Default::default()
        })
        .unwrap();
}

/// Every label record and every memory with its label ids, as JSON: equal dumps mean equal stores.
fn dump(store: &KnowledgeStore) -> String {
    let labels = store.labels().list("default", LabelOrder::Name, false, 1000, 0).unwrap();
    let page = store
        .memories()
        .list(&ListQuery {
            space_id: "default".into(),
            filter: MemoryFilter { states: MemoryState::ALL.to_vec(), include_history: true, ..Default::default() },
            limit: 1000,
            offset: 0,
        })
        .unwrap();
    let mems: Vec<(String, Vec<String>, String)> = page
        .items
        .into_iter()
        .map(|mut v| {
            // PageRank is derived by the background graph worker, whenever it runs: not part of the records.
            v.memory.pagerank_score = 0.0;
            (v.memory.id.clone(), v.label_ids.clone(), serde_json::to_string(&v.memory).unwrap())
        })
        .collect();
    serde_json::to_string(&(labels, mems)).unwrap()
}

fn edges(store: &KnowledgeStore, label: &str) -> Vec<String> {
    let page = store
        .memories()
        .list(&ListQuery {
            space_id: "default".into(),
            filter: MemoryFilter { label_ids: vec![label.into()], ..Default::default() },
            limit: 100,
            offset: 0,
        })
        .unwrap();
    let mut v: Vec<String> = page.items.into_iter().map(|m| m.memory.id).collect();
    v.sort();
    v
}

#[test]
fn canonical_form_folds_case_separators_and_camel_case() {
    for n in ["Machine Learning", "machine-learning", "machine_learning", "MachineLearning", "  machine   LEARNING "] {
        assert_eq!(canonical_label(n), "machine learning", "{n}");
    }
    assert_eq!(canonical_label("GPT-4o"), "gpt 4o");
    assert_ne!(canonical_label("machine"), canonical_label("machine learning"));
}

#[test]
fn merge_then_reverse_restores_every_edge_and_record() {
    let dir = tempfile::tempdir().unwrap();
    let store = backend::open(dir.path());
    add(&store, "m1", &["ml", "ai"]);
    add(&store, "m2", &["ml"]);
    add(&store, "m3", &["ai"]);
    add(&store, "m4", &["other"]);
    let before = dump(&store);
    let rec = store.labels().merge("default", "label_ml", "label_ai").unwrap();
    assert_eq!(rec.moved_memory_ids, vec!["m2"]);
    assert_eq!(rec.shared_memory_ids, vec!["m1"]);
    assert_eq!(edges(&store, "label_ai"), vec!["m1", "m2", "m3"]);
    assert!(edges(&store, "label_ml").is_empty());
    assert_eq!(store.labels().get("default", "label_ml").unwrap_err().kind(), ErrorKind::NotFound);
    assert_eq!(store.labels().get("default", "label_ai").unwrap().usage_count, 3);
    assert_ne!(dump(&store), before);

    let back = store.labels().reverse_merge("default", &rec.merge_id).unwrap();
    assert!(back.reversed_at.is_some());
    assert_eq!(dump(&store), before, "reversal must restore labels and edges exactly");
    assert_eq!(edges(&store, "label_ml"), vec!["m1", "m2"]);
    let again = store.labels().reverse_merge("default", &rec.merge_id).unwrap_err();
    assert_eq!(again.code(), "merge_reversed");
    // The record dump holds after a reopen too.
    drop(store);
    let store = backend::open(dir.path());
    assert_eq!(dump(&store), before);
    assert_eq!(store.labels().merges("default").unwrap().len(), 1);
}

#[test]
fn consolidate_dry_run_changes_nothing_and_apply_merges_canonical_duplicates() {
    let dir = tempfile::tempdir().unwrap();
    let store = backend::open(dir.path());
    add(&store, "a", &["Machine Learning"]);
    add(&store, "b", &["machine-learning"]);
    add(&store, "c", &["machine_learning", "Machine Learning"]);
    add(&store, "d", &["Machine Learning", "rust"]);
    let before = dump(&store);
    let plan = store.labels().consolidate("default", true, 200).unwrap();
    assert!(plan.dry_run);
    assert_eq!(plan.groups.len(), 1);
    let g = &plan.groups[0];
    assert_eq!(g.canonical, "machine learning");
    assert_eq!(g.survivor_id, "label_Machine Learning", "highest usage survives");
    assert_eq!(g.merged_ids.len(), 2);
    assert_eq!(dump(&store), before, "a dry run must not change anything");
    let h = store.labels().health(Some("default")).unwrap();
    assert_eq!((h.vocabulary_size, h.canonical_fork_groups, h.canonical_fork_backlog), (4, 1, 2));
    assert_eq!(h.singleton_labels, 3);
    assert!((h.coverage - 1.0).abs() < 1e-9);
    assert!((h.labels_per_memory - 1.5).abs() < 1e-9);

    // The preview is a dry run as well.
    let preview = store.labels().consolidation_preview("default", 0.5, 2000, 40).unwrap();
    assert_eq!(preview.exact.groups, plan.groups);
    assert!(preview.judge.starts_with("deterministic"));
    assert_eq!(dump(&store), before);

    let done = store.labels().consolidate("default", false, 200).unwrap();
    assert_eq!(done.merged_labels, 2);
    assert_eq!(edges(&store, "label_Machine Learning"), vec!["a", "b", "c", "d"]);
    assert_eq!(store.labels().health(None).unwrap().canonical_fork_backlog, 0);
    for id in done.merge_ids.iter().rev() {
        store.labels().reverse_merge("default", id).unwrap();
    }
    assert_eq!(dump(&store), before, "undoing a consolidation restores the store");
}

#[test]
fn rename_delete_and_merge_candidates() {
    let dir = tempfile::tempdir().unwrap();
    let store = backend::open(dir.path());
    add(&store, "a", &["travel"]);
    add(&store, "b", &["travels", "food"]);
    add(&store, "c", &["Travel"]);
    let renamed = store
        .labels()
        .update(
            "default",
            "label_food",
            LabelPatch { name: Some("cooking".into()), color: Some("#ff0000".into()), ..Default::default() },
        )
        .unwrap();
    assert_eq!((renamed.id.as_str(), renamed.color.as_str(), renamed.usage_count), ("label_cooking", "#ff0000", 1));
    assert_eq!(edges(&store, "label_cooking"), vec!["b"]);
    let clash = store.labels().update(
        "default",
        "label_cooking",
        LabelPatch { name: Some("travel".into()), ..Default::default() },
    );
    assert_eq!(clash.unwrap_err().code(), "label_exists");
    let bad = store.labels().update(
        "default",
        "label_cooking",
        LabelPatch { color: Some("red".into()), ..Default::default() },
    );
    assert_eq!(bad.unwrap_err().kind(), ErrorKind::InvalidInput);

    // "travel" / "travels" are near by name embedding; "travel" / "Travel" share a canonical form: excluded.
    let pairs = store.labels().merge_candidates("default", 0.5, 2000, 100).unwrap();
    assert!(pairs.iter().any(|p| [p.source_name.as_str(), p.target_name.as_str()].contains(&"travels")), "{pairs:?}");
    assert!(!pairs.iter().any(|p| canonical_label(&p.source_name) == canonical_label(&p.target_name)));
    assert!(pairs.iter().all(|p| p.similarity >= 0.5 && p.similarity <= 1.0));
    assert_eq!(store.labels().merge_candidates("default", 1.5, 2000, 100).unwrap_err().kind(), ErrorKind::InvalidInput);

    let r = store.labels().delete("default", "label_travels").unwrap();
    assert_eq!(r.removed_edges, 1);
    assert_eq!(store.memories().get("b", None).unwrap().label_ids, vec!["label_cooking"]);
}

#[cfg(feature = "server")]
#[test]
fn http_label_routes_and_cli_plans() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(backend::open(dir.path()));
    add(&store, "a", &["tea", "drinks"]);
    add(&store, "b", &["tea"]);
    let srv = server_on(dir.path(), store.clone(), 1 << 20);

    let r = call(&srv, "GET", "/labels/label_tea", None);
    assert_eq!((r.status, r.json()["usage_count"].as_u64()), (200, Some(2)));
    let r = call(&srv, "PUT", "/labels/label_tea", Some(r#"{"description":"hot drinks"}"#));
    assert_eq!(r.json()["description"], "hot drinks");

    // Preview, then apply with the plan id; a stale plan is refused.
    let p = call(
        &srv,
        "POST",
        "/labels/label_tea/merge/preview",
        Some(r#"{"target_label_id":"label_drinks","plan_id":null}"#),
    );
    assert_eq!(p.status, 200, "{}", p.body);
    let pj = p.json();
    assert_eq!(pj["affected"]["memories"], 2);
    assert_eq!(pj["duplicate_assignments"], 1);
    let plan = pj["plan_id"].as_str().unwrap().to_string();
    add(&store, "c", &["tea"]);
    let stale = call(
        &srv,
        "POST",
        "/labels/label_tea/merge/apply",
        Some(&format!(r#"{{"target_label_id":"label_drinks","plan_id":"{plan}"}}"#)),
    );
    assert_eq!((stale.status, stale.json()["error_code"].as_str()), (409, Some("plan_stale")));
    assert_eq!(store.labels().get("default", "label_tea").unwrap().usage_count, 3, "a refused apply changes nothing");
    let p = call(&srv, "POST", "/labels/label_tea/merge/preview", Some(r#"{"target_label_id":"label_drinks"}"#)).json();
    let ok = call(
        &srv,
        "POST",
        "/labels/label_tea/merge/apply",
        Some(&format!(r#"{{"target_label_id":"label_drinks","plan_id":"{}"}}"#, p["plan_id"].as_str().unwrap())),
    );
    assert_eq!(ok.status, 200, "{}", ok.body);
    let merge_id = ok.json()["merge_id"].as_str().unwrap().to_string();
    assert_eq!(store.labels().get("default", "label_drinks").unwrap().usage_count, 3);
    let rev = call(&srv, "POST", &format!("/labels/merges/{merge_id}/reverse"), None);
    assert_eq!(rev.status, 200, "{}", rev.body);
    assert_eq!(store.labels().get("default", "label_tea").unwrap().usage_count, 3);
    assert_eq!(store.labels().get("default", "label_drinks").unwrap().usage_count, 1);

    // Delete via plan; memories stay.
    let p = call(&srv, "POST", "/labels/label_tea/delete/preview", Some("{}")).json();
    let d = call(
        &srv,
        "POST",
        "/labels/label_tea/delete/apply",
        Some(&format!(r#"{{"plan_id":"{}"}}"#, p["plan_id"].as_str().unwrap())),
    );
    assert_eq!(d.status, 200, "{}", d.body);
    assert_eq!(call(&srv, "GET", "/labels/label_tea", None).status, 404);
    assert_eq!(call(&srv, "GET", "/memories/b", None).status, 200);

    let h = call(&srv, "GET", "/labels/health", None).json();
    assert_eq!(h["vocabulary_size"], 1);
    assert_eq!(call(&srv, "GET", "/labels/merge-candidates?sim_floor=2", None).status, 422);
    assert_eq!(call(&srv, "GET", "/labels/merge-candidates?max_labels=1", None).status, 422);
    let c = call(&srv, "POST", "/labels/consolidate", None).json();
    assert_eq!(c["dry_run"], true);
    assert_eq!(call(&srv, "POST", "/labels/consolidate?max_groups=0", None).status, 422);
    assert_eq!(call(&srv, "POST", "/labels/consolidation-preview?max_pairs=201", None).status, 422);
    assert_eq!(call(&srv, "DELETE", "/labels/label_drinks", None).json()["deleted_relationships"], 1);
}
