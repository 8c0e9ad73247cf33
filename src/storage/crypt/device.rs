//! The encrypting block device under redb.
//!
//! Physical layout of an encrypted store file (bytes):
//!
//! | at | what |
//! |---|---|
//! | 0, 4096 | the key header, two copies ([`super::header`]) |
//! | 8192, 16384 | redb's block 0 (its super-header), two copies of 4,144 bytes: counter (8, LE), nonce (24), ciphertext (4,096), tag (16) |
//! | 24576 + (n − 1) × 4136 | block n ≥ 1 of redb's file: nonce (24), ciphertext (4,096), tag (16) |
//!
//! Every block is sealed with the header's cipher ([`super::cipher`]: XAES-256-GCM or XChaCha20-Poly1305) under
//! the data key and a fresh random 192-bit nonce; its
//! associated data is `engram/block/v1`, the 16-byte file id and the block number (block 0's copies:
//! `engram/block0/v1`, the file id and the counter). A block that fails authentication is reported as damage
//! naming the block, never returned and never read as zeros.
//!
//! **Block 0 and redb's commit.** redb keeps both of its commit slots and the byte that chooses between them in
//! block 0. This device holds block 0 in memory: reads of it are served from there, writes change it there, and
//! [`Device::sync_data`] makes the other blocks durable first (one `fsync`), then writes block 0 to the copy that
//! does not hold the last durable version, with the next counter, and syncs again. So the copy on disk that an
//! open picks (the valid one with the highest counter) always names a commit whose blocks are all on disk, and a
//! torn write of the copy being written leaves the other copy, the previous commit. A clean close writes the
//! current block 0 to the other copy as well, so that after it a damaged copy costs nothing. A commit therefore
//! costs two syncs instead of redb's one.

use std::cell::RefCell;

use parking_lot::Mutex;

use super::cipher::{BlockCipher, Cipher, NONCE, TAG, array};
use super::header::{self, KeyHeader};
use super::keys::{self, SecretKey};
use super::sealed::SideKey;
use super::{Damage, Encryption, EncryptionStatus, KeySource};
use crate::error::Result;
use crate::storage::Device;

/// Bytes of one block of redb's file (its page size).
pub const BLOCK: usize = 4096;
/// Bytes of one sealed block on disk.
pub const FRAME: usize = NONCE + BLOCK + TAG;
const B0_COPY: [u64; 2] = [8192, 16384];
const B0_BYTES: usize = 8 + FRAME;
/// Where block 1 starts.
pub const DATA_START: u64 = 24576;

fn frame_at(block: u64) -> u64 {
    DATA_START + (block - 1) * FRAME as u64
}

fn block_aad(file_id: &[u8; 16], block: u64) -> [u8; 15 + 16 + 8] {
    let mut aad = [0u8; 39];
    aad[..15].copy_from_slice(b"engram/block/v1");
    aad[15..31].copy_from_slice(file_id);
    aad[31..].copy_from_slice(&block.to_le_bytes());
    aad
}

fn block0_aad(file_id: &[u8; 16], counter: u64) -> [u8; 16 + 16 + 8] {
    let mut aad = [0u8; 40];
    aad[..16].copy_from_slice(b"engram/block0/v1");
    aad[16..32].copy_from_slice(file_id);
    aad[32..].copy_from_slice(&counter.to_le_bytes());
    aad
}

