//! One HTTP/1.1 request with an API key to a daemon that may be killed at any moment (`tests/crash.rs`,
//! `tests/postgres_daemons.rs`): `None` when the connection fails or the reply is cut off, so that only a
//! complete reply counts as an acknowledgement.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// Sends `method path` with `body` as JSON and `Authorization: Bearer key`; the status and body of a complete
/// reply (a 200 whose body is not JSON was cut off by a kill: `None`). Waits at most `read_timeout` for it.
pub fn request(
    addr: SocketAddr,
    key: &str,
    method: &str,
    path: &str,
    body: &str,
    read_timeout: Duration,
) -> Option<(u16, String)> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    s.set_read_timeout(Some(read_timeout)).ok()?;
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {key}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).ok()?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).ok()?;
    let text = String::from_utf8_lossy(&buf).into_owned();
    let status = text.split_whitespace().nth(1)?.parse().ok()?;
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    if status == 200 && serde_json::from_str::<serde_json::Value>(&body).is_err() {
        return None;
    }
    Some((status, body))
}
