//! MCP overhead: the same searches through `POST /memories/search` (REST) and through the `memory_search` tool
//! over MCP Streamable HTTP (`POST /mcp`, stateless JSON), interleaved on two keep-alive connections to a real
//! daemon over a store of `--memories` generated memories. Reports p50/p99 of each and the p50 difference
//! (what MCP adds: JSON-RPC framing, rmcp's dispatch, the tool's reshaping), plus `tools/list`.
//!
//! `cargo bench --features server --bench mcp -- [--memories 10000] [--queries 2000]`

mod common;
use common::{Conn, SplitMix, arg, pct};

use std::sync::Arc;
use std::time::{Duration, Instant};

use engram::api::ServiceInfo;
use engram::server::{ServerConfig, start};
use engram::{KnowledgeStore, NewMemory, StoreConfig};

/// The daemon's allocator, as `engram serve` has it (src/bin/engram/main.rs): mimalloc with feature
/// `mimalloc`, else the system's malloc with its arenas capped ([`engram::server::cap_malloc_arenas`]).
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const KEY: &str = "mcp-bench-key";
const WORDS: &[&str] = &[
    "coffee", "meeting", "project", "garden", "travel", "budget", "report", "family", "doctor", "music", "recipe",
    "deadline", "python", "rust", "invoice", "hiking", "weekend", "birthday", "office", "client", "server", "design",
    "review", "launch", "morning", "evening", "dinner", "airport", "hotel", "train", "book", "movie",
];
const MCP_HEADERS: &str = "Accept: application/json, text/event-stream\r\nAPP: bench\r\n";

fn main() {
    engram::server::cap_malloc_arenas();
    let args: Vec<String> = std::env::args().collect();
    let n = arg(&args, "--memories", 10_000);
    let queries = arg(&args, "--queries", 2_000);
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Arc::new(KnowledgeStore::open(StoreConfig::new(dir.path())).expect("open"));
    let mut rng = SplitMix(7);
    let mut i = 0;
    while i < n {
        let batch: Vec<NewMemory> = (i..(i + 5000).min(n))
            .map(|k| {
                let words: Vec<&str> = (0..12).map(|_| WORDS[rng.below(WORDS.len())]).collect();
                NewMemory { content: format!("Note {k}: {}.", words.join(" ")), ..Default::default() }
            })
            .collect();
        i += batch.len();
        store.memories().create_many(batch).expect("ingest");
    }
    store.admin().wait_for_indexes(Duration::from_secs(600));
    let mut cfg = ServerConfig::new(dir.path());
    cfg.addr = "127.0.0.1:0".parse().expect("addr");
    cfg.api_key = Some(KEY.into());
    let srv = start(cfg, store.clone(), ServiceInfo::default()).expect("server");
    let mut rest = Conn::new(srv.addr, KEY);
    let mut mcp = Conn::new(srv.addr, KEY);
    let (mut t_rest, mut t_mcp, mut t_list) = (Vec::new(), Vec::new(), Vec::new());
    let mut failures = 0;
    for q in 0..queries + 100 {
        let query = format!("{} {}", WORDS[rng.below(WORDS.len())], WORDS[rng.below(WORDS.len())]);
        let rest_body = format!(r#"{{"query":"{query}","limit":10}}"#);
        let mcp_body = format!(
            r#"{{"jsonrpc":"2.0","id":{q},"method":"tools/call","params":{{"name":"memory_search","arguments":{{"query":"{query}","limit":10}}}}}}"#
        );
        // Alternate which goes first, so that neither gains from a warm cache.
        let order = if q % 2 == 0 { [true, false] } else { [false, true] };
        for is_mcp in order {
            let t = Instant::now();
            let r = if is_mcp {
                mcp.send_with("POST", "/mcp", MCP_HEADERS, &mcp_body)
            } else {
                rest.send_with("POST", "/memories/search", "", &rest_body)
            };
            let ms = t.elapsed().as_secs_f64() * 1000.0;
            let ok = r.as_ref().is_some_and(|(s, b)| *s == 200 && !b.windows(11).any(|w| w == b"\"isError\":t"));
            failures += usize::from(!ok);
            if q >= 100 {
                if is_mcp { t_mcp.push(ms) } else { t_rest.push(ms) }
            }
        }
        if q % 20 == 0 {
            let t = Instant::now();
            let r = mcp.send_with("POST", "/mcp", MCP_HEADERS, r#"{"jsonrpc":"2.0","id":0,"method":"tools/list"}"#);
            t_list.push(t.elapsed().as_secs_f64() * 1000.0);
            failures += usize::from(r.is_none_or(|(s, _)| s != 200));
        }
    }
    let (r50, r99) = (pct(&mut t_rest, 0.5), pct(&mut t_rest, 0.99));
    let (m50, m99) = (pct(&mut t_mcp, 0.5), pct(&mut t_mcp, 0.99));
    println!("store: {n} memories; {queries} searches each way after 100 warm-up pairs; failures {failures}");
    println!("REST POST /memories/search   p50 {r50:.3} ms  p99 {r99:.3} ms");
    println!("MCP  tools/call memory_search p50 {m50:.3} ms  p99 {m99:.3} ms");
    println!("MCP adds at p50: {:.3} ms", m50 - r50);
    println!("MCP tools/list ({} calls)     p50 {:.3} ms", t_list.len(), pct(&mut t_list, 0.5));
    srv.stop();
}
