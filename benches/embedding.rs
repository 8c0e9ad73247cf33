//! Embedding benchmark (features `fastembed` and `server`): model throughput at a given batch size, agreement of
//! batched and one-at-a-time vectors, and `POST /v1/embeddings` latency for one short input through a real
//! daemon on a loopback port.
//!
//! `cargo bench --features fastembed,server --bench embedding -- --model-dir DIR [--n 1024] [--batch 32]
//! [--requests 200] [--dataset locomo.json]`
//!
//! Sentences are LoCoMo turns when `--dataset` is given (about 20 words each), otherwise generated sentences of
//! similar length. Needs `ORT_DYLIB_PATH` (see README).

use std::io::{Read, Write};
use std::sync::Arc;
use std::time::Instant;

use engram::embed::{Embedder, InputType, OnnxEmbedder, OnnxOptions, cosine};

mod common;

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1).cloned())
}

fn pct(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

fn main() {
    let Some(dir) = arg("--model-dir").or_else(|| std::env::var("ENGRAM_EMBEDDING_MODEL_DIR").ok()) else {
        eprintln!("embedding bench: pass --model-dir DIR (or ENGRAM_EMBEDDING_MODEL_DIR); skipped");
        return;
    };
    let n: usize = arg("--n").and_then(|s| s.parse().ok()).unwrap_or(1024);
    let batch: usize = arg("--batch").and_then(|s| s.parse().ok()).unwrap_or(32);
    let requests: usize = arg("--requests").and_then(|s| s.parse().ok()).unwrap_or(200);
    let t = Instant::now();
    let emb = match OnnxEmbedder::from_dir(&dir, OnnxOptions { batch_size: batch, ..OnnxOptions::default() }) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("embedding bench: {e}");
            std::process::exit(2);
        }
    };
    println!("model {} ({} dims) loaded in {:.2} s", emb.name(), emb.dim(), t.elapsed().as_secs_f64());
    let texts = common::sentences(n, arg("--dataset").as_deref());
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let words: usize = texts.iter().map(|s| s.split_whitespace().count()).sum();
    let _ = emb.embed(&refs[..refs.len().min(64)], InputType::Document);
    let mut rates = Vec::new();
    let mut batched = Vec::new();
    for _ in 0..3 {
        let t = Instant::now();
        batched = emb.embed(&refs, InputType::Document).expect("embed");
        rates.push(texts.len() as f64 / t.elapsed().as_secs_f64());
    }
    rates.sort_by(f64::total_cmp);
    println!(
        "throughput at batch {batch}: median {:.0} sentences/s (runs {:?}), {} sentences of {:.1} words on average",
        rates[1],
        rates.iter().map(|r| r.round()).collect::<Vec<_>>(),
        texts.len(),
        words as f64 / texts.len() as f64
    );
    let k = texts.len().min(128);
    let t = Instant::now();
    let single: Vec<Vec<f32>> =
        refs[..k].iter().map(|s| emb.embed(&[s], InputType::Document).expect("embed").remove(0)).collect();
    println!("throughput one at a time: {:.0} sentences/s", k as f64 / t.elapsed().as_secs_f64());
    let cos: Vec<f32> = single.iter().zip(&batched).map(|(a, b)| cosine(a, b)).collect();
    let min = cos.iter().copied().fold(1.0f32, f32::min);
    println!("batched against one-at-a-time vectors: min cosine {min:.6} over {k} sentences");

    let store_dir = tempfile::tempdir().expect("tempdir");
    let mut cfg = engram::StoreConfig::new(store_dir.path());
    cfg.embedder = Arc::new(emb);
    let store = Arc::new(engram::KnowledgeStore::open(cfg).expect("open"));
    let mut cfg = engram::server::ServerConfig::new(store_dir.path());
    cfg.addr = "127.0.0.1:0".parse().expect("addr");
    cfg.api_key = Some("bench-key".into());
    let server = engram::server::start(cfg, store, engram::api::ServiceInfo::default()).expect("server");
    let body = br#"{"model":"all-MiniLM-L6-v2","input":"Where did Caroline go last weekend?"}"#;
    let mut lat = Vec::new();
    let mut conn = std::net::TcpStream::connect(server.addr).expect("connect");
    for _ in 0..requests {
        let t = Instant::now();
        let req = format!(
            "POST /v1/embeddings HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {}\r\nContent-Type: \
             application/json\r\nContent-Length: {}\r\n\r\n",
            server.api_key,
            body.len()
        );
        // One write: a separate small body write would wait for the ACK of the head (Nagle + delayed ACK).
        let mut msg = req.into_bytes();
        msg.extend_from_slice(body);
        conn.write_all(&msg).expect("write");
        let mut buf = vec![0u8; 1 << 16];
        let mut got = Vec::new();
        loop {
            let m = conn.read(&mut buf).expect("read");
            got.extend_from_slice(&buf[..m]);
            let text = String::from_utf8_lossy(&got);
            if let Some(h) = text.find("\r\n\r\n") {
                let len: usize = text[..h]
                    .lines()
                    .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length: ").map(|v| v.trim().to_string()))
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0);
                if got.len() >= h + 4 + len {
                    assert!(text.starts_with("HTTP/1.1 200"), "{}", &text[..h]);
                    break;
                }
            }
        }
        lat.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    println!(
        "POST /v1/embeddings, one short input, keep-alive: p50 {:.2} ms, p99 {:.2} ms over {requests} requests",
        pct(&mut lat, 0.5),
        pct(&mut lat, 0.99)
    );
    server.stop();
}
