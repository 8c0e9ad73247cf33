//! Security of the daemon on a real loopback port: a table of key-bypass attempts (0 may succeed), the lockout
//! after repeated wrong keys (429 with Retry-After, per address, even for the right key), the Origin check for
//! browser requests, and CORS only for configured origins.
#![cfg(feature = "server")]

mod common;

use std::sync::Arc;

use common::{KEY, raw, server};
use engram::api::ServiceInfo;
use engram::server::{ServerConfig, start};
use engram::{KnowledgeStore, StoreConfig};

#[test]
fn bypass_attempts_never_succeed() {
    let dir = tempfile::tempdir().unwrap();
    let srv = server(dir.path(), 1 << 20);
    let port = srv.addr.port();
    let host = format!("Host: 127.0.0.1:{port}\n");
    let attempts: Vec<(&str, String)> = vec![
        ("missing", host.clone()),
        ("wrong", format!("{host}Authorization: Bearer wrong\n")),
        ("empty bearer", format!("{host}Authorization: Bearer \n")),
        ("empty x-key", format!("{host}X-NMEM-API-Key: \n")),
        ("basic scheme", format!("{host}Authorization: Basic {KEY}\n")),
        ("no scheme", format!("{host}Authorization: {KEY}\n")),
        ("prefix", format!("{host}Authorization: Bearer {}\n", &KEY[..KEY.len() - 1])),
        ("suffix", format!("{host}Authorization: Bearer {KEY}x\n")),
        ("right then wrong", format!("{host}Authorization: Bearer {KEY}\nAuthorization: Bearer wrong\n")),
        ("wrong then right", format!("{host}X-NMEM-API-Key: wrong\nAuthorization: Bearer {KEY}\n")),
        ("right bearer, wrong x-key", format!("{host}Authorization: Bearer {KEY}\nX-NMEM-API-Key: nope\n")),
        ("lookalike header", format!("{host}X-MEM-API-Key: {KEY}\n")),
        ("upper-case key", format!("{host}Authorization: Bearer {}\n", KEY.to_uppercase())),
        ("foreign host", format!("Host: evil.example\nAuthorization: Bearer {KEY}\n")),
        ("foreign host with port", format!("Host: evil.example:{port}\nAuthorization: Bearer {KEY}\n")),
        ("foreign origin", format!("{host}Origin: https://evil.example\nAuthorization: Bearer {KEY}\n")),
        ("null origin", format!("{host}Origin: null\nAuthorization: Bearer {KEY}\n")),
        ("lookalike origin", format!("{host}Origin: http://127.0.0.1.evil.example\nAuthorization: Bearer {KEY}\n")),
    ];
    // Still fine for a proper client: the official CLI sends both headers with the key; header names and the
    // scheme are case-insensitive; local origins pass.
    for head in [
        format!("{host}Authorization: Bearer {KEY}\nX-NMEM-API-Key: {KEY}\n"),
        format!("{host}AUTHORIZATION: bearer {KEY}\n"),
        format!("{host}Origin: http://localhost:5173\nX-NMEM-API-Key: {KEY}\n"),
    ] {
        let r = raw(srv.addr, &format!("GET /memories HTTP/1.1\n{head}"), b"");
        assert_eq!(r.status, 200, "{head:?}: {}", r.body);
        assert!(!r.body.contains("access-control"));
    }
    let mut successes = 0;
    for (what, head) in &attempts {
        let r = raw(srv.addr, &format!("GET /memories HTTP/1.1\n{head}"), b"");
        // 429 once the wrong keys have locked the address out.
        assert!(matches!(r.status, 401 | 403 | 429), "{what}: {} {}", r.status, r.body);
        if r.status < 400 {
            successes += 1;
        }
    }
    for q in [format!("api_key={KEY}"), format!("nmem_api_key={KEY}"), format!("key={KEY}"), format!("token={KEY}")] {
        let r = raw(srv.addr, &format!("GET /memories?{q} HTTP/1.1\n{host}"), b"");
        assert!(matches!(r.status, 401 | 429), "query-string key {q}");
    }
    assert_eq!(successes, 0);
}

