//! Helpers shared by the HTTP tests: a real daemon on a loopback port and a raw HTTP/1.1 client.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;

use engram::api::ServiceInfo;
use engram::server::{RunningServer, ServerConfig, start};
use engram::{KnowledgeStore, StoreConfig};

pub const KEY: &str = "test-key-0123456789";

/// A daemon over a new store in `dir` with the built-in embedder.
pub fn server(dir: &std::path::Path, max_body: usize) -> RunningServer {
    let store = Arc::new(KnowledgeStore::open(StoreConfig::new(dir)).expect("open"));
    server_on(dir, store, max_body)
}

/// A daemon over `store`, key [`KEY`].
pub fn server_on(dir: &std::path::Path, store: Arc<KnowledgeStore>, max_body: usize) -> RunningServer {
    let mut cfg = ServerConfig::new(dir);
    cfg.addr = "127.0.0.1:0".parse().expect("addr");
    cfg.api_key = Some(KEY.into());
    cfg.max_body_bytes = max_body;
    start(cfg, store, ServiceInfo::default()).expect("start server")
}

pub struct Reply {
    pub status: u16,
    /// The status line and headers.
    pub head: String,
    pub body: String,
}

impl Reply {
    /// The value of header `name` (case-insensitive), if present.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim().eq_ignore_ascii_case(name).then(|| v.trim())
        })
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }
}

/// Sends raw request head lines (without the request line's CRLF handling) and a body; reads the reply.
pub fn raw(addr: std::net::SocketAddr, head: &str, body: &[u8]) -> Reply {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(std::time::Duration::from_secs(20))).expect("timeout");
    let mut req = head.replace('\n', "\r\n");
    req.push_str("Connection: close\r\n\r\n");
    s.write_all(req.as_bytes()).expect("write head");
    let _ = s.write_all(body);
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf);
    let text = String::from_utf8_lossy(&buf).into_owned();
    let status = text.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let (head, body) = text.split_once("\r\n\r\n").map(|(h, b)| (h.to_string(), b.to_string())).unwrap_or_default();
    Reply { status, head, body }
}

/// One request with the key; `body` is sent as JSON.
pub fn call(srv: &RunningServer, method: &str, path: &str, body: Option<&str>) -> Reply {
    let b = body.unwrap_or("");
    let head = format!(
        "{method} {path} HTTP/1.1\nHost: 127.0.0.1:{}\nAuthorization: Bearer {KEY}\nContent-Type: application/json\nContent-Length: {}\n",
        srv.addr.port(),
        b.len()
    );
    raw(srv.addr, &head, b.as_bytes())
}
