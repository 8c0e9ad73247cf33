//! Format upgrades: a format-1 store opens in this release (migrated in one transaction, a backup copy of the
//! redb file first, the upgrade in `/health`), `engram upgrade --check` reports without changing anything, a
//! newer store is refused with both versions named, and a process killed (SIGKILL) at random points of a
//! migration leaves either the old store, which migrates at the next open, or the new one: never a store that
//! fails to open, never a lost or changed memory. On redb and, with `ENGRAM_TEST_PG`, on PostgreSQL.
//!
//! `ENGRAM_UPGRADE_KILLS` sets the kill points on redb (default 50); PostgreSQL runs 20.
#![cfg(unix)]

mod backend;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use engram::storage::tables::META;
use engram::storage::{Db, Durability, Readable};
use engram::store::upgrade::FORMAT_VERSION;
#[cfg(feature = "postgres")]
use engram::store::upgrade::upgrade_store;
use engram::store::upgrade::{downgrade_to_format_1, plan_for};
use engram::{KnowledgeStore, NewMemory, StoreConfig};

#[path = "common/splitmix.rs"]
mod splitmix;

fn fixture_v1() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/stores/v1/redb/engram.redb")
}

fn sha(path: &Path) -> Vec<u8> {
    use sha2::Digest;
    sha2::Sha256::digest(std::fs::read(path).expect("read the file")).to_vec()
}

fn stored_format(db: &Db) -> Option<u32> {
    let rtx = db.read().expect("read");
    let t = rtx.table(META).expect("meta");
    t.get("format_version").expect("get").map(|v| u32::from_le_bytes(v.value().try_into().expect("4 bytes")))
}

/// Every memory of every state as `id -> (content, title, labels)`, read through the library.
fn memories(store: &KnowledgeStore) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for space in store.spaces().list().expect("spaces") {
        let q = engram::ListQuery {
            space_id: space.id.clone(),
            filter: engram::MemoryFilter {
                states: engram::model::MemoryState::ALL.to_vec(),
                include_history: true,
                include_expired: true,
                ..Default::default()
            },
            limit: 100,
            offset: 0,
        };
        let mut offset = 0;
        loop {
            let page = store.memories().list(&engram::ListQuery { offset, ..q.clone() }).expect("list");
            for v in &page.items {
                let m = &v.memory;
                out.insert(m.id.clone(), format!("{}|{}|{}|{:?}", m.content, m.title, m.version, v.label_ids));
            }
            if page.items.len() < 100 {
                break;
            }
            offset += 100;
        }
    }
    out
}

#[test]
fn a_format_1_store_opens_migrated_with_a_backup_and_check_changes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("engram.redb");
    std::fs::copy(fixture_v1(), &file).expect("copy the fixture");
    let before = sha(&file);
    let config = StoreConfig::new(dir.path());

    let plan = plan_for(&config).expect("plan");
    assert_eq!((plan.found, plan.current, plan.refused), (Some(1), FORMAT_VERSION, false));
    assert_eq!(plan.steps.len() as u32, FORMAT_VERSION - 1);
    assert_eq!((plan.steps[0].from, plan.steps[0].to), (1, 2));
    assert!(plan.steps[0].records >= 10, "the fixture's memories: {:?}", plan.steps[0]);
    assert_eq!(plan.backup.as_deref(), Some(dir.path().join("engram.redb.format-1.bak").as_path()));
    let out = Command::new(env!("CARGO_BIN_EXE_engram"))
        .args(["upgrade", "--check", "--data-dir"])
        .arg(dir.path())
        .output()
        .expect("engram upgrade --check runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("format 1") && text.contains("1 -> 2") && text.contains("nothing was changed"), "{text}");
    assert_eq!(sha(&file), before, "--check and the plan change nothing");

    let store = KnowledgeStore::open(config.clone()).expect("the format-1 store opens");
    let h = store.admin().health().expect("health");
    assert_eq!(h.format_version, FORMAT_VERSION);
    let up = h.last_upgrade.expect("the upgrade is recorded");
    assert_eq!((up.from, up.to, up.records), (1, FORMAT_VERSION, plan.steps[0].records));
    let backup = PathBuf::from(up.backup.expect("a backup on redb"));
    assert_eq!(backup, dir.path().join("engram.redb.format-1.bak"));
    let seen = memories(&store);
    assert_eq!(seen.len() as u64, up.records, "every memory record was rewritten and reads back");
    // The fixture's vectors came from the hashing embedder of its release: the built-in static model re-embeds
    // them in the background, and `/health` names the embedder they came from.
    assert!(store.admin().wait_for_indexes(Duration::from_secs(60)), "re-embedding finishes");
    let h = store.admin().health().expect("health");
    assert_eq!(h.reembed.from.as_deref(), Some("engram-char3-hash-v1-256:256"));
    assert_eq!((h.reindex_pending, h.reembed.running, h.reembed.error.as_deref()), (0, false, None));
    assert!(h.reembed.total > 0 && h.reembed.done == h.reembed.total, "{:?}", h.reembed);
    assert_eq!(h.embedder, "engram-static-minilm-l6-v1-256");
    drop(store);

    // The backup is the format-1 store as it was: it opens (and migrates) too.
    let other = tempfile::tempdir().expect("tempdir");
    std::fs::copy(&backup, other.path().join("engram.redb")).expect("copy the backup");
    let plan = plan_for(&StoreConfig::new(other.path())).expect("plan of the backup");
    assert_eq!((plan.found, plan.steps[0].records), (Some(1), up.records));
    let restored = KnowledgeStore::open(StoreConfig::new(other.path())).expect("the backup opens");
    assert_eq!(memories(&restored), seen);
    // Reopening the migrated store changes nothing more.
    let again = KnowledgeStore::open(config).expect("reopen");
    assert_eq!(again.admin().health().expect("health").last_upgrade.map(|u| u.at), Some(up.at));
}

