//! Synthetic-store benchmark: ingest throughput (batch and single-call), hybrid and vector search latency
//! (p50/p99/mean, and the process's CPU time a query, every thread, which varies less between runs), HNSW
//! recall@10 against exact search, reopen time and peak RSS, on N generated memories (default 100,000) embedded
//! by the built-in static model (`--embedder hashing`: the hashing embedder).
//!
//! `cargo bench --bench synthetic -- --n 100000 --queries 1000 [--sequence 20]`
//!
//! `--sequence L` gives every memory a position: memory `i` is message `i % L` of thread `t<i / L>`, so search
//! takes the context-expanded BM25 and neighbour-expansion path (`docs/retrieval.md`); 0 (default) stores plain
//! memories.
//!
//! `--vector-context G` sets [`StoreConfig::vector_context`] (the context-blended cosine, off by default with the
//! built-in embedder) to measure its cost.
//!
//! `--store DIR` keeps the store in DIR instead of a temporary directory. When DIR already holds a store (from an
//! earlier run with the same `--n` and `--sequence`), ingest is skipped and the run measures search and reopen on
//! it, the searches once the open's background work is done (`Admin::wait_for_indexes`), as after an
//! ingest; the directory is kept. `--more N` with such a store first writes N more memories into it, in the same
//! batches, and reports that ingest rate (the rate at the store's size). `--modes hybrid,vector,lexical` runs
//! only the named searches (for a profile of one path); `--slowest N` prints each mode's N slowest queries.
//! `--cache-mib M` sets the store file's page cache ([`StoreConfig::cache_size_bytes`], default 64 MiB; the
//! daemon's `--cache-size`).
//! `--sync` puts the store in a sync group before the ingest (every write logs its changes; docs/sync.md) and
//! then applies the whole log to an empty second store, printing that rate (a first sync).
//! `--encrypted` keeps the store encrypted at rest (a key file beside the store directory; docs/security.md;
//! `--cipher xaes-256-gcm|xchacha20-poly1305` for a new store, default the fastest on this CPU), for the
//! side-by-side figures of encryption's cost.
//!
//! Texts are generated sentences over a Zipf-distributed vocabulary (names, places, activities and ~20,000
//! generated content words), not uniform random vectors, so vectors have the structure of real text.

use std::time::Instant;

use engram::embed::{Embedder, HashEmbedder, InputType};
use engram::index::vector::{SpaceVectors, VectorParams};
use engram::{KnowledgeStore, MemoryFilter, NewMemory, SearchMode, SearchQuery, StoreConfig};

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    /// Zipf-like index in 0..n (exponent about 1).
    fn zipf(&mut self, n: usize) -> usize {
        let u = (self.next() % 1_000_000) as f64 / 1_000_000.0;
        (((n as f64).powf(u)) as usize).saturating_sub(1).min(n - 1)
    }
}

const SYL: [&str; 24] = [
    "ka", "lo", "mi", "ren", "sa", "to", "vi", "nor", "ba", "del", "fi", "gar", "hu", "jo", "ke", "lum", "ma", "ne",
    "pol", "qui", "ros", "sul", "tem", "ul",
];
const NAMES: [&str; 20] = [
    "Caroline", "Melanie", "John", "Maria", "Deborah", "Jolene", "Evan", "Sam", "Calvin", "Dave", "Gina", "Jon",
    "Audrey", "Andrew", "James", "Tim", "Nate", "Joanna", "Maya", "Omar",
];
const VERBS: [&str; 16] = [
    "visited",
    "painted",
    "talked about",
    "bought",
    "cooked",
    "planned",
    "wrote about",
    "fixed",
    "learned",
    "shared",
    "joined",
    "started",
    "finished",
    "lost",
    "found",
    "celebrated",
];

fn vocabulary(rng: &mut Rng, n: usize) -> Vec<String> {
    (0..n).map(|_| (0..2 + rng.below(2)).map(|_| SYL[rng.below(SYL.len())]).collect::<String>()).collect()
}

fn sentence(rng: &mut Rng, vocab: &[String]) -> String {
    let mut s = format!("{} {} the", NAMES[rng.below(NAMES.len())], VERBS[rng.below(VERBS.len())]);
    for _ in 0..4 + rng.below(10) {
        s.push(' ');
        s.push_str(&vocab[rng.zipf(vocab.len())]);
    }
    s.push_str(&format!(" in {} {}", engram::model::MONTH_NAMES[rng.below(12)], 2019 + rng.below(6)));
    s
}

