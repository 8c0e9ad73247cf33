//! Sync through a shared folder (docs/sync.md): sealed segment files, partial files skipped until whole, damaged
//! or foreign segments refused with the store unchanged, a crash between writing a segment and recording it.

use engram::{KnowledgeStore, MemoryPatch, NewMemory, StoreConfig};

fn open(dir: &std::path::Path) -> KnowledgeStore {
    KnowledgeStore::open(StoreConfig::new(dir)).unwrap()
}

fn mem(id: &str, content: &str) -> NewMemory {
    NewMemory { id: Some(id.into()), content: content.into(), ..Default::default() }
}

fn content(s: &KnowledgeStore, id: &str) -> Option<String> {
    s.memories().get(id, None).ok().map(|v| v.memory.content)
}

/// The segment files of `store`'s device in `folder`, in number order.
fn segments(folder: &std::path::Path, store: &KnowledgeStore) -> Vec<std::path::PathBuf> {
    let dir = folder.join(store.admin().device_id().unwrap().to_hex());
    let mut out: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "seg"))
        .collect();
    out.sort();
    out
}

#[test]
fn two_devices_meet_through_a_folder_and_converge() {
    let (da, db, folder) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (a, b) = (open(da.path()), open(db.path()));
    a.memories().create(mem("m1", "The dentist is on Tuesday")).unwrap();
    let code = a.sync().init_folder(folder.path()).unwrap();
    assert!(code.starts_with("engram-sync-1-"), "{code}");
    assert!(b.sync().join_folder(folder.path(), "not a code").is_err());
    b.sync().join_folder(folder.path(), &code).unwrap();
    b.memories().create(mem("m2", "Renew the passport in May")).unwrap();

    let ra = a.sync().sync_folder().unwrap();
    assert_eq!(ra.written_segments, 1);
    assert_eq!(ra.applied_segments, 0, "b has written nothing yet");
    let rb = b.sync().sync_folder().unwrap();
    assert_eq!((rb.written_segments, rb.applied_segments), (1, 1));
    let p = b.sync().status().unwrap().progress;
    assert_eq!((p.running, p.segments_done, p.segments_total), (false, 1, 1), "the last pass's progress");
    assert_eq!(content(&b, "m1").as_deref(), Some("The dentist is on Tuesday"));
    a.sync().sync_folder().unwrap();
    assert_eq!(content(&a, "m2").as_deref(), Some("Renew the passport in May"));
    // Each device keeps its own files only, and the log rows a segment holds leave the store.
    assert_eq!(a.sync().status().unwrap().pending_changes, 0);
    a.memories()
        .update(
            "m1",
            MemoryPatch { content: Some("The dentist moved to Wednesday".into()), ..Default::default() },
            None,
        )
        .unwrap();
    assert_eq!(a.sync().status().unwrap().pending_changes, 1);
    a.sync().sync_folder().unwrap();
    b.sync().sync_folder().unwrap();
    a.sync().sync_folder().unwrap();
    assert_eq!(content(&b, "m1").as_deref(), Some("The dentist moved to Wednesday"));
    assert_eq!(a.sync().replicated_state().unwrap(), b.sync().replicated_state().unwrap());
    let st = b.sync().status().unwrap();
    assert_eq!(st.peers.len(), 1);
    assert_eq!(st.peers[0].device_id, a.admin().device_id().unwrap().to_hex());
    assert!(st.peers[0].last_seen.is_some() && st.peers[0].error.is_none() && st.peers[0].cursor >= 2);
    // Nothing new: nothing written, nothing applied.
    let quiet = a.sync().sync_folder().unwrap();
    assert_eq!((quiet.written_segments, quiet.applied_segments), (0, 0));
    // A folder that is gone (an unmounted drive) is an error, and is not made again on the local disk.
    let moved = folder.path().with_extension("away");
    std::fs::rename(folder.path(), &moved).unwrap();
    let e = a.sync().sync_folder().unwrap_err();
    assert_eq!(e.kind(), engram::ErrorKind::Io, "{e}");
    assert!(e.to_string().contains("not there"), "{e}");
    assert!(!folder.path().exists());
    std::fs::rename(&moved, folder.path()).unwrap();
    a.sync().sync_folder().unwrap();
}

