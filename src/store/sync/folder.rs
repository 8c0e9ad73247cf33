//! Sync through a shared folder (docs/sync.md, "Segments and the folder"): this device writes its log as sealed
//! segment files in `<folder>/<device id>/` and applies the other devices' segments after its cursor for each.
//!
//! Crash safety: a segment is written to a hidden temporary name, synced, renamed into place and the directory
//! synced; only then does the store record it as written (and drop the log rows it holds). A crash in between
//! leaves a whole segment the store does not know it wrote: the next run reads it back and records it, so a
//! segment number is never given to two different runs of changes. Another device's segment is applied in one
//! transaction with the cursor that names it: a crash applies both or neither.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use serde::{Deserialize, Serialize};

use super::group::Group;
use super::{ApplyReport, SyncService};
use crate::error::{Error, ErrorKind, Result};
use crate::model::{DeviceId, Timestamp};
use crate::store::core::write::Commit;
use crate::store::records::{meta, sync};
use crate::sync::segment::{self, GroupKey, Kind, Read, SegmentBody};

/// `META` key: the group key (64 hex digits; as safe as the store: encrypted at rest with it).
pub(crate) const KEY_KEY: &str = "sync_key";
/// `META` key: the folder.
pub(crate) const FOLDER_KEY: &str = "sync_folder";
/// `META` key: the last log sequence number written to a segment.
pub(crate) const EXPORTED_KEY: &str = "sync_exported";
/// `META` key: the last segment number written.
pub(crate) const SEGMENT_KEY: &str = "sync_segment";
/// `META` key: what this device knows of each other device ([`Peer`], JSON by device id).
pub(crate) const PEERS_KEY: &str = "sync_peers";

/// Most changes in one segment.
pub const SEGMENT_CHANGES: usize = 10_000;

/// The prefix of a pairing code of the group's first key; the rest is the key.
const CODE_PREFIX: &str = "engram-sync-1-";
/// The prefix of a pairing code of a later key (after a device was removed): `<epoch>-<key>` follows.
const CODE_PREFIX_EPOCH: &str = "engram-sync-2-";

/// What this device knows of another device of its group.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Peer {
    /// The device's id (32 hex digits).
    pub device_id: String,
    /// The last of its segments applied here (0: none).
    pub cursor: u64,
    /// When one of its segments was last applied here (RFC 3339), if ever.
    pub last_seen: Option<String>,
    /// Changes of its segments applied here, in all.
    pub applied: u64,
    /// Its concurrent edits resolved here, in all.
    pub conflicts: u64,
    /// Its next segment is in the folder but not whole yet (the folder tool is still copying it).
    pub pending: bool,
    /// Why its next segment was refused (damaged, another key, a clock far ahead), if it was; the store is
    /// unchanged by it, and it is read again at the next sync.
    pub error: Option<String>,
}

/// What one [`SyncService::sync_folder`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct FolderReport {
    /// Segments this device wrote.
    pub written_segments: u64,
    /// Changes in them.
    pub written_changes: u64,
    /// Other devices' segments applied.
    pub applied_segments: u64,
    /// What applying them did.
    pub applied: ApplyReport,
    /// Every other device seen in the folder.
    pub peers: Vec<Peer>,
    /// Why this device cannot sync in its group any more (it was removed from it), if so: nothing was done.
    pub error: Option<String>,
}

fn invalid(msg: impl Into<String>) -> Error {
    Error::new(ErrorKind::InvalidInput, msg.into())
}

pub(super) fn io(what: String, e: std::io::Error) -> Error {
    Error::new(ErrorKind::Io, what).with_source(e)
}

/// The pairing code of `key`, the group key of epoch `epoch`: what a person carries to another device to join
/// it (it is the group key: keep it as secret as a password). `engram-sync-1-<64 hex digits>` for the group's
/// first key, `engram-sync-2-<epoch>-<64 hex digits>` for a key a removal rotated in.
pub fn pairing_code(epoch: u32, key: &GroupKey) -> String {
    match epoch {
        0 => format!("{CODE_PREFIX}{}", key.to_hex()),
        e => format!("{CODE_PREFIX_EPOCH}{e}-{}", key.to_hex()),
    }
}

