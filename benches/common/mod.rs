//! Helpers shared by the bench binaries: command-line numbers, the seeded generator, memory figures.
#![allow(dead_code)]

#[path = "../../tests/common/splitmix.rs"]
mod splitmix;
#[allow(unused_imports)]
pub use splitmix::SplitMix;

/// The number after `name` in `args`, or `default`.
pub fn arg(args: &[String], name: &str, default: usize) -> usize {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// A `/proc/self/status` figure in MiB (`VmRSS` now, `VmHWM` the peak); 0 where there is none.
fn status_mib(field: &str) -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with(field)).map(str::to_string))
        .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse::<f64>().ok()))
        .map_or(0.0, |kb| kb / 1024.0)
}

/// Resident memory now, MiB.
pub fn rss_mib() -> f64 {
    status_mib("VmRSS:")
}

/// Peak resident memory, MiB.
pub fn peak_rss_mib() -> f64 {
    status_mib("VmHWM:")
}

/// One keep-alive HTTP/1.1 connection to a daemon on loopback, with the API key.
pub struct Conn {
    addr: std::net::SocketAddr,
    key: String,
    stream: Option<std::io::BufReader<std::net::TcpStream>>,
}

impl Conn {
    /// A connection to `addr` (opened on the first request) presenting `key`.
    pub fn new(addr: std::net::SocketAddr, key: &str) -> Conn {
        Conn { addr, key: key.to_string(), stream: None }
    }

    /// Sends a request and reads the response; the status, or None on an I/O error.
    pub fn send(&mut self, method: &str, target: &str, body: &str) -> Option<u16> {
        self.send_with(method, target, "", body).map(|(s, _)| s)
    }

    /// Sends a request with extra header lines (each ending in `\r\n`); the status and body, or None on an
    /// I/O error (the connection is then reopened on the next request).
    pub fn send_with(&mut self, method: &str, target: &str, headers: &str, body: &str) -> Option<(u16, Vec<u8>)> {
        if self.stream.is_none() {
            let s = std::net::TcpStream::connect(self.addr).ok()?;
            s.set_nodelay(true).ok()?;
            s.set_read_timeout(Some(std::time::Duration::from_secs(30))).ok()?;
            self.stream = Some(std::io::BufReader::new(s));
        }
        let r = self.exchange(method, target, headers, body);
        if r.is_none() {
            self.stream = None;
        }
        r
    }

    fn exchange(&mut self, method: &str, target: &str, headers: &str, body: &str) -> Option<(u16, Vec<u8>)> {
        use std::io::{BufRead, Read, Write};
        let s = self.stream.as_mut()?;
        let req = format!(
            "{method} {target} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\n{headers}Content-Length: {}\r\n\r\n{body}",
            self.key,
            body.len()
        );
        s.get_mut().write_all(req.as_bytes()).ok()?;
        let mut line = String::new();
        s.read_line(&mut line).ok()?;
        let status: u16 = line.split_whitespace().nth(1)?.parse().ok()?;
        let mut len = 0usize;
        loop {
            line.clear();
            s.read_line(&mut line).ok()?;
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            if let Some((k, v)) = l.split_once(':')
                && k.eq_ignore_ascii_case("content-length")
            {
                len = v.trim().parse().ok()?;
            }
        }
        let mut buf = vec![0u8; len];
        s.read_exact(&mut buf).ok()?;
        Some((status, buf))
    }
}

/// The `p` quantile (0..=1) of `v` (sorted in place); 0 for an empty slice.
pub fn pct(v: &mut [f64], p: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

/// `n` sentences of about 20 words: LoCoMo turns from `dataset` when given, otherwise generated ones.
pub fn sentences(n: usize, dataset: Option<&str>) -> Vec<String> {
    if let Some(path) = dataset {
        let text = std::fs::read_to_string(path).expect("read --dataset");
        let v: serde_json::Value = serde_json::from_str(&text).expect("parse --dataset");
        let mut out = Vec::new();
        for conv in v.as_array().into_iter().flatten() {
            for (k, session) in conv["conversation"].as_object().into_iter().flatten() {
                if k.starts_with("session_") && !k.ends_with("date_time") {
                    for turn in session.as_array().into_iter().flatten() {
                        if let Some(t) = turn["text"].as_str() {
                            out.push(t.to_string());
                        }
                    }
                }
            }
        }
        out.truncate(n);
        return out;
    }
    let who = ["Caroline", "Melanie", "John", "Maria", "Evan", "Sam", "Gina", "Jon"];
    let what = [
        "went to a support group meeting and felt welcomed by everyone there",
        "is planning a camping trip with the kids to the lake next summer",
        "painted a sunrise over the hills and wants to show it at the local gallery",
        "started a new job at a bakery downtown and loves the early mornings",
        "has been reading a book about adoption agencies and the paperwork involved",
        "ran a charity race last weekend to raise money for the animal shelter",
    ];
    (0..n).map(|i| format!("{} {} ({}).", who[i % who.len()], what[(i / who.len()) % what.len()], i)).collect()
}
