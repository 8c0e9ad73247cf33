//! The encrypted device under redb, on real files: round trips, wrong keys, damaged and moved blocks, and the
//! torn write of block 0 at every byte offset.

use std::path::Path;
use std::sync::{Arc, Mutex};

use super::*;
use crate::ErrorKind;
use crate::storage::{Db, Device, Durability, FileDevice, Readable, tables::META};

fn key_file(dir: &Path) -> KeySource {
    let p = dir.join("store.key");
    if !p.exists() {
        write_key_file(&p).unwrap();
    }
    KeySource::KeyFile(p)
}

fn open_db(path: &Path, source: &KeySource) -> crate::Result<Db> {
    open_db_with(path, source, Cipher::fastest_here())
}

/// Opens the store at `path`, made under `cipher` when it is missing.
fn open_db_with(path: &Path, source: &KeySource, cipher: Cipher) -> crate::Result<Db> {
    let dev: Box<dyn Device> = if file_kind(path)? == FileKind::Missing {
        let enc = Encryption::new(source.clone()).with_cipher(cipher);
        Box::new(EncryptedDevice::create(Box::new(FileDevice::open(path)?), &enc)?.0)
    } else {
        match EncryptedDevice::open(Box::new(FileDevice::open(path)?), source, false)? {
            Opened::Ready(d, _) => d,
            Opened::Unborn => return Err(crate::Error::new(ErrorKind::Corrupt, "unborn")),
        }
    };
    Db::open(path, 1 << 20, Some(dev))
}

fn put(db: &Db, key: &str, value: &[u8]) {
    let tx = db.write(Durability::Immediate).unwrap();
    tx.table(META).unwrap().put(key, value).unwrap();
    tx.commit().unwrap();
}

fn get(db: &Db, key: &str) -> Option<Vec<u8>> {
    let rtx = db.read().unwrap();
    let t = rtx.table(META).unwrap();
    t.get(key).unwrap().map(|g| g.value().to_vec())
}

fn sha(path: &Path) -> Vec<u8> {
    use sha2::Digest;
    sha2::Sha256::digest(std::fs::read(path).unwrap()).to_vec()
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

#[test]
fn a_store_round_trips_and_holds_no_plaintext_under_either_cipher() {
    let dir = tempfile::tempdir().unwrap();
    let src = key_file(dir.path());
    let marker = b"MARKER-plaintext-never-on-disk".repeat(200);
    for cipher in [Cipher::Xaes256Gcm, Cipher::XChaCha20Poly1305] {
        let path = dir.path().join(format!("{cipher}.redb"));
        {
            let db = open_db_with(&path, &src, cipher).unwrap();
            put(&db, "a", &marker);
            put(&db, "b", b"second");
        }
        assert_eq!(file_kind(&path).unwrap(), FileKind::Encrypted);
        assert_eq!(header::read(&FileDevice::open(&path).unwrap()).unwrap().header.cipher, cipher.id());
        assert!(!contains(&std::fs::read(&path).unwrap(), b"MARKER-plaintext"));
        // The other cipher's build of the same key reads it: the header names the cipher.
        let db = open_db_with(&path, &src, Cipher::XChaCha20Poly1305).unwrap();
        assert_eq!(get(&db, "a").unwrap(), marker, "{cipher}");
        assert_eq!(get(&db, "b").unwrap(), b"second");
    }
}

#[test]
fn a_wrong_key_is_wrong_key_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (path, src) = (dir.path().join("engram.redb"), key_file(dir.path()));
    drop(open_db(&path, &src).unwrap());
    let before = sha(&path);
    let other = dir.path().join("other.key");
    write_key_file(&other).unwrap();
    for wrong in [KeySource::KeyFile(other), KeySource::Passphrase("nope".to_string().into())] {
        let e = open_db(&path, &wrong).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::WrongKey, "{e:?}");
    }
    assert_eq!(sha(&path), before, "a wrong key leaves the file byte for byte");
}

#[test]
fn a_changed_or_moved_block_is_reported_naming_it() {
    for cipher in [Cipher::Xaes256Gcm, Cipher::XChaCha20Poly1305] {
        changed_or_moved_block(cipher);
    }
}

