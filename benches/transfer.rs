//! Export, import and tree-grep benchmark.
//!
//! `cargo bench --bench transfer -- [--memories 100000] [--dataset locomo10-dev.json]`
//!
//! 1. Builds a store of `--memories` generated memories (labels on a third of them), exports it to a ZIP
//!    archive, imports the archive into an empty store, and reports time, archive size and peak RSS.
//! 2. Times `GET /fs/grep` (through the API handler, no HTTP) over those memories: a rare literal (a full scan),
//!    a common word (stops at the page), a regular expression and a case-sensitive search.
//! 3. With `--dataset`, ingests the LoCoMo conversations as threads, adds labels, a second space, a source and
//!    crystals, round-trips the store through an export and an import, and compares every record.

mod common;
use common::{SplitMix, arg, peak_rss_mib};

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use engram::api::{Api, ApiRequest, ServiceInfo};
use engram::{
    ExportOptions, ImportMode, ImportProgress, Include, KnowledgeStore, NewMemory, NewSource, NewSpace, StoreConfig,
};

const WORDS: &[&str] = &[
    "coffee",
    "meeting",
    "project",
    "garden",
    "travel",
    "budget",
    "report",
    "family",
    "doctor",
    "music",
    "recipe",
    "deadline",
    "python",
    "rust",
    "invoice",
    "hiking",
    "weekend",
    "birthday",
    "office",
    "client",
    "server",
    "design",
    "review",
    "launch",
    "morning",
    "evening",
    "dinner",
    "airport",
    "hotel",
    "train",
    "book",
    "movie",
    "lesson",
    "workout",
    "market",
    "bank",
    "insurance",
    "garage",
    "painting",
    "piano",
];

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n = arg(&args, "--memories", 100_000);
    synthetic(n);
    if let Some(path) = args.iter().position(|a| a == "--dataset").and_then(|i| args.get(i + 1)) {
        locomo_round_trip(Path::new(path));
    }
}

fn synthetic(n: usize) {
    let a_dir = tempfile::tempdir().expect("tempdir");
    let a = Arc::new(KnowledgeStore::open(StoreConfig::new(a_dir.path())).expect("open"));
    let mut rng = SplitMix(7);
    let t = Instant::now();
    let mut i = 0;
    while i < n {
        let batch: Vec<NewMemory> = (i..(i + 5000).min(n))
            .map(|k| {
                let words: Vec<&str> = (0..12).map(|_| WORDS[rng.below(WORDS.len())]).collect();
                let rare = if k % 10_000 == 0 { " zebracorn" } else { "" };
                let labels = (k % 3 == 0).then(|| vec![WORDS[k % 7].to_string()]);
                NewMemory {
                    id: Some(format!("mem-{k:06}")),
                    content: format!(
                        "Note {k}: {}.{rare}\nSecond line about the {} and the {}.",
                        words.join(" "),
                        words[0],
                        words[1]
                    ),
                    labels,
                    ..Default::default()
                }
            })
            .collect();
        i += batch.len();
        a.memories().create_many(batch).expect("ingest");
    }
    println!("store: {n} memories ingested in {:.1} s", t.elapsed().as_secs_f64());
    let archive = a_dir.path().join("bench.zip");
    let t = Instant::now();
    let rep = a
        .transfer()
        .export(&ExportOptions {
            path: Some(archive.clone()),
            compress: true,
            overwrite: true,
            include: Include::default(),
            encrypt: None,
        })
        .expect("export");
    let export_s = t.elapsed().as_secs_f64();
    println!(
        "export: {export_s:.2} s, {} memories, archive {:.1} MiB ({:.0} memories/s)",
        rep.counts.get("memories").copied().unwrap_or(0),
        rep.bytes as f64 / (1 << 20) as f64,
        n as f64 / export_s
    );

    let b_dir = tempfile::tempdir().expect("tempdir");
    let b = Arc::new(KnowledgeStore::open(StoreConfig::new(b_dir.path())).expect("open"));
    let copy = b_dir.path().join("bench.zip");
    std::fs::copy(&archive, &copy).expect("copy");
    let t = Instant::now();
    let imp = b.transfer().import(&copy, ImportMode::Merge, &ImportProgress::default()).expect("import");
    let import_s = t.elapsed().as_secs_f64();
    println!(
        "import: {import_s:.2} s, {} memories inserted ({:.0} memories/s); peak RSS {:.0} MiB",
        imp.counts["memories"].inserted,
        n as f64 / import_s,
        peak_rss_mib()
    );

    let api = Api::new(b.clone(), ServiceInfo::default());
    let cases = [
        ("rare literal (full scan)", "/fs/grep?path=/memories&q=zebracorn&limit=50"),
        ("common word (first page)", "/fs/grep?path=/memories&q=coffee&limit=50"),
        ("regex", "/fs/grep?path=/memories&q=zebra%5Ba-z%5D%2Bn&regex=true&limit=50"),
        ("case-sensitive miss (full scan)", "/fs/grep?path=/memories&q=ZEBRACORN&case_sensitive=true&limit=50"),
        ("label scope", "/fs/grep?path=/memories/by-label/coffee&q=zebracorn&limit=50"),
    ];
    for (what, target) in cases {
        let mut times = Vec::new();
        let mut found = 0;
        for _ in 0..5 {
            let t = Instant::now();
            let r = api.handle(ApiRequest::from_target("GET", target, b""));
            times.push(t.elapsed().as_secs_f64() * 1000.0);
            assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
            let v: serde_json::Value = serde_json::from_slice(&r.body).expect("json");
            found = v["matches"].as_array().map_or(0, Vec::len);
        }
        println!("fs grep {what}: p50 {:.0} ms over {n} memories, {found} matches", median(times));
    }
}

