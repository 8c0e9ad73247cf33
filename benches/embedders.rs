//! Embedder throughput on one core: the built-in static model and the hashing embedder, one sentence per call
//! (so no batch runs in parallel), median of three runs. MiniLM's figure on one core comes from the `embedding`
//! bench under `taskset -c 0` (feature `fastembed`).
//!
//! `cargo bench --bench embedders -- [--n 20000] [--dataset locomo.json]`
//!
//! Sentences are LoCoMo turns when `--dataset` is given, otherwise generated sentences of about 20 words.

use std::sync::Arc;
use std::time::Instant;

use engram::embed::{Embedder, HashEmbedder, InputType};

mod common;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n = common::arg(&args, "--n", 20_000);
    let dataset = args.iter().position(|a| a == "--dataset").and_then(|i| args.get(i + 1)).map(String::as_str);
    let texts = common::sentences(n, dataset);
    let words: usize = texts.iter().map(|s| s.split_whitespace().count()).sum();
    println!("{} sentences of {:.1} words on average", texts.len(), words as f64 / texts.len().max(1) as f64);
    let t = Instant::now();
    let builtin = engram::embed::builtin();
    println!("static model parsed in {:.1} ms", t.elapsed().as_secs_f64() * 1e3);
    let embedders: [(&str, Arc<dyn Embedder>); 2] =
        [("static", builtin), ("hashing", Arc::new(HashEmbedder::default()))];
    for (label, e) in embedders {
        let mut rates = Vec::new();
        for _ in 0..3 {
            let t = Instant::now();
            for s in &texts {
                std::hint::black_box(e.embed(&[s.as_str()], InputType::Document).expect("embed"));
            }
            rates.push(texts.len() as f64 / t.elapsed().as_secs_f64());
        }
        rates.sort_by(f64::total_cmp);
        println!(
            "{label} ({}, {} dims): median {:.0} sentences/s on one core (runs {:?})",
            e.name(),
            e.dim(),
            rates[1],
            rates.iter().map(|r| r.round()).collect::<Vec<_>>()
        );
    }
}