#[test]
fn repeated_wrong_keys_lock_the_address_out() {
    let dir = tempfile::tempdir().unwrap();
    let srv = server(dir.path(), 1 << 20);
    let host = format!("Host: 127.0.0.1:{}\n", srv.addr.port());
    let get = |extra: &str| raw(srv.addr, &format!("GET /memories HTTP/1.1\n{host}{extra}"), b"");
    // Requests without any key do not count (a client that forgot to configure one).
    for _ in 0..10 {
        assert_eq!(get("").status, 401);
    }
    assert_eq!(get(&format!("Authorization: Bearer {KEY}\n")).status, 200);
    for i in 0..engram::server::LOCKOUT_FAILURES {
        let r = get("Authorization: Bearer guess\n");
        let want = if i + 1 == engram::server::LOCKOUT_FAILURES { 429 } else { 401 };
        assert_eq!(r.status, want, "attempt {i}");
    }
    let r = get(&format!("Authorization: Bearer {KEY}\n"));
    assert_eq!(r.status, 429, "blocked even with the right key");
    assert_eq!(r.json()["error_code"], "too_many_requests");
    assert_eq!(r.json()["retryable"], true);
    // Everything behind the key is blocked; the public probes stay available.
    assert_eq!(get("").status, 429);
    assert_eq!(raw(srv.addr, &format!("GET /livez HTTP/1.1\n{host}"), b"").status, 200);
}

#[test]
fn cors_only_for_configured_origins() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(KnowledgeStore::open(StoreConfig::new(dir.path())).unwrap());
    let mut cfg = ServerConfig::new(dir.path());
    cfg.addr = "127.0.0.1:0".parse().unwrap();
    cfg.api_key = Some(KEY.into());
    cfg.cors_origins = vec!["https://app.example".into()];
    let srv = start(cfg, store, ServiceInfo::default()).unwrap();
    let host = format!("Host: 127.0.0.1:{}\n", srv.addr.port());
    let full = |head: &str| {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(srv.addr).unwrap();
        let req = format!("{head}Connection: close\n\n").replace('\n', "\r\n");
        s.write_all(req.as_bytes()).unwrap();
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        out.to_ascii_lowercase()
    };
    let pre = full(&format!(
        "OPTIONS /memories HTTP/1.1\n{host}Origin: https://app.example\nAccess-Control-Request-Method: POST\n"
    ));
    assert!(pre.starts_with("http/1.1 204"), "{pre}");
    assert!(pre.contains("access-control-allow-origin: https://app.example"));
    assert!(pre.contains("access-control-allow-headers: authorization, content-type, x-nmem-api-key"));
    let get =
        full(&format!("GET /memories HTTP/1.1\n{host}Origin: https://app.example\nAuthorization: Bearer {KEY}\n"));
    assert!(get.starts_with("http/1.1 200"), "{get}");
    assert!(get.contains("access-control-allow-origin: https://app.example"));
    let other =
        full(&format!("GET /memories HTTP/1.1\n{host}Origin: https://other.example\nAuthorization: Bearer {KEY}\n"));
    assert!(other.starts_with("http/1.1 403"), "{other}");
    assert!(!other.contains("access-control-allow-origin"));
    let pre = full(&format!("OPTIONS /memories HTTP/1.1\n{host}Origin: https://other.example\n"));
    assert!(!pre.contains("access-control-allow-origin"), "{pre}");
}

#[cfg(unix)]
#[test]
fn a_key_file_others_can_read_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let (key, path) = engram::server::load_or_create_key(dir.path()).unwrap();
    assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
    assert_eq!(engram::server::load_or_create_key(dir.path()).unwrap().0, key, "the same key on the next start");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    let e = engram::server::load_or_create_key(dir.path()).unwrap_err();
    assert_eq!(e.kind(), engram::ErrorKind::Forbidden);
    assert!(e.message().contains("chmod 600"));
}