fn strip(v: &mut serde_json::Value) {
    if let Some(o) = v.as_object_mut() {
        o.remove("last_reindexed_at");
        o.remove("reindex_needed");
        for (_, x) in o.iter_mut() {
            strip(x);
        }
    }
}

fn dump(store: &KnowledgeStore, dir: &Path, name: &str) -> BTreeMap<String, Vec<String>> {
    let path = dir.join(name);
    store
        .transfer()
        .export(&ExportOptions {
            path: Some(path.clone()),
            compress: false,
            overwrite: true,
            include: Include::default(),
            encrypt: None,
        })
        .expect("dump");
    let mut out = BTreeMap::new();
    for e in std::fs::read_dir(&path).expect("dir") {
        let p = e.expect("entry").path();
        if p.extension().is_some_and(|x| x == "jsonl") {
            let mut rows: Vec<String> = std::fs::read_to_string(&p)
                .expect("read")
                .lines()
                .map(|l| {
                    let mut v: serde_json::Value = serde_json::from_str(l).expect("json");
                    strip(&mut v);
                    v.to_string()
                })
                .collect();
            rows.sort();
            out.insert(p.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default(), rows);
        }
    }
    out
}

fn locomo_round_trip(dataset: &Path) {
    let a_dir = tempfile::tempdir().expect("tempdir");
    let a = KnowledgeStore::open(StoreConfig::new(a_dir.path())).expect("open");
    let opts = engram::eval::LocomoOptions { threads: true, ..Default::default() };
    engram::eval::locomo(&a, dataset, &opts, false).expect("ingest");
    let work = a.spaces().create(NewSpace { name: "Reading list".into(), ..Default::default() }).expect("space").id;
    for (i, t) in
        ["Finish the Dune series by spring.", "Borrow Middlemarch from Ana.", "Return the library books on Monday."]
            .iter()
            .enumerate()
    {
        a.memories()
            .create(NewMemory {
                id: Some(format!("read-{i}")),
                content: (*t).into(),
                space_id: Some(work.clone()),
                labels: Some(vec!["books".into(), "todo".into()]),
                ..Default::default()
            })
            .expect("memory");
    }
    a.memories()
        .create(NewMemory {
            content: "Caroline and Melanie plan a camping trip in July.".into(),
            labels: Some(vec!["plans".into(), "friends".into()]),
            ..Default::default()
        })
        .expect("memory");
    a.sources()
        .ingest(NewSource {
            bytes: b"# Camping checklist\n\nTent, sleeping bags, stove, and a first-aid kit for the July trip.\n"
                .to_vec(),
            original_name: "camping.md".into(),
            labels: vec!["plans".into()],
            extract_memories: true,
            ..Default::default()
        })
        .expect("source");
    let g = a.graph().recompute().expect("graph");
    let archive = a_dir.path().join("locomo.zip");
    let t = Instant::now();
    a.transfer()
        .export(&ExportOptions {
            path: Some(archive.clone()),
            compress: true,
            overwrite: true,
            include: Include::default(),
            encrypt: None,
        })
        .expect("export");
    let export_ms = t.elapsed().as_secs_f64() * 1000.0;
    let before = dump(&a, a_dir.path(), "dump-a");

    let b_dir = tempfile::tempdir().expect("tempdir");
    let b = KnowledgeStore::open(StoreConfig::new(b_dir.path())).expect("open");
    let copy = b_dir.path().join("locomo.zip");
    std::fs::copy(&archive, &copy).expect("copy");
    let t = Instant::now();
    b.transfer().import(&copy, ImportMode::Merge, &ImportProgress::default()).expect("import");
    let import_ms = t.elapsed().as_secs_f64() * 1000.0;
    let after = dump(&b, b_dir.path(), "dump-b");
    let records: usize = before.values().map(Vec::len).sum();
    let mut differences = 0;
    for (kind, rows) in &before {
        let other = after.get(kind).cloned().unwrap_or_default();
        let d = rows.iter().filter(|r| !other.contains(r)).count() + other.iter().filter(|r| !rows.contains(r)).count();
        if d > 0 {
            println!("  {kind}: {d} records differ");
        }
        differences += d;
    }
    let per_kind: Vec<String> = before
        .iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| format!("{} {}", k.trim_end_matches(".jsonl"), v.len()))
        .collect();
    println!(
        "LoCoMo round trip: {records} records ({}), {} crystals; export {export_ms:.0} ms, import {import_ms:.0} ms; {differences} differences",
        per_kind.join(", "),
        g.crystals
    );
}
