//! Memory expiry (`expires_at`, store format 2) end to end, on the conformance suite's backend: set on create,
//! batch, upsert and update (REST and MCP), an expired memory out of listings, search and the context bundle but
//! readable by id with `expired: true`, `include_expired`, the 422 of a bad time, the sweep after the grace
//! period, and the `/health` counts.

mod backend;

use engram::api::tools::{Scope, call as tool};
use engram::api::{Api, ApiRequest, ServiceInfo};
use engram::{KnowledgeStore, SearchMode, SearchQuery};
use serde_json::{Value, json};

fn api(store: KnowledgeStore) -> Api {
    Api::new(std::sync::Arc::new(store), ServiceInfo::default())
}

fn req(api: &Api, method: &str, target: &str, body: Value) -> (u16, Value) {
    let bytes = if body.is_null() { Vec::new() } else { serde_json::to_vec(&body).expect("json") };
    let r = api.handle(ApiRequest::from_target(method, target, &bytes));
    let v = serde_json::from_slice(&r.body).unwrap_or(Value::Null);
    (r.status, v)
}

fn ok(api: &Api, method: &str, target: &str, body: Value) -> Value {
    let (status, v) = req(api, method, target, body);
    assert!((200..300).contains(&status), "{method} {target}: {status} {v}");
    v
}

fn listed(api: &Api, target: &str) -> Vec<String> {
    let v = ok(api, "GET", target, Value::Null);
    let mut ids: Vec<String> =
        v["memories"].as_array().expect("memories").iter().map(|m| m["id"].as_str().unwrap_or("").into()).collect();
    ids.sort();
    ids
}

fn searched(api: &Api, q: &str) -> Vec<String> {
    let r = api.store().search().run(&SearchQuery::new(q).limit(20).mode(SearchMode::Hybrid)).expect("search");
    r.hits.into_iter().map(|h| h.view.memory.id).collect()
}

