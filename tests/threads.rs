//! Threads and messages through a real daemon on a loopback port and a real redb file: create, duplicate ids,
//! deduplicated and checkpointed appends, paging, search, import, metadata merge, favourites, delete with
//! cascade, bad input that changes nothing, and persistence across a reopen.
#![cfg(feature = "server")]

mod backend;
mod common;

use std::sync::Arc;

use common::{call, server, server_on};
use engram::KnowledgeStore;
use serde_json::{Value, json};

fn msgs(texts: &[(&str, &str)]) -> Value {
    Value::Array(texts.iter().map(|(r, c)| json!({"role": r, "content": c})).collect())
}

fn count(srv: &engram::server::RunningServer, id: &str) -> u64 {
    call(srv, "GET", &format!("/threads/{id}?limit=1"), None).json()["total_messages"].as_u64().unwrap()
}

#[test]
fn create_append_read_and_sync_protocol() {
    let dir = tempfile::tempdir().unwrap();
    let srv = server(dir.path(), 1 << 20);
    let body = json!({"thread_id": "t1", "title": "Trip", "source": "cli",
        "messages": msgs(&[("user", "I am planning a trip to Lisbon in May. Dr. Silva said it is fine."),
                           ("assistant", "Lisbon is lovely in spring.")])});
    let r = call(&srv, "POST", "/threads", Some(&body.to_string()));
    assert_eq!(r.status, 200, "{}", r.body);
    let v = r.json();
    assert_eq!(v["thread"]["thread_id"], "t1");
    assert_eq!(v["thread"]["message_count"], 2);
    assert_eq!(v["messages"][1]["order_index"], 1);
    assert_eq!(v["messages"][0]["token_count"], 15);
    assert_eq!(v["auto_generated_summary"], "I am planning a trip to Lisbon in May.");
    assert_eq!(v["auto_extraction_performed"], true);

    // A duplicate id is 409 with "already exists"; nothing changes.
    let dup = call(&srv, "POST", "/threads", Some(&body.to_string()));
    assert_eq!(dup.status, 409);
    assert!(dup.body.contains("already exists"), "{}", dup.body);
    assert_eq!(count(&srv, "t1"), 2);

    // Append with a checkpoint; replaying the same idempotency key adds nothing.
    let append = |body: Value| call(&srv, "POST", "/threads/t1/append", Some(&body.to_string()));
    let r = append(json!({"messages": msgs(&[("user", "Also Porto.")]), "idempotency_key": "k1",
        "expected_message_count": 2}));
    assert_eq!(r.status, 200, "{}", r.body);
    let v = r.json();
    assert_eq!(
        (v["success"].as_bool(), v["messages_added"].as_u64(), v["total_messages"].as_u64()),
        (Some(true), Some(1), Some(3))
    );
    assert_eq!(v["append_mode"], "checkpointed");
    let v = append(json!({"messages": msgs(&[("user", "Also Porto.")]), "idempotency_key": "k1"})).json();
    assert_eq!((v["messages_added"].as_u64(), v["total_messages"].as_u64()), (Some(0), Some(3)));
    assert_eq!(v["append_mode"], "append");

    // A stale checkpoint is 409 checkpoint_conflict and adds nothing.
    let r = append(json!({"messages": msgs(&[("user", "late")]), "expected_message_count": 2}));
    assert_eq!(r.status, 409);
    assert_eq!(r.json()["error_code"], "checkpoint_conflict");
    assert_eq!(count(&srv, "t1"), 3);

    // external_id deduplicates across calls and within one call; deduplicate=false appends anyway.
    let ext = |id: &str, c: &str| json!({"role": "user", "content": c, "metadata": {"external_id": id}});
    let v = append(json!({"messages": [ext("e1", "a"), ext("e1", "a"), ext("e2", "b")]})).json();
    assert_eq!((v["messages_added"].as_u64(), v["total_messages"].as_u64()), (Some(2), Some(5)));
    let v = append(json!({"messages": [ext("e2", "b")]})).json();
    assert_eq!(v["messages_added"], 0);
    let v = append(json!({"messages": [ext("e2", "b")], "deduplicate": false})).json();
    assert_eq!(v["messages_added"], 1);

    // Paging of messages.
    let v = call(&srv, "GET", "/threads/t1?limit=2&offset=1", None).json();
    let got: Vec<u64> = v["messages"].as_array().unwrap().iter().map(|m| m["order_index"].as_u64().unwrap()).collect();
    assert_eq!(got, vec![1, 2]);
    assert_eq!((v["total_messages"].as_u64(), v["has_more"].as_bool()), (Some(6), Some(true)));
    assert_eq!(v["messages"][1]["content"], "Also Porto.");

    // Unknown thread: 404 thread_not_found, for reads and appends.
    for (m, p) in [("GET", "/threads/nope"), ("POST", "/threads/nope/append"), ("DELETE", "/threads/nope")] {
        let r = call(&srv, m, p, Some(&json!({"messages": []}).to_string()));
        assert_eq!(r.status, 404, "{m} {p}: {}", r.body);
        assert_eq!(r.json()["error_code"], "thread_not_found");
    }
}

