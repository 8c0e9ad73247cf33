//! Sync between one person's devices (docs/sync.md): joining a sync group, reading this device's change log,
//! and applying other devices' changes under the merge rules ([`apply`]).
//!
//! Built so far: the change log, the merge of changes handed to [`SyncService::apply`] in any order, and sync
//! through a shared folder of sealed segment files (`folder`: [`SyncService::init_folder`],
//! [`SyncService::join_folder`], [`SyncService::sync_folder`]). The HTTP transport and the daemon's worker
//! follow (docs/sync.md says which parts exist).

mod apply;
mod compact;
mod direct;
mod folder;
mod group;

use serde::Serialize;

pub use compact::COMPACT_AFTER;
pub use folder::{FolderReport, Peer};
pub use group::RemoveReport;

use crate::error::Result;
use crate::model::{Change, Timestamp};
use crate::store::KnowledgeStore;
use crate::store::core::changes;
use crate::store::records::{meta, sync};

/// Sync of a store, borrowed from the store (`store.sync()`).
///
/// Owns: the store's membership of a sync group, its change log (the `sync_log` kind) and the merge state of
/// every replicated item (`sync_items`).
#[derive(Clone, Copy)]
pub struct SyncService<'s> {
    pub(crate) store: &'s KnowledgeStore,
}

/// What [`SyncService::apply`] did with a batch of changes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct ApplyReport {
    /// Changes that changed this store's state (a value, a label assignment, or a kept concurrent edit).
    pub applied: u64,
    /// Changes already known (a duplicate delivery) or older than what the item holds: nothing to do.
    pub stale: u64,
    /// Concurrent edits of one memory resolved by last-writer-wins; the loser is kept in the item's history.
    pub conflicts: u64,
    /// Changes refused, with the reason (a clock too far in the future); the store is unchanged by them.
    pub refused: Vec<String>,
}

/// A folder pass's progress through the other devices' segments (a first sync applies many).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct SyncProgress {
    /// A pass is applying segments now.
    pub running: bool,
    /// Segments the running (or last) pass applied.
    pub segments_done: u64,
    /// Segments the running (or last) pass found to apply when it started.
    pub segments_total: u64,
}

/// Where a store stands in its sync group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct SyncStatus {
    /// Whether the store belongs to a sync group.
    pub enabled: bool,
    /// This device's id (32 hex digits).
    pub device_id: String,
    /// The last sequence number of this device's change log (0: nothing logged).
    pub last_seq: u64,
    /// The device's last hybrid logical clock timestamp, `<ms>.<counter>`.
    pub clock: String,
    /// The folder the group syncs through, if any.
    pub folder: Option<String>,
    /// Changes of this device not yet written to a segment.
    pub pending_changes: u64,
    /// The other devices seen in the folder: last seen, cursor, changes applied, conflicts resolved, the last
    /// error.
    pub peers: Vec<Peer>,
    /// The folder pass's progress.
    pub progress: SyncProgress,
    /// The epoch of the group key this device seals with (0 until a device is removed; each removal rotates it).
    pub key_epoch: u32,
    /// Devices removed from the group, with the last of their segments still accepted.
    pub removed: std::collections::BTreeMap<String, u64>,
    /// The number of this device's last snapshot (0: none): its segments up to it were compacted.
    pub snapshot: u64,
    /// Why this device cannot sync in its group any more (it was removed from it), if so.
    pub error: Option<String>,
}

