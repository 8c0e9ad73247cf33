//! Real responses against the OpenAPI document: a workload over a real daemon calls the routes, and every
//! 200 body is validated (JSON Schema 2020-12, `boon`) against the schema `/openapi.json` declares for that
//! operation. The routes whose response is still an untyped object are pinned in
//! `tests/snapshots/untyped_responses.txt` (`ENGRAM_BLESS=1` rewrites it), so a route can only leave that list
//! by getting a schema, and no typed route can drift from its schema unnoticed.
#![cfg(feature = "server")]

mod common;

use std::collections::BTreeSet;

use common::call;
use engram::server::RunningServer;
use serde_json::{Value, json};

const DOC: &str = "http://engram.test/openapi.json";

struct Checker<'a> {
    srv: &'a RunningServer,
    doc: Value,
    schemas: boon::Schemas,
    compiler: boon::Compiler,
    checked: BTreeSet<String>,
}

fn pointer_escape(s: &str) -> String {
    s.replace('~', "~0").replace('/', "~1").replace('{', "%7B").replace('}', "%7D")
}

impl<'a> Checker<'a> {
    fn new(srv: &'a RunningServer) -> Self {
        let doc = call(srv, "GET", "/openapi.json", None).json();
        let mut compiler = boon::Compiler::new();
        compiler.set_default_draft(boon::Draft::V2020_12);
        compiler.add_resource(DOC, doc.clone()).unwrap();
        Checker { srv, doc, schemas: boon::Schemas::new(), compiler, checked: BTreeSet::new() }
    }

    fn validator(&mut self, method: &str, template: &str) -> boon::SchemaIndex {
        let m = method.to_ascii_lowercase();
        let loc =
            format!("{DOC}#/paths/{}/{m}/responses/200/content/application~1json/schema", pointer_escape(template));
        self.compiler.compile(&loc, &mut self.schemas).unwrap_or_else(|e| panic!("{loc}: {e}"))
    }

    /// Whether `value` passes the response schema of `method template`.
    fn accepts(&mut self, method: &str, template: &str, value: &Value) -> bool {
        let idx = self.validator(method, template);
        self.schemas.validate(value, idx).is_ok()
    }

    /// Calls `method path` (a concrete path for the route `template`), expects 200 and a body that validates
    /// against the route's response schema; returns the body.
    fn check(&mut self, method: &str, template: &str, path: &str, body: Option<Value>) -> Value {
        let text = body.map(|b| b.to_string());
        let r = call(self.srv, method, path, text.as_deref());
        assert_eq!(r.status, 200, "{method} {path}: {}", r.body);
        let m = method.to_ascii_lowercase();
        let op = &self.doc["paths"][template][&m];
        assert!(op.is_object(), "{method} {template} is not in the document");
        let schema = &op["responses"]["200"]["content"]["application/json"]["schema"];
        assert!(schema.is_object(), "{method} {template}: no JSON response schema");
        let loc =
            format!("{DOC}#/paths/{}/{m}/responses/200/content/application~1json/schema", pointer_escape(template));
        let idx = self.compiler.compile(&loc, &mut self.schemas).unwrap_or_else(|e| panic!("{loc}: {e}"));
        let value: Value = serde_json::from_str(&r.body).unwrap_or_else(|e| panic!("{method} {path}: {e}"));
        if let Err(e) = self.schemas.validate(&value, idx) {
            panic!("{method} {path}: the response does not match its schema:\n{e:#}\nbody: {value}");
        }
        self.checked.insert(format!("{method} {template}"));
        value
    }
}