#[test]
fn bad_input_gets_4xx_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let srv = server(dir.path(), 4 << 20);
    let ok = json!({"thread_id": "t", "messages": msgs(&[("user", "hello")])});
    assert_eq!(call(&srv, "POST", "/threads", Some(&ok.to_string())).status, 200);
    let huge = "x".repeat(300_000);
    for (path, body, loc) in [
        (
            "/threads",
            json!({"thread_id": "u", "messages": [{"role": "user"}]}),
            json!(["body", "messages", 0, "content"]),
        ),
        ("/threads", json!({"thread_id": "u", "messages": "hi"}), json!(["body", "messages"])),
        ("/threads", json!({"thread_id": "u/v", "messages": []}), json!(["body", "thread_id"])),
        (
            "/threads",
            json!({"thread_id": "u", "messages": [{"role": "", "content": "x"}]}),
            json!(["body", "messages", 0, "role"]),
        ),
        (
            "/threads",
            json!({"thread_id": "u", "messages": [{"role": "user", "content": huge}]}),
            json!(["body", "messages", 0, "content"]),
        ),
        (
            "/threads",
            json!({"thread_id": "u", "messages": [{"role": "user", "content": "x", "timestamp": "yesterday"}]}),
            json!(["body", "messages", 0, "timestamp"]),
        ),
        (
            "/threads/t/append",
            json!({"messages": [{"role": "user", "content": "ok"}, {"role": "user", "content": 5}]}),
            json!(["body", "messages", 1, "content"]),
        ),
        (
            "/threads/t/append",
            json!({"messages": [{"role": "user", "content": "ok"}, {"role": "user", "content": huge}]}),
            json!(["body", "messages", 1, "content"]),
        ),
        (
            "/threads/t/append",
            json!({"messages": [], "expected_message_count": -1}),
            json!(["body", "expected_message_count"]),
        ),
    ] {
        let r = call(&srv, "POST", path, Some(&body.to_string()));
        assert_eq!(r.status, 422, "{path} {}: {}", &body.to_string()[..60.min(body.to_string().len())], r.body);
        assert_eq!(r.json()["detail"][0]["loc"], loc, "{}", r.body);
    }
    assert_eq!(call(&srv, "GET", "/threads/u", None).status, 404, "no thread was created");
    assert_eq!(count(&srv, "t"), 1, "a failed append adds nothing");
    let r = call(
        &srv,
        "POST",
        "/threads",
        Some(&json!({"thread_id": "w", "space_id": "nope", "messages": []}).to_string()),
    );
    assert_eq!((r.status, r.json()["error_code"].as_str()), (404, Some("space_not_found")));
    let r = call(&srv, "POST", "/threads/t/favorite", None);
    assert_eq!(r.status, 422, "is_favorite is required");
}

