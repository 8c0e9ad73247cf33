//! The direct transport (docs/sync.md, "Directly between daemons"): a daemon serves the segment files of its
//! folder to the other devices of its group, and pulls theirs into its own folder, where the folder pass applies
//! them. The files are the same sealed segments as in a shared folder, so the folder's rules hold unchanged
//! (a file is written whole or not at all; a refused one changes nothing). A pull is authorised by a token
//! derived from the group key, never by the serving daemon's API key: pairing gives no API access.
//!
//! This module is the store side (listing, reading and receiving files, the token); the HTTP routes and the
//! pulling client are the daemon's (`server/sync.rs`).

use std::collections::BTreeMap;
use std::path::Path;

use sha2::Digest;

use super::SyncService;
use super::folder::{io, write_atomically};
use super::group::{HEAD_NAME, devices};
use crate::error::{Error, ErrorKind, Result};
use crate::model::DeviceId;
use crate::storage::crypt::keys::hex;
use crate::sync::segment::{self, GroupKey, Read};

fn token(key: &GroupKey) -> String {
    let mut h = sha2::Sha256::new();
    h.update(b"engram-sync-pull-token-v1\0");
    h.update(key.0);
    hex(&h.finalize())
}

/// Whether `name` is a file of a device directory that the direct transport carries besides segments: the
/// head, a rotation's key or record, a snapshot part.
fn carried(name: &str) -> bool {
    let digits = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_digit());
    name == HEAD_NAME
        || name.strip_suffix(".key").or_else(|| name.strip_suffix(".rot")).is_some_and(|e| digits(e, 10))
        || name
            .strip_suffix(".snap")
            .and_then(|s| s.split_once('.'))
            .is_some_and(|(n, p)| digits(n, 20) && digits(p, 6))
}

/// The bytes of a file of the folder a peer asked for: [`ErrorKind::NotFound`] (with `missing`'s message) when
/// it is not there.
fn read_held(path: &Path, missing: impl FnOnce() -> String) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => Error::new(ErrorKind::NotFound, missing()),
        _ => io(format!("reading {}", path.display()), e),
    })
}

/// Segments a device lists or a pull takes at most per device and call (a first sync goes on at the next).
pub const PULL_BATCH: usize = 64;

/// The segment numbers of one device's directory in `folder`, in order (whole file names only: a file still
/// being written has a hidden temporary name).
pub(super) fn numbers(folder: &Path, device: DeviceId) -> Vec<u64> {
    let Ok(entries) = std::fs::read_dir(segment::device_dir(folder, device)) else { return Vec::new() };
    let mut out: Vec<u64> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.strip_suffix(".seg")).and_then(|n| n.parse().ok()))
        .collect();
    out.sort_unstable();
    out
}

