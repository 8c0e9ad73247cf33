//! The index snapshot of a redb store (`<data_dir>/indexes.snapshot`, `src/store/snapshot.rs`): written at
//! close, used at the next open only when it matches the committed state, and never trusted when damaged or
//! stale. Each test compares searches (ids and scores, bit for bit) with and without the snapshot. On PostgreSQL
//! (feature `postgres`, `ENGRAM_TEST_PG`), a daemon's own snapshot (`indexes-<store id>.snapshot`) is used at its
//! next open when the change feed still holds every entry after it, and it catches up from there.

#[cfg(feature = "postgres")]
mod backend;

use engram::{KnowledgeStore, MemoryFilter, NewMemory, SearchMode, SearchQuery, StoreConfig};

fn open(dir: &std::path::Path) -> KnowledgeStore {
    KnowledgeStore::open(StoreConfig::new(dir)).expect("open")
}

fn snapshot(dir: &std::path::Path) -> std::path::PathBuf {
    dir.join("indexes.snapshot")
}

/// Memories `from..to` (no names: no entities, so no crystal memories appear in the background): every third one a message of a thread (positions 0.. in thread `t<i / 4>`), every
/// fifth labelled.
fn fill(store: &KnowledgeStore, from: usize, to: usize) {
    let words = ["harbour", "lantern", "violin", "glacier", "orchard", "comet", "saffron", "ledger", "quartz"];
    let items = (from..to)
        .map(|i| {
            let content = format!(
                "{} {} {} note {i} about {}",
                words[i % 9],
                words[(i * 7 + 3) % 9],
                words[(i * 5 + 1) % 9],
                if i % 2 == 0 { "the east wing" } else { "the west wing" }
            );
            let (thread, range) = if i % 3 == 0 {
                let at = ((i / 3) % 4) as f64;
                (
                    Some(format!("t{}", i / 12)),
                    Some([("start_index".to_string(), at), ("end_index".to_string(), at)].into()),
                )
            } else {
                (None, None)
            };
            NewMemory {
                id: Some(format!("m{i}")),
                content,
                source_thread_id: thread,
                source_range: range,
                labels: (i % 5 == 0).then(|| vec!["fifth".to_string()]),
                ..Default::default()
            }
        })
        .collect();
    store.memories().create_many(items).expect("create");
}

/// Ids and score bits of the hits (priors off) of a fixed set of queries, lexical and hybrid, with and without a label filter.
fn answers(store: &KnowledgeStore) -> Vec<Vec<(String, u32)>> {
    let mut out = Vec::new();
    for q in ["harbour lantern", "violin glacier orchard", "comet", "saffron ledger quartz east", "west note 7"] {
        for mode in [SearchMode::Lexical, SearchMode::Hybrid] {
            for labelled in [false, true] {
                let filter = MemoryFilter {
                    label_ids: if labelled { vec!["label_fifth".into()] } else { vec![] },
                    ..Default::default()
                };
                let r = store
                    .search()
                    .run(&SearchQuery {
                        query: q.into(),
                        space_id: "default".into(),
                        limit: 10,
                        filter,
                        mode,
                        fusion: None,
                        query_embedding: None,
                        // Without decay (which moves with the clock) and PageRank (recomputed in the background).
                        options: engram::SearchOptions { priors: Some(false), ..Default::default() },
                    })
                    .expect("search");
                out.push(r.hits.into_iter().map(|h| (h.view.memory.id, h.score.to_bits())).collect());
            }
        }
    }
    out
}

