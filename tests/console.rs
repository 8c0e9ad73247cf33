//! The web console's HTTP surface on a real loopback daemon: the embedded shell and assets with their security
//! headers, the cookie sessions (key, one-time token, sign-out, same-origin only), `--no-console`, and the two
//! routes the console added (`GET /memories` order and filters, `GET /library/graph`). The pages themselves
//! are tested in a real browser by `ui/tests` (Playwright, run by `.ci/run`).
#![cfg(feature = "server")]

mod common;

use std::sync::Arc;

use common::{KEY, Reply, call, raw, server};
use engram::api::ServiceInfo;
use engram::server::{ServerConfig, start};
use engram::{KnowledgeStore, StoreConfig};

fn get(srv: &engram::server::RunningServer, path: &str, extra: &str) -> Reply {
    raw(srv.addr, &format!("GET {path} HTTP/1.1\nHost: 127.0.0.1:{}\n{extra}", srv.addr.port()), b"")
}

fn post(srv: &engram::server::RunningServer, path: &str, extra: &str, body: &str) -> Reply {
    let head = format!(
        "POST {path} HTTP/1.1\nHost: 127.0.0.1:{}\nContent-Type: application/json\nContent-Length: {}\n{extra}",
        srv.addr.port(),
        body.len()
    );
    raw(srv.addr, &head, body.as_bytes())
}

/// The session id of a `Set-Cookie` answer.
fn session_of(r: &Reply) -> String {
    let c = r.header("set-cookie").unwrap_or_else(|| panic!("no cookie: {}", r.head));
    assert!(c.contains("HttpOnly") && c.contains("SameSite=Strict") && c.contains("Path=/"), "{c}");
    c.split(';').next().and_then(|kv| kv.split_once('=')).map(|(_, v)| v.to_string()).unwrap_or_default()
}

#[test]
fn the_shell_and_assets_are_served_with_the_security_headers() {
    let dir = tempfile::tempdir().unwrap();
    let srv = server(dir.path(), 1 << 20);
    for path in ["/ui/", "/ui/memories", "/ui/memories/some-id", "/ui/graph?community=2"] {
        let r = get(&srv, path, "");
        assert_eq!(r.status, 200, "{path}");
        assert!(r.body.contains("<div id=\"root\"></div>"), "{path}: the shell");
        assert_eq!(r.header("content-type"), Some("text/html; charset=utf-8"));
        let csp = r.header("content-security-policy").unwrap_or_default();
        assert!(csp.contains("default-src 'self'") && csp.contains("frame-ancestors 'none'"), "{csp}");
        assert!(!csp.contains("unsafe-inline") && !csp.contains("unsafe-eval"), "{csp}");
        assert_eq!(r.header("x-content-type-options"), Some("nosniff"));
        assert_eq!(r.header("cache-control"), Some("no-cache"));
    }
    let shell = get(&srv, "/ui/", "").body;
    let js = shell.split("src=\"").nth(1).and_then(|s| s.split('"').next()).expect("a script in the shell");
    assert!(js.starts_with("/ui/assets/") && js.ends_with(".js"), "{js}");
    let a = get(&srv, js, "");
    assert_eq!(a.status, 200);
    assert_eq!(a.header("content-type"), Some("text/javascript; charset=utf-8"));
    assert_eq!(a.header("cache-control"), Some("public, max-age=31536000, immutable"));
    assert_eq!(get(&srv, "/ui/assets/missing-0000.js", "").status, 404);
    let redirect = get(&srv, "/ui", "");
    assert_eq!(redirect.status, 308);
    assert_eq!(redirect.header("location"), Some("/ui/"));
    // No inline script anywhere in the shell (the CSP would refuse it).
    assert!(!shell.contains("<script>"), "{shell}");
}

