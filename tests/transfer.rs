//! Data export and import on real redb files: a record-by-record round trip of a store with memories, threads,
//! labels, a label merge, spaces, relations, working memory, a source and crystals; merge, skip and overwrite on
//! conflicting records; hostile archives (zip-slip, symbolic link, ZIP bomb, truncated, tampered) refused with the
//! store unchanged; the HTTP job with polling and 409.

mod backend;
#[cfg(feature = "server")]
mod common;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use engram::{
    ErrorKind, ExportOptions, ImportMode, ImportProgress, Include, KnowledgeStore, Metadata, NewMemory, NewMessage,
    NewSource, NewSpace, NewThread, RelationInput, StoreConfig,
};

const PEOPLE: [&str; 8] = [
    "Alice Martin and Bob Stone flew to Paris for the conference.",
    "Bob Stone told Alice Martin that Paris was rainy.",
    "Alice Martin booked a hotel in Paris near Bob Stone's office.",
    "Alice Martin and Bob Stone visited the Louvre in Paris.",
    "Carol Nguyen and Dave Okafor moved to Tokyo in spring.",
    "Dave Okafor showed Carol Nguyen the best ramen in Tokyo.",
    "Carol Nguyen practised Japanese with Dave Okafor in Tokyo.",
    "Dave Okafor and Carol Nguyen hiked near Tokyo.",
];

fn mem(id: &str, space: &str, content: &str, labels: &[&str]) -> NewMemory {
    NewMemory {
        id: Some(id.into()),
        space_id: Some(space.into()),
        content: content.into(),
        labels: Some(labels.iter().map(|s| s.to_string()).collect()),
        ..Default::default()
    }
}

/// A store with a bit of everything.
fn seed(store: &KnowledgeStore) {
    let work = store.spaces().create(NewSpace { name: "Work notes".into(), ..Default::default() }).unwrap().id;
    for (i, t) in PEOPLE.iter().enumerate() {
        let labels: &[&str] = if i < 4 { &["travel", "europe"] } else { &["travel", "asia"] };
        store.memories().create(mem(&format!("m{i}"), "default", t, labels)).unwrap();
    }
    store
        .memories()
        .create(mem("w1", &work, "The quarterly report is due on Friday for Acme Corp.", &["deadline"]))
        .unwrap();
    store.memories().create(mem("w2", &work, "Standup moved to 9:30 with the platform team.", &["meetings"])).unwrap();
    store.memories().create(mem("x1", "default", "Trips abroad need a visa check.", &["trips"])).unwrap();
    store.labels().merge("default", "label_trips", "label_travel").unwrap();
    store
        .graph()
        .create_relation(
            "m0",
            RelationInput {
                target_memory_id: "m1".into(),
                relation_type: Some("follows".into()),
                reason: Some("same trip".into()),
                ..Default::default()
            },
            None,
        )
        .unwrap();
    store.working().set("default", "## Focus\n\n- finish the report").unwrap();
    store
        .threads()
        .create(NewThread {
            thread_id: Some("t1".into()),
            title: Some("Planning".into()),
            messages: vec![
                NewMessage {
                    role: "user".into(),
                    content: "I decided to learn Portuguese before the Lisbon trip.".into(),
                    ..Default::default()
                },
                NewMessage {
                    role: "assistant".into(),
                    content: "Good plan; start with ten minutes a day.".into(),
                    ..Default::default()
                },
            ],
            ..Default::default()
        })
        .unwrap();
    store
        .sources()
        .ingest(NewSource {
            bytes: b"# Visa guide\n\nApply for the visa at least six weeks before you travel abroad.\n".to_vec(),
            original_name: "visa.md".into(),
            labels: vec!["travel".into()],
            metadata: serde_json::from_value::<Metadata>(serde_json::json!({"team": "ops"})).unwrap(),
            extract_memories: true,
            ..Default::default()
        })
        .unwrap();
    store.graph().recompute().unwrap();
}

/// Fields that are index bookkeeping, not content: re-embedding after an import rewrites them.
const VOLATILE: [&str; 2] = ["last_reindexed_at", "reindex_needed"];

fn strip(v: &mut serde_json::Value) {
    if let Some(o) = v.as_object_mut() {
        for k in VOLATILE {
            o.remove(k);
        }
        for (_, x) in o.iter_mut() {
            strip(x);
        }
    }
}

