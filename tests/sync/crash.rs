//! Crash safety of sync (docs/sync.md): a device is killed with SIGKILL at random moments while it applies
//! other devices' segments from the folder, writes its own and takes local writes. After every kill the store
//! is reopened and checked: every acknowledged local write is there, and the other device's thread holds
//! exactly the messages of a whole number of its segments, none twice. At the end both devices sync to rest and
//! must hold the same replicated state: no change was lost or applied twice.
//!
//! The killed device is this test binary, started with `--ignored --exact crash::sync_device_child` and
//! `ENGRAM_SYNC_CRASH_DIR` / `ENGRAM_SYNC_CRASH_FOLDER`. `ENGRAM_SYNC_CRASH_CYCLES` sets the number of kill
//! cycles (default 200).
#![cfg(unix)]

use std::collections::BTreeSet;
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use engram::{AppendMessages, KnowledgeStore, MemoryPatch, NewMemory, NewMessage, NewThread, StoreConfig};

#[path = "../common/ack_child.rs"]
mod ack_child;
#[path = "../common/splitmix.rs"]
mod splitmix;
use ack_child::AckChild;
use splitmix::mix;

fn open(dir: &Path) -> KnowledgeStore {
    KnowledgeStore::open(StoreConfig::new(dir)).expect("open the store")
}

fn message(text: String) -> NewMessage {
    NewMessage { role: "user".into(), content: text, timestamp: None, metadata: None }
}

fn note(id: &str) -> String {
    format!("crash note {id} about {}", ["tea", "bees", "maps", "rust"][id.len() % 4])
}

/// The device that is killed: runs only as the child of `a_device_killed_while_it_syncs_loses_and_repeats_nothing`.
/// It syncs, writes a memory and appends a message, and acknowledges each write after its call returned.
#[test]
#[ignore = "the child process of a_device_killed_while_it_syncs_loses_and_repeats_nothing"]
fn sync_device_child() {
    let Ok(dir) = std::env::var("ENGRAM_SYNC_CRASH_DIR") else { return };
    let cycle = std::env::var("ENGRAM_SYNC_CRASH_CYCLE").unwrap_or_default();
    let store = open(Path::new(&dir));
    let out = std::io::stdout();
    let ack = |line: String| {
        let mut o = out.lock();
        let _ = writeln!(o, "ACK:{line}");
        let _ = o.flush();
    };
    ack("OPEN".into());
    let started = Instant::now();
    let mut n = 0u64;
    while started.elapsed() < Duration::from_secs(20) {
        n += 1;
        match store.sync().sync_folder() {
            Ok(r) => ack(format!("PASS {}", r.applied_segments)),
            Err(e) => ack(format!("ERROR {e}")),
        }
        let id = format!("b{cycle}-{n}");
        if store.memories().create(NewMemory { id: Some(id.clone()), content: note(&id), ..Default::default() }).is_ok()
        {
            ack(format!("MEM {id}"));
        }
        let append = AppendMessages { messages: vec![message(format!("b says {id}"))], ..Default::default() };
        if store.threads().append("bt", None, append).is_ok() {
            ack(format!("MSG {id}"));
        }
    }
}

/// A thread's message contents on `store`, in order; panics on a duplicate order index or id.
fn thread_texts(store: &KnowledgeStore, thread: &str) -> Vec<String> {
    let Ok((t, ms)) = store.threads().all_messages(thread, None) else { return vec![] };
    assert_eq!(t.message_count, ms.len() as u64, "thread {thread}: the count follows the messages");
    let ids: BTreeSet<&str> = ms.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(ids.len(), ms.len(), "thread {thread}: an id twice");
    ms.into_iter().map(|m| m.content).collect()
}

