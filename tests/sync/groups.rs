//! A sync group over time (docs/sync.md, "Heads, removing a device and key rotation" and "Compaction"): a device
//! removed with the key rotated, and old segments compacted into a snapshot that a later device starts from.

use std::path::{Path, PathBuf};

use engram::{MemoryPatch, NewMemory};

use super::Device;

fn device() -> Device {
    Device::open()
}

fn mem(id: &str, content: &str) -> NewMemory {
    NewMemory { id: Some(id.into()), content: content.into(), ..Default::default() }
}

fn content(d: &Device, id: &str) -> Option<String> {
    d.store.memories().get(id, None).ok().map(|v| v.memory.content)
}

fn hex(d: &Device) -> String {
    d.store.admin().device_id().unwrap().to_hex()
}

fn pass(d: &Device) -> engram::FolderReport {
    d.store.sync().sync_folder().unwrap()
}

/// Passes on every device, `rounds` times.
fn rounds(devices: &[&Device], rounds: usize) {
    for _ in 0..rounds {
        for d in devices {
            pass(d);
        }
    }
}

fn files(folder: &Path, d: &Device, ext: &str) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(folder.join(hex(d)))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect();
    out.sort();
    out
}

fn folder_bytes(folder: &Path) -> u64 {
    let mut total = 0;
    for d in std::fs::read_dir(folder).unwrap() {
        for f in std::fs::read_dir(d.unwrap().path()).unwrap() {
            total += f.unwrap().metadata().unwrap().len();
        }
    }
    total
}

#[test]
fn a_removed_device_is_refused_cannot_read_on_and_a_later_device_reads_everything() {
    let folder = tempfile::tempdir().unwrap();
    let f = folder.path();
    let (a, b, c) = (device(), device(), device());
    let code = a.store.sync().init_folder(f).unwrap();
    b.store.sync().join_folder(f, &code).unwrap();
    c.store.sync().join_folder(f, &code).unwrap();
    a.store.memories().create(mem("ma", "Written on the laptop")).unwrap();
    c.store.memories().create(mem("mc", "Written on the old phone")).unwrap();
    rounds(&[&a, &b, &c], 2);
    assert_eq!(content(&b, "mc").as_deref(), Some("Written on the old phone"));

    // A device that has not synced since it joined has no head: no key can be sealed to it yet.
    let late = device();
    late.store.sync().join_folder(f, &code).unwrap();
    let e = a.store.sync().remove_device(&hex(&c)).unwrap_err();
    assert_eq!(e.kind(), engram::ErrorKind::Conflict, "{e}");
    assert!(e.to_string().contains(&hex(&late)), "{e}");
    rounds(&[&late], 1);

    assert_eq!(a.store.sync().remove_device(&hex(&a)).unwrap_err().kind(), engram::ErrorKind::InvalidInput);
    assert_eq!(
        a.store.sync().remove_device("00112233445566778899aabbccddeeff").unwrap_err().kind(),
        engram::ErrorKind::NotFound
    );
    let r = a.store.sync().remove_device(&hex(&c)).unwrap();
    assert_eq!(r.epoch, 1);
    assert_eq!(r.device_id, hex(&c));
    let mut kept = vec![hex(&a), hex(&b), hex(&late)];
    kept.sort();
    let mut got = r.kept.clone();
    got.sort();
    assert_eq!(got, kept);
    assert!(r.pairing_code.starts_with("engram-sync-2-1-"), "{}", r.pairing_code);
    let st = a.store.sync().status().unwrap();
    assert_eq!((st.key_epoch, st.removed.get(&hex(&c)).copied()), (1, Some(r.last_accepted_segment)));

    // The removed device writes on before its folder shows it the rotation (the folder tool is slow): its
    // new segment is refused by every device, and changes nothing.
    let mine = f.join(hex(&a));
    let aside = tempfile::tempdir().unwrap();
    for name in ["0000000001.key", "0000000001.rot"] {
        std::fs::rename(mine.join(name), aside.path().join(name)).unwrap();
    }
    c.store.memories().create(mem("mc2", "Written after it was removed")).unwrap();
    assert_eq!(pass(&c).written_segments, 1);
    for name in ["0000000001.key", "0000000001.rot"] {
        std::fs::rename(aside.path().join(name), mine.join(name)).unwrap();
    }
    a.store.memories().create(mem("ma2", "Written after the rotation")).unwrap();
    rounds(&[&a, &b, &late], 2);
    for d in [&a, &b, &late] {
        assert_eq!(content(d, "mc2"), None, "a removed device's later segment is refused");
        let st = d.store.sync().status().unwrap();
        assert_eq!(st.key_epoch, 1);
        let p = st.peers.iter().find(|p| p.device_id == hex(&c)).unwrap();
        assert!(p.error.as_deref().is_some_and(|e| e.contains("removed")), "{p:?}");
        assert_eq!(p.cursor, r.last_accepted_segment);
    }
    assert_eq!(content(&b, "ma2").as_deref(), Some("Written after the rotation"));
    assert_eq!(content(&late, "ma2").as_deref(), Some("Written after the rotation"));

    // The removed device cannot go on: it cannot open the new key, and says so.
    let rc = pass(&c);
    assert!(rc.error.as_deref().is_some_and(|e| e.contains("removed")), "{rc:?}");
    assert_eq!(content(&c, "ma2"), None);
    assert!(c.store.sync().status().unwrap().error.is_some());
    // Nor does the old pairing code let a new device in.
    let old = device();
    old.store.sync().join_folder(f, &code).unwrap();
    assert!(pass(&old).error.is_some());
    assert_eq!(content(&old, "ma2"), None);

    // A device joining with the new code learns the older keys: it reads everything before and after the
    // rotation, the removed device's segments up to its last accepted one, and nothing after.
    let d = device();
    d.store.sync().join_folder(f, &r.pairing_code).unwrap();
    rounds(&[&d, &a, &b, &late, &d], 1);
    assert_eq!(d.store.sync().status().unwrap().key_epoch, 1);
    assert_eq!(content(&d, "ma").as_deref(), Some("Written on the laptop"));
    assert_eq!(content(&d, "mc").as_deref(), Some("Written on the old phone"));
    assert_eq!(content(&d, "ma2").as_deref(), Some("Written after the rotation"));
    assert_eq!(content(&d, "mc2"), None);
    let want = a.store.sync().replicated_state().unwrap();
    for x in [&b, &late, &d] {
        assert_eq!(x.store.sync().replicated_state().unwrap(), want);
    }
}