#[test]
fn list_search_import_merge_favorite_delete() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(backend::open(dir.path()));
    let srv = server_on(dir.path(), store.clone(), 1 << 20);
    let mut extracted_from_a = 0;
    for (id, src, text) in [
        ("a", "cli", "We talked about the Porto trip and the Porto hotel."),
        ("b", "cursor", "Refactor the Porto parser."),
        ("c", "cli", "Nothing relevant here."),
    ] {
        let body =
            json!({"thread_id": id, "source": src, "messages": msgs(&[("user", text), ("user", "Porto again")])});
        let r = call(&srv, "POST", "/threads", Some(&body.to_string()));
        assert_eq!(r.status, 200);
        if id == "a" {
            extracted_from_a = r.json()["extracted_memories"].as_array().unwrap().len() as u64;
        }
    }
    assert!(extracted_from_a > 0);
    let v = call(&srv, "GET", "/threads?limit=2", None).json();
    assert_eq!(v["threads"].as_array().unwrap().len(), 2);
    assert_eq!(v["pagination"], json!({"limit": 2, "offset": 0, "total": 3, "has_more": true}));
    assert_eq!(v["threads"][0]["messages"], 2);
    let v = call(&srv, "GET", "/threads?source=cursor", None).json();
    assert_eq!(v["threads"][0]["thread_id"], "b");

    let v = call(&srv, "GET", "/threads/search?query=porto%20hotel", None).json();
    assert_eq!(v["total_found"], 1);
    assert_eq!(
        (v["threads"][0]["thread_id"].as_str(), v["threads"][0]["total_matches"].as_u64()),
        (Some("a"), Some(1))
    );
    let v = call(&srv, "GET", "/threads/search?query=Porto", None).json();
    assert_eq!(v["total_found"], 3, "{v}");
    assert_eq!(v["threads"][0]["matched_messages_count"], 2);
    assert_eq!(call(&srv, "GET", "/threads/search?q=Porto", None).status, 422, "the parameter is `query`");

    // Import: create, then create-or-append by id with a checkpoint, a stale checkpoint, and a batch.
    let imp = |b: Value| call(&srv, "POST", "/threads/import", Some(&b.to_string())).json();
    let v = imp(json!({"thread_id": "i1", "title": "Imported", "messages": msgs(&[("user", "one")])}));
    assert_eq!((v["success"].as_bool(), v["results"][0]["action"].as_str()), (Some(true), Some("created")));
    let v = imp(json!({"thread_id": "i1", "messages": msgs(&[("user", "one"), ("user", "two")]),
        "idempotency_key": "s", "expected_message_count": 1}));
    assert_eq!(v["results"][0]["append_mode"], "checkpointed");
    assert_eq!(v["results"][0]["message_count"], 3);
    let v = imp(json!({"thread_id": "i1", "messages": msgs(&[("user", "x")]), "expected_message_count": 1}));
    assert_eq!((v["success"].as_bool(), v["failed_count"].as_u64()), (Some(false), Some(1)));
    assert_eq!(v["results"][0]["error_code"], "checkpoint_conflict");
    let v = imp(json!({"threads": [{"title": "md", "markdown_content": "User: hi\nAssistant: hello"},
        {"title": "js", "messages": msgs(&[("user", "x")])}]}));
    assert_eq!((v["imported_count"].as_u64(), v["failed_count"].as_u64()), (Some(2), Some(0)));
    let md = v["results"][0]["thread_id"].as_str().unwrap().to_string();
    let m = call(&srv, "GET", &format!("/threads/{md}"), None).json();
    assert_eq!(
        (m["messages"][1]["role"].as_str(), m["messages"][1]["content"].as_str()),
        (Some("assistant"), Some("hello"))
    );

    // Metadata merge (only_missing keeps what is set).
    let merge = |b: Value| call(&srv, "POST", "/threads/a/metadata/merge", Some(&b.to_string())).json();
    merge(json!({"metadata": {"agent_id": "x", "source_app": "cli"}}));
    let v = merge(json!({"metadata": {"agent_id": "y", "cwd": "/tmp"}, "only_missing": true}));
    assert_eq!(v["thread"]["metadata"], json!({"agent_id": "x", "source_app": "cli", "cwd": "/tmp"}));

    // Favourites.
    assert_eq!(call(&srv, "POST", "/threads/b/favorite?is_favorite=true", None).status, 200);
    let v = call(&srv, "GET", "/favorites/threads", None).json();
    assert_eq!(v.as_array().unwrap().iter().map(|t| t["thread_id"].as_str().unwrap()).collect::<Vec<_>>(), vec!["b"]);

    // Delete with cascade removes the thread's memories, not others.
    for (id, thread) in [("m1", Some("a")), ("m2", None)] {
        let mut b = json!({"id": id, "content": format!("memory {id}")});
        if let Some(t) = thread {
            b["source_thread_id"] = t.into();
        }
        assert_eq!(call(&srv, "POST", "/memories", Some(&b.to_string())).status, 200);
    }
    let v = call(&srv, "DELETE", "/threads/a?cascade_delete_memories=true", None).json();
    assert_eq!((v["deleted_messages"].as_u64(), v["deleted_memories"].as_u64()), (Some(2), Some(1 + extracted_from_a)));
    assert_eq!(call(&srv, "GET", "/memories/m1", None).status, 404);
    assert_eq!(call(&srv, "GET", "/memories/m2", None).status, 200);
    assert_eq!(call(&srv, "GET", "/threads/a", None).status, 404);
    // The id is free again, and its old messages and keys are gone.
    let body = json!({"thread_id": "a", "messages": msgs(&[("user", "fresh")])});
    assert_eq!(call(&srv, "POST", "/threads", Some(&body.to_string())).json()["thread"]["message_count"], 1);
    srv.stop();

    // Everything is in the file.
    drop(store);
    let store = backend::open(dir.path());
    let (t, m) = store.threads().messages("i1", None, 10, 0).unwrap();
    assert_eq!((t.message_count, m.len(), t.title.as_str()), (3, 3, "Imported"));
    assert!(store.threads().get("b", None).unwrap().is_favorite);
}