#[test]
fn a_device_killed_while_it_syncs_loses_and_repeats_nothing() {
    let cycles: usize = std::env::var("ENGRAM_SYNC_CRASH_CYCLES").ok().and_then(|v| v.parse().ok()).unwrap_or(200);
    let (da, db, folder) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = open(da.path());
    a.threads().create(NewThread { thread_id: Some("at".into()), deduplicate: true, ..Default::default() }).unwrap();
    let code = a.sync().init_folder(folder.path()).unwrap();
    {
        let b = open(db.path());
        b.threads()
            .create(NewThread { thread_id: Some("bt".into()), deduplicate: true, ..Default::default() })
            .unwrap();
        b.sync().join_folder(folder.path(), &code).unwrap();
    }
    let mut rng = 0x5eed_u64;
    // The number of messages of a's thread after each of a's passes: b may hold any one of them, never another.
    let mut a_totals = vec![0usize];
    let mut acked_mems: Vec<String> = Vec::new();
    let mut acked_msgs: Vec<String> = Vec::new();
    // Cycles killed before the device's first pass returned (while it applied a's new segment), and after.
    let (mut in_first_pass, mut later) = (0usize, 0usize);
    for cycle in 0..cycles {
        // a writes a segment's worth: memories, messages, an edit.
        for i in 0..4 {
            let id = format!("a{cycle}-{i}");
            a.memories().create(NewMemory { id: Some(id.clone()), content: note(&id), ..Default::default() }).unwrap();
        }
        if cycle > 0 {
            let p = MemoryPatch { content: Some(format!("edited in cycle {cycle}")), ..Default::default() };
            a.memories().update(&format!("a{}-0", cycle - 1), p, None).unwrap();
        }
        let msgs = (0..3).map(|i| message(format!("a says {cycle}.{i}"))).collect();
        a.threads().append("at", None, AppendMessages { messages: msgs, ..Default::default() }).unwrap();
        a.sync().sync_folder().unwrap();
        a_totals.push(a_totals.last().copied().unwrap_or(0) + 3);

        let child = AckChild::start(
            "crash::sync_device_child",
            &[
                ("ENGRAM_SYNC_CRASH_DIR", db.path().to_string_lossy().into_owned()),
                ("ENGRAM_SYNC_CRASH_CYCLE", cycle.to_string()),
            ],
        );
        // Its first pass applies a's new segment: kill anywhere from before it to a few passes later.
        std::thread::sleep(Duration::from_millis(mix(&mut rng) % 300));
        let lines = child.kill();
        let new_mems = lines.iter().filter(|l| l.starts_with("MEM ")).count();
        if lines.iter().any(|l| l.starts_with("PASS")) {
            later += 1;
        } else {
            in_first_pass += 1;
        }
        for line in lines {
            match line.split_once(' ') {
                Some(("MEM", id)) => acked_mems.push(id.to_string()),
                Some(("MSG", id)) => acked_msgs.push(format!("b says {id}")),
                Some(("ERROR", e)) => panic!("cycle {cycle}: a sync pass failed: {e}"),
                _ => {}
            }
        }
        // Reopened: every acknowledged write is there, and a's thread holds whole segments, none twice.
        let b = open(db.path());
        // This cycle's acknowledged memories and 10 earlier ones (all of them at the end).
        let earlier = acked_mems.len() - new_mems;
        let sample = (0..10.min(earlier)).map(|_| (mix(&mut rng) as usize) % earlier.max(1));
        for i in sample.chain(earlier..acked_mems.len()) {
            let id = &acked_mems[i];
            let got =
                b.memories().get(id, None).unwrap_or_else(|e| panic!("cycle {cycle}: acknowledged {id} lost: {e}"));
            assert_eq!(got.memory.content, note(id));
        }
        let bt: BTreeSet<String> = thread_texts(&b, "bt").into_iter().collect();
        for m in &acked_msgs {
            assert!(bt.contains(m), "cycle {cycle}: acknowledged message {m} lost");
        }
        let at = thread_texts(&b, "at");
        assert!(
            a_totals.contains(&at.len()),
            "cycle {cycle}: b holds {} of a's messages, not whole segments",
            at.len()
        );
        let distinct: BTreeSet<&String> = at.iter().collect();
        assert_eq!(distinct.len(), at.len(), "cycle {cycle}: a message of a applied twice");
    }
    // To rest: b takes everything a wrote, a takes everything b wrote; their replicated states are equal.
    let b = open(db.path());
    b.sync().sync_folder().unwrap();
    a.sync().sync_folder().unwrap();
    b.sync().sync_folder().unwrap();
    assert_eq!(thread_texts(&b, "at").len(), *a_totals.last().unwrap());
    assert_eq!(thread_texts(&a, "bt"), thread_texts(&b, "bt"));
    let (sa, sb) = (a.sync().replicated_state().unwrap(), b.sync().replicated_state().unwrap());
    let (ka, kb): (BTreeSet<&String>, BTreeSet<&String>) =
        (sa.iter().map(|x| &x.0).collect(), sb.iter().map(|x| &x.0).collect());
    assert!(
        sa == sb,
        "the devices differ after syncing to rest ({} and {} items): only on a {:?}, only on b {:?}",
        sa.len(),
        sb.len(),
        ka.difference(&kb).take(5).collect::<Vec<_>>(),
        kb.difference(&ka).take(5).collect::<Vec<_>>()
    );
    for id in &acked_mems {
        assert_eq!(b.memories().get(id, None).map(|v| v.memory.content).ok(), Some(note(id)), "{id} on b");
        assert!(a.memories().get(id, None).is_ok(), "{id} did not reach a");
    }
    println!(
        "sync crash: {cycles} SIGKILL cycles ({in_first_pass} before the first pass returned, {later} after), {} acknowledged memories and {} messages of b intact and on a, {} of a's messages on b, no pass failed",
        acked_mems.len(),
        acked_msgs.len(),
        a_totals.last().unwrap()
    );
}
