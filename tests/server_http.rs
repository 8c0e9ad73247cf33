//! The daemon on a real loopback port: auth (401), Host allowlist (403), body limits (413, also chunked),
//! validation (422 with the spec's detail shape), and a JSON round trip through both key headers.
#![cfg(feature = "server")]

mod common;

use common::{KEY, call, raw, server};
use engram::{KnowledgeStore, StoreConfig};

#[test]
fn probes_are_public_and_everything_else_needs_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let srv = server(dir.path(), 1 << 20);
    let port = srv.addr.port();
    for path in ["/capabilities", "/health", "/livez"] {
        let r = raw(srv.addr, &format!("GET {path} HTTP/1.1\nHost: localhost:{port}\n"), b"");
        assert_eq!(r.status, 200, "{path}: {}", r.body);
    }
    let health = raw(srv.addr, &format!("GET /health HTTP/1.1\nHost: localhost:{port}\n"), b"").json();
    assert_eq!(health["status"], "ok");
    // The built-in static model: semantic search with nothing configured, and not degraded.
    assert_eq!(health["embedding"]["mode"], "local-static");
    assert_eq!(health["embedding"]["dimension"], 256);
    assert_eq!(health["embedding"]["model"], "engram-static-minilm-l6-v1-256", "{health}");
    assert_eq!(health["embedding"]["degraded"], false, "{health}");

    let attempts = [
        String::new(),
        "Authorization: Bearer wrong\n".into(),
        "Authorization: Bearer \n".into(),
        format!("Authorization: Basic {KEY}\n"),
        format!("Authorization: Bearer {}\n", &KEY[..KEY.len() - 1]),
        format!("Authorization: Bearer {KEY}x\n"),
        "X-NMEM-API-Key: nope\n".into(),
        format!("X-MEM-API-Key: {KEY}\n"),
    ];
    for extra in &attempts {
        let r = raw(srv.addr, &format!("GET /memories HTTP/1.1\nHost: 127.0.0.1:{port}\n{extra}"), b"");
        assert_eq!(r.status, 401, "{extra:?} got {}", r.status);
        assert!(r.json()["detail"].as_str().unwrap_or("").contains("api key"));
    }
    let q = raw(srv.addr, &format!("GET /memories?nmem_api_key={KEY} HTTP/1.1\nHost: 127.0.0.1:{port}\n"), b"");
    assert_eq!(q.status, 401, "keys in the query string are not accepted");
    let ok = raw(srv.addr, &format!("GET /memories HTTP/1.1\nHost: 127.0.0.1:{port}\nX-NMEM-API-Key: {KEY}\n"), b"");
    assert_eq!(ok.status, 200);
    let ok =
        raw(srv.addr, &format!("GET /memories HTTP/1.1\nHost: 127.0.0.1:{port}\nauthorization: bearer {KEY}\n"), b"");
    assert_eq!(ok.status, 200, "the scheme name is case-insensitive");
}

#[test]
fn foreign_host_headers_get_403_even_with_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let srv = server(dir.path(), 1 << 20);
    for host in ["evil.example", "evil.example:14242", "127.0.0.1.evil.example", "localhost.evil", ""] {
        let head = format!("GET /health HTTP/1.1\nHost: {host}\nAuthorization: Bearer {KEY}\n");
        let r = raw(srv.addr, &head, b"");
        assert_eq!(r.status, 403, "host {host:?}");
    }
    let r = raw(srv.addr, "GET /health HTTP/1.0\n", b"");
    assert_eq!(r.status, 403, "no Host header at all");
    let r = raw(srv.addr, &format!("GET /health HTTP/1.1\nHost: [::1]:{}\n", srv.addr.port()), b"");
    assert_eq!(r.status, 200);
}