#[test]
fn extraction_on_create_and_append() {
    let dir = tempfile::tempdir().unwrap();
    let srv = server(dir.path(), 1 << 20);
    let body = json!({"thread_id": "t1", "messages": [
        {"role": "user", "content": "I am planning a trip to Lisbon in May. Dr. Silva said it is fine.",
         "timestamp": "2023-11-20T10:00:00Z"},
        {"role": "assistant", "content": "Lisbon is lovely in spring.", "timestamp": "2023-11-20T10:01:00Z"},
        {"role": "user", "content": "Thanks!", "timestamp": "2023-11-20T10:02:00Z"},
        {"role": "user", "content": "Internal note", "timestamp": "2023-11-20T10:03:00Z",
         "metadata": {"exclude_from_distillation": true}}]});
    let v = call(&srv, "POST", "/threads", Some(&body.to_string())).json();
    assert_eq!(v["auto_extraction_performed"], true);
    assert_eq!(v["auto_generated_summary"], "I am planning a trip to Lisbon in May.");
    let ex = v["extracted_memories"].as_array().unwrap();
    // The plan (May, said in November, is next May) and the statement; "Thanks!" is chatter; the excluded
    // message is left out.
    assert_eq!(ex.len(), 2, "{ex:?}");
    assert_eq!((ex[0]["id"].as_str(), ex[0]["unit_type"].as_str()), (Some("t1#m0"), Some("plan")));
    assert_eq!((ex[0]["event_start"].as_str(), ex[0]["temporal_context"].as_str()), (Some("2024-05"), Some("future")));
    assert_eq!(ex[0]["content"], "User: I am planning a trip to Lisbon in May. Dr. Silva said it is fine.");
    assert_eq!(ex[0]["metadata"]["source_message_indices"], json!([0]));
    assert_eq!(ex[1]["event_start"], "2023-11-20", "no expression: the day it was said");
    let m = call(&srv, "GET", "/memories/t1%23m0", None).json();
    assert_eq!(m["source_thread"]["id"], "t1", "{m}");

    // Appends extract from the new messages only; a near-duplicate of a stored memory is merged, not added.
    let a = json!({"messages": [
        {"role": "user", "content": "We decided to book the hotel near Alfama yesterday.", "timestamp": "2023-11-21T09:00:00Z"},
        {"role": "user", "content": "I am planning a trip to Lisbon in May. Dr. Silva said it is fine.", "timestamp": "2023-11-21T09:01:00Z"}]});
    let v = call(&srv, "POST", "/threads/t1/append", Some(&a.to_string())).json();
    let ex = v["extracted_memories"].as_array().unwrap();
    assert_eq!(ex.len(), 1, "{v}");
    assert_eq!((ex[0]["unit_type"].as_str(), ex[0]["event_start"].as_str()), (Some("decision"), Some("2023-11-20")));
    assert_eq!(v["merged_duplicates"], 1);

    // On-demand threads keep their messages searchable but extract nothing.
    let b = json!({"thread_id": "t2", "metadata": {"analysis": "searchable-now-distill-on-demand", "historical_import": true},
        "messages": msgs(&[("user", "We decided to move to Berlin.")])});
    let v = call(&srv, "POST", "/threads", Some(&b.to_string())).json();
    assert_eq!(
        (v["auto_extraction_performed"].as_bool(), v["extracted_memories"].as_array().map(Vec::len)),
        (Some(false), Some(0))
    );
}