#[test]
fn expired_memories_leave_search_and_listings_but_stay_readable() {
    let dir = tempfile::tempdir().expect("tempdir");
    let api = api(backend::open(dir.path()));
    let day_ago = time::OffsetDateTime::now_utc() - time::Duration::days(1);
    let day_ago = day_ago.format(&time::format_description::well_known::Rfc3339).expect("rfc3339");

    ok(&api, "POST", "/memories", json!({"id": "keep", "content": "The violin lesson is on Tuesday"}));
    ok(
        &api,
        "POST",
        "/memories",
        json!({"id": "old", "content": "The violin case is in the attic", "expires_at": "2020-01-01"}),
    );
    ok(
        &api,
        "POST",
        "/memories/batch",
        json!({"memories": [
            {"id": "soon", "content": "The violin tuner needs a battery", "expires_at": "2999-01-01T00:00:00Z"},
            {"id": "recent", "content": "The violin recital tickets arrived", "expires_at": day_ago},
        ]}),
    );

    // Listings and search leave out the two expired memories; include_expired brings them back, flagged.
    assert_eq!(listed(&api, "/memories"), ["keep", "soon"]);
    let all = ok(&api, "GET", "/memories?include_expired=true", Value::Null);
    assert_eq!(all["pagination"]["total"], 4);
    let flags: Vec<(String, bool)> = all["memories"]
        .as_array()
        .expect("memories")
        .iter()
        .map(|m| (m["id"].as_str().unwrap_or("").to_string(), m["expired"].as_bool().unwrap_or(false)))
        .collect();
    for (id, expired) in &flags {
        assert_eq!(*expired, id == "old" || id == "recent", "{id}");
    }
    let mut found = searched(&api, "violin");
    found.sort();
    assert_eq!(found, ["keep", "soon"]);

    // Readable by id, with the time and the flag.
    let old = ok(&api, "GET", "/memories/old", Value::Null);
    assert_eq!(old["expired"], true);
    assert_eq!(old["expires_at"], "2020-01-01T00:00:00.000Z");
    let soon = ok(&api, "GET", "/memories/soon", Value::Null);
    assert_eq!(
        (soon["expired"].as_bool(), soon["expires_at"].as_str()),
        (Some(false), Some("2999-01-01T00:00:00.000Z"))
    );
    assert_eq!(ok(&api, "GET", "/memories/keep", Value::Null)["expires_at"], Value::Null);

    // The context bundle lists only live memories.
    let bundle = ok(&api, "GET", "/context/bundle", Value::Null);
    let mut in_bundle: Vec<&str> =
        bundle["memories"].as_array().expect("memories").iter().filter_map(|m| m["id"].as_str()).collect();
    in_bundle.sort();
    assert_eq!(in_bundle, ["keep", "soon"]);
    assert!(!bundle["markdown"].as_str().unwrap_or("").contains("attic"));

    // PATCH clears (null) and sets; an upsert without expires_at keeps the stored one.
    ok(&api, "PATCH", "/memories/old", json!({"expires_at": null}));
    ok(&api, "PATCH", "/memories/keep", json!({"expires_at": "2021-06-01T12:00:00Z"}));
    ok(&api, "POST", "/memories", json!({"id": "recent", "content": "The violin recital tickets arrived today"}));
    assert_eq!(listed(&api, "/memories"), ["old", "soon"]);
    let s = searched(&api, "recital");
    assert!(!s.contains(&"recent".to_string()), "the upsert kept the expiry: {s:?}");
    assert_eq!(ok(&api, "GET", "/memories/recent", Value::Null)["expired"], true);

    // A bad time is a 422 at the field, and changes nothing.
    let (status, err) = req(&api, "POST", "/memories", json!({"content": "never stored", "expires_at": "tomorrow"}));
    assert_eq!(status, 422, "{err}");
    assert_eq!(err["detail"][0]["loc"], json!(["body", "expires_at"]));
    let (status, err) = req(&api, "PATCH", "/memories/soon", json!({"expires_at": "31/12/2030"}));
    assert_eq!((status, err["detail"][0]["loc"].clone()), (422, json!(["body", "expires_at"])));
    assert_eq!(ok(&api, "GET", "/memories?include_expired=true", Value::Null)["pagination"]["total"], 4);

    // /health counts the expired memories; the sweep forgets those past the grace period (30 days): `keep`
    // (June 2021), not `recent` (a day ago).
    let h = ok(&api, "GET", "/health", Value::Null);
    assert_eq!(h["expiry"]["expired"], 2, "{h}");
    assert_eq!(h["expiry"]["grace_s"], 30 * 86_400);
    assert_eq!(api.store().memories().forget_expired().expect("sweep"), 1);
    let keep = ok(&api, "GET", "/memories?include_expired=true&state=forgotten", Value::Null);
    assert_eq!(keep["memories"][0]["id"], "keep");
    assert_eq!(keep["memories"][0]["state"], "forgotten");
    let h = ok(&api, "GET", "/health", Value::Null);
    assert_eq!((h["expiry"]["expired"].as_u64(), h["expiry"]["forgotten_by_sweep"].as_u64()), (Some(1), Some(1)));
    assert_eq!(
        api.store().memories().forget_expired().expect("a second sweep"),
        0,
        "nothing left past the grace period"
    );
}

#[test]
fn mcp_tools_set_and_clear_the_expiry() {
    let dir = tempfile::tempdir().expect("tempdir");
    let api = api(backend::open(dir.path()));
    let scope = Scope::default();
    let added = tool(
        &api,
        &scope,
        "memory_add",
        json!({"content": "Parking permit for the garage", "expires_at": "2020-02-02"}),
    )
    .expect("memory_add");
    let id = added["memory_id"].as_str().expect("an id").to_string();
    assert_eq!(ok(&api, "GET", &format!("/memories/{id}"), Value::Null)["expired"], true);
    assert!(listed(&api, "/memories").is_empty());

    let updated =
        tool(&api, &scope, "memory_update", json!({"memory_id": id, "expires_at": ""})).expect("memory_update");
    assert_eq!(updated["updates"]["fields_updated"], json!(["expires_at"]));
    assert_eq!(ok(&api, "GET", &format!("/memories/{id}"), Value::Null)["expires_at"], Value::Null);
    assert_eq!(listed(&api, "/memories"), vec![id.clone()]);

    let bad = tool(&api, &scope, "memory_update", json!({"memory_id": id, "expires_at": "soonish"}));
    assert!(bad.is_err(), "a bad time is refused: {bad:?}");
}
