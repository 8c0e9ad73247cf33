//! Compaction (docs/sync.md, "Compaction"): once every other device of the group has read this device's
//! segments up to `n` (their head files say so), those segments are rewritten as one snapshot, in parts of at
//! most [`super::folder::SEGMENT_CHANGES`] changes (`<n>.<part>.snap`), and deleted. Only a device that joins
//! later reads the snapshot; the others have read past it.
//!
//! What a snapshot keeps of the changes is [`crate::sync::compact`]'s rule.
//!
//! Crash safety: the snapshot is written whole (every part renamed into place) and recorded before any segment
//! is deleted; a crash in between leaves segments the next pass deletes.

use std::path::Path;

use super::SyncService;
use super::folder::{SEGMENT_CHANGES, SEGMENT_KEY, write_atomically};
use super::group::Group;
use crate::error::{Error, ErrorKind, Result};
use crate::model::{Change, DeviceId};
use crate::store::core::write::Commit;
use crate::store::records::meta;
use crate::sync::compact::Plan;
use crate::sync::segment::{self, Kind, Read, SegmentBody};

/// `META` key: the number of this device's last snapshot (its segments up to it are compacted).
pub(crate) const SNAPSHOT_KEY: &str = "sync_snapshot";

/// Segments every other device has read past that make a new snapshot worth writing.
pub const COMPACT_AFTER: u64 = 8;

/// The snapshot parts of `device`'s directory in `folder`: (number, part), in order.
pub(super) fn snapshots(folder: &Path, device: DeviceId) -> Vec<(u64, u64)> {
    let Ok(entries) = std::fs::read_dir(segment::device_dir(folder, device)) else { return Vec::new() };
    let mut out: Vec<(u64, u64)> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_str()?.strip_suffix(".snap")?.to_string();
            let (n, part) = name.split_once('.')?;
            Some((n.parse().ok()?, part.parse().ok()?))
        })
        .collect();
    out.sort_unstable();
    out
}

/// The newest snapshot of `device` after `cursor`, with how many of its parts the folder holds.
pub(super) fn snapshot_after(folder: &Path, device: DeviceId, cursor: u64) -> Option<(u64, u64)> {
    let all = snapshots(folder, device);
    let s = all.last().map(|(n, _)| *n).filter(|n| *n > cursor)?;
    Some((s, all.iter().filter(|(n, _)| *n == s).count() as u64))
}