fn percentile(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

/// CPU seconds (user + system) this process has used so far, from `/proc/self/stat` (clock ticks of 10 ms);
/// 0 where there is no procfs.
fn cpu_s() -> f64 {
    std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|s| {
            // Fields after the command name (which may hold spaces): utime and stime are the 12th and 13th.
            let rest = &s[s.rfind(')')? + 2..];
            let f: Vec<&str> = rest.split_whitespace().collect();
            Some((f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?) / 100.0)
        })
        .unwrap_or(0.0)
}

/// CPU time of the whole process (every thread: the search pool's too), in milliseconds, from
/// `clock_gettime(CLOCK_PROCESS_CPUTIME_ID)` (nanosecond resolution, unlike `/proc/self/stat`'s 10 ms ticks).
/// It counts no time the machine's hypervisor or other processes took, so it is quieter across runs than latency.
#[cfg(unix)]
fn process_cpu_ms() -> f64 {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `t` is a valid, writable timespec; the call only writes it.
    if unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut t) } != 0 {
        return 0.0;
    }
    t.tv_sec as f64 * 1000.0 + t.tv_nsec as f64 / 1e6
}

#[cfg(not(unix))]
fn process_cpu_ms() -> f64 {
    0.0
}

fn peak_rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("VmHWM:")).and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)?.parse().ok()).unwrap_or(default)
}