thread_local! {
    static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Runs `f` on this thread's scratch buffer of at least `len` bytes (kept between calls up to 1 MiB).
fn with_scratch<T>(len: usize, f: impl FnOnce(&mut [u8]) -> T) -> T {
    SCRATCH.with(|s| {
        let mut s = s.borrow_mut();
        if s.len() < len {
            s.resize(len, 0);
        }
        let out = f(&mut s[..len]);
        if s.len() > 1 << 20 {
            *s = Vec::new();
        }
        out
    })
}

/// A read of at least this many blocks (64 KiB) is decrypted on every core (large values: source files).
const PARALLEL_BLOCKS: usize = 16;

/// What the device knows of block 0 and the file's length.
struct State {
    /// The current content of block 0 (redb's super-header and the rest of its first page).
    block0: Box<[u8; BLOCK]>,
    /// Whether block 0 changed since the last sync.
    block0_dirty: bool,
    /// Whether other blocks were written (or the length changed) since the last sync.
    data_dirty: bool,
    /// The counter of the newest durable copy of block 0.
    counter: u64,
    /// Which copy (0 or 1) holds it; the next write goes to the other.
    durable: usize,
    /// Whether both copies hold the current durable block 0 (after a clean close).
    mirrored: bool,
    /// A write, length change or sync failed: block 0 is never written again by this handle (redb refuses
    /// writes after an I/O error until reopened; writing its block 0 now could make a commit durable whose
    /// other blocks did not all reach the disk).
    poisoned: bool,
    /// redb's file length in bytes (a multiple of [`BLOCK`]).
    len: u64,
}

/// A redb file encrypted block by block (module docs), on a [`Device`] (the plain file, or a fault-injecting
/// wrapper in tests). Opened by [`EncryptedDevice::open`] or made by [`EncryptedDevice::create`].
pub struct EncryptedDevice {
    inner: Box<dyn Device>,
    cipher: BlockCipher,
    file_id: [u8; 16],
    state: Mutex<State>,
    read_only: bool,
    /// The file's advisory lock (another process opening it gets `Locked`), released on drop.
    lock: Option<std::fs::File>,
}

impl std::fmt::Debug for EncryptedDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EncryptedDevice").field("read_only", &self.read_only).finish_non_exhaustive()
    }
}

/// What opening an encrypted file unlocked besides the device: the key for its side files and what `/health`
/// shows.
#[derive(Clone)]
pub struct Unlocked {
    /// Seals and opens the store's side files (index snapshot, saved graphs) and store-key exports.
    pub side: std::sync::Arc<SideKey>,
    /// The status `/health` reports.
    pub status: EncryptionStatus,
}

/// How an open of an existing encrypted file ended.
pub enum Opened {
    /// The device, ready for redb, and what it unlocked.
    Ready(Box<EncryptedDevice>, Unlocked),
    /// The key header is whole but block 0 was never made durable, or holds no redb magic number yet: the file's
    /// creation was cut short (no commit ever existed in it).
    Unborn,
}

fn status(h: &KeyHeader, source: &KeySource) -> EncryptionStatus {
    let kdf = h.slots.iter().find_map(|s| match &s.kind {
        keys::SlotKind::Passphrase { kdf, .. } => Some(kdf.describe()),
        _ => None,
    });
    EncryptionStatus {
        encrypted: true,
        cipher: Some(h.cipher_name().to_string()),
        key_source: Some(source.kind().to_string()),
        key_slots: h.slots.iter().map(|s| s.kind.name().to_string()).collect(),
        kdf,
        format_version: Some(header::FORMAT),
    }
}

/// What one copy of block 0 holds.
enum Copy0 {
    Valid(u64, Box<[u8; BLOCK]>),
    Empty,
    Damaged,
}

impl EncryptedDevice {
    /// Makes a new encrypted file on `inner` (which must be empty): a random data key and file id, one key slot
    /// for `enc.source`, both header copies written and synced. redb then creates its database on it.
    ///
    /// # Errors
    /// Key source errors ([`crate::ErrorKind::WrongKey`], `Unavailable` for the keychain, `InvalidInput` for a
    /// short key file or weak Argon2id parameters); I/O errors.
    pub fn create(inner: Box<dyn Device>, enc: &Encryption) -> Result<(EncryptedDevice, Unlocked)> {
        let data_key = SecretKey::random();
        let file_id = keys::random::<16>();
        let slot = keys::new_slot(&data_key, &file_id, &enc.source, enc.kdf)?;
        let cipher = enc.cipher.unwrap_or_else(Cipher::fastest_here).id();
        let header = KeyHeader { cipher, generation: 0, file_id, slots: vec![slot] };
        Self::create_with(inner, &data_key, header, &enc.source)
    }