/// Every record of a store, by kind, as JSON lines sorted: an export read back.
fn dump(store: &KnowledgeStore, dir: &Path, name: &str) -> BTreeMap<String, Vec<String>> {
    let path = dir.join(name);
    let opts = ExportOptions {
        path: Some(path.clone()),
        compress: false,
        overwrite: true,
        include: Include::default(),
        encrypt: None,
    };
    store.transfer().export(&opts).unwrap();
    let mut out = BTreeMap::new();
    for e in std::fs::read_dir(&path).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "jsonl") {
            let mut rows: Vec<String> = std::fs::read_to_string(&p)
                .unwrap()
                .lines()
                .map(|l| {
                    let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
                    strip(&mut v);
                    v.to_string()
                })
                .collect();
            rows.sort();
            out.insert(p.file_name().unwrap().to_string_lossy().into_owned(), rows);
        }
    }
    out
}

fn open(dir: &Path) -> KnowledgeStore {
    KnowledgeStore::open(StoreConfig::new(dir)).unwrap()
}

fn export_zip(store: &KnowledgeStore, path: &Path) {
    let opts = ExportOptions {
        path: Some(path.to_path_buf()),
        compress: true,
        overwrite: true,
        include: Include::default(),
        encrypt: None,
    };
    let r = store.transfer().export(&opts).unwrap();
    assert_eq!(r.sha256.len(), 64);
    assert!(r.bytes > 0);
}

fn import(store: &KnowledgeStore, path: &Path, mode: ImportMode) -> engram::Result<engram::ImportReport> {
    store.transfer().import(path, mode, &ImportProgress::default())
}

#[test]
fn round_trip_is_record_identical() {
    let a_dir = tempfile::tempdir().unwrap();
    let a = open(a_dir.path());
    seed(&a);
    assert!(a.admin().wait_for_indexes(Duration::from_secs(30)));
    let archive = a_dir.path().join("all.zip");
    export_zip(&a, &archive);
    let before = dump(&a, a_dir.path(), "dump-a");
    for kind in [
        "memories.jsonl",
        "threads.jsonl",
        "messages.jsonl",
        "labels.jsonl",
        "label_merges.jsonl",
        "spaces.jsonl",
        "sources.jsonl",
        "relations.jsonl",
        "working_memory.jsonl",
        "entities.jsonl",
        "crystal_sources.jsonl",
        "communities.jsonl",
    ] {
        assert!(!before[kind].is_empty(), "the seed has {kind}");
    }
    assert!(before["memories.jsonl"].iter().any(|m| m.contains("\"is_crystal\":true")), "the seed has crystals");

    let b_dir = tempfile::tempdir().unwrap();
    std::fs::copy(&archive, b_dir.path().join("all.zip")).unwrap();
    let b = open(b_dir.path());
    let progress = ImportProgress::default();
    let rep = b.transfer().import(&b_dir.path().join("all.zip"), ImportMode::Merge, &progress).unwrap();
    assert_eq!(rep.counts["memories"].inserted as usize, before["memories.jsonl"].len());
    assert_eq!(progress.processed.load(std::sync::atomic::Ordering::Relaxed), rep.records);
    let after = dump(&b, b_dir.path(), "dump-b");
    for (kind, rows) in &before {
        assert_eq!(rows, &after[kind], "{kind} differs after the round trip");
    }
    // The imported store works: lexical and hybrid search, labels, sources, threads.
    assert!(b.admin().wait_for_indexes(Duration::from_secs(30)));
    let hits = b.sources().search("default", "visa weeks", 5).unwrap();
    assert_eq!(hits[0].source.original_name, "visa.md");
    assert_eq!(b.memories().get("m3", None).unwrap().label_ids, ["label_europe", "label_travel"]);
    // Reopening changes nothing, and the background work (re-embedding, graph) leaves the records alone.
    drop(b);
    let b = open(b_dir.path());
    assert!(b.admin().wait_for_indexes(Duration::from_secs(30)));
    let again = dump(&b, b_dir.path(), "dump-b2");
    for (kind, rows) in &before {
        assert!(rows == &again[kind], "{kind} differs after a reopen");
    }
}