fn main() -> engram::Result<()> {
    // `ENGRAM_LOG=engram::store::open=debug` shows where an open spends its time.
    if let Ok(filter) = tracing_subscriber::EnvFilter::try_from_env("ENGRAM_LOG") {
        tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).init();
    }
    let n = arg("--n", 100_000);
    let queries = arg("--queries", 1000);
    let batch = arg("--batch", 5000);
    let sequence = arg("--sequence", 0);
    let cache_mib = arg("--cache-mib", 64);
    let args: Vec<String> = std::env::args().collect();
    let kept = args.iter().position(|a| a == "--store").and_then(|i| args.get(i + 1)).map(std::path::PathBuf::from);
    let dir = kept.clone().unwrap_or_else(|| std::env::temp_dir().join(format!("engram-bench-{}", std::process::id())));
    let reuse = kept.is_some() && dir.join("engram.redb").exists();
    if kept.is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let vocab = vocabulary(&mut rng, 20_000);
    // The texts are generated batch by batch (and again for the recall pass) from a copy of the generator, not
    // held: at 1M they are 162 MiB of the bench's own, which the store's footprint figures should not carry. The
    // texts the queries are cut from are chosen first and kept.
    let text_seed = rng.0;
    let texts_from = |seed: u64| {
        let mut r = Rng(seed);
        let vocab = &vocab;
        (0..n).map(move |_| sentence(&mut r, vocab))
    };
    let query_sources: Vec<usize> = (0..queries).map(|_| rng.below(n)).collect();
    let mut sources: std::collections::HashMap<usize, String> =
        query_sources.iter().map(|&i| (i, String::new())).collect();
    // The bench's own data (vocabulary and query sources), so that the store's footprint is told apart.
    let own_kib = proc_status_kib("VmRSS").unwrap_or(0);
    let defaults = VectorParams::default();
    let params = VectorParams {
        m: arg("--m", defaults.m),
        ef_construction: arg("--ef-construction", defaults.ef_construction),
        ef_search: arg("--ef-search", defaults.ef_search),
        ..defaults
    };
    // `--embedder hashing`: the character-trigram hashing embedder instead of the built-in static model.
    let embedder: std::sync::Arc<dyn Embedder> = match args.iter().position(|a| a == "--embedder") {
        Some(i) if args.get(i + 1).map(String::as_str) == Some("hashing") => {
            std::sync::Arc::new(HashEmbedder::default())
        }
        _ => engram::embed::builtin(),
    };
    println!(
        "synthetic store: {n} memories{}, embedder {}, HNSW M={} ef_construction={} ef_search={}",
        if sequence > 0 { format!(" in sequences of {sequence}") } else { String::new() },
        embedder.name(),
        params.m,
        params.ef_construction,
        params.ef_search
    );

    // `--vector-context G` sets the context-blended cosine's weight (the built-in embedder's default is 0).
    let vector_context = args.iter().position(|a| a == "--vector-context").and_then(|i| args.get(i + 1)?.parse().ok());
    // `--encrypted`: the store encrypted at rest under a key file kept beside the store directory; `--cipher
    // NAME` chooses the block cipher of a new store (default: the fastest on this CPU).
    let cipher = args.iter().position(|a| a == "--cipher").and_then(|i| args.get(i + 1)?.parse().ok());
    let encryption = args.iter().any(|a| a == "--encrypted").then(|| {
        let key = dir.with_extension("key");
        if !key.exists() {
            engram::storage::crypt::write_key_file(&key).expect("write the key file");
        }
        let enc = engram::storage::crypt::Encryption::key_file(key);
        match cipher {
            Some(c) => enc.with_cipher(c),
            None => enc,
        }
    });
    let config = || {
        StoreConfig {
            vector: params,
            vector_context,
            encryption: encryption.clone(),
            cache_size_bytes: cache_mib.saturating_mul(1 << 20),
            ..StoreConfig::new(&dir)
        }
        .embedder(embedder.clone())
    };
    let store = KnowledgeStore::open(config())?;
    if let Some(cipher) = &store.admin().encryption().cipher {
        println!("encrypted at rest ({cipher} blocks, a key file)");
    }
    // `--sync`: the store is in a sync group, so every write also logs its changes (docs/sync.md); after the
    // ingest, an empty second device applies the whole log and the rate is printed.
    let sync = args.iter().any(|a| a == "--sync");
    if sync {
        store.sync().enable()?;
        println!("in a sync group: every write logs its replicated changes");
    }
    let t0 = Instant::now();
    let mut all_texts = texts_from(text_seed).enumerate();
    for b in 0.. {
        let chunk: Vec<String> = all_texts
            .by_ref()
            .take(batch)
            .map(|(i, t)| {
                if let Some(kept) = sources.get_mut(&i) {
                    kept.clone_from(&t);
                }
                t
            })
            .collect();
        if chunk.is_empty() {
            break;
        }
        if reuse {
            continue;
        }
        let items = chunk
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let k = b * batch + i;
                let (thread, range) = if sequence > 0 {
                    let at = (k % sequence) as f64;
                    (
                        Some(format!("t{}", k / sequence)),
                        Some([("start_index".to_string(), at), ("end_index".to_string(), at)].into()),
                    )
                } else {
                    (None, None)
                };
                NewMemory {
                    id: Some(format!("m{k}")),
                    content: t.clone(),
                    source_thread_id: thread,
                    source_range: range,
                    ..Default::default()
                }
            })
            .collect();
        store.memories().create_many(items)?;
    }
    let ingest_s = t0.elapsed().as_secs_f64();
    // `--more N` with a reused store: N more memories in the same batches, the ingest rate at that size.
    let more = if reuse { arg("--more", 0) } else { 0 };
    if more > 0 {
        let t0 = Instant::now();
        let extra: Vec<String> = (0..more).map(|_| sentence(&mut rng, &vocab)).collect();
        for (b, chunk) in extra.chunks(batch).enumerate() {
            let items = chunk
                .iter()
                .enumerate()
                .map(|(i, t)| NewMemory {
                    id: Some(format!("more{}-{}", std::process::id(), b * batch + i)),
                    content: t.clone(),
                    ..Default::default()
                })
                .collect();
            store.memories().create_many(items)?;
        }
        let s = t0.elapsed().as_secs_f64();
        println!("ingest of {more} more into {n}: {:.0} memories/s ({s:.1} s)", more as f64 / s);
    }
    if reuse {
        println!("ingest skipped: reusing the store in {}", dir.display());
    } else {
        println!(
            "ingest (batches of {batch}, one durable commit each): {:.0} memories/s ({ingest_s:.1} s)",
            n as f64 / ingest_s
        );
    }

    let singles = 200;
    let t0 = Instant::now();
    for i in 0..singles {
        let content = sentence(&mut rng, &vocab);
        if !reuse {
            store.memories().create(NewMemory { content, id: Some(format!("single{i}")), ..Default::default() })?;
        }
    }
    if !reuse {
        println!(
            "single create_memory calls (one fsync each): {:.0} memories/s",
            singles as f64 / t0.elapsed().as_secs_f64()
        );
    }
    let t0 = Instant::now();
    let ready = store.admin().wait_for_indexes(std::time::Duration::from_secs(1800));
    println!(
        "background HNSW graph complete {:.1} s after the last write (ready: {ready})",
        t0.elapsed().as_secs_f64()
    );
    footprint("load (ingest and graph build)", own_kib, n);
    let vector_heap: usize = store.admin().vector_index_stats().iter().map(|s| s.heap_bytes).sum();
    println!("vector index heap (vectors, HNSW links, maps): {:.0} MiB", vector_heap as f64 / 1048576.0);
    let mem = store.admin().index_memory();
    let mib = |b: usize| b as f64 / 1048576.0;
    let per = |b: usize| b as f64 / n.max(1) as f64;
    println!(
        "index memory (estimated), MiB and bytes a memory: vectors {:.0} ({:.0}), HNSW links {:.0} ({:.0}), \
         catalog {:.0} ({:.0}), BM25 postings {:.0} ({:.0}), context {:.0} ({:.0}), PageRank {:.0} ({:.0}); \
         total {:.0} ({:.0})",
        mib(mem.vectors),
        per(mem.vectors),
        mib(mem.graph),
        per(mem.graph),
        mib(mem.catalog),
        per(mem.catalog),
        mib(mem.postings),
        per(mem.postings),
        mib(mem.context),
        per(mem.context),
        mib(mem.ranks),
        per(mem.ranks),
        mib(mem.total()),
        per(mem.total())
    );

    // After the source's indexes are built, so that its background work does not share the two cores.
    if sync && !reuse {
        let peer_dir = dir.with_extension("peer");
        let _ = std::fs::remove_dir_all(&peer_dir);
        let peer = KnowledgeStore::open(
            StoreConfig { vector: params, ..StoreConfig::new(&peer_dir) }.embedder(embedder.clone()),
        )?;
        // Through a real folder: the source writes its log as sealed segments (the peer's head says it has
        // read none, so nothing is compacted), the peer applies them all in one pass, then the source's next
        // pass compacts what the peer has read.
        let folder = dir.with_extension("folder");
        let _ = std::fs::remove_dir_all(&folder);
        std::fs::create_dir_all(&folder)?;
        let code = store.sync().init_folder(&folder)?;
        peer.sync().join_folder(&folder, &code)?;
        // The peer's first pass writes its head (it has read nothing yet), so the source keeps its segments.
        peer.sync().sync_folder()?;
        let t_write = Instant::now();
        let written = store.sync().sync_folder()?;
        let segment_bytes = dir_bytes(&folder);
        println!(
            "segments written: {} ({} changes) in {:.1} s, {:.0} bytes in the folder, {:.0} bytes per memory",
            written.written_segments,
            written.written_changes,
            t_write.elapsed().as_secs_f64(),
            segment_bytes as f64,
            segment_bytes as f64 / n as f64
        );
        // The process's peak resident set during the first sync alone (Linux: writing 5 to clear_refs resets
        // VmHWM to the current RSS; elsewhere the figures are not printed).
        let before = proc_status_kib("VmRSS");
        let _ = std::fs::write("/proc/self/clear_refs", "5");
        let t0 = Instant::now();
        let r = peer.sync().sync_folder()?;
        let s = t0.elapsed().as_secs_f64();
        println!(
            "first sync into an empty device through the folder: {} segments, {} changes applied, {:.0} memories/s ({s:.1} s)",
            r.applied_segments,
            r.applied.applied + r.applied.stale,
            n as f64 / s
        );
        if let (Some(b), Some(peak), Some(end)) = (before, proc_status_kib("VmHWM"), proc_status_kib("VmRSS")) {
            // What the peer holds once synced (its index and caches) grows with the store; what the sync itself
            // holds on top is peak minus end.
            println!(
                "first sync memory: resident {:.0} MiB before (both stores open), peak {:.0} MiB during (+{:.0} MiB), \
                 {:.0} MiB after: the sync's own peak {:.0} MiB above what the synced store then holds",
                b as f64 / 1024.0,
                peak as f64 / 1024.0,
                peak.saturating_sub(b) as f64 / 1024.0,
                end as f64 / 1024.0,
                peak.saturating_sub(end) as f64 / 1024.0
            );
        }
        let t_compact = Instant::now();
        store.sync().sync_folder()?;
        let compacted = dir_bytes(&folder);
        println!(
            "after compaction ({:.1} s): snapshot {} of the source, {:.0} bytes in the folder, {:.0} bytes per memory",
            t_compact.elapsed().as_secs_f64(),
            store.sync().status()?.snapshot,
            compacted as f64,
            compacted as f64 / n as f64
        );
        let _ = std::fs::remove_dir_all(&folder);
        drop(peer);
        let _ = std::fs::remove_dir_all(&peer_dir);
    }

    let qtexts: Vec<String> = (0..queries)
        .map(|q| {
            let words: Vec<&str> = sources[&query_sources[q]].split(' ').collect();
            let start = rng.below(words.len().saturating_sub(4).max(1));
            words[start..(start + 4).min(words.len())].join(" ")
        })
        .collect();
    // `--modes lexical,hybrid` runs only those (for profiling one path).
    // `--slowest N` prints the N slowest queries of each mode with their latency (what the p99 is made of).
    let slowest = arg("--slowest", 0);
    let modes = args.iter().position(|a| a == "--modes").and_then(|i| args.get(i + 1)).cloned();
    for (name, mode) in
        [("hybrid", SearchMode::Hybrid), ("vector", SearchMode::Vector), ("lexical", SearchMode::Lexical)]
            .into_iter()
            .filter(|(name, _)| modes.as_ref().is_none_or(|m| m.split(',').any(|x| x == *name)))
    {
        let mut lat = Vec::with_capacity(queries);
        let cpu0 = process_cpu_ms();
        for q in &qtexts {
            let t = Instant::now();
            let r = store.search().run(&SearchQuery {
                query: q.clone(),
                space_id: "default".into(),
                limit: 10,
                filter: MemoryFilter::default(),
                mode,
                fusion: None,
                query_embedding: None,
                options: Default::default(),
            })?;
            lat.push(t.elapsed().as_secs_f64() * 1000.0);
            assert!(!r.hits.is_empty());
        }
        let cpu_per_query = (process_cpu_ms() - cpu0) / queries.max(1) as f64;
        let mean = lat.iter().sum::<f64>() / lat.len().max(1) as f64;
        if slowest > 0 {
            let mut by: Vec<(f64, &String)> = lat.iter().copied().zip(&qtexts).collect();
            by.sort_by(|a, b| b.0.total_cmp(&a.0));
            for (ms, q) in by.iter().take(slowest) {
                println!("  slow {name}: {ms:.2} ms  {q:?}");
            }
        }
        println!(
            "{name} search, k=10, {queries} queries: p50 {:.2} ms, p99 {:.2} ms, mean {mean:.3} ms, CPU {cpu_per_query:.3} ms a query",
            percentile(&mut lat, 0.5),
            percentile(&mut lat, 0.99)
        );
    }

    if !std::env::args().any(|a| a == "--no-recall") {
        // HNSW recall@10 against exact search, same parameters and vectors as the store's index.
        let emb = embedder.clone();
        let texts: Vec<String> = texts_from(text_seed).collect();
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let vecs = emb.embed(&refs, InputType::Document)?;
        let mut idx = SpaceVectors::new(emb.dim(), params);
        let t0 = Instant::now();
        idx.insert_batch(&vecs.into_iter().enumerate().map(|(i, v)| (i as u64, v)).collect::<Vec<_>>());
        idx.build_now();
        assert!(idx.has_graph() && idx.pending() == 0);
        println!("HNSW build of {n} vectors (parallel insert, 2 cores): {:.1} s", t0.elapsed().as_secs_f64());
        let qrefs: Vec<&str> = qtexts.iter().map(String::as_str).collect();
        let qvecs = emb.embed(&qrefs, InputType::Query)?;
        let all = |_: u64| true;
        let mut efs = vec![params.ef_search];
        if std::env::args().any(|a| a == "--ef-sweep") {
            efs.extend([32, 64, 128, 192, 256].into_iter().filter(|e| *e != params.ef_search));
        }
        for ef in efs {
            idx.set_ef_search(ef);
            let (mut found, mut total) = (0usize, 0usize);
            let mut lat = Vec::new();
            for q in &qvecs {
                let t = Instant::now();
                let approx = idx.search(q, 10, &all, None);
                lat.push(t.elapsed().as_secs_f64() * 1000.0);
                let exact = idx.exact(q, 10, &all);
                // Ties at the 10th score make several exact answers correct: count a hit by score, not by id.
                let cutoff = exact.last().map_or(f32::MAX, |h| h.score) - 1e-6;
                found += approx.iter().filter(|h| h.score >= cutoff).count().min(exact.len());
                total += exact.len();
            }
            println!(
                "HNSW recall@10 vs exact: {:.4} (ef_search {}); graph search p50 {:.2} ms, p99 {:.2} ms",
                found as f64 / total as f64,
                ef,
                percentile(&mut lat.clone(), 0.5),
                percentile(&mut lat, 0.99)
            );
        }
        drop(idx);
    }
    footprint("searches", own_kib, n);
    drop(store);
    // The reopen's own peak: VmHWM restarts from the resident set left after the close.
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    let closed_kib = proc_status_kib("VmRSS").unwrap_or(0);
    let (t0, cpu0) = (Instant::now(), cpu_s());
    let store = KnowledgeStore::open(config())?;
    let open_s = t0.elapsed().as_secs_f64();
    let open_cpu_s = cpu_s() - cpu0;
    let attached = store.admin().vector_index_stats().iter().all(|s| s.graph_points > 0 || s.vectors < 4096);
    let mut lat = Vec::new();
    for q in qtexts.iter().take(200) {
        let t = Instant::now();
        let query = SearchQuery {
            query: q.clone(),
            space_id: "default".into(),
            limit: 10,
            filter: MemoryFilter::default(),
            mode: SearchMode::Hybrid,
            fusion: None,
            query_embedding: None,
            options: Default::default(),
        };
        store.search().run(&query)?;
        lat.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    println!(
        "reopen: serving after {open_s:.3} s, {open_cpu_s:.3} s of CPU ({} memories, saved graph attached: {}); hybrid p50 {:.2} ms, p99 {:.2} ms",
        store.admin().health()?.memories,
        attached,
        percentile(&mut lat.clone(), 0.5),
        percentile(&mut lat, 0.99)
    );
    store.admin().wait_for_indexes(std::time::Duration::from_secs(600));
    println!("after the close: resident {:.0} MiB", closed_kib as f64 / 1024.0);
    footprint("reopen and 200 searches", own_kib, n);
    drop(store);
    let size = std::fs::metadata(dir.join("engram.redb")).map_or(0, |m| m.len());
    println!("store file: {:.0} MiB; peak RSS: {:.0} MiB", size as f64 / 1048576.0, peak_rss_mib());
    if kept.is_none() {
        let _ = std::fs::remove_dir_all(&dir);
        let _ = std::fs::remove_file(dir.with_extension("key"));
    }
    Ok(())
}