#[test]
fn a_reopen_from_the_snapshot_answers_as_the_store_did() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    fill(&store, 0, 300);
    store.memories().delete("m7", None).expect("delete");
    let before = answers(&store);
    assert!(before.iter().filter(|h| !h.is_empty()).count() >= 15, "the queries find something");
    drop(store);
    let file = snapshot(dir.path());
    let written = std::fs::read(&file).expect("a snapshot is written at close");

    let store = open(dir.path());
    assert_eq!(answers(&store), before);
    assert_eq!(store.admin().health().unwrap().memories, 299);
    drop(store);
    // Nothing changed: the same file stays (not rewritten).
    assert_eq!(std::fs::read(&file).unwrap(), written);

    // A change after the reopen is in the next snapshot, and the one after it answers with it.
    let store = open(dir.path());
    fill(&store, 300, 310);
    let after = answers(&store);
    assert_ne!(after, before);
    drop(store);
    assert_ne!(std::fs::read(&file).unwrap(), written);
    let store = open(dir.path());
    assert_eq!(answers(&store), after);
    drop(store);
    // The indexes the snapshot held and the changes applied to them equal a build from the tables (the
    // thread messages' context-expanded postings included).
    std::fs::remove_file(&file).unwrap();
    let store = open(dir.path());
    assert_eq!(answers(&store), after);
}

#[test]
fn a_damaged_snapshot_is_deleted_and_the_indexes_load_from_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    fill(&store, 0, 200);
    let before = answers(&store);
    drop(store);
    let file = snapshot(dir.path());
    let mut bytes = std::fs::read(&file).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 0x5A;
    std::fs::write(&file, &bytes).unwrap();

    let store = open(dir.path());
    assert!(!file.exists(), "the damaged file is deleted at open");
    assert_eq!(answers(&store), before);
    drop(store);
    // Closing writes a good one again.
    let store = open(dir.path());
    assert!(file.exists());
    assert_eq!(answers(&store), before);

    // A truncated file is refused the same way.
    drop(store);
    let bytes = std::fs::read(&file).unwrap();
    std::fs::write(&file, &bytes[..bytes.len() / 3]).unwrap();
    let store = open(dir.path());
    assert_eq!(answers(&store), before);
}

#[test]
fn a_snapshot_of_another_state_is_never_used() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    fill(&store, 0, 200);
    let old = answers(&store);
    drop(store);
    let backup = dir.path().join("backup.redb");
    std::fs::copy(dir.path().join("engram.redb"), &backup).unwrap();
    let old_snapshot = std::fs::read(snapshot(dir.path())).unwrap();

    let store = open(dir.path());
    fill(&store, 200, 260);
    store.memories().delete("m3", None).expect("delete");
    let new = answers(&store);
    assert_ne!(new, old);
    drop(store);

    // The store file restored from the backup, beside the newer snapshot: loaded from the file.
    std::fs::copy(dir.path().join("engram.redb"), dir.path().join("newer.redb")).unwrap();
    std::fs::copy(&backup, dir.path().join("engram.redb")).unwrap();
    let store = open(dir.path());
    assert_eq!(answers(&store), old);
    assert_eq!(store.admin().health().unwrap().memories, 200);
    drop(store);

    // The newer store file beside an older snapshot: the same.
    std::fs::copy(dir.path().join("newer.redb"), dir.path().join("engram.redb")).unwrap();
    std::fs::write(snapshot(dir.path()), &old_snapshot).unwrap();
    let store = open(dir.path());
    assert_eq!(answers(&store), new);
}

#[test]
fn a_sparse_file_is_compacted_at_close() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    store.spaces().create(engram::NewSpace { name: "bulk".into(), ..Default::default() }).expect("space");
    let big = "lorem ipsum dolor sit amet ".repeat(200);
    for b in 0..5 {
        let items = (0..1000)
            .map(|i| NewMemory {
                id: Some(format!("b{b}-{i}")),
                content: format!("{big} {b} {i}"),
                space_id: Some("bulk".into()),
                ..Default::default()
            })
            .collect();
        store.memories().create_many(items).expect("create");
    }
    fill(&store, 0, 50);
    let before = answers(&store);
    store.spaces().delete("bulk", true).expect("delete the space");
    let file = dir.path().join("engram.redb");
    let full = std::fs::metadata(&file).unwrap().len();
    assert!(full > 24 << 20, "{full} bytes");
    drop(store);
    let closed = std::fs::metadata(&file).unwrap().len();
    assert!(closed * 2 < full, "the file shrank at close: {full} -> {closed} bytes");
    let store = open(dir.path());
    assert_eq!(answers(&store), before);
    assert_eq!(store.admin().health().unwrap().memories, 50);
}

