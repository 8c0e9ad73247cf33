//! Fault injection through the store file's device ([`engram::storage::Device`]): a workload (memories, updates, labels, a lifecycle move, a
//! delete, a thread) runs with the N-th I/O operation failing, for every N the workload performs, and again with
//! a disk that fills up at the N-th write. No call panics, every failure is a typed storage error (`Io` or
//! `StorageFull`), and after reopening on the plain file the store holds exactly what was acknowledged (a
//! failed call is either wholly there or wholly absent) and lexical search agrees with the records. The same
//! runs on a store encrypted at rest, whose device sits between redb and the failing file.

use std::panic::AssertUnwindSafe;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use engram::storage::{Device, FileDevice};
use engram::{ErrorKind, KnowledgeStore, MemoryPatch, NewMemory, NewMessage, NewThread, StoreConfig};

#[derive(Clone, Copy, Debug, PartialEq)]
enum Fault {
    /// Only the N-th operation fails (EIO).
    Once,
    /// Every write or length change from the N-th on fails with ENOSPC.
    DiskFull,
}

#[derive(Debug)]
struct Faulty {
    inner: FileDevice,
    ops: Arc<AtomicU64>,
    fail_at: u64,
    fault: Fault,
}

impl Faulty {
    fn tick(&self, mutating: bool) -> std::io::Result<()> {
        let n = self.ops.fetch_add(1, Ordering::SeqCst) + 1;
        match self.fault {
            Fault::Once if n == self.fail_at => Err(std::io::Error::other("injected I/O error")),
            Fault::DiskFull if mutating && n >= self.fail_at => {
                Err(std::io::Error::new(std::io::ErrorKind::StorageFull, "injected: no space left on device"))
            }
            _ => Ok(()),
        }
    }
}

impl Device for Faulty {
    fn len(&self) -> std::io::Result<u64> {
        self.inner.len()
    }
    fn read(&self, offset: u64, out: &mut [u8]) -> std::io::Result<()> {
        self.tick(false)?;
        self.inner.read(offset, out)
    }
    fn set_len(&self, len: u64) -> std::io::Result<()> {
        self.tick(true)?;
        self.inner.set_len(len)
    }
    fn sync_data(&self) -> std::io::Result<()> {
        self.tick(false)?;
        self.inner.sync_data()
    }
    fn write(&self, offset: u64, data: &[u8]) -> std::io::Result<()> {
        self.tick(true)?;
        self.inner.write(offset, data)
    }
    fn close(&self) -> std::io::Result<()> {
        self.inner.close()
    }
}

fn plain_config(dir: &Path, encrypted: bool) -> StoreConfig {
    let c = StoreConfig::new(dir.join("data"));
    if !encrypted {
        return c;
    }
    let key = dir.join("store.key");
    if !key.exists() {
        engram::storage::crypt::write_key_file(&key).expect("key file");
    }
    c.encrypted(engram::storage::crypt::Encryption::key_file(key))
}

fn config(dir: &Path, encrypted: bool, ops: Arc<AtomicU64>, fail_at: u64, fault: Fault) -> StoreConfig {
    let mut c = plain_config(dir, encrypted);
    c.storage = Some(Arc::new(move |path: &Path| {
        let inner = FileDevice::open(path)?;
        Ok(Box::new(Faulty { inner, ops: ops.clone(), fail_at, fault }) as Box<dyn Device>)
    }));
    c
}

/// The workload: each step and whether it was acknowledged.
fn workload(store: &KnowledgeStore, acked: &mut Vec<&'static str>, errors: &mut Vec<ErrorKind>) {
    let mut step = |name: &'static str, r: engram::Result<()>| match r {
        Ok(()) => acked.push(name),
        Err(e) => errors.push(e.kind()),
    };
    let mem = |id: &str, text: &str| NewMemory {
        id: Some(id.into()),
        content: text.into(),
        labels: Some(vec!["faults".into()]),
        ..Default::default()
    };
    step("a", store.memories().create(mem("a", "Alpha memory about lighthouses")).map(|_| ()));
    step("b", store.memories().create(mem("b", "Bravo memory about harbours")).map(|_| ()));
    step(
        "a-edit",
        store
            .memories()
            .update("a", MemoryPatch { content: Some("Alpha memory about beacons".into()), ..Default::default() }, None)
            .map(|_| ()),
    );
    step("b-archive", store.memories().change_state("b", None, engram::Transition::Archive, None).map(|_| ()));
    step("c", store.memories().create(mem("c", "Charlie memory about ferries")).map(|_| ()));
    step("c-delete", store.memories().delete("c", None).map(|_| ()));
    step(
        "t",
        store
            .threads()
            .create(NewThread {
                thread_id: Some("t".into()),
                messages: vec![NewMessage {
                    role: "user".into(),
                    content: "I decided to paint the boat blue.".into(),
                    ..Default::default()
                }],
                ..Default::default()
            })
            .map(|_| ()),
    );
}