/// The routes whose 200 response the document describes only as `{"type": "object"}`.
fn untyped(doc: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let s = &op["responses"]["200"]["content"]["application/json"]["schema"];
            if *s == json!({"type": "object"}) {
                out.push(format!("{} {path}", method.to_ascii_uppercase()));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn untyped_responses_are_pinned() {
    let dir = tempfile::tempdir().unwrap();
    let srv = common::server(dir.path(), 1 << 20);
    let doc = call(&srv, "GET", "/openapi.json", None).json();
    let got = untyped(&doc).join("\n") + "\n";
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots/untyped_responses.txt");
    if std::env::var_os("ENGRAM_BLESS").is_some() {
        std::fs::write(&path, &got).unwrap();
    }
    let want = std::fs::read_to_string(&path).unwrap_or_default();
    assert_eq!(got, want, "routes with an untyped response changed; ENGRAM_BLESS=1 rewrites the snapshot");
}

#[test]
fn real_responses_match_the_document() {
    let dir = tempfile::tempdir().unwrap();
    let store = std::sync::Arc::new(engram::KnowledgeStore::open(engram::StoreConfig::new(dir.path())).unwrap());
    let srv = common::server_on(dir.path(), store.clone(), 4 << 20);
    let mut c = Checker::new(&srv);

    // The validation bites: a body of the wrong shape fails.
    let ok_thread =
        json!({"success": true, "thread_id": "t", "deleted_messages": 1, "deleted_memories": 0, "message": "x"});
    assert!(c.accepts("DELETE", "/threads/{thread_id}", &ok_thread));
    let mut bad = ok_thread.clone();
    bad["deleted_messages"] = json!("one");
    assert!(!c.accepts("DELETE", "/threads/{thread_id}", &bad));
    assert!(!c.accepts("GET", "/health", &json!({"status": 5})));

    // System.
    c.check("GET", "/health", "/health", None);
    c.check("GET", "/capabilities", "/capabilities", None);

    c.check("GET", "/livez", "/livez", None);
    let wm = c.check("GET", "/agent/working-memory", "/agent/working-memory", None);
    assert_eq!((wm["exists"].as_bool(), wm["lastModified"].is_null()), (Some(false), true), "{wm}");

    // Memories.
    let created = c.check(
        "POST",
        "/memories",
        "/memories",
        Some(json!({"id": "m1", "content": "Alice Johnson met Bob Smith at the harbour in Lisbon.", "labels": ["travel"], "importance": 0.7})),
    );
    assert_eq!(created["memory"]["id"], "m1");
    c.check(
        "POST",
        "/memories/batch",
        "/memories/batch",
        Some(json!({"memories": [
            {"id": "m2", "content": "Bob Smith prefers green tea in the morning.", "unit_type": "preference"},
            {"id": "m3", "content": "We decided to move the release to Friday.", "unit_type": "decision", "labels": ["work"]},
        ]})),
    );
    let list = c.check("GET", "/memories", "/memories?limit=10", None);
    assert!(list["memories"].as_array().unwrap().len() >= 3, "{list}");
    c.check("GET", "/memories/{memory_id}", "/memories/m1", None);
    c.check("PATCH", "/memories/{memory_id}", "/memories/m2", Some(json!({"importance": 0.9})));
    let labels = c.check("GET", "/memories/{memory_id}/labels", "/memories/m1/labels", None);
    let travel = labels["labels"][0]["id"].as_str().expect("m1 has its label").to_string();
    c.check("POST", "/memories/{memory_id}/labels/{label_id}", &format!("/memories/m2/labels/{travel}"), None);
    c.check("DELETE", "/memories/{memory_id}/labels/{label_id}", &format!("/memories/m2/labels/{travel}"), None);
    c.check("GET", "/memories/search", "/memories/search?q=harbour&limit=5", None);
    let hits = c.check("POST", "/memories/search", "/memories/search", Some(json!({"query": "green tea", "limit": 5})));
    assert!(!hits.as_array().unwrap().is_empty());
    c.check("POST", "/memories/{memory_id}/favorite", "/memories/m1/favorite?is_favorite=true", None);
    c.check("GET", "/favorites/memories", "/favorites/memories", None);

    // Labels.
    c.check("GET", "/labels", "/labels", None);
    let label = c.check("POST", "/labels", "/labels?name=ideas&color=%233b82f6", None);
    let lid = label["id"].as_str().unwrap().to_string();
    c.check("GET", "/labels/{label_id}", &format!("/labels/{lid}"), None);
    c.check("PUT", "/labels/{label_id}", &format!("/labels/{lid}"), Some(json!({"description": "loose ideas"})));
    c.check("GET", "/labels/health", "/labels/health", None);
    c.check("POST", "/labels/consolidation-preview", "/labels/consolidation-preview", None);

    // Label maintenance.
    let mut ids = Vec::new();
    for name in ["alpha", "beta", "gamma", "delta"] {
        let l = c.check("POST", "/labels", &format!("/labels?name={name}"), None);
        let id = l["id"].as_str().unwrap().to_string();
        c.check("POST", "/memories/{memory_id}/labels/{label_id}", &format!("/memories/m1/labels/{id}"), None);
        ids.push(id);
    }
    let (alpha, beta, gamma, delta) = (&ids[0], &ids[1], &ids[2], &ids[3]);
    let m = c.check("POST", "/labels/merge", &format!("/labels/merge?source_id={alpha}&target_id={beta}"), None);
    assert_eq!(m["dropped_duplicate_edges"], 1, "m1 had both: {m}");
    let merges = c.check("GET", "/labels/merges", "/labels/merges", None);
    let merge_id = merges["merges"][0]["merge_id"].as_str().unwrap().to_string();
    let r = c.check("POST", "/labels/merges/{merge_id}/reverse", &format!("/labels/merges/{merge_id}/reverse"), None);
    assert!(r["merge"]["reversed_at"].is_string(), "{r}");
    c.check("GET", "/labels/merge-candidates", "/labels/merge-candidates?sim_floor=0.5", None);
    let a = c.check(
        "POST",
        "/labels/{label_id}/merge/apply",
        &format!("/labels/{gamma}/merge/apply"),
        Some(json!({"target_label_id": beta})),
    );
    assert_eq!(a["target"]["id"].as_str(), Some(beta.as_str()), "{a}");
    let d =
        c.check("POST", "/labels/{label_id}/delete/apply", &format!("/labels/{delta}/delete/apply"), Some(json!({})));
    assert_eq!(d["label_id"].as_str(), Some(delta.as_str()));
    let d = c.check("DELETE", "/labels/{label_id}", &format!("/labels/{lid}"), None);
    assert_eq!(d["label_id"].as_str(), Some(lid.as_str()));

    // Lifecycle.
    for id in ["l1", "l2", "l3", "l4"] {
        c.check(
            "POST",
            "/memories",
            "/memories",
            Some(json!({"id": id, "content": format!("Lifecycle memory {id} about tides.")})),
        );
    }
    let a = c.check("POST", "/memories/{memory_id}/archive", "/memories/l1/archive", None);
    assert_eq!((a["state"].as_str(), a["previous_state"].as_str()), (Some("archived"), Some("active")));
    c.check("POST", "/memories/{memory_id}/deprecate", "/memories/l2/deprecate", Some(json!({"reason": "old"})));
    c.check(
        "POST",
        "/memories/{memory_id}/supersede",
        "/memories/l3/supersede",
        Some(json!({"newer_memory_id": "l4"})),
    );
    let f = c.check("POST", "/memories/{memory_id}/forget", "/memories/l4/forget", None);
    assert!(f["memory"].is_null(), "{f}");

    // Spaces.
    c.check("GET", "/spaces", "/spaces", None);
    c.check("POST", "/spaces", "/spaces", Some(json!({"name": "Research"})));
    c.check("GET", "/spaces/{space_id}", "/spaces/default", None);
    c.check("GET", "/spaces/resolve", "/spaces/resolve?reference=Research", None);

    // Threads.
    c.check(
        "POST",
        "/threads",
        "/threads",
        Some(json!({"thread_id": "t1", "title": "Trip", "messages": [
            {"role": "user", "content": "Where did Alice meet Bob?"},
            {"role": "assistant", "content": "At the harbour in Lisbon."},
        ]})),
    );
    c.check(
        "POST",
        "/threads/{thread_id}/append",
        "/threads/t1/append",
        Some(json!({"messages": [{"role": "user", "content": "Thanks!"}]})),
    );
    c.check("POST", "/threads/{thread_id}/favorite", "/threads/t1/favorite?is_favorite=true", None);
    let t = c.check("GET", "/threads/{thread_id}", "/threads/t1?limit=2", None);
    assert_eq!((t["total_messages"].as_u64(), t["has_more"].as_bool()), (Some(3), Some(true)), "{t}");
    let l = c.check("GET", "/threads", "/threads?limit=5", None);
    assert_eq!(l["pagination"]["total"], 1, "{l}");
    let f = c.check("GET", "/threads/search", "/threads/search?query=harbour", None);
    assert_eq!(f["threads"][0]["id"], "t1", "{f}");
    let u = c.check(
        "POST",
        "/threads/{thread_id}/metadata/merge",
        "/threads/t1/metadata/merge",
        Some(json!({"metadata": {"topic": "travel"}})),
    );
    assert_eq!(u["thread"]["metadata"]["topic"], "travel", "{u}");
    c.check("GET", "/favorites/threads", "/favorites/threads", None);

    // Relations, sources, embeddings.
    c.check(
        "POST",
        "/memories/{memory_id}/relations",
        "/memories/m1/relations",
        Some(json!({"target_memory_id": "m2", "relation_type": "related"})),
    );
    let src = c.check(
        "POST",
        "/sources/ingest/file",
        "/sources/ingest/file",
        Some(json!({"file_name": "notes.md", "content": "# Notes\n\nThe harbour opens at six.\n"})),
    );
    let sid = src["id"].as_str().unwrap().to_string();
    c.check("GET", "/sources/{source_id}", &format!("/sources/{sid}"), None);
    let l = c.check("GET", "/sources", "/sources?limit=5", None);
    assert_eq!(l["total"], 1);
    let f = c.check("GET", "/sources/search", "/sources/search?q=harbour", None);
    assert_eq!(f["results"][0]["source_id"].as_str(), Some(sid.as_str()), "{f}");
    let w = c.check("GET", "/sources/{source_id}/content", &format!("/sources/{sid}/content?limit=8"), None);
    assert_eq!((w["returned_length"].as_u64(), w["has_more"].as_bool()), (Some(8), Some(true)), "{w}");
    let table = c.check(
        "POST",
        "/sources/ingest/file",
        "/sources/ingest/file",
        Some(json!({"file_name": "t.csv", "content": "name,n,when,ok\nAda,3,2024-01-02,yes\nBo,,2024-02-03,no\n"})),
    );
    let tid = table["id"].as_str().unwrap().to_string();
    let a = c.check("GET", "/sources/{source_id}/analysis", &format!("/sources/{tid}/analysis"), None);
    let types: Vec<&str> =
        a["sheets"][0]["columns"].as_array().unwrap().iter().map(|c| c["dtype"].as_str().unwrap()).collect();
    assert_eq!(types, ["string", "integer", "date", "boolean"], "{a}");
    let rels = c.check("GET", "/memories/{memory_id}/relations", "/memories/m1/relations", None);
    let rel_id = rels["relations"][0]["id"].as_str().unwrap_or_else(|| panic!("{rels}")).to_string();
    c.check("DELETE", "/memories/relations/{rel_id}", &format!("/memories/relations/{rel_id}"), None);
    let d = c.check("DELETE", "/spaces/{space_id}", "/spaces/research?dry_run=true", None);
    assert_eq!(d["can_delete"], true, "{d}");
    let d = c.check("DELETE", "/spaces/{space_id}", "/spaces/research", None);
    assert_eq!(d["success"], true, "{d}");
    let d = c.check("DELETE", "/sources/{source_id}", &format!("/sources/{sid}"), None);
    assert_eq!(d["id"].as_str(), Some(sid.as_str()));
    c.check("POST", "/v1/embeddings", "/v1/embeddings", Some(json!({"input": ["a harbour", "green tea"]})));

    // The tree API.
    let caps = c.check("GET", "/fs/capabilities", "/fs/capabilities", None);
    assert_eq!(caps["limits"]["max_limit"], 1000);
    let ls = c.check("GET", "/fs/ls", "/fs/ls?path=/memories/by-id&limit=2", None);
    assert_eq!(ls["next_cursor"], ls["nextCursor"]);
    assert!(ls["next_cursor"].is_string(), "{ls}");
    c.check("GET", "/fs/ls", "/fs/ls?path=/", None);
    let cat = c.check("GET", "/fs/cat", "/fs/cat?path=/memories/by-id/m1.memory.md", None);
    assert!(cat["body"].as_str().unwrap().contains("harbour"));
    c.check("GET", "/fs/cat", "/fs/cat?path=/memories/by-id/m1.memory.md&line=1&lines=1", None);
    c.check("GET", "/fs/stat", "/fs/stat?path=/memories/by-id/m1.memory.md", None);
    c.check("GET", "/fs/stat", "/fs/stat?path=/memories", None);
    let f = c.check("GET", "/fs/find", "/fs/find?path=/memories&limit=1", None);
    assert_eq!(f["hits"], f["paths"]);
    c.check("GET", "/fs/find", "/fs/find?path=/wiki&type=entity", None);
    let g = c.check("GET", "/fs/grep", "/fs/grep?path=/&q=harbour", None);
    assert!(!g["matches"].as_array().unwrap().is_empty());
    c.check("GET", "/fs/recall", "/fs/recall?query=harbour&k=3", None);
    let w = c.check(
        "POST",
        "/fs/write",
        "/fs/write",
        Some(json!({"path": "/memories/by-id/fsw.memory.md", "body": "Written through the tree.", "frontmatter": {"title": "Tree"}})),
    );
    assert_eq!((w["created"].as_bool(), w["id"].as_str()), (Some(true), Some("fsw")), "{w}");
    c.check(
        "POST",
        "/fs/write",
        "/fs/write",
        Some(json!({"path": "/working-memory/today.md", "body": "Focus: tests."})),
    );
    let d = c.check("POST", "/fs/delete", "/fs/delete", Some(json!({"path": "/memories/by-id/fsw.memory.md"})));
    assert_eq!(d["id"], "fsw");

    // Communities and the library.
    let texts = [
        "Dave Okafor showed Carol Nguyen the best ramen in Tokyo.",
        "Carol Nguyen practised Japanese with Dave Okafor in Tokyo.",
        "Dave Okafor and Carol Nguyen hiked near Tokyo.",
        "Alice Johnson and Bob Smith sailed from Lisbon.",
        "Bob Smith and Alice Johnson walked in Lisbon.",
    ];
    for (i, t) in texts.iter().enumerate() {
        c.check("POST", "/memories", "/memories", Some(json!({"id": format!("g{i}"), "content": t})));
    }
    store.graph().recompute().unwrap();
    let l = c.check("GET", "/communities", "/communities", None);
    assert!(l["total"].as_u64().unwrap() >= 2, "{l}");
    assert!(l["computed"].is_object(), "{l}");
    let cid = l["communities"][0]["id"].as_u64().unwrap();
    let one = c.check("GET", "/communities/{community_id}", &format!("/communities/{cid}"), None);
    assert_eq!(one["community"]["id"], cid);
    let g = c.check(
        "GET",
        "/library/community/{community_id}/subgraph",
        &format!("/library/community/{cid}/subgraph"),
        None,
    );
    assert!(g["nodes"].as_array().unwrap().iter().any(|n| n["node_type"] == "entity"), "{g}");
    assert!(g["edges"].as_array().unwrap().iter().any(|e| e["edge_type"] == "RELATES_TO"), "{g}");
    let whole = c.check("GET", "/library/graph", "/library/graph", None);
    assert!(whole["nodes"].as_array().unwrap().iter().any(|n| n["metadata"]["community_id"] == cid), "{whole}");
    let r = c.check(
        "GET",
        "/library/community/{community_id}/recent-memories",
        &format!("/library/community/{cid}/recent-memories"),
        None,
    );
    assert!(!r["memories"].as_array().unwrap().is_empty(), "{r}");
    c.check("GET", "/library/community/{community_id}/related", &format!("/library/community/{cid}/related"), None);
    let w = c.check("GET", "/library/wiki-index", "/library/wiki-index?include_top_memories=2", None);
    assert_eq!(w["communities"], w["rows"]);
    assert!(w["rows"][0]["top_memories"].is_array(), "{w}");
    let crystal = w["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(|r| r["top_crystals"][0]["crystal_id"].as_str())
        .map(str::to_string);
    let w = c.check("GET", "/library/wiki-index", "/library/wiki-index", None);
    assert!(w["rows"][0].get("top_memories").is_none(), "absent unless asked for");
    let e = c.check("GET", "/library/wiki-export-summary", "/library/wiki-export-summary", None);
    assert!(e["entities"].as_u64().unwrap() >= 4, "{e}");
    let crystal = crystal.expect("recompute makes crystals of the main entities");
    let s = c.check(
        "GET",
        "/library/crystal/{crystal_id}/source-memories",
        &format!("/library/crystal/{crystal}/source-memories"),
        None,
    );
    assert!(s["source_memories"].as_array().unwrap().iter().all(|m| m["relation"] == "CRYSTALLIZED_FROM"));
    for (template, path) in [
        ("/library/wiki-page/entity/{id_or_name}", "/library/wiki-page/entity/Carol%20Nguyen".to_string()),
        ("/library/wiki-page/topic/{community_id}", format!("/library/wiki-page/topic/{cid}")),
    ] {
        let r = call(&srv, "GET", &path, None);
        assert_eq!(r.status, 200, "{path}: {}", r.body);
        assert!(r.body.starts_with("---\n"), "{path}: {}", r.body);
        let declared = &c.doc["paths"][template]["get"]["responses"]["200"]["content"];
        assert!(declared["text/markdown"].is_object(), "{template}: {declared}");
    }

    // Timeline reviews.
    c.check(
        "POST",
        "/memories",
        "/memories",
        Some(json!({"id": "k1", "content": "Caroline has 2 kids and lives in Boston"})),
    );
    c.check(
        "POST",
        "/memories",
        "/memories",
        Some(json!({"id": "k2", "content": "Caroline has 3 kids and lives in Boston"})),
    );
    let feed = c.check("GET", "/agent/feed/events", "/agent/feed/events", None);
    assert_eq!(feed["total"], 1, "{feed}");
    let ev = feed["events"][0]["event_id"].as_str().unwrap().to_string();
    let p = c.check(
        "POST",
        "/agent/feed/events/{event_id}/review",
        &format!("/agent/feed/events/{ev}/review"),
        Some(json!({"action": "keep_newer_as_latest"})),
    );
    assert_eq!(p["phase"], "preview");
    let plan = p["plan_id"].as_str().unwrap().to_string();
    let a = c.check(
        "POST",
        "/agent/feed/events/{event_id}/review",
        &format!("/agent/feed/events/{ev}/review"),
        Some(json!({"action": "keep_newer_as_latest", "phase": "apply", "plan_id": plan})),
    );
    assert_eq!((a["status"].as_str(), a["event"]["resolved"].as_bool()), (Some("success"), Some(true)), "{a}");
    assert!(a["event"]["resolution"].is_object());

    // Working memory, context, stats, checkpoint.
    let wm = c.check(
        "PUT",
        "/agent/working-memory",
        "/agent/working-memory",
        Some(json!({"content": "Focus: the harbour."})),
    );
    assert_eq!((wm["success"].as_bool(), wm["exists"].as_bool()), (Some(true), Some(true)), "{wm}");
    assert_eq!(wm["last_modified"], wm["lastModified"]);
    let wm = c.check("GET", "/agent/working-memory", "/agent/working-memory", None);
    assert!(wm.get("success").is_none(), "{wm}");
    let h = c.check("GET", "/agent/working-memory/history", "/agent/working-memory/history", None);
    assert_eq!(h["dates"].as_array().unwrap().len(), h["history"].as_array().unwrap().len());
    let b = c.check("GET", "/context/bundle", "/context/bundle", None);
    assert!(b["markdown"].as_str().unwrap().contains("Working memory"), "{b}");
    let st = c.check("GET", "/stats", "/stats", None);
    assert!(st["memory_count"].as_u64().unwrap() >= 5, "{st}");
    let sy = c.check("GET", "/sync/status", "/sync/status", None);
    assert_eq!((sy["enabled"].as_bool(), sy["device_id"].as_str().map(str::len)), (Some(false), Some(32)), "{sy}");
    let cp = c.check("POST", "/health/checkpoint", "/health/checkpoint", None);
    assert_eq!((cp["success"].as_bool(), cp["durable"].as_bool()), (Some(true), Some(true)));
    assert!(cp["generation"].as_u64().unwrap() > 0, "{cp}");
    // Removing a device of the store's sync group: a second store joins through one folder, then goes.
    let (folder, other_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let other = engram::KnowledgeStore::open(engram::StoreConfig::new(other_dir.path())).unwrap();
    let code = store.sync().init_folder(folder.path()).unwrap();
    other.sync().join_folder(folder.path(), &code).unwrap();
    for s in [&*store, &other, &*store] {
        s.sync().sync_folder().unwrap();
    }
    let oid = other.admin().device_id().unwrap().to_hex();
    let r = c.check("DELETE", "/sync/devices/{device_id}", &format!("/sync/devices/{oid}"), None);
    assert_eq!((r["device_id"].as_str(), r["epoch"].as_u64()), (Some(oid.as_str()), Some(1)), "{r}");
    assert!(r["pairing_code"].as_str().is_some_and(|p| p.starts_with("engram-sync-2-1-")), "{r}");
    assert_eq!(call(&srv, "DELETE", &format!("/sync/devices/{oid}"), None).status, 409, "removed already");
    assert_eq!(call(&srv, "DELETE", "/sync/devices/00112233445566778899aabbccddeeff", None).status, 404);

    // Distillation, thread import, catch-up, the document itself.
    let convo = "User: I moved to Porto in March and I work as a nurse now.\nAssistant: Congratulations on the move!";
    let t =
        c.check("POST", "/memories/distill/triage", "/memories/distill/triage", Some(json!({"thread_content": convo})));
    assert_eq!(t["should_distill"], true, "{t}");
    let d = c.check("POST", "/memories/distill", "/memories/distill", Some(json!({"thread_content": convo})));
    assert!(!d["memories"].as_array().unwrap().is_empty(), "{d}");
    assert_eq!(d["memory"], d["memories"][0]);
    let i = c.check(
        "POST",
        "/threads/import",
        "/threads/import",
        Some(json!({"threads": [
            {"thread_id": "imp1", "messages": [{"role": "user", "content": "I adopted a cat named Miso."}]},
            {"thread_id": "imp2", "markdown_content": "User: My sister lives in Oslo."},
        ]})),
    );
    assert_eq!((i["imported_count"].as_u64(), i["failed_count"].as_u64()), (Some(2), Some(0)), "{i}");
    let k =
        c.check("POST", "/agent/trigger/memory-catchup", "/agent/trigger/memory-catchup", Some(json!({"horizon": 7})));
    assert_eq!(k["status"], "success", "{k}");
    assert!(k["threads"].is_array());
    let doc = c.check("GET", "/openapi.json", "/openapi.json", None);
    assert_eq!(doc["openapi"], "3.1.0");

    // Export and import.
    let ex = c.check("POST", "/data/export", "/data/export", None);
    assert_eq!(ex["success"], true);
    let archive = ex["export_path"].as_str().unwrap().to_string();
    let job = c.check("POST", "/data/import", "/data/import", Some(json!({"import_path": archive, "mode": "skip"})));
    let job_id = job["job_id"].as_str().unwrap().to_string();
    let mut status = Value::Null;
    for _ in 0..200 {
        status = c.check("GET", "/data/import/status/{job_id}", &format!("/data/import/status/{job_id}"), None);
        if status["status"] != "processing" {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!((status["status"].as_str(), status["progress"].as_f64()), (Some("completed"), Some(100.0)), "{status}");

    // An online backup, into the data directory.
    let b = c.check("POST", "/admin/backup", "/admin/backup", Some(json!({"backup_path": "backups/openapi.redb"})));
    assert!(
        b["backup_path"].as_str().is_some_and(|p| p.ends_with("openapi.redb")) && b["memories"].as_u64() > Some(0),
        "{b}"
    );

    // Deletes last.
    c.check("DELETE", "/memories/{memory_id}", "/memories/m3", None);
    let d = c.check("DELETE", "/threads/{thread_id}", "/threads/t1", None);
    assert_eq!(d["deleted_messages"], 3, "{d}");

    // Every route with a JSON response schema was called and its body validated, but these.
    let not_called: BTreeSet<&str> = [
        "POST /agent/tools/call",                 // untyped: the tool's own result (tests/mcp.rs)
        "POST /sources/ingest/url",               // fetches a local origin server: tests/url_ingest.rs
        "POST /sources/ingest/path",              // needs an allowed path outside the data directory (tests/sources.rs)
        "POST /memories/bulk/move/preview",       // tests/spaces.rs
        "POST /memories/bulk/move",               // tests/spaces.rs
        "PATCH /spaces/{space_id}",               // tests/spaces.rs
        "PUT /spaces/{space_id}",                 // tests/spaces.rs
        "PATCH /memories/relations/{rel_id}",     // tests/server_http.rs
        "POST /labels/consolidate",               // tests/labels.rs
        "POST /labels/{label_id}/merge/preview",  // tests/labels.rs
        "POST /labels/{label_id}/delete/preview", // tests/labels.rs
    ]
    .into_iter()
    .collect();
    let mut missing = Vec::new();
    for (path, item) in c.doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let route = format!("{} {path}", method.to_ascii_uppercase());
            let json_schema = op["responses"]["200"]["content"]["application/json"].is_object();
            if json_schema && !c.checked.contains(&route) && !not_called.contains(route.as_str()) {
                missing.push(route);
            }
        }
    }
    assert!(missing.is_empty(), "routes with a response schema this test never called: {missing:?}");
    let stale: Vec<&&str> = not_called.iter().filter(|r| c.checked.contains(**r)).collect();
    assert!(stale.is_empty(), "called after all, drop them from the list: {stale:?}");
    eprintln!("{} routes checked", c.checked.len());
    assert!(c.checked.len() >= 90, "{} routes checked", c.checked.len());
}