/// The files in `dir` whose names `keep` accepts, sorted.
#[cfg(feature = "postgres")]
fn files_in(dir: &std::path::Path, keep: impl Fn(&str) -> bool) -> Vec<std::path::PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut out: Vec<std::path::PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(&keep))
        .collect();
    out.sort();
    out
}

/// The PostgreSQL snapshot files (`indexes-<store id>.snapshot`) in `dir`.
#[cfg(feature = "postgres")]
fn shared_snapshots(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    files_in(dir, |n| n.starts_with("indexes-") && n.ends_with(".snapshot"))
}

#[cfg(feature = "postgres")]
#[test]
fn a_daemon_on_postgresql_reopens_from_its_snapshot_and_catches_up_from_the_feed() {
    if backend::pg_server().is_none() {
        return;
    }
    let base = tempfile::tempdir().unwrap();
    let url = backend::pg_url_for(base.path());
    let config = |name: &str| StoreConfig::new(base.path().join(name)).database(url.clone());
    let a = base.path().join("a");

    let store = KnowledgeStore::open(config("a")).expect("open a");
    fill(&store, 0, 200);
    drop(store);
    let files = shared_snapshots(&a);
    assert_eq!(files.len(), 1, "one snapshot written at close: {files:?}");
    let file = files[0].clone();
    let written = std::fs::read(&file).unwrap();

    // Another daemon writes and deletes while this one is stopped.
    let other = KnowledgeStore::open(config("b")).expect("open b");
    fill(&other, 200, 260);
    other.memories().delete("m7", None).expect("delete");
    let expected = answers(&other);
    drop(other);

    let store = KnowledgeStore::open(config("a")).expect("reopen a");
    assert!(file.exists(), "the snapshot was used (one not used is deleted at open)");
    assert_eq!(answers(&store), expected, "caught up from the feed: the other daemon's changes are searched");
    assert_eq!(store.admin().health().unwrap().memories, 259);
    drop(store);
    assert_eq!(shared_snapshots(&a), vec![file.clone()]);
    assert_ne!(std::fs::read(&file).unwrap(), written, "written again at the new position");

    // A daemon that loads from the tables answers the same, bit for bit.
    let fresh = KnowledgeStore::open(config("c")).expect("open c");
    assert_eq!(answers(&fresh), expected);
    drop(fresh);

    // A damaged file is deleted at open and the indexes load from the tables.
    let mut bytes = std::fs::read(&file).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 0x5A;
    std::fs::write(&file, &bytes).unwrap();
    let store = KnowledgeStore::open(config("a")).expect("open a after damage");
    assert!(!file.exists(), "the damaged file is deleted at open");
    assert_eq!(answers(&store), expected);
}

/// The saved HNSW graphs in `dir` (`hnsw/*.graph`).
#[cfg(feature = "postgres")]
fn graphs(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    files_in(&dir.join("hnsw"), |n| n.ends_with(".graph"))
}