#[test]
fn a_store_from_a_newer_release_is_refused_and_left_alone() {
    let dir = tempfile::tempdir().expect("tempdir");
    drop(KnowledgeStore::open(StoreConfig::new(dir.path())).expect("create"));
    {
        let db = Db::open(&dir.path().join("engram.redb"), 1 << 20, None).expect("open the file");
        let txn = db.write(Durability::Immediate).expect("write");
        txn.table(META).expect("meta").put("format_version", 9u32.to_le_bytes().as_slice()).expect("put");
        txn.commit().expect("commit");
    }
    let snapshot = dir.path().join("indexes.snapshot");
    std::fs::remove_file(&snapshot).expect("the first close wrote an index snapshot");
    let Err(e) = KnowledgeStore::open(StoreConfig::new(dir.path())) else { panic!("a newer store opened") };
    assert_eq!(e.kind(), engram::ErrorKind::Corrupt);
    assert!(!snapshot.exists(), "the refused open saved no (empty) index snapshot");
    let msg = e.to_string();
    assert!(msg.contains("format 9") && msg.contains(&format!("1 to {FORMAT_VERSION}")), "{msg}");
    let plan = plan_for(&StoreConfig::new(dir.path())).expect("plan");
    assert!(plan.refused && plan.steps.is_empty());
    let db = Db::open(&dir.path().join("engram.redb"), 1 << 20, None).expect("open the file");
    assert_eq!(stored_format(&db), Some(9), "nothing was changed");
}

/// A store of `n` memories (some labelled, some with an expiry) at format 1, and what it holds.
fn format_1_store(config: &StoreConfig, n: usize) -> BTreeMap<String, String> {
    let store = KnowledgeStore::open(config.clone()).expect("open");
    for chunk in (0..n).collect::<Vec<_>>().chunks(500) {
        let batch: Vec<NewMemory> = chunk
            .iter()
            .map(|i| NewMemory {
                id: Some(format!("m{i:05}")),
                content: format!("Memory {i}: the {} notebook is on shelf {}", ["red", "blue", "green"][i % 3], i % 97),
                labels: (i % 4 == 0).then(|| vec!["shelf".to_string()]),
                ..Default::default()
            })
            .collect();
        store.memories().create_many(batch).expect("write");
    }
    let seen = memories(&store);
    drop(store);
    assert_eq!(downgrade_to_format_1(config).expect("downgrade") as usize, n);
    seen
}

