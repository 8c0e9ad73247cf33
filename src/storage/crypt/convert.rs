//! Whole-file conversions (`engram encrypt`, `engram decrypt`, `engram rekey`): a redb file copied block by block
//! between its plaintext form and an encrypted one, or from one data key to another, in chunks of 1 MiB (memory
//! does not grow with the store), with the copy checked against the source (SHA-256 of redb's bytes on both
//! sides) before the caller replaces anything. Rewrapping the data key (`rekey` without rotation) rewrites the
//! key header only.

use std::path::Path;

use sha2::Digest;

use super::device::{BLOCK, EncryptedDevice, Opened, Unlocked, lock_file};
use super::header::{self, KeyHeader};
use super::keys::{self, SecretKey};
use super::{Encryption, EncryptionStatus, KeySource, corrupt};
use crate::error::{Error, ErrorKind, Result};
use crate::storage::{Device, FileDevice};

const CHUNK: usize = 256 * BLOCK;

/// A data key, file id and key slot for new encrypted files: the store file and its backup copies share them,
/// so that one key opens all and one `rekey` rewraps all.
pub(crate) struct Sealing {
    data_key: SecretKey,
    header: KeyHeader,
    source: KeySource,
}

impl Sealing {
    /// A new data key and file id, with one slot for `enc.source`.
    ///
    /// # Errors
    /// Key source errors.
    pub(crate) fn new(enc: &Encryption) -> Result<Sealing> {
        let data_key = SecretKey::random();
        let file_id = keys::random::<16>();
        let slot = keys::new_slot(&data_key, &file_id, &enc.source, enc.kdf)?;
        let cipher = enc.cipher.unwrap_or_else(super::Cipher::fastest_here).id();
        let header = KeyHeader { cipher, generation: 0, file_id, slots: vec![slot] };
        Ok(Sealing { data_key, header, source: enc.source.clone() })
    }

    fn create(&self, dst: &Path) -> Result<(EncryptedDevice, Unlocked)> {
        let _ = std::fs::remove_file(dst);
        EncryptedDevice::create_with(
            Box::new(FileDevice::open(dst)?),
            &self.data_key,
            self.header.clone(),
            &self.source,
        )
    }
}

/// Copies redb's bytes from `src` to `dst` in chunks, returning their SHA-256.
fn copy(src: &dyn Device, dst: &dyn Device, progress: &dyn Fn(u64, u64)) -> Result<[u8; 32]> {
    let len = src.len()?;
    dst.set_len(len)?;
    let sum = each_chunk(src, |at, chunk| {
        dst.write(at, chunk)?;
        progress(at + chunk.len() as u64, len);
        Ok(())
    })?;
    dst.sync_data()?;
    dst.close()?;
    Ok(sum)
}

/// The SHA-256 of redb's bytes on `dev`.
fn digest(dev: &dyn Device) -> Result<[u8; 32]> {
    each_chunk(dev, |_, _| Ok(()))
}

/// Reads redb's bytes on `dev` in chunks of [`CHUNK`] bytes, handing each to `f` with its offset; returns their
/// SHA-256.
fn each_chunk(dev: &dyn Device, mut f: impl FnMut(u64, &[u8]) -> Result<()>) -> Result<[u8; 32]> {
    let len = dev.len()?;
    let mut sha = sha2::Sha256::new();
    let mut buf = vec![0u8; CHUNK];
    let mut at = 0u64;
    while at < len {
        let n = ((len - at) as usize).min(CHUNK);
        dev.read(at, &mut buf[..n])?;
        sha.update(&buf[..n]);
        f(at, &buf[..n])?;
        at += n as u64;
    }
    Ok(sha.finalize().into())
}

fn check(sum: [u8; 32], copy: &dyn Device, what: &str) -> Result<()> {
    if digest(copy)? != sum {
        return Err(Error::new(
            ErrorKind::Io,
            format!("the {what} copy does not read back as the source; nothing was replaced (is the disk failing?)"),
        ));
    }
    Ok(())
}

/// Opens the encrypted file at `path` read-only (no lock: the caller holds the store's).
pub(crate) fn open_encrypted(path: &Path, source: &KeySource) -> Result<(Box<EncryptedDevice>, Unlocked)> {
    match EncryptedDevice::open(Box::new(FileDevice::open(path)?), source, true)? {
        Opened::Ready(dev, unlocked) => Ok((dev, unlocked)),
        Opened::Unborn => {
            Err(corrupt(format!("{} was never initialised (its creation was cut short)", path.display())))
        }
    }
}