    /// Makes a new encrypted file on `inner` with a given data key and header (conversions: `engram encrypt`,
    /// `rekey --rotate-data-key`).
    pub(crate) fn create_with(
        inner: Box<dyn Device>,
        data_key: &SecretKey,
        mut header: KeyHeader,
        source: &KeySource,
    ) -> Result<(EncryptedDevice, Unlocked)> {
        inner.set_len(0)?;
        inner.set_len(DATA_START)?;
        let cipher = BlockCipher::new(header.cipher, data_key)?;
        header::write(&*inner, &mut header, 1)?;
        let unlocked = Unlocked {
            side: std::sync::Arc::new(SideKey::derive(data_key, &header.file_id, cipher.cipher())),
            status: status(&header, source),
        };
        let dev = EncryptedDevice {
            cipher,
            inner,
            file_id: header.file_id,
            state: Mutex::new(State {
                block0: Box::new([0u8; BLOCK]),
                block0_dirty: false,
                data_dirty: false,
                counter: 0,
                durable: 1,
                mirrored: false,
                poisoned: false,
                len: 0,
            }),
            read_only: false,
            lock: None,
        };
        Ok((dev, unlocked))
    }

    /// Opens an encrypted file on `inner` with the key from `source`. Nothing is written when the key is wrong;
    /// a read-write open rewrites a damaged or stale key header copy from the good one.
    ///
    /// # Errors
    /// [`crate::ErrorKind::WrongKey`] when the key opens no slot (the file is unchanged),
    /// [`crate::ErrorKind::Corrupt`] when the key header or both copies of block 0 are damaged, I/O errors.
    pub fn open(inner: Box<dyn Device>, source: &KeySource, read_only: bool) -> Result<Opened> {
        Self::open_with(inner, &Encryption::new(source.clone()), read_only)
    }

    /// [`EncryptedDevice::open`] with `enc`'s key, unwrapped once: a second open of the same file with the same
    /// `enc` (or a clone) reuses the data key instead of running the key derivation again.
    ///
    /// # Errors
    /// As [`EncryptedDevice::open`].
    pub fn open_with(inner: Box<dyn Device>, enc: &Encryption, read_only: bool) -> Result<Opened> {
        let headers = header::read(&*inner)?;
        let h = &headers.header;
        let cached = enc.unlocked.lock().as_ref().filter(|(id, _)| *id == h.file_id).map(|(_, k)| k.clone());
        let data_key = match cached {
            Some(k) => k,
            None => {
                let k = keys::unwrap(&h.slots, &h.file_id, &enc.source)?;
                *enc.unlocked.lock() = Some((h.file_id, k.clone()));
                k
            }
        };
        let source = &enc.source;
        let cipher = BlockCipher::new(h.cipher, &data_key)?;
        let copies =
            [Self::read_copy(&*inner, &cipher, &h.file_id, 0)?, Self::read_copy(&*inner, &cipher, &h.file_id, 1)?];
        let best = copies
            .iter()
            .enumerate()
            .filter_map(|(i, c)| if let Copy0::Valid(n, _) = c { Some((i, *n)) } else { None })
            .max_by_key(|(_, n)| *n);
        let Some((durable, counter)) = best else {
            if copies.iter().any(|c| matches!(c, Copy0::Empty)) {
                return Ok(Opened::Unborn);
            }
            return Err(super::corrupt(
                "both copies of block 0 (redb's header) of the encrypted store failed authentication: the file \
                 is damaged or was changed outside Engram",
            ));
        };
        if !read_only {
            header::repair(&*inner, &headers)?;
        }
        let mirrored = matches!((&copies[0], &copies[1]), (Copy0::Valid(a, _), Copy0::Valid(b, _)) if a == b);
        let [c0, c1] = copies;
        let block0 = match if durable == 0 { c0 } else { c1 } {
            Copy0::Valid(_, b) => b,
            _ => return Err(crate::Error::new(crate::ErrorKind::Internal, "block 0 copy vanished")),
        };
        // redb writes its magic number last when it creates a database (after a sync of the rest of its
        // header): a durable block 0 that starts with zero bytes is a creation cut short, as for a plain file.
        if block0[..crate::storage::REDB_MAGIC_BYTES].iter().all(|b| *b == 0) {
            return Ok(Opened::Unborn);
        }
        let phys = inner.len()?;
        let len =
            if phys <= DATA_START { BLOCK as u64 } else { BLOCK as u64 * (1 + (phys - DATA_START) / FRAME as u64) };
        let side = SideKey::derive(&data_key, &h.file_id, cipher.cipher());
        let unlocked = Unlocked { side: std::sync::Arc::new(side), status: status(h, source) };
        let dev = EncryptedDevice {
            inner,
            cipher,
            file_id: h.file_id,
            state: Mutex::new(State {
                block0,
                block0_dirty: false,
                data_dirty: false,
                counter,
                durable,
                mirrored,
                poisoned: false,
                len,
            }),
            read_only,
            lock: None,
        };
        Ok(Opened::Ready(Box::new(dev), unlocked))
    }