/// Prints the peak resident set (`VmHWM`) and the resident set now (`VmRSS`) after a phase, whole and per memory
/// above the bench's own data (`own_kib`: its vocabulary and the texts of its queries); nothing off Linux.
fn footprint(phase: &str, own_kib: u64, n: usize) {
    // glibc: the heap in use against what malloc holds from the system (the difference is free memory it keeps).
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallinfo2 only reads malloc's counters.
        let m = unsafe { libc::mallinfo2() };
        println!(
            "malloc after {phase}: {:.0} MiB in use, {:.0} MiB held from the system",
            (m.uordblks + m.hblkhd) as f64 / 1048576.0,
            (m.arena + m.hblkhd) as f64 / 1048576.0
        );
    }
    if let (Some(peak), Some(now)) = (proc_status_kib("VmHWM"), proc_status_kib("VmRSS")) {
        let per = |kib: u64| kib.saturating_sub(own_kib) as f64 * 1024.0 / n.max(1) as f64;
        println!(
            "memory after {phase}: peak RSS {:.0} MiB, resident {:.0} MiB (the bench's own data {:.0} MiB); \
             per memory above it: peak {:.0} bytes, resident {:.0} bytes",
            peak as f64 / 1024.0,
            now as f64 / 1024.0,
            own_kib as f64 / 1024.0,
            per(peak),
            per(now)
        );
    }
}

/// The bytes of the files in `dir` and its direct subdirectories.
fn dir_bytes(dir: &std::path::Path) -> u64 {
    let mut total = 0;
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let Ok(m) = e.metadata() else { continue };
        if m.is_dir() {
            total += std::fs::read_dir(e.path())
                .into_iter()
                .flatten()
                .flatten()
                .filter_map(|f| f.metadata().ok())
                .map(|m| m.len())
                .sum::<u64>();
        } else {
            total += m.len();
        }
    }
    total
}

/// A `/proc/self/status` field in KiB (`VmRSS`, `VmHWM`); None off Linux.
fn proc_status_kib(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(field) && l[field.len()..].starts_with(':'))?;
    line.split_whitespace().nth(1)?.parse().ok()
}