/// Writes an encrypted copy of the plaintext redb file `src` at `dst` (replaced if present) under `sealing`, and
/// checks it. `progress(done, total)` gets bytes. Returns what the key unlocked.
///
/// # Errors
/// I/O errors, [`ErrorKind::Io`] when the copy does not read back as the source.
pub(crate) fn encrypt_file(src: &Path, dst: &Path, sealing: &Sealing, progress: &dyn Fn(u64, u64)) -> Result<Unlocked> {
    let (to, unlocked) = sealing.create(dst)?;
    let sum = copy(&FileDevice::open(src)?, &to, progress)?;
    drop(to);
    check(sum, &*open_encrypted(dst, &sealing.source)?.0, "encrypted")?;
    Ok(unlocked)
}

/// Writes the plaintext of the encrypted file `src` at `dst` (replaced if present) and checks it. Returns what
/// the source's key unlocked (to open its side files).
///
/// # Errors
/// [`ErrorKind::WrongKey`], [`ErrorKind::Corrupt`] for a damaged block of the source, I/O errors.
pub(crate) fn decrypt_file(
    src: &Path,
    dst: &Path,
    source: &KeySource,
    progress: &dyn Fn(u64, u64),
) -> Result<Unlocked> {
    let (from, unlocked) = open_encrypted(src, source)?;
    let _ = std::fs::remove_file(dst);
    let sum = copy(&*from, &FileDevice::open(dst)?, progress)?;
    check(sum, &FileDevice::open(dst)?, "decrypted")?;
    Ok(unlocked)
}

/// Writes a copy of the encrypted file `src` (opened with `source`) at `dst` under `sealing` (a new data key and
/// file id), and checks it. Returns what the old and the new key unlocked.
///
/// # Errors
/// As [`decrypt_file`] and [`encrypt_file`].
pub(crate) fn reencrypt_file(
    src: &Path,
    dst: &Path,
    source: &KeySource,
    sealing: &Sealing,
    progress: &dyn Fn(u64, u64),
) -> Result<(Unlocked, Unlocked)> {
    let (from, old) = open_encrypted(src, source)?;
    let (to, new) = sealing.create(dst)?;
    let sum = copy(&*from, &to, progress)?;
    drop(to);
    check(sum, &*open_encrypted(dst, &sealing.source)?.0, "re-encrypted")?;
    Ok((old, new))
}

/// Rewraps the data key of the encrypted files at `paths` (the store file first, then its backup copies): opens
/// the first with `source`, then in each file that shares its file id and key, replaces every slot with one for
/// `new` (or adds one beside the others when `add`), rewriting both key header copies. O(1) in the store's size.
/// Files of another file id (a backup from before a data key rotation) are left as they are, and returned.
///
/// # Errors
/// [`ErrorKind::Locked`] while another process holds the store file, [`ErrorKind::WrongKey`] when `source` does
/// not open it (nothing is written), key source errors for `new`, [`ErrorKind::InvalidInput`] past 8 slots.
pub(crate) fn rekey(
    paths: &[&Path],
    source: &KeySource,
    new: &Encryption,
    add: bool,
) -> Result<(EncryptionStatus, Vec<std::path::PathBuf>)> {
    let Some(main) = paths.first() else { return Err(Error::new(ErrorKind::Internal, "no file to rekey")) };
    let _lock = lock_file(main, true)?;
    let first = header::read(&FileDevice::open(main)?)?.header;
    let data_key = keys::unwrap(&first.slots, &first.file_id, source)?;
    let slot = keys::new_slot(&data_key, &first.file_id, &new.source, new.kdf)?;
    let mut dropped = Vec::new();
    let mut skipped = Vec::new();
    for (i, path) in paths.iter().enumerate() {
        let dev = FileDevice::open(path)?;
        let headers = header::read(&dev)?;
        let mut h = headers.header.clone();
        let same = h.file_id == first.file_id && keys::unwrap(&h.slots, &h.file_id, source).is_ok();
        if !same {
            skipped.push(path.to_path_buf());
            continue;
        }
        let before = if add {
            h.slots.push(slot.clone());
            Vec::new()
        } else {
            std::mem::replace(&mut h.slots, vec![slot.clone()])
        };
        if let Err(e) = header::write(&dev, &mut h, headers.newest) {
            if i == 0 {
                keys::forget_keychain(std::slice::from_ref(&slot));
            }
            return Err(e);
        }
        dropped.extend(before);
    }
    // The new slot's keychain entry is in use; the dropped slots' entries are not any more.
    dropped.retain(|s| s.kind != slot.kind);
    dropped.dedup();
    keys::forget_keychain(&dropped);
    let (_, unlocked) = open_encrypted(main, &new.source)?;
    Ok((unlocked.status, skipped))
}