impl SyncService<'_> {
    /// Compacts this device's segments that every other device of `g` has read into a snapshot, once there are
    /// at least [`COMPACT_AFTER`] of them beyond the last snapshot (module docs). Returns the number of this
    /// device's snapshot (0: none). A segment of its own that does not open stops the compaction (logged): the
    /// segments stay, sync goes on.
    ///
    /// # Errors
    /// Storage errors; [`ErrorKind::Io`] when the snapshot cannot be written.
    pub(super) fn compact(&self, g: &Group) -> Result<u64> {
        let rtx = self.store.core.db.read()?;
        let m = meta::meta(&rtx)?;
        let (last, written) = (m.u64(SNAPSHOT_KEY)?.unwrap_or(0), m.u64(SEGMENT_KEY)?.unwrap_or(0));
        drop(rtx);
        let dir = segment::device_dir(&g.folder, g.me);
        collect_garbage(&g.folder, g.me, last);
        if written < last + COMPACT_AFTER {
            return Ok(last); // too few segments yet: no head is read
        }
        let heads = self.read_heads(g);
        let me = g.me.to_hex();
        // Every device with a head that is not removed must have read up to the snapshot. A device without one
        // (it joined and has not synced yet) starts from the snapshot like any device that joins later; a
        // directory of another group has no head that opens here, and holds nothing back.
        let upto = heads
            .iter()
            .filter(|(d, _)| !g.removed.contains_key(d))
            .map(|(_, h)| h.cursors.get(&me).copied().unwrap_or(0))
            .min()
            .unwrap_or(written)
            .min(written);
        if upto < last + COMPACT_AFTER {
            return Ok(last);
        }
        let mut plan = Plan::default();
        if let Err(e) = self.each_change(g, last, upto, &mut |c| {
            plan.note(&c);
            Ok(())
        }) {
            tracing::warn!(error = %e.chain(), "sync: compaction skipped");
            return Ok(last);
        }
        let keep = plan.finish();
        let parts = (keep.len() as u64).div_ceil(SEGMENT_CHANGES as u64).max(1);
        let (epoch, key) = g.current()?;
        let mut part = 0u64;
        let mut buf: Vec<Change> = Vec::new();
        let flush = |buf: &mut Vec<Change>, part: &mut u64| -> Result<()> {
            *part += 1;
            let part = *part;
            let body = SegmentBody { first: part, last: parts, changes: std::mem::take(buf) };
            let bytes = segment::seal_body(key, epoch, Kind::Snapshot, g.me, upto, &body)
                .map_err(|e| Error::new(ErrorKind::Internal, e))?;
            write_atomically(&dir, &segment::snapshot_name(upto, part), &bytes)
        };
        self.each_change(g, last, upto, &mut |c| {
            if let Some(c) = keep.rewrite(c) {
                buf.push(c);
                if buf.len() == SEGMENT_CHANGES {
                    flush(&mut buf, &mut part)?;
                }
            }
            Ok(())
        })?;
        if !buf.is_empty() || part < parts {
            flush(&mut buf, &mut part)?;
        }
        self.store.core.writes.write(Commit::BOOKKEEPING, |txn, _| meta::meta(txn)?.put_u64(SNAPSHOT_KEY, upto))?;
        collect_garbage(&g.folder, g.me, upto);
        tracing::info!(snapshot = upto, changes = keep.len(), parts, "sync: segments compacted");
        Ok(upto)
    }

    /// Calls `f` with every change of this device's snapshot `last` (0: none) and its segments after it up to
    /// `upto`, in order.
    fn each_change(&self, g: &Group, last: u64, upto: u64, f: &mut dyn FnMut(Change) -> Result<()>) -> Result<()> {
        let dir = segment::device_dir(&g.folder, g.me);
        let bad = |what: String| Error::new(ErrorKind::Corrupt, what);
        let mut files: Vec<(std::path::PathBuf, Kind, u64)> = snapshots(&g.folder, g.me)
            .into_iter()
            .filter(|(n, _)| *n == last && last > 0)
            .map(|(n, p)| (dir.join(segment::snapshot_name(n, p)), Kind::Snapshot, n))
            .collect();
        files.extend((last + 1..=upto).map(|n| (dir.join(segment::file_name(n)), Kind::Segment, n)));
        for (path, kind, n) in files {
            let bytes = std::fs::read(&path).map_err(|e| bad(format!("reading {}: {e}", path.display())))?;
            match segment::open_body(&g.ring, kind, g.me, n, &bytes) {
                Read::Whole(body, _) => body.changes.into_iter().try_for_each(&mut *f)?,
                Read::Partial => return Err(bad(format!("{} is cut short", path.display()))),
                Read::Refused(why) => return Err(bad(format!("{}: {why}", path.display()))),
            }
        }
        Ok(())
    }
}

/// Deletes `device`'s segments up to `snapshot` and its older snapshots in `folder` (what a snapshot replaced):
/// this device's own after it compacted, or a copy the direct transport pulled.
pub(super) fn collect_garbage(folder: &Path, device: DeviceId, snapshot: u64) {
    if snapshot == 0 {
        return;
    }
    let dir = segment::device_dir(folder, device);
    for n in super::direct::numbers(folder, device).into_iter().take_while(|n| *n <= snapshot) {
        let _ = std::fs::remove_file(dir.join(segment::file_name(n)));
    }
    for (n, part) in snapshots(folder, device).into_iter().filter(|(n, _)| *n < snapshot) {
        let _ = std::fs::remove_file(dir.join(segment::snapshot_name(n, part)));
    }
}
