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
use crate::error::{Error, ErrorKind, Result};
use crate::model::DeviceId;
use crate::sync::segment::{self, Read};

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
        let mut h = sha2::Sha256::new();
        h.update(b"engram-sync-pull-token-v1\0");
        h.update(key.0);
        Ok(h.finalize().iter().map(|b| format!("{b:02x}")).collect())
    }

    /// The whole segment files in this device's folder, by device id (32 hex digits): their numbers after
    /// `after` (per device; 0 for all), at most 64 per device (`PULL_BATCH`).
    ///
    /// # Errors
    /// As [`SyncService::pull_token`].
    pub fn folder_segments(&self, after: &BTreeMap<String, u64>) -> Result<BTreeMap<String, Vec<u64>>> {
        let (_, folder, _) = self.group()?;
        let mut out = BTreeMap::new();
        let Ok(entries) = std::fs::read_dir(&folder) else { return Ok(out) };
        for e in entries.filter_map(|e| e.ok()) {
            let name = e.file_name().to_string_lossy().to_string();
            let Some(device) = DeviceId::parse(&name) else { continue };
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
        let path = segment::device_dir(&folder, d).join(segment::file_name(n));
        std::fs::read(&path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => {
                Error::new(ErrorKind::NotFound, format!("no segment {n} of device {device}"))
            }
            _ => io(format!("reading {}", path.display()), e),
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
        let (key, folder, me) = self.group()?;
        let d = DeviceId::parse(device).filter(|d| *d != me && n > 0).ok_or_else(|| {
            Error::new(ErrorKind::InvalidInput, format!("not another device's segment: {device}/{n}"))
        })?;
        let dir = segment::device_dir(&folder, d);
        let name = segment::file_name(n);
        if dir.join(&name).exists() {
            return Ok(false);
        }
        match segment::open(&key, d, n, bytes) {
            Read::Whole(_) => {}
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
        let (_, folder, _) = self.group()?;
        let mut out = BTreeMap::new();
        let Ok(entries) = std::fs::read_dir(&folder) else { return Ok(out) };
        for e in entries.filter_map(|e| e.ok()) {
            let name = e.file_name().to_string_lossy().to_string();
            if let Some(device) = DeviceId::parse(&name)
                && let Some(last) = numbers(&folder, device).last()
            {
                out.insert(name, *last);
            }
        }
        Ok(out)
    }
}