/// The key of a pairing code, and its epoch.
///
/// # Errors
/// [`ErrorKind::InvalidInput`] when it is not a code [`pairing_code`] wrote.
pub fn parse_code(code: &str) -> Result<(u32, GroupKey)> {
    let code = code.trim();
    let parsed = match code.strip_prefix(CODE_PREFIX) {
        Some(hex) => GroupKey::from_hex(hex).map(|k| (0, k)),
        None => code
            .strip_prefix(CODE_PREFIX_EPOCH)
            .and_then(|rest| rest.split_once('-'))
            .and_then(|(e, hex)| Some((e.parse().ok()?, GroupKey::from_hex(hex)?))),
    };
    parsed.ok_or_else(|| invalid(format!("not a pairing code (expected {CODE_PREFIX}<64 hex digits>)")))
}

impl SyncService<'_> {
    /// Starts a sync group through `folder`: a new group key, this store enabled ([`SyncService::enable`]) and
    /// its directory made in the folder. Returns the pairing code other devices join with.
    ///
    /// # Errors
    /// [`ErrorKind::Conflict`] when the store is in a group already; [`ErrorKind::Io`] when the folder cannot
    /// be written; as [`SyncService::enable`].
    pub fn init_folder(&self, folder: &Path) -> Result<String> {
        let key = GroupKey::random();
        self.join_with(folder, 0, &key)?;
        Ok(pairing_code(0, &key))
    }

    /// Joins the sync group of `code` through `folder` (the same folder, as this device sees it). The next
    /// [`SyncService::sync_folder`] sends what this store holds and takes what the others wrote.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] for a malformed code; [`ErrorKind::Conflict`] when the store is in another
    /// group already, or when the folder holds this device's id from another store (a copied store file must
    /// not pass for the device it was copied from); [`ErrorKind::Io`]; as [`SyncService::enable`].
    pub fn join_folder(&self, folder: &Path, code: &str) -> Result<()> {
        let (epoch, key) = parse_code(code)?;
        let me = self.store.admin().device_id()?;
        let seq = meta::meta(&self.store.core.db.read()?)?.u64(SEGMENT_KEY)?.unwrap_or(0);
        let written =
            !super::direct::numbers(folder, me).is_empty() || !super::compact::snapshots(folder, me).is_empty();
        if seq == 0 && written {
            return Err(Error::new(
                ErrorKind::Conflict,
                "the folder already holds segments of this device id: this store is a copy of a device in the \
                 group; join from a new store",
            ));
        }
        self.join_with(folder, epoch, &key)
    }

    fn join_with(&self, folder: &Path, epoch: u32, key: &GroupKey) -> Result<()> {
        let rtx = self.store.core.db.read()?;
        let m = meta::meta(&rtx)?;
        if let Some(old) = m.text(KEY_KEY)?
            && old != key.to_hex()
        {
            return Err(Error::new(ErrorKind::Conflict, "this store is in another sync group already"));
        }
        drop(rtx);
        let folder = std::path::absolute(folder).map_err(|e| io(format!("the folder {}", folder.display()), e))?;
        let dir = segment::device_dir(&folder, self.store.admin().device_id()?);
        std::fs::create_dir_all(&dir).map_err(|e| io(format!("making {}", dir.display()), e))?;
        self.enable()?;
        // A code given after a key rotation is the key of a later epoch: its rotation record (read at the
        // first pass) names the earlier keys, which open the older segments.
        let ring = segment::Keyring::new(epoch, key.clone());
        self.store
            .core
            .writes
            .write(Commit::BOOKKEEPING, |txn, _| meta::meta(txn)?.put_text(FOLDER_KEY, &folder.to_string_lossy()))?;
        self.save_ring(&ring)
    }

    /// The folder of this store's sync group, if it has one.
    ///
    /// # Errors
    /// Storage errors.
    pub fn folder(&self) -> Result<Option<PathBuf>> {
        Ok(meta::meta(&self.store.core.db.read()?)?.text(FOLDER_KEY)?.map(PathBuf::from))
    }

    /// One sync through the folder: writes this device's new changes as segments, then applies every other
    /// device's segments after its cursor, in number order. A segment still being copied stops that device
    /// until the next sync; a refused one (damaged, another key, a clock more than an hour ahead) is reported
    /// in its [`Peer::error`], changes nothing, and is read again next time.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] when the store is in no group with a folder; [`ErrorKind::Io`] when the
    /// folder is not there (it is never made here: an unmounted drive must not turn into a local folder) or
    /// cannot be read or written; storage errors.
    pub fn sync_folder(&self) -> Result<FolderReport> {
        let (_, folder, _) = self.group()?;
        // A folder that is not there (an unmounted drive, a share that is down) is an error, not a new empty
        // folder on the local disk that would hide the real one when it comes back.
        if !folder.is_dir() {
            return Err(Error::new(
                ErrorKind::Io,
                format!("the sync folder {} is not there (not mounted?); nothing was synced", folder.display()),
            ));
        }
        let mut report = FolderReport::default();
        let g = self.load_group()?;
        if let Some(e) = &g.error {
            // Removed from the group: nothing this device writes is accepted any more.
            report.error = Some(e.clone());
            return Ok(report);
        }
        self.write_segments(&g, &mut report)?;
        self.read_segments(&g, &mut report)?;
        let snapshot = self.compact(&g)?;
        self.write_head(&g, snapshot)?;
        Ok(report)
    }

    pub(super) fn group(&self) -> Result<(GroupKey, PathBuf, DeviceId)> {
        let rtx = self.store.core.db.read()?;
        let m = meta::meta(&rtx)?;
        let key = m.text(KEY_KEY)?.and_then(|k| GroupKey::from_hex(&k));
        let folder = m.text(FOLDER_KEY)?.map(PathBuf::from);
        match (key, folder) {
            (Some(k), Some(f)) if self.store.core.writes.sync.on() => Ok((k, f, self.store.admin().device_id()?)),
            _ => Err(invalid("this store is in no sync group with a folder (`engram sync init --folder DIR`)")),
        }
    }

    fn write_segments(&self, g: &Group, report: &mut FolderReport) -> Result<()> {
        let (me, (epoch, key)) = (g.me, g.current()?);
        let dir = segment::device_dir(&g.folder, me);
        std::fs::create_dir_all(&dir).map_err(|e| io(format!("making {}", dir.display()), e))?;
        loop {
            let rtx = self.store.core.db.read()?;
            let m = meta::meta(&rtx)?;
            let (exported, n) = (m.u64(EXPORTED_KEY)?.unwrap_or(0), m.u64(SEGMENT_KEY)?.unwrap_or(0) + 1);
            let path = dir.join(segment::file_name(n));
            // A segment a crash left unrecorded: recorded now, never overwritten.
            if let Ok(bytes) = std::fs::read(&path)
                && let Read::Whole(body, _) = segment::open(&g.ring, me, n, &bytes)
            {
                drop(rtx);
                self.record_written(n, body.last)?;
                continue;
            }
            let changes = sync::changes_after(&rtx, exported, SEGMENT_CHANGES)?;
            drop(rtx);
            let (Some(first), Some(last)) = (changes.first().map(|c| c.0), changes.last().map(|c| c.0)) else {
                return Ok(());
            };
            let body = SegmentBody { first, last, changes: changes.into_iter().map(|(_, c)| c).collect() };
            let bytes = segment::seal(key, epoch, me, n, &body).map_err(|e| Error::new(ErrorKind::Internal, e))?;
            write_atomically(&dir, &segment::file_name(n), &bytes)?;
            self.record_written(n, last)?;
            report.written_segments += 1;
            report.written_changes += body.changes.len() as u64;
        }
    }

    /// Records segment `n` (log rows up to `last`) as written, and drops those rows from the log.
    fn record_written(&self, n: u64, last: u64) -> Result<()> {
        self.store.core.writes.write(Commit::BOOKKEEPING, |txn, _| {
            let mut m = meta::meta(txn)?;
            m.put_u64(SEGMENT_KEY, n)?;
            m.put_u64(EXPORTED_KEY, last)?;
            drop(m);
            sync::drop_log_through(txn, last)
        })
    }

    fn read_segments(&self, g: &Group, report: &mut FolderReport) -> Result<()> {
        let mut peers = self.peers()?;
        let devices = super::group::devices(&g.folder, g.me, false);
        // Progress: the segments (or snapshot parts) after each cursor, counted before the first is applied.
        let progress = self.store.core.writes.sync.progress();
        let total: u64 =
            devices.iter().map(|d| to_read(&g.folder, *d, peers.get(&d.to_hex()).map_or(0, |p| p.cursor))).sum();
        progress.done.store(0, Ordering::Release);
        progress.total.store(total, Ordering::Release);
        progress.running.store(total > 0, Ordering::Release);
        let _done = Finished(&progress.running);
        for device in devices {
            let hex = device.to_hex();
            let mut peer = peers.remove(&hex).unwrap_or_else(|| Peer { device_id: hex.clone(), ..Peer::default() });
            peer.pending = false;
            peer.error = None;
            let dir = segment::device_dir(&g.folder, device);
            loop {
                let n = peer.cursor + 1;
                let path = dir.join(segment::file_name(n));
                // A segment compacted away: the snapshot that holds it (a device that joins after compaction).
                let (n, kind, parts) = match std::fs::metadata(&path) {
                    Ok(_) => (n, Kind::Segment, 1),
                    Err(_) => match super::compact::snapshot_after(&g.folder, device, peer.cursor) {
                        Some((s, parts)) => (s, Kind::Snapshot, parts),
                        None => break,
                    },
                };
                let mut part = 1;
                let mut total = parts;
                let mut step = peer.clone();
                let failed = loop {
                    if part > total {
                        break None;
                    }
                    let file =
                        if kind == Kind::Segment { path.clone() } else { dir.join(segment::snapshot_name(n, part)) };
                    let Ok(bytes) = std::fs::read(&file) else { break Some(None) };
                    let body = match segment::open_body(&g.ring, kind, device, n, &bytes) {
                        Read::Whole(body, epoch) => match g.refuses(device, n, epoch) {
                            None => body,
                            Some(why) => break Some(Some(why)),
                        },
                        Read::Partial => break Some(None),
                        Read::Refused(why) => break Some(Some(why)),
                    };
                    if kind == Kind::Snapshot {
                        if body.first != part || body.last < part {
                            break Some(Some(format!(
                                "snapshot part {part} names part {} of {}",
                                body.first, body.last
                            )));
                        }
                        total = body.last;
                    }
                    if let Some(why) = clock_ahead(&body) {
                        break Some(Some(why));
                    }
                    // The cursor moves in the transaction that applies the segment (a snapshot's last part).
                    let cursor = (part == total).then_some(n);
                    match self.apply_step(&peers, &step, cursor, &body.changes)? {
                        Ok((next, applied)) => {
                            step = next;
                            report.applied_segments += 1;
                            progress.done.fetch_add(1, Ordering::AcqRel);
                            add(&mut report.applied, &applied);
                        }
                        Err(why) => break Some(Some(why)),
                    }
                    part += 1;
                };
                let what = if kind == Kind::Segment { format!("segment {n}") } else { format!("snapshot {n}") };
                match failed {
                    None => peer = step,
                    Some(None) => {
                        peer.pending = true;
                        break;
                    }
                    Some(Some(why)) => {
                        peer.error = Some(format!("{what}: {why}"));
                        break;
                    }
                }
            }
            peers.insert(hex, peer);
        }
        // Written only when something changed: an idle pass writes nothing.
        if peers != self.peers()? {
            let saved = peers.clone();
            self.store.core.writes.write(Commit::BOOKKEEPING, |txn, _| meta::meta(txn)?.put_json(PEERS_KEY, &saved))?;
        }
        report.peers = peers.into_values().collect();
        Ok(())
    }

    /// Applies `changes` of `peer`'s device in one transaction; with `cursor`, the peer's cursor moves to it in
    /// that transaction. Returns the peer as it then stands, or why the changes were refused (nothing applied).
    fn apply_step(
        &self,
        peers: &BTreeMap<String, Peer>,
        peer: &Peer,
        cursor: Option<u64>,
        changes: &[crate::model::Change],
    ) -> Result<std::result::Result<(Peer, ApplyReport), String>> {
        let mut next = peer.clone();
        if let Some(n) = cursor {
            next.cursor = n;
            next.last_seen = Some(Timestamp::now().to_rfc3339());
        }
        let mut saved = peers.clone();
        saved.insert(next.device_id.clone(), next.clone());
        let applied = match super::apply::apply_then(self.store, changes, |txn| match cursor {
            Some(_) => meta::meta(txn)?.put_json(PEERS_KEY, &saved),
            None => Ok(()),
        }) {
            Ok(r) => r,
            Err(e) if e.kind() == ErrorKind::InvalidInput => return Ok(Err(e.to_string())),
            Err(e) => return Err(e),
        };
        next.applied += applied.applied;
        next.conflicts += applied.conflicts;
        Ok(Ok((next, applied)))
    }

    /// What this device knows of the other devices of its group, by device id.
    ///
    /// # Errors
    /// Storage errors.
    pub fn peers(&self) -> Result<BTreeMap<String, Peer>> {
        Ok(meta::meta(&self.store.core.db.read()?)?.json(PEERS_KEY)?.unwrap_or_default())
    }
}