#[test]
fn distill_and_triage() {
    let dir = tempfile::tempdir().unwrap();
    let srv = server(dir.path(), 1 << 20);
    let post = |p: &str, b: Value| call(&srv, "POST", p, Some(&b.to_string()));
    let v = post("/memories/distill/triage", json!({"thread_content": "User: hi\nAssistant: hello! thanks"})).json();
    assert_eq!(v["should_distill"], false, "{v}");
    let v =
        post("/memories/distill/triage", json!({"thread_content": "User: We decided to use PostgreSQL for billing."}))
            .json();
    assert_eq!(v["should_distill"], true, "{v}");

    let content = "User: We decided to use PostgreSQL for the billing service.\nAssistant: Good choice.\nUser: I prefer tabs over spaces.";
    let r = post("/memories/distill", json!({"thread_content": content, "distillation_type": "simple_llm"}));
    assert_eq!(r.status, 200, "{}", r.body);
    let v = r.json();
    let types: Vec<&str> = v["memories"].as_array().unwrap().iter().map(|m| m["unit_type"].as_str().unwrap()).collect();
    assert_eq!(types, vec!["decision", "preference"], "{v}");
    assert_eq!((v["action"].as_str(), v["memory"]["unit_type"].as_str()), (Some("created"), Some("decision")));
    assert!(v["memory"]["source_thread"].is_null(), "no thread named, no provenance invented: {v}");
    // Distilling the same content again adds nothing: both units are near-duplicates of stored memories.
    let v = post("/memories/distill", json!({"thread_content": content})).json();
    assert_eq!((v["action"].as_str(), v["merged_duplicates"].as_u64()), (Some("none"), Some(2)), "{v}");

    // From a stored thread, selected messages only.
    let body = json!({"thread_id": "s", "metadata": {"analysis": "searchable-now-distill-on-demand"},
        "messages": msgs(&[("user", "I love hiking in the Alps."), ("user", "We will move to Zurich next year.")])});
    assert_eq!(post("/threads", body).json()["extracted_memories"], json!([]));
    let v = post("/memories/distill", json!({"thread_id": "s", "selected_message_indices": [1]})).json();
    let ms = v["memories"].as_array().unwrap();
    assert_eq!(ms.len(), 1, "{v}");
    assert_eq!((ms[0]["unit_type"].as_str(), ms[0]["source_thread"]["id"].as_str()), (Some("plan"), Some("s")));
    assert_eq!(post("/memories/distill", json!({"thread_id": "nope"})).status, 404);
    assert_eq!(post("/memories/distill", json!({})).status, 422);
}

/// An embedder that fails on texts containing "FAIL", to show that a failed extraction does not undo the
/// stored messages.
struct Fussy(engram::embed::HashEmbedder);
impl engram::embed::Embedder for Fussy {
    fn name(&self) -> &str {
        "fussy"
    }
    fn dim(&self) -> usize {
        self.0.dim()
    }
    fn embed(&self, texts: &[&str], t: engram::embed::InputType) -> engram::Result<Vec<Vec<f32>>> {
        if texts.iter().any(|x| x.contains("FAIL")) {
            return Err(engram::Error::new(engram::ErrorKind::Internal, "model failure"));
        }
        self.0.embed(texts, t)
    }
}

#[test]
fn a_failed_extraction_keeps_the_messages_and_warns() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = backend::config(dir.path()).embedder(Arc::new(Fussy(engram::embed::HashEmbedder::default())));
    let store = KnowledgeStore::open(cfg).unwrap();
    let c = store
        .threads()
        .create(engram::NewThread {
            thread_id: Some("f".into()),
            messages: vec![engram::NewMessage {
                role: "user".into(),
                content: "We decided the FAIL case is fine.".into(),
                ..Default::default()
            }],
            deduplicate: true,
            ..Default::default()
        })
        .unwrap();
    assert_eq!(c.thread.message_count, 1);
    assert!(c.extraction.memories.is_empty());
    assert!(c.extraction.warnings[0].contains("model failure"), "{:?}", c.extraction.warnings);
    assert_eq!(store.threads().get("f", None).unwrap().message_count, 1);
}