#[test]
fn bodies_over_the_limit_get_413_including_chunked_ones() {
    let dir = tempfile::tempdir().unwrap();
    let srv = server(dir.path(), 4096);
    let big = format!("{{\"content\":\"{}\"}}", "a".repeat(10_000));
    assert_eq!(call(&srv, "POST", "/memories", Some(&big)).status, 413);
    let port = srv.addr.port();
    let mut chunked = Vec::new();
    for _ in 0..10 {
        chunked.extend_from_slice(format!("{:x}\r\n{}\r\n", 1000, "b".repeat(1000)).as_bytes());
    }
    chunked.extend_from_slice(b"0\r\n\r\n");
    let head = format!(
        "POST /memories HTTP/1.1\nHost: 127.0.0.1:{port}\nAuthorization: Bearer {KEY}\nTransfer-Encoding: chunked\n"
    );
    assert_eq!(raw(srv.addr, &head, &chunked).status, 413);
    let listed = call(&srv, "GET", "/memories", None).json();
    assert_eq!(listed["pagination"]["total"], 0, "nothing was stored");
}

#[test]
fn validation_errors_use_the_detail_shape_and_never_500() {
    let dir = tempfile::tempdir().unwrap();
    let srv = server(dir.path(), 1 << 20);
    let cases: &[(&str, &str, Option<&str>, &str)] = &[
        ("POST", "/memories", Some(r#"{"content":""}"#), "content"),
        ("POST", "/memories", Some(r#"{"content":"x","importance":2}"#), "importance"),
        ("POST", "/memories", Some(r#"{"content":"x","importance":"high"}"#), "importance"),
        ("POST", "/memories", Some(r#"{"content":42}"#), "content"),
        ("POST", "/memories", Some(r#"{"title":"no content"}"#), "content"),
        ("POST", "/memories", Some(r#"{"content":"x","unit_type":"opinion"}"#), "unit_type"),
        ("POST", "/memories", Some("{not json"), "body"),
        ("POST", "/memories", Some(r#"[1,2]"#), "body"),
        ("GET", "/memories?limit=0", None, "limit"),
        ("GET", "/memories?limit=101", None, "limit"),
        ("GET", "/memories?offset=-1", None, "offset"),
        ("GET", "/memories?importance_min=1.5", None, "importance_min"),
        ("GET", "/memories?importance_min=NaN", None, "importance_min"),
        ("GET", "/memories?state=gone", None, "state"),
        ("GET", "/memories/search", None, "q"),
        ("GET", "/memories/search?q=x&limit=1000", None, "limit"),
        ("POST", "/memories/search", Some(r#"{"query":""}"#), "query"),
        ("POST", "/memories/search", Some(r#"{"query":"x","limit":0}"#), "limit"),
        ("GET", "/labels?limit=1001", None, "limit"),
        ("POST", "/labels", None, "name"),
        ("POST", "/labels?name=x&color=blue", None, "color"),
        ("POST", "/spaces", Some(r#"{"name":"  "}"#), "name"),
    ];
    for (m, p, b, field) in cases {
        let r = call(&srv, m, p, *b);
        assert_eq!(r.status, 422, "{m} {p} {b:?}: {}", r.body);
        let detail = r.json()["detail"].clone();
        let first = &detail[0];
        assert!(first["loc"].as_array().is_some_and(|l| l.iter().any(|x| x == field)), "{m} {p}: {detail}");
        for k in ["msg", "type", "input", "ctx"] {
            assert!(first.get(k).is_some(), "{k} missing in {detail}");
        }
    }
    let r = call(&srv, "GET", "/memories/unknown-id", None);
    assert_eq!((r.status, r.json()["error_code"].as_str()), (404, Some("memory_not_found")));
    assert_eq!(r.json()["retryable"], false);
    assert_eq!(call(&srv, "GET", "/nowhere", None).status, 404);
    assert_eq!(call(&srv, "PUT", "/memories", Some("{}")).status, 405);
    assert_eq!(call(&srv, "GET", "/memories?space_id=missing", None).status, 404);
}

#[test]
fn memory_round_trip_over_http() {
    let dir = tempfile::tempdir().unwrap();
    let srv = server(dir.path(), 1 << 20);
    let body = r#"{"id":"k1","content":"Melanie painted a sunrise over the lake in 2022","labels":["art"],"importance":0.7,"unit_type":"event","event_start":"2022","source_app":"test"}"#;
    let c = call(&srv, "POST", "/memories", Some(body)).json();
    assert_eq!(c["action"], "created");
    assert_eq!(c["memory"]["id"], "k1");
    assert_eq!(c["memory"]["unit_type"], "event");
    assert_eq!(c["memory"]["temporal_precision"], "year");
    assert_eq!(c["memory"]["metadata"]["source_app"], "test");
    assert_eq!(c["assigned_labels"], serde_json::json!(["art"]));
    let again = call(&srv, "POST", "/memories", Some(&body.replace("a sunrise", "a sunset"))).json();
    assert_eq!(again["action"], "updated");
    assert_eq!(again["memory"]["version"], 2);

    let s = call(&srv, "GET", "/memories/search?q=sunset%20painting&labels=art&limit=3", None).json();
    assert_eq!(s["memories"][0]["id"], "k1");
    assert!(s["memories"][0]["metadata"]["similarity_score"].as_f64().unwrap_or(0.0) > 0.0);
    assert_eq!(s["search_metadata"]["search_mode"], "hybrid");
    let p = call(&srv, "POST", "/memories/search", Some(r#"{"query":"sunset","limit":2}"#)).json();
    assert_eq!(p[0]["memory"]["id"], "k1");
    assert!(p[0]["relevance_reason"].as_str().unwrap_or("").contains("sunset"));
    assert_eq!(p[0]["matched_terms"], serde_json::json!(["sunset"]), "the matched terms are a field");

    let u = call(&srv, "PATCH", "/memories/k1", Some(r#"{"title":"Lake","labels":["a","b"]}"#)).json();
    assert_eq!((u["title"].as_str(), u["labels"].clone()), (Some("Lake"), serde_json::json!(["a", "b"])));
    let labels = call(&srv, "GET", "/labels?order_by=usage_count&order_desc=true", None).json();
    let names: Vec<&str> = labels.as_array().unwrap().iter().filter_map(|l| l["name"].as_str()).collect();
    assert_eq!(names, vec!["a", "b", "art"]);
    assert_eq!(call(&srv, "DELETE", "/memories/k1/labels/label_a", None).status, 200);
    let ml = call(&srv, "GET", "/memories/k1/labels", None).json();
    assert_eq!(ml["labels"].as_array().map(Vec::len), Some(1));
    assert_eq!(call(&srv, "POST", "/memories/k1/labels/label_zzz", None).status, 404);

    let sp = call(&srv, "POST", "/spaces", Some(r#"{"name":"Research"}"#)).json();
    assert_eq!(sp["enabled"], true);
    assert_eq!(sp["space"]["id"], "research");
    let moved = call(&srv, "PATCH", "/memories/k1", Some(r#"{"space_id":"research"}"#)).json();
    assert_eq!(moved["space_id"], "research");
    assert_eq!(call(&srv, "GET", "/memories?space_id=research", None).json()["pagination"]["total"], 1);
    assert_eq!(call(&srv, "GET", "/memories", None).json()["pagination"]["total"], 0);

    let d = call(&srv, "DELETE", "/memories/k1", None).json();
    // One HAS_LABEL edge and the MENTIONS edges of its two entities.
    assert_eq!(d["deleted_relationships"], 3, "{d}");
    assert_eq!(call(&srv, "GET", "/memories/k1", None).status, 404);
}

#[test]
fn list_pages_by_the_requested_limit() {
    let dir = tempfile::tempdir().unwrap();
    let srv = server(dir.path(), 1 << 20);
    for i in 0..5 {
        call(&srv, "POST", "/memories", Some(&format!(r#"{{"id":"m{i}","content":"memory number {i}"}}"#)));
    }
    let page = call(&srv, "GET", "/memories?limit=3&offset=0", None).json();
    assert_eq!(page["memories"].as_array().map(Vec::len), Some(3));
    assert_eq!(page["pagination"], serde_json::json!({"limit": 3, "offset": 0, "total": 5, "has_more": true}));
    let rest = call(&srv, "GET", "/memories?limit=3&offset=3", None).json();
    assert_eq!(rest["memories"].as_array().map(Vec::len), Some(2));
    assert_eq!(rest["pagination"]["has_more"], false);
}

#[test]
fn openapi_has_an_operation_for_every_route() {
    let dir = tempfile::tempdir().unwrap();
    let srv = server(dir.path(), 1 << 20);
    let doc = call(&srv, "GET", "/openapi.json", None).json();
    assert_eq!(doc["openapi"], "3.1.0");
    for r in engram::api::ROUTES.iter() {
        let op = &doc["paths"][r.path][r.method.to_ascii_lowercase()];
        assert!(op["operationId"].is_string(), "{} {} has no operation", r.method, r.path);
        assert!(op["responses"]["200"].is_object());
        if let Some(body) = r.body.map(|d| d.name()) {
            assert!(doc["components"]["schemas"][body.as_ref()].is_object(), "schema {body} missing");
        }
    }
    let limit = doc["paths"]["/memories"]["get"]["parameters"]
        .as_array()
        .and_then(|ps| ps.iter().find(|p| p["name"] == "limit").cloned())
        .unwrap_or_default();
    assert_eq!((limit["schema"]["minimum"].clone(), limit["schema"]["maximum"].clone()), (1.into(), 100.into()));
    assert!(doc["components"]["schemas"]["Memory"]["properties"]["decay_score_cached"].is_object());
}

/// The real binary: `engram serve` creates a 0600 key file, serves with it, and exits cleanly on SIGTERM.
#[cfg(unix)]
#[test]
fn the_daemon_binary_serves_and_stops_cleanly_on_sigterm() {
    use std::io::BufRead;
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_engram"))
        .args(["serve", "--addr", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path())
        .env_remove("ENGRAM_API_KEY")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn engram serve");
    let stdout = child.stdout.take().expect("stdout");
    let mut addr = None;
    for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
        if let Some(a) = line.strip_prefix("engram listening on http://") {
            addr = a.trim().parse::<std::net::SocketAddr>().ok();
            break;
        }
    }
    let addr = addr.expect("the daemon prints its address");
    let key_file = dir.path().join("api-key");
    let mode = std::fs::metadata(&key_file).expect("key file").permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let key = std::fs::read_to_string(&key_file).expect("read key");
    let head =
        format!("POST /memories HTTP/1.1\nHost: 127.0.0.1\nX-NMEM-API-Key: {}\nContent-Length: 21\n", key.trim());
    let r = raw(addr, &head, br#"{"content":"durable"}"#);
    assert_eq!(r.status, 200, "{}", r.body);
    let kill = std::process::Command::new("kill").args(["-TERM", &child.id().to_string()]).status().expect("kill");
    assert!(kill.success());
    let status = child.wait().expect("wait");
    assert!(status.success(), "exit status {status:?}");
    // The acknowledged write survived the shutdown.
    let store = KnowledgeStore::open(StoreConfig::new(dir.path())).expect("reopen after shutdown");
    assert_eq!(store.admin().health().expect("health").memories, 1);
}

#[test]
fn search_takes_the_query_vector_as_base64_and_answers_the_compact_form() {
    use base64::Engine;
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = StoreConfig::new(dir.path());
    cfg.embedder = std::sync::Arc::new(engram::embed::ExternalEmbedder::new(4).unwrap());
    let srv = common::server_on(dir.path(), std::sync::Arc::new(KnowledgeStore::open(cfg).unwrap()), 1 << 20);
    for (id, text, v) in [
        ("v1", "the violin in the harbour", [1.0f32, 0.1, 0.0, 0.0]),
        ("v2", "a glacier over the orchard", [0.0, 0.0, 1.0, 0.2]),
        ("v3", "violin lessons", [0.7, 0.7, 0.0, 0.0]),
    ] {
        let body = serde_json::json!({"id": id, "content": text, "embedding": v}).to_string();
        assert_eq!(call(&srv, "POST", "/memories", Some(&body)).status, 200);
    }
    let q = [0.9f32, 0.2, 0.05, 0.0];
    let bytes: Vec<u8> = q.iter().flat_map(|f| f.to_le_bytes()).collect();
    let b64 = base64::engine::general_purpose::STANDARD.encode(&bytes);
    let floats = serde_json::json!({"query": "", "query_embedding": q, "retrieval": "vector", "limit": 3});
    let packed = serde_json::json!({"query": "", "query_embedding_base64": b64, "retrieval": "vector", "limit": 3});
    let a = call(&srv, "POST", "/memories/search", Some(&floats.to_string())).json();
    let b = call(&srv, "POST", "/memories/search", Some(&packed.to_string())).json();
    let ids = |v: &serde_json::Value| -> Vec<(String, f64)> {
        v.as_array()
            .unwrap_or_else(|| panic!("not a list of hits: {v}"))
            .iter()
            .map(|h| {
                let id = h["memory"]["id"].as_str().or(h["id"].as_str()).unwrap_or_default().to_string();
                (id, h["similarity_score"].as_f64().unwrap_or(-1.0))
            })
            .collect()
    };
    assert_eq!(ids(&a).len(), 3);
    assert_eq!(ids(&a)[0].0, "v1", "{a}");
    assert_eq!(ids(&a), ids(&b));

    // The compact form: the same hits, id and score only.
    let mut compact = packed.clone();
    compact["result_format"] = "compact".into();
    let c = call(&srv, "POST", "/memories/search", Some(&compact.to_string())).json();
    assert_eq!(ids(&c), ids(&a));
    assert_eq!(c[0].as_object().map(|o| o.len()), Some(2), "{c}");

    // Bad forms: 422 naming the field; nothing stored changes.
    let mut both = floats.clone();
    both["query_embedding_base64"] = b64.clone().into();
    for (body, field) in [
        (both, "query_embedding_base64"),
        (serde_json::json!({"query": "", "query_embedding_base64": "not base64!"}), "query_embedding_base64"),
        (serde_json::json!({"query": "", "query_embedding_base64": "AAAAAAA="}), "query_embedding_base64"),
        (serde_json::json!({"query": "violin", "result_format": "tiny"}), "result_format"),
    ] {
        let r = call(&srv, "POST", "/memories/search", Some(&body.to_string()));
        assert_eq!(r.status, 422, "{body}");
        assert_eq!(r.json()["detail"][0]["loc"], serde_json::json!(["body", field]), "{body}");
    }
    // A vector of the wrong dimension is refused by the store's check, as with the float array.
    let short = base64::engine::general_purpose::STANDARD.encode(1.0f32.to_le_bytes().repeat(2));
    let r = call(
        &srv,
        "POST",
        "/memories/search",
        Some(&serde_json::json!({"query": "", "query_embedding_base64": short}).to_string()),
    );
    assert_eq!(r.status, 422);
    assert_eq!(call(&srv, "GET", "/memories", None).json()["pagination"]["total"], 3);
}

/// `POST /v1/embeddings` serves the built-in static model under its name, with no model configured.
#[test]
fn v1_embeddings_serves_the_built_in_static_model() {
    let dir = tempfile::tempdir().unwrap();
    let srv = server(dir.path(), 1 << 20);
    let body = r#"{"model":"engram-static-minilm-l6-v1-256","input":["coffee habits","She drinks a double espresso every morning.","The roof needs new shingles."]}"#;
    let r = call(&srv, "POST", "/v1/embeddings", Some(body));
    assert_eq!(r.status, 200, "{}", r.body);
    let j = r.json();
    assert_eq!(j["model"], "engram-static-minilm-l6-v1-256");
    let v: Vec<Vec<f32>> = j["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["embedding"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap() as f32).collect())
        .collect();
    assert_eq!((v.len(), v[0].len()), (3, 256));
    let (close, far) = (engram::embed::cosine(&v[0], &v[1]), engram::embed::cosine(&v[0], &v[2]));
    assert!(close > far, "the paraphrase {close} is closer than the unrelated sentence {far}");
    // WordPiece tokens, no special tokens: "coffee habits" is 2, the others 10 and 7.
    assert_eq!(j["usage"]["prompt_tokens"], 2 + 10 + 7, "{j}");
}
