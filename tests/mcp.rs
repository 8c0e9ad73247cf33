//! MCP over Streamable HTTP against a real daemon on a loopback port: the transport rules, the guards, every
//! tool checked against the store, argument errors, space isolation, the REST twins, and stdio (`engram mcp`).
#![cfg(feature = "server")]

mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use common::{KEY, Reply, call, raw, server};
use engram::server::RunningServer;
use serde_json::{Value, json};

/// One JSON-RPC POST to `path` with the key, the two Accept types and `extra` header lines.
fn post(srv: &RunningServer, path: &str, extra: &str, body: &Value) -> Reply {
    let b = body.to_string();
    let head = format!(
        "POST {path} HTTP/1.1\nHost: 127.0.0.1:{}\nX-NMEM-API-Key: {KEY}\nContent-Type: application/json\nAccept: application/json, text/event-stream\n{extra}Content-Length: {}\n",
        srv.addr.port(),
        b.len()
    );
    raw(srv.addr, &head, b.as_bytes())
}

fn rpc(srv: &RunningServer, extra: &str, method: &str, params: Value) -> Value {
    let r = post(srv, "/mcp", extra, &json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params}));
    assert_eq!(r.status, 200, "{method}: {}", r.body);
    let v = r.json();
    assert_eq!(v["id"], 7, "{v}");
    v
}

/// `tools/call` that must succeed; returns `structuredContent` after checking the text copy matches it.
fn tool_in(srv: &RunningServer, extra: &str, name: &str, args: Value) -> Value {
    let v = rpc(srv, extra, "tools/call", json!({"name": name, "arguments": args}));
    let r = &v["result"];
    assert_eq!(r["isError"], false, "{name} failed: {v}");
    let sc = r["structuredContent"].clone();
    let text: Value = serde_json::from_str(r["content"][0]["text"].as_str().expect("text copy")).expect("text is JSON");
    assert_eq!(text, sc, "{name}: the text copy differs from structuredContent");
    sc
}

fn tool(srv: &RunningServer, name: &str, args: Value) -> Value {
    tool_in(srv, "", name, args)
}

/// `tools/call` that must give `isError: true`; returns the structured error.
fn tool_error(srv: &RunningServer, name: &str, args: Value) -> Value {
    let v = rpc(srv, "", "tools/call", json!({"name": name, "arguments": args}));
    assert_eq!(v["result"]["isError"], true, "{name} should fail: {v}");
    v["result"]["structuredContent"].clone()
}

fn ids(v: &Value, list: &str, key: &str) -> Vec<String> {
    v[list].as_array().into_iter().flatten().filter_map(|x| x[key].as_str().map(str::to_string)).collect()
}

#[test]
fn both_paths_answer_alike_without_a_session() {
    let dir = tempfile::tempdir().expect("tempdir");
    let srv = server(dir.path(), 1 << 20);
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let a = post(&srv, "/mcp", "", &init);
    let b = post(&srv, "/mcp/", "", &init);
    assert_eq!((a.status, b.status), (200, 200));
    assert_eq!(a.json(), b.json());
    assert_eq!(a.json()["result"]["serverInfo"]["name"], "engram");
    assert_eq!(a.json()["result"]["protocolVersion"], "2025-11-25");
    let old = post(&srv, "/mcp", "", &{
        let mut i = init.clone();
        i["params"]["protocolVersion"] = "2024-11-05".into();
        i
    });
    assert_eq!(old.json()["result"]["protocolVersion"], "2024-11-05");
    // tools/call with no initialize and a preset session id (kimi-cli's habit) works.
    let sc = tool_in(&srv, "Mcp-Session-Id: preset\n", "memory_add", json!({"content": "No session needed here"}));
    assert_eq!(sc["status"], "success");
}

#[test]
fn the_guards_and_transport_rules_hold() {
    let dir = tempfile::tempdir().expect("tempdir");
    let srv = server(dir.path(), 1 << 20);
    let port = srv.addr.port();
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).to_string();
    let send = |head: String| raw(srv.addr, &head, list.as_bytes());
    let base = |extra: &str, host: &str, accept: &str| {
        format!(
            "POST /mcp HTTP/1.1\nHost: {host}\nContent-Type: application/json\nAccept: {accept}\n{extra}Content-Length: {}\n",
            list.len()
        )
    };
    let local = format!("127.0.0.1:{port}");
    let both = "application/json, text/event-stream";
    let key = format!("X-NMEM-API-Key: {KEY}\n");
    let cases: Vec<(&str, String, u16)> = vec![
        ("foreign Origin", base(&format!("{key}Origin: http://evil.example\n"), &local, both), 403),
        ("foreign Host", base(&key, &format!("evil.example:{port}"), both), 403),
        ("no key", base("", &local, both), 401),
        ("wrong key", base("X-NMEM-API-Key: wrong\n", &local, both), 401),
        ("wrong bearer", base("Authorization: Bearer wrong\n", &local, both), 401),
        ("Accept json only", base(&key, &local, "application/json"), 406),
        ("unknown protocol version", base(&format!("{key}MCP-Protocol-Version: 1999-01-01\n"), &local, both), 400),
        ("local Origin", base(&format!("{key}Origin: http://localhost:3000\n"), &local, both), 200),
        ("localhost Host", base(&key, &format!("localhost:{port}"), both), 200),
        ("bearer key", base(&format!("Authorization: Bearer {KEY}\n"), &local, both), 200),
    ];
    for (what, head, want) in cases {
        let r = send(head);
        assert_eq!(r.status, want, "{what}: {}", r.body);
        assert!(!r.body.contains("Access-Control-Allow-Origin"), "{what}: CORS header sent");
    }
    let r = post(&srv, "/mcp", "", &json!({"jsonrpc": "2.0", "id": 3, "method": "no/such/method"}));
    assert_eq!(r.json()["error"]["code"], -32601, "{}", r.body);
    let r = post(&srv, "/mcp", "", &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    assert_eq!(r.status, 202);
    for method in ["GET", "DELETE"] {
        let head = format!("{method} /mcp HTTP/1.1\nHost: {local}\n{key}Accept: {both}\n");
        assert_eq!(raw(srv.addr, &head, b"").status, 405, "{method}");
    }
    let r = post(
        &srv,
        "/mcp",
        "",
        &json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
        "params": {"name": "no_such_tool", "arguments": {}}}),
    );
    assert_eq!(r.json()["error"]["code"], -32602);
    assert!(r.json()["error"]["message"].as_str().unwrap_or("").contains("Unknown tool: no_such_tool"));
}