/// Migration between the backends (issue 19): a redb store exported and imported into a PostgreSQL store holds
/// the same records; exported from there and imported into a new redb store, the same again.
#[cfg(feature = "postgres")]
#[test]
fn redb_to_postgres_and_back_is_record_identical() {
    if backend::pg_server().is_none() {
        return;
    }
    let a_dir = tempfile::tempdir().unwrap();
    let a = open(a_dir.path());
    seed(&a);
    assert!(a.admin().wait_for_indexes(Duration::from_secs(30)));
    let before = dump(&a, a_dir.path(), "dump-a");
    let archive = a_dir.path().join("all.zip");
    export_zip(&a, &archive);

    let pg_dir = tempfile::tempdir().unwrap();
    std::fs::copy(&archive, pg_dir.path().join("all.zip")).unwrap();
    let pg = KnowledgeStore::open(backend::Backend::Postgres.config(pg_dir.path())).unwrap();
    import(&pg, &pg_dir.path().join("all.zip"), ImportMode::Merge).unwrap();
    assert!(pg.admin().wait_for_indexes(Duration::from_secs(30)));
    let on_pg = dump(&pg, pg_dir.path(), "dump-pg");
    for (kind, rows) in &before {
        assert_eq!(rows, &on_pg[kind], "{kind} differs on PostgreSQL");
    }
    assert_eq!(pg.memories().get("m3", None).unwrap().label_ids, ["label_europe", "label_travel"]);
    // The import wrote no index operations: the database's search catalog is made anew, so a daemon in the
    // database index mode lists what the in-memory one does.
    let light = KnowledgeStore::open(
        engram::StoreConfig::new(pg_dir.path().join("light"))
            .database(backend::pg_url_for(pg_dir.path()))
            .index_mode(engram::IndexMode::Database),
    )
    .unwrap();
    for space in pg.spaces().list().unwrap() {
        let q = engram::ListQuery {
            space_id: space.id.clone(),
            filter: engram::MemoryFilter { include_history: true, ..Default::default() },
            limit: 1000,
            offset: 0,
        };
        let ids = |s: &KnowledgeStore| {
            s.memories().list(&q).unwrap().items.into_iter().map(|v| v.memory.id).collect::<Vec<_>>()
        };
        assert_eq!(ids(&pg), ids(&light), "space {} in the database index mode", space.id);
    }
    assert!(light.admin().health().unwrap().memories > 0);
    drop(light);
    export_zip(&pg, &pg_dir.path().join("back.zip"));

    let c_dir = tempfile::tempdir().unwrap();
    std::fs::copy(pg_dir.path().join("back.zip"), c_dir.path().join("back.zip")).unwrap();
    let c = open(c_dir.path());
    import(&c, &c_dir.path().join("back.zip"), ImportMode::Merge).unwrap();
    let back = dump(&c, c_dir.path(), "dump-c");
    for (kind, rows) in &before {
        assert_eq!(rows, &back[kind], "{kind} differs after the way back");
    }
}

/// A (store A, store B) pair whose memory `c1`, label `label_shared` and thread `tc` conflict.
fn conflicting() -> (tempfile::TempDir, PathBuf, tempfile::TempDir) {
    let a_dir = tempfile::tempdir().unwrap();
    let a = open(a_dir.path());
    let mut m = mem("c1", "default", "Shared memory about the garden.", &["shared", "from-a"]);
    m.metadata = Some(serde_json::from_value(serde_json::json!({"origin": "a", "only_a": 1})).unwrap());
    a.memories().create(m).unwrap();
    a.memories().create(mem("a-only", "default", "Only in store A: the lake house.", &[])).unwrap();
    a.labels()
        .update(
            "default",
            "label_shared",
            engram::LabelPatch { description: Some("from A".into()), ..Default::default() },
        )
        .unwrap();
    a.threads()
        .create(NewThread {
            thread_id: Some("tc".into()),
            title: Some("A title".into()),
            project: Some("garden".into()),
            messages: vec![NewMessage {
                role: "user".into(),
                content: "Message from A about tomatoes.".into(),
                ..Default::default()
            }],
            ..Default::default()
        })
        .unwrap();
    let archive = a_dir.path().join("a.zip");
    export_zip(&a, &archive);
    drop(a);

    let b_dir = tempfile::tempdir().unwrap();
    let b = open(b_dir.path());
    let mut m = mem("c1", "default", "Shared memory about the garden.", &["shared", "from-b"]);
    m.title = Some("B title".into());
    m.metadata = Some(serde_json::from_value(serde_json::json!({"origin": "b"})).unwrap());
    b.memories().create(m).unwrap();
    b.threads()
        .create(NewThread {
            thread_id: Some("tc".into()),
            messages: vec![NewMessage {
                role: "user".into(),
                content: "Message from B about peppers.".into(),
                ..Default::default()
            }],
            ..Default::default()
        })
        .unwrap();
    drop(b);
    let copy = b_dir.path().join("a.zip");
    std::fs::copy(&archive, &copy).unwrap();
    (a_dir, copy, b_dir)
}