fn changed_or_moved_block(cipher: Cipher) {
    let dir = tempfile::tempdir().unwrap();
    let (path, src) = (dir.path().join("engram.redb"), key_file(dir.path()));
    {
        let db = open_db_with(&path, &src, cipher).unwrap();
        for i in 0..200 {
            put(&db, &format!("k{i:03}"), &vec![i as u8; 3000]);
        }
    }
    let clean = std::fs::read(&path).unwrap();
    let frames = (clean.len() as u64 - device::DATA_START) / device::FRAME as u64;
    assert!(frames > 20, "{frames} frames");
    // Swap two frames: each authenticates its own number, so both fail.
    let mut swapped = clean.clone();
    let at = |b: u64| (device::DATA_START + (b - 1) * device::FRAME as u64) as usize;
    let (x, y) = (at(2), at(3));
    let fx = clean[x..x + device::FRAME].to_vec();
    swapped.copy_within(y..y + device::FRAME, x);
    swapped[y..y + device::FRAME].copy_from_slice(&fx);
    std::fs::write(&path, &swapped).unwrap();
    let all_read = |db: &Db| -> crate::Result<()> {
        let rtx = db.read()?;
        let t = rtx.table(META)?;
        for r in t.iter()? {
            r?;
        }
        Ok(())
    };
    let e = open_db(&path, &src).and_then(|db| all_read(&db)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Corrupt, "{e:?}");
    assert!(e.chain().contains("block "), "{}", e.chain());
    // A frame from another file with the same key material cannot be moved in: the file id differs.
    let path2 = dir.path().join("second.redb");
    {
        let db = open_db_with(&path2, &src, cipher).unwrap();
        for i in 0..200 {
            put(&db, &format!("k{i:03}"), &vec![i as u8; 3000]);
        }
    }
    let other = std::fs::read(&path2).unwrap();
    let mut moved = clean.clone();
    moved[at(2)..at(2) + device::FRAME].copy_from_slice(&other[at(2)..at(2) + device::FRAME]);
    std::fs::write(&path, &moved).unwrap();
    let e = open_db(&path, &src).and_then(|db| all_read(&db)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Corrupt);
}

/// The writes that reached a file: offset and bytes, in order.
type WriteLog = Arc<Mutex<Vec<(u64, Vec<u8>)>>>;

/// Records each write that reaches the file.
#[derive(Debug)]
struct Recording {
    inner: FileDevice,
    writes: WriteLog,
}

impl Device for Recording {
    fn len(&self) -> std::io::Result<u64> {
        self.inner.len()
    }
    fn read(&self, offset: u64, out: &mut [u8]) -> std::io::Result<()> {
        self.inner.read(offset, out)
    }
    fn set_len(&self, len: u64) -> std::io::Result<()> {
        self.inner.set_len(len)
    }
    fn sync_data(&self) -> std::io::Result<()> {
        self.inner.sync_data()
    }
    fn write(&self, offset: u64, data: &[u8]) -> std::io::Result<()> {
        self.writes.lock().unwrap().push((offset, data.to_vec()));
        self.inner.write(offset, data)
    }
}