impl SyncService<'_> {
    /// The token another device of this group presents to pull segments from this one (64 hex digits):
    /// SHA-256 of a fixed label and the group key. It opens no API route and reads no segment's contents (they
    /// are sealed with the group key itself).
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] when the store is in no sync group with a folder; storage errors.
    pub fn pull_token(&self) -> Result<String> {
        let (key, _, _) = self.group()?;
        Ok(token(&key))
    }

    /// The pull tokens this daemon accepts: one per group key it holds, so that a device that has not learned
    /// a key rotation yet can still pull the rotation's files. What any token reads is sealed: a removed device
    /// can download files it cannot open, and its own files are refused by every device.
    ///
    /// # Errors
    /// As [`SyncService::pull_token`].
    pub fn pull_tokens(&self) -> Result<Vec<String>> {
        self.group()?;
        Ok(self.keyring()?.iter().map(|(_, k)| token(k)).collect())
    }

    /// The whole segment files in this device's folder, by device id (32 hex digits): their numbers after
    /// `after` (per device; 0 for all), at most 64 per device (`PULL_BATCH`).
    ///
    /// # Errors
    /// As [`SyncService::pull_token`].
    pub fn folder_segments(&self, after: &BTreeMap<String, u64>) -> Result<BTreeMap<String, Vec<u64>>> {
        let (_, folder, me) = self.group()?;
        let mut out = BTreeMap::new();
        for device in devices(&folder, me, true) {
            let name = device.to_hex();
            let from = after.get(&name).copied().unwrap_or(0);
            let ns: Vec<u64> = numbers(&folder, device).into_iter().filter(|n| *n > from).take(PULL_BATCH).collect();
            if !ns.is_empty() {
                out.insert(name, ns);
            }
        }
        Ok(out)
    }

    /// The bytes of segment `n` of `device` (32 hex digits) in this device's folder.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] for a device that is not 32 hex digits or segment number 0;
    /// [`ErrorKind::NotFound`] when the folder holds no such whole file; as [`SyncService::pull_token`].
    pub fn folder_segment(&self, device: &str, n: u64) -> Result<Vec<u8>> {
        let (_, folder, _) = self.group()?;
        let d = DeviceId::parse(device).filter(|_| n > 0).ok_or_else(|| {
            Error::new(ErrorKind::InvalidInput, "a segment is named by a device id (32 hex digits) and a number from 1")
        })?;
        read_held(&segment::device_dir(&folder, d).join(segment::file_name(n)), || {
            format!("no segment {n} of device {device}")
        })
    }

    /// Stores segment `n` of `device`, pulled from another daemon, in this device's folder, where the next
    /// [`SyncService::sync_folder`] applies it. Returns false when the folder holds it already. The file must
    /// open whole under the group key: anything else is refused and nothing is written.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] for a bad device id or number, this device's own id, or bytes that are not a
    /// whole segment of this group; [`ErrorKind::Io`]; as [`SyncService::pull_token`].
    pub fn receive_segment(&self, device: &str, n: u64, bytes: &[u8]) -> Result<bool> {
        let (_, folder, me) = self.group()?;
        let d = DeviceId::parse(device).filter(|d| *d != me && n > 0).ok_or_else(|| {
            Error::new(ErrorKind::InvalidInput, format!("not another device's segment: {device}/{n}"))
        })?;
        let dir = segment::device_dir(&folder, d);
        let name = segment::file_name(n);
        if dir.join(&name).exists() {
            return Ok(false);
        }
        let mut ring = self.keyring()?;
        if !matches!(segment::open(&ring, d, n, bytes), Read::Whole(..)) {
            // A key rotation this pull has just brought (its files come first): adopted, then the segment again.
            ring = self.load_group()?.ring;
        }
        match segment::open(&ring, d, n, bytes) {
            Read::Whole(..) => {}
            // Sealed under a key this device has not learned yet (a rotation it has not read): the folder pass
            // authenticates it once it has.
            Read::Refused(_) if segment::epoch_of(bytes).is_some_and(|e| ring.get(e).is_none()) => {}
            Read::Partial => {
                return Err(Error::new(ErrorKind::InvalidInput, format!("segment {device}/{n} is cut short")));
            }
            Read::Refused(why) => {
                return Err(Error::new(ErrorKind::InvalidInput, format!("segment {device}/{n}: {why}")));
            }
        }
        std::fs::create_dir_all(&dir).map_err(|e| io(format!("making {}", dir.display()), e))?;
        write_atomically(&dir, &name, bytes)?;
        Ok(true)
    }

    /// The last segment number of each other device whose files this device's folder holds (what a pull asks
    /// for the segments after).
    ///
    /// # Errors
    /// As [`SyncService::pull_token`].
    pub fn folder_heads(&self) -> Result<BTreeMap<String, u64>> {
        let (_, folder, me) = self.group()?;
        Ok(devices(&folder, me, true)
            .into_iter()
            .filter_map(|d| numbers(&folder, d).last().map(|last| (d.to_hex(), *last)))
            .collect())
    }

    /// The other files of each device directory in this device's folder (heads, key rotations, snapshot
    /// parts), by device id and name: a head's SHA-256 (it is rewritten as its device reads on), "" for the
    /// others (written once).
    ///
    /// # Errors
    /// As [`SyncService::pull_token`].
    pub fn folder_files(&self) -> Result<BTreeMap<String, BTreeMap<String, String>>> {
        let (_, folder, me) = self.group()?;
        let mut out = BTreeMap::new();
        for d in devices(&folder, me, true) {
            let device = d.to_hex();
            let Ok(files) = std::fs::read_dir(segment::device_dir(&folder, d)) else { continue };
            let mut names = BTreeMap::new();
            for f in files.filter_map(|f| f.ok()) {
                let name = f.file_name().to_string_lossy().to_string();
                if !carried(&name) {
                    continue;
                }
                let digest = if name == HEAD_NAME {
                    std::fs::read(f.path()).map(|b| hex(&sha2::Sha256::digest(b))).unwrap_or_default()
                } else {
                    String::new()
                };
                names.insert(name, digest);
            }
            if !names.is_empty() {
                out.insert(device, names);
            }
        }
        Ok(out)
    }

    /// The bytes of file `name` of `device`'s directory in this device's folder (one [`Self::folder_files`]
    /// lists).
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] for a bad device id or a name the transport does not carry;
    /// [`ErrorKind::NotFound`]; as [`SyncService::pull_token`].
    pub fn folder_file(&self, device: &str, name: &str) -> Result<Vec<u8>> {
        let (_, folder, _) = self.group()?;
        let d = DeviceId::parse(device).filter(|_| carried(name)).ok_or_else(|| {
            Error::new(ErrorKind::InvalidInput, "a file is named by a device id (32 hex digits) and a file it carries")
        })?;
        let path = segment::device_dir(&folder, d).join(name);
        std::fs::read(&path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => {
                Error::new(ErrorKind::NotFound, format!("no file {name} of device {device}"))
            }
            _ => io(format!("reading {}", path.display()), e),
        })
    }

    /// Stores file `name` of `device`, pulled from another daemon, in this device's folder (replacing a head);
    /// returns false when the folder holds these bytes already. A snapshot part or head must be a whole sealed
    /// file of that device (the folder pass authenticates it), a key file an age file.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] for a bad device id, this device's own id, a name the transport does not
    /// carry, or bytes that are not such a file; [`ErrorKind::Io`]; as [`SyncService::pull_token`].
    pub fn receive_file(&self, device: &str, name: &str, bytes: &[u8]) -> Result<bool> {
        let (_, folder, me) = self.group()?;
        let d = DeviceId::parse(device).filter(|d| *d != me && carried(name)).ok_or_else(|| {
            Error::new(ErrorKind::InvalidInput, format!("not another device's file: {device}/{name}"))
        })?;
        let ok = if name.ends_with(".key") {
            bytes.starts_with(b"age-encryption.org/v1") && bytes.len() < 1 << 20
        } else {
            segment::epoch_of(bytes).is_some() && (bytes.len() as u64) <= segment::MAX_BODY + segment::HEADER_LEN as u64
        };
        if !ok {
            return Err(Error::new(ErrorKind::InvalidInput, format!("{device}/{name} is not a whole sync file")));
        }
        let dir = segment::device_dir(&folder, d);
        if std::fs::read(dir.join(name)).is_ok_and(|held| held == bytes) {
            return Ok(false);
        }
        std::fs::create_dir_all(&dir).map_err(|e| io(format!("making {}", dir.display()), e))?;
        write_atomically(&dir, name, bytes)?;
        // A snapshot part: the device compacted its segments up to it, once every device (this one too) had
        // read them, so this folder's copies of those segments and of its older snapshot go as they went there.
        if let Some(s) =
            name.split_once('.').and_then(|(n, _)| n.parse::<u64>().ok()).filter(|_| name.ends_with(".snap"))
        {
            for n in numbers(&folder, d).into_iter().take_while(|n| *n <= s) {
                let _ = std::fs::remove_file(dir.join(segment::file_name(n)));
            }
            for (n, part) in super::compact::snapshots(&folder, d).into_iter().filter(|(n, _)| *n < s) {
                let _ = std::fs::remove_file(dir.join(segment::snapshot_name(n, part)));
            }
        }
        Ok(true)
    }
}
