//! Thread benchmark: creating a thread of 20 messages, extraction included (knowledge units, entities, the
//! memories' vectors with the built-in embedder, one fsync per transaction), p50/p99 over N threads; then
//! appending 5 messages to each.
//!
//! `cargo bench --bench threads -- [--threads 300] [--messages 20]`

use std::time::Instant;

use engram::{AppendMessages, KnowledgeStore, NewMessage, NewThread, StoreConfig};

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).and_then(|v| v.parse().ok()).unwrap_or(default)
}

const LINES: [&str; 10] = [
    "Hey! How was your weekend?",
    "Great, I went hiking near Denver with my sister on Saturday.",
    "That sounds amazing. Did you see the new exhibit at the museum?",
    "Not yet, I'm planning to go next week with Jon.",
    "I decided to switch our billing service to PostgreSQL last month.",
    "Nice. I prefer Redis for the cache, it was 3 times faster in our tests.",
    "Thanks!",
    "By the way, Maria adopted a puppy named Coco two weeks ago.",
    "I learned that the trick is to batch the writes in one transaction.",
    "Let's meet on Friday at 5 pm to review the plan.",
];

fn pct(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

fn main() {
    let (n, m) = (arg("--threads", 300), arg("--messages", 20));
    let dir = tempfile::tempdir().expect("tempdir");
    let store = KnowledgeStore::open(StoreConfig::new(dir.path())).expect("open");
    let msgs = |t: usize, start: usize, count: usize| -> Vec<NewMessage> {
        (start..start + count)
            .map(|i| NewMessage {
                role: if i % 2 == 0 { "user".into() } else { "assistant".into() },
                content: format!("{} (thread {t}, message {i})", LINES[(i + t) % LINES.len()]),
                timestamp: Some(format!("2024-05-{:02}T10:{:02}:00Z", 1 + t % 28, i % 60)),
                metadata: None,
            })
            .collect()
    };
    let mut create = Vec::with_capacity(n);
    let mut extracted = 0;
    for t in 0..n {
        let messages = msgs(t, 0, m);
        let t0 = Instant::now();
        let c = store
            .threads()
            .create(NewThread {
                thread_id: Some(format!("bench-{t}")),
                messages,
                deduplicate: true,
                ..Default::default()
            })
            .expect("create");
        create.push(t0.elapsed().as_secs_f64() * 1000.0);
        extracted += c.extraction.memories.len();
    }
    let mut append = Vec::with_capacity(n);
    for t in 0..n {
        let messages = msgs(t, m, 5);
        let t0 = Instant::now();
        store
            .threads()
            .append(&format!("bench-{t}"), None, AppendMessages { messages, ..Default::default() })
            .expect("append");
        append.push(t0.elapsed().as_secs_f64() * 1000.0);
    }
    println!(
        "create a thread of {m} messages with extraction: p50 {:.2} ms, p99 {:.2} ms over {n} threads ({:.1} memories each)",
        pct(&mut create, 0.5),
        pct(&mut create, 0.99),
        extracted as f64 / n as f64
    );
    println!(
        "append 5 messages with extraction: p50 {:.2} ms, p99 {:.2} ms",
        pct(&mut append, 0.5),
        pct(&mut append, 0.99)
    );
}