#[test]
fn merge_skip_and_overwrite_on_conflicts() {
    for mode in [ImportMode::Skip, ImportMode::Merge, ImportMode::Overwrite] {
        let (_a, archive, b_dir) = conflicting();
        let b = open(b_dir.path());
        let rep = import(&b, &archive, mode).unwrap();
        // Conflicts: c1 and the memory extracted from thread tc (same id in both stores); a-only is new.
        let k = &rep.counts["memories"];
        // Merge changes c1 (metadata key, labels) and leaves the extracted memory, which has nothing empty.
        let expect = match mode {
            ImportMode::Skip => (1, 0, 2),
            ImportMode::Merge => (1, 1, 1),
            ImportMode::Overwrite => (1, 2, 0),
        };
        assert_eq!((k.inserted, k.updated, k.skipped), expect, "{mode:?}");
        let c1 = b.memories().get("c1", None).unwrap();
        let md = &c1.memory.metadata.0;
        let label = b.labels().get("default", "label_shared").unwrap();
        let thread = b.threads().get("tc", None).unwrap();
        let msgs: Vec<String> =
            b.threads().messages("tc", None, 10, 0).unwrap().1.into_iter().map(|m| m.content).collect();
        // New records arrive in every mode.
        assert_eq!(b.memories().get("a-only", None).unwrap().memory.content, "Only in store A: the lake house.");
        match mode {
            ImportMode::Skip => {
                assert_eq!(c1.memory.title, "B title");
                assert_eq!(md["origin"], "b");
                assert!(!md.contains_key("only_a"));
                assert_eq!(c1.label_ids, ["label_from-b", "label_shared"]);
                assert_eq!(label.description, "");
                assert_eq!((thread.title.as_str(), thread.project.as_str()), ("Message from B about peppers.", ""));
                assert_eq!(msgs, ["Message from B about peppers."]);
            }
            ImportMode::Merge => {
                assert_eq!(c1.memory.title, "B title", "stored values win");
                assert_eq!(md["origin"], "b");
                assert_eq!(md["only_a"], 1, "missing keys are filled");
                assert_eq!(c1.label_ids, ["label_from-a", "label_from-b", "label_shared"], "labels are united");
                assert_eq!(label.description, "from A", "an empty description is filled");
                assert_eq!(thread.title, "Message from B about peppers.", "stored values win");
                assert_eq!(thread.project, "garden", "an empty project is filled");
                assert_eq!(msgs, ["Message from B about peppers."], "stored messages win at the same index");
            }
            ImportMode::Overwrite => {
                assert_eq!(c1.memory.title, "");
                assert_eq!(md["origin"], "a");
                assert_eq!(c1.label_ids, ["label_from-a", "label_shared"]);
                assert_eq!(label.description, "from A");
                assert_eq!((thread.title.as_str(), thread.project.as_str()), ("A title", "garden"));
                assert_eq!(msgs, ["Message from A about tomatoes."]);
            }
        }
        // Counts follow the edges whatever the mode.
        for l in b.labels().list("default", engram::LabelOrder::Name, false, 100, 0).unwrap() {
            let n = b
                .memories()
                .list(&engram::ListQuery {
                    space_id: "default".into(),
                    filter: engram::MemoryFilter { label_ids: vec![l.id.clone()], ..Default::default() },
                    limit: 100,
                    offset: 0,
                })
                .unwrap()
                .total;
            assert_eq!(l.usage_count as usize, n, "{mode:?}: usage of {}", l.name);
        }
        // Lexical search sees the final text only.
        let q = engram::SearchQuery {
            query: "lake house".into(),
            space_id: "default".into(),
            limit: 5,
            filter: engram::MemoryFilter::default(),
            mode: engram::SearchMode::Lexical,
            fusion: None,
            query_embedding: None,
            options: Default::default(),
        };
        let hits = b.search().run(&q).unwrap();
        assert_eq!(hits.hits[0].view.memory.id, "a-only");
    }
}