#[test]
fn old_segments_are_compacted_once_every_device_read_them_and_a_later_device_starts_from_the_snapshot() {
    let folder = tempfile::tempdir().unwrap();
    let f = folder.path();
    let (a, b) = (device(), device());
    let code = a.store.sync().init_folder(f).unwrap();
    b.store.sync().join_folder(f, &code).unwrap();
    let edit = |d: &Device, id: &str, text: String| {
        let patch = MemoryPatch { content: Some(text), labels: Some(vec!["notes".into()]), ..Default::default() };
        d.store.memories().update(id, patch, None).unwrap();
    };
    // Each round a writes a memory and edits the first one; both pass, so each round is a segment of a's.
    a.store.memories().create(mem("m0", "The first note")).unwrap();
    let n = engram::COMPACT_AFTER as usize + 3;
    for i in 1..=n {
        a.store.memories().create(mem(&format!("m{i}"), &format!("Note number {i}"))).unwrap();
        edit(&a, "m0", format!("The first note, edited {i} times"));
        rounds(&[&a, &b], 1);
    }
    // Two devices edit m0 at once: a conflict, kept with the memory on both.
    edit(&a, "m0", "The laptop's version".into());
    edit(&b, "m0", "The desktop's version".into());
    let before = folder_bytes(f);
    rounds(&[&a, &b], 3);
    assert!(!b.store.sync().conflicts("m0").unwrap().is_empty());

    let snapshot = a.store.sync().status().unwrap().snapshot;
    assert!(snapshot >= engram::COMPACT_AFTER, "a compacted what b has read: {snapshot}");
    assert!(!files(f, &a, "snap").is_empty());
    let left: Vec<u64> = files(f, &a, "seg").iter().filter_map(|p| p.file_stem()?.to_str()?.parse().ok()).collect();
    assert!(left.iter().all(|s| *s > snapshot), "segments up to the snapshot are gone: {left:?}");
    let after = folder_bytes(f);
    eprintln!("folder bytes: {before} before compaction, {after} after");

    // A device that joins now starts from the snapshot and ends where the others are, conflict included.
    let late = device();
    late.store.sync().join_folder(f, &code).unwrap();
    rounds(&[&late, &a, &b, &late], 1);
    let want = a.store.sync().replicated_state().unwrap();
    assert_eq!(b.store.sync().replicated_state().unwrap(), want);
    assert_eq!(late.store.sync().replicated_state().unwrap(), want);
    assert_eq!(late.store.sync().conflicts("m0").unwrap().len(), a.store.sync().conflicts("m0").unwrap().len());
    assert_eq!(content(&late, &format!("m{n}")).as_deref(), Some(format!("Note number {n}").as_str()));
    let p = late.store.sync().status().unwrap().peers.into_iter().find(|p| p.device_id == hex(&a)).unwrap();
    assert!(p.cursor >= snapshot && p.error.is_none(), "{p:?}");
    // A damaged snapshot part is refused like a damaged segment, and changes nothing.
    let part = files(f, &a, "snap")[0].clone();
    let mut bytes = std::fs::read(&part).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(&part, &bytes).unwrap();
    let fresh = device();
    fresh.store.sync().join_folder(f, &code).unwrap();
    pass(&fresh);
    let p = fresh.store.sync().status().unwrap().peers.into_iter().find(|p| p.device_id == hex(&a)).unwrap();
    assert!(p.error.as_deref().is_some_and(|e| e.contains("snapshot")), "{p:?}");
    assert_eq!(content(&fresh, "m1"), None);
}