#[test]
fn tools_list_has_schemas_annotations_and_the_external_agent_set() {
    let dir = tempfile::tempdir().expect("tempdir");
    let srv = server(dir.path(), 1 << 20);
    let full = rpc(&srv, "", "tools/list", json!({}));
    let tools = full["result"]["tools"].as_array().expect("tools").clone();
    assert_eq!(tools.len(), engram::api::tools::TOOLS.len());
    for t in &tools {
        assert_eq!(t["inputSchema"]["type"], "object", "{t}");
        assert!(t["annotations"]["readOnlyHint"].is_boolean(), "{t}");
        assert!(!t["description"].as_str().unwrap_or("").is_empty());
    }
    let by = |n: &str| tools.iter().find(|t| t["name"] == n).cloned().unwrap_or(Value::Null);
    assert_eq!(by("memory_delete")["annotations"]["destructiveHint"], true);
    assert_eq!(by("memory_search")["annotations"]["readOnlyHint"], true);
    let ext = rpc(&srv, "X-Nmem-Tool-Set: external-agent\n", "tools/list", json!({}));
    let names: Vec<String> = ids(&ext["result"], "tools", "name");
    let want = [
        "read_context_bundle",
        "read_working_memory",
        "memory_search",
        "get_memory_by_id",
        "memory_add",
        "memory_update",
        "thread_search",
        "thread_fetch_messages",
        "mem_fs",
        "find_skills",
        "report_skill_outcome",
        "list_timeline_reviews",
        "resolve_timeline_review",
        "memory_evolves_revise",
        "check_claims",
        "trigger_memory_catchup",
    ];
    let mut sorted = names.clone();
    sorted.sort();
    let mut w: Vec<String> = want.iter().map(|s| s.to_string()).collect();
    w.sort();
    assert_eq!(sorted, w);
    // Outside the set, a call is an unknown tool.
    let r = post(
        &srv,
        "/mcp",
        "X-Nmem-Tool-Set: external-agent\n",
        &json!({"jsonrpc": "2.0", "id": 1,
        "method": "tools/call", "params": {"name": "memory_delete", "arguments": {"memory_id": "x"}}}),
    );
    assert_eq!(r.json()["error"]["code"], -32602);
}

#[test]
fn memory_tools_read_and_write_the_store() {
    let dir = tempfile::tempdir().expect("tempdir");
    let srv = server(dir.path(), 1 << 20);
    let add = tool_in(
        &srv,
        "APP: Claude Code\nX-Nmem-Agent-Id: agent-7\n",
        "memory_add",
        json!({"content": "Decision: the team server runs PostgreSQL 15 with pgvector", "title": "Team database",
            "labels": "infra, db", "importance": 0.9, "unit_type": "decision"}),
    );
    let id = add["memory_id"].as_str().expect("memory_id").to_string();
    assert_eq!(add["memory"]["id"], id.as_str());
    assert_eq!(add["processing"]["source"], "claude_code");
    let stored = call(&srv, "GET", &format!("/memories/{id}"), None).json();
    assert_eq!(stored["title"], "Team database");
    assert_eq!(stored["importance"], 0.9);
    assert_eq!(stored["unit_type"], "decision");
    assert_eq!(stored["source"], "claude_code");
    assert_eq!(stored["metadata"]["agent_id"], "agent-7");
    let mut labels: Vec<String> = serde_json::from_value(stored["labels"].clone()).expect("labels");
    labels.sort();
    assert_eq!(labels, vec!["db", "infra"]);
    // Labels as an array.
    let second = tool(&srv, "memory_add", json!({"content": "Prefers dark roast coffee", "labels": ["prefs"]}));
    let second_id = second["memory_id"].as_str().expect("id").to_string();

    let found = tool(&srv, "memory_search", json!({"query": "PostgreSQL pgvector"}));
    assert_eq!(found["status"], "success");
    assert_eq!(ids(&found, "results", "memory_id").first(), Some(&id));
    assert_eq!(found["results"][0]["title"], "Team database");
    assert_eq!(found["results"][0]["created_at"].as_str().map(str::len), Some(16));
    // A threshold above every fused score drops semantic-only hits but keeps those that share a query term
    // (read from the search result's `matched_terms`).
    let strict = tool(&srv, "memory_search", json!({"query": "coffee PostgreSQL", "confidence_threshold": 0.99}));
    let mut kept = ids(&strict, "results", "memory_id");
    kept.sort();
    let mut both = vec![id.clone(), second_id.clone()];
    both.sort();
    assert_eq!(kept, both, "{strict}");
    let none = tool(&srv, "memory_search", json!({"query": "espresso beans", "confidence_threshold": 0.99}));
    assert_eq!(none["total_found"], 0, "{none}");
    let filtered = tool(&srv, "memory_search", json!({"query": "coffee PostgreSQL", "filter_labels": "prefs"}));
    assert_eq!(ids(&filtered, "results", "memory_id"), vec![second_id.clone()]);
    let listed = tool(&srv, "memory_search", json!({"query": "  "}));
    assert_eq!(listed["filters_applied"]["mode"], "list");
    assert_eq!(listed["total_found"], 2);
    assert!(listed["results"].as_array().expect("results").iter().all(|r| r["similarity_score"] == 1.0));

    let got = tool(&srv, "get_memory_by_id", json!({"memory_id": id}));
    assert_eq!(got["content"], stored["content"]);

    let up = tool(&srv, "memory_update", json!({"memory_id": id, "labels": ["db", "ops"], "importance": 0.4}));
    assert_eq!(up["updates"]["labels_added"], json!(["ops"]));
    assert_eq!(up["updates"]["labels_removed"], json!(["infra"]));
    let after = call(&srv, "GET", &format!("/memories/{id}"), None).json();
    assert_eq!(after["importance"], 0.4);

    let labels = tool(&srv, "list_memory_labels", json!({}));
    let names = ids(&labels, "labels", "name");
    for l in ["db", "ops", "prefs"] {
        assert!(names.contains(&l.to_string()), "{l} missing from {names:?}");
    }

    assert_eq!(
        call(
            &srv,
            "PUT",
            "/agent/working-memory",
            Some(&json!({"content": "## Focus\nShip the MCP endpoint"}).to_string())
        )
        .status,
        200
    );
    let wm = tool(&srv, "read_working_memory", json!({}));
    assert_eq!(wm["exists"], true);
    assert!(wm["content"].as_str().unwrap_or("").contains("Ship the MCP endpoint"));
    let missing_day = tool(&srv, "read_working_memory", json!({"date": "2001-01-01"}));
    assert_eq!(missing_day["exists"], false);
    let bundle = tool_in(&srv, "X-Nmem-Agent-Id: agent-7\n", "read_context_bundle", json!({}));
    let md = bundle["rendered_markdown"].as_str().unwrap_or("");
    assert!(md.contains("Ship the MCP endpoint") && md.contains("PostgreSQL"), "{md}");
    assert_eq!(bundle["authorship"]["agent_id"], "agent-7");
    assert_eq!(bundle["active_space"]["primary_space_id"], "default");

    let single = tool(&srv, "memory_delete", json!({"memory_id": second_id}));
    assert_eq!(single["status"], "success");
    assert_eq!(call(&srv, "GET", &format!("/memories/{second_id}"), None).status, 404);
    let bulk = tool(&srv, "memory_delete", json!({"memory_ids": [id, "no-such-memory"], "space_id": "default"}));
    assert_eq!(bulk["status"], "partial_success");
    assert_eq!(bulk["summary"]["deleted_count"], 1);
    assert_eq!(bulk["summary"]["failed_count"], 1);
    assert_eq!(bulk["results"][1]["status"], "not_found");
    let none = tool(&srv, "memory_delete", json!({}));
    assert_eq!(none["status"], "error");
}