fn zip_with(path: &Path, entries: &[(&str, &[u8])], symlink: Option<(&str, &str)>) {
    let f = std::fs::File::create(path).unwrap();
    let mut z = zip::ZipWriter::new(f);
    let o = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
    for (name, bytes) in entries {
        z.start_file(*name, o).unwrap();
        z.write_all(bytes).unwrap();
    }
    if let Some((name, target)) = symlink {
        z.add_symlink(name, target, o).unwrap();
    }
    z.finish().unwrap();
}

fn manifest_for(files: &[(&str, &[u8], u64)]) -> Vec<u8> {
    use sha2::Digest;
    let mut m = serde_json::json!({
        "format": "engram-export", "format_version": 1, "engram_version": "test", "store_format_version": 1,
        "embedder": "x:1", "created_at": "2026-01-01T00:00:00Z",
        "include": Include::default(), "counts": {}, "files": {}
    });
    for (name, bytes, records) in files {
        let sha: String = sha2::Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect();
        m["files"][*name] = serde_json::json!({"sha256": sha, "bytes": bytes.len(), "records": records});
    }
    serde_json::to_vec(&m).unwrap()
}

#[test]
fn hostile_archives_are_refused_and_change_nothing() {
    let root = tempfile::tempdir().unwrap();
    let data = root.path().join("data");
    let store = open(&data);
    seed(&store);
    let before = dump(&store, &data, "before");
    let good = data.join("good.zip");
    export_zip(&store, &good);
    let one_memory = br#"{"memory":{"id":"evil"},"label_ids":[],"mentions":[]}"#;

    let cases: Vec<(&str, PathBuf)> = {
        let mut v = Vec::new();
        // zip-slip: an entry climbing out of the archive.
        let p = data.join("slip.zip");
        let m = manifest_for(&[]);
        zip_with(&p, &[("manifest.json", &m), ("../../evil.txt", b"owned")], None);
        v.push(("zip-slip", p));
        // An absolute entry name.
        let p = data.join("abs.zip");
        zip_with(&p, &[("manifest.json", &m), ("/tmp/evil-abs.txt", b"owned")], None);
        v.push(("absolute entry", p));
        // A symbolic link entry.
        let p = data.join("link.zip");
        zip_with(&p, &[("manifest.json", &m)], Some(("memories.jsonl", "/etc/passwd")));
        v.push(("symlink entry", p));
        // A ZIP bomb: 64 MiB of zeros in about 64 KiB, the manifest declaring a small file.
        let p = data.join("bomb.zip");
        let zeros = vec![0u8; 64 << 20];
        let m = manifest_for(&[("memories.jsonl", one_memory, 1)]);
        zip_with(&p, &[("manifest.json", &m), ("memories.jsonl", &zeros)], None);
        assert!(std::fs::metadata(&p).unwrap().len() < 2 << 20);
        v.push(("zip bomb", p));
        // The manifest itself as a bomb.
        let p = data.join("bomb2.zip");
        zip_with(&p, &[("manifest.json", &zeros)], None);
        v.push(("manifest bomb", p));
        // A truncated archive.
        let p = data.join("truncated.zip");
        let bytes = std::fs::read(&good).unwrap();
        std::fs::write(&p, &bytes[..bytes.len() / 2]).unwrap();
        v.push(("truncated", p));
        // A tampered record: the checksum no longer matches.
        let p = data.join("tampered.zip");
        let m = manifest_for(&[("memories.jsonl", one_memory, 1)]);
        zip_with(&p, &[("manifest.json", &m), ("memories.jsonl", br#"{"memory":{"id":"other"}}"#)], None);
        v.push(("tampered", p));
        // Not an archive at all.
        let p = data.join("plain.zip");
        std::fs::write(&p, b"hello").unwrap();
        v.push(("not a zip", p));
        v
    };
    for (what, path) in &cases {
        for mode in [ImportMode::Merge, ImportMode::Overwrite] {
            let e = import(&store, path, mode).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidInput, "{what}: {e}");
            assert_eq!(e.fields()[0].kind, "archive_invalid", "{what}");
        }
    }
    assert!(!root.path().join("evil.txt").exists());
    assert!(!Path::new("/tmp/evil-abs.txt").exists());
    // An archive outside the allowed directories is refused before it is opened.
    let outside = root.path().join("outside.zip");
    std::fs::copy(&good, &outside).unwrap();
    assert_eq!(import(&store, &outside, ImportMode::Merge).unwrap_err().kind(), ErrorKind::Forbidden);
    let e = store
        .transfer()
        .export(&ExportOptions {
            path: Some(root.path().join("x.zip")),
            compress: true,
            overwrite: false,
            include: Include::default(),
            encrypt: None,
        })
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Forbidden);
    // Never over the store: its file, the data directory, the key file; nor over a directory that is no export.
    for target in [data.join("engram.redb"), data.clone(), data.join("api-key"), root.path().to_path_buf()] {
        let e = store
            .transfer()
            .export(&ExportOptions {
                path: Some(target.clone()),
                compress: true,
                overwrite: true,
                include: Include::default(),
                encrypt: None,
            })
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Forbidden, "{}", target.display());
    }
    std::fs::create_dir_all(data.join("keep")).unwrap();
    std::fs::write(data.join("keep/notes.txt"), "mine").unwrap();
    let e = store
        .transfer()
        .export(&ExportOptions {
            path: Some(data.join("keep")),
            compress: false,
            overwrite: true,
            include: Include::default(),
            encrypt: None,
        })
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Conflict);
    assert_eq!(std::fs::read_to_string(data.join("keep/notes.txt")).unwrap(), "mine");
    std::fs::write(data.join("api-key"), "secret").unwrap();
    let e = store.sources().ingest_path(&data.join("api-key"), NewSource::default()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Forbidden);
    assert_eq!(dump(&store, &data, "after"), before, "the store is unchanged");
}