    /// Holds `lock` (the file's advisory lock) for as long as the device lives.
    pub fn with_lock(mut self, lock: std::fs::File) -> Self {
        self.lock = Some(lock);
        self
    }

    fn read_copy(inner: &dyn Device, cipher: &BlockCipher, file_id: &[u8; 16], copy: usize) -> Result<Copy0> {
        if inner.len()? < B0_COPY[copy] + B0_BYTES as u64 {
            return Ok(Copy0::Empty);
        }
        let mut buf = vec![0u8; B0_BYTES];
        inner.read(B0_COPY[copy], &mut buf)?;
        if buf.iter().all(|b| *b == 0) {
            return Ok(Copy0::Empty);
        }
        let counter = u64::from_le_bytes(buf[..8].try_into().unwrap_or_default());
        let (head, rest) = buf.split_at_mut(8 + NONCE);
        let (ct, tag) = rest.split_at_mut(BLOCK);
        let (nonce, tag) = (array(&head[8..]), array(tag));
        if cipher.open(&nonce, &block0_aad(file_id, counter), ct, &tag).is_err() {
            tracing::warn!(copy, "a copy of block 0 of the encrypted store failed authentication");
            return Ok(Copy0::Damaged);
        }
        let mut block = Box::new([0u8; BLOCK]);
        block.copy_from_slice(ct);
        Ok(Copy0::Valid(counter, block))
    }

    fn write_copy(&self, copy: usize, counter: u64, block: &[u8; BLOCK]) -> std::io::Result<()> {
        let mut buf = vec![0u8; B0_BYTES];
        buf[..8].copy_from_slice(&counter.to_le_bytes());
        let nonce = keys::random::<NONCE>();
        buf[8..8 + NONCE].copy_from_slice(&nonce);
        let (_, rest) = buf.split_at_mut(8 + NONCE);
        let (ct, tag) = rest.split_at_mut(BLOCK);
        ct.copy_from_slice(block);
        tag.copy_from_slice(&self.cipher.seal(&nonce, &block0_aad(&self.file_id, counter), ct)?);
        self.inner.write(B0_COPY[copy], &buf)
    }

    /// Seals `plain` (one block) as block `block` into `frame`.
    fn seal(&self, block: u64, plain: &[u8], frame: &mut [u8]) -> std::io::Result<()> {
        let nonce = keys::random::<NONCE>();
        frame[..NONCE].copy_from_slice(&nonce);
        frame[NONCE..NONCE + BLOCK].copy_from_slice(plain);
        let tag = self.cipher.seal(&nonce, &block_aad(&self.file_id, block), &mut frame[NONCE..NONCE + BLOCK])?;
        frame[NONCE + BLOCK..].copy_from_slice(&tag);
        Ok(())
    }

    /// Opens `frame` (block `block`) in place; the plaintext is `frame[NONCE..NONCE + BLOCK]`.
    fn open_frame(&self, block: u64, frame: &mut [u8]) -> std::io::Result<()> {
        let (head, rest) = frame.split_at_mut(NONCE);
        let (ct, tag) = rest.split_at_mut(BLOCK);
        self.cipher.open(&array(head), &block_aad(&self.file_id, block), ct, &array(tag)).map_err(|_| {
            Damage::io(format!(
                "block {block} of the encrypted store (bytes {}..{} of the file) failed authentication: the file \
                     is damaged or was changed outside Engram",
                frame_at(block),
                frame_at(block) + FRAME as u64
            ))
        })
    }