/// The files a pass applies of `device` after `cursor`: its segments, or the parts of the snapshot that holds
/// the next one when it was compacted away.
fn to_read(folder: &Path, device: DeviceId, cursor: u64) -> u64 {
    let segments = super::direct::numbers(folder, device).into_iter().filter(|n| *n > cursor).count() as u64;
    match super::compact::snapshot_after(folder, device, cursor) {
        Some((_, parts)) if !segment::device_dir(folder, device).join(segment::file_name(cursor + 1)).exists() => {
            segments + parts
        }
        _ => segments,
    }
}

/// Clears a pass's `running` flag however the pass ends.
struct Finished<'a>(&'a std::sync::atomic::AtomicBool);

impl Drop for Finished<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// Why a segment is held back for its clock: a change stamped more than [`crate::sync::MAX_DRIFT_MS`] ahead of
/// this device's wall clock (the whole segment waits, unapplied, and is read again at the next sync).
fn clock_ahead(body: &SegmentBody) -> Option<String> {
    let now_ms = u64::try_from(Timestamp::now().millis()).unwrap_or(0);
    let ahead = body.changes.iter().map(|c| c.stamp.hlc.ms).max()?.saturating_sub(now_ms);
    (ahead > crate::sync::MAX_DRIFT_MS).then(|| {
        format!(
            "its clock runs {} s ahead of this device's (more than the {} s allowed); read again later",
            ahead / 1000,
            crate::sync::MAX_DRIFT_MS / 1000
        )
    })
}

fn add(sum: &mut ApplyReport, r: &ApplyReport) {
    sum.applied += r.applied;
    sum.stale += r.stale;
    sum.conflicts += r.conflicts;
    sum.refused.extend(r.refused.iter().cloned());
}

/// Writes `bytes` as `dir/name`: to a hidden temporary file, synced, renamed into place, the directory synced.
/// A reader (or a folder tool) never sees a half-written file under the final name.
pub(super) fn write_atomically(dir: &Path, name: &str, bytes: &[u8]) -> Result<()> {
    let tmp = dir.join(format!(".{name}.tmp"));
    let path = dir.join(name);
    let fail = |e| io(format!("writing {}", path.display()), e);
    let mut f = std::fs::File::create(&tmp).map_err(fail)?;
    f.write_all(bytes).map_err(fail)?;
    f.sync_all().map_err(fail)?;
    drop(f);
    std::fs::rename(&tmp, &path).map_err(fail)?;
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}