#[test]
fn partial_tampered_and_foreign_segments_change_nothing_until_whole_and_authentic() {
    let (da, db, folder) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (a, b) = (open(da.path()), open(db.path()));
    let code = a.sync().init_folder(folder.path()).unwrap();
    b.sync().join_folder(folder.path(), &code).unwrap();
    a.memories().create(mem("m1", "The safe code is 4711")).unwrap();
    a.sync().sync_folder().unwrap();
    let seg = segments(folder.path(), &a).pop().unwrap();
    let whole = std::fs::read(&seg).unwrap();
    let before = b.sync().replicated_state().unwrap();

    // The folder tool is still copying: skipped, reported as pending, no error.
    std::fs::write(&seg, &whole[..whole.len() / 2]).unwrap();
    let r = b.sync().sync_folder().unwrap();
    assert_eq!(r.applied_segments, 0);
    assert!(r.peers[0].pending && r.peers[0].error.is_none(), "{:?}", r.peers);
    assert_eq!(b.sync().replicated_state().unwrap(), before);

    // One flipped byte: refused and reported, the store unchanged.
    let mut flipped = whole.clone();
    let at = flipped.len() - 20;
    flipped[at] ^= 1;
    std::fs::write(&seg, &flipped).unwrap();
    let r = b.sync().sync_folder().unwrap();
    assert_eq!(r.applied_segments, 0);
    assert!(r.peers[0].error.as_deref().is_some_and(|e| e.contains("authenticate")), "{:?}", r.peers);
    assert!(b.sync().status().unwrap().peers[0].error.is_some(), "the error is kept for status");
    assert_eq!(b.sync().replicated_state().unwrap(), before);

    // A device of another group (another key) writing into the folder: refused the same way.
    let (dc, other_folder) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let c = open(dc.path());
    c.sync().init_folder(other_folder.path()).unwrap();
    c.memories().create(mem("m9", "Not from this group")).unwrap();
    c.sync().sync_folder().unwrap();
    let c_dir = c.admin().device_id().unwrap().to_hex();
    std::fs::create_dir_all(folder.path().join(&c_dir)).unwrap();
    for s in segments(other_folder.path(), &c) {
        std::fs::copy(&s, folder.path().join(&c_dir).join(s.file_name().unwrap())).unwrap();
    }
    // Once whole and authentic, it applies.
    std::fs::write(&seg, &whole).unwrap();
    let r = b.sync().sync_folder().unwrap();
    assert_eq!(r.applied_segments, 1);
    assert_eq!(content(&b, "m1").as_deref(), Some("The safe code is 4711"));
    assert_eq!(content(&b, "m9"), None);
    let foreign = r.peers.iter().find(|p| p.device_id == c_dir).unwrap();
    assert!(foreign.error.as_deref().is_some_and(|e| e.contains("another key")), "{foreign:?}");
}

#[test]
fn a_segment_written_but_not_recorded_before_a_crash_is_recorded_not_overwritten() {
    let (da, db, folder) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let code;
    {
        let a = open(da.path());
        code = a.sync().init_folder(folder.path()).unwrap();
        a.memories().create(mem("m1", "First")).unwrap();
        a.sync().sync_folder().unwrap();
    }
    // The crash: m2 committed, then segment 2 written, then the process dies before the store records it. The
    // store file is restored to its state before the sync (what a crash at that point leaves).
    open(da.path()).memories().create(mem("m2", "Second")).unwrap();
    let saved = std::fs::read(da.path().join("engram.redb")).unwrap();
    open(da.path()).sync().sync_folder().unwrap();
    let a = open(da.path());
    let segs = segments(folder.path(), &a);
    assert_eq!(segs.len(), 2);
    let second = std::fs::read(&segs[1]).unwrap();
    drop(a);
    std::fs::write(da.path().join("engram.redb"), &saved).unwrap();
    let a = open(da.path());
    a.memories().create(mem("m3", "Third")).unwrap();
    a.sync().sync_folder().unwrap();
    let segs = segments(folder.path(), &a);
    assert_eq!(std::fs::read(&segs[1]).unwrap(), second, "segment 2 is never rewritten");
    let b = open(db.path());
    b.sync().join_folder(folder.path(), &code).unwrap();
    b.sync().sync_folder().unwrap();
    for (id, text) in [("m1", "First"), ("m2", "Second"), ("m3", "Third")] {
        assert_eq!(content(&b, id).as_deref(), Some(text));
    }
    assert_eq!(segments(folder.path(), &a).len(), 3);
}