#[test]
fn a_session_cookie_reaches_the_api_and_sign_out_ends_it() {
    let dir = tempfile::tempdir().unwrap();
    let srv = server(dir.path(), 1 << 20);
    assert_eq!(get(&srv, "/memories", "").status, 401);
    assert_eq!(get(&srv, "/ui/session", "").status, 401);
    let wrong = post(&srv, "/ui/session", "", r#"{"key":"wrong"}"#);
    assert_eq!(wrong.status, 401);
    assert!(wrong.header("set-cookie").is_none());
    assert_eq!(post(&srv, "/ui/session", "", r#"{"key":"x","token":"y"}"#).status, 422);
    assert_eq!(post(&srv, "/ui/session", "", "not json").status, 422);
    let ok = post(&srv, "/ui/session", "", &format!(r#"{{"key":"{KEY}"}}"#));
    assert_eq!(ok.status, 204);
    let id = session_of(&ok);
    assert_eq!(id.len(), 64);
    let cookie = format!("Cookie: theme=dark; engram_session={id}\n");
    assert_eq!(get(&srv, "/ui/session", &cookie).status, 204);
    call(&srv, "POST", "/memories", Some(r#"{"id":"m1","content":"Prefers green tea"}"#));
    let m = get(&srv, "/memories/m1", &cookie);
    assert_eq!(m.status, 200);
    assert_eq!(m.json()["content"], "Prefers green tea");
    // The browser's own requests: same-origin, or typed in the address bar.
    let port = srv.addr.port();
    let same = format!("{cookie}Origin: http://127.0.0.1:{port}\nSec-Fetch-Site: same-origin\n");
    assert_eq!(get(&srv, "/memories/m1", &same).status, 200);
    assert_eq!(get(&srv, "/memories/m1", &format!("{cookie}Sec-Fetch-Site: none\n")).status, 200);
    // Another site, or another program on another port of this host: 403 before any handler, nothing written.
    for extra in [
        format!("{cookie}Sec-Fetch-Site: cross-site\n"),
        format!("{cookie}Sec-Fetch-Site: same-site\n"),
        format!("{cookie}Origin: http://127.0.0.1:{}\n", port.wrapping_add(1)),
        format!("{cookie}Origin: http://localhost:{port}\n"),
    ] {
        let r = post(&srv, "/memories", &extra, r#"{"id":"planted","content":"planted"}"#);
        assert_eq!(r.status, 403, "{extra}");
    }
    assert_eq!(call(&srv, "GET", "/memories/planted", None).status, 404);
    let bye = raw(
        srv.addr,
        &format!("DELETE /ui/session HTTP/1.1\nHost: 127.0.0.1:{port}\n{cookie}Content-Length: 0\n"),
        b"",
    );
    assert_eq!(bye.status, 204);
    assert!(bye.header("set-cookie").is_some_and(|c| c.contains("Max-Age=0")));
    assert_eq!(get(&srv, "/memories/m1", &cookie).status, 401);
    assert_eq!(get(&srv, "/memories/m1", "Cookie: engram_session=made-up\n").status, 401);
}

#[test]
fn a_one_time_token_signs_in_once() {
    let dir = tempfile::tempdir().unwrap();
    let srv = server(dir.path(), 1 << 20);
    let first = srv.sign_in_path.clone().expect("the start-up sign-in path");
    assert!(first.starts_with("/ui/#token="), "{first}");
    assert_eq!(post(&srv, "/ui/tokens", "", "").status, 401);
    let t = post(&srv, "/ui/tokens", &format!("Authorization: Bearer {KEY}\n"), "");
    assert_eq!(t.status, 201);
    let v = t.json();
    let token = v["token"].as_str().expect("token").to_string();
    assert_eq!(v["path"], format!("/ui/#token={token}"));
    assert_eq!(v["expires_in_seconds"], 3600);
    for tok in [first.trim_start_matches("/ui/#token="), token.as_str()] {
        let body = format!(r#"{{"token":"{tok}"}}"#);
        let ok = post(&srv, "/ui/session", "", &body);
        assert_eq!(ok.status, 204, "{}", ok.body);
        let id = session_of(&ok);
        assert_eq!(get(&srv, "/stats", &format!("Cookie: engram_session={id}\n")).status, 200);
        assert_eq!(post(&srv, "/ui/session", "", &body).status, 401, "a token works once");
    }
}

#[test]
fn wrong_sign_ins_count_toward_the_lockout() {
    let dir = tempfile::tempdir().unwrap();
    let srv = server(dir.path(), 1 << 20);
    let mut statuses = Vec::new();
    for _ in 0..9 {
        statuses.push(post(&srv, "/ui/session", "", r#"{"token":"guess"}"#).status);
    }
    assert_eq!(&statuses[..7], &[401; 7]);
    assert_eq!(statuses[7], 429);
    // Blocked: even the right key is refused for a while.
    assert_eq!(post(&srv, "/ui/session", "", &format!(r#"{{"key":"{KEY}"}}"#)).status, 429);
}

#[test]
fn no_console_serves_no_ui_and_no_sessions() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(KnowledgeStore::open(StoreConfig::new(dir.path())).unwrap());
    let mut cfg = ServerConfig::new(dir.path());
    cfg.addr = "127.0.0.1:0".parse().unwrap();
    cfg.api_key = Some(KEY.into());
    cfg.console = false;
    let srv = start(cfg, store, ServiceInfo::default()).unwrap();
    assert!(srv.sign_in_path.is_none());
    assert_eq!(get(&srv, "/ui/", "").status, 401);
    assert_eq!(call(&srv, "GET", "/ui/", None).status, 404);
    assert_eq!(post(&srv, "/ui/session", "", &format!(r#"{{"key":"{KEY}"}}"#)).status, 401);
    assert_eq!(call(&srv, "POST", "/ui/tokens", None).status, 404);
}

#[test]
fn memories_list_in_the_orders_and_filters_the_console_uses() {
    let dir = tempfile::tempdir().unwrap();
    let srv = server(dir.path(), 1 << 20);
    for (id, imp) in [("a", 0.2), ("b", 0.9), ("c", 0.5)] {
        let body = format!(r#"{{"id":"{id}","content":"note {id} about Lisbon and Porto","importance":{imp}}}"#);
        assert_eq!(call(&srv, "POST", "/memories", Some(&body)).status, 200);
    }
    let ids = |path: &str| -> Vec<String> {
        let r = call(&srv, "GET", path, None);
        assert_eq!(r.status, 200, "{path}: {}", r.body);
        r.json()["memories"].as_array().unwrap().iter().map(|m| m["id"].as_str().unwrap().to_string()).collect()
    };
    assert_eq!(ids("/memories?order_by=importance"), ["b", "c", "a"]);
    assert_eq!(ids("/memories?order_by=recent"), ["c", "b", "a"]);
    assert_eq!(ids("/memories?order_by=pagerank").len(), 3);
    assert_eq!(ids("/memories?recorded_date_from=2999-01-01").len(), 0);
    assert_eq!(ids("/memories?recorded_date_to=2999"), ["c", "b", "a"]);
    let bad = call(&srv, "GET", "/memories?recorded_date_from=yesterday-ish", None);
    assert_eq!(bad.status, 422);
    assert_eq!(bad.json()["detail"][0]["loc"], serde_json::json!(["query", "recorded_date_from"]));
    assert_eq!(call(&srv, "GET", "/memories?order_by=random", None).status, 422);
    let t = call(
        &srv,
        "POST",
        "/threads",
        Some(r#"{"thread_id":"t1","messages":[{"role":"user","content":"I decided to move to Porto next spring."}]}"#),
    );
    assert_eq!(t.status, 200, "{}", t.body);
    let from_thread = ids("/memories?source_thread_id=t1&state=all");
    assert!(!from_thread.is_empty());
    assert!(from_thread.iter().all(|id| id.starts_with("t1#")), "{from_thread:?}");
    assert_eq!(ids("/memories?source_thread_id=nope").len(), 0);
}

#[test]
fn the_entity_graph_lists_entities_and_edges_between_them() {
    let dir = tempfile::tempdir().unwrap();
    let srv = server(dir.path(), 1 << 20);
    for c in ["Maria met Jon in Lisbon", "Maria and Jon flew TAP to Porto", "Jon visited Lisbon again"] {
        call(&srv, "POST", "/memories", Some(&format!(r#"{{"content":"{c}"}}"#)));
    }
    let g = call(&srv, "GET", "/library/graph", None).json();
    let names: Vec<&str> = g["nodes"].as_array().unwrap().iter().map(|n| n["label"].as_str().unwrap()).collect();
    for want in ["Maria", "Jon", "Lisbon"] {
        assert!(names.contains(&want), "{names:?}");
    }
    assert_eq!(g["total_entities"].as_u64(), Some(names.len() as u64));
    let ids: Vec<&str> = g["nodes"].as_array().unwrap().iter().map(|n| n["id"].as_str().unwrap()).collect();
    let edges = g["edges"].as_array().unwrap();
    assert!(!edges.is_empty());
    for e in edges {
        assert!(ids.contains(&e["source"].as_str().unwrap()) && ids.contains(&e["target"].as_str().unwrap()));
        assert_eq!(e["edge_type"], "RELATES_TO");
    }
    // The heaviest edge first; the cut keeps the most central entities.
    let w: Vec<u64> = edges.iter().map(|e| e["weight"].as_u64().unwrap()).collect();
    assert!(w.windows(2).all(|p| p[0] >= p[1]), "{w:?}");
    let small = call(&srv, "GET", "/library/graph?max_entities=2&max_edges=0", None).json();
    assert_eq!(small["nodes"].as_array().unwrap().len(), 2);
    assert_eq!(small["edges"].as_array().unwrap().len(), 0);
    assert_eq!(call(&srv, "GET", "/library/graph?max_entities=0", None).status, 422);
    let other = call(&srv, "GET", "/library/graph?space_id=nowhere", None);
    assert_eq!(other.json()["nodes"].as_array().map(Vec::len), Some(0));
}