#[test]
fn thread_and_tree_tools_read_the_store() {
    let dir = tempfile::tempdir().expect("tempdir");
    let srv = server(dir.path(), 1 << 20);
    let thread = json!({"thread_id": "t-rollout", "title": "Rollout chat", "messages": [
        {"role": "user", "content": "When do we roll out the billing service to Frankfurt?"},
        {"role": "assistant", "content": "The billing service rollout to Frankfurt is planned for March 3."},
        {"role": "user", "content": "Thanks, and the weather looks fine."}]});
    assert_eq!(call(&srv, "POST", "/threads", Some(&thread.to_string())).status, 200);
    let found = tool(&srv, "thread_search", json!({"query": "billing Frankfurt"}));
    assert_eq!(ids(&found, "threads", "thread_id"), vec!["t-rollout"]);
    let t = &found["threads"][0];
    assert_eq!(t["total_matches"], 2);
    let snippets: Vec<&str> =
        t["matched_messages"].as_array().expect("matched").iter().filter_map(|m| m["snippet"].as_str()).collect();
    assert_eq!(snippets.len(), 2);
    assert!(snippets[1].contains("March 3"), "{snippets:?}");
    let recent = tool(&srv, "thread_search", json!({}));
    assert_eq!(recent["mode"], "list");
    let page = tool(&srv, "thread_fetch_messages", json!({"thread_id": "t-rollout", "offset": 1, "limit": 1}));
    assert_eq!(page["message_count"], 3);
    assert_eq!(page["messages"].as_array().map(Vec::len), Some(1));
    assert!(page["messages"][0]["content"].as_str().unwrap_or("").contains("March 3"));
    let missing = tool(&srv, "thread_fetch_messages", json!({"thread_id": "nope"}));
    assert_eq!(missing["status"], "error");
    assert_eq!(missing["error"], "Thread not found: nope");

    let add =
        tool(&srv, "memory_add", json!({"content": "The pager rotation changes every Monday", "labels": ["ops"]}));
    let id = add["memory_id"].as_str().expect("id").to_string();
    let root = tool(&srv, "mem_fs", json!({"command": "ls /"}));
    assert!(root.to_string().contains("/memories"), "{root}");
    let path = format!("/memories/by-id/{id}.memory.md");
    let cat = tool(&srv, "mem_fs", json!({"command": format!("cat {path}")}));
    assert!(cat.to_string().contains("pager rotation"), "{cat}");
    let structured = tool(&srv, "mem_fs", json!({"command": "cat", "path": path}));
    assert_eq!(structured, cat);
    let grep = tool(&srv, "mem_fs", json!({"command": "grep -E 'pager|beeper' /memories"}));
    assert!(grep.to_string().contains(&id), "{grep}");
    let quoted = tool(&srv, "mem_fs", json!({"command": "grep \"rotation changes\" /memories"}));
    assert!(quoted.to_string().contains(&id), "{quoted}");
    let find = tool(&srv, "mem_fs", json!({"command": "find /memories --label ops"}));
    assert!(find.to_string().contains(&id), "{find}");
    let recall = tool(&srv, "mem_fs", json!({"command": "recall pager rotation -k 3"}));
    assert!(recall.to_string().contains(&id), "{recall}");
    let stat = tool(&srv, "mem_fs", json!({"command": format!("stat {path}")}));
    assert!(stat.to_string().contains(&id), "{stat}");
    let caps = tool(&srv, "mem_fs", json!({"command": "capabilities"}));
    assert!(caps["verbs"].is_object());
    let gone = tool_error(&srv, "mem_fs", json!({"command": "cat /memories/by-id/nope.memory.md"}));
    assert!(gone["error"].as_str().unwrap_or("").contains("no such file"), "{gone}");
    let bad = tool_error(&srv, "mem_fs", json!({"command": "frobnicate /"}));
    assert_eq!(bad["argument"], "command");

    let del = tool(&srv, "thread_delete", json!({"thread_id": "t-rollout", "cascade_delete_memories": true}));
    assert_eq!(del["status"], "success");
    assert_eq!(call(&srv, "GET", "/threads/t-rollout", None).status, 404);
}