    /// Reads blocks `first..=last` (all ≥ 1) and hands each block's plaintext to `f` with its number. A run of
    /// [`PARALLEL_BLOCKS`] or more is decrypted on every core.
    fn read_blocks(&self, first: u64, last: u64, mut f: impl FnMut(u64, &[u8])) -> std::io::Result<()> {
        let n = (last - first + 1) as usize;
        with_scratch(n * FRAME, |buf| {
            self.inner.read(frame_at(first), buf)?;
            if n >= PARALLEL_BLOCKS {
                use rayon::prelude::*;
                buf.par_chunks_exact_mut(FRAME)
                    .enumerate()
                    .try_for_each(|(i, frame)| self.open_frame(first + i as u64, frame))?;
                for (i, frame) in buf.chunks_exact(FRAME).enumerate() {
                    f(first + i as u64, &frame[NONCE..NONCE + BLOCK]);
                }
                return Ok(());
            }
            for (i, frame) in buf.chunks_exact_mut(FRAME).enumerate() {
                let b = first + i as u64;
                self.open_frame(b, frame)?;
                f(b, &frame[NONCE..NONCE + BLOCK]);
            }
            Ok(())
        })
    }

    fn eof(offset: u64, len: usize, file_len: u64) -> std::io::Error {
        std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            format!("read of {len} bytes at {offset} past the end of the encrypted store ({file_len} bytes)"),
        )
    }
}

impl Device for EncryptedDevice {
    fn len(&self) -> std::io::Result<u64> {
        Ok(self.state.lock().len)
    }

    fn read(&self, offset: u64, out: &mut [u8]) -> std::io::Result<()> {
        if out.is_empty() {
            return Ok(());
        }
        let end = offset + out.len() as u64;
        let mut pos = offset;
        {
            let st = self.state.lock();
            if end > st.len {
                return Err(Self::eof(offset, out.len(), st.len));
            }
            if pos < BLOCK as u64 {
                let take = (BLOCK as u64).min(end) - pos;
                out[..take as usize].copy_from_slice(&st.block0[pos as usize..(pos + take) as usize]);
                pos += take;
            }
        }
        if pos >= end {
            return Ok(());
        }
        let block = BLOCK as u64;
        let (first, last) = (pos / block, (end - 1) / block);
        self.read_blocks(first, last, |b, plain| {
            let (lo, hi) = ((b * block).max(pos), ((b + 1) * block).min(end));
            out[(lo - offset) as usize..(hi - offset) as usize]
                .copy_from_slice(&plain[(lo - b * block) as usize..(hi - b * block) as usize]);
        })
    }

    fn set_len(&self, len: u64) -> std::io::Result<()> {
        if self.read_only {
            return Err(read_only());
        }
        let blocks = len.div_ceil(BLOCK as u64);
        let phys = if blocks <= 1 { DATA_START } else { frame_at(blocks) };
        let mut st = self.state.lock();
        if let Err(e) = self.inner.set_len(phys) {
            st.poisoned = true;
            return Err(e);
        }
        st.len = blocks * BLOCK as u64;
        st.data_dirty = true;
        if blocks == 0 {
            *st.block0 = [0u8; BLOCK];
            st.block0_dirty = true;
        }
        Ok(())
    }

    fn sync_data(&self) -> std::io::Result<()> {
        if self.read_only {
            return Ok(());
        }
        let mut st = self.state.lock();
        if st.poisoned {
            return Err(poisoned());
        }
        let synced = (|| {
            if st.data_dirty || !st.block0_dirty {
                self.inner.sync_data()?;
                st.data_dirty = false;
            }
            if st.block0_dirty {
                let (copy, counter) = (1 - st.durable, st.counter + 1);
                self.write_copy(copy, counter, &st.block0)?;
                self.inner.sync_data()?;
                st.counter = counter;
                st.durable = copy;
                st.block0_dirty = false;
                st.mirrored = false;
            }
            Ok(())
        })();
        if synced.is_err() {
            st.poisoned = true;
        }
        synced
    }