impl SyncService<'_> {
    /// Makes the store a member of a sync group: from now on every write logs its replicated changes, and every
    /// item the store holds is stamped and logged once now (what another device needs to catch up). Returns
    /// how many changes were logged (0 when the store was already a member and nothing changed since).
    ///
    /// # Errors
    /// [`crate::ErrorKind::InvalidInput`] on a PostgreSQL store (several daemons share its one database
    /// already; sync is for the embedded redb store); storage errors.
    pub fn enable(&self) -> Result<u64> {
        let core = &self.store.core;
        let device = self.store.admin().device_id()?;
        let last = meta::meta(&core.db.read()?)?.json(changes::HLC_KEY)?.unwrap_or_default();
        changes::start(core, device, last)?;
        core.write(|txn, _| {
            meta::meta(txn)?.put_text(changes::ENABLED_KEY, &Timestamp::now().to_rfc3339())?;
            crate::store::records::thread::key_keyless(txn)?;
            let items = sync::all_items(txn)?;
            core.writes.sync.with(|clock| changes::log_items(txn, clock, items)).unwrap_or(Ok(0))
        })
    }

    /// The changes of this device's log after sequence number `after` (0: from the start), in order, at most
    /// `limit`: (sequence number, change).
    ///
    /// # Errors
    /// Storage errors; [`crate::ErrorKind::Corrupt`] when a logged change does not decode.
    pub fn changes(&self, after: u64, limit: usize) -> Result<Vec<(u64, Change)>> {
        sync::changes_after(&self.store.core.db.read()?, after, limit)
    }

    /// Changes this process has logged since the store opened: an in-memory counter (no transaction), which a
    /// sync worker compares between passes to learn of new local changes at no cost.
    pub fn logged_changes(&self) -> u64 {
        self.store.core.writes.sync.logged()
    }

    /// Changes of this device not yet written to a segment (two counters of the store read).
    ///
    /// # Errors
    /// Storage errors.
    pub fn pending_changes(&self) -> Result<u64> {
        let rtx = self.store.core.db.read()?;
        let m = meta::meta(&rtx)?;
        Ok(m.u64(changes::SEQ_KEY)?.unwrap_or(0).saturating_sub(m.u64(folder::EXPORTED_KEY)?.unwrap_or(0)))
    }

    /// The store's place in its sync group.
    ///
    /// # Errors
    /// Storage errors.
    pub fn status(&self) -> Result<SyncStatus> {
        let rtx = self.store.core.db.read()?;
        let m = meta::meta(&rtx)?;
        let clock: crate::model::Hlc = m.json(changes::HLC_KEY)?.unwrap_or_default();
        let last_seq = m.u64(changes::SEQ_KEY)?.unwrap_or(0);
        let exported = m.u64(folder::EXPORTED_KEY)?.unwrap_or(0);
        let peers: std::collections::BTreeMap<String, Peer> = m.json(folder::PEERS_KEY)?.unwrap_or_default();
        Ok(SyncStatus {
            enabled: self.store.core.writes.sync.on(),
            device_id: self.store.admin().device_id()?.to_hex(),
            last_seq,
            clock: clock.to_string(),
            folder: m.text(folder::FOLDER_KEY)?,
            pending_changes: last_seq.saturating_sub(exported),
            peers: peers.into_values().collect(),
            progress: self.progress(),
            key_epoch: u32::try_from(m.u64(group::EPOCH_KEY)?.unwrap_or(0)).unwrap_or(u32::MAX),
            removed: m.json(group::REMOVED_KEY)?.unwrap_or_default(),
            snapshot: m.u64(compact::SNAPSHOT_KEY)?.unwrap_or(0),
            error: m.text(group::GROUP_ERROR_KEY)?,
        })
    }

    /// The folder pass's progress: how many of the other devices' segments it found to apply and has applied
    /// (an in-memory reading, no transaction; what a progress bar polls).
    pub fn progress(&self) -> SyncProgress {
        use std::sync::atomic::Ordering;
        let p = self.store.core.writes.sync.progress();
        SyncProgress {
            running: p.running.load(Ordering::Acquire),
            segments_done: p.done.load(Ordering::Acquire),
            segments_total: p.total.load(Ordering::Acquire),
        }
    }

    /// The canonical form of every replicated item this store holds, in item order: its key (`kind/space/id`)
    /// and a JSON object with its replicated fields (`value`), a memory's label ids (`labels`), the concurrent
    /// edits it keeps (`conflicts`: stamp and value, newest first) and a message's place in its thread
    /// (`position`, from 0). Two devices that applied the same changes
    /// give equal lists; derived data (counts, entities, ranks, indexes) is left out.
    ///
    /// # Errors
    /// Storage errors; [`crate::ErrorKind::Corrupt`].
    pub fn replicated_state(&self) -> Result<Vec<(String, serde_json::Value)>> {
        let rtx = self.store.core.db.read()?;
        let mut out = Vec::new();
        let mut items = sync::all_items(&rtx)?;
        items.sort();
        for item in items {
            let Some((value, labels)) = sync::current(&rtx, &item)? else { continue };
            let clock = sync::clock(&rtx, &item)?;
            let value: serde_json::Value = sync::value_of(&value)?;
            let conflicts: Vec<serde_json::Value> = clock
                .losers
                .iter()
                .map(|l| {
                    let v = l.value.as_deref().map(sync::value_of::<serde_json::Value>).transpose()?;
                    Ok(serde_json::json!({"stamp": format!("{}@{}", l.stamp.hlc, l.stamp.device), "value": v}))
                })
                .collect::<Result<_>>()?;
            let (kind, space, id) = item.key();
            let mut state = serde_json::json!({"value": value, "labels": labels, "conflicts": conflicts});
            if let Some((s, t, k)) = item.message_parts()
                && let Some(m) = crate::store::records::thread::message_with_key(&rtx, s, t, k)?
            {
                state["position"] = m.order_index.into();
            }
            out.push((format!("{kind}/{space}/{id}"), state));
        }
        Ok(out)
    }

    /// The concurrent edits of memory `id` that lost last-writer-wins and are kept with it: (stamp, the memory as
    /// that edit left it, or None for a concurrent delete), newest first. Empty when there were none.
    ///
    /// # Errors
    /// Storage errors; [`crate::ErrorKind::Corrupt`].
    pub fn conflicts(&self, id: &str) -> Result<Vec<(crate::model::Stamp, Option<crate::model::Memory>)>> {
        let clock = sync::clock(&self.store.core.db.read()?, &crate::model::Item::Memory(id.to_string()))?;
        clock.losers.iter().map(|l| Ok((l.stamp, l.value.as_deref().map(sync::value_of).transpose()?))).collect()
    }

    /// Applies other devices' `changes` in one write transaction, under the merge rules of docs/sync.md:
    /// last-writer-wins on the stamp for every item, a memory's concurrent edits kept as heads of its history
    /// (the loser stays with the memory), add-wins label assignments, tombstones for deletes. Any order, any
    /// duplicates: devices that applied the same set of changes hold the same replicated state. What this
    /// device applies is not logged again: each device's log holds its own changes (a folder holds every
    /// device's log), and what an apply derives here (a label record it had to create) is logged as this
    /// device's own change.
    ///
    /// # Errors
    /// [`crate::ErrorKind::InvalidInput`] when the store is in no sync group, or a change's value does not
    /// decode (nothing is applied then); storage errors (nothing is applied).
    pub fn apply(&self, changes: &[Change]) -> Result<ApplyReport> {
        apply::apply(self.store, changes)
    }
}