#[test]
fn graph_skill_revision_and_claim_tools_work_on_real_records() {
    let dir = tempfile::tempdir().expect("tempdir");
    let srv = server(dir.path(), 1 << 20);
    let a = tool(&srv, "memory_add", json!({"content": "Alice leads the Atlas project in Berlin"}))["memory_id"]
        .as_str()
        .expect("id")
        .to_string();
    let b = tool(&srv, "memory_add", json!({"content": "Alice ships the first release in June"}))["memory_id"]
        .as_str()
        .expect("id")
        .to_string();
    let rel = json!({"target_memory_id": b, "relation_type": "supports"}).to_string();
    assert_eq!(call(&srv, "POST", &format!("/memories/{a}/relations"), Some(&rel)).status, 200);
    let n = tool(&srv, "memory_neighbors", json!({"memory_id": a}));
    assert_eq!(ids(&n, "neighbors", "memory_id"), vec![b.clone()]);
    assert_eq!(n["neighbors"][0]["relation_type"], "supports");
    assert!(ids(&n, "entities", "name").iter().any(|e| e == "Atlas" || e == "Alice"), "{n}");
    let none = tool(&srv, "memory_neighbors", json!({"memory_id": a, "edge_types": "contradicts"}));
    assert_eq!(none["total_neighbors"], 0);
    let g = tool(&srv, "explore_graph", json!({"memory_ids": a}));
    let kinds: Vec<&str> = g["nodes"].as_array().expect("nodes").iter().filter_map(|n| n["kind"].as_str()).collect();
    assert!(kinds.contains(&"entity"), "{g}");
    assert!(g["nodes"].to_string().contains(&b), "B shares the entity Alice: {g}");
    let stats = tool(&srv, "graph_stats", json!({}));
    assert_eq!(stats["memory_count"], 2);
    let spaces = tool(&srv, "list_spaces", json!({}));
    assert!(ids(&spaces, "spaces", "space_id").contains(&"default".to_string()));
    // A store in no sync group says so, with its device id.
    let sync = tool(&srv, "sync_status", json!({}));
    assert_eq!((sync["enabled"].clone(), sync["pending_changes"].clone()), (json!(false), json!(0)), "{sync}");
    assert_eq!(sync["device_id"].as_str().map(str::len), Some(32), "{sync}");
    let crystals = tool(&srv, "list_crystals", json!({}));
    assert_eq!(crystals["crystals"], json!([]));
    let communities = tool(&srv, "list_communities", json!({}));
    assert!(communities["communities"].is_array());
    if let Some(cid) = communities["communities"][0]["community_id"].as_str() {
        let d = tool(&srv, "get_community_details", json!({"community_id": cid}));
        assert_eq!(d["community_id"], cid);
    }

    // Revision: preview changes nothing, apply makes a new version and links the chain.
    let preview = tool(
        &srv,
        "memory_evolves_revise",
        json!({"memory_id": a,
        "new_content": "Alice leads the Atlas project in Munich"}),
    );
    assert_eq!(preview["status"], "preview");
    assert_eq!(call(&srv, "GET", &format!("/memories/{a}"), None).json()["state"], "active");
    let applied = tool(
        &srv,
        "memory_evolves_revise",
        json!({"memory_id": a,
        "new_content": "Alice leads the Atlas project in Munich", "phase": "apply"}),
    );
    let newer = applied["newer_memory_id"].as_str().expect("newer").to_string();
    assert_eq!(call(&srv, "GET", &format!("/memories/{a}"), None).json()["state"], "superseded");
    let chain = tool(&srv, "memory_evolves_chain", json!({"memory_id": newer}));
    assert_eq!(ids(&chain, "chain", "memory_id"), vec![a.clone(), newer.clone()]);
    assert_eq!(chain["latest_memory_id"], newer.as_str());

    // Skills: a procedure memory is a skill; outcomes are counted on it.
    let p = tool(
        &srv,
        "memory_add",
        json!({"content": "To rotate the TLS certificate: renew with certbot, then reload nginx",
        "title": "Rotate TLS certificate", "unit_type": "procedure"}),
    )["memory_id"]
        .as_str()
        .expect("id")
        .to_string();
    let skills = tool(&srv, "find_skills", json!({"query": "renew TLS certificate"}));
    let s0 = &skills["skills"][0];
    assert_eq!(s0["skill_id"], format!("skill-{p}"));
    assert_eq!(s0["title"], "Rotate TLS certificate");
    assert!(s0["version"].as_i64().is_some_and(|v| v >= 1));
    assert_eq!(skills["matches"], skills["skills"]);
    for outcome in ["completed", "completed", "failed"] {
        tool(
            &srv,
            "report_skill_outcome",
            json!({"skill_id": format!("skill-{p}"), "outcome": outcome,
            "note": "went fine"}),
        );
    }
    let skills = tool(&srv, "find_skills", json!({"query": "TLS certificate"}));
    assert_eq!(skills["skills"][0]["outcomes"], json!({"completed": 2, "failed": 1}));
    let not_skill =
        tool_error(&srv, "report_skill_outcome", json!({"skill_id": format!("skill-{b}"), "outcome": "completed"}));
    assert_eq!(not_skill["error_code"], "skill_not_found");

    // Claims.
    tool(&srv, "memory_add", json!({"content": "Bob does not drink coffee"}));
    tool(&srv, "memory_add", json!({"content": "The office has 12 desks"}));
    let checked = tool(
        &srv,
        "check_claims",
        json!({"claims": ["Bob drinks coffee", "The office has 12 desks",
        "The office has 40 desks", "Penguins live in the Sahara"]}),
    );
    let verdicts: Vec<&str> =
        checked["results"].as_array().expect("results").iter().filter_map(|r| r["verdict"].as_str()).collect();
    assert_eq!(verdicts, vec!["contradicted", "supported", "contradicted", "unknown"]);
}