#[cfg(feature = "postgres")]
#[test]
fn a_daemon_with_an_empty_data_directory_starts_from_the_published_snapshot() {
    if backend::pg_server().is_none() {
        return;
    }
    let base = tempfile::tempdir().unwrap();
    let url = backend::pg_url_for(base.path());
    // A graph from 100 vectors, so the publication holds one.
    let params = engram::index::vector::VectorParams { hnsw_min_points: 100, ..Default::default() };
    let config = |name: &str| StoreConfig::new(base.path().join(name)).database(url.clone()).vector_params(params);

    let a = KnowledgeStore::open(config("a")).expect("open a");
    fill(&a, 0, 300);
    assert!(a.admin().wait_for_indexes(std::time::Duration::from_secs(60)), "a's graph is built");
    let published = a.admin().publish_indexes().expect("publish").expect("no other daemon publishes");
    assert_eq!(published.files, 2, "the snapshot and the one space's graph: {published:?}");
    assert!(published.bytes > 10_000, "{published:?}");
    // Written after the publication: a daemon starting from it catches up from the feed.
    fill(&a, 300, 360);
    a.memories().delete("m7", None).expect("delete");
    let expected = answers(&a);

    let b_dir = base.path().join("b");
    let b = KnowledgeStore::open(config("b")).expect("open b");
    assert_eq!(
        shared_snapshots(&b_dir).len(),
        1,
        "the published snapshot was taken and used (one not used is deleted)"
    );
    assert_eq!(graphs(&b_dir).len(), 1, "the published graph was taken and attached (one not used is deleted)");
    assert_eq!(answers(&b), expected, "caught up from the publication's position");
    assert_eq!(b.admin().health().unwrap().memories, 359);
    drop(b);

    // The feed keeps what follows the publication when older than its ten minutes, and prunes what precedes it.
    let mut client = engram::storage::postgres::connect(&url).expect("connect");
    client.batch_execute("UPDATE engram_changes SET at = now() - interval '1 hour'").expect("age the feed");
    let db = engram::storage::Db::connect(&url, 1).expect("connect");
    assert!(db.prune_changes().expect("prune") > 0, "the entries up to the publication are pruned");
    let kept: i64 = client
        .query_one("SELECT count(*) FROM engram_changes WHERE seq > (SELECT position FROM engram_published)", &[])
        .unwrap()
        .get(0);
    assert!(kept >= 2, "the entries after the publication are kept: {kept}");
    let c_dir = base.path().join("c");
    let c = KnowledgeStore::open(config("c")).expect("open c");
    assert_eq!(shared_snapshots(&c_dir).len(), 1, "the publication is still usable");
    assert_eq!(answers(&c), expected);
    drop(c);

    // Entries older than a day go whatever was published: the publication is then of no use, and a new
    // daemon reads the tables.
    client.batch_execute("UPDATE engram_changes SET at = now() - interval '2 days'").expect("age the feed");
    assert!(db.prune_changes().expect("prune") >= 2);
    let d_dir = base.path().join("d");
    let d = KnowledgeStore::open(config("d")).expect("open d");
    assert!(shared_snapshots(&d_dir).is_empty(), "a publication the feed no longer covers is deleted at open");
    assert_eq!(answers(&d), expected);
    drop(d);
    drop(a);
}

#[cfg(feature = "postgres")]
#[test]
fn a_daemon_publishes_its_indexes_by_itself_once_its_graphs_are_complete() {
    if backend::pg_server().is_none() {
        return;
    }
    let base = tempfile::tempdir().unwrap();
    let url = backend::pg_url_for(base.path());
    let params = engram::index::vector::VectorParams { hnsw_min_points: 100, ..Default::default() };
    let a = KnowledgeStore::open(StoreConfig::new(base.path().join("a")).database(url.clone()).vector_params(params))
        .expect("open a");
    fill(&a, 0, 200);
    assert!(a.admin().wait_for_indexes(std::time::Duration::from_secs(60)));
    // The feed worker checks every minute.
    let mut client = engram::storage::postgres::connect(&url).expect("connect");
    let started = std::time::Instant::now();
    let published = loop {
        let row = client.query_opt("SELECT position, bytes FROM engram_published", &[]).expect("read");
        if let Some(row) = row {
            break (row.get::<_, i64>(0), row.get::<_, i64>(1));
        }
        assert!(started.elapsed().as_secs() < 150, "nothing published within 150 s");
        std::thread::sleep(std::time::Duration::from_millis(500));
    };
    assert!(published.0 > 0 && published.1 > 10_000, "{published:?}");
    let parts: Vec<String> = client
        .query("SELECT DISTINCT file FROM engram_published_parts ORDER BY 1", &[])
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(parts.len(), 2, "{parts:?}");
    assert_eq!(parts[1], "indexes.snapshot");
    assert!(parts[0].starts_with("hnsw/") && parts[0].ends_with(".graph"), "{parts:?}");
}