/// Checks the reopened store against what was acknowledged. A step that failed may be wholly present (its
/// commit reached the disk before a later operation of the commit failed) or wholly absent, never partly.
fn verify(store: &KnowledgeStore, acked: &[&str], n: u64, fault: Fault) {
    let has = |s: &str| acked.contains(&s);
    let get = |id: &str| store.memories().get(id, None).ok();
    let search = |q: &str| -> Vec<String> {
        let sq = engram::SearchQuery {
            query: q.into(),
            space_id: "default".into(),
            limit: 10,
            filter: engram::MemoryFilter {
                states: vec![engram::MemoryState::Active, engram::MemoryState::Archived],
                ..Default::default()
            },
            mode: engram::SearchMode::Lexical,
            fusion: None,
            query_embedding: None,
            options: Default::default(),
        };
        store.search().run(&sq).map(|r| r.hits.into_iter().map(|h| h.view.memory.id).collect()).unwrap_or_default()
    };
    let ctx = format!("{fault:?} at op {n}, acknowledged {acked:?}");
    // a: absent, original or edited; never half-written; search agrees with the record.
    match get("a") {
        None => assert!(!has("a"), "{ctx}: a lost"),
        Some(v) => {
            let c = v.memory.content.as_str();
            assert!(c == "Alpha memory about lighthouses" || c == "Alpha memory about beacons", "{ctx}: a is {c}");
            if has("a-edit") {
                assert_eq!(c, "Alpha memory about beacons", "{ctx}: acknowledged edit lost");
            }
            let word = if c.ends_with("beacons") { "beacons" } else { "lighthouses" };
            assert!(search(word).contains(&"a".to_string()), "{ctx}: search for {word} misses a");
            let other = if word == "beacons" { "lighthouses" } else { "beacons" };
            assert!(!search(other).contains(&"a".to_string()), "{ctx}: stale postings for {other}");
            assert_eq!(v.label_ids, ["label_faults"], "{ctx}");
        }
    }
    match get("b") {
        None => assert!(!has("b"), "{ctx}: b lost"),
        Some(v) => {
            if has("b-archive") {
                assert_eq!(v.memory.state, engram::MemoryState::Archived, "{ctx}");
            }
            assert!(search("harbours").contains(&"b".to_string()), "{ctx}: search misses b");
        }
    }
    if has("c-delete") {
        assert!(get("c").is_none(), "{ctx}: deleted c is back");
        assert!(search("ferries").is_empty(), "{ctx}: postings of deleted c remain");
    }
    // (An acknowledged c may be gone only through its delete, which always follows it and, when it failed, may
    // or may not have been committed: a failed call is wholly there or wholly absent.)
    if let Some(v) = get("c") {
        assert_eq!(v.memory.content, "Charlie memory about ferries", "{ctx}");
        assert!(search("ferries").contains(&"c".to_string()), "{ctx}: search misses c");
    }
    if has("t") {
        assert!(store.threads().get("t", None).is_ok(), "{ctx}: thread lost");
    }
    // The label's usage count follows its edges.
    if let Ok(l) = store.labels().get("default", "label_faults") {
        let live = ["a", "b", "c"].iter().filter(|id| get(id).is_some()).count() as u64;
        assert_eq!(l.usage_count, live, "{ctx}: label usage");
    }
}

fn run(fault: Fault, encrypted: bool) -> (u64, u64) {
    // A clean run counts the operations.
    let dir = tempfile::tempdir().unwrap();
    let ops = Arc::new(AtomicU64::new(0));
    let total = {
        let store = KnowledgeStore::open(config(dir.path(), encrypted, ops.clone(), u64::MAX, Fault::Once)).unwrap();
        let (mut acked, mut errors) = (Vec::new(), Vec::new());
        workload(&store, &mut acked, &mut errors);
        assert!(errors.is_empty(), "{errors:?}");
        drop(store);
        ops.load(Ordering::SeqCst)
    };
    let mut failures_seen = 0;
    for n in 1..=total {
        let dir = tempfile::tempdir().unwrap();
        let ops = Arc::new(AtomicU64::new(0));
        let (mut acked, mut errors) = (Vec::new(), Vec::new());
        let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| {
            match KnowledgeStore::open(config(dir.path(), encrypted, ops.clone(), n, fault)) {
                Ok(store) => {
                    workload(&store, &mut acked, &mut errors);
                    drop(store);
                }
                Err(e) => errors.push(e.kind()),
            }
        }));
        assert!(outcome.is_ok(), "{fault:?}: a panic at op {n}");
        for k in &errors {
            assert!(matches!(k, ErrorKind::Io | ErrorKind::StorageFull), "{fault:?} at op {n}: error kind {k:?}");
            if fault == Fault::DiskFull && *k == ErrorKind::StorageFull {
                failures_seen += 1;
            }
        }
        if !errors.is_empty() && fault == Fault::Once {
            failures_seen += 1;
        }
        // Reopen on the plain file: it opens, and holds what was acknowledged.
        let store = KnowledgeStore::open(plain_config(dir.path(), encrypted))
            .unwrap_or_else(|e| panic!("{fault:?}: reopen after a fault at op {n} failed: {}", e.chain()));
        verify(&store, &acked, n, fault);
    }
    (total, failures_seen)
}

#[test]
fn every_single_io_failure_leaves_the_committed_state() {
    let (total, failed_runs) = run(Fault::Once, false);
    println!("faults: EIO at each of {total} operations; {failed_runs} runs saw a failure; 0 panics, 0 bad reopens");
    assert!(failed_runs > 0);
}

#[test]
fn a_full_disk_gives_storage_full_and_loses_nothing_acknowledged() {
    let (total, full) = run(Fault::DiskFull, false);
    println!("faults: disk full from each of {total} operations; {full} StorageFull errors; 0 panics, 0 bad reopens");
    assert!(full > 0);
}

#[test]
fn every_single_io_failure_under_an_encrypted_store_leaves_the_committed_state() {
    let (total, failed_runs) = run(Fault::Once, true);
    println!("faults (encrypted): EIO at each of {total} operations; {failed_runs} runs saw a failure");
    assert!(failed_runs > 0);
}

#[test]
fn a_full_disk_under_an_encrypted_store_loses_nothing_acknowledged() {
    let (total, full) = run(Fault::DiskFull, true);
    println!("faults (encrypted): disk full from each of {total} operations; {full} StorageFull errors");
    assert!(full > 0);
}