    fn write(&self, offset: u64, data: &[u8]) -> std::io::Result<()> {
        if self.read_only {
            return Err(read_only());
        }
        if data.is_empty() {
            return Ok(());
        }
        let block = BLOCK as u64;
        let end = offset + data.len() as u64;
        let mut pos = offset;
        let mut st = self.state.lock();
        if st.poisoned {
            return Err(poisoned());
        }
        if pos < block {
            let take = block.min(end) - pos;
            st.block0[pos as usize..(pos + take) as usize].copy_from_slice(&data[..take as usize]);
            st.block0_dirty = true;
            pos += take;
        }
        if pos < end {
            let (first, last) = (pos / block, (end - 1) / block);
            let old_len = st.len;
            let written = with_scratch((last - first + 1) as usize * FRAME, |buf| -> std::io::Result<()> {
                for (i, frame) in buf.chunks_exact_mut(FRAME).enumerate() {
                    let b = first + i as u64;
                    let (lo, hi) = ((b * block).max(pos), ((b + 1) * block).min(end));
                    let src = &data[(lo - offset) as usize..(hi - offset) as usize];
                    if hi - lo == block {
                        self.seal(b, src, frame)?;
                        continue;
                    }
                    // A partial block: merge with what is there (zeros past the end or where never written).
                    let mut plain = [0u8; BLOCK];
                    if b * block < old_len {
                        let mut old = [0u8; FRAME];
                        self.inner.read(frame_at(b), &mut old)?;
                        if old.iter().any(|x| *x != 0) {
                            self.open_frame(b, &mut old)?;
                            plain.copy_from_slice(&old[NONCE..NONCE + BLOCK]);
                        }
                    }
                    plain[(lo - b * block) as usize..(hi - b * block) as usize].copy_from_slice(src);
                    self.seal(b, &plain, frame)?;
                }
                self.inner.write(frame_at(first), buf)
            });
            if let Err(e) = written {
                st.poisoned = true;
                return Err(e);
            }
            st.data_dirty = true;
        }
        st.len = st.len.max(end.div_ceil(block) * block);
        Ok(())
    }

    fn close(&self) -> std::io::Result<()> {
        let synced = if self.read_only || self.state.lock().poisoned {
            Ok(())
        } else {
            self.sync_data().and_then(|()| {
                let mut st = self.state.lock();
                if !st.mirrored && st.counter > 0 {
                    let copy = 1 - st.durable;
                    self.write_copy(copy, st.counter, &st.block0)?;
                    self.inner.sync_data()?;
                    st.mirrored = true;
                }
                Ok(())
            })
        };
        let closed = self.inner.close();
        if let Some(lock) = &self.lock {
            let _ = lock.unlock();
        }
        synced.and(closed)
    }
}

fn poisoned() -> std::io::Error {
    std::io::Error::other("an earlier write to the encrypted store failed; reopen it")
}

fn read_only() -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::PermissionDenied, "the encrypted store is open read-only")
}

/// Takes the advisory lock of the store file at `path` (created if missing): exclusive for a read-write open,
/// shared for a read-only one. Another process holding it gives [`crate::ErrorKind::Locked`].
///
/// # Errors
/// `Locked`; I/O errors.
pub fn lock_file(path: &std::path::Path, exclusive: bool) -> Result<std::fs::File> {
    let f = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(false).open(path)?;
    let got = if exclusive { f.try_lock() } else { f.try_lock_shared() };
    match got {
        Ok(()) => Ok(f),
        Err(std::fs::TryLockError::WouldBlock) => Err(crate::Error::new(
            crate::ErrorKind::Locked,
            "the store is open in another process (the daemon or another program); close it first",
        )),
        Err(std::fs::TryLockError::Error(e)) => Err(e.into()),
    }
}