/// redb commits by rewriting block 0. A crash while a copy of block 0 is written leaves any prefix or any suffix
/// of that write on disk: at every byte offset, the store opens with the old commit or the new one.
#[test]
fn a_torn_write_of_block_0_at_every_offset_leaves_the_old_or_the_new_commit() {
    let dir = tempfile::tempdir().unwrap();
    let (path, src) = (dir.path().join("engram.redb"), key_file(dir.path()));
    let writes = Arc::new(Mutex::new(Vec::new()));
    let before;
    {
        let (dev, _) =
            EncryptedDevice::create(Box::new(FileDevice::open(&path).unwrap()), &Encryption::new(src.clone())).unwrap();
        let db = Db::open(&path, 1 << 20, Some(Box::new(dev))).unwrap();
        put(&db, "v", b"old");
        drop(db);
        let opened = EncryptedDevice::open(
            Box::new(Recording { inner: FileDevice::open(&path).unwrap(), writes: writes.clone() }),
            &src,
            false,
        )
        .unwrap();
        let Opened::Ready(dev, _) = opened else { panic!("unborn") };
        let db = Db::open(&path, 1 << 20, Some(dev)).unwrap();
        writes.lock().unwrap().clear();
        before = std::fs::read(&path).unwrap();
        put(&db, "v", b"new");
        // The commit's writes end with its block 0 copy (at 8192 or 16384); keep the file as the crash found it.
        std::mem::forget(db);
    }
    let writes = writes.lock().unwrap().clone();
    let last = writes.iter().rposition(|(o, _)| *o == 8192 || *o == 16384).expect("a block 0 write");
    assert_eq!(last, writes.len() - 1, "block 0 is the commit's last write");
    // Everything before it was synced first: it is on disk whatever happens to block 0.
    let mut base = before.clone();
    for (o, d) in &writes[..last] {
        let end = *o as usize + d.len();
        if base.len() < end {
            base.resize(end, 0);
        }
        base[*o as usize..end].copy_from_slice(d);
    }
    let (at, copy) = (writes[last].0, &writes[last].1);
    let old_block0 = block0_of(&base, &src);
    let mut whole = base.clone();
    whole[at as usize..at as usize + copy.len()].copy_from_slice(copy);
    let new_block0 = block0_of(&whole, &src);
    assert_ne!(old_block0, new_block0);
    // Every cut at the device (which copy of block 0 an open takes); every 97th, the edges and both ends also
    // through redb (the value it reads).
    let torn = dir.path().join("torn.redb");
    std::fs::write(&torn, &base).unwrap();
    let file = FileDevice::open(&torn).unwrap();
    let (mut old, mut new, mut through_redb) = (0, 0, 0);
    for cut in 0..=copy.len() {
        for suffix in [false, true] {
            if suffix && (cut == 0 || cut == copy.len()) {
                continue;
            }
            file.write(at, &base[at as usize..at as usize + copy.len()]).unwrap();
            let range = if suffix { cut..copy.len() } else { 0..cut };
            file.write(at + range.start as u64, &copy[range]).unwrap();
            let got = match EncryptedDevice::open(Box::new(FileDevice::open(&torn).unwrap()), &src, true) {
                Ok(Opened::Ready(dev, _)) => read_block0(&*dev),
                Ok(Opened::Unborn) => panic!("cut {cut} suffix {suffix}: unborn"),
                Err(e) => panic!("cut {cut} suffix {suffix}: {e:?}"),
            };
            let is_new = got == new_block0;
            assert!(is_new || got == old_block0, "cut {cut} suffix {suffix}: block 0 is neither commit's");
            // A tear can leave bytes identical to the whole write (a random nonce's first byte matches the old
            // one's 1 time in 256): that is the whole write, and only it may show the new commit.
            let mut region = base[at as usize..at as usize + copy.len()].to_vec();
            let range = if suffix { cut..copy.len() } else { 0..cut };
            region[range.clone()].copy_from_slice(&copy[range]);
            let whole_write = region == *copy;
            assert_eq!(is_new, whole_write, "cut {cut} suffix {suffix}: new commit only from the whole write");
            if is_new {
                new += 1
            } else {
                old += 1
            }
            if cut % 97 == 0 || cut + 1 >= copy.len() || cut <= 1 {
                through_redb += 1;
                let bytes = std::fs::read(&torn).unwrap();
                let copy_path = dir.path().join("torn-redb.redb");
                std::fs::write(&copy_path, &bytes).unwrap();
                let db = open_db(&copy_path, &src).unwrap_or_else(|e| panic!("cut {cut} suffix {suffix}: {e:?}"));
                let want: &[u8] = if is_new { b"new" } else { b"old" };
                assert_eq!(get(&db, "v").as_deref(), Some(want), "cut {cut} suffix {suffix}");
            }
        }
    }
    // The whole write (cut = len), and only tears whose bytes equal it, showed the new commit (checked per cut).
    assert!(new >= 1, "the whole write shows the new commit");
    assert_eq!(old + new, 2 * copy.len());
    assert!(through_redb >= 90, "{through_redb}");
}

fn read_block0(dev: &dyn Device) -> Vec<u8> {
    let mut b = vec![0u8; device::BLOCK];
    dev.read(0, &mut b).unwrap();
    b
}

fn block0_of(file: &[u8], src: &KeySource) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("x.redb");
    std::fs::write(&p, file).unwrap();
    match EncryptedDevice::open(Box::new(FileDevice::open(&p).unwrap()), src, true).unwrap() {
        Opened::Ready(dev, _) => read_block0(&*dev),
        Opened::Unborn => panic!("unborn"),
    }
}