/// One pull of the direct transport, in process: every file `from`'s folder holds that `to`'s does not (heads
/// that differ, key rotations, snapshot parts, then segments), as `engram serve --sync-peer` moves them.
fn relay(from: &Device, to: &Device) {
    let (src, dst) = (from.store.sync(), to.store.sync());
    let me = hex(to);
    let held = dst.folder_files().unwrap();
    for (device, names) in src.folder_files().unwrap().into_iter().filter(|(d, _)| *d != me) {
        for (name, digest) in names {
            if held.get(&device).and_then(|h| h.get(&name)).is_some_and(|m| *m == digest) {
                continue;
            }
            dst.receive_file(&device, &name, &src.folder_file(&device, &name).unwrap()).unwrap();
        }
    }
    for (device, ns) in src.folder_segments(&dst.folder_heads().unwrap()).unwrap().into_iter().filter(|(d, _)| *d != me)
    {
        for n in ns {
            dst.receive_segment(&device, n, &src.folder_segment(&device, n).unwrap()).unwrap();
        }
    }
}

/// Passes and relays between every pair, `rounds` times.
fn exchange(devices: &[&Device], rounds: usize) {
    for _ in 0..rounds {
        for d in devices {
            pass(d);
        }
        for a in devices {
            for b in devices {
                if hex(a) != hex(b) {
                    relay(a, b);
                }
            }
        }
    }
}

#[test]
fn over_the_direct_transport_a_removal_and_a_compaction_reach_every_device() {
    let folders: Vec<tempfile::TempDir> = (0..4).map(|_| tempfile::tempdir().unwrap()).collect();
    let (a, b, c) = (device(), device(), device());
    let code = a.store.sync().init_folder(folders[0].path()).unwrap();
    b.store.sync().join_folder(folders[1].path(), &code).unwrap();
    c.store.sync().join_folder(folders[2].path(), &code).unwrap();
    a.store.memories().create(mem("m0", "The first note")).unwrap();
    exchange(&[&a, &b, &c], 2);
    // Enough segments of a's for a compaction, each read by b and c.
    for i in 1..=engram::COMPACT_AFTER + 2 {
        a.store.memories().create(mem(&format!("m{i}"), &format!("Note number {i}"))).unwrap();
        exchange(&[&a, &b, &c], 1);
    }
    exchange(&[&a, &b, &c], 2);
    let snapshot = a.store.sync().status().unwrap().snapshot;
    assert!(snapshot >= engram::COMPACT_AFTER, "{snapshot}");
    // b's copy of a's directory follows: the snapshot in, the segments it holds gone.
    let b_copy = folders[1].path().join(hex(&a));
    assert!(!files(folders[1].path(), &a, "snap").is_empty());
    assert!(
        files(folders[1].path(), &a, "seg").iter().all(|p| p
            .file_stem()
            .and_then(|s| s.to_str())
            .and_then(|s| s.parse::<u64>().ok())
            .unwrap()
            > snapshot),
        "{}",
        b_copy.display()
    );

    // c is removed on b; the new key reaches a through b's files, and c's later writes land nowhere.
    let r = b.store.sync().remove_device(&hex(&c)).unwrap();
    c.store.memories().create(mem("late-c", "Written by the removed device")).unwrap();
    pass(&c); // c has not pulled the rotation yet: it writes under the old key
    exchange(&[&a, &b], 1);
    relay(&c, &a);
    relay(&c, &b);
    exchange(&[&a, &b], 2);
    for d in [&a, &b] {
        assert_eq!(d.store.sync().status().unwrap().key_epoch, r.epoch);
        assert_eq!(content(d, "late-c"), None);
    }
    a.store.memories().create(mem("after", "Written under the new key")).unwrap();
    exchange(&[&a, &b], 1);
    relay(&a, &c);
    assert!(pass(&c).error.is_some(), "c cannot open the new key");
    assert_eq!(content(&c, "after"), None);

    // A device that joins with the new code through its own folder starts from a's snapshot.
    let d = device();
    d.store.sync().join_folder(folders[3].path(), &r.pairing_code).unwrap();
    exchange(&[&a, &b, &d], 2);
    let want = a.store.sync().replicated_state().unwrap();
    assert_eq!(b.store.sync().replicated_state().unwrap(), want);
    assert_eq!(d.store.sync().replicated_state().unwrap(), want);
    assert_eq!(content(&d, "after").as_deref(), Some("Written under the new key"));
    assert_eq!(content(&d, "m1").as_deref(), Some("Note number 1"));
}