#[test]
fn timeline_reviews_are_raised_listed_and_resolved() {
    let dir = tempfile::tempdir().expect("tempdir");
    let srv = server(dir.path(), 1 << 20);
    let old = tool(&srv, "memory_add", json!({"content": "Caroline has 2 kids and lives in Boston"}))["memory_id"]
        .as_str()
        .expect("id")
        .to_string();
    let unrelated = tool(&srv, "memory_add", json!({"content": "Melanie painted a sunset by the lake"}));
    assert_eq!(unrelated["status"], "success");
    let new = tool(&srv, "memory_add", json!({"content": "Caroline has 3 kids and lives in Boston"}))["memory_id"]
        .as_str()
        .expect("id")
        .to_string();
    let list = tool(&srv, "list_timeline_reviews", json!({}));
    assert_eq!(list["total"], 1, "{list}");
    let e = &list["events"][0];
    assert_eq!(e["older_memory"]["id"], old.as_str());
    assert_eq!(e["newer_memory"]["id"], new.as_str());
    assert_eq!(e["kind"], "update");
    assert_eq!(e["signals"], json!(["number: 2 -> 3"]));
    let event = e["event_id"].as_str().expect("event").to_string();
    // The REST feed nmem 0.10 reads shows the same event.
    let feed = call(
        &srv,
        "GET",
        "/agent/feed/events?review_only=true&unresolved_only=true&last_n_days=365&limit=50&offset=0",
        None,
    )
    .json();
    assert_eq!(feed["events"][0]["event_id"], event.as_str());
    let preview = tool(&srv, "resolve_timeline_review", json!({"event_id": event, "action": "keep_newer_as_latest"}));
    assert_eq!(preview["status"], "preview");
    // The guarded-review envelope nmem 0.10 checks: both memories as full records, the plan's edge.
    assert_eq!((preview["protocol_version"].as_u64(), &preview["success"]), (Some(1), &json!(true)));
    assert_eq!(preview["result"]["event_id"], event.as_str());
    let p = &preview["result"]["preview"];
    assert_eq!(p["action"], "keep_newer_as_latest");
    assert_eq!(p["can_apply"], true);
    assert_eq!((p["from_memory_id"].as_str(), p["to_memory_id"].as_str()), (Some(new.as_str()), Some(old.as_str())));
    assert_eq!(p["relation"], "supersedes");
    assert_eq!(p["current_edges"], json!([]));
    let ids: Vec<&str> = p["memories"].as_array().expect("memories").iter().filter_map(|m| m["id"].as_str()).collect();
    assert_eq!(ids, [old.as_str(), new.as_str()]);
    for m in p["memories"].as_array().expect("memories") {
        assert_eq!((m["lifecycle_state"].as_str(), m["is_latest"].as_bool()), (Some("active"), Some(true)), "{m}");
        assert!(m["evidence_fields"].is_object() && m["labels"].is_array() && m["title"].is_string(), "{m}");
    }
    assert!(preview["result"].get("resolution").is_none(), "{preview}");
    // REST answers the same plan.
    let rest = call(
        &srv,
        "POST",
        &format!("/agent/feed/events/{event}/review"),
        Some(r#"{"phase":"preview","action":"keep_newer_as_latest","memory_ids":[],"resolution_note":null,"plan_id":null}"#),
    )
    .json();
    assert_eq!(rest["result"]["preview"], preview["result"]["preview"]);
    assert_eq!(call(&srv, "GET", &format!("/memories/{old}"), None).json()["state"], "active");
    let plan = preview["plan_id"].as_str().expect("plan").to_string();
    let stale = tool_error(
        &srv,
        "resolve_timeline_review",
        json!({"event_id": event,
        "action": "keep_newer_as_latest", "phase": "apply", "plan_id": "plan_other"}),
    );
    assert_eq!(stale["argument"], "plan_id");
    let applied = tool(
        &srv,
        "resolve_timeline_review",
        json!({"event_id": event, "action": "keep_newer_as_latest",
        "phase": "apply", "plan_id": plan}),
    );
    assert_eq!(applied["status"], "success");
    assert!(applied["result"].get("preview").is_none(), "{applied}");
    assert_eq!(
        applied["result"]["resolution"],
        format!("keep_newer_as_latest: memory {old} becomes superseded by {new}").as_str()
    );
    assert_eq!(applied["result"]["action_result"]["error"], json!(null));
    assert_eq!(applied["result"]["resolution_detail"]["action"], "keep_newer_as_latest");
    // A preview of the resolved event says so and shows no plan.
    let done = tool(&srv, "resolve_timeline_review", json!({"event_id": event, "action": "keep_newer_as_latest"}));
    assert_eq!(
        (done["status"].as_str(), &done["result"]["already_resolved"]),
        (Some("already_resolved"), &json!(true))
    );
    assert!(done["result"].get("preview").is_none(), "{done}");
    assert_eq!(done["result"]["resolution"], applied["result"]["resolution"]);
    let stored = call(&srv, "GET", &format!("/memories/{old}"), None).json();
    assert_eq!(stored["state"], "superseded");
    assert_eq!(stored["metadata"]["superseded_by"], new.as_str());
    assert_eq!(tool(&srv, "list_timeline_reviews", json!({}))["total"], 0);
    let all = tool(&srv, "list_timeline_reviews", json!({"unresolved_only": false}));
    assert_eq!(all["events"][0]["resolution"]["action"], "keep_newer_as_latest");
    // Resolving twice is a conflict; the REST twin previews and links.
    let again = call(
        &srv,
        "POST",
        &format!("/agent/feed/events/{event}/review"),
        Some(r#"{"phase":"apply","action":"dismiss"}"#),
    );
    assert_eq!(again.status, 409, "{}", again.body);

    tool(&srv, "memory_add", json!({"content": "Jon does not like hiking in the Alps"}));
    tool(&srv, "memory_add", json!({"content": "Jon likes hiking in the Alps"}));
    let list = tool(&srv, "list_timeline_reviews", json!({}));
    assert_eq!(list["events"][0]["kind"], "contradiction", "{list}");
    let ev = list["events"][0]["event_id"].as_str().expect("id").to_string();
    let r = call(
        &srv,
        "POST",
        &format!("/agent/feed/events/{ev}/review"),
        Some(r#"{"phase":"apply","action":"keep_both_linked","resolution_note":"both were true at different times"}"#),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(r.json()["result"]["action_result"]["relation_id"].is_string(), "{}", r.body);
    let newer = list["events"][0]["newer_memory"]["id"].as_str().expect("id");
    let rels = call(&srv, "GET", &format!("/memories/{newer}/relations"), None).json();
    assert!(rels.to_string().contains("contradicts"), "{rels}");

    // A memory of the event is gone: no preview can be given (404), but the event can still be dismissed.
    tool(&srv, "memory_add", json!({"content": "The office moved to Oslo in 2019"}));
    tool(&srv, "memory_add", json!({"content": "The office moved to Oslo in 2024"}));
    let list = tool(&srv, "list_timeline_reviews", json!({}));
    let ev = list["events"][0]["event_id"].as_str().expect("id").to_string();
    let older = list["events"][0]["older_memory"]["id"].as_str().expect("id").to_string();
    assert_eq!(call(&srv, "DELETE", &format!("/memories/{older}"), None).status, 200);
    let url = format!("/agent/feed/events/{ev}/review");
    let gone = call(&srv, "POST", &url, Some(r#"{"action":"keep_newer_as_latest"}"#));
    assert_eq!(gone.status, 404, "{}", gone.body);
    assert!(gone.body.contains("memory_not_found") && gone.body.contains(&older), "{}", gone.body);
    let gone = call(&srv, "POST", &url, Some(r#"{"phase":"apply","action":"keep_newer_as_latest"}"#));
    assert_eq!(gone.status, 404, "{}", gone.body);
    let dismissed = call(&srv, "POST", &url, Some(r#"{"phase":"apply","action":"dismiss"}"#));
    assert_eq!(dismissed.status, 200, "{}", dismissed.body);
    assert_eq!(dismissed.json()["event"]["resolved"], true);
}

#[test]
fn catchup_distils_only_what_was_never_distilled() {
    let dir = tempfile::tempdir().expect("tempdir");
    let srv = server(dir.path(), 1 << 20);
    let thread = json!({"thread_id": "t-later", "title": "Deferred", "metadata": {"analysis": "searchable-now-distill-on-demand"},
        "messages": [{"role": "user", "content": "I decided to move the team offsite to Lisbon in September."},
                     {"role": "user", "content": "My favourite database is PostgreSQL because of its extensions."}]});
    let r = call(&srv, "POST", "/threads", Some(&thread.to_string()));
    assert_eq!(r.status, 200, "{}", r.body);
    let before = call(&srv, "GET", "/memories?limit=100", None).json()["pagination"]["total"].as_u64().unwrap_or(0);
    assert_eq!(before, 0, "on-demand threads are not distilled at append");
    let off = tool(&srv, "trigger_memory_catchup", json!({"horizon": "off"}));
    assert_eq!(off["memories_created"], 0);
    let run = tool(&srv, "trigger_memory_catchup", json!({"horizon": "today"}));
    assert_eq!(run["threads_scanned"], 1);
    assert_eq!(run["messages_undistilled"], 2);
    let created = run["memories_created"].as_u64().unwrap_or(0);
    assert!(created >= 1, "{run}");
    let after = call(&srv, "GET", "/memories?limit=100", None).json();
    assert_eq!(after["pagination"]["total"].as_u64(), Some(created));
    assert!(after.to_string().contains("Lisbon"));
    let rest = call(&srv, "POST", "/agent/trigger/memory-catchup", Some(r#"{"horizon":"3"}"#)).json();
    assert_eq!(rest["memories_created"], 0, "a second run creates nothing: {rest}");
    let bad = tool_error(&srv, "trigger_memory_catchup", json!({"horizon": "yesterday-ish"}));
    assert_eq!(bad["argument"], "horizon");
}

#[test]
fn invalid_arguments_are_tool_errors_naming_the_argument() {
    let dir = tempfile::tempdir().expect("tempdir");
    let srv = server(dir.path(), 1 << 20);
    let cases = [
        ("memory_search", json!({"query": "x", "limit": 500}), "limit"),
        ("memory_search", json!({"query": "x", "mode": "turbo"}), "mode"),
        ("memory_search", json!({"query": "x", "confidence_threshold": "high"}), "confidence_threshold"),
        ("memory_add", json!({}), "content"),
        ("memory_add", json!({"content": "x", "importance": 7}), "importance"),
        ("memory_add", json!({"content": "x", "labels": {"a": 1}}), "labels"),
        ("memory_add", json!({"content": "x", "unit_type": "poem"}), "unit_type"),
        ("memory_update", json!({"memory_id": "x"}), "memory_id"),
        ("get_memory_by_id", json!({}), "memory_id"),
        ("thread_fetch_messages", json!({"thread_id": "t", "limit": 0}), "limit"),
        ("thread_search", json!({"mode": "fuzzy"}), "mode"),
        ("read_working_memory", json!({"date": "May 3"}), "date"),
        ("report_skill_outcome", json!({"skill_id": "skill-x", "outcome": "meh"}), "outcome"),
        ("resolve_timeline_review", json!({"event_id": "rev_x", "action": "shrug"}), "action"),
        ("check_claims", json!({"claims": []}), "claims"),
        ("memory_neighbors", json!({"memory_id": "x", "depth": 9}), "depth"),
        ("get_community_details", json!({"community_id": "abc"}), "community_id"),
        ("mem_fs", json!({"command": "cat"}), "command"),
        ("memory_evolves_revise", json!({"memory_id": "x"}), "new_content"),
    ];
    for (name, args, arg) in cases {
        let e = tool_error(&srv, name, args.clone());
        assert_eq!(e["argument"], arg, "{name} {args}: {e}");
        assert!(e["error"].as_str().unwrap_or("").contains(arg), "{name}: message names {arg}: {e}");
    }
    let missing = tool_error(&srv, "get_memory_by_id", json!({"memory_id": "no-such-id"}));
    assert_eq!(missing["error_code"], "memory_not_found");
    let r = post(
        &srv,
        "/mcp",
        "",
        &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "memory_add", "arguments": {"content": "x"}, "extra": true}}),
    );
    assert_eq!(r.status, 200);
}

#[test]
fn a_space_header_scopes_every_read_tool() {
    let dir = tempfile::tempdir().expect("tempdir");
    let srv = server(dir.path(), 1 << 20);
    assert_eq!(call(&srv, "POST", "/spaces", Some(r#"{"name":"Work","id":"work"}"#)).status, 200);
    let b = "X-Nmem-Space-Id: work\n";
    let secret = tool_in(
        &srv,
        b,
        "memory_add",
        json!({"content": "Zanzibar merger code name is Bluefin", "labels": ["secret"], "unit_type": "procedure",
            "space_id": "default"}),
    );
    let secret_id = secret["memory_id"].as_str().expect("id").to_string();
    assert_eq!(call(&srv, "GET", &format!("/memories/{secret_id}"), None).json()["space_id"], "work", "header wins");
    let thread = json!({"thread_id": "t-work", "space_id": "work", "messages": [
        {"role": "user", "content": "Zanzibar merger talks start Monday"}]});
    assert_eq!(call(&srv, "POST", "/threads", Some(&thread.to_string())).status, 200);
    tool(&srv, "memory_add", json!({"content": "Lunch is at noon"}));
    // Empty header values count as absent: the default space.
    let empty = tool_in(&srv, "X-Nmem-Space-Id: \n", "memory_search", json!({"query": "Zanzibar Bluefin"}));
    assert_eq!(empty["total_found"], 0);
    let reads = [
        ("memory_search", json!({"query": "Zanzibar Bluefin"})),
        ("memory_search", json!({})),
        ("get_memory_by_id", json!({"memory_id": secret_id})),
        ("read_context_bundle", json!({})),
        ("thread_search", json!({"query": "Zanzibar"})),
        ("thread_search", json!({})),
        ("thread_fetch_messages", json!({"thread_id": "t-work"})),
        ("mem_fs", json!({"command": "grep Zanzibar /"})),
        ("mem_fs", json!({"command": "find /memories --label secret"})),
        ("mem_fs", json!({"command": "recall Zanzibar merger"})),
        ("mem_fs", json!({"command": "ls /memories/by-id"})),
        ("find_skills", json!({"query": "Zanzibar"})),
        ("find_skills", json!({})),
        ("list_memory_labels", json!({})),
        ("check_claims", json!({"claims": ["Zanzibar code name is Bluefin"]})),
        ("memory_neighbors", json!({"memory_id": secret_id})),
        ("memory_evolves_chain", json!({"memory_id": secret_id})),
        ("explore_graph", json!({"memory_ids": secret_id})),
        ("list_crystals", json!({})),
        ("list_communities", json!({})),
        ("list_timeline_reviews", json!({})),
    ];
    for (name, args) in &reads {
        let v = rpc(&srv, "", "tools/call", json!({"name": name, "arguments": args}));
        let text = v.to_string();
        let leaked = text.contains("merger code name") || text.contains("talks start");
        assert!(!leaked, "{name} leaked space work: {text}");
        if args.get("memory_id").is_some() || args.get("memory_ids").is_some() || args.get("thread_id").is_some() {
            let failed = v["result"]["isError"] == true || v["result"]["structuredContent"]["status"] == "error";
            assert!(failed, "{name} read a record of space work: {text}");
        }
    }
    let in_b = tool_in(&srv, b, "memory_search", json!({"query": "Zanzibar Bluefin"}));
    assert_eq!(ids(&in_b, "results", "memory_id").first(), Some(&secret_id));
    let in_b_thread = tool_in(&srv, b, "thread_fetch_messages", json!({"thread_id": "t-work"}));
    assert_eq!(in_b_thread["message_count"], 1);
    // An unknown space is -32602 and nothing is written.
    let before = call(&srv, "GET", "/stats", None).json()["memory_count"].clone();
    let r = post(
        &srv,
        "/mcp",
        "X-Nmem-Space-Id: nowhere\n",
        &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "memory_add", "arguments": {"content": "should not be stored"}}}),
    );
    assert_eq!(r.json()["error"]["code"], -32602);
    assert!(r.json()["error"]["message"].as_str().unwrap_or("").contains("Unknown space: nowhere"));
    assert_eq!(call(&srv, "GET", "/stats", None).json()["memory_count"], before);
    // The header wins over a model-authored space_id argument.
    let forced =
        tool_in(&srv, "X-Nmem-Space-Id: default\n", "memory_search", json!({"query": "Zanzibar", "space_id": "work"}));
    assert_eq!(forced["total_found"], 0);
}

#[test]
fn the_rest_twin_answers_the_tool_result_object() {
    let dir = tempfile::tempdir().expect("tempdir");
    let srv = server(dir.path(), 1 << 20);
    let r = call(
        &srv,
        "POST",
        "/agent/tools/call",
        Some(r#"{"name":"memory_add","arguments":{"content":"REST twin marker kestrel"}}"#),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let id = r.json()["memory_id"].as_str().expect("id").to_string();
    let s =
        call(&srv, "POST", "/agent/tools/call", Some(r#"{"name":"memory_search","arguments":{"query":"kestrel"}}"#));
    assert_eq!(ids(&s.json(), "results", "memory_id"), vec![id]);
    let unknown = call(&srv, "POST", "/agent/tools/call", Some(r#"{"name":"nope","arguments":{}}"#));
    assert_eq!(unknown.status, 404);
    assert_eq!(unknown.json()["error_code"], "unknown_tool");
    let bad = call(
        &srv,
        "POST",
        "/agent/tools/call",
        Some(r#"{"name":"memory_search","arguments":{"query":"x","limit":0}}"#),
    );
    assert_eq!(bad.status, 422);
    assert_eq!(bad.json()["detail"][0]["loc"], json!(["body", "arguments", "limit"]));
    let no_name = call(&srv, "POST", "/agent/tools/call", Some(r#"{"arguments":{}}"#));
    assert_eq!(no_name.status, 422);
}

#[test]
fn an_oversized_body_sent_whole_still_reads_413() {
    let dir = tempfile::tempdir().expect("tempdir");
    let srv = server(dir.path(), 64 << 10);
    // Like Python's urllib: the whole body goes out before the client reads anything.
    for size in [200_000usize, 4 << 20] {
        let body = format!("{{\"content\":\"{}\"}}", "x".repeat(size));
        let head = format!(
            "POST /memories HTTP/1.1\nHost: 127.0.0.1:{}\nAuthorization: Bearer {KEY}\nContent-Type: application/json\nContent-Length: {}\n",
            srv.addr.port(),
            body.len()
        );
        let mut s = std::net::TcpStream::connect(srv.addr).expect("connect");
        s.set_read_timeout(Some(std::time::Duration::from_secs(20))).expect("timeout");
        let head = head.replace('\n', "\r\n") + "\r\n";
        s.write_all(head.as_bytes()).expect("head");
        // The whole body must go out: a server that closes early breaks this write (urllib's broken pipe).
        s.write_all(body.as_bytes()).unwrap_or_else(|e| panic!("{size} bytes: the body could not be sent: {e}"));
        let mut reply = String::new();
        std::io::Read::read_to_string(&mut s, &mut reply).expect("read the answer");
        assert!(reply.starts_with("HTTP/1.1 413"), "{size} bytes: {reply}");
        assert!(reply.contains("payload_too_large"));
    }
}

/// `engram mcp` over stdio: on its own store, and forwarding to the daemon that holds the store.
#[test]
fn stdio_serves_the_same_tools_locally_and_through_the_daemon() {
    let exe = env!("CARGO_BIN_EXE_engram");
    let session = |args: &[&str]| -> Vec<Value> {
        let mut child = Command::new(exe)
            .args(args)
            .env("ENGRAM_LOG", "warn")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn engram mcp");
        let mut stdin = child.stdin.take().expect("stdin");
        let mut out = BufReader::new(child.stdout.take().expect("stdout"));
        let mut replies = Vec::new();
        let mut send = |msg: Value, want_reply: bool| {
            writeln!(stdin, "{msg}").expect("write");
            stdin.flush().expect("flush");
            if want_reply {
                let mut line = String::new();
                out.read_line(&mut line).expect("read");
                replies.push(serde_json::from_str::<Value>(&line).unwrap_or_else(|e| panic!("{e}: {line}")));
            }
        };
        send(
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18",
            "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}),
            true,
        );
        send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}), false);
        send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}), true);
        send(
            json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "memory_add",
            "arguments": {"content": "stdio marker ocelot"}}}),
            true,
        );
        send(
            json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "memory_search",
            "arguments": {"query": "ocelot"}}}),
            true,
        );
        drop(stdin);
        let status = child.wait().expect("wait");
        assert!(status.success(), "engram mcp exited with {status}");
        replies
    };
    let check = |r: &[Value], external: bool| {
        assert_eq!(r[0]["result"]["serverInfo"]["name"], "engram");
        let n = r[1]["result"]["tools"].as_array().map_or(0, Vec::len);
        assert_eq!(n, if external { 16 } else { engram::api::tools::TOOLS.len() });
        let id = r[2]["result"]["structuredContent"]["memory_id"].as_str().expect("id").to_string();
        assert_eq!(ids(&r[3]["result"]["structuredContent"], "results", "memory_id"), vec![id]);
    };
    let local = tempfile::tempdir().expect("tempdir");
    let dir = local.path().to_str().expect("utf8");
    check(&session(&["mcp", "--data-dir", dir, "--embedding-model", "builtin", "--tool-set", "external-agent"]), true);

    let held = tempfile::tempdir().expect("tempdir");
    let srv = server(held.path(), 1 << 20);
    let addr = srv.addr.to_string();
    let dir = held.path().to_str().expect("utf8");
    let r = session(&["mcp", "--data-dir", dir, "--addr", &addr, "--api-key", KEY, "--app", "Claude"]);
    check(&r, false);
    let id = r[2]["result"]["structuredContent"]["memory_id"].as_str().expect("id");
    let stored = call(&srv, "GET", &format!("/memories/{id}"), None).json();
    assert_eq!(stored["content"], "stdio marker ocelot", "the daemon stored the forwarded memory");
    assert_eq!(stored["source"], "claude");
}

#[test]
fn source_chunks_and_communities_through_tools() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = std::sync::Arc::new(engram::KnowledgeStore::open(engram::StoreConfig::new(dir.path())).expect("open"));
    let srv = common::server_on(dir.path(), store.clone(), 1 << 20);
    let doc = "# Runbook\n\n## Restore\n\nTo restore the billing database, stop the writer, copy the last snapshot, \
               then replay the WAL.\n\n## Rotate\n\nRotate the TLS keys every 90 days.\n";
    let body = json!({"file_name": "runbook.md", "content": doc}).to_string();
    let ingested = call(&srv, "POST", "/sources/ingest/file", Some(&body));
    assert_eq!(ingested.status, 200, "{}", ingested.body);
    let sid = ingested.json()["id"].as_str().expect("id").to_string();
    let found = tool(&srv, "search_source_chunks", json!({"source_id": sid, "query": "restore billing snapshot"}));
    assert_eq!(found["source_name"], "runbook.md");
    assert!(found["total_chunks"].as_u64().is_some_and(|n| n >= 2), "{found}");
    let text = found["chunks"][0]["text"].as_str().unwrap_or("");
    assert!(text.contains("replay the WAL") && !text.contains("TLS"), "{found}");
    let missing = tool_error(&srv, "search_source_chunks", json!({"source_id": "src_nope", "query": "x"}));
    assert_eq!(missing["error_code"], "source_not_found");

    // A small entity graph: two groups of people who appear together.
    for text in [
        "Alice and Bob planned the Atlas launch in Berlin",
        "Alice and Bob reviewed the Atlas budget",
        "Bob and Alice met the Atlas investors in Berlin",
        "Carol and Dave painted the Harbor mural in Lisbon",
        "Carol and Dave finished the Harbor mural",
        "Dave and Carol showed the Harbor mural in Lisbon",
    ] {
        tool(&srv, "memory_add", json!({"content": text}));
    }
    let report = store.graph().recompute().expect("graph");
    assert!(report.communities >= 2, "{report:?}");
    let list = tool(&srv, "list_communities", json!({}));
    let rows = list["communities"].as_array().expect("communities");
    assert_eq!(rows.len() as u64, report.communities, "{list}");
    let names: Vec<String> = rows
        .iter()
        .flat_map(|c| c["top_entities"].as_array().cloned().unwrap_or_default())
        .filter_map(|e| e["name"].as_str().map(str::to_string))
        .collect();
    for n in ["Alice", "Carol"] {
        assert!(names.iter().any(|x| x == n), "{n} missing from {names:?}");
    }
    let id = rows[0]["community_id"].as_str().expect("id").to_string();
    let details = tool(&srv, "get_community_details", json!({"community_id": id}));
    assert_eq!(details["community_id"], id.as_str());
    assert!(!details["top_memories"].as_array().expect("memories").is_empty(), "{details}");
    let stats = tool(&srv, "graph_stats", json!({}));
    assert_eq!(stats["community_count"].as_u64(), Some(report.communities));
    assert!(stats["memory_count"].as_u64().is_some_and(|n| n >= 6), "{stats}");
    let crystals = tool(&srv, "list_crystals", json!({}));
    let stored = call(&srv, "GET", "/memories?is_crystal=true&limit=100", None).json();
    assert_eq!(crystals["total"], stored["pagination"]["total"]);
    // Another space sees none of them.
    assert_eq!(call(&srv, "POST", "/spaces", Some(r#"{"name":"Other","id":"other"}"#)).status, 200);
    let other = tool_in(&srv, "X-Nmem-Space-Id: other\n", "list_communities", json!({}));
    assert_eq!(other["communities"], json!([]));
    let r = rpc(
        &srv,
        "X-Nmem-Space-Id: other\n",
        "tools/call",
        json!({"name": "get_community_details", "arguments": {"community_id": id}}),
    );
    assert_eq!(r["result"]["isError"], true, "{r}");
}