#[cfg(feature = "server")]
#[test]
fn http_export_import_job_and_conflict() {
    use common::{call, server};
    let a_dir = tempfile::tempdir().unwrap();
    let srv = server(a_dir.path(), 1 << 20);
    for i in 0..4 {
        let body = serde_json::json!({"content": format!("Memory {i} about the harbour and the old lighthouse."), "labels": ["sea"]});
        assert_eq!(call(&srv, "POST", "/memories", Some(&body.to_string())).status, 200);
    }
    let exp = call(&srv, "POST", "/data/export", Some(r#"{"export_path":"backups/one.zip","include_threads":false}"#));
    assert_eq!(exp.status, 200, "{}", exp.body);
    let v = exp.json();
    assert_eq!(v["success"], true);
    assert_eq!(v["counts"]["memories"], 4);
    assert!(v["counts"].get("threads").is_none(), "include_threads: false");
    let path = v["export_path"].as_str().unwrap().to_string();
    assert!(path.starts_with(&a_dir.path().canonicalize().unwrap().display().to_string()));
    // The same path again without overwrite: 409; outside the data directory: 403.
    assert_eq!(call(&srv, "POST", "/data/export", Some(r#"{"export_path":"backups/one.zip"}"#)).status, 409);
    assert_eq!(call(&srv, "POST", "/data/export", Some(r#"{"export_path":"/etc/x.zip"}"#)).status, 403);
    assert_eq!(call(&srv, "POST", "/data/export", Some(r#"{"export_path":"../x.zip"}"#)).status, 403);
    drop(srv);

    // A second store imports it as a job.
    let b_dir = tempfile::tempdir().unwrap();
    std::fs::copy(&path, b_dir.path().join("one.zip")).unwrap();
    let srv = server(b_dir.path(), 1 << 20);
    assert_eq!(call(&srv, "POST", "/data/import", Some(r#"{"import_path":"one.zip","mode":"sideways"}"#)).status, 422);
    assert_eq!(call(&srv, "POST", "/data/import", Some(r#"{}"#)).status, 422);
    assert_eq!(call(&srv, "POST", "/data/import", Some(r#"{"import_path":"missing.zip"}"#)).status, 404);
    let r = call(&srv, "POST", "/data/import", Some(r#"{"import_path":"one.zip","mode":"merge"}"#)).json();
    assert_eq!(r["status"], "processing");
    let job = r["job_id"].as_str().unwrap().to_string();
    let mut last = serde_json::Value::Null;
    for _ in 0..200 {
        last = call(&srv, "GET", &format!("/data/import/status/{job}"), None).json();
        if last["status"] != "processing" {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(last["status"], "completed", "{last}");
    assert_eq!(last["counts"]["memories"]["inserted"], 4);
    assert_eq!(last["processed"], last["total"]);
    assert_eq!(call(&srv, "GET", "/memories?limit=10", None).json()["memories"].as_array().unwrap().len(), 4);
    assert_eq!(call(&srv, "GET", "/data/import/status/nope", None).status, 404);
    // A failing import ends in `error` with a message, the store unchanged.
    std::fs::write(b_dir.path().join("bad.zip"), b"not a zip").unwrap();
    let r = call(&srv, "POST", "/data/import", Some(r#"{"import_path":"bad.zip"}"#)).json();
    let job = r["job_id"].as_str().unwrap().to_string();
    for _ in 0..200 {
        last = call(&srv, "GET", &format!("/data/import/status/{job}"), None).json();
        if last["status"] != "processing" {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(last["status"], "error");
    assert!(last["error"].as_str().unwrap().contains("ZIP"), "{last}");
}

#[cfg(feature = "server")]
#[test]
fn a_second_import_while_one_runs_is_409() {
    use common::{call, server_on};
    let a_dir = tempfile::tempdir().unwrap();
    let a = open(a_dir.path());
    let batch: Vec<NewMemory> = (0..4000)
        .map(|i| NewMemory {
            content: format!("Bulk memory number {i} about item {} in the warehouse.", i * 7),
            ..Default::default()
        })
        .collect();
    a.memories().create_many(batch).unwrap();
    let archive = a_dir.path().join("big.zip");
    export_zip(&a, &archive);
    drop(a);
    let b_dir = tempfile::tempdir().unwrap();
    std::fs::copy(&archive, b_dir.path().join("big.zip")).unwrap();
    let store = std::sync::Arc::new(open(b_dir.path()));
    let srv = server_on(b_dir.path(), store.clone(), 1 << 20);
    let first = call(&srv, "POST", "/data/import", Some(r#"{"import_path":"big.zip"}"#));
    assert_eq!(first.status, 200);
    let second = call(&srv, "POST", "/data/import", Some(r#"{"import_path":"big.zip"}"#));
    assert_eq!(second.status, 409, "{}", second.body);
    assert_eq!(second.json()["error_code"], "import_running");
    let job = first.json()["job_id"].as_str().unwrap().to_string();
    for _ in 0..600 {
        if store.transfer().job(&job).unwrap().status != "processing" {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(store.transfer().job(&job).unwrap().status, "completed");
    assert_eq!(call(&srv, "POST", "/data/import", Some(r#"{"import_path":"big.zip","mode":"skip"}"#)).status, 200);
}

/// Found by schemathesis: an export path with a 300-byte file name reached the file system and came back as a
/// retryable I/O error (500); over-long paths are the caller's mistake (422), for export and import alike.
#[test]
fn over_long_paths_are_invalid_input() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let long = dir.path().join("x".repeat(300));
    let opts = ExportOptions {
        path: Some(long.clone()),
        compress: true,
        overwrite: true,
        include: Include::default(),
        encrypt: None,
    };
    let e = store.transfer().export(&opts).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
    assert_eq!(e.fields()[0].loc, vec![serde_json::json!("export_path")]);
    // 217 bytes: the file system takes it, the export's temporary name (42 bytes longer) would not.
    let opts = ExportOptions { path: Some(dir.path().join("é".repeat(108) + "x")), ..opts };
    assert_eq!(store.transfer().export(&opts).unwrap_err().kind(), ErrorKind::InvalidInput);
    let e = import(&store, &long, ImportMode::Merge).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
    let deep = dir.path().join("d/".repeat(2100));
    assert_eq!(import(&store, &deep, ImportMode::Merge).unwrap_err().kind(), ErrorKind::InvalidInput);
}