/// Runs `engram upgrade` on `config` and SIGKILLs it after `after` (or lets it finish when `after` is None).
/// Returns how long it ran.
fn upgrade_killed_after(dir: &Path, database: Option<&str>, after: Option<Duration>) -> Duration {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_engram"));
    cmd.args(["upgrade", "--data-dir"]).arg(dir).env("ENGRAM_LOG", "error").stdout(Stdio::null()).stderr(Stdio::null());
    if let Some(url) = database {
        cmd.args(["--database-url", url]);
    }
    let started = Instant::now();
    let mut child = cmd.spawn().expect("engram upgrade starts");
    match after {
        None => {
            assert!(child.wait().expect("wait").success(), "engram upgrade succeeds");
        }
        Some(d) => {
            while started.elapsed() < d {
                if child.try_wait().expect("try_wait").is_some() {
                    break;
                }
                std::thread::sleep(Duration::from_micros(200));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
    started.elapsed()
}

/// The kill-point loop: each round starts from a format-1 store (`reset`), kills `engram upgrade` at a random
/// point of its run, then opens the store: it must open, be at this release's format, and hold exactly
/// `want`. Returns (old, new): how many kills left the old store and how many the new one.
fn kill_rounds(
    rounds: usize,
    config_of: &dyn Fn(usize) -> StoreConfig,
    reset: &dyn Fn(usize, &StoreConfig),
    want: &BTreeMap<String, String>,
    full: Duration,
) -> (usize, usize) {
    let mut rng = splitmix::SplitMix(0x5eed_0033);
    let (mut old, mut new) = (0, 0);
    for round in 0..rounds {
        let config = config_of(round);
        reset(round, &config);
        let at = Duration::from_secs_f64(full.as_secs_f64() * 1.2 * (rng.next() >> 11) as f64 / (1u64 << 53) as f64);
        let ran = upgrade_killed_after(&config.data_dir, config.database_url.as_deref(), Some(at));
        if std::env::var_os("ENGRAM_UPGRADE_TRACE").is_some() {
            eprintln!("round {round}: kill at {at:?}, ran {ran:?}");
        }
        match plan_for(&config).expect("the store can be inspected after the kill").found {
            Some(1) => old += 1,
            Some(f) if f == FORMAT_VERSION => new += 1,
            other => panic!("round {round}: a kill at {at:?} left format {other:?}"),
        }
        let store = KnowledgeStore::open(config.clone())
            .unwrap_or_else(|e| panic!("round {round}: the store killed at {at:?} does not open: {e}"));
        assert_eq!(store.admin().health().expect("health").format_version, FORMAT_VERSION);
        let got = memories(&store);
        assert!(
            got == *want,
            "round {round}: killed at {at:?}, {} memories of {} read back equal",
            got.len(),
            want.len()
        );
    }
    (old, new)
}

#[test]
fn sigkill_during_a_redb_migration_leaves_the_old_store_or_the_new_one() {
    let rounds: usize = std::env::var("ENGRAM_UPGRADE_KILLS").ok().and_then(|v| v.parse().ok()).unwrap_or(50);
    let work = tempfile::tempdir().expect("tempdir");
    let master = work.path().join("master");
    let want = format_1_store(&StoreConfig::new(&master), 3000);
    let original = master.join("engram.redb");
    let round_dir = |round: usize| work.path().join(format!("round-{round}"));
    let copy_into = |dir: &Path| {
        std::fs::create_dir_all(dir).expect("mkdir");
        std::fs::copy(&original, dir.join("engram.redb")).expect("copy");
    };
    // One uninterrupted run gives the span the kill points are drawn from.
    let timing = work.path().join("timing");
    copy_into(&timing);
    let full = upgrade_killed_after(&timing, None, None);
    let (old, new) = kill_rounds(
        rounds,
        &|round| StoreConfig::new(round_dir(round)),
        &|_, config| copy_into(&config.data_dir),
        &want,
        full,
    );
    eprintln!("redb: {rounds} kill points over {full:?}: {old} left the format-1 store, {new} the new one");
    assert_eq!(old + new, rounds);
}

#[cfg(feature = "postgres")]
#[test]
fn sigkill_during_a_postgres_migration_leaves_the_old_store_or_the_new_one() {
    if backend::pg_server().is_none() {
        return;
    }
    let work = tempfile::tempdir().expect("tempdir");
    let config = StoreConfig::new(work.path()).database(backend::pg_url_for(work.path()));
    let want = format_1_store(&config, 1500);
    let full = upgrade_killed_after(work.path(), config.database_url.as_deref(), None);
    let reset = |_: usize, c: &StoreConfig| {
        downgrade_to_format_1(c).expect("back to format 1");
    };
    let (old, new) = kill_rounds(20, &|_| config.clone(), &reset, &want, full);
    eprintln!("postgres: 20 kill points over {full:?}: {old} left the format-1 store, {new} the new one");

    // Two processes opening at once: one migrates, the other waits for the writers' lock and finds it current.
    downgrade_to_format_1(&config).expect("back to format 1");
    let (a, b) = std::thread::scope(|s| {
        let one = s.spawn(|| upgrade_store(&config).expect("first"));
        let two = s.spawn(|| upgrade_store(&config).expect("second"));
        (one.join().expect("join"), two.join().expect("join"))
    });
    assert_eq!(usize::from(a.is_some()) + usize::from(b.is_some()), 1, "exactly one migrated: {a:?} {b:?}");
    assert!(a.or(b).is_some_and(|r| r.backup.is_none() && r.records == 1500));
}