#[test]
fn the_key_never_reaches_the_logs() {
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let secret = "engram_log_probe_9f1c2b7d";
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_engram"))
        .args(["serve", "--addr", &format!("127.0.0.1:{port}"), "--api-key", secret, "--embedding-model", "builtin"])
        .arg("--data-dir")
        .arg(dir.path())
        .env("ENGRAM_LOG", "trace")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let mut up = false;
    for _ in 0..300 {
        if std::net::TcpStream::connect(addr).is_ok() {
            up = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    if !up {
        let _ = child.kill();
        let _ = child.wait();
        panic!("the daemon did not start");
    }
    let host = format!("Host: 127.0.0.1:{port}\n");
    raw(addr, &format!("GET /memories HTTP/1.1\n{host}Authorization: Bearer {secret}\n"), b"");
    raw(addr, &format!("GET /memories HTTP/1.1\n{host}Authorization: Bearer {secret}-wrong\n"), b"");
    raw(addr, &format!("GET /memories HTTP/1.1\nHost: evil.example\nAuthorization: Bearer {secret}\n"), b"");
    raw(addr, &format!("POST /memories HTTP/1.1\n{host}X-NMEM-API-Key: {secret}\nContent-Length: 5\n"), b"{bad}");
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    let logs = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(logs.contains("rejected Host header"), "the log has the requests: {logs}");
    assert!(!logs.contains(secret), "the key appears in the logs");
}

/// Hostile JSON bodies: deep nesting, NaN and infinities, invalid UTF-8, a lone surrogate, an over-long string.
/// Each is a 422 in the spec's shape, and the daemon keeps serving.
#[test]
fn hostile_json_gets_422_and_the_daemon_keeps_serving() {
    let dir = tempfile::tempdir().unwrap();
    let srv = server(dir.path(), 8 << 20);
    let post = |path: &str, body: &[u8]| {
        let head = format!(
            "POST {path} HTTP/1.1\nHost: 127.0.0.1\nAuthorization: Bearer {KEY}\nContent-Type: application/json\nContent-Length: {}\n",
            body.len()
        );
        raw(srv.addr, &head, body)
    };
    let mut deep = b"{\"content\":".to_vec();
    deep.extend(std::iter::repeat_n(b'[', 100_000));
    deep.extend(std::iter::repeat_n(b']', 100_000));
    deep.push(b'}');
    let mut deep_object = b"{\"query\":".to_vec();
    for _ in 0..5000 {
        deep_object.extend_from_slice(b"{\"a\":");
    }
    deep_object.push(b'1');
    deep_object.extend(std::iter::repeat_n(b'}', 5001));
    let mut long = b"{\"content\":\"".to_vec();
    long.extend(std::iter::repeat_n(b'a', 7 << 20));
    long.extend_from_slice(b"\"}");
    let cases: Vec<(&str, &str, Vec<u8>, &str)> = vec![
        ("deep array", "/memories", deep, "json_invalid"),
        ("deep object", "/memories/search", deep_object, "json_invalid"),
        ("NaN", "/memories", b"{\"content\":\"x\",\"importance\":NaN}".to_vec(), "json_invalid"),
        ("infinity", "/memories", b"{\"content\":\"x\",\"importance\":1e999}".to_vec(), "json_invalid"),
        ("invalid UTF-8", "/memories", b"{\"content\":\"\xff\xfe\"}".to_vec(), "json_invalid"),
        ("lone surrogate", "/memories", b"{\"content\":\"\\ud800\"}".to_vec(), "json_invalid"),
        ("over-long content", "/memories", long, "string_too_long"),
        ("wrong type", "/memories", b"[1,2,3]".to_vec(), ""),
    ];
    for (what, path, body, kind) in cases {
        let r = post(path, &body);
        assert_eq!(r.status, 422, "{what}: {}", &r.body[..r.body.len().min(200)]);
        let v = r.json();
        assert!(v["detail"].is_array(), "{what}: the spec's shape");
        if !kind.is_empty() {
            assert_eq!(v["detail"][0]["type"], kind, "{what}");
        }
    }
    let ok = post("/memories", b"{\"content\":\"still serving\"}");
    assert_eq!(ok.status, 200, "{}", ok.body);
}

/// Slow clients (slowloris): a client trickling its headers, one that stops after a partial body, and an idle
/// kept-alive connection are each disconnected after the configured time, and meanwhile the daemon serves
/// everyone else. The deadlines below are generous bounds for a functional check, not timings.
#[test]
fn slow_clients_are_disconnected_and_others_are_served() {
    use std::io::{Read, Write};
    use std::time::{Duration, Instant};
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(KnowledgeStore::open(StoreConfig::new(dir.path())).unwrap());
    let mut cfg = ServerConfig::new(dir.path());
    cfg.addr = "127.0.0.1:0".parse().unwrap();
    cfg.api_key = Some(KEY.into());
    cfg.header_read_timeout = Duration::from_secs(1);
    cfg.body_read_timeout = Duration::from_secs(1);
    let srv = start(cfg, store, ServiceInfo::default()).unwrap();
    let host = format!("Host: 127.0.0.1:{}\r\n", srv.addr.port());
    let connect = || {
        let s = std::net::TcpStream::connect(srv.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        s
    };
    // Reads until the server closes; returns what it sent and whether it closed (false: our 30 s read limit).
    let drain = |s: &mut std::net::TcpStream| {
        let mut out = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            match s.read(&mut buf) {
                Ok(0) => return (String::from_utf8_lossy(&out).into_owned(), true),
                Ok(n) => out.extend_from_slice(&buf[..n]),
                Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                    return (String::from_utf8_lossy(&out).into_owned(), false);
                }
                Err(_) => return (String::from_utf8_lossy(&out).into_owned(), true),
            }
        }
    };

    // 1. Headers trickled one byte every 200 ms: the connection closes without a request being served.
    let mut slow = connect();
    let head =
        format!("GET /memories HTTP/1.1\r\n{host}Authorization: Bearer {KEY}\r\nX-Padding: {}\r\n", "a".repeat(200));
    let started = Instant::now();
    let mut closed_while_writing = false;
    for b in head.as_bytes() {
        if slow.write_all(&[*b]).is_err() {
            closed_while_writing = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
        if started.elapsed() > Duration::from_secs(20) {
            break;
        }
    }
    // Meanwhile an ordinary client is served.
    let ok = raw(srv.addr, &format!("GET /health HTTP/1.1\nHost: 127.0.0.1:{}\n", srv.addr.port()), b"");
    assert_eq!(ok.status, 200);
    let (reply, closed) = if closed_while_writing { (String::new(), true) } else { drain(&mut slow) };
    assert!(closed, "the trickling client was not disconnected");
    assert!(!reply.contains("200 OK"), "a trickled request was served: {reply}");

    // 2. A body that stops half-way: 408 request_timeout, then the connection closes.
    let mut partial = connect();
    let req = format!(
        "POST /memories HTTP/1.1\r\n{host}Authorization: Bearer {KEY}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"content\": \"half"
    );
    partial.write_all(req.as_bytes()).unwrap();
    let (reply, closed) = drain(&mut partial);
    assert!(closed, "the stalled body kept its connection");
    assert!(reply.starts_with("HTTP/1.1 408"), "{reply}");
    assert!(reply.contains("request_timeout"), "{reply}");
    let listed = common::call(&srv, "GET", "/memories", None).json();
    assert_eq!(listed["memories"].as_array().map(Vec::len), Some(0), "a half-sent memory was stored");

    // 3. An idle kept-alive connection is closed after one request.
    let mut idle = connect();
    idle.write_all(format!("GET /health HTTP/1.1\r\n{host}\r\n").as_bytes()).unwrap();
    let (reply, closed) = drain(&mut idle);
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    assert!(closed, "an idle kept-alive connection stayed open");
}
